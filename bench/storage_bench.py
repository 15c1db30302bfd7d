"""Storage-only throughput, one thread, mutation encoding included.

Every operation is executed on a Storage and the mutations it emits are encoded with the wire
codec, as a master must before replicating them. Scenarios run at an empty queue and again with
1,000,000 messages already queued, side by side in the same process, so the report can give the
depth ratio (the issue's bound: within 2x). A floor is measured in the same run too: the same
message loop over a bare dict + deque, which says how much of the time is SQS semantics.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from dataclasses import dataclass

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import (
    CreateQueue, DeleteMessage, DeleteMessageBatch, DeleteMessageBatchEntry, Namespace, ReceiveMessage,
    SendMessage, SendMessageBatch, SendMessageBatchEntry,
)

BODY = "x" * 100


@dataclass
class Result:
    scenario: str
    depth: int
    ops: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.ops / self.seconds


def _storage(depth: int, fifo: bool = False) -> tuple[Storage, ManualClock, object]:
    clock = ManualClock()
    s = Storage(clock, IdSource(1))
    name = "bench.fifo" if fifo else "bench"
    attrs = {"FifoQueue": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    key = s.execute(CreateQueue(Namespace(), name, attrs))[0].queue
    if depth:
        entries = tuple(SendMessageBatchEntry(str(i), BODY) for i in range(10))
        for _ in range(depth // 10):
            s.execute(SendMessageBatch(key, entries))
        clock.advance(1)
    return s, clock, key


def _timed(fn, ops: int) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    finally:
        gc.enable()


def bench_send(depth: int, n: int) -> Result:
    s, clock, key = _storage(depth)
    execute = s.execute

    def run() -> None:
        for _ in range(n):
            _, muts = execute(SendMessage(key, BODY))
            encode_many(muts)
    return Result("send", depth, n, _timed(run, n))


def bench_send_batch(depth: int, n: int) -> Result:
    s, clock, key = _storage(depth)
    entries = tuple(SendMessageBatchEntry(str(i), BODY) for i in range(10))

    def run() -> None:
        for _ in range(n // 10):
            _, muts = s.execute(SendMessageBatch(key, entries))
            encode_many(muts)
    return Result("send_batch", depth, n, _timed(run, n))


def bench_receive_delete(depth: int, n: int, batch: int) -> Result:
    """Receive up to `batch` messages, then delete each: messages received+deleted per second."""
    s, clock, key = _storage(depth + n)
    execute = s.execute

    def run() -> None:
        done = 0
        while done < n:
            result, muts = execute(ReceiveMessage(key, max_number_of_messages=batch))
            encode_many(muts)
            msgs = result.messages
            if batch == 1:
                for m in msgs:
                    _, muts = execute(DeleteMessage(key, m.receipt_handle))
                    encode_many(muts)
            else:
                _, muts = execute(DeleteMessageBatch(key, tuple(
                    DeleteMessageBatchEntry(str(i), m.receipt_handle) for i, m in enumerate(msgs))))
                encode_many(muts)
            done += len(msgs)
    name = "receive_delete" if batch == 1 else f"receive_delete_batch{batch}"
    return Result(name, depth, n, _timed(run, n))


def bench_fifo_send_receive_delete(depth: int, n: int) -> Result:
    s, clock, key = _storage(0, fifo=True)
    for i in range(depth):
        s.execute(SendMessage(key, BODY, group_id=f"g{i % 100}", deduplication_id=f"pre{i}"))

    def run() -> None:
        for i in range(n):
            _, muts = s.execute(SendMessage(key, BODY, group_id=f"g{i % 100}", deduplication_id=f"d{i}"))
            encode_many(muts)
        done = 0
        while done < n:
            result, muts = s.execute(ReceiveMessage(key, max_number_of_messages=10))
            encode_many(muts)
            for m in result.messages:
                _, muts = s.execute(DeleteMessage(key, m.receipt_handle))
                encode_many(muts)
            done += len(result.messages)
    return Result("fifo_send+receive_delete", depth, n, _timed(run, n))


def bench_floor(n: int) -> Result:
    """The same number of messages through a dict + deque, for scale."""
    def run() -> None:
        store: dict[int, str] = {}
        order: deque[int] = deque()
        for i in range(n):
            store[i] = BODY
            order.append(i)
        while order:
            del store[order.popleft()]
    return Result("floor_dict_deque_put_get", 0, n, _timed(run, n))


def run(quick: bool = False) -> list[Result]:
    big = 100_000 if quick else 1_000_000
    n = 20_000 if quick else 100_000
    results = [bench_floor(n)]
    for depth in (0, big):
        results.append(bench_send(depth, n))
        results.append(bench_send_batch(depth, n))
        results.append(bench_receive_delete(depth, n, batch=1))
        results.append(bench_receive_delete(depth, n, batch=10))
    results.append(bench_fifo_send_receive_delete(0, n // 2))
    results.append(bench_fifo_send_receive_delete(big // 10, n // 2))
    return results
