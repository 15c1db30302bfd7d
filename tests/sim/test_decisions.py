"""Decision coverage (cluster/decisions.py, sim/coverage.py): off by default, recorded per seed by
the simulator without changing what the seed does, and added up into the table ``sim run``
prints."""

from __future__ import annotations

import re
from pathlib import Path

from cluster import decisions
from cluster.checker import to_line
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.sync import Position, is_prefix_of, seq_only_prefix_differs
from sim import generate, simulate
from sim.coverage import MIN_DIFFERED, format_table, rows, total
from sim.world import World

ROOT = Path(__file__).resolve().parents[2]
# short seeds that reach many points (18 with a differing alternative): two 3-node journaled
# ones, under none and under all; any change to the cores' timing, or to the rare paths a seed
# plays, may move a seed off a point, and then other seeds are picked (6 plays no rare path)
SEEDS = (0, 5)
DURATION = 20.0


def _noted_names() -> set[str]:
    """Every point name a core notes, read from the source."""
    names: set[str] = set()
    for p in (ROOT / "cluster").rglob("*.py"):
        names |= set(re.findall(r'decisions\.note\(\s*"([a-z_.]+)"', p.read_text()))
    return names


def test_recording_is_off_by_default_and_records_nothing():
    assert decisions.ON is False
    decisions.reset()
    log = ReplicationLog(limit_bytes=30)
    for s in range(1, 6):
        log.append(Entry(s, 1, b"x" * 10, 0))
    assert log.get(1) is None            # a trimmed seq: the lookup point, were it on
    assert decisions.counts() == {}


def test_recording_counts_and_turns_itself_off():
    with decisions.recording() as got:
        assert decisions.ON
        log = ReplicationLog(limit_bytes=30)
        for s in range(1, 6):
            log.append(Entry(s, 1, b"x" * 10, 0))
        log.get(1)     # trimmed: a lookup without the lower bound would have read another entry
        log.get(5)
    assert decisions.ON is False
    assert got == {"log.lookup": (2, 1)}
    assert decisions.counts() == {}, "the counts belong to the block"


def test_every_point_a_core_notes_is_named_and_described():
    noted = _noted_names()
    assert noted == set(decisions.POINTS), (noted ^ set(decisions.POINTS))
    assert all(decisions.POINTS[p] for p in noted)


def test_the_seq_only_prefix_alternative_matches_is_prefix_of():
    for limit in (10**9, 30):
        for written in ([1, 1, 2, 2, 3], [1, 2, 2, 2], [5]):
            log = ReplicationLog(limit)
            for seq, epoch in enumerate(written, 1):
                log.append(Entry(seq, epoch, b"x" * 10, 0))
            for seq in range(8):
                for epoch in range(6):
                    pos = Position(seq, epoch, 1)
                    expect = not is_prefix_of(pos, log) and seq <= log.last_seq
                    assert seq_only_prefix_differs(pos, log) == expect


def test_seeds_reach_points_with_differing_alternatives_and_replay_unchanged():
    per_seed = []
    for seed in SEEDS:
        sc = generate(seed, nodes=None, policy=None, duration=DURATION)
        r = simulate(sc)
        assert r.ok, r.failures
        assert set(r.decisions) <= set(decisions.POINTS)
        assert all(0 <= d <= n for n, d in r.decisions.values())
        per_seed.append(r.decisions)
        # recording changes nothing: the same seed, not recorded, writes the same history
        w = World(sc)
        w.run()
        assert decisions.ON is False and decisions.counts() == {}
        assert "\n".join(to_line(x) for x in w.records) + "\n" == r.history
    sweep = total(per_seed)
    differing = {p for p, (_, d) in sweep.items() if d}
    # the stream, the sync, the election core, the lease and the node core each show up
    for p in ("master.commit_count", "replica.epoch_fence", "sync.divergent", "election.pre_vote_count",
              "lease.expiry", "node.gating"):
        assert p in differing, (p, sweep.get(p))
    assert len(differing) >= 12, sorted(differing)


def test_the_table_lists_every_point_and_flags_the_rare_ones():
    totals = total(['{"sync.most_advanced": [40, 12]}', {"replica.epoch_fence": [9, 3]}, None])
    assert totals == {"sync.most_advanced": [40, 12], "replica.epoch_fence": [9, 3]}
    table = format_table(totals)
    lines = {ln.split()[0]: ln for ln in table.splitlines()[1:-1]}
    assert set(lines) == set(decisions.POINTS)
    assert "<-" not in lines["sync.most_advanced"]
    assert f"differed < {MIN_DIFFERED}" in lines["replica.epoch_fence"]
    assert "never ran" in lines["node.gating"]
    flagged = [r["point"] for r in rows(totals) if r["flag"]]
    assert len(flagged) == len(decisions.POINTS) - 1


def test_the_amnesia_rare_path_reaches_a_snapshot_asked_of_an_amnesiac_member_with_a_journal():
    # power cuts under a lax fsync: every member restarts amnesiac with its journal, and a master
    # behind the most advanced one's journal asks it for its snapshot, which it must not refuse
    sc = generate(6, nodes=None, policy=None, duration=30.0, rare=("amnesia",))
    assert sc.journal and sc.fsync in ("interval", "never") and any(f.kind == "crash_all" for f in sc.faults)
    r = simulate(sc)
    assert r.ok, r.failures
    ran, differed = r.decisions["transfer.empty_holder"]
    assert ran >= differed >= 1
