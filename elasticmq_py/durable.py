"""A single node whose queues and messages survive a restart: `serve --data-dir DIR`.

The in-memory LocalBackend with the journal in between: the standalone core
(cluster/standalone.py) decides; this binds it to the loop and the journal's writer thread
(cluster/journaling.py). A command is answered once its change is as durable as the fsync
policy says; a failed journal answers "not stored" (a retryable 503) and the node stores
nothing more until restarted.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from storage.commands import Command
from storage.errors import SqsError
from storage.limits import STRICT, Limits

from cluster.compaction import Snapshot
from cluster.config import Durability
from cluster.journaling import JournalBinding, journal_status, open_journal
from cluster.node_actions import Answer, FlushDue, Persist, Warn
from cluster.standalone import StandaloneCore
from cluster.status import NodeStatus, journal_info

from elasticmq_py.backend import Done, LocalBackend, ServeForwarded, cancel_and_wait
from elasticmq_py.clustered import client_error
from storage import Storage

log = logging.getLogger(__name__)

LOG_LIMIT_BYTES = 1 << 20      # a single node re-sends nothing: its log only numbers the entries


class DurableBackend(LocalBackend):
    def __init__(self, clock, durability: Durability, limits: Limits = STRICT, ids=None, node_name: str = "local"):
        super().__init__(clock, limits, ids, node_name)
        self.durability = durability
        journal, self.recovered = open_journal(durability, lambda: Storage(clock=clock, ids=ids, limits=limits),
                                               LOG_LIMIT_BYTES)
        self._journal = journal
        self.storage = self.recovered.storage
        self.core = StandaloneCore(self.storage, self.recovered.log,
                                   snapshot_min_bytes=durability.snapshot_min_mb * 1024 * 1024,
                                   gather_ms=durability.gather_ms)
        self._binding: JournalBinding | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the interface -----------------------------------------------------------------------

    def execute(self, command: Command, done: Done) -> None:
        self._act(self.core.execute(done, command, self.clock.now_ms()))

    @staticmethod
    def _answer(a: Answer) -> None:
        # "not stored" and "journal failed" are the retryable 503 a cluster member answers
        a.token(a.result, None if a.error is None else client_error(a.error))

    def execute_now(self, command: Command) -> Any:
        raise RuntimeError("a journaled node answers once its journal holds the change: use execute")

    def journal_stats(self) -> dict[str, Any] | None:
        if self._binding is None:
            return None
        return journal_status(self._binding, self.recovered)

    def status(self, digest: bool = False) -> NodeStatus:
        return replace(super().status(digest), journal=journal_info(self.journal_stats()))

    async def start(self, serve_forwarded: ServeForwarded | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._binding = JournalBinding(self._journal, self.durability, self._loop,
                                       self._persisted, self._failed)
        await super().start(serve_forwarded)

    async def stop(self) -> None:
        await cancel_and_wait(self._tick_task)
        self._tick_task = None
        self._act(self.core.flush(self.clock.now_ms(), force=True))   # a gather would hold it for ever
        if self._binding is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._binding.close)
            await asyncio.sleep(0)     # the last durability reports answer their clients
            self._binding = None
        else:
            self._journal.close()

    # -- internals ---------------------------------------------------------------------------

    def _act(self, actions: list[Any]) -> None:
        for a in actions:
            t = type(a)
            try:
                if t is Answer:
                    self._answer(a)
                    if a.changed and a.error is None and self.waiters:
                        # as a cluster member does: which queue changed is not worth tracking
                        # here; a spurious wake-up costs the waiter one more receive
                        self.waiters.wake_everyone()
                elif t is FlushDue:
                    assert self._loop is not None
                    if a.at is None:
                        self._loop.call_soon(self._flush)
                    else:
                        self._loop.call_later(max(0.0, a.at - self.clock.now_ms() / 1000), self._flush_timed,
                                              a.at * 1000)
                elif t is Persist or t is Snapshot:
                    if self._binding is not None:
                        self._binding.do(a)
                elif t is Warn:
                    log.warning("%s", a.text)
            except Exception:
                log.exception("durable node: action %s failed", t.__name__)

    def _flush(self) -> None:
        self._act(self.core.flush(self.clock.now_ms()))

    def _flush_timed(self, at_ms: float) -> None:
        self._act(self.core.flush(self.clock.now_ms(), timer_ms=at_ms))

    def _persisted(self, token: int) -> None:
        # = _act(core.persisted(token)), without building an Answer per operation
        woke = False
        for done, result, changed in self.core.settled(token, self.clock.now_ms()):
            try:
                if isinstance(result, SqsError):   # failed after changing the state: the change is stored
                    done(None, client_error(result))
                    continue
                done(result, None)
                if changed and not woke and self.waiters:
                    woke = True
                    self.waiters.wake_everyone()
            except Exception:
                log.exception("durable node: answering failed")

    def _failed(self, reason: str) -> None:
        self._act(self.core.journal_failed(reason))

    async def _tick_loop(self) -> None:
        while True:
            try:
                self._act(self.core.tick(self.clock.now_ms()))
                busy = self.core.tick_busy
            except Exception:
                log.exception("storage tick failed")
                busy = False
            await asyncio.sleep(0 if busy else self.TICK_INTERVAL_S)
