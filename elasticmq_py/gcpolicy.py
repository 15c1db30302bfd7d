"""How a served node runs Python's cycle collector: short pauses, whatever the store holds.

Why. CPython's full (generation 2) collection walks every tracked object, and an in-memory
store of 1,000,000 messages is ~2,000,000 of them: one such collection measured 730 ms here,
holding the GIL throughout. The interpreter runs one whenever the old generation has grown by a
quarter, so a node filling a deep queue paused for the better part of a second every few seconds
(3.9 s of a 15 s fill of 1M messages). During a pause nothing else runs: not the event loop,
not pysyncobj's thread. A master's 150 ms lease lapsed (retryable 503s), and a joiner restoring
a big snapshot missed heartbeats, stood for election with a higher term and deposed a healthy
master (pysyncobj has no pre-vote). The store's own objects need no cycle collection: the
engine keeps them acyclic and reference counting frees them the moment they are deleted.

What. The interpreter's young collections (generations 0 and 1) stay automatic; they only walk
recent objects. The automatic full collection is switched off, and the event loop instead, once
per ``interval``: collects everything not frozen (the objects that survived since the last
turn: cheap, bounded by the allocation rate, not by the store) and then ``gc.freeze()``-s the
survivors, so that no later collection walks them again. Frozen objects are still freed by
reference counting; what freezing gives up is collecting a *cycle* that becomes garbage after
it was frozen (a keep-alive connection's objects, say). So once in ``reclaim_every``, if the
frozen set is small enough to walk within ``reclaim_below`` objects (a pause of a few tens of
milliseconds), everything is unfrozen and collected in full. While the store is bigger than
that, such cycles wait until it shrinks: a bounded leak traded for pauses that never lapse a
lease. Operators see all of it on /metrics (``elasticmq_gc_*``).

The decisions are a small sans-I/O core (``GcCore``) so that they are tested without touching
the interpreter's collector; ``GcPolicy`` binds it to ``gc`` and an event loop. Only processes
we own install it (``elasticmq-py serve``/``local-cluster``, config key ``gc``); an embedded
``Server`` never changes its host program's collector.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from dataclasses import dataclass
from typing import Callable

log = logging.getLogger(__name__)

# gc's third threshold counts generation-1 collections between full ones: this many never comes.
_NEVER = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GcSettings:
    interval: float = 1.0             # seconds between collect-and-freeze turns
    reclaim_every: float = 60.0       # at most this often, a full collection of everything...
    reclaim_below: int = 100_000      # ...when at most this many objects are frozen


@dataclass(frozen=True, slots=True)
class CollectYoung:
    """Collect what is not frozen, then freeze the survivors."""


@dataclass(frozen=True, slots=True)
class Reclaim:
    """Unfreeze everything, collect in full, freeze the survivors."""


class GcCore:
    """When to collect what. Fed the clock, and the frozen count on demand (counting walks every
    frozen object: ~26 ms for 2,000,000 on a quiet machine, so it is asked at most once per
    ``reclaim_every``); returns one action per turn."""

    def __init__(self, settings: GcSettings, now: float):
        self.settings = settings
        self._next_check = now + settings.reclaim_every
        self.skipped = 0   # reclaims not done because too many objects were frozen
        self.frozen: int | None = None   # as last counted

    def turn(self, now: float, frozen: Callable[[], int]) -> CollectYoung | Reclaim:
        s = self.settings
        if now < self._next_check:
            return CollectYoung()
        self._next_check = now + s.reclaim_every
        self.frozen = frozen()
        if self.frozen > s.reclaim_below:
            self.skipped += 1
            return CollectYoung()
        return Reclaim()


@dataclass
class GcStats:
    turns: int = 0
    reclaims: int = 0
    collected: int = 0             # objects the policy's collections found unreachable
    pause_max_s: float = 0.0       # the longest of the policy's own collections
    pause_total_s: float = 0.0
    frozen: int = 0                # objects in the permanent generation, as last counted


class GcPolicy:
    def __init__(self, settings: GcSettings = GcSettings(), clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self._core = GcCore(settings, clock())
        self.stats = GcStats()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._saved: tuple[int, int, int] | None = None

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> "GcPolicy":
        """Take over the full collections in this process (call from the loop's thread)."""
        global _installed
        self._loop = loop or asyncio.get_running_loop()
        # Whatever exists now (modules, the server's structures) is long-lived: walk it once.
        gc.collect()
        gc.freeze()
        self._saved = gc.get_threshold()
        t0, t1, _ = self._saved
        gc.set_threshold(t0, t1, _NEVER)
        self.stats.frozen = gc.get_freeze_count()
        self._schedule()
        _installed = self
        log.info("managed gc: young collections automatic, a collect-and-freeze turn every %.1f s, "
                 "full collections only under %d frozen objects", self.settings.interval,
                 self.settings.reclaim_below)
        return self

    def uninstall(self) -> None:
        """Give the collector back its defaults (for tests: a served node keeps it to the end)."""
        global _installed
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
            gc.unfreeze()
        if _installed is self:
            _installed = None

    def _schedule(self) -> None:
        assert self._loop is not None
        self._handle = self._loop.call_later(self.settings.interval, self._turn)

    def _turn(self) -> None:
        try:
            self.run_turn()
        except Exception:   # noqa: BLE001 - a failed turn must not end the turns
            log.exception("gc turn failed")
        finally:
            if self._saved is not None:
                self._schedule()

    def run_turn(self) -> None:
        s = self.stats
        action = self._core.turn(self._clock(), gc.get_freeze_count)
        t = time.perf_counter()
        if type(action) is Reclaim:
            gc.unfreeze()
            s.reclaims += 1
        s.collected += gc.collect()
        gc.freeze()
        pause = time.perf_counter() - t
        s.turns += 1
        s.pause_total_s += pause
        s.pause_max_s = max(s.pause_max_s, pause)
        if type(action) is Reclaim:
            s.frozen = gc.get_freeze_count()   # small: a reclaim was allowed
        elif self._core.frozen is not None:
            s.frozen = self._core.frozen

    @property
    def reclaims_skipped(self) -> int:
        return self._core.skipped


_installed: GcPolicy | None = None


def installed() -> GcPolicy | None:
    """The policy running in this process, if any (for /metrics)."""
    return _installed
