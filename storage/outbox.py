"""Moves between replication groups: the outbox of the source group, ``moves_in`` of the
destination group, and the internal commands that a group master's move driver issues.

A mixin of ``Storage`` (storage/engine.py). Within one group a move (a dead-letter move on
receive, a move task's step) is a ``MessageDeleted`` and a ``MessageAdded`` in one batch. When
the destination queue is held by another group (this storage does not hold it, its
``catalogue`` does), no command may change both storages, so the move goes in steps, each an
idempotent command on one group:

1. source: the message leaves its queue into the outbox (``MessageOutboxed``, PENDING). The
   receive that triggered it returns nothing for it, as within a group; a move task counts it
   moved now.
2. destination: ``AdoptMoved`` adds it to the queue (its FIFO sequence number and serial are
   decided there) and records the move id in ``moves_in`` (``MoveAdopted``). An id already
   there is answered accepted again and adds nothing: re-offers after a lost answer or a
   failover never duplicate. A destination that has no such queue, or one of the other type,
   refuses (``REFUSED_NO_QUEUE``, ``REFUSED_WRONG_TYPE``) and adds nothing.
3. source: ``AcceptOutbox`` (PENDING -> ACCEPTED), or on a refusal ``ReturnOutbox``: the
   message goes back to its source queue as it left (same id, serial and receive count,
   visible at once), and the move task that moved it, if any, fails.
4. destination: ``ForgetMove`` drops the ids from ``moves_in`` once the source will never
   offer them again (they are ACCEPTED there); then source: ``ClearOutbox`` drops the entries.

While in the outbox a message is in neither queue: either queue's ApproximateNumberOfMessages
misses it until the destination adopts it, about one round trip. A message returned to a FIFO
queue takes its place in its group again (its serial), but messages of the group sent after it
may have been received meanwhile. Which step runs when, and that each waits
for the previous one's commit under ``majority``, is the driver's (cluster/), which reads
``outbox_pending``, ``outbox_accepted`` and ``moves_in``.
"""

from __future__ import annotations

from typing import Callable

import msgspec

from storage.commands import (
    AcceptOutbox, AdoptMoved, ClearOutbox, ForgetMove, MovedMessage, MoveItem, ReturnOutbox,
)
from storage.model import Message, Queue, message
from storage.mutations import (
    MessageAdded, MessageOutboxed, MoveAdopted, MovesForgotten, OutboxAccepted, OutboxCleared, OutboxEntry,
    OutboxRestored, OutboxReturned,
)
from storage.redrive import SAME_TYPE, destination_missing
from storage.results import AdoptMovedResult, MoveRefusal

REFUSED_NO_QUEUE = "no such queue"
REFUSED_WRONG_TYPE = "wrong type"

# What a move task that lost a message to a refusal reports as its FailureReason, given the
# destination's ARN: the words of a failed step within one group and of StartMessageMoveTask's
# type check (storage/redrive.py). AWS's own FailureReason texts are not documented.
_TASK_FAILURES: dict[str, Callable[[str], str]] = {
    REFUSED_NO_QUEUE: destination_missing,
    REFUSED_WRONG_TYPE: lambda arn: SAME_TYPE,
}


def moved_message(entry: OutboxEntry) -> MovedMessage:
    """What the destination group is offered of an outbox entry."""
    r = entry.message
    # Every message of a FIFO queue has a sequence number, and no message of a standard one.
    return MovedMessage(r.message_id, r.body, r.attributes, r.system_attributes, r.md5_of_body, r.md5_of_attributes,
                        r.md5_of_system_attributes, r.sent_ms, r.sender_id, r.group_id, r.deduplication_id,
                        entry.dlq_source_arn, r.receive_count, r.first_receive_ms, r.sequence_number is not None)


class Outbox:
    """The outbox, ``moves_in``, and their commands, mutations and accessors."""

    def _init_outbox(self) -> None:
        self._outbox: dict[str, OutboxEntry] = {}   # by move id, in ``seq`` order
        self._outbox_next = 0
        self._moves_in: dict[str, int] = {}         # move id -> seq
        self._moves_in_next = 0

    # --- for the move driver ---------------------------------------------------------------

    def outbox_pending(self) -> list[MoveItem]:
        """The moves not yet accepted by their destination, oldest first, as offered to it."""
        return [MoveItem(e.move_id, e.dst_arn, moved_message(e)) for e in self._outbox.values() if not e.accepted]

    def outbox_accepted(self) -> list[tuple[str, str]]:
        """(move id, destination ARN) of the moves the destination holds, oldest first."""
        return [(e.move_id, e.dst_arn) for e in self._outbox.values() if e.accepted]

    def outbox_count(self) -> int:
        """The moves not yet cleared from the outbox, pending or accepted."""
        return len(self._outbox)

    def moves_in(self) -> list[str]:
        """The ids of the moves adopted here and not yet forgotten, oldest first."""
        return list(self._moves_in)

    # --- the source side of a move ---------------------------------------------------------

    def _holds(self, q: Queue) -> bool:
        return self._queues.get(q.qid) is q

    def _outbox_move(self, src: Queue, msg: Message, dst_arn: str, out: list, dlq_source: str | None,
                     task_id: str | None) -> None:
        self._emit(out, MessageOutboxed(src.qid, self.ids.uuid(), dst_arn, msg.record(), dlq_source, task_id,
                                        self._outbox_next))

    def _accept_outbox(self, c: AcceptOutbox, now: int, out: list) -> None:
        ids = tuple(i for i in dict.fromkeys(c.move_ids) if self._pending(i) is not None)
        if ids:
            self._emit(out, OutboxAccepted(ids))

    def _return_outbox(self, c: ReturnOutbox, now: int, out: list) -> None:
        failure = _TASK_FAILURES[c.reason]
        entry = self._pending(c.move_id)
        if entry is None:
            return   # returned or accepted before
        rec = msgspec.structs.replace(entry.message, version=entry.message.version + 1, receipt=None, visible_ms=now)
        self._emit(out, OutboxReturned(entry.move_id, entry.qid, rec))
        if entry.task_id is not None:
            self._task_lost_one(entry.qid, entry.task_id, failure(entry.dst_arn), out)

    def _clear_outbox(self, c: ClearOutbox, now: int, out: list) -> None:
        outbox = self._outbox
        ids = tuple(i for i in dict.fromkeys(c.move_ids) if i in outbox and outbox[i].accepted)
        if ids:
            self._emit(out, OutboxCleared(ids))

    def _pending(self, move_id: str) -> OutboxEntry | None:
        entry = self._outbox.get(move_id)
        return entry if entry is not None and not entry.accepted else None

    # --- the destination side --------------------------------------------------------------

    def _adopt_moved(self, c: AdoptMoved, now: int, out: list) -> AdoptMovedResult:
        accepted: list[str] = []
        refused: list[MoveRefusal] = []
        for item in c.items:
            if item.move_id in self._moves_in:
                accepted.append(item.move_id)
                continue
            dst = self._queue_by_arn(item.dst_arn)
            m = item.message
            if dst is None:
                refused.append(MoveRefusal(item.move_id, REFUSED_NO_QUEUE))
            elif dst.fifo != m.source_fifo:
                refused.append(MoveRefusal(item.move_id, REFUSED_WRONG_TYPE))
            else:
                rec = self._arrival(dst, m, m.dlq_source_arn, m.receive_count, m.first_receive_ms, now)
                self._emit(out, MessageAdded(dst.qid, rec, None))
                self._emit(out, MoveAdopted(item.move_id, self._moves_in_next))
                accepted.append(item.move_id)
        return AdoptMovedResult(tuple(accepted), tuple(refused))

    def _forget_move(self, c: ForgetMove, now: int, out: list) -> None:
        ids = tuple(i for i in dict.fromkeys(c.move_ids) if i in self._moves_in)
        if ids:
            self._emit(out, MovesForgotten(ids))

    # --- appliers --------------------------------------------------------------------------

    def _apply_message_outboxed(self, m: MessageOutboxed) -> None:
        q = self._queues.get(m.qid)
        left = m.message
        msg = q.messages.get(left.message_id) if q is not None else None
        # the very arrival that left (a message moved back in later has a later serial), not yet
        # returned (a returned one has a later version)
        if msg is not None and msg.rec.serial == left.serial and msg.version <= left.version:
            q.remove(msg)  # type: ignore[union-attr]
        if m.seq >= self._outbox_next:
            self._outbox[m.move_id] = OutboxEntry(m.move_id, m.seq, m.qid, m.dst_arn, m.message, m.dlq_source_arn,
                                                  m.task_id)
            self._outbox_next = m.seq + 1

    def _apply_outbox_accepted(self, m: OutboxAccepted) -> None:
        outbox = self._outbox
        for i in m.move_ids:
            entry = outbox.get(i)
            if entry is not None and not entry.accepted:
                outbox[i] = msgspec.structs.replace(entry, accepted=True)

    def _apply_outbox_returned(self, m: OutboxReturned) -> None:
        if self._outbox.pop(m.move_id, None) is None:
            return
        q = self._queues.get(m.qid)
        rec = m.message
        if q is not None and rec.message_id not in q.messages and rec.serial >= q.purged_below:
            q.insert(message(rec), self._now)

    def _apply_outbox_cleared(self, m: OutboxCleared) -> None:
        for i in m.move_ids:
            self._outbox.pop(i, None)

    def _apply_move_adopted(self, m: MoveAdopted) -> None:
        if m.seq >= self._moves_in_next:
            self._moves_in[m.move_id] = m.seq
            self._moves_in_next = m.seq + 1

    def _apply_moves_forgotten(self, m: MovesForgotten) -> None:
        for i in m.move_ids:
            self._moves_in.pop(i, None)

    # --- snapshots -------------------------------------------------------------------------

    def _outbox_record(self) -> OutboxRestored | None:
        if not (self._outbox_next or self._moves_in_next):
            return None
        return OutboxRestored(self._outbox_next, tuple(sorted(self._outbox.values(), key=lambda e: e.seq)),
                              self._moves_in_next, tuple(sorted(self._moves_in.items(), key=lambda kv: kv[1])))

    def _apply_outbox_restored(self, m: OutboxRestored) -> None:
        outbox, moves_in = self._outbox, self._moves_in
        for e in m.outbox:
            have = outbox.get(e.move_id)
            if have is None and e.seq >= self._outbox_next:   # below the counter: cleared here since
                outbox[e.move_id] = e
            elif have is not None and e.accepted and not have.accepted:
                outbox[e.move_id] = e
        for move_id, seq in m.moves_in:
            if seq >= self._moves_in_next:
                moves_in[move_id] = seq
        self._outbox_next = max(self._outbox_next, m.outbox_next)
        self._moves_in_next = max(self._moves_in_next, m.moves_in_next)
