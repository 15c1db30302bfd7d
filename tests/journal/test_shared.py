"""cluster/journal/shared.py and shared_recovery.py: the shared journal of a node with groups >= 2,
over real files (OsDisk) and, for crashes and fsync counts, MemDisk."""

import os
from pathlib import Path

import pytest

from cluster.journal import format as fmt
from cluster.journal import shared_format as sfmt
from cluster.journal.disk import OsDisk
from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal
from cluster.journal.recovery import JournalDamaged
from cluster.journal.shared import SharedJournal
from cluster.journal.shared_format import GroupEntry
from cluster.journal.shared_recovery import JournalFormatMismatch, journal_format, recover, require_format, survey
from tests.journal.memdisk import MemDisk


def entries(start: int, stop: int, epoch: int = 1, tag: str = "") -> list[JournalEntry]:
    return [JournalEntry(s, epoch, f"{tag}batch {s} ".encode() * 6) for s in range(start, stop + 1)]


def open_dir(path: Path, groups: int = 3, **kw):
    return SharedJournal.open(OsDisk(path), groups, **kw)


def segments(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".seg"))


def seqs(rec, group: int) -> list[int]:
    return [e.seq for e in rec.groups[group].entries]


def interleave(j: SharedJournal, start: int, stop: int, groups=(0, 1, 2)) -> None:
    for s in range(start, stop + 1):
        j.append_groups([(g, entries(s, s, tag=f"g{g} ")) for g in groups])


def test_a_new_directory_recovers_every_group_empty(tmp_path):
    j, rec = open_dir(tmp_path / "journal")
    assert [(r.group, r.history, r.snapshot, r.entries, r.last_seq) for r in rec.groups] == [
        (g, 0, None, (), 0) for g in range(3)]
    assert j.groups == 3 and [j.durable_seq(g) for g in range(3)] == [0, 0, 0]
    j.close()


def test_each_group_gets_back_exactly_its_entries(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(0, entries(1, 10, epoch=2, tag="a"))
    j.append(2, entries(1, 3, epoch=5, tag="c"))
    j.append_groups([(0, entries(11, 12, epoch=2, tag="a")), (2, entries(4, 4, epoch=6, tag="c"))])
    assert (j.last_seq(0), j.durable_seq(0), j.last_seq(1), j.last_seq(2)) == (12, 0, 0, 4)
    assert j.sync() == (12, 0, 4) and j.durable_seq(2) == 4 and not j.unsynced
    j.close()
    j, rec = open_dir(tmp_path)
    assert list(rec.groups[0].entries) == entries(1, 12, epoch=2, tag="a")
    assert list(rec.groups[2].entries) == entries(1, 3, epoch=5, tag="c") + entries(4, 4, epoch=6, tag="c")
    assert rec.groups[1].entries == () and (rec.groups[2].last_seq, rec.groups[2].last_epoch) == (4, 6)
    j.append(1, entries(1, 1))      # appends continue where recovery ended, per group
    j.append(0, entries(13, 13))
    j.close()
    rec = recover(OsDisk(tmp_path))
    assert seqs(rec, 0) == list(range(1, 14)) and seqs(rec, 1) == [1]


def test_one_sync_is_one_fsync_for_every_group():
    disk = MemDisk()
    j, _ = SharedJournal.open(disk, 4)
    j.append(0, entries(1, 1))
    j.sync()                        # the segment's creation (and the directory) made durable
    disk.ops.clear()
    j.append_groups([(0, entries(2, 3)), (1, entries(1, 3)), (2, entries(1, 2))])
    j.append(2, entries(3, 3))
    j.append(3, entries(1, 3))
    j.sync()
    assert [op for op, _ in disk.ops] == ["append", "append", "append", "sync"]
    assert j.stats().fsyncs == 2 and j.sync() == (3, 3, 3, 3) and j.stats().fsyncs == 2


def test_append_refuses_a_seq_that_does_not_follow_in_its_group(tmp_path):
    j, _ = open_dir(tmp_path)
    j.append(0, entries(1, 3))
    with pytest.raises(ValueError, match="group 1: entry seq 2 does not follow 0"):
        j.append_groups([(0, entries(4, 4)), (1, entries(2, 2))])     # nothing of a bad batch is written
    with pytest.raises(ValueError, match="group 3"):
        j.append(3, entries(1, 1))
    j.append_groups([(0, entries(4, 4)), (1, entries(1, 1)), (0, entries(5, 5))])
    j.close()
    rec = recover(OsDisk(tmp_path))
    assert seqs(rec, 0) == [1, 2, 3, 4, 5] and seqs(rec, 1) == [1]


def test_segments_roll_and_carry_the_groups(tmp_path):
    j, _ = open_dir(tmp_path, segment_bytes=600)
    interleave(j, 1, 30)
    j.sync()
    names = segments(tmp_path)
    assert len(names) > 5 and j.stats().segments == len(names)
    assert [sfmt.parse_segment_name(n) for n in names] == list(range(1, len(names) + 1))
    assert {sfmt.decode_segment_header((tmp_path / n).read_bytes()).groups for n in names} == {3}
    j.close()
    _, rec = open_dir(tmp_path, segment_bytes=600)
    assert all(seqs(rec, g) == list(range(1, 31)) for g in range(3))


def test_torn_tail_is_cut_on_open(tmp_path):
    j, _ = open_dir(tmp_path)
    interleave(j, 1, 5)
    j.close()
    seg = tmp_path / segments(tmp_path)[-1]
    good = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(sfmt.encode_group_entry(GroupEntry(1, 0, 6, 1, b"x" * 50))[:-9])
    j, rec = open_dir(tmp_path)
    assert all(seqs(rec, g) == [1, 2, 3, 4, 5] for g in range(3))
    assert rec.truncated and seg.name in rec.truncated and seg.stat().st_size == good
    j.append(1, entries(6, 6))
    j.close()
    _, rec = open_dir(tmp_path)
    assert seqs(rec, 1) == list(range(1, 7)) and rec.truncated is None


def test_damage_in_the_middle_of_a_shared_segment_refuses_to_open(tmp_path):
    j, _ = open_dir(tmp_path)
    interleave(j, 1, 4)
    j.close()
    seg = tmp_path / segments(tmp_path)[-1]
    data = bytearray(seg.read_bytes())
    offset = fmt.scan(bytes(data), fmt.HEADER_SIZE, sfmt.SEGMENT_TAGS).records[5].offset
    data[offset + 30] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(JournalDamaged) as e:
        open_dir(tmp_path)
    assert (e.value.file, e.value.offset) == (seg.name, offset) and "valid record follows" in str(e.value)
    assert seg.read_bytes() == bytes(data), "a refused open changes nothing"
    OsDisk(tmp_path).close()        # and released the lock


def _write_raw(path: Path, *group_entries: GroupEntry) -> None:
    """Entries appended to the last segment as they are, past the journal's own checks."""
    seg = path / segments(path)[-1]
    with open(seg, "ab") as f:
        f.write(b"".join(sfmt.encode_group_entry(e) for e in group_entries))


def test_a_gap_in_one_group_is_damage_of_that_group_only(tmp_path):
    j, _ = open_dir(tmp_path)
    interleave(j, 1, 5)
    j.close()
    _write_raw(tmp_path, GroupEntry(1, 0, 7, 1, b"after a gap"), GroupEntry(0, 0, 6, 1, b"fine"))
    with pytest.raises(JournalDamaged, match="group 1: entry seq 7, expected 6") as e:
        open_dir(tmp_path)
    assert "journal truncate" in str(e.value)
    with OsDisk(tmp_path) as disk:
        sv = survey(disk)
    assert [r.damage is not None for r in sv.recoveries] == [False, True, False]
    assert [e.seq for e in sv.recoveries[0].entries] == [1, 2, 3, 4, 5, 6]
    assert [e.seq for e in sv.recoveries[2].entries] == [1, 2, 3, 4, 5]


def test_a_damaged_snapshot_of_one_group_leaves_the_others_recovering(tmp_path):
    j, _ = open_dir(tmp_path)
    interleave(j, 1, 8)
    j.sync()
    w = j.begin_snapshot(1, 6, 1)
    w.add(b"state of group 1")
    w.finish(6)
    j.close()
    snap = tmp_path / sfmt.snapshot_name(1, 1)
    snap.write_bytes(snap.read_bytes()[:-4])
    with pytest.raises(JournalDamaged, match="group 1: incomplete snapshot"):
        open_dir(tmp_path)
    with OsDisk(tmp_path) as disk:
        sv = survey(disk)
    assert [r.damage is not None for r in sv.recoveries] == [True if g == 1 else False for g in range(3)]
    assert [e.seq for e in sv.recoveries[0].entries] == [e.seq for e in sv.recoveries[2].entries] == list(range(1, 9))


def test_entries_of_a_history_that_no_snapshot_starts_are_damage_of_their_group(tmp_path):
    j, _ = open_dir(tmp_path)
    interleave(j, 1, 3)
    j.close()
    _write_raw(tmp_path, GroupEntry(2, 1, 4, 2, b"a reset's entry, its snapshot lost"))
    with pytest.raises(JournalDamaged, match="group 2: entries of history 1, but no snapshot starts it"):
        open_dir(tmp_path)


def test_compaction_keeps_a_segment_while_any_group_needs_it(tmp_path):
    """Groups 0 and 1 write interleaved; group 0 snapshots, group 1's snapshot lags: every
    segment holding group 1's entries after its snapshot stays, with group 0's beside them."""
    j, _ = open_dir(tmp_path, groups=2, segment_bytes=500)
    interleave(j, 1, 30, groups=(0, 1))
    j.sync()
    before = segments(tmp_path)
    j.begin_snapshot(0, 30, 1).finish(30)
    assert segments(tmp_path) == before, "group 1 has no snapshot: it needs every segment"
    j.begin_snapshot(1, 12, 1).finish(12)
    kept = segments(tmp_path)
    assert 0 < len(kept) < len(before)
    j.close()
    j, rec = open_dir(tmp_path, groups=2, segment_bytes=500)
    assert seqs(rec, 0) == [] and seqs(rec, 1) == list(range(13, 31))
    assert rec.groups[1].snapshot.at_seq == 12
    # the coverage was rebuilt from the files: group 1's snapshot now frees all but the current segment
    j.begin_snapshot(1, 30, 1).finish(30)
    assert segments(tmp_path) == kept[-1:]
    j.close()


def test_a_segment_of_only_one_groups_entries_goes_with_that_groups_snapshot(tmp_path):
    j, _ = open_dir(tmp_path, groups=2, segment_bytes=400)
    j.append(0, entries(1, 20))     # segments of group 0 only
    interleave(j, 1, 4, groups=(1,))
    j.sync()
    only_0 = [n for n in segments(tmp_path)][:-1]
    j.begin_snapshot(0, 20, 1).finish(20)
    assert not set(only_0) & set(segments(tmp_path))
    j.close()
    _, rec = open_dir(tmp_path, groups=2)
    assert seqs(rec, 1) == [1, 2, 3, 4] and rec.groups[0].snapshot.at_seq == 20


def test_a_reset_of_one_group_while_another_keeps_appending(tmp_path):
    j, _ = open_dir(tmp_path, groups=2, segment_bytes=500)
    interleave(j, 1, 10, groups=(0, 1))
    j.sync()
    j.append(1, entries(11, 12))            # not yet synced when group 0 resets
    j.reset(0, 4, 3, [b"group 0 transferred at 4"])
    assert (j.history(0), j.last_seq(0), j.durable_seq(0), j.last_epoch(0)) == (1, 4, 4, 3)
    assert (j.history(1), j.last_seq(1), j.durable_seq(1)) == (0, 12, 10), "the reset syncs no other group"
    assert j.unsynced
    with pytest.raises(ValueError, match="does not follow 4"):
        j.append(0, entries(11, 11))
    j.append_groups([(0, entries(5, 6, epoch=3, tag="new ")), (1, entries(13, 13))])
    assert j.sync() == (6, 13)
    j.close()
    _, rec = open_dir(tmp_path, groups=2, segment_bytes=500)
    g0 = rec.groups[0]
    assert (g0.history, g0.blobs, g0.snapshot.at_seq) == (1, (b"group 0 transferred at 4",), 4)
    assert list(g0.entries) == entries(5, 6, epoch=3, tag="new ")
    assert seqs(rec, 1) == list(range(1, 14))


def test_a_reset_groups_older_history_in_shared_segments_is_never_replayed(tmp_path):
    """Group 0's history 0 ran to seq 20; a transfer restarts it at seq 3. Its old entries 4..20
    stay in segments that group 1 still needs, with the same seqs as the new history's."""
    j, _ = open_dir(tmp_path, groups=2, segment_bytes=500)
    interleave(j, 1, 20, groups=(0, 1))
    j.sync()
    before = segments(tmp_path)
    j.reset(0, 3, 2, [b"transferred"])
    assert segments(tmp_path) == before, "group 1 still needs them"
    j.append(0, entries(4, 8, epoch=2, tag="history 1 "))
    j.close()
    j, rec = open_dir(tmp_path, groups=2, segment_bytes=500)
    j.close()
    assert rec.groups[0].history == 1 and list(rec.groups[0].entries) == entries(4, 8, epoch=2, tag="history 1 ")
    assert seqs(rec, 1) == list(range(1, 21))
    with OsDisk(tmp_path) as disk:
        assert recover(disk).groups[0].first_seq == 4


class KeepsOldFiles(MemDisk):
    """A crash between a snapshot's rename and the removals it allows (while ``keep``)."""

    keep = True

    def remove(self, name: str) -> None:
        if not self.keep:
            super().remove(name)


def test_old_snapshots_and_covered_segments_left_by_a_crash_are_garbage():
    disk = KeepsOldFiles()
    j, _ = SharedJournal.open(disk, 2, segment_bytes=400)
    interleave(j, 1, 20, groups=(0, 1))
    j.sync()
    j.begin_snapshot(1, 18, 1).finish(18)
    j.begin_snapshot(0, 20, 1).finish(20)
    j.begin_snapshot(1, 20, 1).finish(20)
    j.close()
    names = disk.list()
    assert len([n for n in names if n.endswith(".seg")]) > 3 and "g001-snap-00000001.snap" in names
    disk.keep = False
    _, rec = SharedJournal.open(disk, 2, segment_bytes=400)
    assert [r.snapshot.at_seq for r in rec.groups] == [20, 20] and seqs(rec, 0) == seqs(rec, 1) == []
    assert disk.list() == ["g000-snap-00000002.snap", "g001-snap-00000003.snap", names[-1]]


def test_the_fuzzy_snapshot_of_a_group_needs_that_group_durable(tmp_path):
    j, _ = open_dir(tmp_path, groups=2)
    j.append(0, entries(1, 5))
    j.sync()
    w = j.begin_snapshot(0, 5, 1)
    j.append(0, entries(6, 7))
    w.add(b"blob")
    with pytest.raises(ValueError, match="sync"):
        w.finish(7)
    with pytest.raises(RuntimeError, match="group 0 is already in progress"):
        j.begin_snapshot(0, 5, 1)
    j.begin_snapshot(1, 0, 0).abort()       # another group's snapshot goes alongside
    j.sync()
    assert w.finish(7).end_seq == 7
    with pytest.raises(ValueError, match="older"):
        j.begin_snapshot(0, 4, 1)
    j.close()
    _, rec = open_dir(tmp_path, groups=2)
    assert rec.groups[0].blobs == (b"blob",) and seqs(rec, 0) == [6, 7]


def test_synced_entries_survive_a_power_cut_in_every_group():
    disk = MemDisk()
    j, _ = SharedJournal.open(disk, 3, segment_bytes=300)
    interleave(j, 1, 10)
    j.sync()
    interleave(j, 11, 14)           # never synced (but a roll syncs the segment it closes)
    disk.crash()
    _, rec = SharedJournal.open(disk, 3, segment_bytes=300)
    for g in range(3):
        got = seqs(rec, g)
        assert got == list(range(1, len(got) + 1)) and 10 <= len(got) <= 14


def test_a_node_refuses_a_journal_of_another_groups_count(tmp_path):
    v1 = tmp_path / "v1"
    j, _ = Journal.open(OsDisk(v1))
    j.append(entries(1, 2))
    j.close()
    with pytest.raises(JournalFormatMismatch, match="groups = 1 .format 1.; this node has groups = 3"):
        open_dir(v1)
    OsDisk(v1).close()              # the refusal released the lock
    v2 = tmp_path / "v2"
    j, _ = open_dir(v2, groups=3)
    j.append(2, entries(1, 1))
    j.close()
    with pytest.raises(JournalFormatMismatch, match="groups = 3; this node has groups = 2"):
        open_dir(v2, groups=2)
    with OsDisk(v2) as disk:
        assert journal_format(disk.list()) == 2
        with pytest.raises(JournalFormatMismatch, match="shared journal .format 2.*this node has groups = 1"):
            require_format(disk, 1)
        require_format(disk, 3)
    with OsDisk(v1) as disk:
        assert journal_format(disk.list()) == 1
        require_format(disk, 1)
    with OsDisk(tmp_path / "empty") as disk:
        disk.write_new("notes.tmp", b"not a journal's")
        assert journal_format(disk.list()) is None
        require_format(disk, 1)
        require_format(disk, 2)


def test_each_group_rebuilds_its_own_storage_from_the_shared_journal(tmp_path):
    """journaling.rebuild (what a node and the simulator rebuild a journal's state with) takes
    a group's recovery as it takes a format 1 recovery: snapshot blobs, then entries."""
    from cluster.journaling import rebuild
    from storage import ManualClock, Storage
    from storage.codec import encode_many
    from storage.commands import CreateQueue, Namespace, SendMessage

    clock = ManualClock()
    stores = [Storage(clock), Storage(clock)]
    j, _ = open_dir(tmp_path, groups=2)
    for g, store in enumerate(stores):
        ns = Namespace()
        _, created = store.execute(CreateQueue(ns, f"queue-of-group-{g}"))
        j.append(g, [JournalEntry(1, 1, encode_many(created))])
    for seq in range(2, 6):
        for g, store in enumerate(stores):
            _, sent = store.execute(SendMessage(Namespace().key(f"queue-of-group-{g}"), f"body {g}.{seq}"))
            j.append(g, [JournalEntry(seq, 1, encode_many(sent))])
        if seq == 3:
            j.sync()
            w = j.begin_snapshot(0, 3, 1)
            w.add(encode_many(stores[0].snapshot()))
            w.finish(3)
    j.close()
    j, rec = open_dir(tmp_path, groups=2)
    j.close()
    for g, store in enumerate(stores):
        rebuilt, log = rebuild(rec.groups[g], lambda: Storage(clock), 1 << 20)
        assert rebuilt.digest() == store.digest() and log.last_seq == 5
    assert rec.groups[0].snapshot.at_seq == 3 and seqs(rec, 0) == [4, 5]
