"""The simulated network keeps what TCP keeps: per-link FIFO whatever the delays, nothing after a
cut (frames in flight on a reset connection are lost), duplicates right after the original."""

from __future__ import annotations

import random

from sim import generate
from sim.net import RAFT, STREAM, Network
from sim.world import World


class Inbox:
    """A node as the network sees it: alive, with an incarnation, receiving frames."""

    def __init__(self) -> None:
        self.alive = True
        self.incarnation = 1
        self.got: list[tuple[int, str, object]] = []

    def receive(self, plane: int, sender: str, msg: object) -> None:
        self.got.append((plane, sender, msg))


def world_with_inboxes() -> tuple[World, Network, dict[str, Inbox]]:
    w = World(generate(0, duration=1.0, faults=False))
    boxes = {n: Inbox() for n in w.names}
    w.nodes = boxes  # type: ignore[assignment]
    net = Network(w, random.Random(7), w.names, (0.1, 10.0))
    return w, net, boxes


def drain(w: World) -> None:
    import heapq

    while w._heap:
        t, _, fn, args = heapq.heappop(w._heap)
        w.now = t
        fn(*args)


def test_frames_on_one_link_arrive_in_order_though_delays_differ():
    w, net, boxes = world_with_inboxes()
    for i in range(300):
        if i == 100:
            net.add_delay("n1", "n2", 50_000)     # a slow spell...
        if i == 200:
            net.add_delay("n1", "n2", -50_000)    # ...that ends: later frames must not overtake
        net.send("n1", "n2", STREAM, i)
        net.send("n1", "n2", RAFT, -i)
        w.now += 100
    drain(w)
    stream = [m for p, _, m in boxes["n2"].got if p == STREAM]
    raft = [m for p, _, m in boxes["n2"].got if p == RAFT]
    assert stream == list(range(300))
    assert raft == [-i for i in range(300)]
    planes = [p for p, _, _ in boxes["n2"].got]
    assert planes != sorted(planes) and planes != sorted(planes, reverse=True), "the two planes interleave"


def test_a_cut_loses_frames_in_flight_and_refuses_new_ones_until_restored():
    w, net, boxes = world_with_inboxes()
    net.send("n1", "n2", STREAM, "in flight")
    net.cut("n1", "n2")
    assert not net.send("n1", "n2", STREAM, "refused")
    assert net.send("n2", "n1", STREAM, "other direction")
    net.restore("n1", "n2")
    assert net.send("n1", "n2", STREAM, "after")
    drain(w)
    assert [m for _, _, m in boxes["n2"].got] == ["after"]
    assert [m for _, _, m in boxes["n1"].got] == ["other direction"]


def test_duplicates_follow_their_original_and_keep_the_order():
    w, net, boxes = world_with_inboxes()
    net.dup = 0.5
    for i in range(100):
        net.send("n1", "n3", STREAM, i)
    drain(w)
    got = [m for _, _, m in boxes["n3"].got]
    assert got == sorted(got) and len(got) > 100 and set(got) == set(range(100))


def test_frames_for_a_restarted_node_are_not_delivered_to_its_new_incarnation():
    w, net, boxes = world_with_inboxes()
    net.send("n1", "n2", STREAM, "for the old one")
    boxes["n2"].incarnation = 2
    drain(w)
    assert boxes["n2"].got == []


def test_a_links_raft_plane_is_calm_once_up_unslowed_and_its_slowed_frames_arrived():
    # sim/elections.py reads it: the leader's links must have been calm for a timeout
    w, net, _ = world_with_inboxes()
    link = net.links[("n1", "n2")]
    assert link.raft_calm_since == 0
    w.now = 1_000
    net.cut("n1", "n2")
    assert link.raft_calm_since is None
    w.now = 2_000
    net.restore("n1", "n2")
    assert link.raft_calm_since == 2_000
    net.add_delay("n1", "n2", 500_000, (STREAM,))      # the stream only: Raft stays calm
    assert link.raft_calm_since == 2_000
    net.add_delay("n1", "n2", 500_000)
    assert link.raft_calm_since is None
    net.send("n1", "n2", RAFT, "slowed")                 # arrives after the delay is gone
    w.now = 3_000
    net.add_delay("n1", "n2", -500_000)
    arrives = link.last[RAFT]
    assert arrives > 3_000 and link.raft_calm_since == arrives
