"""cluster/replication/liveness.py: connected means heard from recently *and* heard by."""

from __future__ import annotations

from cluster.replication.liveness import PeerLiveness
from cluster.replication.wire import Heartbeat


def live(peers: tuple[str, ...] = ("b", "c")) -> PeerLiveness:
    return PeerLiveness(peers, incarnation=11, keepalive=0.2, dead_after=1.0)


def test_heartbeats_go_every_keepalive_and_say_whether_we_hear_the_peer():
    p = live()
    beats, _ = p.tick(0.0)
    assert beats == [("b", Heartbeat(11, False)), ("c", Heartbeat(11, False))]
    assert p.tick(0.1)[0] == [], "not before the keepalive period"
    p.heard("b", 0.15)
    beats, _ = p.tick(0.2)
    assert beats == [("b", Heartbeat(11, True)), ("c", Heartbeat(11, False))]


def test_connected_needs_both_directions():
    p = live()
    p.heard("b", 0.0)
    assert p.heartbeat("b", Heartbeat(5, False), 0.0) == [], "it does not hear us yet"
    assert not p.connected("b")
    p.heard("b", 0.1)
    assert p.heartbeat("b", Heartbeat(5, True), 0.1) == [("b", True)]
    assert p.connected("b")
    # it stops hearing us (a cut in our direction): both ends see the link down
    p.heard("b", 0.2)
    assert p.heartbeat("b", Heartbeat(5, False), 0.2) == [("b", False)]


def test_silence_disconnects_after_dead_after():
    p = live()
    p.heard("b", 0.0)
    p.heartbeat("b", Heartbeat(5, True), 0.0)
    assert p.tick(0.99)[1] == []
    assert p.tick(1.0)[1] == [("b", False)]
    assert not p.connected("b")


def test_a_new_incarnation_is_a_disconnection_then_a_connection():
    p = live()
    p.heard("b", 0.0)
    p.heartbeat("b", Heartbeat(5, True), 0.0)
    p.heard("b", 0.5)
    assert p.heartbeat("b", Heartbeat(6, True), 0.5) == [("b", False), ("b", True)]


def test_strangers_are_not_peers_and_a_removed_peer_is_reported_gone():
    p = live()
    assert not p.heard("z", 0.0)
    assert p.heartbeat("z", Heartbeat(1, True), 0.0) == []
    p.heard("c", 0.0)
    p.heartbeat("c", Heartbeat(1, True), 0.0)
    assert p.set_peers(("b",)) == [("c", False)]
    assert set(p.peers) == {"b"}
