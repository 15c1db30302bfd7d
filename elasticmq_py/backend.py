"""What the endpoint talks to: "the storage", local or replicated, behind one calling convention.

``execute(command, done)``: ``done(result, None)`` once the command's answer is final, or
``done(None, error)`` with the error a client should see (an ``SqsError``); at most once, maybe
before ``execute`` returns (a local backend always answers at once, which keeps the common path
free of futures and tasks). ``route()`` says whether this node answers a request itself, hands it
to the master (``forward``), or refuses it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Protocol

from storage import Storage
from storage.commands import Command, QueueKey, Tick
from storage.limits import STRICT, Limits
from storage.mutations import MessageAdded, MessageChanged, MessageDeleted

from cluster.node_actions import LOCAL, Route
from cluster.status import NodeStatus, ReplicationStatus

from elasticmq_py.health import Health, Role, single_node
from elasticmq_py.longpoll import Waiters, wait_for_messages
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

Done = Callable[[Any, BaseException | None], None]
ServeForwarded = Callable[[HttpRequest, Callable[[HttpResponse], None]], None]


class Backend(Protocol):
    def execute(self, command: Command, done: Done) -> None: ...

    def route(self) -> Route: ...

    def forward(self, req: HttpRequest, done: Callable[[HttpResponse | None, BaseException | None], None]) -> None:
        """Hand ``req`` to the master (``route`` said so): ``done(response, None)``, or
        ``done(None, error)`` with the SqsError to answer when no response came."""

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        """Return when a receive on ``queue`` may find something, or at ``deadline_ms``.
        Spurious returns are fine (the caller receives again); a missed one is not: a message
        made available after the caller's last empty receive must end the wait."""

    def now_ms(self) -> int: ...

    def status(self, digest: bool = False) -> NodeStatus: ...

    def health(self, role: Role) -> Health:
        """Whether this node serves clients (role ANY) or is the active master (MASTER)."""

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]: ...

    def waiting_receives(self) -> int: ...

    async def start(self, serve_forwarded: ServeForwarded | None = None) -> None:
        """``serve_forwarded(request, respond)`` answers requests other members hand us."""

    async def stop(self) -> None: ...


def run(backend: Backend, command: Command) -> "asyncio.Future[Any]":
    """``execute`` as a future, for the slow paths that await (long polls, start-up)."""
    fut = asyncio.get_running_loop().create_future()

    def done(result: Any, err: BaseException | None) -> None:
        if fut.done():
            return
        if err is None:
            fut.set_result(result)
        else:
            fut.set_exception(err)

    backend.execute(command, done)
    return fut


class LocalBackend:
    """Storage in this process: the single-node server and the embedded API."""

    TICK_INTERVAL_S = 1.0

    def __init__(self, clock, limits: Limits = STRICT, ids=None, node_name: str = "local"):
        self.clock = clock
        self.storage = Storage(clock=clock, ids=ids, limits=limits)
        self.node_name = node_name
        self.waiters = Waiters()
        self._tick_task: asyncio.Task | None = None

    # -- the interface -----------------------------------------------------------------------

    def execute(self, command: Command, done: Done) -> None:
        try:
            result, mutations = self.storage.execute(command)   # = execute_now, a call fewer
            if mutations and self.waiters._by_key:
                self._wake_for(mutations)
        except Exception as e:  # SqsError, or a storage bug that the endpoint turns into a 500
            done(None, e)
            return
        done(result, None)

    def execute_now(self, command: Command) -> Any:
        result, mutations = self.storage.execute(command)
        if mutations and self.waiters._by_key:   # = _wake_for's own check, without its call
            self._wake_for(mutations)
        return result

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        await wait_for_messages(self.waiters, self.storage, queue, deadline_ms)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def route(self) -> Route:
        return LOCAL

    def health(self, role: Role) -> Health:
        return single_node(self.node_name, role)

    def forward(self, req: HttpRequest, done: Callable[[HttpResponse | None, BaseException | None], None]) -> None:
        raise RuntimeError("a single node forwards nothing")   # route() never says ForwardTo

    def status(self, digest: bool = False) -> NodeStatus:
        return NodeStatus(node=self.node_name, role="master", active=True, master=self.node_name,
                          members=(self.node_name,), serving=True,
                          replication=ReplicationStatus(digest=self.storage.digest() if digest else None))

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        return self.storage.queue_stats()

    def waiting_receives(self) -> int:
        return self.waiters.count()

    async def start(self, serve_forwarded: ServeForwarded | None = None) -> None:
        self._tick_task = asyncio.create_task(self._tick_loop(), name="storage-tick")

    async def stop(self) -> None:
        await cancel_and_wait(self._tick_task)
        self._tick_task = None

    # -- internals ---------------------------------------------------------------------------

    def _wake_for(self, mutations) -> None:
        if not self.waiters:
            return  # the common case under load: nobody is long-polling
        now = None
        key_of = self.storage.key_of
        for m in mutations:
            t = type(m)
            if t is MessageAdded:
                key = key_of(m.qid)
                if key is not None:
                    # also for a delayed message: the woken waiter re-arms its timer for it
                    self.waiters.wake(key, 1)
            elif t is MessageChanged:
                if now is None:
                    now = self.clock.now_ms()
                key = key_of(m.qid)
                if key is not None and m.visible_ms <= now:
                    self.waiters.wake(key, 1)
            elif t is MessageDeleted:
                # in a FIFO queue a delete can unblock the rest of its message group
                key = key_of(m.qid)
                if key is not None and key.is_fifo:
                    self.waiters.wake(key, 1)

    async def _tick_loop(self) -> None:
        while True:
            try:
                result = self.execute_now(Tick())
                busy = result is not None and result.effects >= Tick().max_effects
            except Exception:
                log.exception("storage tick failed")
                busy = False
            await asyncio.sleep(0 if busy else self.TICK_INTERVAL_S)


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel a background loop and wait until it has stopped."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
