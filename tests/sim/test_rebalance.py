"""Rebalance in simulated runs with replication groups (cluster/assignment.py's balance step,
carried out by cluster/group_core.py's handover): a member killed and restarted gets groups
back once it has been steady for ``rebalance_quiet``, by a handover the Raft leader asked for,
never with two active masters of a group; a member whose links flap is handed none while they
flap, nor for the quiet period after.
The seeds are pinned: each plays the path named (seed 31: n3, master of group 2, killed at 12.8 s
and back at 13.6 s, group 1 handed to it at 24.0 s; seed 1: n1 and n3 flap from 2.5 s to 5.1 s)."""

from __future__ import annotations

import json

from cluster.config import Timing
from sim import generate, simulate

GROUPED = {"nodes": None, "policy": None, "crash_policy": "any", "duration": 30.0, "groups": None}


def _run(seed: int):
    sc = generate(seed, **GROUPED)
    assert sc.groups >= 2
    r = simulate(sc)
    assert r.ok, r.failures
    assert not r.verdict.two_masters
    return sc, [json.loads(line) for line in r.history.splitlines()]


def test_a_member_killed_and_restarted_gets_a_group_back_after_the_quiet_period():
    _, lines = _run(31)
    restarted = {d["node"]: d["ts"] for d in lines if d["event"] == "nemesis" and d.get("action") == "restart"}
    asked = [d for d in lines if d["event"] == "handover_requested" and d["to"] in restarted
             and d["ts"] >= restarted[d["to"]]]
    assert asked, "the leader asked for a group to move to the restarted member"
    first = asked[0]
    member, group = first["to"], first["group"]
    assert first["ts"] - restarted[member] >= Timing().rebalance_quiet
    killed = max(d["ts"] for d in lines if d["event"] == "nemesis" and d.get("action") == "kill"
                 and d["node"] == member and d["ts"] < restarted[member])
    views = [d for d in lines if d["event"] == "view" and d["node"] == first["node"]]
    mastered = [sum(s["master"] == member for s in d["groups"]) for d in views]
    assert [n for d, n in zip(views, mastered) if d["ts"] < killed][-1] >= 1, "it mastered a group"
    assert 0 in [n for d, n in zip(views, mastered) if killed < d["ts"] < first["ts"]], "failover took it"
    # the group's master before: the one asked; after: the view names the restarted member
    moved = [d for d in lines if d["event"] == "view" and d["ts"] > first["ts"]
             and d["groups"][group]["master"] == member]
    assert moved and moved[0]["groups"][group]["epoch"] > first["epoch"]
    released = [d for d in lines if d["event"] == "released" and d.get("group") == group and d["ts"] >= first["ts"]]
    assert released and released[0]["node"] == first["master"] and released[0]["to"] == member
    # no overlap: the old master stopped before the new one started serving the group
    stopped = min(d["ts"] for d in lines if d["event"] == "deactivated" and d["node"] == first["master"]
                  and d.get("group") == group and d["ts"] >= first["ts"])
    started = min(d["ts"] for d in lines if d["event"] == "activated" and d["node"] == member
                  and d.get("group") == group and d["ts"] > first["ts"])
    assert stopped <= released[0]["ts"] < started


def test_a_flapping_member_is_handed_no_group_while_its_links_flap():
    sc, lines = _run(1)
    flaps = [f for f in sc.faults if f.kind == "flap"]
    assert flaps
    for f in flaps:
        flapping = {f.params["a"], f.params["b"]}
        during = [d for d in lines if d["event"] == "handover_requested" and d["to"] in flapping
                  and f.at <= d["ts"] <= f.at + f.duration + Timing().rebalance_quiet]
        assert not during, during
    assert any(d["event"] == "handover_requested" for d in lines), "a rebalance later in the run"
