"""FIFO queues (storage/fifo.py, and the FIFO rules of sending, receiving and handles): order
within a message group, deduplication, sequence numbers, retried receives.

The ``env`` harness (tests/storage/message_env.py) checks each command's result, the state a client
sees, the mutations emitted, and that a replica applying them reaches the master's digest.
"""

from __future__ import annotations

import hashlib
import re

import pytest

from storage import IdSource, ManualClock, Storage
from storage.commands import GetQueueAttributes, PurgeQueue, ReceiveMessage, SendMessage, SetQueueAttributes
from storage.mutations import MessageAdded, Pruned
from tests.storage.message_env import (
    DEDUP_WINDOW_MS, INVALID_PARAMETER_VALUE, MISSING_PARAMETER, S, fifo_send,
)


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
