"""Receipt handles: their format, and what a consumer does with one (delete the message, or
change its visibility), one at a time or in batches.

A mixin of ``Storage`` (storage/engine.py).
"""

from __future__ import annotations

import binascii
from binascii import a2b_base64, b2a_base64
from typing import Any

from storage import validation as v
from storage.batches import each_entry
from storage.commands import ChangeMessageVisibility, ChangeMessageVisibilityBatch, DeleteMessage, DeleteMessageBatch
from storage.errors import MESSAGE_NOT_INFLIGHT, RECEIPT_HANDLE_IS_INVALID, invalid_parameter, missing_parameter
from storage.model import Message, Queue
from storage.mutations import MessageChanged, MessageDeleted
from storage.results import ChangeMessageVisibilityBatchResult, DeleteMessageBatchResult

MAX_VISIBILITY_TOTAL_MS = 43_200_000


def receipt_handle(message_id: str, nonce: str) -> str:
    return b2a_base64(f"{message_id}:{nonce}".encode(), newline=False).decode()


def _receipt_message_id(handle: str) -> str | None:
    """The message id inside a receipt handle, or None if it is not one of ours."""
    if len(handle) > 256:
        return None
    try:
        raw = a2b_base64(handle, strict_mode=True).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    mid, sep, nonce = raw.partition(":")
    if not sep or len(mid) != 36 or not nonce:
        return None
    return mid


class Handles:
    """DeleteMessage, ChangeMessageVisibility and their batches."""

    def _message_for(self, q: Queue, handle: str | None) -> tuple[str, Message | None]:
        """The message a receipt handle names, whichever of its receives issued the handle, or
        None if it is gone."""
        if handle is None or handle == "":
            raise missing_parameter("ReceiptHandle")
        if type(handle) is str:
            msg = q.by_receipt.get(handle)
            if msg is not None:  # the message's current handle: one we issued, so well-formed
                return msg.rec.message_id, msg
        mid = _receipt_message_id(handle)
        if mid is None:
            raise RECEIPT_HANDLE_IS_INVALID(f'The input receipt handle "{handle}" is not a valid receipt handle.')
        return mid, q.messages.get(mid)

    def _delete_one(self, q: Queue, handle: str | None, now: int, out: list) -> None:
        # A stale handle (the message was received again since) succeeds without deleting, as
        # SQS documents: the newer holder of the message keeps it.
        mid, msg = self._message_for(q, handle)
        if msg is None or msg.receipt != handle:
            return
        if q.fifo and msg.visible_ms <= now:
            # FIFO: once the visibility timeout passed, the handle is dead even if nobody
            # received the message again, so that a slow consumer cannot delete out of order.
            raise invalid_parameter("ReceiptHandle", handle, "The receipt handle has expired")
        self._emit(out, MessageDeleted(q.qid, mid))

    def _delete_message(self, c: DeleteMessage, now: int, out: list) -> None:
        self._delete_one(self._queue(c.queue), c.receipt_handle, now, out)

    def _delete_message_batch(self, c: DeleteMessageBatch, now: int, out: list) -> DeleteMessageBatchResult:
        q = self._queue(c.queue)
        entries = c.entries or ()
        v.check_batch_ids([e.id for e in entries], self.limits, "DeleteMessageBatchRequestEntry")
        def delete(e: Any) -> str:
            self._delete_one(q, e.receipt_handle, now, out)
            return e.id
        ok, failed = each_entry(entries, delete)
        return DeleteMessageBatchResult(ok, failed)

    def _change_one(self, q: Queue, handle: str | None, timeout: int | None, now: int, out: list) -> None:
        if timeout is None:
            raise missing_parameter("VisibilityTimeout")
        v.check_int_range("VisibilityTimeout", timeout, 0, self.limits.max_visibility_timeout,
                          "VisibilityTimeout must be >= {lo} and <= {hi}")
        mid, msg = self._message_for(q, handle)
        if msg is None:
            raise invalid_parameter("ReceiptHandle", handle,
                                    "Message does not exist or is not available for visibility timeout change")
        if q.fifo:
            # FIFO: AWS's answers are recorded for standard queues only (below). A FIFO queue
            # keeps its handles strict, as its DeleteMessage is known to (an expired handle is
            # refused): only the current handle of a message in flight changes it. The cluster
            # checker's FIFO order rule also counts on an ok change having been applied.
            if msg.receipt != handle:
                raise invalid_parameter("ReceiptHandle", handle,
                                        "Message does not exist or is not available for visibility timeout change")
            if msg.visible_ms <= now:
                raise MESSAGE_NOT_INFLIGHT("The message referred to is not in flight.")
        elif msg.receive_count == 0 or msg.visible_ms <= now:
            # Standard, not in flight: AWS answers 200 and the message stays visible (LocalStack's
            # AWS-validated test_change_message_visibility_after_visibility_timeout_expiration;
            # JustEat LocalSqsSnsMessaging's ChangeMessageVisibilityAsync_MessageNotInFlight,
            # verified against AWS).
            return
        # Standard: a handle from an earlier receive (superseded since) changes the message too,
        # as AWS does: LocalStack's AWS-validated test_terminate_visibility_timeout_after_receive.
        if self.limits.strict and now + timeout * 1000 > msg.last_receive_ms + MAX_VISIBILITY_TOTAL_MS:
            raise invalid_parameter("VisibilityTimeout", timeout,
                                    "Total VisibilityTimeout for the message is beyond the limit [43200 seconds]")
        self._emit(out, MessageChanged(q.qid, mid, msg.version + 1, msg.receipt, now + timeout * 1000,
                                       msg.receive_count, msg.first_receive_ms, msg.last_receive_ms))

    def _change_message_visibility(self, c: ChangeMessageVisibility, now: int, out: list) -> None:
        self._change_one(self._queue(c.queue), c.receipt_handle, c.visibility_timeout, now, out)

    def _change_message_visibility_batch(self, c: ChangeMessageVisibilityBatch, now: int,
                                         out: list) -> ChangeMessageVisibilityBatchResult:
        q = self._queue(c.queue)
        entries = c.entries or ()
        v.check_batch_ids([e.id for e in entries], self.limits, "ChangeMessageVisibilityBatchRequestEntry")
        def change(e: Any) -> str:
            self._change_one(q, e.receipt_handle, e.visibility_timeout, now, out)
            return e.id
        ok, failed = each_entry(entries, change)
        return ChangeMessageVisibilityBatchResult(ok, failed)
