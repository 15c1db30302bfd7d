"""cluster/turn_bundles.py: a turn's frames, one bundle per peer, with the forwarded ids in it."""

from __future__ import annotations

from cluster.turn_bundles import TurnBundles


def test_a_turn_is_one_bundle_per_peer_in_the_order_the_frames_came():
    b = TurnBundles()
    assert not b and b.take() == []
    assert b.add("n2", 0, "heartbeat") is True          # the turn's first: its end is to be arranged
    assert b.add("n3", 1, "batch") is False
    b.add("n2", 2, "ack")
    b.add("n2", 1, "forwards", (7, 8))
    assert b
    assert b.take() == [("n2", [(0, "heartbeat"), (2, "ack"), (1, "forwards")], [7, 8]),
                        ("n3", [(1, "batch")], [])]
    assert not b and b.take() == []
    assert b.add("n3", 0, "next turn") is True
