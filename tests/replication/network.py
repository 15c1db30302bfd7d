"""The replication tests' one frame network: the simulator's (sim/net.py), driven by hand.

Frames cross ``sim.net.Network``'s links, so they get what the simulator's frames get: FIFO per
link, frames in flight lost when a link is cut, nothing sent over a cut link, seeded drops and
duplicates. The lossy tests can also switch on its reordering mode, in which the next frame to
arrive is any frame in flight, with equal chance.

A test decides when frames arrive (``step``, ``run``) and when protocol time passes. The
network's own clock only orders the frames in flight: delivering one takes no time on the
storage clock the cores read.
"""

from __future__ import annotations

import heapq
import random
from typing import Any, Callable, Iterable

from sim.net import STREAM, Network

Deliver = Callable[[str, str, Any], None]     # (sender, to, frame)
Lose = Callable[[str, str, Any], bool]

REORDER_US = 1_000_000   # only the network's clock sees it; large, so that arrivals rarely tie


class _Endpoint:
    """A node as the network sees it: always up (a test cuts links instead); frames go to the
    test's handler under the node's name, so a core replaced there gets what is still in flight."""

    alive = True
    incarnation = 1

    def __init__(self, name: str, net: "FrameNet") -> None:
        self.name = name
        self.net = net

    def receive(self, plane: int, sender: str, msg: Any) -> None:
        self.net._arrived(sender, self.name, msg)


class FrameNet:
    def __init__(self, names: Iterable[str], deliver: Deliver, *, seed: int = 0) -> None:
        self.now = 0
        self._heap: list[tuple[int, int, Callable[..., None], tuple]] = []
        self._seq = 0
        self.nodes = {n: _Endpoint(n, self) for n in names}
        self.network = Network(self, random.Random(seed), list(self.nodes), (0.0, 0.0))
        self._deliver = deliver
        self._down: frozenset[str] = frozenset()
        self._lose: Lose | None = None
        self._arrivals = 0

    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn, args))

    def send(self, sender: str, to: str, frame: Any) -> None:
        self.network.send(sender, to, STREAM, frame)

    @property
    def idle(self) -> bool:
        """Nothing in flight."""
        return not self._heap

    def step(self) -> bool:
        """Deliver the next frame to arrive, passing over those lost on the way; False when none is
        in flight."""
        before = self._arrivals
        while self._heap:
            t, _, fn, args = heapq.heappop(self._heap)
            self.now = t
            fn(*args)
            if self._arrivals != before:
                return True
        return False

    def run(self, steps: int = 10_000, lose: Lose | None = None) -> None:
        """Deliver up to ``steps`` frames; those ``lose`` picks arrive and are thrown away."""
        self._lose = lose
        try:
            for _ in range(steps):
                if not self.step():
                    return
        finally:
            self._lose = None

    def _arrived(self, sender: str, to: str, frame: Any) -> None:
        self._arrivals += 1
        if self._lose is None or not self._lose(sender, to, frame):
            self._deliver(sender, to, frame)

    # --- faults ---------------------------------------------------------------------------------

    def faults(self, drop: float = 0.0, dup: float = 0.0, reorder: bool = False) -> None:
        """The random faults of the frames sent from now on; ``faults()`` ends them (cuts stay)."""
        self.network.drop, self.network.dup = drop, dup
        self.network.reorder_us = REORDER_US if reorder else 0

    @property
    def down(self) -> frozenset[str]:
        """The nodes cut off from all the others."""
        return self._down

    @down.setter
    def down(self, names: Iterable[str]) -> None:
        new = frozenset(names)
        # a link between two cut nodes stays cut until both are back (the network counts cuts)
        for n in sorted(self._down - new):
            for p in self.nodes:
                if p != n:
                    self.network.restore(n, p)
                    self.network.restore(p, n)
        for n in sorted(new - self._down):
            for p in self.nodes:
                if p != n:
                    self.network.cut(n, p)
                    self.network.cut(p, n)
        self._down = new


def note_batches(master: Any, op_seq: dict[int, int]) -> None:
    """Which batch each waiting operation of ``master`` went into (``op_seq[op]`` is -1 until
    then): a flush cuts one, and so does an ack or a tick when the flush before held the
    operations back (Limits.hold_ms)."""
    for waiting in master._waiting.values():
        for seq, op in waiting:
            if op_seq.get(op) == -1:
                op_seq[op] = seq
