"""Storage-only throughput, one thread, mutation encoding included.

Every operation is executed on a Storage and the mutations it emits are encoded with the wire
codec, as a master must before replicating them. Scenarios run at an empty queue and again with
1,000,000 messages already queued, side by side in the same process, so the report can give the
depth ratio (the goal: within 2x). A floor is measured in the same run too: the same
message loop over a bare dict + deque, which says how much of the time is SQS semantics.

How a scenario is timed, and why: the machine this runs on is shared, and other people's load
comes and goes over minutes. Timing every empty-queue scenario first and every deep one a minute
later compared two different machines (one run had sends to a deep queue 2.5x slower, the next
1.5x *faster*, with storage unchanged). So each scenario runs ``REPEATS`` rounds at each depth,
the empty round and the deep round back to back (their order alternating), and reports the
fastest round at each depth: the least disturbed one. Every round starts at exactly the stated
depth: the empty side gets a fresh storage per round, and the deep storage (built once and
shared by the standard-queue scenarios) is brought back to its depth after each round, untimed
(a round of sends is drained, a round of receives refilled). A receive round at depth ``d``
starts with ``d + ops`` messages queued, so that it never sees fewer than ``d``.

Each round is timed twice: wall time (``seconds``, which the rates are) and the process's CPU time
(``cpu_seconds``), which leaves out the time the kernel gave the CPU to other processes. On a
quiet machine the two agree; when they do not, the machine was busy.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import (
    CreateQueue, DeleteMessage, DeleteMessageBatch, DeleteMessageBatchEntry, Namespace, ReceiveMessage,
    SendMessage, SendMessageBatch, SendMessageBatchEntry,
)

BODY = "x" * 100
REPEATS = 5
ENTRIES = tuple(SendMessageBatchEntry(str(i), BODY) for i in range(10))


@dataclass
class Result:
    scenario: str
    depth: int
    ops: int
    seconds: float                      # the fastest round, wall clock
    cpu_seconds: float = float("nan")   # the fastest round, this process's CPU time

    @property
    def rate(self) -> float:
        return self.ops / self.seconds

    @property
    def cpu_rate(self) -> float:
        return self.ops / self.cpu_seconds


Bench = tuple[Storage, Any]   # a storage and the key of its one queue
Op = Callable[[Storage, Any, int], None]   # (storage, queue key, round number): the timed work


def _storage(depth: int, fifo: bool = False, groups: int = 100) -> Bench:
    clock = ManualClock()
    s = Storage(clock, IdSource(1))
    name = "bench.fifo" if fifo else "bench"
    attrs = {"FifoQueue": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    key = s.execute(CreateQueue(Namespace(), name, attrs))[0].queue
    gc.disable()  # building creates no cycles; the collector would only rescan what is built
    try:
        if fifo:
            for i in range(depth):
                s.execute(SendMessage(key, BODY, group_id=f"g{i % groups}", deduplication_id=f"pre{i}"))
        else:
            _fill(s, key, depth)
    finally:
        gc.enable()
    clock.advance(1)
    return s, key


def _fill(s: Storage, key: Any, n: int) -> None:
    execute = s.execute
    for _ in range(n // 10):
        execute(SendMessageBatch(key, ENTRIES))


def _drain(s: Storage, key: Any, n: int) -> None:
    """Receive and delete ``n`` messages (the oldest), untimed."""
    execute = s.execute
    done = 0
    while done < n:
        msgs = execute(ReceiveMessage(key, max_number_of_messages=min(10, n - done)))[0].messages
        if not msgs:
            raise RuntimeError("the queue ran dry while draining")
        execute(DeleteMessageBatch(key, tuple(
            DeleteMessageBatchEntry(str(i), m.receipt_handle) for i, m in enumerate(msgs))))
        done += len(msgs)


def _round(op: Op, s: Storage, key: Any, r: int) -> tuple[float, float]:
    gc.collect()
    gc.disable()
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        op(s, key, r)
        return time.perf_counter() - t0, time.process_time() - c0
    finally:
        gc.enable()


def _pair(name: str, ops: int, op: Op, sides: list[tuple[int, Callable[[], Bench], Callable[[Bench], None]]]
          ) -> list[Result]:
    """Time ``op`` for REPEATS rounds at each side's depth, the sides' rounds interleaved.

    A side is (depth, a function giving the storage for a round, a function restoring that
    storage's depth after a round)."""
    best = {depth: [float("inf"), float("inf")] for depth, _, _ in sides}
    for r in range(REPEATS):
        for depth, get, restore in (sides if r % 2 == 0 else sides[::-1]):
            bench = get()
            wall, cpu = _round(op, *bench, r)
            restore(bench)
            b = best[depth]
            b[0], b[1] = min(b[0], wall), min(b[1], cpu)
    return [Result(name, depth, ops, *best[depth]) for depth, _, _ in sides]


# --- the timed operations -------------------------------------------------------------------

def _sends(n: int) -> Op:
    def run(s: Storage, key: Any, r: int) -> None:
        execute = s.execute
        for _ in range(n):
            _, muts = execute(SendMessage(key, BODY))
            encode_many(muts)
    return run


def _send_batches(n: int) -> Op:
    def run(s: Storage, key: Any, r: int) -> None:
        execute = s.execute
        for _ in range(n // 10):
            _, muts = execute(SendMessageBatch(key, ENTRIES))
            encode_many(muts)
    return run


def _receive_deletes(n: int, batch: int) -> Op:
    """Receive up to `batch` messages, then delete each (one by one, or in one batch)."""
    def run(s: Storage, key: Any, r: int) -> None:
        execute = s.execute
        done = 0
        while done < n:
            result, muts = execute(ReceiveMessage(key, max_number_of_messages=batch))
            encode_many(muts)
            msgs = result.messages
            if not msgs:
                raise RuntimeError("the queue ran dry before the round was done")
            if batch == 1:
                for m in msgs:
                    _, muts = execute(DeleteMessage(key, m.receipt_handle))
                    encode_many(muts)
            else:
                _, muts = execute(DeleteMessageBatch(key, tuple(
                    DeleteMessageBatchEntry(str(i), m.receipt_handle) for i, m in enumerate(msgs))))
                encode_many(muts)
            done += len(msgs)
    return run


def _fifo_cycle(n: int, groups: int = 100) -> Op:
    """Send ``n`` to ``groups`` groups, then receive 10 at a time and delete each: the depth it
    starts at is the depth it ends at."""
    def run(s: Storage, key: Any, r: int) -> None:
        execute = s.execute
        for i in range(n):
            # dedup ids unique across rounds, or a later round's sends would be deduplicated away
            _, muts = execute(SendMessage(key, BODY, group_id=f"g{i % groups}", deduplication_id=f"r{r}d{i}"))
            encode_many(muts)
        done = 0
        while done < n:
            result, muts = execute(ReceiveMessage(key, max_number_of_messages=10))
            encode_many(muts)
            if not result.messages:
                raise RuntimeError("the queue ran dry before the round was done")
            for m in result.messages:
                _, muts = execute(DeleteMessage(key, m.receipt_handle))
                encode_many(muts)
            done += len(result.messages)
    return run


def bench_floor(n: int) -> Result:
    """The same number of messages through a dict + deque, for scale."""
    def run(s: Any, key: Any, r: int) -> None:  # fresh containers each round
        store: dict[int, str] = {}
        order: deque[int] = deque()
        for i in range(n):
            store[i] = BODY
            order.append(i)
        while order:
            del store[order.popleft()]
    return _pair("floor_dict_deque_put_get", n, run, [(0, lambda: (None, None), lambda b: None)])[0]


def _standard(big: int, n: int) -> list[Result]:
    """The standard-queue scenarios, empty and at ``big``; one deep storage serves them all."""
    deep = _storage(big)
    gc.collect()
    gc.freeze()  # the deep queue's messages live through all rounds: keep gc.collect() short
    try:
        sends = [(0, lambda: _storage(0), lambda b: None), (big, lambda: deep, lambda b: _drain(*b, n))]
        receives = [(0, lambda: _storage(n), lambda b: None), (big, lambda: deep, lambda b: _fill(*b, n))]
        paired = _pair("send", n, _sends(n), sends)
        paired += _pair("send_batch", n, _send_batches(n), sends)
        _fill(*deep, n)  # receive rounds start at big + n
        paired += _pair("receive_delete", n, _receive_deletes(n, 1), receives)
        paired += _pair("receive_delete_batch10", n, _receive_deletes(n, 10), receives)
    finally:
        gc.unfreeze()
    return [r for r in paired if r.depth == 0] + [r for r in paired if r.depth == big]


def _fifo(name: str, depth: int, n: int, groups: int) -> list[Result]:
    deep = _storage(depth, fifo=True, groups=groups)
    return _pair(name, n, _fifo_cycle(n, groups),
                 [(0, lambda: _storage(0, fifo=True, groups=groups), lambda b: None),
                  (depth, lambda: deep, lambda b: None)])


def run(quick: bool = False) -> list[Result]:
    big = 100_000 if quick else 1_000_000
    n = 20_000 if quick else 100_000
    results = [bench_floor(n)]
    results += _standard(big, n)
    results += _fifo("fifo_send+receive_delete", big // 10, n // 2, groups=100)
    # One group holding the whole queue: a receive must not cost in proportion to its group.
    results += _fifo("fifo_1group_send+receive_delete", big // 10, n // 5, groups=1)
    _print_cpu(results)
    return results


def _print_cpu(results: list[Result]) -> None:
    """The same runs by CPU time: the rates a quiet machine would show, and their ratios."""
    by = {(r.scenario, r.depth): r.cpu_rate for r in results}
    print("\nstorage by CPU time (fastest round; wall-clock rates follow)")
    print(f"{'scenario':36} {'depth':>9} {'ops/s':>10}")
    for r in results:
        print(f"{r.scenario:36} {r.depth:>9} {r.cpu_rate:>10,.0f}")
    for name in dict.fromkeys(r.scenario for r in results):
        depths = sorted(d for (sc, d) in by if sc == name)
        if len(depths) == 2:
            print(f"  cpu ratio {name}: empty / deep: {by[(name, depths[0])] / by[(name, depths[1])]:.2f}")
