"""A stalled event loop (a long GC pause, a slow callback) on the master, while its Raft thread
goes on, as sim/node.py models it: Raft keeps its leader, so nobody is elected, but the master's
loop cannot see its lease renewed and must count itself inactive from the lease's end, not from
when it wakes up; it takes office again, in the same term and epoch, when the loop runs again."""

from __future__ import annotations

import json
from dataclasses import replace

from cluster.config import Timing
from sim import generate, simulate
from sim.scenario import Fault

STALL_AT, STALL_S = 4.0, 1.0


def test_a_stalled_master_loop_is_inactive_from_its_lease_end_and_resumes_office():
    base = generate(7, duration=16.0, faults=False)
    r = simulate(replace(base, faults=(Fault(STALL_AT, "stall", STALL_S, "master"),),
                         fault_start=STALL_AT, fault_end=12.0))
    assert r.ok, r.failures
    lines = [json.loads(x) for x in r.history.splitlines()]
    (stall,) = [x for x in lines if x.get("action") == "stall"]
    master = stall["node"]
    mine = [x for x in lines if x.get("node") == master and x.get("event") in ("activated", "deactivated")]
    during = [x for x in mine if STALL_AT <= x["ts"] <= STALL_AT + STALL_S + 0.01]
    assert [x["event"] for x in during] == ["deactivated", "activated"], mine
    off, on = during
    assert off["reason"].startswith("lease expired")
    assert off["ts"] <= STALL_AT + Timing().lease * 1.01, "inactive from the lease's end, not from the wake-up"
    assert on["ts"] >= STALL_AT + STALL_S
    assert (on["term"], on["epoch"]) == (off["term"], off["epoch"]), "the same office: nobody was elected"
    assert not [x for x in lines if x.get("event") == "role" and x["ts"] > STALL_AT]
