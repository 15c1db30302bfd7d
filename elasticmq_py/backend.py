"""What the endpoint talks to: a small async interface over "the storage", local or replicated.

``execute`` returns an awaitable rather than being a coroutine function, so that a backend that
answers at once (the local one, always) can hand back a finished future: the HTTP layer then
responds without creating a task per request, which is most of the cost of a request here. A
replicated backend returns a future that completes when its ack policy is met.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from storage import Storage
from storage.commands import Command, QueueKey, Tick
from storage.limits import STRICT, Limits
from storage.mutations import MessageAdded, MessageChanged, MessageDeleted

from elasticmq_py.health import Health, Role, single_node
from elasticmq_py.longpoll import Waiters

log = logging.getLogger(__name__)


class Backend(Protocol):
    def execute(self, command: Command) -> "asyncio.Future[Any]":
        """A future of the command's result (already done when the answer is immediate); it
        raises ``SqsError`` for anything a client should see, e.g. ServiceUnavailable (503)
        on a node that cannot serve."""

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        """Return when a receive on ``queue`` may find something, or at ``deadline_ms``.
        Spurious returns are fine (the caller receives again); a missed one is not: a message
        made available after the caller's last empty receive must end the wait."""

    def now_ms(self) -> int: ...

    def health(self, role: Role) -> Health:
        """Whether this node serves clients (role ANY) or is the active master (MASTER)."""

    def cluster_status(self) -> dict: ...

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]: ...

    def waiting_receives(self) -> int: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class LocalBackend:
    """Storage in this process: the single-node server and the embedded API."""

    TICK_INTERVAL_S = 1.0

    def __init__(self, clock, limits: Limits = STRICT, ids=None, node_name: str = "local"):
        self.clock = clock
        self.storage = Storage(clock=clock, ids=ids, limits=limits)
        self.node_name = node_name
        self.waiters = Waiters()
        self._tick_task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the interface -----------------------------------------------------------------------

    def execute(self, command: Command) -> asyncio.Future:
        fut = (self._loop or asyncio.get_running_loop()).create_future()
        try:
            fut.set_result(self.execute_now(command))
        except Exception as e:  # SqsError, or a storage bug that the endpoint turns into a 500
            fut.set_exception(e)
        return fut

    def execute_now(self, command: Command) -> Any:
        result, mutations = self.storage.execute(command)
        if mutations:
            self._wake_for(mutations)
        return result

    async def wait_for_messages(self, queue: QueueKey, deadline_ms: int) -> None:
        loop = asyncio.get_running_loop()
        fut = self.waiters.park(queue)
        now = self.clock.now_ms()
        wake_at = deadline_ms
        nxt = self.storage.next_wakeup_ms(queue)
        if nxt is not None:
            wake_at = min(wake_at, max(nxt, now))
        timer = loop.call_later(max(0, wake_at - now) / 1000, _resolve, fut)
        abandoned = False
        try:
            await fut
        except asyncio.CancelledError:
            abandoned = True
            raise
        finally:
            timer.cancel()
            self.waiters.unpark(queue, fut, abandoned)

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def health(self, role: Role) -> Health:
        return single_node(self.node_name, role)

    def cluster_status(self) -> dict:
        return {
            "node": self.node_name,
            "role": "master",
            "active": True,
            "master": self.node_name,
            "view": None,
            "members": [self.node_name],
            "replication": {"enabled": False},
        }

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        return self.storage.queue_stats()

    def waiting_receives(self) -> int:
        return self.waiters.count()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
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


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
