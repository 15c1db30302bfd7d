"""cluster/journal/shared_writer.py: group-tagged work, one fsync a turn for every group."""

import errno
import threading
import time

import pytest

from cluster.journal.format import JournalEntry
from cluster.journal.shared import SharedJournal
from cluster.journal.shared_writer import SharedJournalWriter
from cluster.journal.writer import WriterStopped
from tests.journal.memdisk import MemDisk, Sink, SlowSyncDisk


def entry(seq: int, epoch: int = 1) -> JournalEntry:
    return JournalEntry(seq, epoch, b"m" * 64)


def writer(journal: SharedJournal, sink: Sink, policy: str = "always", **kw) -> SharedJournalWriter:
    return SharedJournalWriter(journal, policy, on_durable=sink.on_durable, on_error=sink.on_error, **kw)


def running(disk: MemDisk, groups: int) -> tuple[SharedJournalWriter, Sink]:
    """A writer of a new shared journal on ``disk``, its first entry (group 0, seq 1) durable."""
    j, _ = SharedJournal.open(disk, groups)
    sink = Sink()
    w = writer(j, sink)
    w.submit(1, 0, [entry(1)])
    sink.wait(lambda: sink.durable == [1])
    return w, sink


def test_a_turn_of_every_groups_work_is_one_write_and_one_fsync():
    disk = SlowSyncDisk()
    w, sink = running(disk, 3)
    disk.ops.clear()
    gate = threading.Event()
    held = disk.sync

    def sync_after_gate(name: str) -> None:
        gate.wait(5)
        held(name)

    disk.sync = sync_after_gate     # the writer waits in this fsync while the loop queues a turn
    w.submit(2, 0, [entry(2)])
    time.sleep(0.02)
    token = 3
    for seq in (1, 2):
        for g in (1, 2):
            w.submit(token, g, [entry(seq)])
            token += 1
    w.submit(token, 0, [entry(3)])
    gate.set()
    sink.wait(lambda: sink.durable[-1] == token)
    w.close()
    ops = [op for op, _ in disk.ops]
    assert ops.count("sync") <= 3, ops      # 2's fsync, then all of the turn's (and close's, if any left)
    assert ops[:2] == ["append", "sync"] and ops[2:4] == ["append", "sync"], ops
    _, rec = SharedJournal.open(disk, 3)
    assert [[e.seq for e in r.entries] for r in rec.groups] == [[1, 2, 3], [1, 2], [1, 2]]


def test_group_commit_covers_many_groups_submits_with_few_fsyncs():
    disk = SlowSyncDisk()
    j, _ = SharedJournal.open(disk, 4)
    sink = Sink()
    w = writer(j, sink)
    for token in range(1, 401):
        w.submit(token, token % 4, [entry((token - 1) // 4 + 1)])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 400)
    s = w.stats()
    assert s.fsyncs < 100 and s.entries_per_fsync > 4 and s.durable_token == 400
    assert sink.durable == sorted(sink.durable)
    w.close()
    _, rec = SharedJournal.open(disk, 4)
    assert all([e.seq for e in r.entries] == list(range(1, 101)) for r in rec.groups)


def test_a_reset_of_one_group_in_order_with_the_others_appends():
    disk = MemDisk()
    j, _ = SharedJournal.open(disk, 2)
    sink = Sink()
    w = writer(j, sink, "never")
    for seq in range(1, 11):
        w.submit(2 * seq - 1, 0, [entry(seq)])
        w.submit(2 * seq, 1, [entry(seq)])
    w.submit_reset(21, 1, 4, 3, [b"group 1 at 4"])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 21)      # a reset is durable under every policy
    w.submit(22, 1, [entry(5, 3)])
    w.submit(23, 0, [entry(11)])
    w.close()
    _, rec = SharedJournal.open(disk, 2)
    assert [e.seq for e in rec.groups[0].entries] == list(range(1, 12))
    assert rec.groups[1].blobs == (b"group 1 at 4",) and [e.seq for e in rec.groups[1].entries] == [5]


def test_a_reset_reports_durable_only_once_the_other_groups_entries_before_it_are():
    disk = MemDisk()
    j, _ = SharedJournal.open(disk, 2)
    sink = Sink(disk)
    w = writer(j, sink)
    for i in range(1, 30):
        w.submit(2 * i - 1, 0, [entry(i)])
        w.submit_reset(2 * i, 1, i, 1, [b"group 1's state"])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 58)
    w.close()
    unsynced: set[str] = set()
    for op, name in disk.ops:
        if op == "append" and name.endswith(".seg"):
            unsynced.add(name)
        elif op == "sync":
            unsynced.discard(name)
        elif op == "durable":
            assert not unsynced, f"token {name} reported durable over unsynced entries: {disk.ops}"


def test_a_snapshot_of_one_group_waits_for_that_groups_entries_durable():
    disk = MemDisk()
    j, _ = SharedJournal.open(disk, 2, segment_bytes=400)
    sink = Sink()
    w = writer(j, sink, "never")
    for seq in range(1, 21):
        w.submit(2 * seq - 1, 0, [entry(seq)])
        w.submit(2 * seq, 1, [entry(seq)])
    snap = w.begin_snapshot(1, 20, 1)
    snap.add(b"group 1's state")
    done: list = []
    snap.finish(20, done.append)
    w.submit(41, 0, [entry(21)])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 41)
    w.close()
    assert done == [None]
    _, rec = SharedJournal.open(disk, 2, segment_bytes=400)
    assert rec.groups[1].snapshot.at_seq == 20 and rec.groups[1].entries == ()
    assert [e.seq for e in rec.groups[0].entries] == list(range(1, 22))


def test_a_bug_upstream_stops_the_writer():
    j, _ = SharedJournal.open(MemDisk(), 2)
    sink = Sink()
    w = writer(j, sink)
    w.submit(1, 1, [entry(1)])
    w.submit(2, 1, [entry(3)])
    sink.wait(lambda: sink.errors)
    assert "group 1: entry seq 3 does not follow 1" in str(sink.errors[0])
    with pytest.raises(WriterStopped):
        w.submit(3, 0, [entry(1)])
    w.close()


def test_an_io_error_is_reported_once_and_stops_the_writer():
    disk = MemDisk()
    w, sink = running(disk, 2)
    disk.fail = lambda op, name: OSError(errno.EIO, "I/O error") if op == "sync" else None
    w.submit(2, 1, [entry(1)])
    sink.wait(lambda: sink.errors)
    assert len(sink.errors) == 1 and sink.durable == [1]
    w.close()
