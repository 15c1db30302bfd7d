"""ReplicatedStorage: the storage's interface, replicated. Membership (Raft) + the mutation stream.

This is the runtime that ties the layers together on one node's event loop:

* MembershipNode (pysyncobj) delivers views; each view is installed in the StreamNode, whose
  ReplicationCore makes this node the master or a replica of it.
* A new master synchronises with a majority of the configured members before it serves; then
  the membership layer's "replication" gate is opened for that epoch, and only from then on can
  the node be *active* (leader, lease fresh, view names it, gate open).
* ``execute(command)`` on the active master runs the command on the local storage, hands its
  mutations to the stream and returns a future of the result that completes when the command's
  ack policy is met. Anything else raises: NotServing (not the active master: a client gets a
  retryable 503), Throttled (a reachable replica lags too far; producers get SQS's throttling
  error), or the future fails with OutcomeUnknown (the view changed, or the node lost its quorum,
  before the policy was met: the client gets a retryable 503, never a success).

An operation that changed nothing (a read, an empty receive, a rejected command) answers at
once. Ack policy: the cluster's, unless the queue carries the tag ``elasticmq-py:ack-policy``
(one of none/one/majority/all), which is replicated with the queue like any tag.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import replace
from typing import Any, Callable

from storage import Storage
from storage.commands import (
    Command, CreateQueue, DeleteQueue, ListQueueTags, QueueKey, SendMessage, SendMessageBatch, TagQueue,
    UntagQueue,
)
from storage.errors import SqsError
from storage.limits import STRICT, Limits as StorageLimits

from cluster.config import NodeConfig, NodeSpec
from cluster.history import HistoryWriter
from cluster.membership import View
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy
from cluster.replication.runtime import NotServing, OutcomeUnknown, StreamNode, settle
from cluster.runtime import MembershipNode

log = logging.getLogger("cluster.replicated")

POLICY_TAG = "elasticmq-py:ack-policy"
REPLICATION_GATE = "replication"

_PRODUCERS = (SendMessage, SendMessageBatch)
_TAG_CHANGES = (CreateQueue, DeleteQueue, TagQueue, UntagQueue)


class Throttled(RuntimeError):
    """A reachable replica lags beyond the configured bound: producers must slow down."""


class ReplicatedStorage:
    def __init__(self, config: NodeConfig, clock: Any, limits: StorageLimits = STRICT, *,
                 history: HistoryWriter | None = None, stream_tick: float = 0.05,
                 on_serving: Callable[[bool], None] | None = None,
                 on_storage: Callable[[Storage], None] | None = None) -> None:
        self.config = config
        self.name = config.self_name
        self.clock = clock
        self.history = history
        self.on_serving = on_serving
        self.on_storage = on_storage
        rep = config.cluster.replication
        self.policy = AckPolicy(rep.policy)
        self.forward = rep.forward
        storage = Storage(clock=clock, limits=limits)
        self.membership = MembershipNode(config, history=history, required_gates=(REPLICATION_GATE,),
                                         may_stand=self._may_stand)
        self.stream = StreamNode(
            config.cluster, self.name, storage, policy=self.policy,
            limits=Limits(throttle_lag_batches=rep.throttle_lag_batches, throttle_lag_ms=rep.throttle_lag_ms),
            log_limit_bytes=rep.log_limit_mb * 1024 * 1024, tick=stream_tick,
            new_storage=lambda: Storage(clock=clock, limits=limits),
            on_serving=self._on_serving, on_storage=self._on_storage, on_note=self._on_note,
            # its Raft journal says it was a member: what it acknowledged then is gone
            amnesiac=self.membership.restarted)
        self._policies: dict[QueueKey, AckPolicy] = {}
        self._abandon_timer: asyncio.TimerHandle | None = None
        self._last_transfer_at: float | None = None
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the stream, then join the cluster (raises cluster.runtime.BindError/OSError)."""
        await self.stream.start()
        try:
            self.membership.subscribe(on_view=self._on_view, on_active=self._on_active, on_member=self._on_member)
            self.membership.start()
        except BaseException:
            await self.stream.stop()
            raise
        self._started = True

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self._abandon_timer is not None:
            self._abandon_timer.cancel()
        await self.stream.stop()
        # destroy_synchronous joins pysyncobj's thread: keep the loop free meanwhile
        await asyncio.get_running_loop().run_in_executor(None, self.membership.stop)

    # -- the storage's interface -------------------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self.stream.storage

    @property
    def serving(self) -> bool:
        """The active master, synchronised: client operations are accepted."""
        return self.stream.serving and self.membership.active

    def execute(self, command: Command, policy: AckPolicy | None = None, *,
                map_error: Callable[[OutcomeUnknown], BaseException] | None = None,
                on_ok: Callable[[], None] | None = None) -> "asyncio.Future[Any]":
        """``execute_then`` as a future of the command's result; NotServing / Throttled /
        SqsError are raised at once."""
        fut = asyncio.get_running_loop().create_future()
        self.execute_then(command, functools.partial(settle, fut), policy, map_error=map_error, on_ok=on_ok)
        return fut

    def execute_then(self, command: Command, done: Callable[[Any, BaseException | None], None],
                     policy: AckPolicy | None = None, *,
                     map_error: Callable[[OutcomeUnknown], BaseException] | None = None,
                     on_ok: Callable[[], None] | None = None) -> None:
        """Execute ``command`` here and call ``done(result, None)`` once its ack policy is met,
        or ``done(None, error)`` with OutcomeUnknown (or what ``map_error`` makes of it) when it
        cannot be; at most once, maybe before this returns. ``on_ok`` runs just before success.
        Raises NotServing / Throttled / SqsError at once, when nothing was executed.

        Every operation goes through the stream, those without mutations too: a FIFO send that
        deduplication turns into a no-op answers with a message only this master may hold yet,
        and must wait for what came before it (sim/README.md bug 2; such an operation completes
        at once when nothing is outstanding)."""
        if not self.serving:
            raise NotServing(self.unavailable_reason())
        if self.stream.throttling and isinstance(command, _PRODUCERS):
            raise Throttled("a replica lags too far behind; the master slows producers until it catches up")
        if policy is None:
            policy = self._policy_for(command)
        result, mutations = self.storage.execute(command)   # SqsError: nothing happened
        if mutations:
            self._executed(command)

        def met(err: BaseException | None) -> None:
            if err is None:
                if on_ok is not None:
                    on_ok()
                done(result, None)
                return
            unknown = err if isinstance(err, OutcomeUnknown) else OutcomeUnknown(str(err))
            done(None, map_error(unknown) if map_error is not None else unknown)

        self.stream.submit_then(self.stream.next_op_id(), mutations, policy, met)

    def unavailable_reason(self) -> str:
        view = self.membership.view
        if view is None:
            return f"Node {self.name} has not joined a view of the cluster yet."
        if view.master != self.name:
            return f"Node {self.name} is not the master (the master is {view.master})."
        if not self.stream.serving:
            return f"Node {self.name} is the new master and is synchronising with a majority of the members."
        return f"Node {self.name} is the master but not active (no quorum or lease)."

    def master_name(self) -> str | None:
        view = self.membership.view
        return view.master if view is not None else None

    # -- status ------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        st = self.stream.status()
        st["policy"] = self.policy.value
        st["forward"] = self.forward
        lt = st.get("last_transfer")
        if lt is not None:
            lt = dict(lt)
            lt.pop("started_ms", None)
            lt["at"] = self._last_transfer_at
            st["last_transfer"] = lt
        return st

    # -- callbacks from the layers ---------------------------------------------------------------

    def _executed(self, command: Command) -> None:
        if isinstance(command, _TAG_CHANGES):
            self._policies.clear()   # rare: the next command of each queue reads its tags again

    def _policy_for(self, command: Command) -> AckPolicy:
        key = getattr(command, "queue", None)
        if key is None:
            return self.policy
        p = self._policies.get(key)
        if p is None:
            p = self.policy
            try:
                tags, _ = self.storage.execute(ListQueueTags(key))
                value = tags.tags.get(POLICY_TAG)
                if value is not None:
                    p = AckPolicy(value.strip().lower())
            except SqsError:
                pass   # no such queue: the command fails the same way; the default is moot
            except ValueError:
                log.warning("queue %s: tag %s=%r is not an ack policy; using %s", key.name, POLICY_TAG,
                            tags.tags.get(POLICY_TAG), self.policy.value)
            self._policies[key] = p
        return p

    def _on_member(self, change: str, spec: NodeSpec) -> None:
        """A member added or removed at runtime: the stream learns where to reach it."""
        cluster = self.config.cluster
        nodes = tuple(n for n in cluster.nodes if n.name != spec.name)
        if change == "added":
            if spec.stream_addr is None:
                log.warning("member %s was added without a stream address: nothing can be streamed to it",
                            spec.name)
                return
            nodes += (spec,)
        self.config = replace(self.config, cluster=replace(cluster, nodes=nodes))
        self.stream.update_config(self.config.cluster)
        log.info("stream: member %s %s", spec.name, change)

    def _may_stand(self) -> bool:
        """Not while a state transfer from a live master is bringing this node up: it holds
        nothing worth leading with, and its election would restart the transfer. (Runs on
        pysyncobj's thread; it only reads.)"""
        core = self.stream.core
        rec = core.receiver
        if rec is None or rec.staging is None:
            return True
        return not self.stream.transport.connected(rec.master)

    def _on_view(self, view: View) -> None:
        self.stream.install_view(view.master, view.epoch, view.members)

    def _on_active(self, active: bool) -> None:
        # Waiting operations are not failed at once when the lease lapses: a lapse under load can
        # be a few heartbeats long, and an operation whose batch a majority acks meanwhile is as
        # durable as any (no minority can collect those acks). Only if the node stays inactive
        # for the fallback timeout are they told "outcome unknown". A view change fails them
        # at once (the stream's MasterChanged).
        if self._abandon_timer is not None:
            self._abandon_timer.cancel()
            self._abandon_timer = None
        if not active:
            self._abandon_timer = asyncio.get_running_loop().call_later(
                self.config.timing.leader_fallback, self._abandon_if_inactive)
        if self.on_serving is not None:
            self.on_serving(self.serving)

    def _abandon_if_inactive(self) -> None:
        self._abandon_timer = None
        if not self.membership.active:
            self.stream.abandon(f"{self.name} stopped being the active master before the ack policy was met")

    def _on_serving(self, on: bool, epoch: int) -> None:
        self._policies.clear()
        if on:
            self.membership.open_gate(REPLICATION_GATE, epoch)
        if self.on_serving is not None:
            self.on_serving(self.serving)

    def _on_storage(self, storage: Storage) -> None:
        self._policies.clear()
        if self.on_storage is not None:
            self.on_storage(storage)

    def _on_note(self, event: str, fields: dict) -> None:
        now = time.time()
        if event == "transfer-finished":
            self._last_transfer_at = now
        if self.history is not None:
            # started_ms is the monotonic clock's: meaningless to a reader of another process
            self.history.write(event.replace("-", "_"), now, **{k: v for k, v in fields.items() if k != "started_ms"})

