"""The simulator with replication groups (docs/groups.md): seeds with G drawn from 2 to 4 pass
every judge, each group has its own master and serves its own queues, and a one-group seed is
the seed it always was."""

from __future__ import annotations

import json

import pytest

from sim.mutants import GROUP_SETTINGS
from sim.scenario import generate
from sim.workload import DEAD, NEW_PREFIX, REDRIVEN
from sim.world import simulate

# seeds 0..59 draw these group counts (a generator of their own): a few of each, with faults,
# journals (whole-cluster crashes among them) and every ack policy
SEEDS = [s for s in range(60) if generate(s, **GROUP_SETTINGS).groups > 1][:16]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_seed_with_groups_passes_every_judge(seed):
    sc = generate(seed, **GROUP_SETTINGS)
    r = simulate(sc)
    assert r.ok, r.failures
    lines = [json.loads(x) for x in r.history.splitlines()]
    activated = {(d["node"], d["group"]) for d in lines if d["event"] == "activated"}
    assert {g for _, g in activated} == set(range(sc.groups)), "every group had a master"
    placed = {d["queue"]: d["group"] for d in lines if d["event"] == "placed"}
    setup = {q: g for q, g in placed.items() if not q.startswith(NEW_PREFIX)}
    pair = {q: setup.pop(q) for q in (DEAD, REDRIVEN)}
    assert sorted(setup.values()) == sorted(range(sc.groups)), "one queue in each group"
    assert pair == {DEAD: 0, REDRIVEN: 1}, "and a dead-letter pair across two groups"
    # the queues the clients create meanwhile (and list, across groups) are placed as they come
    created = {d["queue"] for d in lines if d["event"] == "client_op" and d["op"] == "create_queue"
               and d["outcome"] == "ok"}
    assert created <= set(placed)
    for d in lines:
        if d["event"] == "op" and d.get("queue") in placed and d["outcome"] == "ok":
            assert d["group"] == placed[d["queue"]], "an operation runs in its queue's group"


def test_the_group_count_is_drawn_apart_from_the_rest_of_a_seed():
    for seed in range(20):
        one = generate(seed, nodes=None, policy=None, crash_policy="any", duration=30.0)
        drawn = generate(seed, **GROUP_SETTINGS)
        assert one.groups == 1 and 1 <= drawn.groups <= 4
        assert one.policy == drawn.policy and one.nodes == drawn.nodes
        if not one.rare:     # (a run with groups plays no rare path, nor the faults and disks they bring)
            assert one.faults == drawn.faults and one.journal == drawn.journal
    assert len({generate(s, **GROUP_SETTINGS).groups for s in range(40)}) == 4
