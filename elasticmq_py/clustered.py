"""The server as a cluster member: the local storage, gated by the membership layer.

This is the product side of issue 4 (membership, election, majority activation). Until the
replication layer (issue 5, cluster/ ReplicatedStorage) lands, the *active* node — the master of
the current view, holding a quorum of the configured members and a fresh lease — serves every SQS
call from its own in-memory storage, and every other node answers every SQS call with a retryable
``ServiceUnavailable`` (HTTP 503), never a success. Nothing is replicated yet: when the master
changes, the new master starts from its own (so far untouched) storage. Issue 5 replaces
``execute`` with the replicated path and adds the "synchronised with a majority" gate
(``MembershipNode(required_gates=...)`` / ``open_gate``).

A parked long poll on a node that stops being active is woken at once and answered with the 503.
"""

from __future__ import annotations

import asyncio
import logging
from storage.commands import Command, QueueKey
from storage.errors import SERVICE_UNAVAILABLE

from cluster.config import NodeConfig, NodeSpec
from cluster.history import HistoryWriter
from cluster.runtime import BindError, MembershipNode

from elasticmq_py.backend import LocalBackend

log = logging.getLogger(__name__)


class ClusterStartError(RuntimeError):
    """The membership node could not start (its Raft address is taken, for instance)."""


class MembershipBackend:
    """A ``Backend`` that serves from ``local`` only while this node is the active master."""

    def __init__(self, local: LocalBackend, node_config: NodeConfig) -> None:
        self.local = local
        self.node_config = node_config
        self.name = node_config.self_name
        self.membership: MembershipNode | None = None
        self._history: HistoryWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the Backend interface ---------------------------------------------------------------

    def execute(self, command: Command) -> asyncio.Future:
        m = self.membership
        if m is not None and m.active:
            return self.local.execute(command)
        fut = (self._loop or asyncio.get_running_loop()).create_future()
        fut.set_exception(self._unavailable())
        return fut

    def _unavailable(self):
        m = self.membership
        view = m.view if m is not None else None
        where = f"the master is {view.master}" if view is not None else "no master is known yet"
        return SERVICE_UNAVAILABLE(
            f"Node {self.name} is not the active master of the cluster ({where}). "
            "The request was not executed; retry, against the master's endpoint.")

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        await self.local.wait_for_messages(queue, deadline_ms)

    def now_ms(self) -> int:
        return self.local.now_ms()

    def can_serve_writes(self) -> bool:
        m = self.membership
        return m is not None and m.active

    def cluster_status(self) -> dict:
        m = self.membership
        if m is None:
            return {"node": self.name, "active": False, "inactive_reason": "not started",
                    "view": None, "master": None, "replication": {"enabled": False}}
        st = m.status()
        st["members"] = st["view"]["members"] if st.get("view") else []
        # Issue 5 fills this in; until then the active master serves from its own storage only.
        st["replication"] = {"enabled": False}
        return st

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        return self.local.queue_stats()

    def waiting_receives(self) -> int:
        return self.local.waiting_receives()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.local.start()
        cfg = self.node_config
        try:
            self._history = HistoryWriter(cfg.history_path, cfg.self_name) if cfg.history_path else None
            node = MembershipNode(cfg, history=self._history)
            node.subscribe(on_active=self._on_active)
            node.start()
        except (BindError, OSError) as e:
            if self._history is not None:
                self._history.close()
            await self.local.stop()
            raise ClusterStartError(f"node {cfg.self_name}: cannot start the cluster member: {e}") from None
        self.membership = node

    async def stop(self) -> None:
        node, self.membership = self.membership, None
        if node is not None:
            # destroy_synchronous joins pysyncobj's thread: keep the loop free meanwhile
            await asyncio.get_running_loop().run_in_executor(None, node.stop)
        await self.local.stop()

    # -- operator actions (the admin routes) ---------------------------------------------------

    async def step_down(self) -> bool:
        return await self._node().step_down()

    async def add_member(self, spec: NodeSpec) -> None:
        await self._node().add_member(spec)

    async def remove_member(self, name: str) -> None:
        await self._node().remove_member(name)

    def _node(self) -> MembershipNode:
        if self.membership is None:
            raise RuntimeError("the cluster member is not running")
        return self.membership

    # -- internals -------------------------------------------------------------------------------

    def _on_active(self, active: bool) -> None:
        log.info("node %s is %s", self.name, "ACTIVE: serving SQS" if active else "inactive: answering 503")
        if not active:
            self.local.waiters.wake_everyone()  # parked receives re-check, and get the 503

