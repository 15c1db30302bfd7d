"""The server as a cluster member: a ``Backend`` over cluster/'s ReplicatedStorage.

Every decision (who answers, forwards or refuses; when an operation is done) is the node core's
(cluster/node_core.py). This backend turns its outcomes into what SQS clients expect:

* on the active master, commands run on the local storage and are answered once their ack policy
  is met;
* ``NotServing`` (nothing was executed) and ``OutcomeUnknown`` (executed, may or may not survive)
  become SQS's retryable ``ServiceUnavailable`` (503), ``Throttled`` its ``RequestThrottled``;
* requests the core forwards travel as bytes (forwarding.py), and so do the answers;
* a receive that long-polls waits here, on the master, and is woken by the changes the master
  makes; a parked long poll on a node that stops serving is woken at once and answered with 503;
* the configured queues are created by each new master through the replicated path, so every
  member holds the same queues (the same ids, hence the same digest). Creating an existing
  queue with the same attributes is a no-op, as in SQS.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Sequence

from storage import Storage
from storage.commands import Command, QueueKey, Tick
from storage.errors import REQUEST_THROTTLED, SERVICE_UNAVAILABLE, SqsError
from storage.limits import STRICT, Limits

from cluster.config import NodeConfig, NodeSpec
from cluster.errors import NotServing, OutcomeUnknown, Throttled
from cluster.journaling import DataDirError
from cluster.history import HistoryWriter
from cluster.node_actions import Route
from cluster.replicated import ForwardError as StreamForwardError
from cluster.replicated import ReplicatedStorage
from cluster.runtime import BindError
from cluster.status import NodeStatus

from elasticmq_py.backend import Done, ServeForwarded, run
from elasticmq_py.forwarding import ForwardError, decode_request, decode_response, encode_request, encode_response
from elasticmq_py.health import Health, Role, from_route
from elasticmq_py.longpoll import Waiters, wait_for_messages
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse

log = logging.getLogger(__name__)


class UnknownOutcome(SqsError):
    """A retryable 503 for an operation that was executed and may or may not survive."""


class ClusterStartError(RuntimeError):
    """The cluster member could not start (its Raft or stream address is taken, for instance)."""


def client_error(err: BaseException) -> BaseException:
    """A core's error as the SQS error its client gets."""
    if isinstance(err, NotServing):
        return SERVICE_UNAVAILABLE(f"{err} The request was not executed; retry.")
    if isinstance(err, Throttled):
        return REQUEST_THROTTLED(f"Request is throttled: {err}.")
    if isinstance(err, OutcomeUnknown):
        return UnknownOutcome(SERVICE_UNAVAILABLE,
                              f"The outcome of the request is unknown: {err}. It may or may not have taken effect; retry.")
    return err


class ClusterBackend:
    """A ``Backend`` that serves from the replicated storage while this node is the active master."""

    def __init__(self, node_config: NodeConfig, clock: Any, limits: Limits = STRICT,
                 on_master: Sequence[Command] = ()) -> None:
        self.node_config = node_config
        self.clock = clock
        self.waiters = Waiters()        # long polls parked on this node
        self.name = node_config.self_name
        self.on_master = tuple(on_master)   # run by each new master (the configured queues)
        self._history_flush = False   # a flush of the buffered op lines is scheduled
        try:
            self._history = HistoryWriter(node_config.history_path, self.name) if node_config.history_path else None
            self.replicated = ReplicatedStorage(node_config, clock, limits, history=self._history,
                                                on_serving=self._on_serving, on_storage=self._on_storage,
                                                on_changed=self._wake, client_error=client_error)
        except (OSError, ValueError, DataDirError) as e:
            raise ClusterStartError(f"node {self.name}: cannot start the cluster member: {e}") from None
        self.route = self.replicated.route   # asked once per request: no call of our own between

    # -- the Backend interface ---------------------------------------------------------------

    def route(self) -> Route:   # replaced by the storage's own in __init__
        return self.replicated.route()

    def execute(self, command: Command, done: Done) -> None:
        # errors reach ``done`` as SQS errors already (``client_error``, given to the storage)
        if self._history is not None and type(command) is not Tick:
            started = time.time()

            def finish(result: Any, err: BaseException | None) -> None:
                self._record_op(command, started, err)
                done(result, err)
            self.replicated.execute(command, finish)
        else:
            self.replicated.execute(command, done)

    def forward(self, req: HttpRequest, done: Callable[[HttpResponse | None, BaseException | None], None]) -> None:
        def answered(payload: Any, err: BaseException | None) -> None:
            if err is None:
                try:
                    done(decode_response(payload), None)
                    return
                except ForwardError as e:
                    log.warning("forwarding: %s", e)
                    err = StreamForwardError(str(e), sent=True)
            sent = isinstance(err, StreamForwardError) and err.sent
            done(None, SERVICE_UNAVAILABLE(
                f"{err}; the request {'may or may not have been executed' if sent else 'was not executed'}; retry."))
        self.replicated.forward(encode_request(req), answered)

    @property
    def history(self) -> HistoryWriter | None:
        """This member's history log ([cluster] history), which the console audits to as well."""
        return self._history

    @property
    def storage(self) -> Storage:
        """The state this node holds now (a state transfer replaces it)."""
        return self.replicated.storage

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        await wait_for_messages(self.waiters, self.replicated.storage, queue, deadline_ms)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def status(self, digest: bool = False) -> NodeStatus:
        return self.replicated.status(digest=digest)

    def journal_stats(self) -> dict | None:
        return self.replicated.journal_stats()

    def health(self, role: Role) -> Health:
        r = self.replicated
        return from_route(self.name, r.route(), role, r.master_name(), r.unavailable_reason())

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        return self.replicated.storage.queue_stats()

    def waiting_receives(self) -> int:
        return self.waiters.count()

    async def start(self, serve_forwarded: ServeForwarded | None = None) -> None:
        def serve(payload: Any, reply: Callable[[Any], None]) -> None:
            try:
                req = decode_request(payload)
            except ForwardError as e:
                log.warning("forwarding: refused a request: %s", e)
                return
            if serve_forwarded is not None:
                serve_forwarded(req, lambda resp: reply(encode_response(resp)))
        try:
            await self.replicated.start(serve_forwarded=serve)
        except (BindError, OSError, ValueError) as e:
            if self._history is not None:
                self._history.close()
            raise ClusterStartError(f"node {self.name}: cannot start the cluster member: {e}") from None

    async def stop(self) -> None:
        await self.replicated.stop()
        self.waiters.wake_everyone()

    # -- operator actions (the admin routes) ---------------------------------------------------

    async def step_down(self, to: str | None = None) -> bool:
        return await self.replicated.step_down(to=to)

    async def add_member(self, spec: NodeSpec) -> None:
        await self.replicated.add_member(spec)

    async def remove_member(self, name: str) -> None:
        await self.replicated.remove_member(name)

    # -- internals -------------------------------------------------------------------------------

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
                asyncio.get_running_loop().call_soon(self._flush_history)

    def _flush_history(self) -> None:
        self._history_flush = False
        if self._history is not None:
            self._history.flush()

    def _wake(self) -> None:
        # Long polls re-check on any completed change. Cheap when nobody waits (the common case
        # under load); a spurious wake-up only costs the waiter one more receive.
        if self.waiters:
            self.waiters.wake_everyone()

    def _on_serving(self, serving: bool) -> None:
        # Parked receives re-check: on a former master they get the 503, on a new one messages.
        self.waiters.wake_everyone()
        if serving and self.on_master:
            asyncio.get_running_loop().create_task(self._run_on_master())

    async def _run_on_master(self) -> None:
        for command in self.on_master:
            try:
                await run(self, command)
            except SqsError as e:
                if e.kind is SERVICE_UNAVAILABLE:
                    return  # no longer the master; the next one runs them
                log.error("configured %s failed on the new master: %s: %s", type(command).__name__, e.code, e.message)

    def _on_storage(self, storage: Storage) -> None:
        self.waiters.wake_everyone()
