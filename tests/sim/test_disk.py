"""sim/disk.py: the simulated data-dir's crash semantics, and the journal that ships on it
(cluster/journal) surviving its power cuts; a journaled seed with whole-cluster power cuts."""

from __future__ import annotations

import logging
import random

import pytest

from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal
from sim import generate, simulate
from sim.disk import POWER, PROCESS, SimDisk


@pytest.fixture(autouse=True)
def _quiet_journal():
    logging.getLogger("cluster.journal").setLevel(logging.ERROR)
    yield
    logging.getLogger("cluster.journal").setLevel(logging.NOTSET)


def test_synced_bytes_survive_a_power_cut_and_unsynced_ones_may_tear():
    outcomes = set()
    for seed in range(200):
        d = SimDisk()
        d.write_new("f", b"head")
        d.sync("f")
        d.sync_dir()
        d.append("f", b"0123456789")
        d.crash(random.Random(seed), POWER)
        data = d.read("f")
        assert data.startswith(b"head"), "what the last sync covered is kept"
        body = data[4:].rstrip(b"\x00")     # sometimes followed by zeros (allocated, never written)
        assert b"0123456789".startswith(body), data
        outcomes.add(len(data))
    assert {4, 14} <= outcomes, "none of the unsynced bytes, and all of them, both happen"
    assert any(4 < n < 14 for n in outcomes), "and torn in between"


def test_after_a_power_cut_everything_left_is_durable():
    d = SimDisk()
    d.write_new("f", b"abc")
    d.crash(random.Random(1), POWER)
    before = {n: d.read(n) for n in d.list()}
    d.crash(random.Random(2), POWER)
    assert {n: d.read(n) for n in d.list()} == before


def test_a_process_crash_keeps_everything_written():
    d = SimDisk()
    d.write_new("f", b"abc")
    d.append("f", b"def")
    d.rename("f", "g")
    d.crash(random.Random(0), PROCESS)
    assert d.list() == ["g"] and d.read("g") == b"abcdef"


def test_directory_operations_need_sync_dir():
    kept = set()
    for seed in range(100):
        d = SimDisk()
        d.write_new("old", b"x")
        d.sync("old")
        d.sync_dir()
        d.write_new("new.tmp", b"y")
        d.sync("new.tmp")
        d.rename("new.tmp", "new")
        d.remove("old")
        d.crash(random.Random(seed), POWER)
        names = tuple(d.list())
        assert "new" not in names or d.read("new") == b"y", "the renamed file's synced bytes came along"
        assert not ("new" in names and "new.tmp" in names), "a rename is atomic"
        kept.add(names)
    assert ("old",) in kept, "every un-synced directory operation may be rolled back"
    assert ("new",) in kept, "or all kept"
    assert len(kept) >= 3, kept


def test_synced_directory_operations_survive():
    for seed in range(50):
        d = SimDisk()
        d.write_new("a.tmp", b"1")
        d.sync("a.tmp")
        d.rename("a.tmp", "a")
        d.sync_dir()
        d.crash(random.Random(seed), POWER)
        assert d.list() == ["a"] and d.read("a") == b"1"


def test_a_truncation_after_the_last_sync_is_kept_or_undone():
    seen = set()
    for seed in range(60):
        d = SimDisk()
        d.write_new("f", b"abcdef")
        d.sync("f")
        d.sync_dir()
        d.truncate("f", 3)
        d.crash(random.Random(seed), POWER)
        seen.add(d.read("f"))
    assert seen == {b"abc", b"abcdef"}


def test_missing_files_raise_journal_io_errors():
    from cluster.journal.disk import JournalIOError

    d = SimDisk()
    with pytest.raises(JournalIOError):
        d.read("nope")
    d.write_new("f", b"")
    with pytest.raises(JournalIOError):
        d.write_new("f", b"")
    d.remove("nope")     # not an error


def test_the_journal_recovers_every_synced_entry_after_any_power_cut():
    """The journal that ships, on SimDisk: appends, syncs and snapshots, with a power cut at a
    random point; what was synced always comes back, in order. (Segments large enough never to
    roll: a roll is the test below.)"""
    for seed in range(60):
        rng = random.Random(seed)
        d = SimDisk()
        j, _ = Journal.open(d)
        seq = durable = 0
        for _ in range(rng.randint(1, 40)):
            n = rng.randint(1, 4)
            j.append([JournalEntry(seq + i + 1, 1, bytes([rng.randrange(256)]) * rng.randint(1, 60))
                      for i in range(n)])
            seq += n
            if rng.random() < 0.6:
                durable = j.sync()
            if rng.random() < 0.1 and durable:
                w = j.begin_snapshot(durable, 1)
                w.add(b"state")
                w.finish(durable)
        d.crash(rng, POWER)
        _, rec = Journal.open(d)
        assert rec.last_seq >= durable, (seed, rec.last_seq, durable)
        seqs = [e.seq for e in rec.entries]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else True


def test_a_journaled_seed_with_whole_cluster_power_cuts_passes():
    sc = generate(0, duration=20.0, journal=True, fsync="always")
    assert sc.journal and [f.kind for f in sc.faults].count("crash_all") >= 1
    r = simulate(sc, strict=True)
    assert r.ok, r.failures
    assert r.stats["power_cuts"] >= 1 and r.stats["fsyncs"] > 100
    assert '"action":"power_cut"' in r.history.replace(" ", "")


def test_seeds_without_a_journal_draw_what_they_drew_before():
    """The journal's draws come from a generator of their own: pinning it off changes nothing else."""
    for seed in range(30):
        a = generate(seed, duration=20.0, journal=False)
        b = generate(seed, duration=20.0)
        if not b.journal:
            assert a == b
        assert "crash_all" not in [f.kind for f in a.faults]


def test_a_power_cut_between_a_segment_roll_and_its_sync_leaves_a_journal_that_opens():
    """A roll syncs the segment before creating the next (found by the simulator's power cuts:
    a kept new file beside a torn older one was refused as damage)."""
    d = SimDisk()
    j, _ = Journal.open(d, segment_bytes=200)
    j.append([JournalEntry(1, 1, b"a" * 100)])
    assert j.sync() == 1
    # entry 2 goes into the first segment, entry 3 rolls to a new one; the fsync never returns
    j.append([JournalEntry(2, 1, b"b" * 100), JournalEntry(3, 1, b"c" * 100)])
    first, second = d.list()
    # the new segment's creation and all its bytes reached the disk; the first one's tail did not
    d.cut_exactly(dir_ops_kept=1, unsynced_kept={first: 10, second: d.size(second)})
    _, rec = Journal.open(d, segment_bytes=200)
    assert rec.last_seq >= 1


def test_a_whole_cluster_power_cut_under_fsync_never_ends_in_a_serving_master():
    """Seed 200 (3 nodes, policy none, fsync never): every member restarts amnesiac but with its
    journal; the sync picks the most advanced as the truth and needs its snapshot, which an
    amnesiac member once refused ("restarted empty"): the master never served."""
    r = simulate(generate(200, duration=20.0, journal=True, nodes=None, policy=None), strict=True)
    assert r.ok, r.failures


def test_the_journal_warns_of_a_torn_tail_on_a_real_disk_but_not_on_a_simulated_one(tmp_path, caplog):
    from cluster.journal.disk import OsDisk
    from cluster.journal.format import JournalEntry
    from cluster.journal.journal import Journal

    def tear(disk) -> None:
        j, _ = Journal.open(disk, segment_bytes=1 << 20)
        j.append([JournalEntry(1, 1, b"m" * 40)])
        j.sync()
        j.append([JournalEntry(2, 1, b"n" * 40)])
        seg = next(n for n in disk.list() if n.endswith(".seg"))
        j.close()
        disk.truncate(seg, disk.size(seg) - 10)       # the second record's write torn

    with caplog.at_level("WARNING", logger="cluster.journal.journal"):
        sim = SimDisk("sim/n1")
        tear(sim)
        _, rec = Journal.open(sim)
        assert rec.truncated and not caplog.records
        real = OsDisk(tmp_path / "data")
        tear(real)
        real = OsDisk(tmp_path / "data")
        _, rec = Journal.open(real)
        assert rec.truncated and any("torn tail" in r.getMessage() for r in caplog.records)


def test_the_shared_journal_recovers_every_groups_synced_entries_after_any_power_cut():
    """The shared journal of a node with groups >= 2, on SimDisk: every group appends, syncs (one
    sync for all), snapshots and resets at random, with a power cut at a random point; what each
    group had durable always comes back, in order, in its newest history."""
    from cluster.journal.shared import SharedJournal

    for seed in range(80):
        rng = random.Random(seed)
        groups = rng.randint(2, 4)
        d = SimDisk()
        j, _ = SharedJournal.open(d, groups, segment_bytes=rng.choice([300, 1000, 1 << 20]))
        durable = [0] * groups
        history = [0] * groups
        for _ in range(rng.randint(1, 40)):
            batch = [(g, [JournalEntry(j.last_seq(g) + i + 1, 1, bytes([rng.randrange(256)]) * rng.randint(1, 60))
                          for i in range(rng.randint(1, 3))])
                     for g in rng.sample(range(groups), rng.randint(1, groups))]
            j.append_groups(batch)
            if rng.random() < 0.6:
                durable = list(j.sync())
            g = rng.randrange(groups)
            if rng.random() < 0.1 and durable[g]:
                w = j.begin_snapshot(g, durable[g], 1)
                w.add(b"state")
                w.finish(durable[g])
            elif rng.random() < 0.05:
                at = rng.randint(0, j.last_seq(g) + 5)
                j.reset(g, at, 2, [b"transferred"])
                durable[g], history[g] = at, history[g] + 1
        d.crash(rng, POWER)
        _, rec = SharedJournal.open(d, groups)
        for g, r in enumerate(rec.groups):
            assert r.history == history[g] and r.last_seq >= durable[g], (seed, g, r.last_seq, durable[g])
            got = [e.seq for e in r.entries]
            assert got == list(range(got[0], got[0] + len(got))) if got else True, (seed, g)
