"""cluster.runtime.MembershipNode without its threads: the remembered answer of ``active``."""

from __future__ import annotations

from cluster.config import NodeConfig
from cluster.membership import FOLLOWER, LEADER, LeaseAck, ProposeView, RaftSample, StepDown, ViewCommitted
from cluster.runtime import MembershipNode

NAMES = frozenset({"a", "b", "c"})


class Clock:
    def __init__(self) -> None:
        self.now = 10.0

    def __call__(self) -> float:
        return self.now


def node(clock: Clock) -> MembershipNode:
    cfg = NodeConfig.from_dict({
        "cluster": "c", "secret": "s", "self": "a",
        "nodes": [{"name": n, "raft": f"127.0.0.1:{1000 + i}"} for i, n in enumerate(sorted(NAMES))]})
    return MembershipNode(cfg, clock=clock)


def take_office(m: MembershipNode, clock: Clock, term: int = 2) -> None:
    """The events pysyncobj's thread would hand in: leadership, acks, the view committed."""
    now = clock.now
    m._handle(RaftSample(now, term, LEADER, "a", NAMES))
    m._handle(LeaseAck(now, "b", term, now))
    # the last ack goes to the core itself, to see the view it proposes (no cache is set yet)
    proposals = m._core.handle(LeaseAck(now, "c", term, now))
    (p,) = [a for a in proposals if isinstance(a, ProposeView)]
    m._handle(ViewCommitted(now, p.view))


def test_active_is_remembered_until_the_lease_expires():
    clock = Clock()
    m = node(clock)
    assert not m.active
    take_office(m, clock)
    assert m.active
    expiry = m._core.lease_expiry()
    assert expiry is not None and expiry > clock.now
    # a remembered yes stops at the expiry, with no event in between
    clock.now = expiry - 1e-6
    assert m.active
    clock.now = expiry
    assert not m.active
    # an ack renews the lease: the next look sees the new deadline
    m._handle(LeaseAck(clock.now, "b", 2, clock.now))
    assert m.active
    assert m._active_until > expiry


def test_an_event_forgets_the_remembered_yes_at_once():
    clock = Clock()
    m = node(clock)
    take_office(m, clock)
    assert m.active and m._active_until > clock.now
    m._handle(StepDown(clock.now))
    assert not m.active, "a step-down ends activity before the lease runs out"
    take_office(m, clock, term=3)
    assert m.active
    m._handle(RaftSample(clock.now, 4, FOLLOWER, "b", NAMES))
    assert not m.active, "a lost leadership ends activity before the lease runs out"
