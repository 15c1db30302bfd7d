"""Reply: an HTTP response that arrives later, handed over by callback instead of a Task.

A replicated write is answered when its batch is acknowledged, from inside the stream's ack
handler. Through a Future awaited by a coroutine in a Task, that answer took three more turns of
the event loop (the future's callbacks, the task's step, the task's done-callbacks), each one
scheduled with ``call_soon``; on a busy master the Task, the coroutine and those turns were a
sixth of its CPU per request (py-spy, 16 connections). A Reply is a one-shot slot: the backend's
callback fills it and the consumer (the HTTP connection, or the forwarder answering another
member) writes the response in the same turn.

Only a receive that long-polls after its first, empty answer continues as a Task (``follow``).
Nothing here is thread-safe: it lives on the loop of the connection that made it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from elasticmq_py.protocol.wire import HttpResponse

log = logging.getLogger(__name__)


class Reply:
    __slots__ = ("response", "_then", "_cancelled", "_task", "_on_error")

    def __init__(self) -> None:
        self.response: HttpResponse | None = None
        self._then: Callable[[HttpResponse], None] | None = None
        self._cancelled = False
        self._task: asyncio.Task | None = None
        self._on_error: Callable[[], HttpResponse] | None = None

    def set(self, response: HttpResponse) -> None:
        """The answer; the first one counts, and none after ``cancel``."""
        if self._cancelled or self.response is not None:
            return
        self.response = response
        then, self._then = self._then, None
        if then is not None:
            then(response)

    def then(self, fn: Callable[[HttpResponse], None]) -> None:
        """Call ``fn`` with the answer: now if it is there, else when it comes."""
        if self.response is not None:
            fn(self.response)
        elif not self._cancelled:
            self._then = fn

    def follow(self, work: Awaitable[HttpResponse], on_error: Callable[[], HttpResponse]) -> None:
        """Take the answer from ``work``, run as a Task (``on_error``: the answer if it raises)."""
        self._on_error = on_error
        self._task = asyncio.ensure_future(work)
        self._task.add_done_callback(self._followed)

    def cancel(self) -> None:
        """Nobody wants the answer any more (the connection closed): drop the callback, and let
        a long poll go of its waiter."""
        self._cancelled = True
        self._then = None
        if self._task is not None:
            self._task.cancel()

    def done(self) -> bool:
        return self.response is not None or self._cancelled

    def _followed(self, task: asyncio.Task) -> None:
        self._task = None
        if task.cancelled():
            return
        err = task.exception()
        if err is not None:
            log.error("unhandled error in a waiting request", exc_info=err)
            self.set(self._on_error())
            return
        self.set(task.result())
