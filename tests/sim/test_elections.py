"""Healing deposes nobody (invariant 6), as the simulator judges it (sim/elections.py): a
follower cut off for a few seconds and then let back in, with nothing else going on. With the
pre-vote the master keeps office in its epoch and nobody raises the term; without it (the
planted bug) the follower's higher term deposes the master when it comes back, and the
simulator says so."""

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
        # Cut off from everyone, the node does not even stand (pysyncobj starts no election
        # without a connection, sim/raft.py): it stands the moment it is let back in.
        if clean.stats["heals_judged"]:
            assert [f for f in planted.failures if f.startswith("heal:")], planted.failures
    assert judged >= 2, "the isolated followers' heals were judged (the master's own is not: it lost office)"
    assert found and all("raised the term" in f for f in found), found


def test_a_minority_that_still_has_links_stands_only_without_the_pre_vote():
    # n4 and n5 keep their link to each other, so pysyncobj would start elections: with the
    # pre-vote neither stands, without it both do, and the simulator catches each stand at once.
    def cut(bugs: tuple[str, ...]):
        base = generate(7, duration=16.0, nodes=5, faults=False, bugs=bugs)
        return replace(base, faults=(Fault(4.0, "partition", 3.0, "", {"side": ["n4", "n5"]}),),
                       fault_start=4.0, fault_end=12.0)
    clean = simulate(cut(()))
    assert clean.ok, clean.failures
    planted = simulate(cut(("no-pre-vote",)))
    stood = {f.split()[1] for f in planted.failures if f.startswith("pre-vote:")}
    assert stood == {"n4", "n5"}, planted.failures
