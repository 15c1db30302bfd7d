"""Reply: the one-shot slot for a request's HTTP response, handed down to whoever answers it.

The HTTP connection (or the master answering another member's forwarded request) makes one per
request and passes it down: ``Endpoint.handle(request, reply)``. Whoever has the answer calls
``set``, at once (a single node, a refusal) or later (a replicated write, from inside the
stream's ack handler, in the same turn of the loop). One kind of thing goes down and the answer
comes back through it, so no layer branches on whether it got a response, a future or a task.

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
    __slots__ = ("_on_answer", "_answered", "_cancelled", "_task", "_on_error")

    def __init__(self, on_answer: Callable[[HttpResponse], None]) -> None:
        self._on_answer = on_answer
        self._answered = False
        self._cancelled = False
        self._task: asyncio.Task | None = None
        self._on_error: Callable[[], HttpResponse] | None = None

    def set(self, response: HttpResponse) -> None:
        """The answer; the first one counts, and none after ``cancel``."""
        if self._answered or self._cancelled:
            return
        self._answered = True
        self._on_answer(response)

    def follow(self, work: Awaitable[HttpResponse], on_error: Callable[[], HttpResponse]) -> None:
        """Take the answer from ``work``, run as a Task (``on_error``: the answer if it raises)."""
        if self._cancelled:
            close = getattr(work, "close", None)
            if close is not None:
                close()
            return
        self._on_error = on_error
        self._task = asyncio.ensure_future(work)
        self._task.add_done_callback(self._followed)

    def cancel(self) -> None:
        """Nobody wants the answer any more (the connection closed): a long poll lets go of its
        waiter, and a later answer is dropped."""
        if self._answered or self._cancelled:
            return
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()

    def done(self) -> bool:
        return self._answered or self._cancelled

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
