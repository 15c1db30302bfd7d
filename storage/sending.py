"""SendMessage and SendMessageBatch: validation, deduplication and the message's record.

A mixin of ``Storage`` (storage/engine.py). A send emits one ``MessageAdded``, which carries
everything decided here (id, serial, sequence number, timestamps), so a replica only stores it.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Any, Callable, Mapping

from storage import md5 as md5mod
from storage import validation as v
from storage.batches import each_entry
from storage.commands import MessageAttributeValue, SendMessage, SendMessageBatch, SendMessageBatchEntry
from storage.errors import (
    BATCH_REQUEST_TOO_LONG, INVALID_PARAMETER_VALUE, invalid_parameter, missing_parameter, queue_does_not_exist,
)
from storage.fifo import next_sequence
from storage.model import Queue
from storage.mutations import NO_ATTRIBUTES, DedupEntry, MessageAdded, MessageRecord
from storage.queue_config import DEDUP_WINDOW_MS
from storage.results import SendMessageBatchResult, SendMessageBatchResultEntry, SendMessageResult


class Sending:
    """SendMessage and SendMessageBatch."""

    def _send_one(self, q: Queue, e: SendMessage | SendMessageBatchEntry, sender: str | None, now: int,
                  out: list, result: Callable[..., Any] = SendMessageResult) -> Any:
        """Send one message: a SendMessage, or one entry of a batch (both carry the same fields).

        ``result`` builds what is returned from the message id, the MD5s and the sequence number:
        a SendMessageResult, or a batch's result entry (built directly, not copied from one)."""
        limits = self.limits
        cfg = q.config
        body = e.body
        raw = v.encoded_body(body)  # encoded once: its size, its MD5 and (FIFO) its SHA-256
        size = len(raw)
        attrs = e.message_attributes
        sys_attrs = e.system_attributes
        if attrs:
            size += v.check_message_attributes(attrs, limits)
        if sys_attrs:
            v.check_message_attributes(sys_attrs, limits, system=True)
        if size > cfg.max_size:
            # A batch entry gets other words for it (LocalStack's AWS-recorded test_send_batch_message_size).
            verdict = "are invalid" if result is SendMessageResult else "cannot be validated"
            raise INVALID_PARAMETER_VALUE(
                f"One or more parameters {verdict}. Reason: Message must be shorter than {cfg.max_size} bytes.")
        delay = e.delay_seconds
        if delay is not None and q.fifo:
            # FIFO queues take no per-message delay, but SDKs that always send the field send 0,
            # which AWS accepts (the queue's own delay applies): LocalStack's AWS-validated
            # test_fifo_queue_send_message_with_zero_delay_defaults_to_queue_delay.
            if delay != 0:
                raise invalid_parameter("DelaySeconds", delay,
                                        "The request include parameter that is not valid for this queue type")
            delay = None
        if delay is not None:
            v.check_int_range("DelaySeconds", delay, 0, limits.max_delay_seconds,
                              "DelaySeconds must be >= {lo} and <= {hi}")
            delay_ms = delay * 1000
        else:
            delay_ms = cfg.delay_ms
        md5_body = md5mod.md5_hex(raw)
        md5_attrs = md5mod.md5_of_attributes(attrs) if attrs else None
        md5_sys = md5mod.md5_of_attributes(sys_attrs) if sys_attrs else None
        group_id = e.group_id
        dedup_id = e.deduplication_id
        if q.fifo:
            if group_id is None:
                raise missing_parameter("MessageGroupId")
            v.check_fifo_token("MessageGroupId", group_id)
            if dedup_id is None:
                if not cfg.content_dedup:
                    raise INVALID_PARAMETER_VALUE(
                        "The queue should either have ContentBasedDeduplication enabled or "
                        "MessageDeduplicationId provided explicitly")
                dedup_id = hashlib.sha256(raw).hexdigest()
            else:
                v.check_fifo_token("MessageDeduplicationId", dedup_id)
            dkey = f"{group_id}\x00{dedup_id}" if q.dedup_by_group else dedup_id
            seen = q.dedup.get(dkey)
            if seen is not None and seen.expires_ms > now:
                return result(seen.message_id, md5_body, md5_attrs, md5_sys,
                              str(seen.sequence_number) if seen.sequence_number else None)
            seq = next_sequence(q, now)
            mid = self.ids.uuid()
            dedup = DedupEntry(dkey, mid, seq, now + DEDUP_WINDOW_MS)
        else:
            if dedup_id is not None:
                raise invalid_parameter("MessageDeduplicationId", dedup_id,
                                        "The request include parameter that is not valid for this queue type")
            if group_id is not None:  # fair queues: standard queues accept a group id
                v.check_fifo_token("MessageGroupId", group_id)
            seq = None
            mid = self.ids.uuid()
            dedup = None
        rec = MessageRecord(
            mid, q.next_serial, body, dict(attrs) if attrs else NO_ATTRIBUTES,  # type: ignore[arg-type]
            dict(sys_attrs) if sys_attrs else NO_ATTRIBUTES,  # type: ignore[arg-type]
            md5_body, md5_attrs, md5_sys, now, sender or q.key.account, group_id, dedup_id, seq, None,
            # without a delay, the one int object twice (an int is 32 bytes per stored message)
            1, None, now + delay_ms if delay_ms else now, 0, 0, 0)
        added = MessageAdded(q.qid, rec, dedup)
        self._apply_message_added(added)   # = _emit, without its lookup: a send's one mutation
        out.append(added)
        return result(mid, md5_body, md5_attrs, md5_sys, None if seq is None else str(seq))

    def _send_message(self, c: SendMessage, now: int, out: list) -> SendMessageResult:
        key = c.queue
        try:   # = _queue(key), inlined: the busiest action
            q = self._by_key.get((key.region, key.account, key.name))
        except AttributeError:
            q = None
        if q is None:
            raise queue_does_not_exist()
        return self._send_one(q, c, c.sender_id, now, out)

    def _send_message_batch(self, c: SendMessageBatch, now: int, out: list) -> SendMessageBatchResult:
        q = self._queue(c.queue)
        entries = c.entries or ()
        v.check_batch_ids([e.id for e in entries], self.limits, "SendMessageBatchRequestEntry")
        total = 0
        for e in entries:
            total += _utf8_size(e.body or "")
            if e.message_attributes or e.system_attributes:
                total += _attributes_size(e.message_attributes) + _attributes_size(e.system_attributes)
        if q.fifo:
            for e in entries:
                if e.group_id is None:
                    raise INVALID_PARAMETER_VALUE("The request must contain the parameter MessageGroupId.")
                if e.deduplication_id is None and not q.config.content_dedup:
                    raise INVALID_PARAMETER_VALUE(
                        "The queue should either have ContentBasedDeduplication enabled or "
                        "MessageDeduplicationId provided explicitly")
        if total > self.limits.max_batch_bytes:
            raise BATCH_REQUEST_TOO_LONG(
                f"Batch requests cannot be longer than {self.limits.max_batch_bytes} bytes. "
                f"You have sent {total} bytes.")
        sender = c.sender_id

        def send(e: Any) -> SendMessageBatchResultEntry:
            return self._send_one(q, e, sender, now, out, partial(SendMessageBatchResultEntry, e.id))
        ok, failed = each_entry(entries, send)
        return SendMessageBatchResult(ok, failed)


def _utf8_size(text: str) -> int:
    """UTF-8 size of a text not yet validated (lone surrogates count as 3 bytes, as encoded)."""
    # isascii() is O(1): an ASCII text's size is its length, without encoding it (a copy).
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _attributes_size(attrs: Mapping[str, MessageAttributeValue] | None) -> int:
    """What message attributes add to a batch's size, counted before they are validated."""
    total = 0
    for name, val in (attrs or {}).items():
        total += _utf8_size(name) + len((val.data_type or "").encode())
        total += _utf8_size(val.string_value or "") + len(val.binary_value or b"")
    return total
