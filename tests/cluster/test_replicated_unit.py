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


class _Stream:
    """Stands in for StreamNode: records what execute() hands to the stream."""

    serving = True
    throttling = False

    def __init__(self, storage) -> None:
        self.storage = storage
        self.submitted: list = []

    def next_op_id(self) -> int:
        return len(self.submitted) + 1

    def submit_then(self, op_id, mutations, policy, done) -> None:
        self.submitted.append((op_id, list(mutations), policy, done))


class _Membership:
    active = True


def test_an_operation_without_mutations_still_waits_for_the_stream():
    # Bug 2 of the simulator, in the product's path: a FIFO send retried with the same
    # deduplication id changes nothing, but its answer names a message the replicas may not
    # have yet. execute() used to answer such operations at once.
    import asyncio

    from cluster.replication.runtime import MasterChanged

    class Mapped(Exception):
        pass

    async def scenario() -> None:
        r = _node()
        r.stream, r.membership = _Stream(r.stream.storage), _Membership()
        first = r.execute(CreateQueue(NS, "q.fifo", {"FifoQueue": "true"}))
        r.stream.submitted[-1][3](None)
        await first
        send = SendMessage(NS.key("q.fifo"), "b", group_id="g", deduplication_id="d")
        original = r.execute(send)
        retry = r.execute(send)
        (_, m1, _, done1), (_, m2, _, done2) = r.stream.submitted[-2:]
        assert m1 and m2 == [], "the retry is deduplicated: nothing to replicate"
        await asyncio.sleep(0)
        assert not retry.done(), "answered only once the stream says so"
        done1(None)
        done2(None)
        assert (await retry).message_id == (await original).message_id
        lost = r.execute(SendMessage(NS.key("q.fifo"), "c", group_id="g", deduplication_id="e"))
        r.stream.submitted[-1][3](MasterChanged("view changed"))
        mapped = r.execute(send, map_error=lambda e: Mapped(str(e)))
        r.stream.submitted[-1][3](MasterChanged("view changed"))
        try:
            await lost
        except MasterChanged:
            pass
        else:
            raise AssertionError("a failed policy must fail the operation")
        try:
            await mapped
        except Mapped:
            pass
        else:
            raise AssertionError("map_error decides what the caller sees")

    asyncio.run(scenario())
