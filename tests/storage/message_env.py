"""The harness of the message-level storage tests: test_sending, test_receiving, test_handles,
test_fifo and the message half of test_redrive (their ``env`` fixture is in conftest.py).

Every test drives ``Storage.execute`` with a ``ManualClock`` (time moves only when a test says
so) and checks three things: the typed result, the state as a client sees it (queue counters
via GetQueueAttributes, and further receives), and the mutations the command emitted. A command
that is rejected must emit nothing and leave the state unchanged (``Env.fails``). Every mutation
is also applied to a replica, and each test ends by checking that the replica reached the
master's digest, so that no behaviour here depends on state that the mutations do not carry.

Where SQS's behaviour is pinned down by a recording of the real service, the source is named
next to the test (mostly LocalStack's AWS-validated snapshots,
tests/aws/services/sqs/test_sqs.snapshot.json, and the SQS API reference).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct

import pytest

from storage import IdSource, ManualClock, SqsError, Storage
from storage.commands import (
    ChangeMessageVisibility, CreateQueue, DeleteMessage, GetQueueAttributes, MessageAttributeValue, Namespace,
    QueueKey, ReceiveMessage, SendMessage, Tick,
)
from storage.mutations import QueueCreated


START_MS = 1_700_000_000_000
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
DEDUP_WINDOW_MS = 5 * 60 * 1000
TWELVE_HOURS_S = 43_200

INVALID_PARAMETER_VALUE = "InvalidParameterValue"
MISSING_PARAMETER = "MissingParameter"
INVALID_MESSAGE_CONTENTS = "InvalidMessageContents"
RECEIPT_HANDLE_IS_INVALID = "ReceiptHandleIsInvalid"
TOO_MANY_ENTRIES = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
EMPTY_BATCH = "AWS.SimpleQueueService.EmptyBatchRequest"
IDS_NOT_DISTINCT = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
INVALID_BATCH_ID = "AWS.SimpleQueueService.InvalidBatchEntryId"
BATCH_TOO_LONG = "AWS.SimpleQueueService.BatchRequestTooLong"
RESOURCE_NOT_FOUND = "ResourceNotFoundException"
INVALID_ATTRIBUTE_NAME = "InvalidAttributeName"

COUNT_NAMES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesDelayed")


def S(value: str | None, data_type: str = "String") -> MessageAttributeValue:
    return MessageAttributeValue(data_type, string_value=value)


def N(value: str, data_type: str = "Number") -> MessageAttributeValue:
    return MessageAttributeValue(data_type, string_value=value)


def B(value: bytes | None, data_type: str = "Binary") -> MessageAttributeValue:
    return MessageAttributeValue(data_type, binary_value=value)


def md5_by_hand(attrs: dict[str, MessageAttributeValue]) -> str:
    """The SDKs' attribute digest, written out independently of storage.md5."""
    def field(raw: bytes) -> bytes:
        return struct.pack(">I", len(raw)) + raw
    buf = b""
    for name in sorted(attrs):
        value = attrs[name]
        buf += field(name.encode()) + field(value.data_type.encode())
        if value.string_value is not None:
            buf += b"\x01" + field(value.string_value.encode())
        else:
            buf += b"\x02" + field(bytes(value.binary_value or b""))
    return hashlib.md5(buf).hexdigest()


class Env:
    """A master storage on a manual clock, plus a replica fed with every emitted mutation."""

    def __init__(self) -> None:
        self.clock = ManualClock(START_MS)
        self.storage = Storage(self.clock, IdSource(20240601))
        self.replica = Storage(ManualClock(0), IdSource(1))
        self.ns = Namespace()
        self.qids: dict[QueueKey, int] = {}
        self.mutations: list = []

    # --- driving ---------------------------------------------------------------------------

    def now(self) -> int:
        return self.clock.now_ms()

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def run(self, command):
        result, mutations = self.storage.execute(command)
        for m in mutations:
            self.replica.apply(m)
        self.mutations = list(mutations)
        return result

    def fails(self, command, code: str | None = None) -> SqsError:
        """The command is rejected with ``code``, emits nothing and changes nothing."""
        before = self.storage.digest()
        try:
            result, mutations = self.storage.execute(command)
        except SqsError as e:
            err = e
        else:
            for m in mutations:  # keep the replica in step, so only this failure is reported
                self.replica.apply(m)
            self.mutations = list(mutations)
            pytest.fail(f"{type(command).__name__} was accepted (result {result!r}, {len(mutations)} "
                        f"mutations); expected the error {code or 'any'}")
        if code is not None:
            assert err.code == code, f"expected {code}, got {err.code}: {err.message}"
        assert not getattr(err, "mutations", None), "a rejected command emitted mutations"
        assert self.storage.digest() == before, "a rejected command changed the state"
        return err

    # --- shorthands -----------------------------------------------------------------------

    def create(self, name: str, **attributes) -> QueueKey:
        attrs = {k: str(v) for k, v in attributes.items()}
        if name.endswith(".fifo"):
            attrs.setdefault("FifoQueue", "true")
        result = self.run(CreateQueue(self.ns, name, attrs))
        (created,) = [m for m in self.mutations if isinstance(m, QueueCreated)]
        self.qids[result.queue] = created.qid
        return result.queue

    def create_with_dlq(self, name: str, max_receive_count: int = 1, **attributes) -> tuple[QueueKey, QueueKey]:
        fifo = name.endswith(".fifo")
        dlq = self.create(name.replace(".fifo", "") + "-dlq" + (".fifo" if fifo else ""))
        policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": max_receive_count})
        src = self.create(name, RedrivePolicy=policy, **attributes)
        return src, dlq

    def send(self, queue: QueueKey, body: str = "hello", **kw):
        return self.run(SendMessage(queue, body, **kw))

    def receive(self, queue: QueueKey, n: int = 10, **kw):
        return self.run(ReceiveMessage(queue, max_number_of_messages=n, **kw)).messages

    def delete(self, queue: QueueKey, handle: str | None) -> None:
        self.run(DeleteMessage(queue, handle))

    def change(self, queue: QueueKey, handle: str | None, timeout: int | None) -> None:
        self.run(ChangeMessageVisibility(queue, handle, timeout))

    def counts(self, queue: QueueKey) -> tuple[int, int, int]:
        """(visible, in flight, delayed), as GetQueueAttributes reports them."""
        attrs = self.run(GetQueueAttributes(queue, COUNT_NAMES)).attributes
        assert self.mutations == []
        return tuple(int(attrs[n]) for n in COUNT_NAMES)  # type: ignore[return-value]

    def tick(self):
        return self.run(Tick())

    def of_type(self, kind) -> list:
        return [m for m in self.mutations if isinstance(m, kind)]


def fifo_send(env: Env, queue: QueueKey, body: str, group: str = "g", dedup: str | None = None, **kw):
    return env.send(queue, body, group_id=group, deduplication_id=dedup if dedup is not None else body, **kw)
