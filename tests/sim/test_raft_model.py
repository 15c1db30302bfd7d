"""sim/raft.py: the Raft model's leadership transfer, as pysyncobj's ``transferLeadership`` does
it (the node core's step-down and hand-on send it to Raft; the simulator must carry them out)."""

from __future__ import annotations

from cluster.config import Timing
from cluster.membership import FOLLOWER, LEADER
from sim.raft import AppendEntries, AppendReply, RaftNode, TimeoutNow

NAMES = ["a", "b", "c"]


def _leader(now: float = 1.0) -> tuple[RaftNode, list]:
    sent: list = []
    a = RaftNode("a", NAMES, Timing(), 0.0, send=lambda to, m: sent.append((to, m)),
                 changed=lambda: None, apply=lambda r: None)
    a.term, a.role, a.leader, a.log = 2, LEADER, "a", [(1, "v1"), (2, "v2")]
    for p in ("b", "c"):
        a.next_index[p], a.match[p], a.last_response[p] = 3, 0, now
    return a, sent


def test_transfer_goes_only_to_a_caught_up_connected_follower():
    a, sent = _leader()
    assert not a.transfer_leadership("b", 1.0), "b's log is not known to match"
    a.on_message("b", AppendReply(2, True, 2), 1.0)
    a.on_message("c", AppendReply(2, True, 1), 1.0)
    sent.clear()
    assert not a.transfer_leadership("c", 1.0), "c lacks the last entry"
    assert a.transfer_leadership("b", 1.0) and sent == [("b", TimeoutNow(2))]
    sent.clear()
    assert not a.transfer_leadership("b", 1.0 + Timing().connection_timeout), "not heard from lately"
    assert not a.transfer_leadership("a", 1.0), "not to itself"
    assert sent == []


def test_transfer_without_a_target_picks_the_most_caught_up():
    a, sent = _leader()
    a.on_message("b", AppendReply(2, True, 1), 1.0)
    a.on_message("c", AppendReply(2, True, 2), 1.0)
    sent.clear()
    assert a.transfer_leadership(None, 1.0) and sent == [("c", TimeoutNow(2))]


def test_only_a_leader_transfers():
    a, sent = _leader()
    a.on_message("b", AppendEntries(3, 0, 0, (), 0, 1.0), 1.0)   # deposed by b's term 3
    assert a.role == FOLLOWER
    sent.clear()
    assert not a.transfer_leadership("b", 1.0) and sent == []


class _Net:
    """Three RaftNodes whose messages are delivered in send order, all at one instant."""

    def __init__(self, restore: dict | None = None) -> None:
        self.queue: list = []
        self.views: dict[str, list] = {n: [] for n in NAMES}
        self.placed: dict[str, list] = {n: [] for n in NAMES}
        self.nodes = {n: self._node(n, (restore or {}).get(n)) for n in NAMES}

    def _node(self, n: str, disk) -> RaftNode:
        return RaftNode(n, NAMES, Timing(), 0.0, send=lambda to, m: self.queue.append((n, to, m)),
                        changed=lambda: None, apply=self.views[n].append, restore=disk,
                        on_place=lambda key, group: self.placed[n].append((key, group)))

    def run(self, now: float = 1.0) -> None:
        while self.queue:
            sender, to, msg = self.queue.pop(0)
            self.nodes[to].on_message(sender, msg, now)


def test_placements_commit_in_the_log_with_the_views_and_apply_alike_everywhere():
    net = _Net()
    a = net.nodes["a"]
    a.start_election(1.0)
    net.run()
    assert a.role == LEADER
    keys = [("r", "1", f"q{i}") for i in range(5)]
    a.propose((1, ("a", "b", "c"), "a", 1), 1.0)
    for k in keys[:3]:
        assert a.propose_place(k, 2, 1.0)
    assert a.propose_place(keys[0], 2, 1.0), "a repeat commits too, and keeps the key's group"
    for k in keys[3:]:
        assert a.propose_place(k, 2, 1.0)
    net.run()
    a.tick(1.0 + Timing().heartbeat)    # the followers learn the last commit index
    net.run()
    want = [(keys[0], 0), (keys[1], 1), (keys[2], 0), (keys[0], 0), (keys[3], 1), (keys[4], 0)]
    for n in NAMES:
        assert net.placed[n] == want, n
        assert net.views[n] == [(1, ("a", "b", "c"), "a", 1)], "only the view reaches apply"
        assert net.nodes[n].directory.counts(2) == (3, 2)
    assert not net.nodes["b"].propose_place(("r", "1", "x"), 2, 1.0), "only the leader proposes"

    # a restarted member rebuilds the same directory from its durable log
    again = _Net(restore={"b": net.nodes["b"].durable()})
    again.nodes["b"].replay()
    assert again.placed["b"] == want and again.nodes["b"].directory == net.nodes["b"].directory
