"""A queue's own ack policy (its POLICY_TAG, cluster/node_core.py) under simulation: the node core
replicates that queue's operations under it, and the checker holds that queue's data to it while
the other queues keep the cluster's policy. The workload tags the standard queue when the
scenario says so (``Scenario.queue_policy``)."""

from __future__ import annotations

from dataclasses import replace

from sim import generate, simulate
from sim.workload import STD

DURATION = 20.0


def test_the_tag_makes_a_weak_cluster_keep_that_queues_messages():
    # Seed 8 under policy none loses acknowledged sends of the standard queue; tagged majority,
    # the same run keeps every one of them.
    base = generate(8, duration=DURATION, policy="none", journal=False, rare=())
    untagged = simulate(replace(base, queue_policy=None), strict=True)
    assert untagged.ok, "policy none promises nothing about the data"
    assert [x for x in untagged.verdict.lost if x.queue == STD], "the run loses sends when untagged"
    tagged = simulate(replace(base, queue_policy="majority"), strict=True)
    assert tagged.ok, tagged.failures
    assert not tagged.verdict.lost


def test_the_checker_holds_the_tagged_queue_to_its_policy():
    # (seeds 8 and 3 as they were drawn before simulated disks and rare paths: without either)
    # early-ack under a cluster policy of one: harmless to the checker on an untagged run, a
    # failure on the queue tagged majority.
    base = generate(3, duration=DURATION, policy="one", bugs=("early-ack",), journal=False, rare=())
    planted = simulate(replace(base, queue_policy="majority"), strict=True)
    assert planted.failures and all(f.startswith(("lost", "in-window", "order")) for f in planted.failures), \
        planted.failures
    v = planted.verdict
    assert [x for x in v.lost + v.lost_deletes + v.in_window if x.queue == STD]
    assert v.ok_for("one", strict=True), "the other queue's anomalies are within the cluster's policy"
    assert simulate(replace(base, queue_policy=None), strict=True).ok
    assert simulate(replace(base, queue_policy="majority", bugs=()), strict=True).ok
