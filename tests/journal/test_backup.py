"""cluster/journal/backup.py and `elasticmq-py journal backup|restore`: a consistent copy of a
journal a node is writing, and a new journal (epoch 0) from it."""

import os

import pytest

from cluster.journal import backup as backup_mod
from cluster.journal import format as fmt
from cluster.journal.backup import BackupFailed, backup, restore
from cluster.journal.disk import OsDisk
from cluster.journal.journal import Journal
from cluster.journal.recovery import survey
from cluster.journal.tools import check
from tests.journal.test_tools import cli, damage, entries, write_journal


def test_a_backup_of_an_open_journal_holds_its_snapshot_and_every_synced_entry(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "dest"
    j, _ = Journal.open(OsDisk(src), segment_bytes=4000)     # open: the node runs on it
    j.append(entries(1, 30))
    j.sync()
    w = j.begin_snapshot(12, 2)
    w.add(b"snapshot blob")
    w.finish(12)
    j.append(entries(31, 40))
    j.sync()
    j.begin_snapshot(40, 2).add(b"half written")               # a .tmp: left out
    done = backup(src, dest)
    sizes = {n: os.path.getsize(src / n) for n in os.listdir(src)}
    j.close()
    assert done.attempts == 1 and not done.report.damaged and done.report.problem is None
    assert done.report.snapshot.at_seq == 12 and done.report.last_seq == 40 and done.report.entries == 28
    names = os.listdir(dest)
    assert not any(n.endswith(fmt.TEMP_SUFFIX) for n in names)
    # the live segment's 4000 reserved bytes are not copied: only its complete records
    last = max(n for n in names if n.endswith(fmt.SEGMENT_SUFFIX))
    assert os.path.getsize(dest / last) < sizes[last]


def test_a_record_cut_short_at_the_end_is_left_out(tmp_path):
    src = tmp_path / "src"
    write_journal(src, 10, segment_bytes=100_000)
    (seg,) = [n for n in os.listdir(src) if n.endswith(fmt.SEGMENT_SUFFIX)]
    with open(src / seg, "ab") as f:                          # a write the copy caught half done
        f.write(fmt.encode_record(fmt.encode_entry(entries(11, 11)[0]))[:-7])
    done = backup(src, tmp_path / "dest")
    assert done.report.problem is None and done.report.last_seq == 10


def test_a_file_removed_during_the_copy_starts_the_copy_again(tmp_path, monkeypatch):
    src = tmp_path / "src"
    write_journal(src, 20, snapshot_at=8)
    copy, calls = backup_mod._copy, []

    def compacting(path, disk):
        calls.append(1)
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file or directory", str(src / "h00000000-x.seg"))
        copy(path, disk)

    monkeypatch.setattr(backup_mod, "_copy", compacting)
    done = backup(src, tmp_path / "dest")
    assert done.attempts == 2 and done.report.last_seq == 20
    def always_compacting(path, disk):
        raise FileNotFoundError(2, "No such file or directory", "x.seg")

    monkeypatch.setattr(backup_mod, "_copy", always_compacting)
    with pytest.raises(BackupFailed, match="removed while it was copied"):
        backup(src, tmp_path / "again")


def test_a_damaged_source_is_no_backup(tmp_path):
    src = tmp_path / "src"
    write_journal(src, 20)
    damage(src, 0, 3)
    with pytest.raises(BackupFailed, match="at offset"):
        backup(src, tmp_path / "dest", attempts=2)


def test_restore_writes_the_state_as_one_snapshot_at_epoch_0(tmp_path):
    src, dest = tmp_path / "src", tmp_path / "restored"
    write_journal(src, 30, snapshot_at=12)
    report = restore(src, dest)
    assert not report.damaged and report.last_seq == 30 and report.entries == 0
    assert report.snapshot.at_seq == 30 and report.snapshot.at_epoch == 0
    with OsDisk(dest, create=False) as disk:
        sv = survey(disk)
    with OsDisk(src, create=False) as disk:
        old = survey(disk)
    # what recovery applies, in the order it applies it: the snapshot's blobs, then the entries
    assert sv.blobs == old.blobs + tuple(e.mutations for e in old.entries)
    j, _ = Journal.open(OsDisk(dest))
    j.append(entries(31, 31))                                # a node goes on from there
    j.sync()
    j.close()
    assert check(dest).last_seq == 31


def test_the_cli_backs_up_a_data_dir_and_restores_into_a_new_one(tmp_path):
    data = tmp_path / "data"
    write_journal(data / "journal", 20, snapshot_at=5)
    (data / "raft").mkdir()
    code, out, err = cli("journal", "backup", str(data), str(tmp_path / "b"))
    assert code == 0, err
    assert "problem: none" in out and "entries up to seq 20" in out
    assert sorted(os.listdir(tmp_path / "b")) == sorted(os.listdir(data / "journal"))   # no raft/
    code, _, err = cli("journal", "backup", str(data), str(tmp_path / "b"))
    assert code == 2 and "not empty" in err
    code, out, err = cli("journal", "restore", str(tmp_path / "b"), str(tmp_path / "new"))
    assert code == 0, err
    assert "at seq 20 epoch 0" in out and check(tmp_path / "new" / "journal").last_seq == 20
    code, _, err = cli("journal", "restore", str(tmp_path / "b"), str(data))
    assert code == 2 and "not empty" in err
    damage(tmp_path / "b", 0, 2)
    code, _, err = cli("journal", "restore", str(tmp_path / "b"), str(tmp_path / "other"))
    assert code == 1 and "the backup is damaged" in err
