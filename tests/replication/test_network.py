"""The replication tests' frame network keeps what the lossy tests rely on: order by default,
reordering that picks any frame in flight with equal chance, cuts that lose what is in flight."""

from __future__ import annotations

from collections import Counter

from tests.replication.network import FrameNet

NAMES = ("n1", "n2", "n3")


def _net(seed: int = 0) -> tuple[FrameNet, list[tuple[str, str, object]]]:
    got: list[tuple[str, str, object]] = []
    return FrameNet(NAMES, lambda sender, to, frame: got.append((sender, to, frame)), seed=seed), got


def test_frames_arrive_in_the_order_they_were_sent_by_default():
    net, got = _net()
    for i in range(100):
        net.send("n1", "n2", i)
        net.send("n3", "n2", -i)
    net.run()
    assert [f for _, _, f in got] == [x for i in range(100) for x in (i, -i)]
    assert net.idle


def test_reordering_picks_any_frame_in_flight_with_equal_chance():
    # Two frames in flight, one delivered, a third sent: the next to arrive is the one left over
    # or the new one, each half the time, however long the first has waited.
    firsts, seconds = Counter(), Counter()
    for seed in range(2_000):
        net, got = _net(seed)
        net.faults(reorder=True)
        net.send("n1", "n2", "a")
        net.send("n1", "n2", "b")
        net.step()
        net.send("n1", "n2", "c")
        net.step()
        firsts[got[0][2]] += 1
        seconds[got[1][2] == "c"] += 1
    assert 900 < firsts["a"] < 1_100 and firsts["a"] + firsts["b"] == 2_000
    assert 900 < seconds[True] < 1_100


def test_duplicates_under_reordering_arrive_twice():
    net, got = _net(3)
    net.faults(dup=1.0, reorder=True)
    for i in range(50):
        net.send("n1", "n2", i)
    net.run()
    assert Counter(f for _, _, f in got) == Counter({i: 2 for i in range(50)})


def test_a_cut_node_loses_what_is_in_flight_and_a_link_stays_cut_until_both_ends_are_back():
    net, got = _net()
    net.send("n1", "n2", "in flight")
    net.send("n1", "n3", "in flight too")
    net.down = {"n2", "n3"}
    net.send("n2", "n1", "refused")
    net.down = {"n3"}
    net.send("n2", "n3", "refused too")
    net.send("n2", "n1", "after")
    net.run()
    assert got == [("n2", "n1", "after")]
    net.down = set()
    net.send("n2", "n3", "healed")
    net.run()
    assert got[-1] == ("n2", "n3", "healed")


def test_lost_frames_arrive_and_are_thrown_away():
    net, got = _net()
    for i in range(10):
        net.send("n1", "n2", i)
    net.run(lose=lambda sender, to, frame: frame % 2 == 0)
    assert [f for _, _, f in got] == [1, 3, 5, 7, 9] and net.idle
