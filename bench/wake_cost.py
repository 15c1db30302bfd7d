"""What a wake-up costs on this machine: the CPU that one piece of the server's own work takes
right after its thread slept, against the same piece run back to back.

    python -m bench.wake_cost [--cycles 1000] [--sleep-ms 0.7]

Why it is measured. Under the replication benchmark's closed loop (16 connections), every
client waits on the same group commit, so the master has nothing to do until a replica acks: its
loop sleeps about once per batch, and each replica sleeps once per batch it applies. A single
node under the same load never sleeps. On a virtual machine, a thread that slept comes back to
caches that other processes (or, once the vCPU halted, other guests) have used meanwhile, so the
same instructions take more CPU time. The replication benchmark's CPU ratios carry that cost, and
it moves with the host's load from one run to the next, so the replication benchmark records it in
the same run (``environment.wake_cost_*``) next to how often each node's loop slept.

The piece of work is a single node's: ``batch`` SendMessage requests through the real
``HttpProtocol``, ``Endpoint`` and ``LocalBackend`` (``send_json`` of bench/cpu_profile.py). Each
cycle sleeps ``sleep_s`` (the master's usual wait for an ack, measured with 16 connections, was
0.2-0.8 ms), runs the piece (cold), and runs it again at once (hot). Only the pieces' own CPU is
counted (thread CPU time around each), so the sleep's system calls are not part of the cost.
It runs with the machine otherwise idle, so it is a lower bound of what a node pays under the
benchmark's load, where other processes use the core while the node sleeps.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import time
from typing import Any, Callable

from bench.cpu_profile import HOST, _Conn
from bench.loadgen.sqs import Api, Payloads


def _piece(batch: int) -> Callable[[], None]:
    """One call: ``batch`` JSON SendMessage requests answered by a single node, in process."""
    from cluster.clock import SystemClock
    from storage.commands import CreateQueue, Namespace

    from elasticmq_py.backend import LocalBackend
    from elasticmq_py.config import Config
    from elasticmq_py.endpoint import Endpoint

    backend = LocalBackend(SystemClock())
    backend.execute_now(CreateQueue(Namespace(), "wake-cost"))
    api = Api("json", HOST, f"http://{HOST}/000000000000/wake-cost")
    requests = [api.send(b) for b in Payloads(100).bodies]
    conn = _Conn(Endpoint(backend), Config().max_body_bytes())
    feed, written = conn.protocol.data_received, conn.transport.written
    sent = 0

    def run() -> None:
        nonlocal sent
        for _ in range(batch):
            feed(requests[sent % len(requests)])
            sent += 1
        if len(written) != batch or not written[-1].startswith(b"HTTP/1.1 200 "):
            raise AssertionError(f"the single node did not answer the piece: {written[-1][:200]!r}")
        written.clear()

    return run


def _cycles(run: Callable[[], None], cycles: int, sleep_s: float) -> tuple[list[int], list[int], float]:
    """``cycles`` cycles of: sleep, a piece (cold), the same piece again (hot). Pairing each cold
    piece with the hot one right after it cancels the machine's drift, which moves a piece's
    cost by a third within seconds here. Returns the CPU ns of each cold and each hot piece and
    the voluntary context switches per cycle."""
    clock = time.thread_time_ns
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    cold, hot = [], []
    for _ in range(cycles):
        time.sleep(sleep_s)
        t0 = clock()
        run()
        t1 = clock()
        run()
        t2 = clock()
        cold.append(t1 - t0)
        hot.append(t2 - t1)
    switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - before
    return cold, hot, switches / cycles


def measure(cycles: int = 1000, batch: int = 15, sleep_s: float = 0.0007) -> dict[str, Any]:
    """``penalty_us_per_wake`` is the median over the cycles of what the sleep added to the piece
    that followed it (cold - hot), divided by the sleeps a cycle really took (``time.sleep``
    could return without switching, and would then be no wake-up)."""
    run = _piece(batch)
    for _ in range(50):    # first-use costs (the queue's first messages, caches) stay out
        run()
    gc.collect()
    gc.freeze()            # as the served node's collector policy leaves the heap between turns
    try:
        cold, hot, sleeps = _cycles(run, cycles, sleep_s)
    finally:
        gc.unfreeze()
    us = lambda ns: round(ns / 1e3, 1)  # noqa: E731
    extra = statistics.median(c - h for c, h in zip(cold, hot))
    return {"piece": f"{batch} SendMessage requests (JSON) on a single node, in process",
            "sleep_ms": round(sleep_s * 1e3, 3), "cycles": cycles,
            "hot_us_per_piece": us(statistics.median(hot)), "cold_us_per_piece": us(statistics.median(cold)),
            "sleeps_per_cycle": round(sleeps, 2),
            "penalty_us_per_wake": us(extra / sleeps) if sleeps >= 0.5 else None,
            "cold_over_hot": round(statistics.median(c / h for c, h in zip(cold, hot)), 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=1000)
    p.add_argument("--sleep-ms", type=float, default=0.7)
    a = p.parse_args()
    print(json.dumps(measure(a.cycles, sleep_s=a.sleep_ms / 1e3), indent=1))


if __name__ == "__main__":
    main()
