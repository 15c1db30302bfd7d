"""A snapshot's messages travel in MessagesRestored groups (storage/snapshots.py iter_snapshot)."""

from __future__ import annotations

from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

import storage.snapshots as snapshots
from storage import IdSource, ManualClock, Storage
from storage.commands import CreateQueue, Namespace, PurgeQueue, ReceiveMessage, SendMessage
from storage.mutations import MessageRestored, MessagesRestored
from tests.storage.test_replication_properties import SETTINGS, replica, run_workload
from tests.storage.workload import assert_same_state, step

NS = Namespace()


def _store(bodies, fifo: bool = False) -> Storage:
    s = Storage(ManualClock(1_000), IdSource(1))
    name = "q.fifo" if fifo else "q"
    attrs = {"FifoQueue": "true", "ContentBasedDeduplication": "true"} if fifo else {}
    s.execute(CreateQueue(NS, name, attributes=attrs))
    for b in bodies:
        s.execute(SendMessage(NS.key(name), b, group_id="g" if fifo else None))
    return s


def _groups(s: Storage) -> list[MessagesRestored]:
    return [r for r in s.iter_snapshot() if type(r) is MessagesRestored]


def test_groups_are_bounded_by_count_and_by_body_bytes():
    small = _groups(_store([f"m{i}" for i in range(150)]))
    assert [len(g.messages) for g in small] == [64, 64, 22]
    assert [m.body for g in small for m in g.messages] == [f"m{i}" for i in range(150)]
    big = _groups(_store(["x" * 40_000] * 5))   # two 40 kB bodies pass 64 KiB
    assert [len(g.messages) for g in big] == [2, 2, 1]
    assert not [r for r in _store(["a"]).iter_snapshot() if type(r) is MessageRestored]


def test_a_group_restores_exactly_and_twice_changes_nothing():
    master = _store([f"m{i}" for i in range(100)])
    master.execute(ReceiveMessage(NS.key("q"), max_number_of_messages=3))   # some in flight
    once, twice = replica(), replica()
    once.restore(master.snapshot())
    twice.restore(master.snapshot() + master.snapshot())
    assert_same_state(once, master)
    assert_same_state(twice, master)


def test_a_group_skips_purged_messages_and_advances_fifo_sequence_numbers():
    master = _store([f"f{i}" for i in range(70)], fifo=True)
    r = replica()
    r.restore(master.snapshot())
    assert_same_state(r, master)
    sent = r.execute(SendMessage(NS.key("q.fifo"), "next", group_id="g"))[0]
    assert int(sent.sequence_number) > max(m.sequence_number for g in _groups(master) for m in g.messages)

    old = _groups(master)
    master.execute(PurgeQueue(NS.key("q.fifo")))
    purged = replica()
    purged.restore(master.snapshot())
    for g in old:   # a stale group from before the purge, as an overlapping transfer may bring
        purged.apply(g)
    assert_same_state(purged, master)


def test_single_message_records_of_an_older_sender_still_restore():
    master = _store([f"m{i}" for i in range(10)])
    records = []
    for r in master.iter_snapshot():
        if type(r) is MessagesRestored:
            records += [MessageRestored(r.qid, m) for m in r.messages]
        else:
            records.append(r)
    joiner = replica()
    joiner.restore(records)
    assert_same_state(joiner, master)


@SETTINGS
@given(st.data())
def test_fuzzy_snapshot_in_small_groups_converges(data):
    """The fuzzy-snapshot property with groups of two messages, so that client operations
    interleave between the groups of one queue too."""
    with mock.patch.object(snapshots, "SNAPSHOT_GROUP_MESSAGES", 2):
        run = run_workload(data)
        snapshot_start = len(run.mutations)
        records = []
        for rec in run.master.iter_snapshot():
            records.append(rec)
            for _ in range(data.draw(st.integers(0, 2), label="interleaved")):
                step(run, data)
        joiner = replica()
        joiner.restore(records)
        for m in run.mutations[snapshot_start:]:
            joiner.apply(m)
        assert_same_state(joiner, run.master)
