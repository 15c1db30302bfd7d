"""Unit tests of the message-level actions of the storage engine, against SQS's behaviour.

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
from storage import md5 as md5mod
from storage.commands import (
    CancelMessageMoveTask,
    PurgeQueue,
    SetQueueAttributes,
    ChangeMessageVisibility,
    ChangeMessageVisibilityBatch,
    ChangeMessageVisibilityBatchEntry,
    CreateQueue,
    DeleteMessage,
    DeleteMessageBatch,
    DeleteMessageBatchEntry,
    GetQueueAttributes,
    ListMessageMoveTasks,
    MessageAttributeValue,
    Namespace,
    QueueKey,
    ReceiveMessage,
    SendMessage,
    SendMessageBatch,
    SendMessageBatchEntry,
    StartMessageMoveTask,
    Tick,
)
from storage.mutations import (
    MessageAdded,
    MessageChanged,
    MessageDeleted,
    MoveTaskUpdated,
    Pruned,
    QueueCreated,
)
from tests.storage.workload import assert_indexes_consistent

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


@pytest.fixture
def env():
    e = Env()
    yield e
    assert e.replica.digest() == e.storage.digest(), "a replica applying the emitted mutations diverged"
    assert_indexes_consistent(e.storage)
    assert_indexes_consistent(e.replica)


def fifo_send(env: Env, queue: QueueKey, body: str, group: str = "g", dedup: str | None = None, **kw):
    return env.send(queue, body, group_id=group, deduplication_id=dedup if dedup is not None else body, **kw)


# =============================================================================================
# SendMessage
# =============================================================================================

def test_send_returns_id_and_md5_and_emits_one_message_added(env):
    q = env.create("q")
    r = env.send(q, "hello world")
    assert UUID_RE.fullmatch(r.message_id)
    assert r.md5_of_body == hashlib.md5(b"hello world").hexdigest() == md5mod.md5_of_body("hello world")
    assert r.md5_of_message_attributes is None
    assert r.md5_of_message_system_attributes is None
    assert r.sequence_number is None
    (m,) = env.mutations
    assert isinstance(m, MessageAdded)
    assert m.qid == env.qids[q]
    assert m.dedup is None
    rec = m.message
    assert (rec.message_id, rec.body, rec.md5_of_body) == (r.message_id, "hello world", r.md5_of_body)
    assert rec.sent_ms == env.now() and rec.visible_ms == env.now()
    assert rec.receive_count == 0 and rec.receipt is None
    assert rec.group_id is None and rec.deduplication_id is None and rec.sequence_number is None
    assert env.counts(q) == (1, 0, 0)


def test_send_known_md5_of_body_matches_aws(env):
    # AWS-recorded digest of the body "msg" (LocalStack snapshot, test_sqs.snapshot.json).
    q = env.create("q")
    assert env.send(q, "msg").md5_of_body == "6e2baaf3b97dbeef01c0043275f9a0e7"


def test_send_message_ids_are_distinct(env):
    q = env.create("q")
    ids = {env.send(q, f"m{i}").message_id for i in range(20)}
    assert len(ids) == 20


@pytest.mark.parametrize("body", [None, ""], ids=["absent", "empty"])
def test_send_body_missing_or_empty_is_missing_parameter(env, body):
    q = env.create("q")
    err = env.fails(SendMessage(q, body), MISSING_PARAMETER)
    assert "MessageBody" in err.message
    assert env.counts(q) == (0, 0, 0)


@pytest.mark.parametrize("body", ["\x00", "a\x1fb", "\x08", "x\ufffe", "\uffff", "a\ud800b", "\x7f\x00"],
                         ids=["nul", "unit-separator", "backspace", "fffe", "ffff", "lone-surrogate", "del-nul"])
def test_send_invalid_characters_are_invalid_message_contents(env, body):
    q = env.create("q")
    env.fails(SendMessage(q, body), INVALID_MESSAGE_CONTENTS)
    assert env.counts(q) == (0, 0, 0)


@pytest.mark.parametrize("body", ["\t\n\r", " ", "\x7f", "\ud7ff", "\ue000", "\ufffd", "\U00010000",
                                  "\U0010ffff", "emoji \U0001F600 and accents é"])
def test_send_allowed_characters_round_trip(env, body):
    q = env.create("q")
    r = env.send(q, body)
    (m,) = env.receive(q)
    assert m.body == body and m.message_id == r.message_id
    assert m.md5_of_body == hashlib.md5(body.encode("utf-8")).hexdigest() == r.md5_of_body


def test_send_size_limit_is_maximum_message_size_inclusive(env):
    q = env.create("q", MaximumMessageSize=1024)
    env.send(q, "x" * 1024)
    err = env.fails(SendMessage(q, "x" * 1025), INVALID_PARAMETER_VALUE)
    # AWS wording (LocalStack snapshot test_send_message_with_updated_maximum_message_size).
    assert err.message == "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes."
    assert env.counts(q) == (1, 0, 0)


def test_send_size_counts_utf8_bytes(env):
    q = env.create("q", MaximumMessageSize=1024)
    env.send(q, "é" * 512)                      # 1024 bytes
    env.fails(SendMessage(q, "é" * 512 + "x"), INVALID_PARAMETER_VALUE)
    env.send(q, "\U0001F600" * 256)             # 4 bytes each
    env.fails(SendMessage(q, "\U0001F600" * 256 + "x"), INVALID_PARAMETER_VALUE)


def test_send_size_counts_attribute_names_types_and_values(env):
    q = env.create("q", MaximumMessageSize=1024)
    # 1000 + len("abc") + len("String") + 15 == 1024
    env.send(q, "x" * 1000, message_attributes={"abc": S("v" * 15)})
    env.fails(SendMessage(q, "x" * 1000, message_attributes={"abc": S("v" * 16)}), INVALID_PARAMETER_VALUE)
    # binary values count their raw bytes: 1000 + 1 + len("Binary") + 17 == 1024
    env.send(q, "x" * 1000, message_attributes={"b": B(b"\x00" * 17)})
    env.fails(SendMessage(q, "x" * 1000, message_attributes={"b": B(b"\x00" * 18)}), INVALID_PARAMETER_VALUE)
    # custom types count the full type name: 1000 + 1 + len("Number.int") + 13 == 1024
    env.send(q, "x" * 1000, message_attributes={"n": N("1" * 13, "Number.int")})
    env.fails(SendMessage(q, "x" * 1000, message_attributes={"n": N("1" * 14, "Number.int")}),
              INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (3, 0, 0)


def test_send_default_maximum_is_one_mib(env):
    q = env.create("q")
    env.send(q, "x" * 1_048_576)
    env.fails(SendMessage(q, "x" * 1_048_577), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (1, 0, 0)


def test_send_system_attributes_do_not_count_toward_size(env):
    # "The size of a message system attribute doesn't count towards the total size of a message."
    q = env.create("q", MaximumMessageSize=1024)
    env.send(q, "x" * 1024, system_attributes={"AWSTraceHeader": S("Root=1-5759e988-bd862e3fe1be46a994272793")})
    assert env.counts(q) == (1, 0, 0)


def test_send_message_attributes_of_every_type_round_trip_with_md5(env):
    q = env.create("q")
    attrs = {
        "s": S("text"),
        "n": N("-12.5e3"),
        "b": B(b"\x00\x01\xff"),
        "custom-string": S("x", "String.custom"),
        "custom.number": N("7", "Number.float"),
        "custom_binary": B(b"GIF89a", "Binary.gif"),
    }
    r = env.send(q, "body", message_attributes=attrs)
    assert r.md5_of_message_attributes == md5mod.md5_of_attributes(attrs) == md5_by_hand(attrs)
    (added,) = env.of_type(MessageAdded)
    assert dict(added.message.attributes) == attrs
    assert added.message.md5_of_attributes == r.md5_of_message_attributes
    (m,) = env.receive(q, message_attribute_names=("All",))
    assert dict(m.message_attributes) == attrs
    assert m.md5_of_message_attributes == r.md5_of_message_attributes


def test_send_attribute_md5_matches_aws_recordings(env):
    # Digests recorded from AWS (LocalStack snapshots test_receive_message_message_attribute_names_filters
    # and test_send_message_with_binary_attributes).
    q = env.create("q")
    r = env.send(q, "msg", message_attributes={"Help.Me": S("Me"), "Hello": S("There"), "General": S("Kenobi")})
    assert r.md5_of_message_attributes == "4c360f3fdafd970e05fae2f149d997f5"
    r = env.send(q, "test", message_attributes={
        "attr1": B(b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01")})
    assert r.md5_of_message_attributes == "8cbe4db156db8a94db8b801b7addb984"
    assert r.md5_of_body == "098f6bcd4621d373cade4e832627b4f6"


def test_send_ten_attributes_and_long_names_are_accepted(env):
    q = env.create("q")
    env.send(q, "b", message_attributes={f"a{i}": S(str(i)) for i in range(10)})
    env.send(q, "b", message_attributes={"n" * 256: S("v"), "a-b_c.d": S("v")})
    env.send(q, "b", message_attributes={"t": S("v", "String." + "x" * 249)})  # type of 256 chars
    assert env.counts(q) == (3, 0, 0)


BAD_ATTRIBUTES = {
    "empty-name": {"": S("x")},
    "name-too-long": {"n" * 257: S("x")},
    "name-with-space": {"bad name": S("x")},
    "name-with-colon": {"a:b": S("x")},
    "reserved-aws": {"AWS.thing": S("x")},
    "reserved-amazon": {"amazon.thing": S("x")},
    "leading-period": {".a": S("x")},
    "trailing-period": {"a.": S("x")},
    "successive-periods": {"a..b": S("x")},
    "empty-type": {"a": S("x", "")},
    "unknown-type": {"a": S("x", "Text")},
    "lowercase-type": {"a": S("x", "string")},
    "type-dot-no-label": {"a": S("x", "String.")},
    "type-too-long": {"a": S("x", "String." + "x" * 250)},
    "string-missing-value": {"a": S(None)},
    "string-empty-value": {"a": S("")},
    "binary-missing-value": {"a": B(None)},
    "binary-empty-value": {"a": B(b"")},
    "both-values": {"a": MessageAttributeValue("String", string_value="x", binary_value=b"y")},
    "number-not-numeric": {"a": N("abc")},
    "number-trailing-junk": {"a": N("12a")},
    "number-out-of-range": {"a": N("1e127")},
    "number-too-precise": {"a": N("1" * 39)},
    "string-invalid-char": {"a": S("x\x00")},
    "string-list-values": {"a": MessageAttributeValue("String", string_list_values=("x",))},
    "binary-list-values": {"a": MessageAttributeValue("Binary", binary_list_values=(b"x",))},
    "eleven-attributes": {f"a{i}": S("x") for i in range(11)},
}


@pytest.mark.parametrize("attrs", list(BAD_ATTRIBUTES.values()), ids=list(BAD_ATTRIBUTES))
def test_send_invalid_message_attributes_are_rejected(env, attrs):
    q = env.create("q")
    env.fails(SendMessage(q, "body", message_attributes=attrs), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (0, 0, 0)


def test_send_more_than_ten_attributes_message(env):
    q = env.create("q")
    err = env.fails(SendMessage(q, "b", message_attributes={f"a{i}": S("x") for i in range(11)}),
                    INVALID_PARAMETER_VALUE)
    assert err.message == "Number of message attributes [11] exceeds the allowed maximum [10]."


def test_send_aws_trace_header_md5_and_receive(env):
    q = env.create("q")
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    sys_attrs = {"AWSTraceHeader": S(trace)}
    r = env.send(q, "body", system_attributes=sys_attrs)
    assert r.md5_of_message_system_attributes == md5mod.md5_of_attributes(sys_attrs) == md5_by_hand(sys_attrs)
    assert r.md5_of_message_attributes is None
    (added,) = env.of_type(MessageAdded)
    assert added.message.md5_of_system_attributes == r.md5_of_message_system_attributes
    (m,) = env.receive(q, visibility_timeout=0, system_attribute_names=("AWSTraceHeader",))
    assert m.attributes == {"AWSTraceHeader": trace}
    assert m.message_attributes == {} and m.md5_of_message_attributes is None
    (m,) = env.receive(q, attribute_names=("All",))
    assert m.attributes["AWSTraceHeader"] == trace


@pytest.mark.parametrize("sys_attrs", [
    {"Other": S("x")},
    {"AWSTraceHeader": N("1")},
    {"AWSTraceHeader": B(b"x")},
    {"AWSTraceHeader": S("")},
    {"AWSTraceHeader": S("a\x00")},
], ids=["unknown-name", "number-type", "binary-type", "empty-value", "invalid-char"])
def test_send_invalid_system_attributes_are_rejected(env, sys_attrs):
    q = env.create("q")
    env.fails(SendMessage(q, "body", system_attributes=sys_attrs), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (0, 0, 0)


def test_send_per_message_delay_hides_message_until_due(env):
    q = env.create("q")
    r = env.send(q, "later", delay_seconds=5)
    (added,) = env.of_type(MessageAdded)
    assert added.message.visible_ms == env.now() + 5000
    assert env.counts(q) == (0, 0, 1)
    assert env.receive(q) == ()
    assert env.mutations == []
    env.advance(4_999)
    assert env.receive(q) == ()
    assert env.counts(q) == (0, 0, 1)
    env.advance(1)
    assert env.counts(q) == (1, 0, 0)
    (m,) = env.receive(q)
    assert m.message_id == r.message_id


@pytest.mark.parametrize("delay", [0, 900])
def test_send_delay_bounds_are_accepted(env, delay):
    q = env.create("q")
    env.send(q, "m", delay_seconds=delay)
    assert env.counts(q) == ((1, 0, 0) if delay == 0 else (0, 0, 1))
    env.advance(delay * 1000)
    assert len(env.receive(q)) == 1


@pytest.mark.parametrize("delay", [-1, 901, 10_000])
def test_send_delay_out_of_range_is_rejected(env, delay):
    q = env.create("q")
    env.fails(SendMessage(q, "m", delay_seconds=delay), INVALID_PARAMETER_VALUE)


def test_send_queue_delay_is_the_default_and_per_message_delay_overrides_it(env):
    q = env.create("q", DelaySeconds=10)
    default = env.send(q, "default").message_id
    env.send(q, "now", delay_seconds=0)
    assert env.counts(q) == (1, 0, 1)
    (m,) = env.receive(q, visibility_timeout=100)
    assert m.body == "now"
    env.advance(10_000)
    (m,) = env.receive(q)
    assert m.message_id == default


def test_send_delay_seconds_not_allowed_on_fifo(env):
    q = env.create("q.fifo", ContentBasedDeduplication="true")
    err = env.fails(SendMessage(q, "m", delay_seconds=2, group_id="g"), INVALID_PARAMETER_VALUE)
    # AWS wording (LocalStack snapshot test_fifo_queue_send_message_with_delay_seconds_fails).
    assert err.message == ("Value 2 for parameter DelaySeconds is invalid. Reason: The request include "
                           "parameter that is not valid for this queue type.")
    assert env.counts(q) == (0, 0, 0)


def test_send_delay_seconds_zero_on_fifo_uses_the_queue_delay(env):
    # LocalStack's AWS-validated test_fifo_queue_send_message_with_zero_delay_defaults_to_queue_delay.
    q = env.create("q.fifo", DelaySeconds=2)
    r = fifo_send(env, q, "m", delay_seconds=0)
    (added,) = env.of_type(MessageAdded)
    assert added.message.visible_ms == env.now() + 2_000 and r.sequence_number
    assert env.receive(q) == ()
    env.advance(2_000)
    assert [m.body for m in env.receive(q)] == ["m"]


def test_fifo_queue_level_delay_applies(env):
    q = env.create("q.fifo", DelaySeconds=3)
    fifo_send(env, q, "m")
    assert env.counts(q) == (0, 0, 1)
    assert env.receive(q) == ()
    env.advance(3_000)
    assert [m.body for m in env.receive(q)] == ["m"]


def test_send_deduplication_id_not_allowed_on_standard(env):
    q = env.create("q")
    env.fails(SendMessage(q, "m", deduplication_id="d"), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (0, 0, 0)


def test_send_group_id_accepted_on_standard_fair_queue(env):
    q = env.create("q")
    r = env.send(q, "a", group_id="tenant-1")
    env.send(q, "b", group_id="tenant-1")
    assert r.sequence_number is None
    # a standard queue does not block a group: both messages come back at once
    ms = env.receive(q, attribute_names=("All",))
    assert sorted(m.body for m in ms) == ["a", "b"]
    for m in ms:
        assert m.attributes["MessageGroupId"] == "tenant-1"
        assert "SequenceNumber" not in m.attributes
        assert "MessageDeduplicationId" not in m.attributes


def test_send_invalid_group_id_on_standard_is_rejected(env):
    q = env.create("q")
    env.fails(SendMessage(q, "m", group_id="g" * 129), INVALID_PARAMETER_VALUE)
    env.fails(SendMessage(q, "m", group_id="has space"), INVALID_PARAMETER_VALUE)


def test_send_sender_id_default_and_explicit(env):
    q = env.create("q")
    env.send(q, "default")
    env.send(q, "explicit", sender_id="AIDAEXAMPLE123")
    ms = env.receive(q, attribute_names=("SenderId",))
    senders = {m.body: m.attributes["SenderId"] for m in ms}
    assert senders == {"default": "000000000000", "explicit": "AIDAEXAMPLE123"}


# =============================================================================================
# SendMessageBatch
# =============================================================================================

def entry(id_: str | None, body: str | None = "body", **kw) -> SendMessageBatchEntry:
    return SendMessageBatchEntry(id_, body, **kw)


def test_batch_sends_every_entry(env):
    q = env.create("q")
    r = env.run(SendMessageBatch(q, tuple(entry(f"e{i}", f"m{i}") for i in range(10))))
    assert r.failed == ()
    assert [e.id for e in r.successful] == [f"e{i}" for i in range(10)]
    assert len({e.message_id for e in r.successful}) == 10
    for i, e in enumerate(r.successful):
        assert e.md5_of_body == md5mod.md5_of_body(f"m{i}")
    added = env.of_type(MessageAdded)
    assert [a.message.message_id for a in added] == [e.message_id for e in r.successful]
    assert env.counts(q) == (10, 0, 0)
    received = {m.message_id: m.body for m in env.receive(q)}
    assert received == {e.message_id: f"m{i}" for i, e in enumerate(r.successful)}


def test_batch_empty_is_rejected(env):
    q = env.create("q")
    env.fails(SendMessageBatch(q, ()), EMPTY_BATCH)


def test_batch_more_than_ten_entries_is_rejected(env):
    q = env.create("q")
    err = env.fails(SendMessageBatch(q, tuple(entry(f"e{i}") for i in range(11))), TOO_MANY_ENTRIES)
    assert err.message == "Maximum number of entries per request are 10. You have sent 11."
    assert env.counts(q) == (0, 0, 0)


@pytest.mark.parametrize("bad_id", ["", "has space", "invalid:id", "a" * 81, "é", None])
def test_batch_malformed_entry_id_is_rejected(env, bad_id):
    q = env.create("q")
    env.fails(SendMessageBatch(q, (entry("ok"), entry(bad_id))), INVALID_BATCH_ID)
    assert env.counts(q) == (0, 0, 0)


def test_batch_well_formed_ids(env):
    q = env.create("q")
    r = env.run(SendMessageBatch(q, (entry("a" * 80), entry("A-b_9"))))
    assert {e.id for e in r.successful} == {"a" * 80, "A-b_9"}


def test_batch_duplicate_ids_are_rejected(env):
    q = env.create("q")
    env.fails(SendMessageBatch(q, (entry("a"), entry("b"), entry("a"))), IDS_NOT_DISTINCT)
    assert env.counts(q) == (0, 0, 0)


def test_batch_total_size_above_one_mib_is_rejected(env):
    q = env.create("q")
    entries = tuple(entry(f"e{i}", "x" * 110_000) for i in range(10))   # 1.1 MB, each well under 1 MiB
    env.fails(SendMessageBatch(q, entries), BATCH_TOO_LONG)
    assert env.counts(q) == (0, 0, 0)


def test_batch_total_size_counts_attributes(env):
    q = env.create("q")
    # 524288 + 524280 + len("k") + len("String") + len("xx") == 1 MiB + 1
    entries = (entry("a", "x" * 524_288),
               entry("b", "x" * 524_280, message_attributes={"k": S("xx")}))
    env.fails(SendMessageBatch(q, entries), BATCH_TOO_LONG)
    entries = (entry("a", "x" * 524_288),
               entry("b", "x" * 524_280, message_attributes={"k": S("x")}))
    r = env.run(SendMessageBatch(q, entries))
    assert len(r.successful) == 2


def test_batch_total_size_exactly_one_mib_is_accepted(env):
    q = env.create("q")
    r = env.run(SendMessageBatch(q, (entry("a", "x" * 524_288), entry("b", "y" * 524_288))))
    assert len(r.successful) == 2 and r.failed == ()
    assert env.counts(q) == (2, 0, 0)


def test_batch_per_entry_failures_alongside_successes(env):
    q = env.create("q", MaximumMessageSize=1024)
    r = env.run(SendMessageBatch(q, (
        entry("ok1", "first"),
        entry("badchar", "a\x00"),
        entry("nobody", None),
        entry("ok2", "second", delay_seconds=5),
        entry("baddelay", "d", delay_seconds=901),
        entry("badattr", "a", message_attributes={"AWS.x": S("v")}),
        entry("toobig", "x" * 1025),
        entry("dedup", "d", deduplication_id="x"),
    )))
    assert [e.id for e in r.successful] == ["ok1", "ok2"]
    failed = {f.id: f for f in r.failed}
    assert {k: f.code for k, f in failed.items()} == {
        "badchar": INVALID_MESSAGE_CONTENTS,
        "nobody": MISSING_PARAMETER,
        "baddelay": INVALID_PARAMETER_VALUE,
        "badattr": INVALID_PARAMETER_VALUE,
        "toobig": INVALID_PARAMETER_VALUE,
        "dedup": INVALID_PARAMETER_VALUE,
    }
    assert all(f.sender_fault for f in r.failed)
    assert all(f.message for f in r.failed)
    added = env.of_type(MessageAdded)
    assert len(env.mutations) == len(added) == 2
    assert [a.message.body for a in added] == ["first", "second"]
    assert env.counts(q) == (1, 0, 1)


def test_batch_entry_results_carry_attribute_md5s(env):
    q = env.create("q")
    attrs = {"k": S("v")}
    sys_attrs = {"AWSTraceHeader": S("Root=1-abc")}
    r = env.run(SendMessageBatch(q, (entry("a", "x", message_attributes=attrs, system_attributes=sys_attrs),
                                     entry("b", "y"))))
    a, b = r.successful
    assert a.md5_of_message_attributes == md5mod.md5_of_attributes(attrs)
    assert a.md5_of_message_system_attributes == md5mod.md5_of_attributes(sys_attrs)
    assert b.md5_of_message_attributes is None and b.md5_of_message_system_attributes is None


def test_batch_sender_id_is_recorded(env):
    q = env.create("q")
    env.run(SendMessageBatch(q, (entry("a"),), sender_id="AIDABATCH"))
    (m,) = env.receive(q, attribute_names=("SenderId",))
    assert m.attributes == {"SenderId": "AIDABATCH"}


def test_fifo_batch_sequence_numbers_follow_entry_order(env):
    q = env.create("q.fifo")
    r = env.run(SendMessageBatch(q, tuple(entry(f"e{i}", f"m{i}", group_id="g", deduplication_id=f"d{i}")
                                          for i in range(5))))
    seqs = [e.sequence_number for e in r.successful]
    assert all(s is not None and re.fullmatch(r"\d{20}", s) for s in seqs)
    assert [int(s) for s in seqs] == sorted({int(s) for s in seqs})
    assert [m.body for m in env.receive(q)] == [f"m{i}" for i in range(5)]


def test_fifo_batch_entry_missing_group_id_fails_the_whole_request(env):
    # AWS rejects the whole request (LocalStack AWS-validated snapshot
    # test_send_batch_missing_message_group_id_for_fifo_queue): InvalidParameterValue,
    # "The request must contain the parameter MessageGroupId."
    q = env.create("q.fifo")
    env.fails(SendMessageBatch(q, (entry("a", "x", group_id="g", deduplication_id="d1"),
                                   entry("b", "y", deduplication_id="d2"))), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (0, 0, 0)


def test_fifo_batch_entry_missing_dedup_id_fails_the_whole_request(env):
    # AWS rejects the whole request (LocalStack AWS-validated snapshot
    # test_send_batch_missing_deduplication_id_for_fifo_queue).
    q = env.create("q.fifo")
    err = env.fails(SendMessageBatch(q, (entry("a", "x", group_id="g", deduplication_id="d1"),
                                         entry("b", "y", group_id="g"))), INVALID_PARAMETER_VALUE)
    assert err.message == ("The queue should either have ContentBasedDeduplication enabled or "
                           "MessageDeduplicationId provided explicitly")
    assert env.counts(q) == (0, 0, 0)


# =============================================================================================
# ReceiveMessage
# =============================================================================================

def test_receive_from_empty_queue_emits_nothing(env):
    q = env.create("q")
    assert env.receive(q) == ()
    assert env.mutations == []


def test_receive_emits_message_changed_with_receipt_and_visibility(env):
    q = env.create("q", VisibilityTimeout=7)
    sent = env.send(q, "m")
    env.advance(100)
    (m,) = env.receive(q)
    (ch,) = env.mutations
    assert isinstance(ch, MessageChanged)
    assert ch.qid == env.qids[q] and ch.message_id == sent.message_id
    assert ch.receipt == m.receipt_handle
    assert ch.visible_ms == env.now() + 7_000
    assert ch.receive_count == 1
    assert ch.first_receive_ms == ch.last_receive_ms == env.now()
    assert (m.body, m.md5_of_body, m.message_id) == ("m", sent.md5_of_body, sent.message_id)
    assert env.counts(q) == (0, 1, 0)


def test_receive_default_max_is_one_and_never_more_than_asked(env):
    q = env.create("q")
    for i in range(15):
        env.send(q, f"m{i}")
    assert len(env.receive(q, n=None)) == 1
    assert len(env.receive(q, n=10)) == 10
    assert len(env.receive(q, n=10)) == 4
    assert env.receive(q, n=10) == ()
    assert env.counts(q) == (0, 15, 0)


def test_receive_standard_returns_oldest_first(env):
    q = env.create("q")
    for i in range(5):
        env.send(q, f"m{i}")
    assert [m.body for m in env.receive(q)] == [f"m{i}" for i in range(5)]


@pytest.mark.parametrize("n", [0, -1, 11, 100])
def test_receive_max_number_of_messages_out_of_range(env, n):
    q = env.create("q")
    env.send(q, "m")
    err = env.fails(ReceiveMessage(q, max_number_of_messages=n), INVALID_PARAMETER_VALUE)
    if n == 11:
        # AWS wording (LocalStack snapshot test_send_receive_max_number_of_messages).
        assert err.message == ("Value 11 for parameter MaxNumberOfMessages is invalid. "
                               "Reason: Must be between 1 and 10, if provided.")
    assert env.counts(q) == (1, 0, 0)


@pytest.mark.parametrize("n", [1, 10])
def test_receive_max_number_of_messages_bounds(env, n):
    q = env.create("q")
    for i in range(12):
        env.send(q, f"m{i}")
    assert len(env.receive(q, n=n)) == n


def test_receive_visibility_timeout_override(env):
    q = env.create("q")  # default 30 s
    sent = env.send(q, "m")
    env.receive(q, visibility_timeout=5)
    (ch,) = env.of_type(MessageChanged)
    assert ch.visible_ms == env.now() + 5_000
    env.advance(4_999)
    assert env.receive(q) == ()
    env.advance(1)
    (m,) = env.receive(q)
    assert m.message_id == sent.message_id


def test_receive_visibility_timeout_zero_leaves_message_visible(env):
    q = env.create("q")
    env.send(q, "m")
    (a,) = env.receive(q, visibility_timeout=0)
    (b,) = env.receive(q, visibility_timeout=0)
    assert a.message_id == b.message_id
    assert env.counts(q) == (1, 0, 0)


@pytest.mark.parametrize("vt", [-1, 43_201])
def test_receive_visibility_timeout_out_of_range(env, vt):
    q = env.create("q")
    env.send(q, "m")
    env.fails(ReceiveMessage(q, visibility_timeout=vt), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (1, 0, 0)


def test_receive_visibility_timeout_upper_bound(env):
    q = env.create("q")
    env.send(q, "m")
    env.receive(q, visibility_timeout=43_200)
    (ch,) = env.of_type(MessageChanged)
    assert ch.visible_ms == env.now() + 43_200_000


@pytest.mark.parametrize("wait", [-1, 21])
def test_receive_wait_time_out_of_range(env, wait):
    q = env.create("q")
    env.send(q, "m")
    env.fails(ReceiveMessage(q, wait_time_seconds=wait), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (1, 0, 0)


@pytest.mark.parametrize("wait", [0, 20])
def test_receive_wait_time_bounds(env, wait):
    q = env.create("q")
    env.send(q, "m")
    assert len(env.receive(q, wait_time_seconds=wait)) == 1


def test_receive_hands_out_a_fresh_receipt_handle_each_time(env):
    q = env.create("q")
    env.send(q, "m")
    handles = [env.receive(q, visibility_timeout=0)[0].receipt_handle for _ in range(5)]
    assert len(set(handles)) == 5


def test_receive_system_attributes(env):
    q = env.create("q")
    t_sent = env.now()
    env.send(q, "m", sender_id="AIDAEXAMPLE")
    env.advance(1_500)
    t_first = env.now()
    (m,) = env.receive(q, visibility_timeout=1, attribute_names=("All",))
    assert m.attributes == {
        "SenderId": "AIDAEXAMPLE",
        "SentTimestamp": str(t_sent),
        "ApproximateReceiveCount": "1",
        "ApproximateFirstReceiveTimestamp": str(t_first),
    }
    env.advance(2_000)
    (m,) = env.receive(q, system_attribute_names=("All",))
    assert m.attributes["ApproximateReceiveCount"] == "2"
    assert m.attributes["ApproximateFirstReceiveTimestamp"] == str(t_first)
    assert m.attributes["SentTimestamp"] == str(t_sent)


def test_receive_specific_system_attribute_names(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q, visibility_timeout=0, attribute_names=("SentTimestamp",))
    assert set(m.attributes) == {"SentTimestamp"}
    (m,) = env.receive(q, visibility_timeout=0, system_attribute_names=("ApproximateReceiveCount", "SenderId"))
    assert m.attributes == {"ApproximateReceiveCount": "2", "SenderId": "000000000000"}
    # the legacy AttributeNames and MessageSystemAttributeNames are combined
    (m,) = env.receive(q, visibility_timeout=0, attribute_names=("SenderId",),
                       system_attribute_names=("SentTimestamp",))
    assert set(m.attributes) == {"SenderId", "SentTimestamp"}
    (m,) = env.receive(q, visibility_timeout=0)
    assert m.attributes == {}


def test_receive_queue_attribute_names_in_attribute_names_are_ignored(env):
    # API reference: other valid names such as ApproximateNumberOfMessages are ignored.
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q, attribute_names=("ApproximateNumberOfMessages", "VisibilityTimeout"))
    assert m.attributes == {}


def test_receive_unknown_system_attribute_name_is_rejected(env):
    q = env.create("q")
    env.send(q, "m")
    env.fails(ReceiveMessage(q, attribute_names=("Bogus",)), INVALID_ATTRIBUTE_NAME)
    env.fails(ReceiveMessage(q, system_attribute_names=("Bogus",)), INVALID_ATTRIBUTE_NAME)
    assert env.counts(q) == (1, 0, 0)


# Attribute set and digests recorded from AWS (LocalStack snapshot
# test_receive_message_message_attribute_names_filters).
AWS_ATTRS = {"Help.Me": S("Me"), "Hello": S("There"), "General": S("Kenobi")}


def _receive_attrs(env: Env, q: QueueKey, names: tuple[str, ...]):
    (m,) = env.receive(q, visibility_timeout=0, message_attribute_names=names)
    return dict(m.message_attributes), m.md5_of_message_attributes


def test_receive_message_attribute_names_all_exact_and_missing(env):
    q = env.create("q")
    env.send(q, "msg", message_attributes=AWS_ATTRS)
    assert _receive_attrs(env, q, ()) == ({}, None)
    assert _receive_attrs(env, q, ("All",)) == (AWS_ATTRS, "4c360f3fdafd970e05fae2f149d997f5")
    assert _receive_attrs(env, q, (".*",)) == (AWS_ATTRS, "4c360f3fdafd970e05fae2f149d997f5")
    assert _receive_attrs(env, q, ("Foo", "Help")) == ({}, None)
    assert _receive_attrs(env, q, ("Hello", "General")) == (
        {"Hello": AWS_ATTRS["Hello"], "General": AWS_ATTRS["General"]}, "fca026605781cb4126a1e9044df24232")
    assert _receive_attrs(env, q, ("Foo", "Hello")) == (
        {"Hello": AWS_ATTRS["Hello"]}, "a311262e065454b75da111d535b8dacd")


def test_receive_message_attribute_names_prefix_wildcard(env):
    # AWS: "Hel.*" returns both "Hello" and "Help.Me" -- the prefix is what precedes ".*".
    q = env.create("q")
    env.send(q, "msg", message_attributes=AWS_ATTRS)
    assert _receive_attrs(env, q, ("Hel.*",)) == (
        {"Hello": AWS_ATTRS["Hello"], "Help.Me": AWS_ATTRS["Help.Me"]}, "83fee93c1bcd8b9a5a923ffacdc636c7")


def test_receive_message_attribute_names_dotted_prefix(env):
    q = env.create("q")
    attrs = {"color.red": S("1"), "color.blue": S("2"), "size": N("3")}
    env.send(q, "msg", message_attributes=attrs)
    subset = {k: v for k, v in attrs.items() if k.startswith("color.")}
    assert _receive_attrs(env, q, ("color.*",)) == (subset, md5mod.md5_of_attributes(subset))
    assert _receive_attrs(env, q, ("color.*", "size")) == (attrs, md5mod.md5_of_attributes(attrs))


def test_receive_message_attribute_names_asterisk_means_all(env):
    # AWS returns every attribute for MessageAttributeNames=["*"] (LocalStack snapshot
    # test_receive_message_message_attribute_names_filters, "all_wildcard_asterisk").
    q = env.create("q")
    env.send(q, "msg", message_attributes=AWS_ATTRS)
    assert _receive_attrs(env, q, ("*",)) == (AWS_ATTRS, "4c360f3fdafd970e05fae2f149d997f5")


def test_receive_message_attribute_names_illegal_names_are_ignored(env):
    # AWS answers normally, without attributes, for names such as "AWS." and "..foo".
    q = env.create("q")
    env.send(q, "msg", message_attributes=AWS_ATTRS)
    assert _receive_attrs(env, q, ("AWS.",)) == ({}, None)
    assert _receive_attrs(env, q, ("..foo",)) == ({}, None)


def test_visibility_timeout_expiry_makes_message_receivable_again(env):
    q = env.create("q")
    sent = env.send(q, "m")
    (first,) = env.receive(q)
    assert env.counts(q) == (0, 1, 0)
    env.advance(29_999)
    assert env.receive(q) == ()
    env.advance(1)
    assert env.counts(q) == (1, 0, 0)
    (again,) = env.receive(q, attribute_names=("ApproximateReceiveCount",))
    assert again.message_id == sent.message_id
    assert again.receipt_handle != first.receipt_handle
    assert again.attributes == {"ApproximateReceiveCount": "2"}
    assert env.counts(q) == (0, 1, 0)


def test_retention_expired_messages_are_never_delivered(env):
    q = env.create("q", MessageRetentionPeriod=60)
    sent = env.send(q, "m")
    env.advance(59_999)
    (m,) = env.receive(q, visibility_timeout=0)
    assert m.message_id == sent.message_id
    env.advance(1)
    assert env.receive(q) == ()
    env.tick()
    assert env.counts(q) == (0, 0, 0)
    assert env.receive(q) == ()


def test_retention_tick_removes_expired_messages_oldest_first(env):
    q = env.create("q", MessageRetentionPeriod=60)
    first = env.send(q, "first").message_id
    env.advance(30_000)
    second = env.send(q, "second").message_id
    env.advance(29_999)
    env.tick()
    assert env.of_type(MessageDeleted) == []
    env.advance(1)
    env.tick()
    assert env.of_type(MessageDeleted) == [MessageDeleted(env.qids[q], first)]
    assert env.counts(q) == (1, 0, 0)
    env.advance(30_000)
    env.tick()
    assert env.of_type(MessageDeleted) == [MessageDeleted(env.qids[q], second)]
    assert env.counts(q) == (0, 0, 0)


def test_retention_applies_to_in_flight_and_delayed_messages(env):
    q = env.create("q", MessageRetentionPeriod=60)
    env.send(q, "inflight")
    env.send(q, "delayed", delay_seconds=900)
    env.receive(q, visibility_timeout=3_600)
    assert env.counts(q) == (0, 1, 1)
    env.advance(60_000)
    env.tick()
    assert len(env.of_type(MessageDeleted)) == 2
    assert env.counts(q) == (0, 0, 0)
    env.advance(3_600_000)
    assert env.receive(q) == ()


# =============================================================================================
# DeleteMessage
# =============================================================================================

def test_delete_removes_the_message(env):
    q = env.create("q")
    sent = env.send(q, "m")
    (m,) = env.receive(q)
    env.delete(q, m.receipt_handle)
    assert env.mutations == [MessageDeleted(env.qids[q], sent.message_id)]
    assert env.counts(q) == (0, 0, 0)
    env.advance(60_000)
    assert env.receive(q) == ()


@pytest.mark.parametrize("handle", ["not a handle!!", "abc", "AQEB" + "=" * 5, "x" * 2000,
                                    "bm9waGFuZGxl"])  # base64 of "nohandle"
def test_delete_malformed_handle_is_receipt_handle_invalid(env, handle):
    q = env.create("q")
    env.send(q, "m")
    env.fails(DeleteMessage(q, handle), RECEIPT_HANDLE_IS_INVALID)
    assert env.counts(q) == (1, 0, 0)


@pytest.mark.parametrize("handle", [None, ""], ids=["absent", "empty"])
def test_delete_missing_handle_is_missing_parameter(env, handle):
    q = env.create("q")
    env.fails(DeleteMessage(q, handle), MISSING_PARAMETER)


def test_delete_twice_is_ok_and_emits_nothing_the_second_time(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q)
    env.delete(q, m.receipt_handle)
    assert len(env.mutations) == 1
    env.delete(q, m.receipt_handle)
    assert env.mutations == []
    assert env.counts(q) == (0, 0, 0)


def test_handles_work_on_a_restored_or_replicated_storage():
    """Handles are found through an index that restore and apply rebuild, not only execute."""
    clock = ManualClock(START_MS)
    master, replica = Storage(clock, IdSource(1)), Storage(clock, IdSource(2))

    def run(command):
        result, mutations = master.execute(command)
        for m in mutations:
            replica.apply(m)
        return result

    q = run(CreateQueue(Namespace(), "q")).queue
    for body in ("a", "b", "c"):
        run(SendMessage(q, body))
    a, b, c = run(ReceiveMessage(q, max_number_of_messages=3)).messages
    run(ChangeMessageVisibility(q, b.receipt_handle, 100))
    restored = Storage(clock, IdSource(3))
    restored.restore(master.snapshot())
    for other in (restored, replica):
        _, muts = other.execute(DeleteMessage(q, a.receipt_handle))
        assert [type(m) for m in muts] == [MessageDeleted]
        _, muts = other.execute(ChangeMessageVisibility(q, b.receipt_handle, 0))
        assert [type(m) for m in muts] == [MessageChanged]
        _, muts = other.execute(DeleteMessage(q, b.receipt_handle))  # the handle outlives visibility
        assert [type(m) for m in muts] == [MessageDeleted]
        assert_indexes_consistent(other)
    assert restored.digest() == replica.digest()


def test_delete_with_stale_handle_succeeds_but_does_not_delete(env):
    # API reference: without the most recently received handle "the request succeeds, but the
    # message will not be deleted".
    q = env.create("q")
    env.send(q, "m")
    (old,) = env.receive(q, visibility_timeout=0)
    (new,) = env.receive(q)
    env.delete(q, old.receipt_handle)
    assert env.mutations == []
    assert env.counts(q) == (0, 1, 0)
    env.delete(q, new.receipt_handle)
    assert len(env.of_type(MessageDeleted)) == 1
    assert env.counts(q) == (0, 0, 0)


def test_delete_standard_with_latest_handle_after_visibility_expired_deletes(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q, visibility_timeout=1)
    env.advance(5_000)
    assert env.counts(q) == (1, 0, 0)
    env.delete(q, m.receipt_handle)
    assert len(env.of_type(MessageDeleted)) == 1
    assert env.counts(q) == (0, 0, 0)


def test_delete_fifo_with_expired_handle_is_rejected(env):
    # AWS: "Value <handle> for parameter ReceiptHandle is invalid. Reason: The receipt handle has
    # expired." (LocalStack AWS-validated snapshot test_fifo_delete_message_with_expired_receipt_handle;
    # LocalStack PR #12442).
    q = env.create("q.fifo")
    fifo_send(env, q, "g1-m1")
    (m,) = env.receive(q, visibility_timeout=1)
    env.advance(2_000)
    err = env.fails(DeleteMessage(q, m.receipt_handle), INVALID_PARAMETER_VALUE)
    assert "The receipt handle has expired" in err.message
    assert env.counts(q) == (1, 0, 0)


def test_delete_in_flight_message_frees_fifo_group(env):
    q = env.create("q.fifo")
    fifo_send(env, q, "a")
    fifo_send(env, q, "b")
    (m,) = env.receive(q, n=1)
    assert env.receive(q) == ()
    env.delete(q, m.receipt_handle)
    assert [x.body for x in env.receive(q)] == ["b"]


# =============================================================================================
# ChangeMessageVisibility
# =============================================================================================

def test_change_visibility_to_zero_makes_message_visible_now(env):
    q = env.create("q")
    sent = env.send(q, "m")
    (m,) = env.receive(q)
    env.change(q, m.receipt_handle, 0)
    (ch,) = env.mutations
    assert isinstance(ch, MessageChanged)
    assert ch.visible_ms == env.now() and ch.receipt == m.receipt_handle and ch.receive_count == 1
    assert env.counts(q) == (1, 0, 0)
    (again,) = env.receive(q)
    assert again.message_id == sent.message_id


def test_change_visibility_extends_from_now(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q)            # 30 s
    env.advance(20_000)
    env.change(q, m.receipt_handle, 60)
    (ch,) = env.mutations
    assert ch.visible_ms == env.now() + 60_000
    env.advance(59_999)
    assert env.receive(q) == ()
    assert env.counts(q) == (0, 1, 0)
    env.advance(1)
    assert len(env.receive(q)) == 1


def test_change_visibility_can_shorten(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q, visibility_timeout=600)
    env.change(q, m.receipt_handle, 5)
    env.advance(5_000)
    assert len(env.receive(q)) == 1


@pytest.mark.parametrize("timeout", [-1, 43_201])
def test_change_visibility_out_of_range(env, timeout):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q)
    env.fails(ChangeMessageVisibility(q, m.receipt_handle, timeout), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (0, 1, 0)


def test_change_visibility_missing_timeout(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q)
    env.fails(ChangeMessageVisibility(q, m.receipt_handle, None), MISSING_PARAMETER)


def test_change_visibility_missing_or_malformed_handle(env):
    q = env.create("q")
    env.send(q, "m")
    env.receive(q)
    env.fails(ChangeMessageVisibility(q, None, 10), MISSING_PARAMETER)
    env.fails(ChangeMessageVisibility(q, "", 10), MISSING_PARAMETER)
    env.fails(ChangeMessageVisibility(q, "garbage!", 10), RECEIPT_HANDLE_IS_INVALID)


def test_change_visibility_not_in_flight_succeeds_without_effect(env):
    # LocalStack's AWS-validated test_change_message_visibility_after_visibility_timeout_expiration
    # (200); JustEat LocalSqsSnsMessaging's ChangeMessageVisibilityAsync_MessageNotInFlight,
    # verified against AWS (the message stays visible).
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q, visibility_timeout=1)
    env.advance(1_000)
    env.change(q, m.receipt_handle, 10)
    assert env.mutations == []
    assert env.counts(q) == (1, 0, 0)
    assert [x.body for x in env.receive(q)] == ["m"]


def test_change_visibility_of_deleted_message(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q)
    env.delete(q, m.receipt_handle)
    err = env.fails(ChangeMessageVisibility(q, m.receipt_handle, 10), INVALID_PARAMETER_VALUE)
    assert "ReceiptHandle" in err.message


def test_change_visibility_with_superseded_handle_takes_effect(env):
    # LocalStack's AWS-validated test_terminate_visibility_timeout_after_receive.
    q = env.create("q")
    env.send(q, "m")
    (old,) = env.receive(q, visibility_timeout=0)
    (new,) = env.receive(q, visibility_timeout=100)
    env.change(q, old.receipt_handle, 0)
    (ch,) = env.mutations
    assert ch.receipt == new.receipt_handle and ch.visible_ms == env.now()
    assert env.counts(q) == (1, 0, 0)
    (again,) = env.receive(q)
    assert again.message_id == new.message_id


def test_change_visibility_total_limited_to_twelve_hours_from_receive(env):
    q = env.create("q")
    env.send(q, "m")
    (m,) = env.receive(q, visibility_timeout=7_200)
    env.advance(3_600_000)
    env.fails(ChangeMessageVisibility(q, m.receipt_handle, TWELVE_HOURS_S - 3_600 + 1), INVALID_PARAMETER_VALUE)
    env.change(q, m.receipt_handle, TWELVE_HOURS_S - 3_600)
    (ch,) = env.mutations
    assert ch.visible_ms == START_MS + TWELVE_HOURS_S * 1000
    # a new receive starts a new 12-hour window
    env.change(q, m.receipt_handle, 0)
    env.advance(1_000)
    (m2,) = env.receive(q)
    env.change(q, m2.receipt_handle, TWELVE_HOURS_S)
    assert env.mutations[0].visible_ms == env.now() + TWELVE_HOURS_S * 1000


def test_change_visibility_zero_on_fifo_head_unblocks_the_group(env):
    q = env.create("q.fifo")
    fifo_send(env, q, "a")
    fifo_send(env, q, "b")
    (m,) = env.receive(q, n=1)
    assert env.receive(q) == ()
    env.change(q, m.receipt_handle, 0)
    assert [x.body for x in env.receive(q)] == ["a", "b"]


# --- batch variants of delete and change ----------------------------------------------------

def test_delete_batch_per_entry_results(env):
    q = env.create("q")
    for i in range(3):
        env.send(q, f"m{i}")
    ms = env.receive(q, visibility_timeout=0)
    stale = ms[2].receipt_handle
    fresh = {m.body: m for m in env.receive(q)}
    r = env.run(DeleteMessageBatch(q, (
        DeleteMessageBatchEntry("ok0", fresh["m0"].receipt_handle),
        DeleteMessageBatchEntry("ok1", fresh["m1"].receipt_handle),
        DeleteMessageBatchEntry("stale", stale),
        DeleteMessageBatchEntry("bad", "not-a-handle!"),
        DeleteMessageBatchEntry("none", None),
    )))
    assert set(r.successful) == {"ok0", "ok1", "stale"}
    assert {f.id: f.code for f in r.failed} == {"bad": RECEIPT_HANDLE_IS_INVALID, "none": MISSING_PARAMETER}
    assert all(f.sender_fault for f in r.failed)
    assert sorted(m.message_id for m in env.of_type(MessageDeleted)) == sorted(
        [fresh["m0"].message_id, fresh["m1"].message_id])
    assert len(env.mutations) == 2
    assert env.counts(q) == (0, 1, 0)


def test_delete_batch_request_level_errors(env):
    q = env.create("q")
    env.fails(DeleteMessageBatch(q, ()), EMPTY_BATCH)
    env.fails(DeleteMessageBatch(q, tuple(DeleteMessageBatchEntry(f"e{i}", "h") for i in range(11))),
              TOO_MANY_ENTRIES)
    env.fails(DeleteMessageBatch(q, (DeleteMessageBatchEntry("a", "h"), DeleteMessageBatchEntry("a", "h"))),
              IDS_NOT_DISTINCT)
    env.fails(DeleteMessageBatch(q, (DeleteMessageBatchEntry("a:b", "h"),)), INVALID_BATCH_ID)


def test_change_visibility_batch_per_entry_results(env):
    q = env.create("q")
    for i in range(4):
        env.send(q, f"m{i}")
    ms = {m.body: m for m in env.receive(q, visibility_timeout=100)}
    expired_msg = ms["m3"]
    env.change(q, expired_msg.receipt_handle, 0)
    env.advance(1)
    r = env.run(ChangeMessageVisibilityBatch(q, (
        ChangeMessageVisibilityBatchEntry("zero", ms["m0"].receipt_handle, 0),
        ChangeMessageVisibilityBatchEntry("extend", ms["m1"].receipt_handle, 500),
        ChangeMessageVisibilityBatchEntry("range", ms["m2"].receipt_handle, 43_201),
        ChangeMessageVisibilityBatchEntry("notinflight", expired_msg.receipt_handle, 10),
        ChangeMessageVisibilityBatchEntry("bad", "garbage!", 10),
        ChangeMessageVisibilityBatchEntry("notimeout", ms["m2"].receipt_handle, None),
    )))
    assert list(r.successful) == ["zero", "extend", "notinflight"]
    assert {f.id: f.code for f in r.failed} == {
        "range": INVALID_PARAMETER_VALUE,
        "bad": RECEIPT_HANDLE_IS_INVALID,
        "notimeout": MISSING_PARAMETER,
    }
    changed = env.of_type(MessageChanged)
    assert len(env.mutations) == len(changed) == 2
    assert {c.message_id: c.visible_ms for c in changed} == {
        ms["m0"].message_id: env.now(), ms["m1"].message_id: env.now() + 500_000}
    assert env.counts(q) == (2, 2, 0)


def test_change_visibility_batch_request_level_errors(env):
    q = env.create("q")
    env.fails(ChangeMessageVisibilityBatch(q, ()), EMPTY_BATCH)
    env.fails(ChangeMessageVisibilityBatch(
        q, tuple(ChangeMessageVisibilityBatchEntry(f"e{i}", "h", 1) for i in range(11))), TOO_MANY_ENTRIES)
    env.fails(ChangeMessageVisibilityBatch(
        q, (ChangeMessageVisibilityBatchEntry("a", "h", 1), ChangeMessageVisibilityBatchEntry("a", "h", 1))),
        IDS_NOT_DISTINCT)
    env.fails(ChangeMessageVisibilityBatch(q, (ChangeMessageVisibilityBatchEntry("", "h", 1),)), INVALID_BATCH_ID)


# =============================================================================================
# FIFO
# =============================================================================================

def test_fifo_send_result_and_mutation(env):
    q = env.create("q.fifo")
    r = env.send(q, "m", group_id="g", deduplication_id="d1")
    assert re.fullmatch(r"\d{20}", r.sequence_number or "")
    (added,) = env.mutations
    assert isinstance(added, MessageAdded)
    assert added.message.group_id == "g" and added.message.deduplication_id == "d1"
    assert added.message.sequence_number == int(r.sequence_number)
    assert added.dedup is not None
    assert added.dedup.message_id == r.message_id
    assert added.dedup.expires_ms == env.now() + DEDUP_WINDOW_MS


def test_fifo_order_within_a_group_in_one_receive(env):
    q = env.create("q.fifo")
    for i in range(7):
        fifo_send(env, q, f"m{i}")
    assert [m.body for m in env.receive(q)] == [f"m{i}" for i in range(7)]


def test_fifo_order_within_a_group_across_receives(env):
    q = env.create("q.fifo")
    for i in range(4):
        fifo_send(env, q, f"m{i}")
    got = []
    for _ in range(4):
        (m,) = env.receive(q, n=1)
        got.append(m.body)
        env.delete(q, m.receipt_handle)
    assert got == ["m0", "m1", "m2", "m3"]


def test_fifo_group_in_flight_is_blocked_other_groups_proceed(env):
    q = env.create("q.fifo")
    fifo_send(env, q, "a1", group="a")
    fifo_send(env, q, "b1", group="b")
    fifo_send(env, q, "a2", group="a")
    fifo_send(env, q, "b2", group="b")
    (m,) = env.receive(q, n=1)
    assert m.body == "a1"
    # group a is blocked by a1 in flight; group b comes whole and in order
    assert [x.body for x in env.receive(q)] == ["b1", "b2"]
    assert env.receive(q) == ()
    # blocked messages still count as visible, as SQS reports them
    assert env.counts(q) == (1, 3, 0)
    env.delete(q, m.receipt_handle)
    assert [x.body for x in env.receive(q)] == ["a2"]


def test_fifo_expired_visibility_redelivers_in_order(env):
    q = env.create("q.fifo")
    for i in range(3):
        fifo_send(env, q, f"m{i}")
    (first,) = env.receive(q, n=1, visibility_timeout=10)
    env.advance(10_000)
    ms = env.receive(q, attribute_names=("ApproximateReceiveCount",))
    assert [m.body for m in ms] == ["m0", "m1", "m2"]
    assert [m.attributes["ApproximateReceiveCount"] for m in ms] == ["2", "1", "1"]


def test_fifo_groups_served_in_order_their_head_became_visible(env):
    # LocalStack's AWS-validated test_fifo_receive_message_with_zero_visibility_timeout: the
    # groups received with timeout 0 queue up behind g3, which was never received.
    q = env.create("q.fifo")
    for body, group in (("g1-m1", "g1"), ("g2-m1", "g2"), ("g2-m2", "g2"), ("g3-m1", "g3"), ("g1-m2", "g1")):
        fifo_send(env, q, body, group=group)
        env.advance(1)
    assert [m.body for m in env.receive(q, n=3, visibility_timeout=0)] == ["g1-m1", "g1-m2", "g2-m1"]
    assert [m.body for m in env.receive(q, visibility_timeout=0)] == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


@pytest.mark.parametrize("delete_both,expected", [
    (True, ["g2-m1", "g2-m2", "g1-m3", "g1-m4", "g3-m1"]),
    (False, ["g2-m1", "g2-m2", "g3-m1"]),
])
def test_fifo_group_becomes_receivable_again_once_its_received_messages_are_deleted(env, delete_both, expected):
    # LocalStack's AWS-validated test_fifo_message_group_visibility_after_delete (AWS's order) and
    # test_fifo_message_group_visibility_after_partial_delete.
    q = env.create("q.fifo")
    for body, group in (("g1-m1", "g1"), ("g2-m1", "g2"), ("g1-m2", "g1"), ("g2-m2", "g2"),
                        ("g1-m3", "g1"), ("g1-m4", "g1"), ("g3-m1", "g3")):
        fifo_send(env, q, body, group=group)
        env.advance(1)
    received = env.receive(q, n=2)
    assert [m.body for m in received] == ["g1-m1", "g1-m2"]
    for m in received[:2 if delete_both else 1]:
        env.delete(q, m.receipt_handle)
    assert [m.body for m in env.receive(q)] == expected


@pytest.mark.parametrize("extended,expected", [(0, []), (1, ["foo"]), (2, ["foo", "bar"])])
def test_fifo_extending_one_message_hides_it_and_the_rest_of_its_group(env, extended, expected):
    # LocalStack's AWS-validated test_fifo_group_visibility_extends_with_change_message_visibility.
    q = env.create("q.fifo", VisibilityTimeout=1)
    for body in ("foo", "bar", "baz"):
        fifo_send(env, q, body)
    ms = env.receive(q, n=5)
    assert [m.body for m in ms] == ["foo", "bar", "baz"]
    env.change(q, ms[extended].receipt_handle, 4)
    env.advance(2_500)
    assert [m.body for m in env.receive(q, n=5)] == expected


def test_fifo_groups_served_in_order_of_their_oldest_message(env):
    q = env.create("q.fifo")
    fifo_send(env, q, "c1", group="c")
    fifo_send(env, q, "a1", group="a")
    fifo_send(env, q, "b1", group="b")
    fifo_send(env, q, "a2", group="a")
    assert [m.body for m in env.receive(q)] == ["c1", "a1", "a2", "b1"]


def test_fifo_receive_skips_a_message_deleted_out_of_order(env):
    # m1 deleted while m0 is still there: its id stays in the group's order until the head
    # passes it, and a receive walking the group must step over it.
    q = env.create("q.fifo")
    for i in range(5):
        fifo_send(env, q, f"m{i}")
    m0, m1, m2 = env.receive(q, n=3)
    env.delete(q, m1.receipt_handle)
    env.change(q, m0.receipt_handle, 0)
    env.change(q, m2.receipt_handle, 0)
    assert [m.body for m in env.receive(q, n=2)] == ["m0", "m2"]
    env.advance(30_000)
    assert [m.body for m in env.receive(q)] == ["m0", "m2", "m3", "m4"]


def test_fifo_receive_walks_on_past_messages_removed_during_it(env):
    # The head of the group expires (retention) and is deleted by the receive that finds it,
    # the next one goes to the DLQ: both leave the group while the receive walks it.
    src, dlq = env.create_with_dlq("src.fifo", max_receive_count=1, MessageRetentionPeriod=60)
    fifo_send(env, src, "old")
    env.advance(30_000)
    fifo_send(env, src, "poison")
    (p,) = env.receive(src, n=1)
    assert p.body == "old"
    env.change(src, p.receipt_handle, 0)
    for i in range(3):
        fifo_send(env, src, f"m{i}")
    env.advance(30_000)  # "old" is past retention now, "poison" is not
    (m,) = env.receive(src, n=1)
    assert m.body == "poison"
    env.change(src, m.receipt_handle, 0)
    assert [x.body for x in env.receive(src)] == ["m0", "m1", "m2"]
    assert [x.body for x in env.receive(dlq)] == ["poison"]
    assert env.counts(src) == (0, 3, 0)


def test_fifo_receive_walks_on_when_a_removal_also_pops_ids_deleted_out_of_order(env):
    # The head goes to the DLQ during the receive; removing it pops the ids after it that were
    # deleted out of order too, more ids than the walk had passed.
    src, dlq = env.create_with_dlq("src.fifo", max_receive_count=1)
    for i in range(5):
        fifo_send(env, src, f"m{i}")
    m0, m1, m2 = env.receive(src, n=3)
    env.delete(src, m1.receipt_handle)
    env.delete(src, m2.receipt_handle)
    env.change(src, m0.receipt_handle, 0)
    assert [x.body for x in env.receive(src)] == ["m3", "m4"]
    assert [x.body for x in env.receive(dlq)] == ["m0"]


def test_fifo_dedup_by_id_within_five_minutes_even_after_delete(env):
    q = env.create("q.fifo")
    first = env.send(q, "one", group_id="g", deduplication_id="d")
    env.advance(60_000)
    dup = env.send(q, "two", group_id="g", deduplication_id="d")
    assert dup.message_id == first.message_id
    assert env.mutations == []
    assert env.counts(q) == (1, 0, 0)
    (m,) = env.receive(q)
    env.delete(q, m.receipt_handle)
    env.advance(DEDUP_WINDOW_MS - 60_000 - 1)
    again = env.send(q, "three", group_id="g", deduplication_id="d")
    assert again.message_id == first.message_id
    assert env.mutations == []
    assert env.counts(q) == (0, 0, 0)
    assert env.receive(q) == ()


def test_fifo_dedup_window_ends_after_five_minutes(env):
    q = env.create("q.fifo")
    first = env.send(q, "one", group_id="g", deduplication_id="d")
    (m,) = env.receive(q)
    env.delete(q, m.receipt_handle)
    env.advance(DEDUP_WINDOW_MS)
    env.tick()
    assert [p.qid for p in env.of_type(Pruned)] == [env.qids[q]]
    later = env.send(q, "again", group_id="g", deduplication_id="d")
    assert later.message_id != first.message_id
    assert int(later.sequence_number) > int(first.sequence_number)
    assert len(env.of_type(MessageAdded)) == 1
    assert [x.body for x in env.receive(q)] == ["again"]


def test_fifo_content_based_dedup(env):
    q = env.create("q.fifo", ContentBasedDeduplication="true")
    a = env.send(q, "same", group_id="g")
    (added,) = env.of_type(MessageAdded)
    assert added.message.deduplication_id == hashlib.sha256(b"same").hexdigest()
    b = env.send(q, "same", group_id="g", message_attributes={"differs": S("only in attributes")})
    assert b.message_id == a.message_id and env.mutations == []
    c = env.send(q, "other", group_id="g")
    assert c.message_id != a.message_id
    # an explicit id takes precedence over the content
    d = env.send(q, "same", group_id="g", deduplication_id="explicit")
    assert d.message_id != a.message_id
    assert env.counts(q) == (3, 0, 0)
    (m,) = env.receive(q, n=1)
    env.delete(q, m.receipt_handle)
    assert env.send(q, "same", group_id="g").message_id == a.message_id


def test_fifo_dedup_scope_queue_spans_groups(env):
    q = env.create("q.fifo")
    a = env.send(q, "x", group_id="g1", deduplication_id="d")
    b = env.send(q, "y", group_id="g2", deduplication_id="d")
    assert a.message_id == b.message_id
    assert env.counts(q) == (1, 0, 0)


def test_purge_forgets_fifo_deduplication_ids(env):
    # LocalStack's AWS-validated test_purge_queue_clears_fifo_deduplication_cache.
    q = env.create("q.fifo")
    fifo_send(env, q, "message-1", dedup="d")
    env.run(PurgeQueue(q))
    again = fifo_send(env, q, "message-2", dedup="d")
    assert len(env.of_type(MessageAdded)) == 1
    (m,) = env.receive(q)
    assert (m.body, m.message_id) == ("message-2", again.message_id)


@pytest.mark.parametrize("created,switched,dedup_across_groups", [
    ("queue", "messageGroup", True), ("messageGroup", "queue", False)])
def test_fifo_dedup_keeps_the_scope_the_queue_was_created_with(env, created, switched, dedup_across_groups):
    # LocalStack's AWS-validated test_fifo_change_to_high_throughput_after_creation and
    # test_fifo_change_to_regular_throughput_after_creation: the attribute changes, the
    # deduplication does not.
    q = env.create("q.fifo", DeduplicationScope=created)
    throughput = "perMessageGroupId" if switched == "messageGroup" else "perQueue"
    env.run(SetQueueAttributes(q, {"DeduplicationScope": switched, "FifoThroughputLimit": throughput}))
    attrs = env.run(GetQueueAttributes(q, ("DeduplicationScope",))).attributes
    assert attrs == {"DeduplicationScope": switched}
    first = fifo_send(env, q, "one", group="g1", dedup="same")
    second = fifo_send(env, q, "two", group="g2", dedup="same")
    assert (second.message_id == first.message_id) is dedup_across_groups
    # a replica restored from a snapshot dedups the same way
    restored = Storage(ManualClock(env.now()), IdSource(7))
    restored.restore(env.storage.snapshot())
    assert restored.digest() == env.storage.digest()
    third, _ = restored.execute(SendMessage(q, "three", group_id="g3", deduplication_id="same"))
    assert (third.message_id == first.message_id) is dedup_across_groups


def test_fifo_dedup_scope_message_group(env):
    q = env.create("q.fifo", DeduplicationScope="messageGroup", FifoThroughputLimit="perMessageGroupId")
    a = env.send(q, "x", group_id="g1", deduplication_id="d")
    b = env.send(q, "y", group_id="g2", deduplication_id="d")
    assert a.message_id != b.message_id
    c = env.send(q, "z", group_id="g1", deduplication_id="d")
    assert c.message_id == a.message_id
    assert env.counts(q) == (2, 0, 0)


def test_fifo_sequence_numbers_are_strictly_increasing_20_digit_strings(env):
    q = env.create("q.fifo")
    seqs = [fifo_send(env, q, f"m{i}", group=f"g{i % 3}").sequence_number for i in range(12)]
    assert all(re.fullmatch(r"\d{20}", s or "") for s in seqs)
    assert all(int(a) < int(b) for a, b in zip(seqs, seqs[1:]))
    by_body = {f"m{i}": s for i, s in enumerate(seqs)}
    ms = env.receive(q, attribute_names=("SequenceNumber",))
    assert len(ms) == 10
    for m in ms:
        assert m.attributes["SequenceNumber"] == by_body[m.body]


def test_fifo_receive_all_attributes(env):
    q = env.create("q.fifo")
    r = env.send(q, "m", group_id="grp", deduplication_id="dd")
    (m,) = env.receive(q, attribute_names=("All",))
    assert m.attributes["MessageGroupId"] == "grp"
    assert m.attributes["MessageDeduplicationId"] == "dd"
    assert m.attributes["SequenceNumber"] == r.sequence_number
    assert {"SenderId", "SentTimestamp", "ApproximateReceiveCount",
            "ApproximateFirstReceiveTimestamp"} <= set(m.attributes)


def test_fifo_missing_group_id(env):
    q = env.create("q.fifo", ContentBasedDeduplication="true")
    err = env.fails(SendMessage(q, "m"), MISSING_PARAMETER)
    assert err.message == "The request must contain the parameter MessageGroupId."


def test_fifo_missing_dedup_id_without_content_based_dedup(env):
    q = env.create("q.fifo")
    err = env.fails(SendMessage(q, "m", group_id="g"), INVALID_PARAMETER_VALUE)
    assert err.message == ("The queue should either have ContentBasedDeduplication enabled or "
                           "MessageDeduplicationId provided explicitly")


@pytest.mark.parametrize("field,value", [
    ("group_id", "g" * 129), ("group_id", "has space"),
    ("deduplication_id", "d" * 129), ("deduplication_id", "tab\t"), ("deduplication_id", "é"),
])
def test_fifo_malformed_group_or_dedup_id(env, field, value):
    q = env.create("q.fifo")
    kw = {"group_id": "g", "deduplication_id": "d", field: value}
    env.fails(SendMessage(q, "m", **kw), INVALID_PARAMETER_VALUE)


def test_fifo_tokens_allow_punctuation_up_to_128(env):
    q = env.create("q.fifo")
    env.send(q, "m", group_id="g" * 128, deduplication_id="!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
    assert env.counts(q) == (1, 0, 0)


def test_fifo_receive_request_attempt_id_retry_returns_same_messages(env):
    q = env.create("q.fifo")
    for i in range(3):
        fifo_send(env, q, f"m{i}")
    first = env.receive(q, n=2, receive_request_attempt_id="attempt-1")
    assert [m.body for m in first] == ["m0", "m1"]
    env.advance(1_000)
    retry = env.receive(q, n=2, receive_request_attempt_id="attempt-1",
                        attribute_names=("ApproximateReceiveCount",))
    assert [(m.message_id, m.receipt_handle) for m in retry] == [(m.message_id, m.receipt_handle) for m in first]
    assert [m.attributes["ApproximateReceiveCount"] for m in retry] == ["1", "1"]
    # another attempt id does a real receive: the group is blocked
    assert env.receive(q, receive_request_attempt_id="attempt-2") == ()
    # the handles from the retry work
    for m in retry:
        env.delete(q, m.receipt_handle)
    assert [m.body for m in env.receive(q)] == ["m2"]


def test_fifo_receive_request_attempt_id_retry_resets_visibility_timeout(env):
    # API reference (ReceiveRequestAttemptId): "During a visibility timeout, subsequent calls with
    # the same ReceiveRequestAttemptId return the same messages and receipt handles. If a retry
    # occurs within the deduplication interval, it resets the visibility timeout."
    q = env.create("q.fifo")
    fifo_send(env, q, "m")
    (first,) = env.receive(q, visibility_timeout=30, receive_request_attempt_id="att")
    env.advance(20_000)
    (retry,) = env.receive(q, visibility_timeout=30, receive_request_attempt_id="att")
    assert retry.receipt_handle == first.receipt_handle
    env.advance(20_000)   # 40 s after the first receive, 20 s after the retry
    assert env.counts(q) == (0, 1, 0)
    assert env.receive(q) == ()


def test_fifo_receive_request_attempt_id_malformed(env):
    q = env.create("q.fifo")
    fifo_send(env, q, "m")
    env.fails(ReceiveMessage(q, receive_request_attempt_id="x" * 129), INVALID_PARAMETER_VALUE)
    env.fails(ReceiveMessage(q, receive_request_attempt_id="has space"), INVALID_PARAMETER_VALUE)
    assert env.counts(q) == (1, 0, 0)


def test_receive_request_attempt_id_is_ignored_on_standard(env):
    q = env.create("q")
    env.send(q, "a")
    env.send(q, "b")
    (x,) = env.receive(q, n=1, receive_request_attempt_id="same")
    (y,) = env.receive(q, n=1, receive_request_attempt_id="same")
    assert {x.body, y.body} == {"a", "b"}


# =============================================================================================
# Dead-letter queues
# =============================================================================================

def test_dlq_message_moves_on_the_receive_after_max_receive_count(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=2)
    t_sent = env.now()
    sent = env.send(src, "poison", message_attributes={"k": S("v")})
    for _ in range(2):
        (m,) = env.receive(src, visibility_timeout=0)
        assert m.message_id == sent.message_id
    env.advance(1_000)
    assert env.receive(src) == ()
    deleted, added = env.mutations
    assert deleted == MessageDeleted(env.qids[src], sent.message_id)
    assert isinstance(added, MessageAdded) and added.qid == env.qids[dlq]
    assert added.message.message_id == sent.message_id
    assert added.message.dlq_source_arn == src.arn
    assert env.counts(src) == (0, 0, 0)
    assert env.counts(dlq) == (1, 0, 0)
    (d,) = env.receive(dlq, attribute_names=("All",), message_attribute_names=("All",))
    assert (d.message_id, d.body, d.md5_of_body) == (sent.message_id, "poison", sent.md5_of_body)
    assert dict(d.message_attributes) == {"k": S("v")}
    assert d.md5_of_message_attributes == sent.md5_of_message_attributes
    assert d.attributes["DeadLetterQueueSourceArn"] == src.arn
    # a standard DLQ keeps the original enqueue time
    assert d.attributes["SentTimestamp"] == str(t_sent)
    # and the receive count goes on from the source's (LocalStack's AWS-validated
    # test_dead_letter_queue_message_attributes: maxReceiveCount 1, the DLQ shows 2)
    assert added.message.receive_count == 2
    assert d.attributes["ApproximateReceiveCount"] == "3"


def test_redrive_by_move_task_starts_the_receive_count_afresh(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    env.send(src, "poison")
    env.receive(src, visibility_timeout=0)
    env.receive(src)
    env.run(StartMessageMoveTask(env.ns, dlq.arn))
    env.tick()
    (back,) = env.of_type(MessageAdded)
    assert back.qid == env.qids[src] and back.message.receive_count == 0
    (m,) = env.receive(src, attribute_names=("ApproximateReceiveCount",))
    assert m.attributes["ApproximateReceiveCount"] == "1"


def test_dlq_move_happens_during_a_receive_that_returns_other_messages(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    poison = env.send(src, "poison").message_id
    env.receive(src, visibility_timeout=0)
    fresh = env.send(src, "fresh").message_id
    ms = env.receive(src)
    assert [m.message_id for m in ms] == [fresh]
    assert [m.message_id for m in env.receive(dlq)] == [poison]


def test_dlq_source_arn_is_only_requested_explicitly(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    env.send(src, "m")
    env.receive(src, visibility_timeout=0)
    env.receive(src)
    (d,) = env.receive(dlq, visibility_timeout=0, system_attribute_names=("DeadLetterQueueSourceArn",))
    assert d.attributes == {"DeadLetterQueueSourceArn": src.arn}
    (d,) = env.receive(dlq)
    assert d.attributes == {}


def test_message_deleted_before_reaching_max_receive_count_never_moves(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    env.send(src, "m")
    (m,) = env.receive(src)
    env.delete(src, m.receipt_handle)
    env.advance(60_000)
    assert env.receive(src) == ()
    assert env.counts(dlq) == (0, 0, 0)


def test_fifo_dlq_keeps_order(env):
    src, dlq = env.create_with_dlq("src.fifo", max_receive_count=1)
    sent = [fifo_send(env, src, f"m{i}") for i in range(4)]
    assert len(env.receive(src, visibility_timeout=0)) == 4
    assert env.receive(src) == ()
    assert len(env.of_type(MessageAdded)) == 4
    ms = env.receive(dlq, attribute_names=("All",))
    assert [m.message_id for m in ms] == [s.message_id for s in sent]
    assert [m.body for m in ms] == ["m0", "m1", "m2", "m3"]
    assert all(m.attributes["DeadLetterQueueSourceArn"] == src.arn for m in ms)
    assert all(m.attributes["MessageGroupId"] == "g" for m in ms)
    seqs = [int(m.attributes["SequenceNumber"]) for m in ms]
    assert seqs == sorted(set(seqs))


# =============================================================================================
# Message move tasks
# =============================================================================================

def fill_dlq(env: Env, n: int, name: str = "src") -> tuple[QueueKey, QueueKey, list[str]]:
    """A source queue with a DLQ holding ``n`` messages that were dead-lettered from it."""
    src, dlq = env.create_with_dlq(name, max_receive_count=1)
    ids = [env.send(src, f"m{i}").message_id for i in range(n)]
    for _ in range(2 * n + 2):
        if env.counts(dlq)[0] == n:
            break
        env.receive(src, visibility_timeout=0)
    assert env.counts(dlq) == (n, 0, 0)
    assert env.counts(src) == (0, 0, 0)
    return src, dlq, ids


def list_tasks(env: Env, source: QueueKey, max_results: int | None = None):
    return env.run(ListMessageMoveTasks(env.ns, source.arn, max_results)).results


def test_move_task_source_must_exist(env):
    env.fails(StartMessageMoveTask(env.ns, "arn:aws:sqs:us-east-1:000000000000:nope"), RESOURCE_NOT_FOUND)
    env.fails(StartMessageMoveTask(env.ns, None), MISSING_PARAMETER)


def test_move_task_source_must_be_a_dlq(env):
    q = env.create("plain")
    env.send(q, "m")
    err = env.fails(StartMessageMoveTask(env.ns, q.arn), INVALID_PARAMETER_VALUE)
    # No "Value ... Reason:" wrapping: LocalStack's AWS-recorded test_sqs_move_task.snapshot.json,
    # test_source_needs_redrive_policy.
    assert err.message == "Source queue must be configured as a Dead Letter Queue."


def test_move_task_destination_must_exist_and_match_type(env):
    src, dlq, _ = fill_dlq(env, 1)
    env.fails(StartMessageMoveTask(env.ns, dlq.arn, "arn:aws:sqs:us-east-1:000000000000:nope"),
              RESOURCE_NOT_FOUND)
    fifo = env.create("other.fifo")
    env.fails(StartMessageMoveTask(env.ns, dlq.arn, fifo.arn), INVALID_PARAMETER_VALUE)
    assert list_tasks(env, dlq) == ()


@pytest.mark.parametrize("rate", [0, -1, 501])
def test_move_task_rate_out_of_range(env, rate):
    src, dlq, _ = fill_dlq(env, 1)
    env.fails(StartMessageMoveTask(env.ns, dlq.arn, None, rate), INVALID_PARAMETER_VALUE)


@pytest.mark.parametrize("rate", [1, 500])
def test_move_task_rate_bounds_accepted(env, rate):
    src, dlq, _ = fill_dlq(env, 1)
    r = env.run(StartMessageMoveTask(env.ns, dlq.arn, None, rate))
    assert r.task_handle
    (task,) = list_tasks(env, dlq)
    assert task.max_messages_per_second == rate and task.status == "RUNNING"


def test_move_task_only_one_running_per_source(env):
    src, dlq, _ = fill_dlq(env, 2)
    env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 1))
    (started,) = env.of_type(MoveTaskUpdated)
    assert started.task.status == "RUNNING" and started.qid == env.qids[dlq]
    # LocalStack's AWS-recorded test_sqs_move_task.snapshot.json, test_start_multiple_move_tasks.
    err = env.fails(StartMessageMoveTask(env.ns, dlq.arn), INVALID_PARAMETER_VALUE)
    assert err.message == ("There is already a task running. Only one active task is allowed for a "
                           "source queue arn at a given time.")


def test_move_task_redrives_to_original_source(env):
    src, dlq, ids = fill_dlq(env, 3)
    t0 = env.now()
    r = env.run(StartMessageMoveTask(env.ns, dlq.arn))
    (task,) = list_tasks(env, dlq)
    assert task.task_handle == r.task_handle
    assert (task.status, task.source_arn, task.destination_arn) == ("RUNNING", dlq.arn, None)
    assert task.approximate_number_of_messages_moved == 0
    assert task.approximate_number_of_messages_to_move == 3
    assert task.started_timestamp == t0
    env.tick()
    assert len(env.of_type(MessageAdded)) == 3
    assert {a.qid for a in env.of_type(MessageAdded)} == {env.qids[src]}
    assert env.counts(dlq) == (0, 0, 0)
    assert env.counts(src) == (3, 0, 0)
    (task,) = list_tasks(env, dlq)
    assert task.status == "COMPLETED"
    assert task.task_handle is None
    assert task.approximate_number_of_messages_moved == 3
    ms = env.receive(src, attribute_names=("All",))
    assert sorted(m.message_id for m in ms) == sorted(ids)
    for m in ms:
        assert "DeadLetterQueueSourceArn" not in m.attributes
        assert m.attributes["ApproximateReceiveCount"] == "1"


def test_move_task_to_explicit_destination(env):
    src, dlq, ids = fill_dlq(env, 2)
    dest = env.create("dest")
    env.run(StartMessageMoveTask(env.ns, dlq.arn, dest.arn))
    env.tick()
    assert env.counts(dest) == (2, 0, 0)
    assert env.counts(src) == (0, 0, 0)
    assert sorted(m.message_id for m in env.receive(dest)) == sorted(ids)
    (task,) = list_tasks(env, dlq)
    assert (task.status, task.destination_arn, task.approximate_number_of_messages_moved) == (
        "COMPLETED", dest.arn, 2)


def test_move_task_honours_rate_as_clock_advances(env):
    src, dlq, _ = fill_dlq(env, 10)
    env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 2))
    env.tick()
    assert env.counts(src)[0] == 0
    env.advance(1_000)
    env.tick()
    assert env.counts(src)[0] == 2
    env.advance(1_000)
    env.tick()
    assert env.counts(src)[0] == 4
    (task,) = list_tasks(env, dlq)
    assert task.status == "RUNNING" and task.approximate_number_of_messages_moved == 4
    env.advance(500)
    env.tick()
    assert 4 <= env.counts(src)[0] <= 5   # never ahead of 2/s * 2.5 s
    env.advance(500)
    env.tick()
    assert env.counts(src)[0] == 6
    env.advance(10_000)
    env.tick()
    assert env.counts(src)[0] == 10 and env.counts(dlq)[0] == 0
    (task,) = list_tasks(env, dlq)
    assert task.status == "COMPLETED" and task.approximate_number_of_messages_moved == 10


def test_move_task_cancel(env):
    src, dlq, _ = fill_dlq(env, 5)
    handle = env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 1)).task_handle
    env.advance(2_000)
    env.tick()
    r = env.run(CancelMessageMoveTask(env.ns, handle))
    assert r.approximate_number_of_messages_moved == 2
    (upd,) = env.of_type(MoveTaskUpdated)
    assert upd.task.status == "CANCELLED"
    (task,) = list_tasks(env, dlq)
    assert task.status == "CANCELLED" and task.task_handle is None
    assert task.approximate_number_of_messages_moved == 2
    env.advance(60_000)
    env.tick()
    assert env.counts(src)[0] == 2 and env.counts(dlq)[0] == 3
    # a cancelled task cannot be cancelled again, and a new task may start
    env.fails(CancelMessageMoveTask(env.ns, handle))
    env.fails(CancelMessageMoveTask(env.ns, None), MISSING_PARAMETER)
    env.run(StartMessageMoveTask(env.ns, dlq.arn))
    env.tick()
    assert env.counts(src)[0] == 5


def test_list_message_move_tasks_newest_first_and_max_results(env):
    src, dlq, _ = fill_dlq(env, 3)
    h1 = env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 1)).task_handle
    env.run(CancelMessageMoveTask(env.ns, h1))
    env.advance(1_000)
    env.run(StartMessageMoveTask(env.ns, dlq.arn))
    env.tick()
    env.advance(1_000)
    h3 = env.run(StartMessageMoveTask(env.ns, dlq.arn))  # nothing left to move
    (latest,) = list_tasks(env, dlq)      # default MaxResults is 1: the most recent task
    assert latest.status == "RUNNING" and latest.task_handle == h3.task_handle
    assert latest.approximate_number_of_messages_to_move == 0
    env.tick()
    tasks = list_tasks(env, dlq, 10)
    assert len(tasks) == 3
    assert tasks[0].status == "COMPLETED" and tasks[0].task_handle is None
    assert [t.started_timestamp for t in tasks] == sorted((t.started_timestamp for t in tasks), reverse=True)
    assert tasks[1].status == "COMPLETED" and tasks[1].approximate_number_of_messages_moved == 3
    assert tasks[2].status == "CANCELLED"
    assert all(t.task_handle is None for t in tasks if t.status != "RUNNING")
    assert len(list_tasks(env, dlq, 2)) == 2
    assert env.mutations == []


@pytest.mark.parametrize("n", [0, 11, -1])
def test_list_message_move_tasks_max_results_range(env, n):
    src, dlq, _ = fill_dlq(env, 1)
    env.fails(ListMessageMoveTasks(env.ns, dlq.arn, n), INVALID_PARAMETER_VALUE)


def test_list_message_move_tasks_source_errors(env):
    env.fails(ListMessageMoveTasks(env.ns, None), MISSING_PARAMETER)
    env.fails(ListMessageMoveTasks(env.ns, "arn:aws:sqs:us-east-1:000000000000:nope"), RESOURCE_NOT_FOUND)
