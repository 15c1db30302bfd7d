"""cluster/journal/journal.py and recovery.py over real files (OsDisk) and, for crashes, MemDisk."""

import errno
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.journal import format as fmt
from cluster.journal.disk import JournalIOError, JournalLocked, OsDisk
from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal, JournalFailed, SnapshotAborted
from cluster.journal.recovery import JournalDamaged, recover
from tests.journal.memdisk import MemDisk

ROOT = Path(__file__).resolve().parents[2]


def entries(start: int, stop: int, epoch: int = 1) -> list[JournalEntry]:
    return [JournalEntry(s, epoch, f"batch {s} ".encode() * 8) for s in range(start, stop + 1)]


def open_dir(path: Path, **kw):
    return Journal.open(OsDisk(path), **kw)


def segments(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".seg"))


def test_a_new_directory_recovers_empty(tmp_path):
    j, rec = open_dir(tmp_path / "journal")
    assert (rec.history, rec.snapshot, rec.blobs, rec.entries, rec.last_seq, rec.truncated) == (0, None, (), (), 0, None)
    assert j.last_seq == j.durable_seq == 0
    j.close()


def test_append_sync_reopen_gives_the_exact_entries(tmp_path):
    j, _ = open_dir(tmp_path)
    es = entries(1, 50, epoch=3)
    j.append(es[:20])
    j.append(es[20:])
    assert (j.last_seq, j.durable_seq) == (50, 0)
    assert j.sync() == 50 and j.durable_seq == 50
    assert j.stats().fsyncs == 1
    j.close()
    j, rec = open_dir(tmp_path)
    assert list(rec.entries) == es and (rec.last_seq, rec.last_epoch) == (50, 3)
    assert rec.bytes_on_disk == sum(os.path.getsize(tmp_path / n) for n in segments(tmp_path))
    j.append(entries(51, 52))       # appends continue where recovery ended
    j.close()
    assert [e.seq for e in recover(OsDisk(tmp_path)).entries] == list(range(1, 53))


def test_append_refuses_a_seq_that_does_not_follow(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 3))
    with pytest.raises(ValueError, match="seq 5 does not follow 3"):
        j.append(entries(5, 5))
    with pytest.raises(ValueError):
        j.append([*entries(4, 4), *entries(6, 6)])     # nothing of a bad batch is written
    j.append(entries(4, 4))
    j.close()
    assert [e.seq for e in recover(OsDisk(tmp_path)).entries] == [1, 2, 3, 4]


def test_segments_roll_past_segment_bytes(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=1000)
    for s in range(1, 101):
        j.append(entries(s, s))
    j.sync()
    names = segments(tmp_path)
    assert len(names) > 5 and j.stats().segments == len(names)
    firsts = [fmt.parse_segment_name(n)[1] for n in names]
    assert firsts[0] == 1 and firsts == sorted(firsts)
    assert all(os.path.getsize(tmp_path / n) < 1000 + 200 for n in names)
    j.close()
    _, rec = open_dir(tmp_path, segment_bytes=1000)
    assert [e.seq for e in rec.entries] == list(range(1, 101))


def test_torn_tail_is_cut_on_open_and_logged(tmp_path, caplog):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 10))
    j.close()
    seg = tmp_path / segments(tmp_path)[-1]
    good = seg.stat().st_size
    partial = fmt.encode_entry(entries(11, 11)[0])[:-7]
    with open(seg, "ab") as f:
        f.write(partial)
    with caplog.at_level(logging.WARNING, logger="cluster.journal"):
        j, rec = open_dir(tmp_path)
    assert [e.seq for e in rec.entries] == list(range(1, 11))
    assert rec.truncated is not None and str(good) in rec.truncated and seg.name in rec.truncated
    assert seg.stat().st_size == good
    assert any(seg.name in r.getMessage() and f"offset {good}" in r.getMessage() for r in caplog.records)
    j.append(entries(11, 12))       # a clean continuation after the cut
    j.close()
    _, rec = open_dir(tmp_path)
    assert [e.seq for e in rec.entries] == list(range(1, 13)) and rec.truncated is None


def test_garbage_tail_after_a_crc_flip_is_cut(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 5))
    j.close()
    seg = tmp_path / segments(tmp_path)[-1]
    data = bytearray(seg.read_bytes())
    data[-1] ^= 0xFF                # the last record's payload
    seg.write_bytes(bytes(data))
    _, rec = open_dir(tmp_path)
    assert [e.seq for e in rec.entries] == [1, 2, 3, 4] and rec.truncated


def test_damage_in_the_middle_refuses_to_open(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 10))
    j.close()
    seg = tmp_path / segments(tmp_path)[-1]
    data = bytearray(seg.read_bytes())
    offset = fmt.HEADER_SIZE + len(b"".join(fmt.encode_entry(e) for e in entries(1, 4)))
    data[offset + 20] ^= 0xFF       # inside entry 5, entries 6..10 intact
    seg.write_bytes(bytes(data))
    with pytest.raises(JournalDamaged) as e:
        open_dir(tmp_path)
    msg = str(e.value)
    assert e.value.file == seg.name and e.value.offset == offset
    assert seg.name in msg and f"offset {offset}" in msg
    assert "elasticmq-py journal check" in msg and "elasticmq-py journal truncate" in msg
    assert seg.read_bytes() == bytes(data), "a refused open changes nothing"
    OsDisk(tmp_path).close()        # and released the lock


def test_torn_record_in_a_segment_that_is_not_the_last_is_damage(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=500)
    j.append(entries(1, 30))
    j.close()
    first = tmp_path / segments(tmp_path)[0]
    first.write_bytes(first.read_bytes()[:-3])
    with pytest.raises(JournalDamaged, match="not the last"):
        open_dir(tmp_path)


def test_a_seq_gap_between_segments_is_damage(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=500)
    j.append(entries(1, 30))
    j.close()
    names = segments(tmp_path)
    assert len(names) >= 3
    os.remove(tmp_path / names[1])
    with pytest.raises(JournalDamaged, match="seq gap") as e:
        open_dir(tmp_path)
    assert e.value.file == names[2]


def test_reset_to_a_lower_seq_never_replays_the_old_history(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 20, epoch=1))
    j.sync()
    j.reset(12, 2, [b"state at 12"])
    assert (j.history, j.last_seq, j.durable_seq, j.last_epoch) == (1, 12, 12, 2)
    with pytest.raises(ValueError):
        j.append(entries(21, 21))
    j.append(entries(13, 15, epoch=2))
    j.close()
    assert all(n.startswith("h00000001-") for n in segments(tmp_path))
    _, rec = open_dir(tmp_path)
    assert rec.history == 1 and rec.blobs == (b"state at 12",)
    assert (rec.snapshot.at_seq, rec.snapshot.at_epoch) == (12, 2)
    assert [(e.seq, e.written_epoch) for e in rec.entries] == [(13, 2), (14, 2), (15, 2)]


class KeepsOldFiles(OsDisk):
    """A crash between the reset snapshot's rename and the removal of the old files."""

    def remove(self, name: str) -> None:
        pass


def test_old_history_files_left_by_a_crash_are_not_replayed(tmp_path):
    j, _ = Journal.open(KeepsOldFiles(tmp_path))
    j.append(entries(1, 20, epoch=1))
    j.sync()
    w = j.begin_snapshot(5, 1)
    w.add(b"old snapshot")
    w.finish(20)
    j.reset(12, 2, [b"new state"])
    j.close()
    assert any(n.startswith("h00000000-") for n in segments(tmp_path))
    assert len([n for n in os.listdir(tmp_path) if n.endswith(".snap")]) == 2
    j, rec = open_dir(tmp_path)
    assert rec.history == 1 and rec.blobs == (b"new state",) and rec.entries == () and rec.last_seq == 12
    assert not any(n.startswith("h00000000-") for n in os.listdir(tmp_path)), "recovery removed them"
    j.close()


def test_fuzzy_snapshot_compacts_and_recovery_replays_after_at_seq(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=600)
    j.append(entries(1, 40))
    j.sync()
    before = segments(tmp_path)
    w = j.begin_snapshot(30, 1)
    w.add(b"blob one")
    j.append(entries(41, 45))       # appends go on while the snapshot is written
    w.add(b"blob two")
    with pytest.raises(ValueError, match="sync"):
        w.finish(45)
    j.sync()
    stats = w.finish(45)
    assert (stats.at_seq, stats.end_seq) == (30, 45) and stats.bytes > 0
    assert j.stats().last_snapshot == stats
    after = segments(tmp_path)
    kept_firsts = [fmt.parse_segment_name(n)[1] for n in after]
    assert len(after) < len(before)
    assert kept_firsts[0] <= 31, "the segment holding seq 31 stays"
    assert all(fmt.parse_segment_name(n)[1] > 1 for n in after)
    on_disk = sum(os.path.getsize(tmp_path / n) for n in os.listdir(tmp_path) if n != "LOCK")
    # the data, and the current segment's space reserved ahead of it (at most a segment)
    assert j.stats().bytes_on_disk <= on_disk <= j.stats().bytes_on_disk + 600
    j.close()
    assert j.stats().bytes_on_disk == sum(os.path.getsize(tmp_path / n) for n in os.listdir(tmp_path) if n != "LOCK")
    _, rec = open_dir(tmp_path, segment_bytes=600)
    assert rec.blobs == (b"blob one", b"blob two")
    assert (rec.snapshot.at_seq, rec.snapshot.end_seq) == (30, 45)
    assert [e.seq for e in rec.entries] == list(range(31, 46))


def test_a_second_snapshot_replaces_the_first(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 10))
    j.sync()
    j.begin_snapshot(5, 1).finish(10)
    j.append(entries(11, 12))
    j.sync()
    w = j.begin_snapshot(12, 1)
    w.add(b"b")
    w.finish(12)
    assert [n for n in os.listdir(tmp_path) if n.endswith(".snap")] == ["snap-00000002.snap"]
    with pytest.raises(ValueError, match="older"):
        j.begin_snapshot(11, 1)
    j.close()
    _, rec = open_dir(tmp_path)
    assert rec.snapshot.counter == 2 and rec.entries == () and rec.last_seq == 12


def test_a_snapshot_left_mid_write_is_ignored_and_deleted(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 10))
    j.sync()
    w = j.begin_snapshot(8, 1)
    w.add(b"half a snapshot")
    j._disk.close()                 # the process dies here: the .tmp stays
    names = os.listdir(tmp_path)
    assert "snap-00000001.snap.tmp" in names
    j, rec = open_dir(tmp_path)
    assert rec.snapshot is None and [e.seq for e in rec.entries] == list(range(1, 11))
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    w = j.begin_snapshot(8, 1)      # the counter moves past the abandoned one
    assert w.header.counter == 2
    w.abort()
    j.close()


def test_reset_aborts_a_snapshot_in_progress(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(entries(1, 5))
    j.sync()
    w = j.begin_snapshot(5, 1)
    j.reset(3, 2, [b"x"])
    with pytest.raises(SnapshotAborted):
        w.finish(5)
    j.close()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_the_newest_snapshot_damaged_refuses_rather_than_falls_back(tmp_path):
    j, _ = Journal.open(KeepsOldFiles(tmp_path))
    j.append(entries(1, 10))
    j.sync()
    j.begin_snapshot(10, 1).finish(10)
    j.reset(4, 2, [b"transferred state"])
    j.close()
    newest = tmp_path / "snap-00000002.snap"
    newest.write_bytes(newest.read_bytes()[:-4])
    with pytest.raises(JournalDamaged, match="incomplete snapshot"):
        open_dir(tmp_path)


def test_a_missing_segment_after_the_snapshot_is_damage(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=500)
    j.append(entries(1, 30))
    j.sync()
    j.begin_snapshot(2, 1).finish(2)
    j.close()
    names = segments(tmp_path)
    os.remove(tmp_path / names[0])
    with pytest.raises(JournalDamaged, match="missing"):
        open_dir(tmp_path)


def test_lock_second_open_in_the_same_process_is_refused(tmp_path):
    j, _ = open_dir(tmp_path)
    with pytest.raises(JournalLocked) as e:
        OsDisk(tmp_path)
    assert str(tmp_path) in str(e.value) and f"process {os.getpid()}" in str(e.value)
    assert e.value.pid == os.getpid()
    j.close()
    OsDisk(tmp_path).close()        # released on close


def test_lock_another_process_is_refused(tmp_path):
    j, _ = open_dir(tmp_path)
    code = ("import sys\nfrom cluster.journal import OsDisk, JournalLocked\n"
            "try:\n    OsDisk(sys.argv[1])\nexcept JournalLocked as e:\n    print(e.pid, e)\n    sys.exit(3)\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 3, r.stderr
    assert r.stdout.startswith(str(os.getpid())) and str(tmp_path) in r.stdout
    j.close()


def test_new_segments_survive_a_crash_once_synced():
    disk = MemDisk()
    j, _ = Journal.open(disk, segment_bytes=300)
    j.append(entries(1, 20))
    j.sync()
    j.append(entries(21, 25))       # never synced (but a roll syncs the segment it closes)
    disk.crash()
    _, rec = Journal.open(disk, segment_bytes=300)
    seqs = [e.seq for e in rec.entries]
    assert seqs == list(range(1, len(seqs) + 1)) and 20 <= len(seqs) <= 25


def test_reset_survives_a_crash_right_after_its_snapshot():
    disk = MemDisk()
    j, _ = Journal.open(disk)
    j.append(entries(1, 10))
    j.sync()
    disk.fail = lambda op, name: OSError(errno.EIO, "crash now") if op == "remove" and name.endswith(".seg") else None
    with pytest.raises(JournalIOError):
        j.reset(6, 2, [b"state"])
    disk.crash()
    _, rec = Journal.open(disk)
    assert rec.history == 1 and rec.blobs == (b"state",) and rec.entries == () and rec.last_seq == 6
    assert not [n for n in disk.list() if n.startswith("h00000000-")]


def test_an_io_error_stops_the_journal():
    disk = MemDisk()
    j, _ = Journal.open(disk)
    j.append(entries(1, 3))
    disk.fail = lambda op, name: OSError(errno.EIO, "I/O error") if op == "sync" else None
    with pytest.raises(JournalIOError, match="I/O error"):
        j.sync()
    disk.fail = None
    with pytest.raises(JournalFailed):
        j.sync()                    # never again durable: fsyncgate
    with pytest.raises(JournalFailed):
        j.append(entries(4, 4))
    assert j.durable_seq == 0
    j.close()
    assert disk.closed


def test_a_crash_leaves_the_segments_reserved_space_which_recovery_cuts_quietly(tmp_path, caplog):
    """A segment gets its whole size when it is created (syncs into reserved space commit no new
    file size). After a crash the zeros past the data are no torn tail: recovery cuts them
    without a warning, and the journal goes on right after the data."""
    j, _ = open_dir(tmp_path, segment_bytes=1 << 20)
    j.append(entries(1, 10))
    j.sync()
    seg = tmp_path / segments(tmp_path)[-1]
    assert seg.stat().st_size == 1 << 20, "reserved at creation"
    data_end = j.stats().bytes_on_disk
    j._disk.close()                     # a crash: no clean close, the reserve stays
    with caplog.at_level(logging.WARNING, logger="cluster.journal"):
        j, rec = open_dir(tmp_path, segment_bytes=1 << 20)
    assert [e.seq for e in rec.entries] == list(range(1, 11)) and rec.truncated is None
    assert not caplog.records, "reserved space is not a torn tail"
    assert seg.stat().st_size == data_end and rec.bytes_on_disk == data_end
    j.append(entries(11, 12))
    j.close()
    _, rec = open_dir(tmp_path)
    assert [e.seq for e in rec.entries] == list(range(1, 13)) and rec.truncated is None


def test_a_rolled_segment_gives_its_reserve_back(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=600)
    j.append(entries(1, 30))
    j.sync()
    names = segments(tmp_path)
    assert len(names) > 2
    for n in names[:-1]:
        size = (tmp_path / n).stat().st_size
        assert size < 600 + 200, f"{n}: {size} bytes, its reserve was not given back"
        assert fmt.scan((tmp_path / n).read_bytes(), fmt.HEADER_SIZE).end == size
    assert (tmp_path / names[-1]).stat().st_size == 600, "the current one keeps its reserve"
    j.close()
