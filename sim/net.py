"""The simulated network: one FIFO channel per directed link and plane, with faults.

What it allows is what TCP and ZeroMQ allow. Frames on one directed link of one plane arrive in
the order they were sent (TCP), whatever their individual delays: a frame never overtakes an
earlier one on its link. Frames on different links, or on the two planes (Raft's connection and
the mutation stream's are separate TCP connections) are independent, so they do reorder against
each other. A *cut* link refuses new frames (ZMQ_IMMEDIATE: nothing is queued for a peer that is
not connected) and loses the frames in flight on it (the connection is reset); frames sent after
it is restored travel on a new connection. Random drops model frames lost to a reconnect or a full
send queue (ZMQ_SNDHWM); duplicates model a frame that is delivered twice (a resend racing the
original), and are delivered right after the original, so FIFO still holds. A *reconnection*
(``reconnect``) models a transport that resends what it cannot know arrived: the stream
connection stalls, and once back the sender sends its recent frames again, late duplicates of
those that had arrived, before anything newer.

Time is integer microseconds of the world's clock. Each link has a base latency drawn per frame
from the scenario's range, plus whatever extra latency the active delay faults add, per plane:
a fault may slow the whole path or just one connection (a latency toxic on the stream's proxy).

The network needs only a ``Host``: a clock, a way to schedule a call, and the nodes by name. The
simulator's World is one; the replication tests drive it with a bare event queue
(tests/replication/network.py). For those tests it also has a reordering mode, off in the
simulator, that takes TCP away: see ``reorder_us``.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Callable, Mapping, Protocol

from cluster.replication.messages import Batch

RAFT, STREAM = 0, 1
RECENT_US = 1_000_000     # how far back ``Network.recent`` keeps a link's stream frames


class Endpoint(Protocol):
    @property
    def alive(self) -> bool: ...

    @property
    def incarnation(self) -> int: ...

    def receive(self, plane: int, sender: str, msg: Any) -> None: ...


class Host(Protocol):
    @property
    def now(self) -> int: ...

    @property
    def nodes(self) -> Mapping[str, Endpoint]: ...

    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None: ...


class Link:
    __slots__ = ("cuts", "gen", "last", "extra_us", "down_since", "stream_cuts", "raft_calm_since")

    def __init__(self) -> None:
        self.cuts = 0           # active faults cutting this link (it is up when 0)
        self.gen = 0            # bumped on each cut: frames of an older connection are lost
        self.last = [0, 0]      # per plane: the latest delivery time scheduled (FIFO)
        self.extra_us = [0, 0]  # per plane: extra latency from active delay faults
        self.down_since: int | None = None   # when it was cut, while it is
        self.stream_cuts = 0    # active faults cutting the stream plane only (Raft still up)
        # since when the Raft plane has been up with no extra latency and no slowed frame still
        # on its way (None: not now); sim/elections.py judges disruptions by it
        self.raft_calm_since: int | None = 0


class Network:
    def __init__(self, world: Host, rng: random.Random, names: list[str], base_delay_ms: tuple[float, float]):
        self.world = world
        self.rng = rng
        self.links: dict[tuple[str, str], Link] = {(a, b): Link() for a in names for b in names if a != b}
        self.lo_us = int(base_delay_ms[0] * 1000)
        self.hi_us = max(self.lo_us, int(base_delay_ms[1] * 1000))
        self.drop = 0.0
        self.dup = 0.0
        # Mean of an extra, exponentially distributed delay per frame, with no FIFO: 0 keeps TCP's
        # order. Exponential because it is memoryless: whatever is in flight, the next frame to
        # arrive is any of them with equal chance, however long each has been on its way.
        self.reorder_us = 0
        # Per directed link: which stream frames may pass (a nemesis's filter: the world's
        # "handoff" path stops a member's stream at a mark); a refused frame is lost unseen.
        self.gates: dict[tuple[str, str], Callable[[Any], bool]] = {}
        # Per directed link: the stream frames sent within the last RECENT_US, kept only while a
        # nemesis asks (None: not kept). A connection that breaks sends them again (``reconnect``).
        self.recent: dict[tuple[str, str], deque[tuple[int, Any]]] | None = None
        self.sent = 0
        self.lost = 0

    def up(self, a: str, b: str) -> bool:
        return self.links[(a, b)].cuts == 0

    def send(self, src: str, dst: str, plane: int, msg: Any) -> bool:
        world = self.world
        if plane == STREAM and (waste := getattr(world, "waste", None)) is not None:   # (a test's world may judge none)
            # with several replication groups a stream message is (group, frame)
            group, frame = msg if type(msg) is tuple else (0, msg)
            waste.frame(world.now_s, src, world.nodes[src], frame, group)
            if type(frame) is Batch:
                world.provenance.frame(world.now_s, src, dst, frame, group)
        link = self.links[(src, dst)]
        self.sent += 1
        dnode = world.nodes.get(dst)
        if link.cuts or (link.stream_cuts and plane == STREAM) or dnode is None or not dnode.alive:
            # nothing is queued for a peer that is not connected (ZMQ_IMMEDIATE)
            self.lost += 1
            return False
        if self.gates and plane == STREAM and (gate := self.gates.get((src, dst))) is not None and not gate(msg):
            self.lost += 1
            return True
        if self.recent is not None and plane == STREAM:
            kept = self.recent.setdefault((src, dst), deque())
            kept.append((world.now, msg))
            while kept[0][0] < world.now - RECENT_US:
                kept.popleft()
        rng = self.rng
        if self.drop and rng.random() < self.drop:
            self.lost += 1
            return True   # the sender cannot tell
        t = base = world.now + rng.randint(self.lo_us, self.hi_us) + link.extra_us[plane]
        if self.reorder_us:
            t += round(rng.expovariate(1 / self.reorder_us))
        else:
            last = link.last[plane]
            if t < last:
                t = last
            link.last[plane] = t
        inc = dnode.incarnation
        world.at(t, self._deliver, src, dst, plane, msg, link.gen, inc)
        if self.dup and rng.random() < self.dup:
            if self.reorder_us:   # a copy that keeps no order keeps none with its original either
                t = base + round(rng.expovariate(1 / self.reorder_us))
            world.at(t, self._deliver, src, dst, plane, msg, link.gen, inc)
        return True

    def _deliver(self, src: str, dst: str, plane: int, msg: Any, gen: int, inc: int) -> None:
        if self.links[(src, dst)].gen != gen:
            self.lost += 1
            return
        node = self.world.nodes[dst]
        if node.incarnation != inc or not node.alive:
            self.lost += 1
            return
        node.receive(plane, src, msg)

    def _deliver_again(self, src: str, src_inc: int, dst: str, msg: Any, gen: int, inc: int) -> None:
        # a sender that died meanwhile sends nothing again: its connection state died with it
        if self.world.nodes[src].incarnation != src_inc:
            self.lost += 1
            return
        self._deliver(src, dst, STREAM, msg, gen, inc)

    # --- faults ---------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        link = self.links[(a, b)]
        if not link.cuts:
            link.down_since = self.world.now
        link.cuts += 1
        link.gen += 1
        link.raft_calm_since = None

    def restore(self, a: str, b: str) -> None:
        link = self.links[(a, b)]
        link.cuts = max(0, link.cuts - 1)
        if not link.cuts:
            link.down_since = None
        self._calm(link)

    def _calm(self, link: Link) -> None:
        """The Raft plane is calm once up, unslowed, and the last slowed frame has arrived."""
        if link.cuts or link.extra_us[RAFT]:
            link.raft_calm_since = None
        elif link.raft_calm_since is None:
            link.raft_calm_since = max(self.world.now, link.last[RAFT])

    def cut_stream(self, a: str, b: str) -> None:
        """Cut the stream plane of a->b only (its proxy drops the connection, Raft's stays):
        frames in flight on the link are lost (on Raft too: its retries cover that)."""
        link = self.links[(a, b)]
        link.stream_cuts += 1
        link.gen += 1

    def restore_stream(self, a: str, b: str) -> None:
        link = self.links[(a, b)]
        link.stream_cuts = max(0, link.stream_cuts - 1)

    def reconnect(self, a: str, b: str, down_us: int, since_us: int) -> list[Any]:
        """The stream connection a->b breaks now and is back ``down_us`` later. The frames
        already on their way arrive; the sender, which cannot tell which of its recent frames
        arrived, first sends again every frame it sent since ``since_us`` (kept in ``recent``):
        those that had arrived arrive twice. What it sends meanwhile waits behind them (FIFO).
        Returns the frames it sends again."""
        link = self.links[(a, b)]
        snode, dnode = self.world.nodes.get(a), self.world.nodes.get(b)
        again = [m for ts, m in (self.recent or {}).get((a, b), ()) if ts >= since_us]
        if snode is None or dnode is None or not again:
            return []
        world, rng = self.world, self.rng
        last = max(link.last[STREAM], world.now + down_us)
        for m in again:
            t = max(world.now + down_us + rng.randint(self.lo_us, self.hi_us) + link.extra_us[STREAM], last)
            last = t
            world.at(t, self._deliver_again, a, snode.incarnation, b, m, link.gen, dnode.incarnation)
        link.last[STREAM] = last
        return again

    def down_for(self, a: str, b: str) -> int:
        """How long (µs) the link a->b has been cut; 0 while it is up."""
        link = self.links[(a, b)]
        return 0 if link.down_since is None else self.world.now - link.down_since

    def add_delay(self, a: str, b: str, us: int, planes: tuple[int, ...] = (RAFT, STREAM)) -> None:
        """Extra latency on one direction of a link, on both planes (the path is slow) or on one
        (a proxy with a latency toxic on that connection only, as the chaos tests do)."""
        link = self.links[(a, b)]
        for p in planes:
            link.extra_us[p] = max(0, link.extra_us[p] + us)
        if RAFT in planes:
            if us > 0:
                link.raft_calm_since = None
            self._calm(link)

    def heal_all(self) -> None:
        for link in self.links.values():
            if link.cuts:
                link.cuts = 0
                link.down_since = None
            link.stream_cuts = 0
            link.extra_us = [0, 0]
            self._calm(link)
        self.gates.clear()
        self.drop = self.dup = 0.0
