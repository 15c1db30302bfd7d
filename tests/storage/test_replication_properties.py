"""The replication contract of storage, as properties over random workloads.

A replica that only applies the master's mutations reaches the master's digest; applying every
mutation twice changes nothing; snapshot + restore round-trips; and a snapshot taken while the
master keeps working, restored and followed by the mutations that overlap it, converges.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import IdSource, ManualClock, Storage
from storage.commands import ReceiveMessage
from tests.storage.workload import FIFO, Run, assert_same_state, step

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def replica() -> Storage:
    # A replica's own clock and id source are never consulted by apply: give it different ones.
    return Storage(ManualClock(0), IdSource(999))


def run_workload(data: st.DataObject, steps: int | None = None) -> Run:
    run = Run(seed=data.draw(st.integers(0, 2**32), label="seed"))
    for _ in range(steps if steps is not None else data.draw(st.integers(5, 60), label="steps")):
        step(run, data)
    return run


@SETTINGS
@given(st.data())
def test_replica_applying_mutations_reaches_master_digest(data):
    run = run_workload(data)
    r = replica()
    for m in run.mutations:
        r.apply(m)
    assert_same_state(r, run.master)


@SETTINGS
@given(st.data())
def test_replica_tracks_master_at_every_step(data):
    run = Run(seed=data.draw(st.integers(0, 2**32)))
    r = replica()
    applied = 0
    for _ in range(data.draw(st.integers(5, 40))):
        step(run, data)
        for m in run.mutations[applied:]:
            r.apply(m)
        applied = len(run.mutations)
        assert_same_state(r, run.master)


@SETTINGS
@given(st.data())
def test_replica_applying_batches_reaches_master_digest(data):
    """apply_many over batches cut anywhere (a journal's entries, a stream's batches), each
    batch applied twice: the master's state, as with apply one by one."""
    run = run_workload(data)
    # a replica whose clock is far ahead finds every message visible: the path most sends take
    for r in (replica(), Storage(ManualClock(10**13), IdSource(998))):
        cuts = sorted(data.draw(st.lists(st.integers(0, len(run.mutations)), max_size=6), label="cuts"))
        edges = [0, *cuts, len(run.mutations)]
        for a, b in zip(edges, edges[1:]):
            r.apply_many(run.mutations[a:b])
            r.apply_many(iter(run.mutations[a:b]))
        assert_same_state(r, run.master)


@SETTINGS
@given(st.data())
def test_applying_every_mutation_twice_changes_nothing(data):
    run = run_workload(data)
    once, twice = replica(), replica()
    for m in run.mutations:
        once.apply(m)
        twice.apply(m)
        twice.apply(m)
    assert_same_state(once, run.master)
    assert_same_state(twice, run.master)


@SETTINGS
@given(st.data())
def test_replaying_the_whole_stream_again_changes_nothing(data):
    run = run_workload(data)
    r = replica()
    for m in run.mutations + run.mutations:
        r.apply(m)
    assert_same_state(r, run.master)


@SETTINGS
@given(st.data())
def test_snapshot_restore_round_trips(data):
    run = run_workload(data)
    r = replica()
    r.restore(run.master.snapshot())
    assert_same_state(r, run.master)
    # and the restored replica keeps converging as the stream continues
    start = len(run.mutations)
    for _ in range(10):
        step(run, data)
    for m in run.mutations[start:]:
        r.apply(m)
    assert_same_state(r, run.master)


@SETTINGS
@given(st.data())
def test_fuzzy_snapshot_plus_overlapping_mutations_converges(data):
    """State transfer while the master keeps serving: records are pulled in chunks between
    further commands; the joiner restores them and then applies everything emitted since an
    earlier point (an overlap, as a buffering joiner would have)."""
    run = run_workload(data)
    overlap_from = data.draw(st.integers(0, len(run.mutations)), label="overlap_from")
    snapshot_start = len(run.mutations)
    records = []
    it = run.master.iter_snapshot()
    done = False
    while not done:
        for _ in range(data.draw(st.integers(1, 8), label="chunk")):
            rec = next(it, None)
            if rec is None:
                done = True
                break
            records.append(rec)
        if not done:
            for _ in range(data.draw(st.integers(0, 3), label="interleaved")):
                step(run, data)
    joiner = replica()
    joiner.restore(records)
    for m in run.mutations[min(overlap_from, snapshot_start):]:
        joiner.apply(m)
    assert_same_state(joiner, run.master)


@SETTINGS
@given(st.data())
def test_replica_promoted_to_master_serves_the_same_answers(data):
    """Indexes rebuilt by apply alone are good enough to serve: a replica and the master answer
    the same receive identically (same ids, same order) once given the same clock and ids."""
    run = run_workload(data)
    r = Storage(run.clock, IdSource(7))
    for m in run.mutations:
        r.apply(m)
    run.master.ids = IdSource(7)
    cmd = ReceiveMessage(FIFO, max_number_of_messages=10)
    a, ma = run.master.execute(cmd)
    b, mb = r.execute(cmd)
    assert [m.message_id for m in a.messages] == [m.message_id for m in b.messages]
    assert ma == mb
    assert_same_state(r, run.master)


def test_workload_reaches_every_mutation_type():
    """Guard the generator itself: the properties above mean little if it never produces some
    mutation kind."""
    from storage import mutations as mm

    wanted = {mm.QueueCreated, mm.QueueUpdated, mm.QueueDeleted, mm.TombstoneCleared, mm.QueuePurged,
              mm.MessageAdded, mm.MessageChanged, mm.MessageDeleted, mm.AttemptRecorded, mm.Pruned,
              mm.MoveTaskUpdated}
    seen: set = set()

    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def explore(data):
        run = run_workload(data, steps=120)
        seen.update(type(m) for m in run.mutations)

    explore()
    assert wanted <= seen, f"never produced: {sorted(t.__name__ for t in wanted - seen)}"


def test_runs_of_receives_visibility_changes_and_deletes_applied_in_one_batch_hold_the_masters_state():
    """A replica's batch under receive and delete load is long runs of MessageChanged and of
    MessageDeleted, which apply_many applies a run at a time (Queue.change_run, remove_run):
    across index compactions (every 256 changes), stale and repeated versions, messages gone
    or never held, and runs of two queues cut into each other, the replica holds the master's
    state and receives as the master would."""
    from storage.commands import (
        ChangeMessageVisibilityBatch, ChangeMessageVisibilityBatchEntry, CreateQueue, DeleteMessageBatch,
        DeleteMessageBatchEntry, Namespace, SendMessageBatch, SendMessageBatchEntry,
    )
    from storage.mutations import MessageChanged, MessageDeleted

    clock = ManualClock(1_000)
    master = Storage(clock, IdSource(5))
    ns = Namespace("eu-west-1", "123456789012")
    out: list = []

    def run(cmd):
        result, muts = master.execute(cmd)
        out.extend(muts)
        return result

    keys = []
    for name, attrs in (("std", {}), ("o.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"})):
        run(CreateQueue(ns, name, attrs))
        key = ns.key(name)
        keys.append(key)
        for b in range(60):
            run(SendMessageBatch(key, tuple(SendMessageBatchEntry(str(k), f"{name}-{b}-{k}",
                                                                  group_id=f"g{k % 3}" if "fifo" in name else None)
                                            for k in range(10))))
    r = Storage(clock, IdSource(999))      # the master's clock: it receives below, as the master
    r.apply_many(out)
    out.clear()
    received = {k: [] for k in keys}
    for _ in range(80):     # runs of changes of both queues, interleaved
        for key in keys:
            received[key] += run(ReceiveMessage(key, 10, 30)).messages
    std, fifo = keys
    last = received[std][-10:]      # kept: each changed again and again, past a compaction
    for t in range(200):
        run(ChangeMessageVisibilityBatch(std, tuple(ChangeMessageVisibilityBatchEntry(str(k), m.receipt_handle, 30 + t)
                                                    for k, m in enumerate(last))))
    run(ChangeMessageVisibilityBatch(std, tuple(ChangeMessageVisibilityBatchEntry(str(k), m.receipt_handle, 0)
                                                for k, m in enumerate(last))))
    assert len(run(ReceiveMessage(std, 10, 40)).messages) == 10     # again, under new receipts
    for key in keys:
        for i in range(0, len(received[key]) - 20, 10):
            run(DeleteMessageBatch(key, tuple(DeleteMessageBatchEntry(str(k), m.receipt_handle)
                                              for k, m in enumerate(received[key][i:i + 10]))))
    kinds = {type(m) for m in out}
    assert kinds == {MessageChanged, MessageDeleted}
    q = r._by_key[("eu-west-1", "123456789012", "std")]
    before = len(q.pending)
    r.apply_many(out)
    assert len(q.pending) < before + 200 * 10      # compacted in the run
    assert_same_state(r, master)
    r.apply_many(out)               # every record again: stale versions and deleted messages
    r.apply_many(out[: len(out) // 2])
    assert_same_state(r, master)
    clock.advance(300_000)          # the rest visible again, on both, in the same order
    for key in keys:
        for _ in range(4):
            got = [m.message_id for m in master.execute(ReceiveMessage(key, 10, 300))[0].messages]
            assert [m.message_id for m in r.execute(ReceiveMessage(key, 10, 300))[0].messages] == got
        assert got == []
