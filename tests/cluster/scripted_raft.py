"""Real ReplicatedStorage nodes on one asyncio loop, their streams on real ZeroMQ sockets, with
Raft's side scripted: the test says who leads which term and who acks its lease, and a view a
leader proposes is committed on every running member at once.

This is a unit test's stand-in for pysyncobj (cluster/runtime.py's MembershipNode): it lets the
tests of the event-loop runtime put it in exact situations (a new master with a given majority,
a replica gone) without elections. Real pysyncobj runs in tests/cluster's process tests.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from typing import Any, Awaitable, Callable

from storage import ManualClock

from cluster.config import Address, ClusterConfig, Durability, LinkAddrs, NodeConfig, NodeSpec, Replication, Timing
from cluster.election import FOLLOWER, LEADER
from cluster.membership import ProposeView, RaftSample
from cluster.replicated import ReplicatedStorage

NAMES = ("n1", "n2", "n3")
SECRET = "correct horse battery staple"
# heartbeats on the stream every 50 ms, a silent peer gone after 600 ms
FAST_TIMING = Timing(keepalive=0.05, connection_timeout=0.6)


def run(coro_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Each test on a fresh loop, with an overall bound so a hang fails instead of stalling."""
    @functools.wraps(coro_fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        return asyncio.run(asyncio.wait_for(coro_fn(*args, **kw), 30))
    return wrapper


async def eventually(pred: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def cluster_config(bound: dict[str, Address] | None = None, links: dict | None = None,
                   policy: str = "majority") -> ClusterConfig:
    bound = bound or {}
    return ClusterConfig("test", SECRET, tuple(NodeSpec(n, Address("127.0.0.1", 1), bound.get(n, Address("127.0.0.1", 0)))
                                               for n in NAMES), links=links or {}, timing=FAST_TIMING,
                         replication=Replication(policy=policy))


class ScriptedRaft:
    """What MembershipNode offers ReplicatedStorage, driven by the test through ``Nodes``."""

    restarted = False

    def __init__(self, nodes: "Nodes", config: NodeConfig, events: Any) -> None:
        self.nodes = nodes
        self.name = config.self_name
        self.events = events
        self.running = False

    def start(self) -> None:
        self.running = True

    def stop(self) -> None:
        self.running = False

    def submit(self, action: Any) -> None:
        if type(action) is ProposeView:
            self.nodes.commit(action.view)

    def transfer_leadership(self, to: str | None = None) -> "asyncio.Future[bool]":
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(False)
        return fut


class Nodes:
    """``data_root``: each node journals in its own data-dir under it (fsync ``always``)."""

    def __init__(self, policy: str = "majority", data_root: str | None = None) -> None:
        self.policy = policy
        self.rafts: dict[str, ScriptedRaft] = {}
        self.nodes: dict[str, ReplicatedStorage] = {}
        for n in NAMES:
            durability = Durability(os.path.join(data_root, n)) if data_root is not None else None
            cfg = NodeConfig(n, cluster_config(policy=policy), durability=durability)
            self.nodes[n] = ReplicatedStorage(cfg, ManualClock(0), tick=0.02,
                                              raft=lambda c, e: self._raft(c, e))
        self.bound: dict[str, Address] = {}
        self._leases: dict[str, asyncio.Task] = {}

    def _raft(self, config: NodeConfig, events: Any) -> ScriptedRaft:
        r = self.rafts[config.self_name] = ScriptedRaft(self, config, events)
        return r

    def __getitem__(self, name: str) -> ReplicatedStorage:
        return self.nodes[name]

    async def start(self, links: dict | None = None) -> None:
        for n, node in self.nodes.items():
            await node.start()
            self.bound[n] = node.stream.bound
        self.reconfigure(links)

    def reconfigure(self, links: dict | None = None) -> None:
        cfg = cluster_config(self.bound, links, self.policy)
        for node in self.nodes.values():
            node.stream.update_config(cfg)

    async def stop(self, *names: str) -> None:
        for n in names or tuple(self.nodes):
            task = self._leases.pop(n, None)
            if task is not None:
                task.cancel()
            if self.rafts[n].running:
                await self.nodes[n].stop()

    def running(self) -> list[str]:
        return [n for n in NAMES if self.rafts[n].running]

    def lead(self, leader: str, term: int, acking: tuple[str, ...] | None = None) -> None:
        """``leader`` takes office in ``term``: every running member hears it. Followers answering
        its heartbeats ack its lease: by default every running member; ``acking`` names them
        instead, running or not (their Raft link may be up while their stream is gone)."""
        now = time.monotonic()
        configured = frozenset(NAMES)
        for n in self.running():
            role = LEADER if n == leader else FOLLOWER
            self.rafts[n].events.raft_sample(RaftSample(now, term, role, leader, configured))
        explicit = acking is not None
        ackers = tuple(a for a in (acking if explicit else self.running()) if a != leader)
        old = self._leases.pop(leader, None)
        if old is not None:
            old.cancel()
        self._leases[leader] = asyncio.get_running_loop().create_task(self._ack(leader, term, ackers, explicit))

    async def _ack(self, leader: str, term: int, ackers: tuple[str, ...], explicit: bool) -> None:
        while self.rafts[leader].running:
            now = time.monotonic()
            for a in ackers:
                if explicit or self.rafts[a].running:
                    self.rafts[leader].events.lease_acked(a, term, now)
                    if self.rafts[a].running:
                        self.rafts[a].events.leader_contact(leader, now)
            await asyncio.sleep(0.03)

    def commit(self, view: Any) -> None:
        for n in self.running():
            asyncio.get_running_loop().call_soon(self.rafts[n].events.view_committed, view)


__all__ = ["LinkAddrs", "NAMES", "Nodes", "eventually", "run"]
