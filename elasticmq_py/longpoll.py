"""Waiting receives: one future per waiting request, parked under its queue key.

A parked receive costs a future and at most one timer, no CPU. Producers wake as many waiters as
they made messages available (FIFO order, so the longest waiter goes first); a woken waiter
whose client has gone away passes its wake-up on, so no message is left unnoticed while others
sleep.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from storage import Storage
from storage.commands import QueueKey


class Waiters:
    def __init__(self) -> None:
        self._by_key: dict[QueueKey, OrderedDict[asyncio.Future, None]] = {}

    def park(self, key: QueueKey) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._by_key.setdefault(key, OrderedDict())[fut] = None
        return fut

    def unpark(self, key: QueueKey, fut: asyncio.Future, abandoned: bool = False) -> None:
        """Forget a waiter. ``abandoned``: its request was cancelled, so a wake-up it received
        will never turn into a receive and goes to the next waiter instead."""
        waiting = self._by_key.get(key)
        if waiting is not None:
            waiting.pop(fut, None)
            if not waiting:
                del self._by_key[key]
        if abandoned and fut.done() and not fut.cancelled() and fut.result():
            self.wake(key, 1)

    def wake(self, key: QueueKey, n: int = 1) -> int:
        waiting = self._by_key.get(key)
        woken = 0
        while waiting and woken < n:
            fut, _ = waiting.popitem(last=False)
            if not fut.done():
                fut.set_result(True)
                woken += 1
        if waiting is not None and not waiting:
            del self._by_key[key]
        return woken

    def wake_all(self, key: QueueKey) -> None:
        self.wake(key, 1 << 30)

    def wake_everyone(self) -> None:
        """Every parked receive re-checks now (e.g. this node just stopped serving)."""
        for key in list(self._by_key):
            self.wake_all(key)

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def count(self) -> int:
        return sum(len(w) for w in self._by_key.values())


async def wait_for_messages(waiters: Waiters, storage: Storage, queue: QueueKey, deadline_ms: int) -> None:
    """Return when a receive on ``queue`` may find something, or at ``deadline_ms``: a wake-up
    from a producer, or the storage's own next wake-up (a delayed message becoming visible, a
    visibility timeout running out), whichever comes first. Spurious returns are fine (the caller
    receives again); a missed one is not."""
    loop = asyncio.get_running_loop()
    fut = waiters.park(queue)
    now = storage.clock.now_ms()
    wake_at = deadline_ms
    nxt = storage.next_wakeup_ms(queue)
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
        waiters.unpark(queue, fut, abandoned)


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(False)
