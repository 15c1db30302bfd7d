"""The server as a cluster member: a ``Backend`` over cluster/'s ReplicatedStorage.

* On the active master, commands run on the local storage and are answered once their ack
  policy is met (cluster/replicated.py).
* On any other member, the endpoint forwards SQS requests to the master (forwarding.py), unless
  ``forward = false``: then, like a member of an inactive (minority) partition, it answers every
  SQS call with a retryable ``ServiceUnavailable`` (HTTP 503), never a success.
* A receive that long-polls waits here, on the master, and is woken by the mutations the master
  executes; a parked long poll on a node that stops being the active master is woken at once and
  answered with the 503.
* The configured queues are created by each new master through the replicated path, so every
  member holds the same queues (the same ids, hence the same digest). Creating an existing
  queue with the same attributes is a no-op, as in SQS.
* Time acts (retention, delays, dedup windows) through the master's Tick, replicated like any
  other operation; replicas never tick on their own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any, Callable, Sequence

from storage import Storage
from storage.commands import Command, QueueKey, Tick
from storage.errors import REQUEST_THROTTLED, SERVICE_UNAVAILABLE, SqsError

from cluster.config import NodeConfig, NodeSpec
from cluster.history import HistoryWriter
from cluster.replicated import ReplicatedStorage, Throttled
from cluster.replication.runtime import NotServing, OutcomeUnknown, settle
from cluster.runtime import BindError

from elasticmq_py.backend import LocalBackend, cancel_and_wait
from elasticmq_py.forwarding import Forwarder
from elasticmq_py.health import Health, NodeFacts, Role, judge

log = logging.getLogger(__name__)


class UnknownOutcome(SqsError):
    """A retryable 503 for an operation that was executed and may or may not survive."""


class ClusterStartError(RuntimeError):
    """The cluster member could not start (its Raft or stream address is taken, for instance)."""


class ClusterBackend:
    """A ``Backend`` that serves from the replicated storage while this node is the active master."""

    def __init__(self, local: LocalBackend, node_config: NodeConfig,
                 on_master: Sequence[Command] = ()) -> None:
        self.local = local              # waiters, long polls and queue stats over the current storage
        self.node_config = node_config
        self.name = node_config.self_name
        self.on_master = tuple(on_master)   # run by each new master (the configured queues)
        self.replicated: ReplicatedStorage | None = None
        self.forwarder: Forwarder | None = None
        self._history: HistoryWriter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick_task: asyncio.Task | None = None
        self._was_serving = False
        self._last_progress: dict | None = None
        self._history_flush = False   # a flush of the buffered op lines is scheduled

    # -- the Backend interface ---------------------------------------------------------------

    def execute(self, command: Command) -> asyncio.Future:
        fut = (self._loop or asyncio.get_running_loop()).create_future()
        self.execute_then(command, functools.partial(settle, fut))
        return fut

    def execute_then(self, command: Command, done: Callable[[Any, BaseException | None], None]) -> None:
        """Run ``command``; ``done(result, None)`` once it is answerable, ``done(None, error)``
        with the SqsError a client should see otherwise (at once when it was refused)."""
        if self._history is not None and type(command) is not Tick:
            started = time.time()

            def finish(result: Any, err: BaseException | None) -> None:
                self._record_op(command, started, err)
                done(result, err)
        else:
            finish = done
        r = self.replicated
        try:
            if r is None:
                raise NotServing(f"Node {self.name} is not running.")
            r.execute_then(command, finish, map_error=self._unknown_outcome, on_ok=self._wake)
        except NotServing as e:
            finish(None, SERVICE_UNAVAILABLE(f"{e} The request was not executed; retry."))
        except Throttled as e:
            finish(None, REQUEST_THROTTLED(f"Request is throttled: {e}."))
        except SqsError as e:
            finish(None, e)

    def _record_op(self, command: Command, started: float, err: BaseException | None) -> None:
        """The history's `op` line: what this node did for a client, and how it ended."""
        queue = getattr(command, "queue", None)
        fields = {"action": type(command).__name__, "queue": queue.name if queue is not None else None}
        if err is None:
            outcome = "ok"
        elif isinstance(err, SqsError):
            outcome = "unknown" if isinstance(err, UnknownOutcome) else "failed"
            fields["error"] = err.code
        else:
            outcome, fields["error"] = "failed", type(err).__name__
        h = self._history
        if h is not None:
            h.write("op", started, flush=False, outcome=outcome, completed=round(time.time(), 6), **fields)
            if not self._history_flush:
                self._history_flush = True
                (self._loop or asyncio.get_running_loop()).call_soon(self._flush_history)

    def _flush_history(self) -> None:
        self._history_flush = False
        if self._history is not None:
            self._history.flush()

    @staticmethod
    def _unknown_outcome(err: OutcomeUnknown) -> UnknownOutcome:
        return UnknownOutcome(SERVICE_UNAVAILABLE,
            f"The outcome of the request is unknown: {err}. It may or may not have taken effect; retry.")

    def _wake(self) -> None:
        # Long polls re-check on any completed change. Cheap when nobody waits (the common case
        # under load); a spurious wake-up only costs the waiter one more receive.
        if self.local.waiters:
            self.local.waiters.wake_everyone()

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        await self.local.wait_for_messages(queue, deadline_ms)

    def now_ms(self) -> int:
        return self.local.now_ms()

    def health(self, role: Role) -> Health:
        r = self.replicated
        if r is None:
            return judge(NodeFacts(self.name, False, f"Node {self.name} is not running.", False, None, False, False), role)
        master = r.master_name()
        linked = heard = False
        if master is not None and master != self.name:
            linked = r.stream.transport.connected(master)
            st = r.membership.status()   # a follower's "quorum": recent contact with its Raft leader
            heard = bool(st.get("quorum")) and st.get("leader") == master
        return judge(NodeFacts(self.name, r.serving, r.unavailable_reason(), r.forward, master, linked, heard),
                     role)

    def cluster_status(self) -> dict:
        r = self.replicated
        if r is None:
            return {"node": self.name, "active": False, "inactive_reason": "not started",
                    "view": None, "master": None, "members": [], "replication": {"enabled": False}}
        st = r.membership.status()
        st["members"] = st["view"]["members"] if st.get("view") else []
        st["serving"] = r.serving
        st["replication"] = r.status()
        if self.forwarder is not None:
            st["replication"]["forwarding"] = self.forwarder.status()
        return st

    def digest(self) -> str:
        return self.local.storage.digest()

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        return self.local.queue_stats()

    def waiting_receives(self) -> int:
        return self.local.waiting_receives()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        cfg = self.node_config
        try:
            self._history = HistoryWriter(cfg.history_path, cfg.self_name) if cfg.history_path else None
            r = ReplicatedStorage(cfg, self.local.clock, self.local.storage.limits, history=self._history,
                                  on_serving=self._on_serving, on_storage=self._on_storage)
            self.local.storage = r.storage
            self.forwarder = Forwarder(r)
            r.membership.subscribe(on_view=lambda view: self.forwarder.master_changed(view.master))
            await r.start()
        except (BindError, OSError, ValueError) as e:
            if self._history is not None:
                self._history.close()
            raise ClusterStartError(f"node {cfg.self_name}: cannot start the cluster member: {e}") from None
        self.replicated = r
        self._tick_task = self._loop.create_task(self._tick_loop(), name="replicated-tick")

    async def stop(self) -> None:
        await cancel_and_wait(self._tick_task)
        self._tick_task = None
        r, self.replicated = self.replicated, None
        if r is not None:
            await r.stop()
        self.local.waiters.wake_everyone()

    # -- operator actions (the admin routes) ---------------------------------------------------

    async def step_down(self) -> bool:
        return await self._node().membership.step_down()

    async def add_member(self, spec: NodeSpec) -> None:
        await self._node().membership.add_member(spec)

    async def remove_member(self, name: str) -> None:
        await self._node().membership.remove_member(name)

    def _node(self) -> ReplicatedStorage:
        if self.replicated is None:
            raise RuntimeError("the cluster member is not running")
        return self.replicated

    # -- internals -------------------------------------------------------------------------------

    def _on_serving(self, serving: bool) -> None:
        if serving == self._was_serving:
            return
        self._was_serving = serving
        log.info("node %s is %s", self.name, "ACTIVE: the master, serving SQS" if serving
                 else "not the active master: forwarding or answering 503")
        # Parked receives re-check: on a former master they get the 503, on a new one messages.
        self.local.waiters.wake_everyone()
        if serving and self.on_master:
            asyncio.get_running_loop().create_task(self._run_on_master())

    async def _run_on_master(self) -> None:
        for command in self.on_master:
            try:
                await self.execute(command)
            except SqsError as e:
                if e.kind is SERVICE_UNAVAILABLE:
                    return  # no longer the master; the next one runs them
                log.error("configured %s failed on the new master: %s: %s", type(command).__name__, e.code, e.message)

    def _on_storage(self, storage: Storage) -> None:
        self.local.storage = storage
        self.local.waiters.wake_everyone()

    def _record_progress(self) -> None:
        """The history's `replication` line, once a second on the master while anything moved:
        each replica's acknowledged position and lag (the acks, without a line per ack)."""
        r = self.replicated
        if self._history is None or r is None or r.stream.role != "master":
            return
        st = r.stream.status()
        progress = {n: (x["acked_seq"], x["connected"]) for n, x in st["replicas"].items()}
        if progress == self._last_progress:
            return
        self._last_progress = progress
        self._history.write("replication", time.time(), epoch=st["epoch"], last_seq=st["log"]["last_seq"],
                            replicas={n: {"acked_seq": x["acked_seq"], "lag_batches": x["lag_batches"],
                                          "lag_ms": x["lag_ms"], "connected": x["connected"]}
                                      for n, x in st["replicas"].items()})

    async def _tick_loop(self) -> None:
        busy = False
        while True:
            await asyncio.sleep(0 if busy else LocalBackend.TICK_INTERVAL_S)
            busy = False
            try:
                self._record_progress()
            except Exception:
                log.exception("writing the replication history line failed")
            r = self.replicated
            if r is None or not r.serving:
                continue
            try:
                result = await self.execute(Tick())
                busy = result is not None and result.effects >= Tick().max_effects
            except SqsError:
                pass    # lost mastership meanwhile, or a replica lags: tick again later
            except Exception:
                log.exception("replicated storage tick failed")
