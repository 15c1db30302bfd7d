"""Time for the state machine. Storage never reads the wall clock: the runtime injects one.

Times are integer milliseconds since the epoch, as SQS reports them, so that every replica
computes with exactly the same numbers.
"""

from __future__ import annotations

from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class ManualClock:
    """A clock that moves only when told to: tests and the simulator drive it."""

    def __init__(self, start_ms: int = 1_700_000_000_000):
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now += ms

    def set(self, now_ms: int) -> None:
        self._now = now_ms
