"""What FIFO queues add to sending and receiving: sequence numbers, and retried receives.

Deduplication is decided where a message is sent (storage/sending.py); the order within a
message group is the queue model's (storage/model.py).
"""

from __future__ import annotations

from storage.model import Message, Queue

# FIFO sequence numbers: AWS's are "large, non-consecutive" 20-digit numbers (SendMessage API
# reference, whose example is 18849496460467696128). Ours are this base plus the send time in
# ms shifted left by 16 bits (65,536 numbers per millisecond before the next one's range), and
# never below the queue's next number, so that they only increase. They stay below 2^64, which
# the codec needs, until the year 6000.
SEQUENCE_BASE = 10**19


def next_sequence(q: Queue, now: int) -> int:
    """The sequence number of a message entering FIFO queue ``q`` now (see SEQUENCE_BASE)."""
    return max(q.next_sequence, SEQUENCE_BASE + (now << 16))


def retry_attempt(q: Queue, attempt_id: str, now: int) -> list[Message] | None:
    """A retried FIFO receive gets the same messages and handles while they are in flight."""
    entry = q.attempts.get(attempt_id)
    if entry is None or entry.expires_ms <= now:
        return None
    msgs = []
    for mid, receipt in entry.receipts:
        msg = q.messages.get(mid)
        if msg is None or msg.receipt != receipt or msg.visible_ms <= now:
            return None
        msgs.append(msg)
    return msgs
