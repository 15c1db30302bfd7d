"""ReceiveMessage: which messages a receive takes, and what it returns of each.

A mixin of ``Storage`` (storage/engine.py). A receive emits a ``MessageChanged`` per message it
hands out (new receipt handle, visibility, counts), and moves those past their queue's
maxReceiveCount to its dead-letter queue (storage/redrive.py).
"""

from __future__ import annotations

from typing import Callable, Iterable

from storage import md5 as md5mod
from storage import validation as v
from storage.commands import MessageAttributeValue, ReceiveMessage
from storage.errors import INVALID_ATTRIBUTE_NAME
from storage.fifo import retry_attempt
from storage.handles import receipt_handle
from storage.model import Message, Queue
from storage.mutations import AttemptEntry, AttemptRecorded, MessageChanged, MessageDeleted
from storage.queue_config import ALL_NAMES, DEDUP_WINDOW_MS
from storage.results import ReceivedMessage, ReceiveMessageResult

SYSTEM_ATTRIBUTE_NAMES = frozenset((
    "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
    "SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader",
    "DeadLetterQueueSourceArn"))
_NO_NAMES: frozenset[str] = frozenset()


class Receiving:
    """ReceiveMessage."""

    def _receive_message(self, c: ReceiveMessage, now: int, out: list) -> ReceiveMessageResult:
        q = self._queue(c.queue)
        limits = self.limits
        cfg = q.config
        n = 1 if c.max_number_of_messages is None else c.max_number_of_messages
        v.check_int_range("MaxNumberOfMessages", n, 1, limits.max_receive_messages,
                          "Must be between {lo} and {hi}, if provided")
        if c.visibility_timeout is None:
            vt_ms = cfg.visibility_ms
        else:
            v.check_int_range("VisibilityTimeout", c.visibility_timeout, 0, limits.max_visibility_timeout,
                              "VisibilityTimeout must be >= {lo} and <= {hi}")
            vt_ms = c.visibility_timeout * 1000
        if c.wait_time_seconds is not None:
            v.check_int_range("WaitTimeSeconds", c.wait_time_seconds, 0, limits.max_wait_seconds,
                              "Must be >= {lo} and <= {hi}, if provided")
        if c.attribute_names or c.system_attribute_names:
            system_names = set(c.attribute_names) | set(c.system_attribute_names)
            for name in system_names:
                if name != "All" and name not in SYSTEM_ATTRIBUTE_NAMES and name not in ALL_NAMES:
                    raise INVALID_ATTRIBUTE_NAME(f"Unknown Attribute {name}.")
            if "All" in system_names:
                system_names = set(SYSTEM_ATTRIBUTE_NAMES)
        else:
            system_names = _NO_NAMES
        attempt_id = c.receive_request_attempt_id if q.fifo else None
        if attempt_id is not None:
            v.check_fifo_token("ReceiveRequestAttemptId", attempt_id)
        select = _attribute_selector(c.message_attribute_names) if c.message_attribute_names else None

        if attempt_id is not None:
            again = retry_attempt(q, attempt_id, now)
            if again is not None:
                # SQS: a retry within the window returns the same messages and handles, and
                # resets their visibility timeout.
                for m in again:
                    self._emit(out, MessageChanged(q.qid, m.rec.message_id, m.version + 1, m.receipt, now + vt_ms,
                                                   m.receive_count, m.first_receive_ms, m.last_receive_ms))
                return ReceiveMessageResult(tuple(self._render(q, m, system_names, select) for m in again))

        q.promote(now)
        taken: list[Message] = []
        take = q.take_ready()
        redrive = cfg.redrive
        ids = self.ids
        expired_before = now - cfg.retention_ms
        visible_ms = now + vt_ms
        while len(taken) < n:
            msg = take()
            if msg is None:
                break
            rec = msg.rec
            if rec.sent_ms <= expired_before:
                self._emit(out, MessageDeleted(q.qid, rec.message_id))
                continue
            if redrive is not None and msg.receive_count >= redrive.max_receive_count:
                dlq = self._find_by_arn(redrive.dlq_arn)
                if dlq is not None and dlq is not q:
                    self._move(q, msg, dlq, now, out, dlq_source=q.arn)
                    continue
            mid = rec.message_id
            version = msg.version + 1
            receipt = receipt_handle(mid, ids.nonce())
            count = msg.receive_count + 1
            first = msg.first_receive_ms or now
            self._emit(out, MessageChanged(q.qid, mid, version, receipt, visible_ms, count, first, now))
            taken.append(msg)
        if attempt_id is not None:
            self._emit(out, AttemptRecorded(q.qid, AttemptEntry(
                attempt_id, now + DEDUP_WINDOW_MS, tuple((m.rec.message_id, m.receipt or "") for m in taken))))
        render = self._render
        received = []
        for m in taken:  # not a comprehension, which builds a function object per call
            received.append(render(q, m, system_names, select))
        return ReceiveMessageResult(tuple(received))

    def _render(self, q: Queue, msg: Message, system_names: set[str],
                select: Callable[[str], bool] | None) -> ReceivedMessage:
        rec = msg.rec
        attrs: dict[str, str] = {}
        if system_names:
            values = {
                "SenderId": rec.sender_id,
                "SentTimestamp": str(rec.sent_ms),
                "ApproximateReceiveCount": str(msg.receive_count),
                "ApproximateFirstReceiveTimestamp": str(msg.first_receive_ms),
            }
            if q.fifo:
                values["SequenceNumber"] = str(rec.sequence_number)
                values["MessageDeduplicationId"] = rec.deduplication_id or ""
            if rec.group_id is not None:
                values["MessageGroupId"] = rec.group_id
            trace = rec.system_attributes.get("AWSTraceHeader")
            if trace is not None and trace.string_value is not None:
                values["AWSTraceHeader"] = trace.string_value
            if rec.dlq_source_arn:
                values["DeadLetterQueueSourceArn"] = rec.dlq_source_arn
            for name in system_names:
                if name in values:
                    attrs[name] = values[name]
        if select is None or not rec.attributes:
            mattrs: dict[str, MessageAttributeValue] = {}
            md5_attrs = None
        elif select is _select_all:
            mattrs = rec.attributes  # type: ignore[assignment]
            md5_attrs = rec.md5_of_attributes
        else:
            mattrs = {k: val for k, val in rec.attributes.items() if select(k)}
            md5_attrs = md5mod.md5_of_attributes(mattrs) if mattrs else None
        return ReceivedMessage(rec.message_id, msg.receipt or "", rec.md5_of_body, rec.body, attrs,
                               md5_attrs, mattrs)


def _select_all(name: str) -> bool:
    return True


def _attribute_selector(names: Iterable[str]) -> Callable[[str], bool] | None:
    """Which message attributes a receive returns: All, .*, prefix.* or exact names."""
    names = tuple(names or ())
    if not names:
        return None
    if "All" in names or ".*" in names or "*" in names:
        return _select_all
    exact = {n for n in names if not n.endswith(".*")}
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*"))
    return lambda name: name in exact or name.startswith(prefixes)
