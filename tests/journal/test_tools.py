"""cluster/journal/tools.py and elasticmq_py/journal_cli.py: check and truncate, as an operator runs them."""

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.journal import format as fmt
from cluster.journal.disk import JournalLocked, OsDisk
from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal
from cluster.journal.recovery import JournalDamaged
from cluster.journal.tools import check, truncate
from cluster.journal.writer import JournalWriter
from elasticmq_py import journal_cli

ROOT = Path(__file__).resolve().parents[2]


def entries(start: int, stop: int) -> list[JournalEntry]:
    return [JournalEntry(s, 2, f"batch {s} ".encode() * 10) for s in range(start, stop + 1)]


def write_journal(path: Path, last: int, *, segment_bytes: int = 1000, snapshot_at: int | None = None) -> None:
    j, _ = Journal.open(OsDisk(path), segment_bytes=segment_bytes)
    j.append(entries(1, last))
    j.sync()
    if snapshot_at is not None:
        w = j.begin_snapshot(snapshot_at, 2)
        w.add(b"snapshot blob")
        w.finish(snapshot_at)
    j.close()


def segments(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".seg"))


def damage(path: Path, seg_index: int, entry_index: int) -> tuple[str, int]:
    """Flip a byte inside an entry (entries after it stay valid); returns (file, record offset)."""
    name = segments(path)[seg_index]
    data = bytearray((path / name).read_bytes())
    s = fmt.scan(bytes(data), fmt.HEADER_SIZE)
    offset = s.records[entry_index].offset
    data[offset + 30] ^= 0xFF
    (path / name).write_bytes(bytes(data))
    return name, offset


def test_check_a_sound_journal(tmp_path):
    write_journal(tmp_path, 40, snapshot_at=12)
    r = check(tmp_path)
    assert r.problem is None and not r.damaged
    assert r.histories == (0,) and r.history == 0
    assert r.snapshot.at_seq == 12 and r.entries == 28 and r.last_seq == 40
    assert {f.kind for f in r.files} == {"segment", "snapshot"}
    assert r.bytes == sum(f.size for f in r.files)


def test_check_reports_damage_with_file_and_offset(tmp_path):
    write_journal(tmp_path, 40)
    name, offset = damage(tmp_path, 1, 2)
    r = check(tmp_path)
    assert r.damaged and r.problem.kind == "damaged"
    assert (r.problem.file, r.problem.offset) == (name, offset)
    assert r.dropped is None


def test_check_refuses_while_the_journal_is_open(tmp_path):
    j, _ = Journal.open(OsDisk(tmp_path))
    with pytest.raises(JournalLocked):
        check(tmp_path)
    j.close()


def test_truncate_drops_from_the_damage_on_and_the_journal_opens(tmp_path):
    write_journal(tmp_path, 40)
    before = segments(tmp_path)
    name, offset = damage(tmp_path, 1, 2)
    with pytest.raises(JournalDamaged):
        Journal.open(OsDisk(tmp_path))
    first_lost = fmt.parse_segment_name(name)[1] + 2
    dry = truncate(tmp_path, apply=False)
    assert dry.dropped is not None and not dry.dropped.applied and dry.damaged
    assert segments(tmp_path) == before, "a dry run changes nothing"
    r = truncate(tmp_path)
    d = r.dropped
    assert d.applied and not d.everything and r.problem is None
    assert d.from_seq == first_lost and d.to_seq == 40
    assert d.cut.file == name and d.cut.offset == offset
    assert set(d.files_removed) == set(before[2:])
    assert (tmp_path / name).stat().st_size == offset
    _, rec = Journal.open(OsDisk(tmp_path))
    assert [e.seq for e in rec.entries] == list(range(1, first_lost))


def test_truncate_cuts_a_torn_tail(tmp_path):
    write_journal(tmp_path, 10)
    seg = tmp_path / segments(tmp_path)[-1]
    with open(seg, "ab") as f:
        f.write(b"\x10\x00\x00\x00garbage")
    assert check(tmp_path).problem.kind == "torn" and not check(tmp_path).damaged
    r = truncate(tmp_path)
    assert r.problem is None and r.dropped.from_seq == 11 and r.dropped.bytes == 11
    # a torn tail was never fsynced, so never acknowledged: the node restarts as it would anyway
    assert not r.entries_dropped and not (tmp_path / fmt.DROPPED_MARKER).exists()


def test_truncate_empties_a_journal_whose_snapshot_lost_its_entries(tmp_path):
    j, _ = Journal.open(OsDisk(tmp_path), segment_bytes=1000)
    j.append(entries(1, 30))
    j.sync()
    w = j.begin_snapshot(10, 2)
    w.add(b"fuzzy")
    w.finish(30)                    # the blobs may hold effects of entries up to 30
    j.close()
    damage(tmp_path, -1, 0)
    r = truncate(tmp_path)
    assert r.dropped.everything and r.problem is None
    assert sorted(os.listdir(tmp_path)) == ["LOCK", fmt.DROPPED_MARKER]
    _, rec = Journal.open(OsDisk(tmp_path))
    assert rec.snapshot is None and rec.entries == ()


def test_truncating_damage_leaves_the_marker_and_recovery_reports_it(tmp_path):
    write_journal(tmp_path, 40)
    damage(tmp_path, 1, 2)
    truncate(tmp_path, apply=False)
    assert not (tmp_path / fmt.DROPPED_MARKER).exists(), "a dry run writes nothing"
    r = truncate(tmp_path)
    assert r.entries_dropped and (tmp_path / fmt.DROPPED_MARKER).exists()
    assert "marker" in {f.kind for f in r.files}
    c = check(tmp_path)
    assert c.entries_dropped and not c.damaged
    j, rec = Journal.open(OsDisk(tmp_path))
    assert rec.entries_dropped, "the node starts amnesiac"
    j.close()
    j, rec = Journal.open(OsDisk(tmp_path))
    assert rec.entries_dropped, "until told the journal is whole again, whatever the restarts"
    w = JournalWriter(j, on_durable=lambda token: None, on_error=lambda e: None)
    w.forget_dropped()
    w.close()
    assert not (tmp_path / fmt.DROPPED_MARKER).exists()
    j, rec = Journal.open(OsDisk(tmp_path))
    assert not rec.entries_dropped
    j.forget_dropped()                       # nothing to forget: nothing happens
    j.close()


# -- the CLI ------------------------------------------------------------------------------------

def cli(*argv: str, ask=None) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="elasticmq-py")
    journal_cli.add_journal_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = journal_cli.COMMANDS[args.command](args, out=out, err=err, ask=ask)
    return code, out.getvalue(), err.getvalue()


def test_cli_check_exit_codes_and_report(tmp_path):
    data_dir = tmp_path / "data"
    write_journal(data_dir / "journal", 20)
    code, out, _ = cli("journal", "check", str(data_dir))       # a data-dir finds its journal/
    assert code == 0 and "problem: none" in out and "seq 1..20" in out
    name, offset = damage(data_dir / "journal", 0, 3)
    code, out, _ = cli("journal", "check", str(data_dir / "journal"))
    assert code == 1 and f"{name} at offset {offset}" in out
    code, _, err = cli("journal", "check", str(tmp_path / "nowhere"))
    assert code == 2 and "nowhere" in err


def test_cli_truncate_asks_unless_yes(tmp_path):
    write_journal(tmp_path, 20)
    name, offset = damage(tmp_path, 0, 3)
    code, out, _ = cli("journal", "truncate", str(tmp_path), ask=lambda prompt: "n")
    assert code == 2 and "would drop" in out and "nothing changed" in out
    assert check(tmp_path).damaged
    code, out, _ = cli("journal", "truncate", str(tmp_path), "--yes")
    assert code == 0 and "dropped:" in out and "entries from seq 4" in out
    assert f"{fmt.DROPPED_MARKER}: truncate dropped entries the node may have acknowledged" in out
    code, out, _ = cli("journal", "truncate", str(tmp_path), "--yes")
    assert code == 0 and "nothing to truncate" in out


def test_cli_refuses_while_a_node_holds_the_journal(tmp_path):
    j, _ = Journal.open(OsDisk(tmp_path))
    code, _, err = cli("journal", "check", str(tmp_path))
    assert code == 2 and "in use by process" in err
    j.close()


def test_cli_main_in_a_real_process(tmp_path):
    write_journal(tmp_path, 5)
    damage(tmp_path, 0, 1)
    run = [sys.executable, "-c", "import sys; from elasticmq_py.journal_cli import main; sys.exit(main())"]
    r = subprocess.run(run + ["journal", "check", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "problem (damaged)" in r.stdout, r.stderr
    r = subprocess.run(run + ["journal", "truncate", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2 and "--yes" in r.stderr
    r = subprocess.run(run + ["journal", "truncate", str(tmp_path), "--yes"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(run + ["journal"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
