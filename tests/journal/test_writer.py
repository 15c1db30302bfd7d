"""cluster/journal/writer.py: group commit, what on_durable promises per policy, fail-stop."""

import errno
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cluster.journal.disk import OsDisk
from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal, SnapshotAborted
from cluster.journal.writer import JournalWriter, WriterStopped
from tests.journal.memdisk import MemDisk, Sink, SlowSyncDisk

ROOT = Path(__file__).resolve().parents[2]


def entry(seq: int, epoch: int = 1) -> JournalEntry:
    return JournalEntry(seq, epoch, b"m" * 64)


def writer(journal: Journal, sink: Sink, policy: str = "always", **kw) -> JournalWriter:
    return JournalWriter(journal, policy, on_durable=sink.on_durable, on_error=sink.on_error, **kw)


def test_group_commit_covers_many_submits_with_few_fsyncs():
    disk = SlowSyncDisk()
    j, _ = Journal.open(disk)
    sink = Sink()
    w = writer(j, sink)
    for seq in range(1, 301):
        w.submit(seq, [entry(seq)])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 300)
    s = w.stats()
    assert s.fsyncs < 100, s
    assert s.entries_per_fsync > 3 and s.queue_depth == 0 and s.durable_token == 300
    assert s.avg_fsync_ms >= 5 and s.fsyncs_per_s > 0
    assert sink.durable == sorted(sink.durable)
    w.close()
    _, rec = Journal.open(disk)
    assert [e.seq for e in rec.entries] == list(range(1, 301))


def test_appends_queued_behind_an_fsync_go_to_the_disk_as_one_write():
    disk = SlowSyncDisk()
    j, _ = Journal.open(disk)
    sink = Sink()
    w = writer(j, sink)
    w.submit(1, [entry(1)])
    time.sleep(0.002)               # the writer is in its 5 ms fsync of entry 1 now
    for seq in range(2, 12):
        w.submit(seq, [entry(seq)])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 11)
    w.close()
    appends = [op for op, _ in disk.ops if op == "append"]
    assert len(appends) <= 3, disk.ops      # 1, then 2..11 together (maybe split once by timing)
    _, rec = Journal.open(disk)
    assert [e.seq for e in rec.entries] == list(range(1, 12))


def test_always_reports_durable_only_after_the_fsync():
    disk = MemDisk()
    j, _ = Journal.open(disk)
    sink = Sink(disk)
    w = writer(j, sink)
    for seq in range(1, 51):
        w.submit(seq, [entry(seq)])
        if seq % 7 == 0:
            time.sleep(0.002)
    sink.wait(lambda: sink.durable and sink.durable[-1] == 50)
    w.close()
    seen_write = False
    for op, _ in disk.ops:
        if op in ("append", "write_new"):
            seen_write = True
        elif op == "sync":
            seen_write = False
        elif op == "durable":
            assert not seen_write, f"durable reported over unsynced writes: {disk.ops}"


def test_interval_reports_on_write_and_syncs_within_the_interval():
    disk = MemDisk()
    j, _ = Journal.open(disk)
    sink = Sink(disk)
    w = writer(j, sink, "interval", interval_ms=50)
    time.sleep(0.06)                 # the interval has run since the writer started
    w.submit(1, [entry(1)])
    sink.wait(lambda: sink.durable == [1])
    started = time.monotonic()
    while not [o for o in disk.ops if o[0] == "sync"]:
        assert time.monotonic() - started < 2, "no fsync followed within the interval"
        time.sleep(0.005)
    w.submit(2, [entry(2)])
    sink.wait(lambda: sink.durable[-1] == 2)
    w.close()
    assert j.durable_seq == 2


def test_never_syncs_only_at_close():
    disk = MemDisk()
    j, _ = Journal.open(disk)
    sink = Sink(disk)
    w = writer(j, sink, "never")
    for seq in range(1, 21):
        w.submit(seq, [entry(seq)])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 20)
    assert not [o for o in disk.ops if o[0] == "sync"]
    w.close()
    assert [o for o in disk.ops if o[0] == "sync"] and j.durable_seq == 20


def test_close_drains_and_syncs_everything_queued(tmp_path):
    j, _ = Journal.open(OsDisk(tmp_path))
    sink = Sink()
    w = writer(j, sink, "never")
    for seq in range(1, 501):
        w.submit(seq, [entry(seq)])
    w.close()
    assert sink.durable[-1] == 500
    with pytest.raises(WriterStopped, match="closed"):
        w.submit(501, [entry(501)])
    _, rec = Journal.open(OsDisk(tmp_path))
    assert len(rec.entries) == 500


def test_tokens_must_increase():
    j, _ = Journal.open(MemDisk())
    w = writer(j, Sink())
    w.submit(5, [entry(1)])
    with pytest.raises(ValueError, match="increase"):
        w.submit(5, [entry(2)])
    w.close()


@pytest.mark.parametrize("failing", ["append", "sync"])
def test_an_io_error_is_reported_once_and_stops_the_writer(failing):
    disk = MemDisk()
    j, _ = Journal.open(disk)
    sink = Sink()
    w = writer(j, sink)
    w.submit(1, [entry(1)])
    sink.wait(lambda: sink.durable == [1])
    disk.fail = lambda op, name: OSError(errno.ENOSPC, "No space left on device") if op == failing else None
    w.submit(2, [entry(2)])
    sink.wait(lambda: sink.errors)
    assert len(sink.errors) == 1 and sink.errors[0].errno == errno.ENOSPC
    assert w.failed is sink.errors[0]
    disk.fail = None                # even a disk that works again is not trusted
    with pytest.raises(WriterStopped) as e:
        w.submit(3, [entry(3)])
    assert e.value.__cause__ is sink.errors[0]
    time.sleep(0.05)
    assert sink.durable == [1], "nothing after the error is claimed durable"
    assert len(sink.errors) == 1 and w.stats().failed
    w.close()


def test_snapshot_through_the_writer_orders_with_appends(tmp_path):
    j, _ = Journal.open(OsDisk(tmp_path), segment_bytes=400)
    sink = Sink()
    w = writer(j, sink, "never")
    for seq in range(1, 31):
        w.submit(seq, [entry(seq)])
    done: list = []
    snap = w.begin_snapshot(25, 1)
    snap.add(b"part 1")
    w.submit(31, [entry(31)])
    snap.add(b"part 2")
    snap.finish(31, done.append)    # 31 was only written: the writer syncs before finishing
    w.submit(32, [entry(32)])
    w.close()
    assert done == [None]
    _, rec = Journal.open(OsDisk(tmp_path), segment_bytes=400)
    assert rec.blobs == (b"part 1", b"part 2") and rec.snapshot.end_seq == 31
    assert [e.seq for e in rec.entries] == list(range(26, 33))


def test_a_snapshot_overtaken_by_a_reset_fails_alone():
    disk = MemDisk()
    j, _ = Journal.open(disk)
    sink = Sink()
    w = writer(j, sink)
    w.submit(1, [entry(1), entry(2)])
    done: list = []
    snap = w.begin_snapshot(2, 1)
    snap.add(b"stale")
    w.submit_reset(2, 1, 3, [b"transferred"])
    snap.finish(2, done.append)
    w.submit(3, [entry(2, 3)])
    sink.wait(lambda: sink.durable and sink.durable[-1] == 3)
    w.close()
    assert len(done) == 1 and isinstance(done[0], SnapshotAborted)
    assert not sink.errors
    _, rec = Journal.open(disk)
    assert rec.blobs == (b"transferred",) and [e.seq for e in rec.entries] == [2]


def test_a_full_disk_fails_the_writer_and_claims_nothing_unwritten(tmp_path):
    """A real file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored so write() fails with EFBIG)."""
    script = r"""
import json, resource, signal, sys, threading
from cluster.journal import Journal, JournalEntry, JournalWriter, OsDisk, WriterStopped
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
journal, _ = Journal.open(OsDisk(sys.argv[1]))
durable, errors, stopped = [], [], threading.Event()
def on_error(e):
    errors.append(e); stopped.set()
w = JournalWriter(journal, "always", on_durable=durable.append, on_error=on_error)
refused = None
for seq in range(1, 200):
    try:
        w.submit(seq, [JournalEntry(seq, 1, b"x" * 1000)])
    except WriterStopped:
        refused = seq
        break
    if stopped.wait(0.001):
        pass
stopped.wait(5)
w.close()
print(json.dumps({"durable": max(durable, default=0), "errno": errors[0].errno if errors else None,
                  "errors": len(errors), "refused": refused, "file": getattr(errors[0], "filename", None)}))
"""
    r = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["errno"] == errno.EFBIG and out["errors"] == 1 and out["file"].endswith(".seg")
    assert out["refused"] is not None, "submits after the error are refused"
    assert 0 < out["durable"] < 33
    _, rec = Journal.open(OsDisk(tmp_path))       # no limit here: the torn write is cut
    assert [e.seq for e in rec.entries] == list(range(1, len(rec.entries) + 1))
    assert rec.last_seq >= out["durable"], "everything claimed durable is there"
