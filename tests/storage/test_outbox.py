"""Moves to a queue of another replication group (storage/outbox.py): the dead-letter move on
receive and a move task's step through the source's outbox, the destination's adoption, the
answers, forgetting, and the refusal that returns a message to its source.

What a message looks like after a move is pinned by the same-group tests (test_redrive.py, with
their sources); here the check is that a move across groups lands the very record a move within
one group would have added.
"""

from __future__ import annotations

import pytest

from storage import IdSource, ManualClock, Storage
from storage.commands import (
    AcceptOutbox, AdoptMoved, CancelMessageMoveTask, ClearOutbox, CreateQueue, DeleteQueue, ForgetMove, ListMessageMoveTasks, MovedMessage,
    MoveItem, PurgeQueue, ReceiveMessage, ReturnOutbox, SendMessage, StartMessageMoveTask, Tick,
)
from storage.mutations import (
    MessageAdded, MessageDeleted, MessageOutboxed, MoveAdopted, MovesForgotten, MoveTaskUpdated, OutboxAccepted,
    OutboxCleared, OutboxReturned,
)
from storage.outbox import REFUSED_NO_QUEUE, REFUSED_WRONG_TYPE
from storage.results import MoveRefusal
from tests.storage.groups_env import NS, START_MS, World
from tests.storage.message_env import S


@pytest.fixture
def w():
    world = World()
    yield world
    world.a.check_replica()
    world.b.check_replica()


def poison(w: World, fifo: bool = False, max_receive_count: int = 1, bodies=("poison",)):
    """A source queue in A whose dead-letter queue is in B, and messages received past its
    maxReceiveCount: the next receive moves them."""
    sfx = ".fifo" if fifo else ""
    dlq = w.b.create("dlq" + sfx)
    src = w.a.create("src" + sfx, **({"ContentBasedDeduplication": "true"} if fifo else {}))
    w.a.redrive_to(src, dlq, max_receive_count)
    ids = [w.a.send(src, b, message_attributes={"k": S("v")}, **({"group_id": "g"} if fifo else {}))
           for b in bodies]
    for _ in range(max_receive_count):
        assert len(w.a.receive(src, visibility_timeout=0)) == len(bodies)
    return src, dlq, ids


# --- the source: into the outbox ---------------------------------------------------------------

def test_a_dead_letter_move_to_another_group_goes_through_the_outbox(w):
    src, dlq, (mid,) = poison(w)
    assert w.a.receive(src) == ()
    (m,) = w.a.mutations
    assert type(m) is MessageOutboxed
    assert (m.qid, m.dst_arn, m.dlq_source_arn, m.task_id, m.seq) == (w.a.queue(src).qid, dlq.arn, src.arn, None, 0)
    assert m.message.message_id == mid and m.message.receive_count == 1
    assert w.a.counts(src) == (0, 0, 0)   # in neither queue while in the outbox
    assert w.b.counts(dlq) == (0, 0, 0)
    (item,) = w.a.storage.outbox_pending()
    assert (item.move_id, item.dst_arn) == (m.move_id, dlq.arn)
    assert item.message == MovedMessage(mid, "poison", {"k": S("v")}, {}, m.message.md5_of_body,
                                        m.message.md5_of_attributes, None, START_MS, m.message.sender_id, None,
                                        None, src.arn, 1, START_MS, False)
    assert w.a.storage.outbox_accepted() == []


def test_the_adopted_message_is_the_record_a_move_within_one_group_adds(w):
    src, dlq, (mid,) = poison(w)
    w.a.receive(src)
    w.settle(w.a, w.b)
    (adopted,) = [m for batch in w.b.batches for m in batch if type(m) is MessageAdded]
    # the same queues and commands in one storage, on the same clock and ids
    one = Storage(ManualClock(START_MS), IdSource(11))
    one.execute(CreateQueue(NS, "dlq", {}))
    one.execute(CreateQueue(NS, "src", {"RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq.arn}","maxReceiveCount":1}}'}))
    one.execute(SendMessage(src, "poison", message_attributes={"k": S("v")}))
    one.execute(ReceiveMessage(src, visibility_timeout=0))
    deleted, same = one.execute(ReceiveMessage(src))[1]
    assert type(deleted) is MessageDeleted
    assert adopted.message == same.message
    (d,) = w.b.receive(dlq, attribute_names=("All",), message_attribute_names=("All",))
    assert (d.message_id, d.body, dict(d.message_attributes)) == (mid, "poison", {"k": S("v")})
    assert d.attributes["DeadLetterQueueSourceArn"] == src.arn
    assert d.attributes["ApproximateReceiveCount"] == "2"


def test_the_receive_that_moves_still_returns_the_other_messages(w):
    src, dlq, (old,) = poison(w)
    fresh = w.a.send(src, "fresh")
    assert [m.message_id for m in w.a.receive(src)] == [fresh]
    assert [i.message.message_id for i in w.a.storage.outbox_pending()] == [old]


def test_a_move_within_the_group_never_asks_the_catalogue(w):
    class Refuses:
        def queue_by_arn(self, arn):
            raise AssertionError("a queue of this group was looked up in the catalogue")

    w.a.storage.catalogue = Refuses()
    dlq = w.a.create("local-dlq")
    src = w.a.create("src")
    w.a.redrive_to(src, dlq)
    w.a.send(src, "m")
    w.a.receive(src, visibility_timeout=0)
    w.a.receive(src)
    assert [type(m) for m in w.a.mutations] == [MessageDeleted, MessageAdded]
    assert w.a.storage.outbox_pending() == []


def test_a_dead_letter_queue_no_group_holds_leaves_the_message_in_its_source(w):
    dlq = w.b.create("dlq")
    src = w.a.create("src")
    w.a.redrive_to(src, dlq)
    w.b.run(DeleteQueue(dlq))
    mid = w.a.send(src, "m")
    w.a.receive(src, visibility_timeout=0)
    assert [m.message_id for m in w.a.receive(src)] == [mid]
    assert w.a.storage.outbox_pending() == []


# --- the destination: adopting ------------------------------------------------------------------

def test_adopt_then_accept_forget_and_clear(w):
    src, dlq, (mid,) = poison(w)
    w.a.receive(src)
    (move_id,) = [i.move_id for i in w.a.storage.outbox_pending()]
    result = w.offer(w.a, w.b)
    assert (result.accepted, result.refused) == ((move_id,), ())
    added, adopted = w.b.mutations
    assert type(added) is MessageAdded and added.qid == w.b.queue(dlq).qid
    assert adopted == MoveAdopted(move_id, 0)
    assert w.b.storage.moves_in() == [move_id]
    assert w.b.counts(dlq) == (1, 0, 0)

    w.answer(w.a, result)
    assert w.a.mutations == [OutboxAccepted((move_id,))]
    assert w.a.storage.outbox_pending() == []
    assert w.a.storage.outbox_accepted() == [(move_id, dlq.arn)]

    w.b.run(ForgetMove((move_id,)))
    assert w.b.mutations == [MovesForgotten((move_id,))]
    assert w.b.storage.moves_in() == []
    w.a.run(ClearOutbox((move_id,)))
    assert w.a.mutations == [OutboxCleared((move_id,))]
    assert w.a.storage.outbox_accepted() == []
    assert [m.message_id for m in w.b.receive(dlq)] == [mid]


def test_an_offer_adopted_before_is_accepted_again_and_adds_nothing(w):
    src, dlq, _ = poison(w)
    w.a.receive(src)
    first = w.offer(w.a, w.b)
    again = w.offer(w.a, w.b)   # the answer was lost, or A's new master offers again
    assert again.accepted == first.accepted and again.refused == ()
    assert w.b.mutations == []
    assert w.b.counts(dlq) == (1, 0, 0)


def test_one_offer_naming_a_move_twice_adopts_it_once(w):
    src, dlq, _ = poison(w)
    w.a.receive(src)
    (item,) = w.a.storage.outbox_pending()
    result = w.b.run(AdoptMoved((item, item)))
    assert result.accepted == (item.move_id, item.move_id)
    assert [type(m) for m in w.b.mutations] == [MessageAdded, MoveAdopted]


def test_accept_clear_and_forget_are_idempotent_and_take_unknown_ids(w):
    src, dlq, _ = poison(w)
    w.a.receive(src)
    (move_id,) = w.offer(w.a, w.b).accepted
    assert w.a.run(ClearOutbox((move_id,))) is None and w.a.mutations == []   # still PENDING: kept
    w.a.run(AcceptOutbox((move_id, move_id, "unknown")))
    assert w.a.mutations == [OutboxAccepted((move_id,))]
    w.a.run(AcceptOutbox((move_id,)))
    assert w.a.mutations == []
    w.a.run(ReturnOutbox(move_id, REFUSED_NO_QUEUE))   # accepted: never returned
    assert w.a.mutations == []
    w.b.run(ForgetMove(("unknown",)))
    assert w.b.mutations == []
    w.forget(w.a, w.b)
    w.forget(w.a, w.b)
    assert w.a.mutations == [] and w.b.mutations == []
    assert w.b.counts(dlq) == (1, 0, 0)


def test_a_fifo_destination_decides_the_sequence_number_serial_and_enqueue_time(w):
    dlq = w.b.create("dlq.fifo", ContentBasedDeduplication="true")
    w.b.send(dlq, "already there", group_id="g")
    src = w.a.create("src.fifo", ContentBasedDeduplication="true")
    w.a.redrive_to(src, dlq)
    ids = [w.a.send(src, f"m{i}", group_id="g") for i in range(3)]
    w.a.receive(src, visibility_timeout=0)
    w.advance(5_000)
    assert w.a.receive(src) == ()
    assert [i.message.message_id for i in w.a.storage.outbox_pending()] == ids   # in the group's order
    w.offer(w.a, w.b)
    added = [m for m in w.b.mutations if type(m) is MessageAdded]
    assert [a.message.serial for a in added] == [1, 2, 3]
    assert all(a.message.sent_ms == START_MS + 5_000 for a in added)   # a FIFO DLQ resets the enqueue time
    ms = w.b.receive(dlq, attribute_names=("All",))
    assert [m.body for m in ms] == ["already there", "m0", "m1", "m2"]
    seqs = [int(m.attributes["SequenceNumber"]) for m in ms]
    assert seqs == sorted(set(seqs))
    assert all(m.attributes["DeadLetterQueueSourceArn"] == src.arn for m in ms[1:])
    assert all(m.attributes["MessageGroupId"] == "g" for m in ms)


# --- refusals and returns ----------------------------------------------------------------------

def test_a_refused_move_returns_the_message_to_its_source_as_it_left(w):
    src, dlq, (mid,) = poison(w)
    w.advance(1_000)
    w.a.receive(src)
    (left,) = w.a.mutations
    w.b.run(DeleteQueue(dlq))
    result = w.offer(w.a, w.b)
    assert (result.accepted, result.refused) == ((), (MoveRefusal(left.move_id, REFUSED_NO_QUEUE),))
    assert w.b.mutations == [] and w.b.storage.moves_in() == []
    w.advance(1_000)
    w.answer(w.a, result)
    (back,) = w.a.mutations
    assert back == OutboxReturned(left.move_id, w.a.queue(src).qid, back.message)
    r = back.message
    assert (r.message_id, r.serial, r.receive_count, r.first_receive_ms) == (
        mid, left.message.serial, 1, START_MS)
    assert (r.version, r.receipt, r.visible_ms) == (left.message.version + 1, None, START_MS + 2_000)
    assert w.a.storage.outbox_pending() == [] and w.a.storage.outbox_accepted() == []
    assert w.a.counts(src) == (1, 0, 0)
    # the dead-letter queue is gone from every group now: the message is delivered, counted on
    (m,) = w.a.receive(src, attribute_names=("ApproximateReceiveCount",))
    assert (m.message_id, m.attributes["ApproximateReceiveCount"]) == (mid, "2")


def test_a_returned_fifo_message_takes_its_place_at_the_head_of_its_group(w):
    src, dlq, ids = poison(w, fifo=True, bodies=("m0", "m1"))
    assert w.a.receive(src, n=1) == ()   # moving, it walks the group's whole visible run
    w.b.run(DeleteQueue(dlq))
    result = w.offer(w.a, w.b)
    for r in reversed(result.refused):   # returned last first: each goes back to its own place
        w.a.run(ReturnOutbox(r.move_id, r.reason))
    assert [m.message_id for m in w.a.receive(src)] == ids


def test_a_destination_of_the_other_type_refuses(w):
    fifo = w.b.create("other.fifo")
    item = MoveItem("move-1", fifo.arn, MovedMessage("m", "body", {}, {}, "md5", None, None, 1, "sender", None,
                                                     None, None, 0, 0, False))
    result = w.b.run(AdoptMoved((item,)))
    assert result.refused == (MoveRefusal("move-1", REFUSED_WRONG_TYPE),) and w.b.mutations == []


def test_an_offer_for_a_queue_this_group_does_not_hold_is_refused(w):
    elsewhere = w.a.create("in-a")   # B's catalogue knows it, but B holds no such queue
    item = MoveItem("move-1", elsewhere.arn, MovedMessage("m", "body", {}, {}, "md5", None, None, 1, "sender",
                                                          None, None, None, 0, 0, False))
    assert w.b.run(AdoptMoved((item,))).refused == (MoveRefusal("move-1", REFUSED_NO_QUEUE),)
    assert w.a.counts(elsewhere) == (0, 0, 0)


def test_a_queue_deleted_after_the_adopt_keeps_answering_accepted(w):
    src, dlq, _ = poison(w)
    w.a.receive(src)
    first = w.offer(w.a, w.b)
    w.b.run(DeleteQueue(dlq))   # the message went with it, as after a move within one group
    assert w.offer(w.a, w.b).accepted == first.accepted
    w.answer(w.a, first)
    assert w.a.counts(src) == (0, 0, 0)


def test_a_return_to_a_deleted_or_purged_source_drops_the_message(w):
    src, dlq, _ = poison(w, bodies=("a", "b"))
    w.a.receive(src)
    w.b.run(DeleteQueue(dlq))
    w.a.run(PurgeQueue(src))   # the purge passes the outboxed messages: they were sent before it
    w.answer(w.a, w.offer(w.a, w.b))
    assert [type(m) for m in w.a.mutations] == [OutboxReturned]
    assert w.a.counts(src) == (0, 0, 0) and w.a.storage.outbox_pending() == []

    src2, dlq2 = w.a.create("src2"), w.b.create("dlq2")
    w.a.redrive_to(src2, dlq2)
    w.a.send(src2, "c")
    w.a.receive(src2, visibility_timeout=0)
    w.a.receive(src2)
    w.b.run(DeleteQueue(dlq2))
    w.a.run(DeleteQueue(src2))
    w.answer(w.a, w.offer(w.a, w.b))
    assert w.a.storage.outbox_pending() == []


def test_an_unknown_refusal_reason_is_refused_before_anything_changes(w):
    src, dlq, _ = poison(w)
    w.a.receive(src)
    (item,) = w.a.storage.outbox_pending()
    with pytest.raises(KeyError):
        w.a.storage.execute(ReturnOutbox(item.move_id, "no reason"))
    assert w.a.storage.outbox_pending() == [item]


# --- move tasks --------------------------------------------------------------------------------

def dead_letters(w: World, n: int):
    """A DLQ in A holding ``n`` messages dead-lettered from a source in A, and a queue in B."""
    src = w.a.create("src")
    dlq = w.a.create("dlq")
    w.a.redrive_to(src, dlq)
    ids = [w.a.send(src, f"m{i}") for i in range(n)]
    w.a.receive(src, visibility_timeout=0)
    w.a.receive(src)
    assert w.a.counts(dlq) == (n, 0, 0)
    return src, dlq, w.b.create("dest"), ids


def tasks(w: World, dlq):
    return w.a.storage.execute(ListMessageMoveTasks(NS, dlq.arn, 10))[0].results


def test_a_move_task_to_another_group_counts_messages_moved_when_they_leave(w):
    src, dlq, dest, ids = dead_letters(w, 3)
    task_id = w.a.start_task(dlq, dest)
    w.a.run(Tick())
    assert [type(m) for m in w.a.mutations] == [MessageOutboxed] * 3 + [MoveTaskUpdated]
    assert {m.task_id for m in w.a.mutations[:3]} == {task_id}
    assert {m.dlq_source_arn for m in w.a.mutations[:3]} == {None}
    (task,) = tasks(w, dlq)
    assert (task.status, task.approximate_number_of_messages_moved) == ("COMPLETED", 3)
    w.settle(w.a, w.b)
    ms = w.b.receive(dest, attribute_names=("All",))
    assert sorted(m.message_id for m in ms) == sorted(ids)
    for m in ms:   # a task's redrive starts the count afresh (test_redrive's same-group rule)
        assert m.attributes["ApproximateReceiveCount"] == "1"
        assert "DeadLetterQueueSourceArn" not in m.attributes


def test_a_move_task_redrives_to_sources_in_another_group(w):
    dlq = w.a.create("dlq")
    src = w.b.create("src")
    w.b.redrive_to(src, dlq)
    mid = w.b.send(src, "m")
    w.b.receive(src, visibility_timeout=0)
    w.b.receive(src)
    w.settle(w.b, w.a)
    w.a.start_task(dlq, None)
    w.a.run(Tick())
    (out,) = w.a.storage.outbox_pending()
    assert out.dst_arn == src.arn
    w.settle(w.a, w.b)
    assert [m.message_id for m in w.b.receive(src)] == [mid]


def test_a_refused_task_step_fails_the_task_and_returns_the_message(w):
    src, dlq, dest, ids = dead_letters(w, 2)
    w.a.start_task(dlq, dest)
    w.a.run(Tick())
    w.b.run(DeleteQueue(dest))
    w.answer(w.a, w.offer(w.a, w.b))
    (task,) = tasks(w, dlq)
    assert task.status == "FAILED"
    assert task.failure_reason == f"Destination queue {dest.arn} does not exist."
    assert task.approximate_number_of_messages_moved == 0
    back = w.a.receive(dlq, attribute_names=("All",))
    assert sorted(m.message_id for m in back) == sorted(ids)
    for m in back:   # as they were in the dead-letter queue
        assert m.attributes["DeadLetterQueueSourceArn"] == src.arn
        assert m.attributes["ApproximateReceiveCount"] == "2"   # one before the move, and this one


def test_a_cancelled_task_stays_cancelled_when_a_step_comes_back(w):
    src, dlq, dest, _ = dead_letters(w, 2)
    handle = w.a.run(StartMessageMoveTask(NS, dlq.arn, dest.arn, 1)).task_handle
    w.advance(1_000)
    w.a.run(Tick())
    assert len(w.a.storage.outbox_pending()) == 1
    w.a.run(CancelMessageMoveTask(NS, handle))
    w.b.run(DeleteQueue(dest))
    w.answer(w.a, w.offer(w.a, w.b))
    (info,) = tasks(w, dlq)
    assert (info.status, info.approximate_number_of_messages_moved, info.failure_reason) == ("CANCELLED", 0, None)
    assert w.a.counts(dlq) == (2, 0, 0)
