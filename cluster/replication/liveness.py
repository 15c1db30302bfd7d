"""Which stream peers are connected, from heartbeats and traffic: sans-I/O.

Every ``keepalive`` each member sends each peer a ``Heartbeat`` carrying its incarnation (random
per process start) and whether it hears that peer (an authenticated frame from it within
``dead_after``). A peer counts as connected while it was heard from within ``dead_after`` *and*
its last heartbeat says it hears us: a link cut in one direction only makes both ends see the
peer as gone, not just the end that stopped receiving. A heartbeat with a new incarnation from a
connected peer is a disconnection followed by a connection (it restarted in between, and lost
whatever it held).

Any authenticated frame counts as hearing from its sender; the transport authenticates, this core
decides. Changes come out as ``(peer, connected)`` pairs, in the order they happen.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.replication.wire import Heartbeat


@dataclass
class _Peer:
    name: str
    last_rx: float | None = None
    incarnation: int | None = None
    hears_me: bool = False
    connected: bool = False
    last_hb_tx: float = float("-inf")


class PeerLiveness:
    def __init__(self, peers: tuple[str, ...], incarnation: int, *, keepalive: float, dead_after: float) -> None:
        self.incarnation = incarnation
        self.keepalive = keepalive
        self.dead_after = dead_after
        self.peers: dict[str, _Peer] = {}
        self.set_peers(peers)

    def set_peers(self, names: tuple[str, ...]) -> list[tuple[str, bool]]:
        """A new membership: a peer that leaves while connected is reported gone."""
        changes = [(n, False) for n, p in self.peers.items() if n not in names and p.connected]
        self.peers = {n: self.peers.get(n) or _Peer(n) for n in names}
        return changes

    def connected(self, name: str) -> bool:
        p = self.peers.get(name)
        return p is not None and p.connected

    def heard(self, sender: str, now: float) -> bool:
        """An authenticated frame from ``sender`` arrived; False if it is no peer of ours."""
        p = self.peers.get(sender)
        if p is None:
            return False
        p.last_rx = now
        return True

    def heartbeat(self, sender: str, hb: Heartbeat, now: float) -> list[tuple[str, bool]]:
        p = self.peers.get(sender)
        if p is None:
            return []
        changes: list[tuple[str, bool]] = []
        if p.incarnation is not None and hb.incarnation != p.incarnation and p.connected:
            p.connected = False
            p.hears_me = False
            changes.append((sender, False))
        p.incarnation = hb.incarnation
        p.hears_me = hb.hears_you
        return changes + self._evaluate(p, now)

    def tick(self, now: float) -> tuple[list[tuple[str, Heartbeat]], list[tuple[str, bool]]]:
        """Heartbeats due now, and connections that timed out."""
        beats: list[tuple[str, Heartbeat]] = []
        changes: list[tuple[str, bool]] = []
        for p in self.peers.values():
            if now - p.last_hb_tx >= self.keepalive:
                p.last_hb_tx = now
                beats.append((p.name, Heartbeat(self.incarnation, self._hears(p, now))))
            changes += self._evaluate(p, now)
        return beats, changes

    def status(self, now: float) -> dict[str, float | None]:
        """Per peer, seconds since it was last heard from."""
        return {p.name: None if p.last_rx is None else round(now - p.last_rx, 3) for p in self.peers.values()}

    def _hears(self, p: _Peer, now: float) -> bool:
        return p.last_rx is not None and now - p.last_rx < self.dead_after

    def _evaluate(self, p: _Peer, now: float) -> list[tuple[str, bool]]:
        up = self._hears(p, now) and p.hears_me
        if up == p.connected:
            return []
        p.connected = up
        if not up:
            p.hears_me = False
        return [(p.name, up)]
