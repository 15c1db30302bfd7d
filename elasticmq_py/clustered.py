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

With ``[cluster] groups`` >= 2 every queue lives in one replication group with a master of its
own: the endpoint asks ``request_group`` (the node core's rule) which group runs the request and
routes, executes and forwards in that group (``route(group)``, ``execute(command, done, group)``,
``forward(req, done, group)``); a CreateQueue of a new name first waits for ``place``. A command
that comes without a group (a long poll's next receive, the console's actions) runs in the group
the same rule names for its queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Sequence

from storage import Storage
from storage.commands import Command, QueueKey, Tick
from storage.errors import REQUEST_THROTTLED, SERVICE_UNAVAILABLE, SqsError
from storage.keys import command_key
from storage.limits import STRICT, Limits

from cluster.config import NodeConfig, NodeSpec
from cluster.errors import NotServing, OutcomeUnknown, Throttled
from cluster.journaling import DataDirError
from cluster.history import HistoryWriter
from cluster.node_actions import LOCAL, Route
from cluster.replicated import ForwardError as StreamForwardError
from cluster.replicated import ReplicatedStorage
from cluster.runtime import BindError
from cluster.status import NodeStatus

from elasticmq_py.backend import Done, ServeForwarded, run
from elasticmq_py.forwarding import ForwardError, decode_request, decode_response, encode_request, encode_response
from elasticmq_py.health import Health, Role, from_route, from_routes
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
        self.groups = node_config.cluster.groups
        if self.groups > 1:
            self.execute = self._execute_in_group   # type: ignore[method-assign]

    # -- the Backend interface ---------------------------------------------------------------

    def route(self) -> Route:   # replaced by the storage's own in __init__
        return self.replicated.route()

    def execute(self, command: Command, done: Done) -> None:
        # errors reach ``done`` as SQS errors already (``client_error``, given to the storage)
        self.replicated.execute(command, self._recorded(command, done))

    def _execute_in_group(self, command: Command, done: Done, group: int | None = None) -> None:
        """``execute`` with several groups: in ``group``, or else in the group of the command's queue."""
        if group is None:
            group = self.request_group(command_key(command))
        self.replicated.execute(command, self._recorded(command, done, group), group)

    def _recorded(self, command: Command, done: Done, group: int | None = None) -> Done:
        """``done``, writing the history's `op` line first where there is a history."""
        if self._history is None or type(command) is Tick:
            return done
        started = time.time()

        def finish(result: Any, err: BaseException | None) -> None:
            self._record_op(command, started, err, group)
            done(result, err)
        return finish

    def request_group(self, key: Any, creates: bool = False) -> int | None:
        """The group that runs a request on the queue ``key`` (a ``QueueKey`` or (region, account,
        name); None: no queue): the node core's rule (``NodeCore.request_group``). None for a
        CreateQueue (``creates``) of a name no group holds yet: ``place`` it first."""
        return self.replicated.request_group(_plain_key(key) if key is not None else None, creates)

    def place(self, key: Any, done: Callable[[int | None], None]) -> None:
        """Have the queue ``key`` placed in a group: ``done(group)``, or ``done(None)`` when Raft
        did not commit a placement in time (the CreateQueue gets a retryable 503)."""
        self.replicated.place(_plain_key(key), done)

    def forward(self, req: HttpRequest, done: Callable[[HttpResponse | None, BaseException | None], None],
                group: int = 0) -> None:
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
        self.replicated.forward(encode_request(req), answered, group)

    @property
    def history(self) -> HistoryWriter | None:
        """This member's history log ([cluster] history), which the console audits to as well."""
        return self._history

    @property
    def storage(self) -> Storage:
        """The state this node holds now (a state transfer replaces it)."""
        return self.replicated.storage

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        await wait_for_messages(self.waiters, self.replicated.storage_of(_plain_key(queue)), queue, deadline_ms)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def status(self, digest: bool = False) -> NodeStatus:
        return self.replicated.status(digest=digest)

    def journal_stats(self) -> dict | None:
        return self.replicated.journal_stats()

    def health(self, role: Role) -> Health:
        r = self.replicated
        mismatch = r.core.membership.groups_mismatch
        if self.groups == 1 and mismatch is None:
            return from_route(self.name, r.route(), role, r.master_name(), r.unavailable_reason())
        masters = [g.mastery.master if g.mastery is not None else r.master_name() for g in r.core.groups]
        return from_routes(self.name, [r.route(g) for g in range(self.groups)], role, masters, mismatch)

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        if self.groups == 1:
            return self.replicated.storage.queue_stats()
        stats: dict[QueueKey, tuple[int, int, int]] = {}
        for g in self.replicated.core.groups:
            stats.update(g.storage.queue_stats())
        return stats

    def waiting_receives(self) -> int:
        return self.waiters.count()

    async def start(self, serve_forwarded: ServeForwarded | None = None) -> None:
        def serve(payload: Any, reply: Callable[[Any], None], *group: int) -> None:
            # (``group``: with several groups, the one the forwarder routed the request to)
            try:
                req = decode_request(payload)
            except ForwardError as e:
                log.warning("forwarding: refused a request: %s", e)
                return
            if serve_forwarded is not None:
                serve_forwarded(req, lambda resp: reply(encode_response(resp)), *group)
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

    async def step_down(self, to: str | None = None, group: int | None = None) -> bool:
        return await self.replicated.step_down(to=to, group=group)

    async def add_member(self, spec: NodeSpec) -> None:
        await self.replicated.add_member(spec)

    async def remove_member(self, name: str) -> None:
        await self.replicated.remove_member(name)

    # -- internals -------------------------------------------------------------------------------

    def _record_op(self, command: Command, started: float, err: BaseException | None,
                   group: int | None = None) -> None:
        """The history's `op` line: what this node did for a client, and how it ended; with
        several groups it names the group that ran it, as the checker's gating judges per group."""
        queue = getattr(command, "queue", None)
        fields: dict[str, Any] = {"action": type(command).__name__, "queue": queue.name if queue is not None else None}
        if err is None:
            outcome = "ok"
        elif isinstance(err, SqsError):
            outcome = "unknown" if isinstance(err, UnknownOutcome) else "failed"
            fields["error"] = err.code
        else:
            outcome, fields["error"] = "failed", type(err).__name__
        if group is not None:
            fields["group"] = group
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
            if self.groups > 1:
                # Placed first, like a client's CreateQueue, and created by its group's master:
                # every group master places each configured queue when it starts serving, and
                # all of them learn the same group, so exactly that group's master creates it.
                group = await self._placement(command)
                if group is None or self.replicated.route(group) is not LOCAL:
                    continue
            try:
                await run(self, command)
            except SqsError as e:
                if e.kind is SERVICE_UNAVAILABLE:
                    if self.groups > 1:
                        continue   # that group's master creates it when it serves
                    return  # no longer the master; the next one runs them
                log.error("configured %s failed on the new master: %s: %s", type(command).__name__, e.code, e.message)

    def _placement(self, command: Command) -> "asyncio.Future[int | None]":
        fut = asyncio.get_running_loop().create_future()
        key = command_key(command)
        self.place(key, lambda group: fut.done() or fut.set_result(group))
        return fut

    def _on_storage(self, storage: Storage) -> None:
        self.waiters.wake_everyone()


def _plain_key(key: Any) -> tuple[str, str, str]:
    """A queue key as the directory holds it (cluster/directory.py: builtins, for Raft)."""
    return key if type(key) is tuple else (key.region, key.account, key.name)
