"""DeleteMessage and ChangeMessageVisibility by receipt handle, one by one and in batches
(storage/handles.py).

The ``env`` harness (tests/storage/message_env.py) checks each command's result, the state a client
sees, the mutations emitted, and that a replica applying them reaches the master's digest.
"""

from __future__ import annotations

import pytest

from storage import IdSource, ManualClock, Storage
from storage.commands import (
    ChangeMessageVisibility, ChangeMessageVisibilityBatch, ChangeMessageVisibilityBatchEntry, CreateQueue,
    DeleteMessage, DeleteMessageBatch, DeleteMessageBatchEntry, Namespace, ReceiveMessage, SendMessage,
)
from storage.mutations import MessageChanged, MessageDeleted
from tests.storage.message_env import (
    EMPTY_BATCH, IDS_NOT_DISTINCT, INVALID_BATCH_ID, INVALID_PARAMETER_VALUE, MISSING_PARAMETER,
    RECEIPT_HANDLE_IS_INVALID, START_MS, TOO_MANY_ENTRIES, TWELVE_HOURS_S, fifo_send,
)
from tests.storage.workload import assert_indexes_consistent


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
