"""StreamNode: a member's replication runtime, binding ReplicationCore to ZeroMQ and the loop.

One per node, on the node's asyncio loop (nothing here is thread-safe: call it from the loop).
All protocol decisions (roles, the master-change sync, transfers) are the sans-I/O
ReplicationCore's (core.py); this class turns its actions into frames, futures and callbacks,
and feeds it frames, peer events and timer ticks.

On the master, ``submit`` stages an operation's mutations (already executed on the local
storage) and returns a Future completed when its ack policy is met. The flush is scheduled with
``call_soon`` on the first submit of a loop iteration, so every operation submitted before the
loop gets back to its I/O goes into the same batch (group commit: one frame per replica carries
all of them). A periodic tick drives resends, sync retries, transfers and flow control.

A view naming this node master does not make it serve: the core first synchronises with a
majority of the configured members, and only then reports ``Serving`` (``on_serving``), after
which ``submit`` is accepted. Operations still waiting when the view changes fail with
MasterChanged: their batches may or may not have reached enough replicas, so the outcome is
unknown to this node and the client must be told so (a retryable error), never a success.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from typing import Any, Callable, Iterable, Sequence

from storage import Storage

from cluster.config import Address, ClusterConfig
from cluster.replication.log import ReplicationLog
from cluster.replication import core as core_mod
from cluster.replication.core import (
    Abandoned, Note, ReplicationCore, Serving, StorageReplaced, TransferSettings,
)
from cluster.replication.master import Limits
from cluster.replication.messages import Ack, AckPolicy, Complete, Rejected, Send, Throttle
from cluster.replication.transport import PeerEvent, StreamTransport, TransportTiming, _RateLimitedLog

log = logging.getLogger("cluster.replication.runtime")

MASTER, REPLICA, NO_VIEW = core_mod.MASTER, core_mod.REPLICA, core_mod.NO_VIEW


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
                 transfer: TransferSettings = TransferSettings(),
                 new_storage: Callable[[], Storage] | None = None,
                 on_serving: Callable[[bool, int], None] | None = None,
                 on_storage: Callable[[Storage], None] | None = None,
                 on_note: Callable[[str, dict], None] | None = None,
                 on_throttle: Callable[[bool], None] | None = None,
                 on_peer: Callable[[PeerEvent], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, amnesiac: bool = False) -> None:
        self.name = self_name
        self.tick_interval = tick
        self.on_serving = on_serving
        self.on_storage = on_storage
        self.on_note = on_note
        self.on_throttle = on_throttle
        self.on_peer = on_peer
        self._clock = clock
        if new_storage is None:
            def new_storage() -> Storage:
                return Storage(clock=storage.clock, limits=storage.limits)
        self.core = ReplicationCore(self_name, storage, new_storage, log=ReplicationLog(log_limit_bytes),
                                    policy=policy, limits=limits, configured=len(config.names),
                                    transfer=transfer, amnesiac=amnesiac)
        self.transport = StreamTransport(config, self_name, on_frame=self._on_frame, on_peer=self._on_peer_event,
                                         timing=transport_timing, bind=bind, clock=clock)
        self.throttling = False
        self.rejected = 0
        # Frame types the core does not handle (the product's request forwarding): type -> handler.
        self.handlers: dict[type, Callable[[str, Any], None]] = {}
        # op id -> what to call when its policy is met (None) or it never will be (the error)
        self._pending: dict[int, Callable[[BaseException | None], None]] = {}
        self._op_ids = itertools.count(1)
        self._flush_handle: asyncio.Handle | None = None
        # Acks are cumulative: those produced while the transport drains a burst of batches go
        # out once, the newest per master, right after the drain (one send instead of one per batch).
        self._acks: dict[str, Ack] = {}
        self._tick_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rlog = _RateLimitedLog(10.0)

    # -- the core's state, for callers ----------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self.core.storage

    @property
    def log(self) -> ReplicationLog:
        return self.core.log

    @property
    def role(self) -> str:
        return self.core.role

    @property
    def master(self) -> str | None:
        return self.core.master

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def members(self) -> tuple[str, ...]:
        return self.core.members

    @property
    def serving(self) -> bool:
        return self.core.serving

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> Address:
        self._loop = asyncio.get_running_loop()
        bound = await self.transport.start()
        self._tick_task = self._loop.create_task(self._ticker(), name=f"stream-tick-{self.name}")
        return bound

    async def stop(self) -> None:
        self._flush()
        self._fail_pending(OutcomeUnknown(f"{self.name} stopped before the ack policy was met"))
        self.core.serving = False
        if self._tick_task is not None:
            self._tick_task.cancel()
            try:
                await self._tick_task
            except (asyncio.CancelledError, Exception):
                pass
        self._tick_task = None
        await self.transport.close()

    def update_config(self, config: ClusterConfig) -> None:
        """New members or dial addresses (the membership layer's config changes)."""
        self.core.configured = len(config.names)
        self.transport.update_config(config)

    # -- views -------------------------------------------------------------------------------------

    def install_view(self, master: str, epoch: int, members: Iterable[str]) -> None:
        self._handle(self.core.install_view(master, epoch, members, self._now_ms()))

    # -- the master's API --------------------------------------------------------------------------

    def next_op_id(self) -> int:
        return next(self._op_ids)

    def submit(self, op_id: int, mutations: Sequence, policy: AckPolicy | None = None) -> asyncio.Future:
        """Replicate ``mutations`` (already applied here); the Future resolves (to None) when
        ``policy`` (default: the node's) is met, or fails with OutcomeUnknown (MasterChanged)."""
        fut = asyncio.get_running_loop().create_future()
        self.submit_then(op_id, mutations, policy, functools.partial(settle, fut, None))
        return fut

    def submit_then(self, op_id: int, mutations: Sequence, policy: AckPolicy | None,
                    done: Callable[[BaseException | None], None]) -> None:
        """``submit`` with a callback instead of a Future: ``done(None)`` once ``policy`` is met,
        ``done(error)`` if it never will be; called at most once, possibly before this returns.
        (A busy master completes thousands of operations a second; a Future per operation, and
        the loop callback each of its done-callbacks costs, showed up in its profile.)"""
        if not self.core.serving:
            raise NotServing(f"{self.name} is not the serving master (role {self.role}, master {self.master})")
        if op_id in self._pending:
            raise ValueError(f"operation {op_id} is already waiting")
        self._pending[op_id] = done
        self._handle(self.core.submit(op_id, mutations, policy))
        if self._flush_handle is None and mutations:
            # policy none completes at once, but its mutations still have to be streamed
            self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)

    def abandon(self, reason: str) -> None:
        """Fail every waiting operation as of unknown outcome (the node lost its quorum, say)."""
        self._fail_pending(OutcomeUnknown(reason))

    def send(self, to: str, frame: Any) -> bool:
        return self.transport.send(to, frame)

    # -- status ------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        now = self._now_ms()
        connected = {n: self.transport.connected(n) for n in self.transport.peers}
        d = self.core.status(now)
        d.update({"enabled": True, "node": self.name, "throttling": self.throttling,
                  "pending_ops": len(self._pending), "rejected_frames": self.rejected,
                  "peers": connected, "transport": self.transport.status()})
        d["replicas"] = {name: {**r, "connected": connected.get(name, False)} for name, r in d["replicas"].items()}
        if self.role == MASTER:
            d["halted"] = any(not connected.get(n, False) for n in d["replicas"])
        else:
            master, _ = self.core.following()
            d["halted"] = master is None or not connected.get(master, False)
        return d

    # -- internals ---------------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _flush(self) -> None:
        self._flush_handle = None
        self._handle(self.core.flush(self._now_ms()))

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval)
            try:
                self._handle(self.core.on_tick(self._now_ms()))
            except Exception:
                log.exception("stream: tick failed")

    def _on_frame(self, sender: str, frame: Any) -> None:
        handler = self.handlers.get(type(frame))
        if handler is not None:
            handler(sender, frame)
        else:
            self._handle(self.core.on_frame(sender, frame, self._now_ms()))

    def _on_peer_event(self, event: PeerEvent) -> None:
        self._handle(self.core.on_peer(event.name, event.connected, self._now_ms()))
        if self.on_peer is not None:
            self.on_peer(event)

    def _handle(self, actions: Iterable[Any]) -> None:
        for a in actions:
            t = type(a)
            if t is Send:
                if type(a.frame) is Ack and self._loop is not None:
                    if not self._acks:
                        self._loop.call_soon(self._send_acks)
                    self._acks[a.to] = a.frame
                else:
                    self.transport.send(a.to, a.frame)
            elif t is Complete:
                pending = self._pending
                for op in a.op_ids:
                    done = pending.pop(op, None)
                    if done is not None:
                        done(None)
            elif t is Rejected:
                self.rejected += 1
                self._rlog.warn(f"rejected-{a.sender}", self._clock(), "stream: %s refused a frame from %s: %s",
                                self.name, a.sender, a.reason)
            elif t is Throttle:
                self._set_throttle(a.on)
            elif t is Abandoned:
                self._fail_pending(MasterChanged(a.reason))
                if self.throttling:
                    self._set_throttle(False)
            elif t is Serving:
                log.info("stream: %s %s as master of epoch %d (log at seq %d)", self.name,
                         "serves" if a.on else "stops serving", a.epoch, self.log.last_seq)
                if self.on_serving is not None:
                    self.on_serving(a.on, a.epoch)
            elif t is StorageReplaced:
                if self.on_storage is not None:
                    self.on_storage(a.storage)
            elif t is Note:
                log.info("stream: %s %s %s", self.name, a.event, a.fields)
                if self.on_note is not None:
                    self.on_note(a.event, a.fields)
            else:
                log.debug("stream: unhandled action %r", a)

    def _send_acks(self) -> None:
        acks, self._acks = self._acks, {}
        for to, ack in acks.items():
            self.transport.send(to, ack)

    def _set_throttle(self, on: bool) -> None:
        if on != self.throttling:
            self.throttling = on
            log.warning("stream: %s producer throttling", "starting" if on else "ending")
            if self.on_throttle is not None:
                self.on_throttle(on)

    def _fail_pending(self, err: Exception) -> None:
        pending, self._pending = self._pending, {}
        for done in pending.values():
            done(err)


def settle(fut: asyncio.Future, result: Any, err: BaseException | None) -> None:
    """Complete ``fut`` from a callback's outcome (``result``, or the error), unless it was
    cancelled meanwhile."""
    if fut.done():
        return
    if err is None:
        fut.set_result(result)
    else:
        fut.set_exception(err)
        # the caller may have given up waiting: do not warn about an unretrieved error
        fut.add_done_callback(lambda f: f.exception())
