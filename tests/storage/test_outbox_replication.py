"""The replication contract of the outbox and ``moves_in`` (storage/outbox.py): every mutation
applies twice without effect, a replayed stream never brings a finished move back, snapshots
and digests carry both, and the failure cases of a move between two group masters lose no
message and duplicate none.
"""

from __future__ import annotations

import pytest

from storage import IdSource, ManualClock, Storage
from storage.codec import decode_many, encode_many
from storage.commands import AcceptOutbox, DeleteQueue, ForgetMove, Tick
from storage.mutations import (
    MessageOutboxed, MoveAdopted, MovesForgotten, OutboxAccepted, OutboxCleared, OutboxRestored, OutboxReturned,
)
from tests.storage.groups_env import Group, World, fail_over, holdings
from tests.storage.test_outbox import dead_letters, poison
from tests.storage.workload import assert_same_state


def fresh() -> Storage:
    return Storage(ManualClock(0), IdSource(7))


def scenario(w: World) -> None:
    """Moves both ways, accepted, refused and returned, FIFO and standard, a task's among them."""
    src, dlq, _ = poison(w, bodies=("a", "b", "c"))
    fsrc, _, _ = poison(w, fifo=True, bodies=("f0", "f1"))
    w.a.receive(src)
    w.a.receive(fsrc)
    w.settle(w.a, w.b)                       # adopted, accepted, forgotten, cleared
    w.a.send(src, "d")
    w.a.receive(src, visibility_timeout=0)
    w.a.receive(src)
    w.b.run(DeleteQueue(dlq))
    w.answer(w.a, w.offer(w.a, w.b))         # refused: back in src
    back, a_dlq = w.b.create("back"), w.a.create("a-dlq")
    w.b.redrive_to(back, a_dlq)
    w.b.send(back, "x")
    w.b.receive(back, visibility_timeout=0)
    w.b.receive(back)
    w.settle(w.b, w.a)                       # from B into A
    # A task's step from A to B. Not back to its source queue: a message that enters a queue it
    # was in before is not replayed exactly (a MessageChanged or MessageDeleted of its earlier
    # stay names it by id and version alone), within one group as across two.
    w.a.start_task(a_dlq, w.b.create("dest"))
    w.a.run(Tick())
    w.settle(w.a, w.b)


@pytest.fixture
def outboxed():
    """A's receive has just moved message ``mid`` of ``src`` into A's outbox, for ``dlq`` in B."""
    w = World()
    src, dlq, (mid,) = poison(w)
    w.a.receive(src)
    yield w, src, dlq, mid
    w.a.check_replica()
    w.b.check_replica()


def every_mutation(w: World):
    for g in (w.a, w.b):
        yield g, [m for batch in g.batches for m in batch]


def test_the_scenario_reaches_every_outbox_mutation():
    w = World()
    scenario(w)
    seen = {type(m).__name__ for _, ms in every_mutation(w) for m in ms}
    assert {"MessageOutboxed", "OutboxAccepted", "OutboxReturned", "OutboxCleared", "MoveAdopted",
            "MovesForgotten"} <= seen
    w.a.check_replica()
    w.b.check_replica()


def test_applying_every_mutation_twice_changes_nothing():
    w = World()
    scenario(w)
    for g, ms in every_mutation(w):
        twice = fresh()
        for m in ms:
            twice.apply(m)
            twice.apply(m)
        assert_same_state(twice, g.storage)


def test_replaying_the_whole_stream_again_brings_no_finished_move_back():
    w = World()
    scenario(w)
    for g, ms in every_mutation(w):
        r = fresh()
        r.apply_many(ms)
        r.apply_many(ms)
        assert_same_state(r, g.storage)
        assert r.outbox_pending() == g.storage.outbox_pending() == []
        assert r.moves_in() == g.storage.moves_in() == []


def test_an_outbox_mutation_applied_again_to_any_later_state_changes_nothing():
    """What a stream that overlaps a state transfer does: an entry of a finished move never
    comes back, whatever has happened since."""
    w = World()
    scenario(w)
    kinds = (MessageOutboxed, OutboxAccepted, OutboxReturned, OutboxCleared, MoveAdopted, MovesForgotten)
    for _, ms in every_mutation(w):
        for i, m in enumerate(ms):
            if type(m) not in kinds:
                continue
            for later in range(i + 1, len(ms) + 1, 7):
                state = fresh()
                state.apply_many(ms[:later])
                before = state.digest()
                state.apply(m)
                assert state.digest() == before, f"{m!r} applied again after {later} mutations"


def test_a_replayed_outboxing_leaves_a_returned_message_where_it_is(outboxed):
    w, src, dlq, mid = outboxed
    w.b.run(DeleteQueue(dlq))
    w.answer(w.a, w.offer(w.a, w.b))
    (left,) = w.a.batches[-3]
    w.a.storage.apply(left)
    w.a.replica.apply(left)
    assert [m.message_id for m in w.a.receive(src)] == [mid]
    assert w.a.storage.outbox_pending() == []


def test_a_replayed_outboxing_leaves_the_message_that_moved_back_in_later(outboxed):
    w, src, dlq, mid = outboxed
    (left,) = w.a.mutations
    w.settle(w.a, w.b)
    w.b.start_task(dlq, None)    # redrive to its source, in A
    w.b.run(Tick())
    w.settle(w.b, w.a)
    assert w.a.queue(src).messages[mid].rec.serial > left.message.serial
    w.a.storage.apply(left)
    w.a.replica.apply(left)
    assert [m.message_id for m in w.a.receive(src)] == [mid]


def test_snapshots_restore_exactly_at_every_step_and_through_the_codec():
    w = World()
    scenario(w)
    seen_outbox = False
    for _, ms in every_mutation(w):
        state = fresh()
        for m in ms:
            state.apply(m)
            snap = state.snapshot()
            seen_outbox |= any(type(r) is OutboxRestored and bool(r.outbox or r.moves_in) for r in snap)
            once, coded, twice = fresh(), fresh(), fresh()
            once.restore(snap)
            coded.restore(decode_many(encode_many(snap)))
            twice.restore(snap + snap)
            assert_same_state(once, state)
            assert once.digest() == coded.digest() == twice.digest()
            assert once.outbox_pending() == state.outbox_pending()
            assert once.outbox_accepted() == state.outbox_accepted()
            assert once.moves_in() == state.moves_in()
    assert seen_outbox


def snapshot_during(g: Group, steps, cut) -> None:
    """Read ``g``'s snapshot while ``steps`` run (the rest at once after ``cut`` of them, or a
    record before each); restored, and followed by every batch since it began, it is ``g``'s
    state."""
    mark = len(g.batches)
    records = g.storage.iter_snapshot()
    got = [next(records)]
    for i, step in enumerate(steps):
        if cut == "each":
            got += [r for r in [next(records, None)] if r is not None]
        elif i == cut:
            got += list(records)
        step()
    got += list(records)
    joiner = fresh()
    joiner.restore(got)
    joiner.apply_many([m for batch in g.batches[mark:] for m in batch])
    assert_same_state(joiner, g.storage)


@pytest.mark.parametrize("cut", [0, 1, 2, 3, 4, 5, "each"])
def test_a_snapshot_read_while_a_move_goes_through_converges(cut):
    w = World()
    src, dlq, _ = poison(w, bodies=("a", "b"))
    snapshot_during(w.a, [lambda: w.a.receive(src), lambda: w.offer(w.a, w.b),
                          lambda: w.answer(w.a, w.offer(w.a, w.b)), lambda: w.a.send(src, "c"),
                          lambda: w.forget(w.a, w.b)], cut)


@pytest.mark.parametrize("cut", [0, 1, 2, 3, "each"])
def test_a_snapshot_read_while_a_refused_move_returns_converges(cut, outboxed):
    w, src, dlq, mid = outboxed
    w.a.send(src, "other")
    snapshot_during(w.a, [lambda: w.b.run(DeleteQueue(dlq)), lambda: w.answer(w.a, w.offer(w.a, w.b)),
                          lambda: w.a.send(src, "c")], cut)
    assert mid in w.a.queue(src).messages


def outbox_record(g: Group) -> OutboxRestored:
    (record,) = [r for r in g.storage.snapshot() if type(r) is OutboxRestored]
    return record


def test_an_outbox_record_over_a_state_only_moves_it_forward(outboxed):
    w, src, dlq, mid = outboxed
    pending = outbox_record(w.a)
    w.answer(w.a, w.offer(w.a, w.b))
    accepted = outbox_record(w.a)
    (move_id,) = [e.move_id for e in accepted.outbox]
    state = fresh()
    state.apply(pending)
    state.apply(accepted)
    assert state.outbox_accepted() == [(move_id, dlq.arn)]
    state.apply(pending)             # an older record: the entry stays accepted
    assert state.outbox_accepted() == [(move_id, dlq.arn)]
    state.apply(OutboxCleared((move_id,)))
    state.apply(accepted)            # below the counter: cleared here, never back
    assert state.outbox_accepted() == [] and state.outbox_pending() == []


def test_the_digest_covers_the_outbox_and_moves_in():
    w = World()
    src, dlq, _ = poison(w)
    w.a.receive(src)
    pending = w.a.storage.digest()
    result = w.offer(w.a, w.b)
    w.a.run(AcceptOutbox(result.accepted))
    assert w.a.storage.digest() != pending
    adopted = w.b.storage.digest()
    w.b.run(ForgetMove(result.accepted))
    assert w.b.storage.digest() != adopted


def test_a_storage_that_never_moved_across_groups_has_no_outbox_record():
    """A single group's snapshots and digests stay what they were without groups."""
    w = World()
    src, dlq, _, _ = dead_letters(w, 2)   # dead-letter moves within A
    w.a.start_task(dlq, None)
    w.a.run(Tick())                       # a task's moves within A
    for g in (w.a, w.b):
        assert not [r for r in g.storage.snapshot() if type(r) is OutboxRestored]
        assert not [r for r in g.storage._canonical_records() if type(r) is OutboxRestored]


# --- the failure cases of a move between two masters (no loss, no duplicate) ------------------

def test_source_fails_before_its_outboxing_commits(outboxed):
    w, src, dlq, mid = outboxed
    fail_over(w, w.a, lost=1)   # the receive's batch was never acknowledged
    assert w.a.storage.outbox_pending() == []
    assert [m.message_id for m in w.a.receive(src)] == []   # moved again by this receive
    w.settle(w.a, w.b)
    assert holdings(w) == [mid]


def test_source_fails_after_offering_and_its_new_master_offers_again(outboxed):
    w, src, dlq, mid = outboxed
    w.offer(w.a, w.b)            # B adopted; the answer never reached A's master
    fail_over(w, w.a)
    w.settle(w.a, w.b)
    assert holdings(w) == [mid]
    assert w.b.counts(dlq) == (1, 0, 0)


@pytest.mark.parametrize("lost", [0, 1])
def test_destination_fails_around_its_adopt(lost, outboxed):
    """lost=1: the adopt is gone with B's unacknowledged tail; lost=0: it had committed."""
    w, src, dlq, mid = outboxed
    w.offer(w.a, w.b)
    fail_over(w, w.b, lost=lost)
    w.settle(w.a, w.b)
    assert holdings(w) == [mid]
    assert w.b.counts(dlq) == (1, 0, 0)


def test_source_fails_between_accepting_and_forgetting(outboxed):
    w, src, dlq, mid = outboxed
    w.answer(w.a, w.offer(w.a, w.b))
    fail_over(w, w.a)
    assert w.a.storage.outbox_pending() == []          # never offered again once accepted
    assert [i for i, _ in w.a.storage.outbox_accepted()] == w.b.storage.moves_in()
    w.b.run(ForgetMove(tuple(w.b.storage.moves_in())))   # told once before the failure
    w.forget(w.a, w.b)                                    # and again by the new master
    assert w.a.storage.outbox_accepted() == [] and w.b.storage.moves_in() == []
    assert holdings(w) == [mid]


def test_moves_in_holds_an_id_until_the_source_forgets_it(outboxed):
    """A partitioned source may offer again at any time before its forget: the id stays."""
    w, src, dlq, mid = outboxed
    w.offer(w.a, w.b)
    w.advance(10 * 3600 * 1000)
    w.b.run(Tick())
    assert len(w.b.storage.moves_in()) == 1
    w.settle(w.a, w.b)
    assert holdings(w) == [mid]


def test_a_refusal_racing_the_deletion_of_the_destination_returns_exactly_once(outboxed):
    w, src, dlq, mid = outboxed
    w.b.run(DeleteQueue(dlq))
    refused = w.offer(w.a, w.b)
    w.advance(61_000)
    w.b.create("dlq")            # recreated before the refusal is answered
    w.answer(w.a, refused)
    w.answer(w.a, refused)       # the refusal delivered twice
    assert w.a.storage.outbox_pending() == []
    assert holdings(w) == [mid]
