"""ReceiveMessage (storage/receiving.py): what a receive takes, the attributes it returns, and
visibility timeouts and retention as receives see them.

The ``env`` harness (tests/storage/message_env.py) checks each command's result, the state a client
sees, the mutations emitted, and that a replica applying them reaches the master's digest.
"""

from __future__ import annotations

import pytest

from storage import md5 as md5mod
from storage.commands import QueueKey, ReceiveMessage
from storage.mutations import MessageChanged, MessageDeleted
from tests.storage.message_env import INVALID_ATTRIBUTE_NAME, INVALID_PARAMETER_VALUE, N, S, Env


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
