"""cluster/journal/shared_tools.py through tools.py and elasticmq_py/journal_cli.py: check and
truncate of a shared journal (groups >= 2), and the refusals of a journal of the other format."""

import argparse
import io
import os
from pathlib import Path

import pytest

from cluster.config import Durability
from cluster.journal import format as fmt
from cluster.journal import shared_format as sfmt
from cluster.journal.backup import BackupFailed, backup
from cluster.journal.disk import OsDisk
from cluster.journal.format import DROPPED_MARKER, JournalEntry
from cluster.journal.shared import SharedJournal
from cluster.journal.shared_format import GroupEntry
from cluster.journal.tools import check, truncate
from cluster.journaling import DataDirError, open_journal
from elasticmq_py import journal_cli
from storage import Storage


def entries(start: int, stop: int) -> list[JournalEntry]:
    return [JournalEntry(s, 2, f"batch {s} ".encode() * 10) for s in range(start, stop + 1)]


def write_shared(path: Path, last: int, *, groups: int = 3, segment_bytes: int = 1000,
                 snapshot: tuple[int, int, int] | None = None) -> None:
    j, _ = SharedJournal.open(OsDisk(path), groups, segment_bytes=segment_bytes)
    for s in range(1, last + 1):
        j.append_groups([(g, entries(s, s)) for g in range(groups)])
    j.sync()
    if snapshot is not None:
        group, at_seq, end_seq = snapshot
        w = j.begin_snapshot(group, at_seq, 2)
        w.add(b"snapshot blob")
        w.finish(end_seq)
    j.close()


def segments(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".seg"))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    args = argparse.Namespace(journal_command=argv[0], dir=argv[1], yes="--yes" in argv)
    return journal_cli.run(args, out=out, err=err, ask=lambda _: "n"), out.getvalue(), err.getvalue()


def recovered(path: Path, groups: int = 3):
    j, rec = SharedJournal.open(OsDisk(path), groups)
    j.close()
    return rec


def test_check_a_sound_shared_journal(tmp_path):
    write_shared(tmp_path, 30, snapshot=(1, 12, 12))
    r = check(tmp_path)
    assert r.problem is None and not r.damaged and r.last_seq == 30
    assert [(g.group, g.entries, g.last_seq) for g in r.groups] == [(0, 30, 30), (1, 18, 30), (2, 30, 30)]
    assert r.groups[1].snapshot.at_seq == 12 and r.groups[1].first_seq == 1
    code, out, _ = cli("check", str(tmp_path))
    assert code == 0 and "shared by 3 groups" in out and "problem: none" in out
    assert "group 1: history 0, snapshot #1 at seq 12 epoch 2, needs entries up to 12; entries: 18 to replay" in out
    assert "g001-snap-00000001.snap  snapshot" in out and "history 0, seq 12" in out


def test_truncate_restarts_only_the_damaged_group(tmp_path):
    write_shared(tmp_path, 10)
    with open(tmp_path / segments(tmp_path)[-1], "ab") as f:
        f.write(sfmt.encode_group_entry(GroupEntry(1, 0, 12, 2, b"after a gap")))
    r = check(tmp_path)
    assert r.damaged and "group 1: entry seq 12, expected 11" in r.problem.why
    assert [g.problem is not None for g in r.groups] == [False, True, False]
    code, out, _ = cli("check", str(tmp_path))
    assert code == 1 and "group 1: history 0, no snapshot; entries: 10 to replay; on disk seq 1..10; damaged" in out
    before = {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)}
    plan = truncate(tmp_path, apply=False)
    assert plan.dropped.what.startswith("group 1 restarts empty in history 1") and not plan.dropped.applied
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} == before, "a dry run changes nothing"
    code, out, _ = cli("truncate", str(tmp_path), "--yes")
    assert code == 0 and "dropped: group 1 restarts empty" in out and DROPPED_MARKER in out
    rec = recovered(tmp_path)
    assert [len(g.entries) for g in rec.groups] == [10, 0, 10] and rec.entries_dropped
    assert rec.groups[1].history == 1 and rec.groups[1].snapshot.at_seq == 0
    assert segments(tmp_path) == sorted(before_seg for before_seg in before if before_seg.endswith(".seg"))


def test_truncate_damage_in_a_shared_segment_cuts_every_group_there(tmp_path):
    """The cut leaves group 1's fuzzy snapshot (at 2, holding effects up to 25) without the
    entries it needs: group 1 restarts empty."""
    write_shared(tmp_path, 30, segment_bytes=800, snapshot=(1, 2, 25))
    names = segments(tmp_path)
    assert len(names) >= 4
    seg = tmp_path / names[1]
    data = bytearray(seg.read_bytes())
    offset = fmt.scan(bytes(data), fmt.HEADER_SIZE, sfmt.SEGMENT_TAGS).records[2].offset
    data[offset + 30] ^= 0xFF
    seg.write_bytes(bytes(data))
    r = check(tmp_path)
    assert r.damaged and (r.problem.file, r.problem.offset) == (names[1], offset)
    report = truncate(tmp_path)
    assert not report.damaged and report.dropped.cut.file == names[1]
    assert set(report.dropped.files_removed) == set(names[2:])
    assert "group 1 restarts empty in history 1 (" in report.dropped.what
    rec = recovered(tmp_path)
    kept = [rec.groups[0], rec.groups[2]]
    assert all(g.entries and [e.seq for e in g.entries] == list(range(1, g.last_seq + 1)) for g in kept)
    assert abs(kept[0].last_seq - kept[1].last_seq) <= 1 and kept[0].last_seq < 25 and rec.entries_dropped
    assert (rec.groups[1].history, rec.groups[1].last_seq, rec.groups[1].entries) == (1, 0, ())


def test_truncate_a_torn_tail_alone_leaves_no_marker(tmp_path):
    write_shared(tmp_path, 5)
    with open(tmp_path / segments(tmp_path)[-1], "ab") as f:
        f.write(sfmt.encode_group_entry(GroupEntry(0, 0, 6, 2, b"x" * 40))[:-3])
    assert check(tmp_path).problem.kind == "torn" and not check(tmp_path).damaged
    report = truncate(tmp_path)
    assert report.problem is None and not report.entries_dropped
    assert DROPPED_MARKER not in os.listdir(tmp_path)


def test_a_node_of_groups_1_refuses_a_shared_journal_and_backup_refuses_to_copy_it(tmp_path):
    data = tmp_path / "data"
    write_shared(data / "journal", 3)
    with pytest.raises(DataDirError, match="shared journal .format 2.*this node has groups = 1"):
        open_journal(Durability(str(data)), Storage, 1 << 20)
    OsDisk(data / "journal").close()        # the refusal released the lock
    with pytest.raises(BackupFailed, match="shared journal"):
        backup(data / "journal", tmp_path / "copy")
