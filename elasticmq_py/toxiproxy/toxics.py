"""Toxics as pure state machines over chunks and time (sans-I/O).

One direction of one proxied connection is a :class:`Chain` of stages, one stage per toxic of
that direction, in the order the toxics were added (as in Toxiproxy, where a toxic is always
appended to the end of its direction's chain). The runtime feeds the chain what it reads from the
source socket (:meth:`Chain.push`) and writes what :meth:`Chain.pull` returns to the destination
socket; ``pull`` also returns the next instant at which the chain wants to be pulled again. Time
is a float (seconds, the event loop's monotonic clock) passed in by the caller, so the whole
module is deterministic under a given ``random.Random`` and testable without sockets.

Events flowing through a chain:

* :class:`Data` -- bytes plus the instant they were read by the proxy;
* :data:`CLOSE` -- the end of the stream; at the chain's output the runtime closes the
  connection (both sockets, as Toxiproxy does);
* :data:`RESET` -- an abortive close; at the chain's output the runtime resets both sockets
  (``SO_LINGER`` 0, so the kernel sends RST).

Semantics follow the Go server's toxics (``toxics/*.go`` in Shopify/toxiproxy); where this
module differs it says so next to the toxic.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable

UPSTREAM = "upstream"
DOWNSTREAM = "downstream"
STREAMS = (UPSTREAM, DOWNSTREAM)

# Bytes charged per queued event on top of its payload, so that many tiny chunks (a slicer with
# average_size 1) are accounted for too.
EVENT_OVERHEAD = 64


@dataclass(slots=True)
class Data:
    data: bytes
    ts: float  # when the proxy read it (or when a delaying toxic released it)


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


CLOSE = _Marker("CLOSE")
RESET = _Marker("RESET")
TERMINAL = (CLOSE, RESET)

Event = Any  # Data | CLOSE | RESET


def _size(ev: Event) -> int:
    return (len(ev.data) if isinstance(ev, Data) else 0) + EVENT_OVERHEAD


class BadAttribute(ValueError):
    """An attribute has the wrong JSON type (the Go server answers 400 bad request body)."""


# ---------------------------------------------------------------------------------------------
# Toxic types: their attributes (names, defaults) as the Go structs marshal them.

TOXIC_ATTRIBUTES: dict[str, dict[str, int]] = {
    "latency": {"latency": 0, "jitter": 0},
    "bandwidth": {"rate": 0},
    "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0},
    "slicer": {"average_size": 0, "size_variation": 0, "delay": 0},
    "limit_data": {"bytes": 0},
    "slow_close": {"delay": 0},
}


def parse_attributes(toxic_type: str, raw: Any, base: dict[str, int] | None = None) -> dict[str, int]:
    """Validate attributes like Go's json.Decode into the toxic's struct: unknown keys are ignored,
    every known key must be an integer (a JSON number without a fraction). Missing keys keep
    ``base`` (an update) or the type's zero value (a create)."""
    if toxic_type not in TOXIC_ATTRIBUTES:
        raise KeyError(toxic_type)
    out = dict(base if base is not None else TOXIC_ATTRIBUTES[toxic_type])
    if raw is None:
        return out
    if not isinstance(raw, dict):
        raise BadAttribute(f"json: cannot unmarshal {json_kind(raw)} into Go struct field "
                              f"ToxicWrapper.attributes of type toxics.{toxic_type}")
    for key, value in raw.items():
        if key not in out:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise BadAttribute(f"json: cannot unmarshal {json_kind(value)} into Go struct field "
                                  f".attributes.{key} of type int64")
        out[key] = int(value)
    return out


def json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


# ---------------------------------------------------------------------------------------------
# Stages


class Stage:
    """One toxic on one direction of one connection.

    ``push`` accepts an event from the previous stage; ``pull(now)`` returns the events ready to
    go to the next stage and the next instant at which the stage has something to do (None:
    nothing until more input). ``held`` is the number of bytes (plus per-event overhead) the
    stage is holding. After a stage has emitted CLOSE or RESET it is ``done`` and drops input.
    """

    def __init__(self, attrs: dict[str, int], now: float, rng: random.Random) -> None:
        self.attrs = attrs
        self.rng = rng
        self.q: deque[Event] = deque()
        self.held = 0
        self.done = False

    # -- queue helpers
    def _enqueue(self, ev: Event) -> None:
        self.q.append(ev)
        self.held += _size(ev)

    def _popleft(self) -> Event:
        ev = self.q.popleft()
        self.held -= _size(ev)
        return ev

    def push(self, ev: Event, now: float) -> None:
        if not self.done:
            self._enqueue(ev)

    def pull(self, now: float) -> tuple[list[Event], float | None]:
        out = []
        while self.q:
            ev = self._popleft()
            out.append(ev)
            if ev in TERMINAL:
                self._finish()
                break
        return out, None

    def _finish(self) -> None:
        self.done = True
        self.q.clear()
        self.held = 0

    def remove(self, now: float) -> list[Event]:
        """The toxic is removed from a live connection: what it still holds goes on unharmed
        (the Go server's "don't drop any data on the floor")."""
        out = list(self.q)
        self.q.clear()
        self.held = 0
        return out

    def carry_state(self, old: "Stage") -> None:
        """Per-connection state kept when the toxic is updated (limit_data's byte count)."""


class Passthrough(Stage):
    """A toxic that did not strike this connection (toxicity), or the Go server's noop."""


class Latency(Stage):
    """Each chunk is released ``latency`` +/- ``jitter`` ms after the proxy read it, in order.

    Like the Go toxic, the delay is measured from when the chunk was read, so a stream of chunks
    is delayed, not serialised; unlike it, a released chunk's timestamp is moved to its release
    time, so two latency toxics in a chain add up."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.ready: deque[float] = deque()

    def _delay(self) -> float:
        d = self.attrs["latency"]
        j = self.attrs["jitter"]
        if j > 0:
            d += self.rng.randrange(2 * j) - j
        return max(d, 0) / 1000.0

    def push(self, ev, now) -> None:
        if self.done:
            return
        self._enqueue(ev)
        self.ready.append(ev.ts + self._delay() if isinstance(ev, Data) else now)

    def _popleft(self):
        self.ready.popleft()
        return super()._popleft()

    def pull(self, now):
        out = []
        while self.q:
            at = self.ready[0]
            if at > now:
                return out, at
            ev = self._popleft()
            if isinstance(ev, Data):
                ev = Data(ev.data, max(ev.ts, at))
            out.append(ev)
            if ev in TERMINAL:
                self._finish()
                break
        return out, None

    def _finish(self) -> None:
        super()._finish()
        self.ready.clear()

    def remove(self, now):
        self.ready.clear()
        return super().remove(now)


class Timeout(Stage):
    """No data passes (it is dropped). With ``timeout`` > 0 the connection is closed ``timeout``
    ms after the toxic started on it; as in the Go toxic, each arriving chunk restarts that
    timer. With 0 the connection is held until the toxic is removed. Removing the toxic from a
    live connection closes that connection (Go's Cleanup), since its data has been lost."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.started = now
        self.deadline = self._deadline(now)

    def _deadline(self, t: float) -> float | None:
        ms = self.attrs["timeout"]
        return t + ms / 1000.0 if ms > 0 else None

    def push(self, ev, now):
        if self.done:
            return
        if isinstance(ev, Data):
            self.deadline = self._deadline(now)
            return
        self._enqueue(ev)

    def pull(self, now):
        if self.done:
            return [], None
        if self.q:
            ev = self._popleft()
            self._finish()
            return [ev], None
        if self.deadline is not None and now >= self.deadline:
            self._finish()
            return [CLOSE], None
        return [], self.deadline

    def remove(self, now):
        if self.done:
            return []
        pending = list(self.q)
        self._finish()
        return pending or [CLOSE]

    def carry_state(self, old):
        # An update restarts the toxic (Go re-runs Pipe): the timer starts again now.
        pass


class ResetPeer(Stage):
    """The first event to arrive (its data is dropped) arms a timer of ``timeout`` ms, after
    which the connection is reset (RST). Later data waits (back-pressure), as in Go, and goes on
    if the toxic is removed first. Unlike Go, which sets SO_LINGER 0 only on connections that
    existed with the toxic at their start, the reset is abortive whenever the toxic fires."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.fire_at: float | None = None

    def push(self, ev, now):
        if self.done:
            return
        if self.fire_at is None:
            self.fire_at = now + max(self.attrs["timeout"], 0) / 1000.0
            if isinstance(ev, Data):
                return
        self._enqueue(ev)

    def pull(self, now):
        if self.done or self.fire_at is None:
            return [], None
        if now >= self.fire_at:
            self._finish()
            return [RESET], None
        return [], self.fire_at

    def carry_state(self, old):
        if isinstance(old, ResetPeer) and old.fire_at is not None:
            self.fire_at = old.fire_at


class _Cutter(Stage):
    """A stage that sends its head chunk out in pieces, keeping an offset instead of copying the
    rest of the chunk for every piece."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.off = 0

    def _cut(self, size: int, at: float) -> Data:
        head = self.q[0]
        start = self.off
        if start + size >= len(head.data):
            self.held += start  # _popleft discounts the whole chunk
            self.off = 0
            self._popleft()
            piece = head.data[start:] if start else head.data
        else:
            piece = head.data[start:start + size]
            self.off += size
            self.held -= size
        return Data(piece, max(head.ts, at))

    def _remaining(self) -> int:
        return len(self.q[0].data) - self.off

    def remove(self, now):
        if self.q and self.off and isinstance(self.q[0], Data):
            head = self.q[0]
            self.q[0] = Data(head.data[self.off:], head.ts)
        self.off = 0
        return super().remove(now)


# Pieces one pull may emit before yielding to the event loop (deadline = now).
MAX_PIECES_PER_PULL = 1024


class Bandwidth(_Cutter):
    """At most ``rate`` KB/s (1 KB = 1000 bytes, as in Go). Chunks larger than 100 ms worth are
    sent in 100 ms slices. ``rate`` <= 0 holds every byte (what the Go toxic ends up doing)."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.free_at = now
        self.next_emit: float | None = None
        self.next_size = 0

    def pull(self, now):
        out = []
        rate = self.attrs["rate"]
        while self.q:
            head = self.q[0]
            if not isinstance(head, Data):
                out.append(self._popleft())
                self._finish()
                break
            if rate <= 0:
                return out, None
            if len(out) >= MAX_PIECES_PER_PULL:
                return out, now
            if self.next_emit is None:
                bps = rate * 1000.0
                self.next_size = min(self._remaining(), max(1, rate * 100))
                self.next_emit = max(self.free_at, head.ts) + self.next_size / bps
            if self.next_emit > now:
                return out, self.next_emit
            at = self.next_emit
            self.free_at = at
            self.next_emit = None
            out.append(self._cut(self.next_size, at))
        return out, None

    def remove(self, now):
        self.next_emit = None
        return super().remove(now)


class Slicer(_Cutter):
    """Splits each chunk into slices of about ``average_size`` +/- ``size_variation`` bytes,
    ``delay`` microseconds apart. Slices are cut lazily, one at a time (uniformly distributed
    sizes rather than Go's recursive halving: same mean and bounds, bounded memory)."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.free_at = now

    def _slice_size(self, remaining: int) -> int:
        avg = max(self.attrs["average_size"], 1)
        var = max(min(self.attrs["size_variation"], avg - 1), 0)
        # Like Go, a remainder within the variation is not split again.
        if remaining - avg <= var:
            return remaining
        size = avg + (self.rng.randint(-var, var) if var else 0)
        return max(1, min(size, remaining))

    def pull(self, now):
        out = []
        delay = max(self.attrs["delay"], 0) / 1e6
        while self.q:
            head = self.q[0]
            at = max(self.free_at, head.ts) if isinstance(head, Data) else self.free_at
            if at > now:
                return out, at
            if not isinstance(head, Data):
                out.append(self._popleft())
                self._finish()
                break
            if len(out) >= MAX_PIECES_PER_PULL:
                return out, now
            out.append(self._cut(self._slice_size(self._remaining()), at))
            self.free_at = at + delay
        return out, None


class LimitData(Stage):
    """Passes at most ``bytes`` bytes in total on this connection, then closes it. The count
    survives updates of the toxic (Go's stateful toxic)."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.transmitted = 0

    def pull(self, now):
        out = []
        while self.q:
            ev = self._popleft()
            if not isinstance(ev, Data):
                out.append(ev)
                self._finish()
                break
            remaining = max(self.attrs["bytes"] - self.transmitted, 0)
            data = ev.data if len(ev.data) <= remaining else ev.data[:remaining]
            if data:
                out.append(Data(data, ev.ts))
                self.transmitted += len(data)
            if self.attrs["bytes"] - self.transmitted <= 0:
                out.append(CLOSE)
                self._finish()
                break
        return out, None

    def carry_state(self, old):
        if isinstance(old, LimitData):
            self.transmitted = old.transmitted


class SlowClose(Stage):
    """Data passes; the close (or reset) of the stream is held back ``delay`` ms."""

    def __init__(self, attrs, now, rng) -> None:
        super().__init__(attrs, now, rng)
        self.close_at: float | None = None

    def pull(self, now):
        out = []
        while self.q:
            head = self.q[0]
            if isinstance(head, Data):
                out.append(self._popleft())
                continue
            if self.close_at is None:
                self.close_at = now + max(self.attrs["delay"], 0) / 1000.0
            if now < self.close_at:
                return out, self.close_at
            out.append(self._popleft())
            self._finish()
            break
        return out, None


STAGES: dict[str, type[Stage]] = {
    "latency": Latency,
    "bandwidth": Bandwidth,
    "timeout": Timeout,
    "reset_peer": ResetPeer,
    "slicer": Slicer,
    "limit_data": LimitData,
    "slow_close": SlowClose,
}


def make_stage(toxic_type: str, attrs: dict[str, int], toxicity: float, now: float,
               rng: random.Random) -> Stage:
    """The stage of one toxic on one new connection: the toxic itself with probability
    ``toxicity``, otherwise a passthrough (rolled once per connection, as Go rolls per run)."""
    if rng.random() < toxicity:
        return STAGES[toxic_type](attrs, now, rng)
    return Passthrough(attrs, now, rng)


# ---------------------------------------------------------------------------------------------
# Chain


class Chain:
    """The toxics of one direction of one connection, in order, keyed by toxic name."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.stages: list[Stage] = []
        self.out: deque[Event] = deque()
        self.out_held = 0
        self.finished = False  # a terminal event has left the chain

    @property
    def held(self) -> int:
        return self.out_held + sum(s.held for s in self.stages)

    def _deliver(self, index: int, ev: Event, now: float) -> None:
        """Hand ``ev`` to stage ``index`` (or the output when past the last stage)."""
        if index < len(self.stages):
            self.stages[index].push(ev, now)
        else:
            self.out.append(ev)
            self.out_held += _size(ev)

    def push(self, ev: Event, now: float) -> None:
        if not self.finished:
            self._deliver(0, ev, now)

    def pull(self, now: float) -> tuple[list[Event], float | None]:
        """Advance every stage to ``now``; returns the events for the destination (at most one
        terminal, last) and the next instant to pull again (None: only on new input)."""
        deadline: float | None = None
        for i, stage in enumerate(self.stages):
            evs, d = stage.pull(now)
            for ev in evs:
                self._deliver(i + 1, ev, now)
            if d is not None and (deadline is None or d < deadline):
                deadline = d
        result = []
        while self.out and not self.finished:
            ev = self.out.popleft()
            self.out_held -= _size(ev)
            result.append(ev)
            if ev in TERMINAL:
                self.finished = True
        if self.finished:
            self.out.clear()
            self.out_held = 0
            deadline = None
        return result, deadline

    def add(self, name: str, stage: Stage) -> None:
        self.names.append(name)
        self.stages.append(stage)

    def remove(self, name: str, now: float) -> None:
        if name not in self.names:
            return
        i = self.names.index(name)
        stage = self.stages[i]
        pending = stage.remove(now)
        del self.names[i]
        del self.stages[i]
        for ev in pending:
            self._deliver(i, ev, now)

    def replace(self, name: str, stage: Stage, now: float) -> None:
        """Swap in an updated toxic, keeping its position, its per-connection state and what it
        held (re-offered to the new stage)."""
        if name not in self.names:
            return
        i = self.names.index(name)
        old = self.stages[i]
        stage.carry_state(old)
        if old.done:
            stage.done = True
            self.stages[i] = stage
            return
        pending = old.remove(now) if not isinstance(old, Timeout) else list(old.q)
        self.stages[i] = stage
        for ev in pending:
            stage.push(ev, now)


def build_chain(toxics: Iterable[tuple[str, str, dict[str, int], float]], now: float,
                rng: random.Random) -> Chain:
    """A chain for a new connection from (name, type, attributes, toxicity) in order."""
    chain = Chain()
    for name, toxic_type, attrs, toxicity in toxics:
        chain.add(name, make_stage(toxic_type, attrs, toxicity, now, rng))
    return chain


__all__: list[str] = [
    "UPSTREAM", "DOWNSTREAM", "STREAMS", "Data", "CLOSE", "RESET", "TOXIC_ATTRIBUTES",
    "parse_attributes", "BadAttribute", "Stage", "Chain", "make_stage", "build_chain",
]

