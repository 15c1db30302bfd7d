"""Healing deposes nobody (invariant 6), as the simulator judges it: a follower cut off for a few
seconds and then let back in, with nothing else going on. With the pre-vote the master keeps
office in its epoch and nobody raises the term; without it (the planted bug) the follower's
higher term deposes the master when it comes back, and the simulator says so."""

from __future__ import annotations

from dataclasses import replace

from sim import generate, simulate
from sim.scenario import Fault


def isolating(node: str, bugs: tuple[str, ...] = ()):
    base = generate(7, duration=16.0, faults=False, bugs=bugs)
    return replace(base, faults=(Fault(4.0, "isolate", 3.0, node),), fault_start=4.0, fault_end=12.0)


def test_a_follower_let_back_in_deposes_nobody_and_without_the_pre_vote_it_would():
    judged = 0
    found = []
    for node in ("n1", "n2", "n3"):
        clean = simulate(isolating(node))
        assert clean.ok, (node, clean.failures)
        judged += clean.stats["heals_judged"]
        planted = simulate(isolating(node, ("no-pre-vote",)))
        found += [f for f in planted.failures if f.startswith("heal:")]
        # a cut-off node standing is caught at once, heal or no heal
        if clean.stats["heals_judged"]:
            assert any(f.startswith("pre-vote:") for f in planted.failures), planted.failures
    assert judged >= 2, "the isolated followers' heals were judged (the master's own is not: it lost office)"
    assert found and all("raised the term" in f for f in found), found
