"""SendMessage and SendMessageBatch (storage/sending.py): bodies, sizes, attributes, delays,
batches.

The ``env`` harness (tests/storage/message_env.py) checks each command's result, the state a client
sees, the mutations emitted, and that a replica applying them reaches the master's digest.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from storage import md5 as md5mod
from storage.commands import MessageAttributeValue, SendMessage, SendMessageBatch, SendMessageBatchEntry
from storage.mutations import MessageAdded
from tests.storage.message_env import (
    B, BATCH_TOO_LONG, EMPTY_BATCH, IDS_NOT_DISTINCT, INVALID_BATCH_ID, INVALID_MESSAGE_CONTENTS,
    INVALID_PARAMETER_VALUE, MISSING_PARAMETER, N, S, TOO_MANY_ENTRIES, UUID_RE, fifo_send, md5_by_hand,
)


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
