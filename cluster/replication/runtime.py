"""StreamNode: the mutation stream's runtime, binding the sans-I/O cores to ZeroMQ and the loop.

One per node, on the node's asyncio loop (nothing here is thread-safe: call it from the loop).
It owns the node's replication log, which survives role changes (a replica's log is what a new
master continues from), and one protocol core at a time: ``MasterReplicator`` while this node is
the master of the installed view, ``ReplicaApplier`` otherwise.

On the master, ``submit`` stages an operation's mutations (already executed on the local
storage) and returns a Future completed when its ack policy is met. The flush is scheduled with
``call_soon`` on the first submit of a loop iteration, so every operation submitted before the
loop gets back to its I/O goes into the same batch (group commit: one frame per replica carries
all of them). A periodic tick drives resends and flow control.

Master change. ``install_view`` with ``master == self`` builds a master core but does not serve
yet: the ``master_sync`` hook (the new master's synchronisation with a majority, see
cluster/replication/sync.py) runs first, and only when it returns does ``serving`` become true;
until then ``submit`` raises NotServing and the core streams nothing. The hook may return the
members' known log positions, from which streaming continues instead of from seq 1. Without a
hook the node serves at once (a static master, as in the tests of this layer).

Operations still waiting when the view changes fail with MasterChanged: their batches may or may
not have reached enough replicas, so the outcome is unknown to this node and the client must be
told so (a retryable error), never a success.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

from storage import Storage

from cluster.config import Address, ClusterConfig
from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits, MasterReplicator
from cluster.replication.messages import (
    AckPolicy, Complete, NeedsTransfer, Rejected, Send, Throttle,
)
from cluster.replication.replica import ReplicaApplier
from cluster.replication.transport import PeerEvent, StreamTransport, TransportTiming, _RateLimitedLog

log = logging.getLogger("cluster.replication.runtime")

MASTER = "master"
REPLICA = "replica"
NO_VIEW = "none"

# (node, epoch, members) -> known log positions {member: last applied seq}, or None.
MasterSync = Callable[["StreamNode", int, tuple[str, ...]], Awaitable[Mapping[str, int] | None]]


class NotServing(RuntimeError):
    """This node does not accept writes now: a replica, not synchronised yet, or stopped."""


class OutcomeUnknown(RuntimeError):
    """The operation was executed and maybe streamed, but never met its policy here: it may
    survive or not, so the client gets a retryable error, never a success."""


class MasterChanged(OutcomeUnknown):
    """The view changed before the operation met its policy."""


class StreamNode:
    def __init__(self, config: ClusterConfig, self_name: str, storage: Storage, *,
                 policy: AckPolicy = AckPolicy.MAJORITY, limits: Limits = Limits(),
                 log_limit_bytes: int = 64 * 1024 * 1024, tick: float = 0.05,
                 transport_timing: TransportTiming | None = None, bind: Address | None = None,
                 master_sync: MasterSync | None = None,
                 on_needs_transfer: Callable[[str], None] | None = None,
                 on_throttle: Callable[[bool], None] | None = None,
                 on_action: Callable[[Any], None] | None = None,
                 on_peer: Callable[[PeerEvent], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = self_name
        self.storage = storage
        self.policy = policy
        self.limits = limits
        self.log = ReplicationLog(log_limit_bytes)
        self.tick_interval = tick
        self.master_sync = master_sync
        self.on_needs_transfer = on_needs_transfer
        self.on_throttle = on_throttle
        self.on_action = on_action
        self.on_peer = on_peer
        self._clock = clock
        self.transport = StreamTransport(config, self_name, on_frame=self._on_frame, on_peer=self._on_peer_event,
                                         timing=transport_timing, bind=bind, clock=clock)
        self.role = NO_VIEW
        self.master: str | None = None
        self.epoch = 0
        self.members: tuple[str, ...] = ()
        self.serving = False
        self.throttling = False
        self.needs_transfer: set[str] = set()
        self.rejected = 0
        self.master_core: MasterReplicator | None = None
        self.replica_core: ReplicaApplier | None = None
        # Frame types the cores do not handle (the master-change sync's): type -> handler.
        self.handlers: dict[type, Callable[[str, Any], None]] = {}
        self._pending: dict[int, asyncio.Future] = {}
        self._op_ids = itertools.count(1)
        self._flush_handle: asyncio.Handle | None = None
        self._sync_task: asyncio.Task | None = None
        self._tick_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rlog = _RateLimitedLog(10.0)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> Address:
        self._loop = asyncio.get_running_loop()
        bound = await self.transport.start()
        self._tick_task = self._loop.create_task(self._ticker(), name=f"stream-tick-{self.name}")
        return bound

    async def stop(self) -> None:
        if self.master_core is not None:
            self._flush()
        self._fail_pending(OutcomeUnknown(f"{self.name} stopped before the ack policy was met"))
        self.serving = False
        for task in (self._tick_task, self._sync_task):
            if task is not None:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        self._tick_task = self._sync_task = None
        await self.transport.close()

    def update_config(self, config: ClusterConfig) -> None:
        """New members or dial addresses (the membership layer's config changes)."""
        self.transport.update_config(config)

    # -- views -------------------------------------------------------------------------------------

    def install_view(self, master: str, epoch: int, members: Iterable[str]) -> None:
        members = tuple(sorted(members))
        if epoch < self.epoch:
            log.info("stream: ignoring view of epoch %d, already in %d", epoch, self.epoch)
            return
        if epoch == self.epoch and master == self.master:
            self.members = members
            if self.master_core is not None:
                self._handle(self.master_core.view_changed(members))
            return
        if self.master_core is not None:
            # Staged operations already changed the local state: log them (as this epoch's
            # unacknowledged tail) rather than leave the state ahead of the log.
            self._flush()
        self._fail_pending(MasterChanged(f"view changed to master {master} in epoch {epoch}"))
        if self._sync_task is not None:
            self._sync_task.cancel()
            self._sync_task = None
        self.master, self.epoch, self.members = master, epoch, members
        self.serving = False
        self.needs_transfer.clear()
        if self.throttling:
            self._set_throttle(False)
        if master == self.name:
            self.role = MASTER
            self.replica_core = None
            self.master_core = MasterReplicator(self.name, epoch, members, self.log, policy=self.policy,
                                                limits=self.limits)
            if self.master_sync is None:
                self._start_serving(None)
            else:
                self._sync_task = asyncio.get_running_loop().create_task(
                    self._run_sync(epoch, members), name=f"stream-sync-{self.name}-{epoch}")
        else:
            self.role = REPLICA
            self.master_core = None
            if self.replica_core is None:
                self.replica_core = ReplicaApplier(self.storage, self.log)
            self._handle(self.replica_core.view_changed(master, epoch))

    async def _run_sync(self, epoch: int, members: tuple[str, ...]) -> None:
        assert self.master_sync is not None
        try:
            positions = await self.master_sync(self, epoch, members)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("stream: master sync for epoch %d failed; not serving", epoch)
            return
        if self.epoch == epoch and self.master_core is not None:
            self._start_serving(positions)

    def _start_serving(self, positions: Mapping[str, int] | None) -> None:
        core = self.master_core
        assert core is not None
        for name, seq in (positions or {}).items():
            r = core.replicas.get(name)
            if r is not None and seq <= self.log.last_seq:
                r.acked = max(r.acked, seq)
                r.sent = r.acked
        self.serving = True
        now = self._now_ms()
        for name in core.replicas:
            if self.transport.connected(name):
                self._handle(core.replica_connected(name, now))
        log.info("stream: %s serves as master of epoch %d from seq %d", self.name, self.epoch, self.log.last_seq)

    # -- the master's API --------------------------------------------------------------------------

    def next_op_id(self) -> int:
        return next(self._op_ids)

    def submit(self, op_id: int, mutations: Sequence, policy: AckPolicy | None = None) -> asyncio.Future:
        """Replicate ``mutations`` (already applied here); the Future resolves (to None) when
        ``policy`` (default: the node's) is met, or fails with OutcomeUnknown (MasterChanged)."""
        core = self.master_core
        if core is None or not self.serving:
            raise NotServing(f"{self.name} is not the serving master (role {self.role}, master {self.master})")
        if op_id in self._pending:
            raise ValueError(f"operation {op_id} is already waiting")
        fut = asyncio.get_running_loop().create_future()
        self._pending[op_id] = fut
        self._handle(core.submit(op_id, mutations, policy))
        if self._flush_handle is None and mutations:
            # policy none completes at once, but its mutations still have to be streamed
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)
        return fut

    def restored(self, replica: str, seq: int) -> None:
        """A state transfer brought ``replica`` to ``seq`` (the lead's transfer calls this)."""
        self.needs_transfer.discard(replica)
        if self.master_core is not None:
            self._handle(self.master_core.replica_restored(replica, seq, self._now_ms()))

    def send(self, to: str, frame: Any) -> bool:
        """Send any registered frame (the sync's frames use this too)."""
        return self.transport.send(to, frame)

    # -- status ------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        now = self._now_ms()
        connected = {n: self.transport.connected(n) for n in self.transport.peers}
        d: dict[str, Any] = {
            "enabled": True, "node": self.name, "role": self.role, "master": self.master,
            "epoch": self.epoch, "members": list(self.members), "serving": self.serving,
            "log": {"first_seq": self.log.first_seq, "last_seq": self.log.last_seq,
                    "last_epoch": self.log.last_epoch, "entries": len(self.log), "bytes": self.log.size_bytes},
            "throttling": self.throttling, "needs_transfer": sorted(self.needs_transfer),
            "pending_ops": len(self._pending), "rejected_frames": self.rejected,
            "peers": connected, "transport": self.transport.status(),
        }
        if self.master_core is not None:
            core = self.master_core.status(now)
            d["replicas"] = {name: {**r, "connected": connected.get(name, False)}
                             for name, r in core["replicas"].items()}
            d["replication_queue"] = core["staged_ops"] + core["waiting_ops"]
            d["delay_ms"] = max((r["lag_ms"] for r in core["replicas"].values()), default=0)
            d["halted"] = any(not connected.get(n, False) for n in core["replicas"])
        else:
            d["applied_seq"] = self.log.last_seq
            d["halted"] = self.master is None or (self.master != self.name
                                                  and not connected.get(self.master, False))
        return d

    # -- internals ---------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _flush(self) -> None:
        self._flush_handle = None
        if self.master_core is not None:
            self._handle(self.master_core.flush(self._now_ms()))

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval)
            try:
                if self.master_core is not None and self.serving:
                    self._handle(self.master_core.on_tick(self._now_ms()))
            except Exception:
                log.exception("stream: tick failed")

    def _on_frame(self, sender: str, frame: Any) -> None:
        handler = self.handlers.get(type(frame))
        if handler is not None:
            handler(sender, frame)
        elif self.master_core is not None:
            self._handle(self.master_core.on_frame(sender, frame, self._now_ms()))
        elif self.replica_core is not None:
            self._handle(self.replica_core.on_frame(sender, frame, self._now_ms()))
        else:
            self._handle([Rejected(sender, f"{type(frame).__name__} before any view")])

    def _on_peer_event(self, event: PeerEvent) -> None:
        core = self.master_core
        if core is not None and self.serving:
            now = self._now_ms()
            if event.connected:
                self._handle(core.replica_connected(event.name, now))
            else:
                self._handle(core.replica_disconnected(event.name, now))
        if self.on_peer is not None:
            self.on_peer(event)

    def _handle(self, actions: Iterable[Any]) -> None:
        for a in actions:
            if isinstance(a, Send):
                self.transport.send(a.to, a.frame)
            elif isinstance(a, Complete):
                for op in a.op_ids:
                    fut = self._pending.pop(op, None)
                    if fut is not None and not fut.done():
                        fut.set_result(None)
            elif isinstance(a, Rejected):
                self.rejected += 1
                self._rlog.warn(f"rejected-{a.sender}", self._clock(), "stream: %s refused a frame from %s: %s",
                                self.name, a.sender, a.reason)
            elif isinstance(a, NeedsTransfer):
                self.needs_transfer.add(a.replica)
                log.info("stream: replica %s is behind the log and needs a state transfer", a.replica)
                if self.on_needs_transfer is not None:
                    self.on_needs_transfer(a.replica)
            elif isinstance(a, Throttle):
                self._set_throttle(a.on)
            elif self.on_action is not None:
                self.on_action(a)
            else:
                log.debug("stream: unhandled action %r", a)

    def _set_throttle(self, on: bool) -> None:
        if on != self.throttling:
            self.throttling = on
            log.warning("stream: %s producer throttling", "starting" if on else "ending")
            if self.on_throttle is not None:
                self.on_throttle(on)

    def _fail_pending(self, err: Exception) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(err)
                # the caller may have given up waiting: do not warn about an unretrieved error
                fut.add_done_callback(lambda f: f.exception())
