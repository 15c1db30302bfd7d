"""Three cluster members in one process, for counting the instructions of the replicated path.

Each member is what ``elasticmq-py serve`` runs: an ``Endpoint`` over a ``ClusterBackend``, its
``ReplicatedStorage`` glue and ``NodeCore``, and the wire codec (HMAC included). What is not
real: the ZeroMQ sockets (a frame is the codec's bytes, handed to the other member's glue as its
stream's drain would), pysyncobj (the Raft events the glue takes are made here, as the test
harness of the node core makes them), the event loop (callbacks the glue schedules run at the
end of each step) and the clock (a number moved by hand). So a count is the Python path of a
replicated operation and nothing else; the sockets, the wake-ups of the loop, ZeroMQ's I/O
thread and pysyncobj's thread are what ``make bench`` measures on top, in CPU seconds.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from cluster.clock import SystemClock
from cluster.config import Address, ClusterConfig, NodeConfig, NodeSpec, Replication
from cluster.membership import FOLLOWER, LEADER, ProposeView, RaftSample
from cluster.replicated import ReplicatedStorage

from elasticmq_py.clustered import ClusterBackend

NAMES = ("n1", "n2", "n3")
SECRET = "cpu-profile"


class _Loop:
    """The part of asyncio the glue uses: what it schedules runs at the end of the step."""

    def __init__(self, due: deque[Callable[[], None]]) -> None:
        self._due = due

    def call_soon(self, fn: Callable[..., None], *args: Any) -> None:
        self._due.append(lambda: fn(*args))

    def call_later(self, _delay: float, fn: Callable[..., None], *args: Any) -> None:
        self._due.append(lambda: fn(*args))


class _Stream:
    """A member's stream: frames leave as the codec's bytes into the cluster's queue."""

    def __init__(self, name: str, codec: Any, wire: deque[tuple[str, str, bytes]]) -> None:
        self.name = name
        self.codec = codec
        self.draining = False
        self._wire = wire

    def send(self, to: str, frame: Any) -> bool:
        self._wire.append((self.name, to, self.codec.encode(frame, to)))
        return True

    def deliver(self, node: ReplicatedStorage, frames: list[bytes]) -> None:
        """One drain of the stream's socket, as ``StreamTransport._readable`` runs it."""
        self.draining = True
        try:
            for data in frames:
                sender, frame = self.codec.decode(data)
                node._on_frame(sender, frame)
        finally:
            self.draining = False
        node._event_ended()


class _Raft:
    """What the glue asks of pysyncobj: a proposed view commits at once on every member."""

    def __init__(self, cluster: "InProcessCluster") -> None:
        self._cluster = cluster

    def submit(self, action: Any) -> None:
        if type(action) is ProposeView:
            for node in self._cluster.nodes.values():
                node.view_committed(action.view)

    def stop(self) -> None:
        pass


class InProcessCluster:
    def __init__(self, policy: str = "majority") -> None:
        cluster = ClusterConfig("cpu-profile", SECRET,
                                tuple(NodeSpec(n, Address("127.0.0.1", 1), Address("127.0.0.1", 2)) for n in NAMES),
                                replication=Replication(policy=policy))
        self.now = 100.0
        self.due: deque[Callable[[], None]] = deque()
        self.wire: deque[tuple[str, str, bytes]] = deque()
        self.backends: dict[str, ClusterBackend] = {}
        self.nodes: dict[str, ReplicatedStorage] = {}
        self.streams: dict[str, _Stream] = {}
        for n in NAMES:
            backend = ClusterBackend(NodeConfig(n, cluster), SystemClock())   # the single node's clock
            node = backend.replicated
            node._now = lambda: self.now
            node._loop = _Loop(self.due)
            node.membership = _Raft(self)
            node.stream = self.streams[n] = _Stream(n, node.stream.codec, self.wire)
            node._started = True
            self.backends[n], self.nodes[n] = backend, node

    # -- driving --------------------------------------------------------------------------------

    def run_due(self) -> None:
        while self.due:
            self.due.popleft()()

    def frames_for(self, names: tuple[str, ...]) -> dict[str, list[bytes]]:
        """Take the queued frames addressed to ``names``, by recipient (the rest stay queued)."""
        out: dict[str, list[bytes]] = {}
        keep = []
        for item in self.wire:
            if item[1] in names:
                out.setdefault(item[1], []).append(item[2])
            else:
                keep.append(item)
        self.wire.clear()     # in place: every member's stream holds this queue
        self.wire.extend(keep)
        return out

    def deliver(self, names: tuple[str, ...] = NAMES) -> None:
        """Each of ``names`` drains the frames queued for it, then runs what that scheduled."""
        for to, frames in self.frames_for(names).items():
            self.streams[to].deliver(self.nodes[to], frames)
            self.run_due()

    def settle(self) -> None:
        for _ in range(1000):
            self.run_due()
            if not self.wire:
                return
            self.deliver()
        raise RuntimeError("the in-process cluster never settled")

    def elect(self, leader: str = "n1", term: int = 1) -> ReplicatedStorage:
        """Heartbeats until every link is up, then ``leader`` takes office and syncs (as the
        node core's test harness drives it)."""
        configured = frozenset(NAMES)
        for i in range(50):
            self.now += 0.05
            if i >= 6:
                for n, node in self.nodes.items():
                    node.raft_sample(RaftSample(self.now, term, LEADER if n == leader else FOLLOWER, leader,
                                                configured))
                    if n != leader:
                        node.leader_contact(leader, self.now)
                        self.nodes[leader].lease_acked(n, term, self.now)
            for node in self.nodes.values():
                node._act(node.core.tick(self.now))
            self.settle()
            if self.nodes[leader].serving:
                return self.nodes[leader]
        raise RuntimeError(f"{leader} never served")

