"""cluster/replicated.py's own logic, without processes: which ack policy a command gets."""

from __future__ import annotations

import logging

from storage import ManualClock
from storage.commands import CreateQueue, Namespace, SendMessage, TagQueue

from cluster.config import Address, ClusterConfig, NodeConfig, NodeSpec, Replication
from cluster.replicated import POLICY_TAG, ReplicatedStorage
from cluster.replication.messages import AckPolicy

NS = Namespace("us-east-1", "000000000000")


def _node(policy: str = "majority") -> ReplicatedStorage:
    nodes = tuple(NodeSpec(n, Address("127.0.0.1", 1 + i), Address("127.0.0.1", 100 + i))
                  for i, n in enumerate(("n1", "n2", "n3")))
    cfg = NodeConfig("n1", ClusterConfig("t", "secret", nodes, replication=Replication(policy=policy)))
    return ReplicatedStorage(cfg, ManualClock(0))


def test_the_cluster_policy_unless_the_queue_is_tagged(caplog):
    r = _node("majority")
    r.storage.execute(CreateQueue(NS, "plain"))
    r.storage.execute(CreateQueue(NS, "critical", tags={POLICY_TAG: "all"}))
    r.storage.execute(CreateQueue(NS, "odd", tags={POLICY_TAG: "sometimes"}))
    assert r._policy_for(SendMessage(NS.key("plain"), "x")) is AckPolicy.MAJORITY
    assert r._policy_for(SendMessage(NS.key("critical"), "x")) is AckPolicy.ALL
    with caplog.at_level(logging.WARNING, logger="cluster.replicated"):
        assert r._policy_for(SendMessage(NS.key("odd"), "x")) is AckPolicy.MAJORITY
    assert "not an ack policy" in caplog.text
    assert r._policy_for(SendMessage(NS.key("missing"), "x")) is AckPolicy.MAJORITY
    assert r._policy_for(CreateQueue(NS, "new")) is AckPolicy.MAJORITY


def test_a_tag_change_through_the_replicated_path_drops_the_cached_policy():
    r = _node("none")
    r.storage.execute(CreateQueue(NS, "q"))
    assert r._policy_for(SendMessage(NS.key("q"), "x")) is AckPolicy.NONE
    tag = TagQueue(NS.key("q"), {POLICY_TAG: "one"})
    r.storage.execute(tag)
    assert r._policy_for(SendMessage(NS.key("q"), "x")) is AckPolicy.NONE, "cached until a tag change is seen"
    r._executed(tag)   # what execute() calls after running a command on the master
    assert r._policy_for(SendMessage(NS.key("q"), "x")) is AckPolicy.ONE
