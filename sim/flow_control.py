"""Throttling, judged as it happens: a master slows producers while a reachable replica lags.

The master counts a replica's lag in two ways (cluster/replication/master.py, ``Limits``): in
batches (its log's end minus the replica's ack) and in time (the age of the oldest entry the
replica has not acked). Only a replica the master counts is judged: connected, caught up at
least once since it was positioned, and awaiting no transfer (a joiner is expected to be far
behind, and an unreachable replica must slow nobody). With B and M the bounds:

* **Engage.** After each of the master's core ticks (a decision point, every ``CORE_TICK_US``),
  a counted replica beyond B batches or M ms finds the master throttling. The slack the design
  gives is the time from the bound's crossing to the next decision point: one tick at most.
* **Release by hysteresis.** A master releases only once every counted replica is within half
  of both bounds: a release beyond that fails, unless the node is no master any more (it then
  answers nobody). A throttle held through two ticks with every counted replica within half
  fails too (the release was due at the first).
* **Refuse.** A throttled master answers producers with the retryable throttling error and
  executes none: the checker's flow-control rule (cluster/checker/node_rules.py).

The lag is the judge's own, read from the master's log and its replicas' acks, not the master's
arithmetic: a lag computed in the wrong unit is what it must catch. The judge looks after a
whole turn, and a turn may cut a batch after its flow-control decision (a tick's flush): the
entries cut in that very millisecond are left out of the batch count where they would count
against the master (engage, release), and counted where they would count for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

MAX_REPORTED = 5


@dataclass(frozen=True, slots=True)
class Lag:
    replica: str
    batches: int      # the log's end minus the replica's ack
    fresh: int        # of those, the entries cut in this millisecond
    ms: int           # the age of the oldest entry it has not acked (0: none, or trimmed)


def counted(node: Any, now_s: float, group: int = 0) -> list[Lag] | None:
    """The lag of every replica ``node`` (a SimNode) counts as master of ``group``, as its core's
    clock reads now (whole milliseconds); None if it is not that group's master."""
    master = node.core.groups[group].replication.master_core
    if master is None:
        return None
    now_ms = int(now_s * 1000)
    log = master.log
    last = log.last_seq
    fresh = 0
    while fresh < len(log) and log.since(last - fresh, 1)[0].created_ms >= now_ms:
        fresh += 1
    out = []
    for r in master.replicas.values():
        if r.connected and r.caught_up and not r.needs_transfer:
            held = log.since(r.acked + 1, 1)
            out.append(Lag(r.name, last - r.acked, fresh, now_ms - held[0].created_ms if held else 0))
    return out


class FlowControlCheck:
    def __init__(self, batches_bound: int, ms_bound: int) -> None:
        self.batches = batches_bound
        self.ms = ms_bound
        self._failures: list[str] = []
        self._more = 0
        self.ticks_judged = 0
        self.over_ms = 0          # ticks judged with a replica beyond the time bound
        self.over_batches = 0     # ... beyond the batch bound
        self._calm: set[str] = set()   # throttling masters with every replica within half at their last tick

    def _beyond(self, lag: Lag, fresh_excused: bool, half: bool = False) -> str | None:
        """Why ``lag`` is beyond a bound (``half``: half a bound), or None."""
        b = lag.batches - lag.fresh if fresh_excused else lag.batches
        bound_b, bound_ms = (self.batches // 2, self.ms // 2) if half else (self.batches, self.ms)
        what = "half the bound is" if half else "bound"
        if b > bound_b:
            return f"{lag.replica} lags {b} batches ({what} {bound_b})"
        if lag.ms > bound_ms:
            return f"{lag.replica} lags {lag.ms} ms ({what} {bound_ms})"
        return None

    def ticked(self, node: str, at: float, throttling: bool, replicas: Iterable[Lag] | None) -> None:
        """``node`` has run a core tick; ``replicas``: the lags it counts as master (None: not one)."""
        if replicas is None:
            self._calm.discard(node)
            if throttling:
                self._fail(f"{node} throttles producers at {at:.6f} s without being the master")
            return
        replicas = list(replicas)
        self.ticks_judged += 1
        over = [why for x in replicas if (why := self._beyond(x, True))]
        if any(x.ms > self.ms for x in replicas):
            self.over_ms += 1
        if any(x.batches - x.fresh > self.batches for x in replicas):
            self.over_batches += 1
        if over and not throttling:
            self._fail(f"{node} does not throttle producers at {at:.6f} s while {over[0]}")
        calm = throttling and not any(self._beyond(x, False, half=True) for x in replicas)
        if calm and node in self._calm:
            self._fail(f"{node} still throttles producers at {at:.6f} s with every replica within half "
                       f"the bounds since its last tick")
        if calm:
            self._calm.add(node)
        else:
            self._calm.discard(node)

    def released(self, node: str, at: float, replicas: Iterable[Lag] | None) -> None:
        """``node`` stopped throttling; ``replicas`` as for ``ticked``."""
        if replicas is None:
            return      # it is no master now: it answers nobody
        over = [why for x in replicas if (why := self._beyond(x, True, half=True))]
        if over:
            self._fail(f"{node} stopped throttling producers at {at:.6f} s while {over[0]}")

    @property
    def failures(self) -> list[str]:
        return self._failures + ([f"throttling: {self._more} more"] if self._more else [])

    def _fail(self, what: str) -> None:
        if len(self._failures) < MAX_REPORTED:
            self._failures.append(f"throttling: {what}")
        else:
            self._more += 1
