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
