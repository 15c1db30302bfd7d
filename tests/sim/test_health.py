"""Judged during the run (sim/health.py): availability while a healthy majority holds the master,
and every member's digest at quiescent points, which see what the final digests and a run
without availability rules cannot."""

from __future__ import annotations

from dataclasses import replace

from cluster.replication.messages import AckPolicy
from sim import generate, simulate
from sim.scenario import Fault


def _slow_replica(policy: str):
    """Three nodes, no faults but one: n3's links turn slow (1.5 s each way) from 4 s to 14 s;
    flow control's bound is beyond that lag."""
    sc = generate(7, duration=20.0, faults=False, policy=policy, journal=False)
    links = [[a, b] for a in sc.names() for b in sc.names() if a != b and "n3" in (a, b)]
    return replace(sc, faults=(Fault(4.0, "delay", 10.0, "", {"links": links, "extra_ms": 1500}),),
                   throttle_lag_ms=60_000, throttle_lag_batches=10_000, queue_policy=None)


def test_a_slow_minority_does_not_stall_majority_and_all_is_not_judged_for_it():
    ok = simulate(_slow_replica("majority"))
    assert ok.ok, ok.failures
    assert ok.stats["availability_judged_s"] > 5 and ok.stats["quiescent_judged"] > 0, ok.stats
    assert ok.verdict.final_master != "n3"
    waits = simulate(_slow_replica("all"))
    assert waits.ok, waits.failures        # all waits for n3, rightly


def test_a_majority_that_waits_for_every_replica_is_unavailable(monkeypatch):
    # a `majority` cluster that behaves like `all`
    monkeypatch.setattr(AckPolicy, "required", lambda self, members, configured=0: members - 1
                        if self is not AckPolicy.NONE else 0)
    r = simulate(_slow_replica("majority"))
    assert any(f.startswith("unavailable") for f in r.failures), r.failures


def test_state_that_diverged_at_a_quiescent_point_fails_the_run(monkeypatch):
    from sim.health import Health
    from storage.commands import CreateQueue, Namespace

    probe = Health._quiescent
    done = []

    def diverge_once(self):
        # at 8 s a replica executes something itself, outside the protocol
        w = self.world
        m = w.master()
        if not done and w.now > 8_000_000 and m is not None:
            other = next(n for n in w.names if n != m.name)
            w.nodes[other].core.groups[0].storage.execute(CreateQueue(Namespace(), "rogue", {}))
            done.append(other)
        probe(self)

    monkeypatch.setattr(Health, "_quiescent", diverge_once)
    r = simulate(generate(7, duration=20.0, faults=False, journal=False))
    assert done
    assert any(f.startswith("divergence at t=") and done[0] in f for f in r.failures), r.failures


def test_a_member_outside_the_view_whose_divergent_tail_ends_at_the_masters_seq_is_not_converged():
    # seed 25 of 20 s (comeback, turn, relink, ...): after two power cuts n1 holds its own tail
    # of epoch 2 to seq 40, outside view 6 (n2, n3), while master n3 is at seq 40 of epoch 7;
    # a probe comparing seqs alone would take that for a quiescent point and judge a divergence
    # that the view change after it repairs with a transfer
    r = simulate(generate(25, duration=20.0), strict=True)
    assert r.ok, r.failures
    assert r.stats["quiescent_judged"] >= 1, r.stats
