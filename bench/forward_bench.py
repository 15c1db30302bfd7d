"""What a forwarded request costs the member that forwards it.

A member that is not its queue's master hands each client request to the master over the stream
link (elasticmq_py/forwarding.py) and relays the answer. With queue groups and clients at every
endpoint, most requests take that path, so its CPU on the forwarder decides what a member can
serve. ``GOAL_US`` is what it may cost for three members with three groups to serve, each, no
more than 0.6 of a single master's CPU per cluster send: a member masters a third of the sends
(77/3 µs of master work), replicates two thirds (17 µs each) and forwards two thirds of the
requests it receives, 77/3 + 17 * 2/3 + f * 2/3 <= 0.6 * 77 gives f <= ~13 µs.

One 3-node cluster with ack policy ``majority`` on 127.0.0.1 (links encrypted, the default; no
history logs), and the replication benchmark's send 100 B at 16 connections (bench/loadgen),
run in turns: once against the master's endpoint (``direct``), once against a replica's
(``forwarded``), the order reversed every other round. Each node's CPU comes from /proc over the
measured window, per acknowledged send. The forwarder is the replica the forwarded runs are
sent to; ``f`` is its CPU per send when it forwards minus its CPU per send when the same load
goes to the master (where it only applies the stream), taken within each round, and the median
of the rounds is reported with each round; the master's extra is the same difference for the
master (its load arriving forwarded rather than over HTTP). The suite ends with bench/queue_key_bench.py: what
reading a request's queue before the full parse costs, against that parse.

    python -m bench --only forward [--quick]
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.loadgen.runner import Job, Pool
from bench.loadgen.sqs import JSON
from bench.process_cpu import cpu_of, loadavg, loop_sleeps, threads_cpu
from bench.replication_setup import ALL, CONNECTIONS, PROCESSES, call, create_queue, port_of, replicas_caught_up

DIRECT, FORWARDED = "direct", "forwarded"
GOAL_US = 13.0   # the module docstring has the arithmetic


@dataclasses.dataclass(frozen=True)
class Sizes:
    duration: float
    rounds: int

    @classmethod
    def of(cls, quick: bool) -> "Sizes":
        return cls(1.0, 2) if quick else cls(3.0, 4)


class Probe:
    """The cluster, the roles of its members and the measured runs."""

    def __init__(self, cluster: Any, pool: Pool, sizes: Sizes, log=print):
        self.cluster, self.pool, self.sizes, self.log = cluster, pool, sizes, log
        self.master = self.forwarder = self.other = ""
        self.runs: list[dict] = []

    def ready(self) -> None:
        """Wait for a stable master with caught-up replicas and name the roles (the master may
        have moved since the last run; then the roles move with it)."""
        c = self.cluster
        m = c.wait_for("a stable master", c.stable_master(members=set(ALL)), 30.0)
        c.wait_for("replicas caught up", lambda: replicas_caught_up(c, m), 30.0)
        if m != self.master:
            self.master = m
            self.forwarder, self.other = sorted(n for n in ALL if n != m)

    def _cpu(self) -> dict[str, Any]:
        procs = self.cluster.procs
        return {**{n: cpu_of(p.popen.pid) for n, p in procs.items()},
                "threads": threads_cpu(procs[self.forwarder].popen.pid),
                "sleeps": loop_sleeps(procs[self.forwarder].popen.pid) or 0}

    def run_one(self, mode: str, rnd: int, duration: float | None = None) -> dict:
        self.ready()
        c = self.cluster
        entry = self.master if mode == DIRECT else self.forwarder
        port = port_of(c, entry)
        # created and deleted through the master, so that setting up costs the forwarder nothing
        url = create_queue(port_of(c, self.master), f"fwd-{mode}-{uuid.uuid4().hex[:8]}")
        url = f"http://localhost:{port}/" + url.split("/", 3)[3]
        job = Job(kind="send", protocol=JSON, port=port, host_header=f"localhost:{port}",
                  queue_url=url, connections=CONNECTIONS, processes=PROCESSES,
                  duration=duration or self.sizes.duration, body_size=100)
        marks: dict[str, Any] = {}
        try:
            r = self.pool.run(job, on_start=lambda: marks.update(a=self._cpu(), t=time.monotonic()))
            marks.update(b=self._cpu(), wall=time.monotonic() - marks["t"])
        finally:
            call(port_of(c, self.master), "DeleteQueue", {"QueueUrl": url}, retry_s=10)
        sends = max(1, r.requests)
        used = {n: marks["b"][n] - marks["a"][n] for n in ALL}
        role = {self.master: "master", self.forwarder: "forwarder", self.other: "other_replica"}
        row = {"mode": mode, "round": rnd, "master": self.master, "forwarder": self.forwarder,
               "requests": r.requests, "msgs_per_s": round(r.msg_rate), "p50_ms": round(1e3 * r.percentile(50), 3),
               "p99_ms": round(1e3 * r.percentile(99), 3), "errors": r.errors, "error_count": r.error_count,
               "loadavg": loadavg()[0], "client_cpu_us_per_send": round(1e6 * r.client_cpu / sends, 1),
               "cpu_us_per_send": {role[n]: round(1e6 * used[n] / sends, 1) for n in ALL},
               "cpu_pct": {role[n]: round(100 * used[n] / max(1e-9, marks["wall"])) for n in ALL},
               # the forwarder's CPU by thread (bench/process_cpu.py): its event loop, libzmq's
               # I/O threads (the stream's frames, CURVE), the rest (pysyncobj)
               "forwarder_cpu_us_per_send_by_thread": {
                   k: round(1e6 * (v - marks["a"]["threads"].get(k, 0.0)) / sends, 1)
                   for k, v in marks["b"]["threads"].items()},
               # how often its event loop slept (each sleep a wake-up, bench/wake_cost.py)
               "forwarder_loop_sleeps_per_send": round((marks["b"]["sleeps"] - marks["a"]["sleeps"]) / sends, 3)}
        self.runs.append(row)
        return row

    def run(self) -> None:
        self.run_one(DIRECT, -1, duration=1.5)     # warm-up: connections, caches, the stream's batching
        self.run_one(FORWARDED, -1, duration=1.5)
        self.runs.clear()
        for rnd in range(self.sizes.rounds):
            for mode in ((DIRECT, FORWARDED) if rnd % 2 == 0 else (FORWARDED, DIRECT)):
                row = self.run_one(mode, rnd)
                cpu = row["cpu_us_per_send"]
                err = f"  ERRORS {row['errors']}" if row["error_count"] else ""
                self.log(f"  [{rnd + 1}/{self.sizes.rounds}] {mode:9} {row['msgs_per_s']:>7,} sends/s "
                         f"p50 {row['p50_ms']:.2f} ms  CPU µs/send: master {cpu['master']:.1f} "
                         f"forwarder {cpu['forwarder']:.1f} other replica {cpu['other_replica']:.1f}{err}")


def suite(quick: bool, log=print) -> dict:
    from elasticmq_py.testing.cluster import PORT_SLOT_ENV, Cluster

    os.environ.setdefault(PORT_SLOT_ENV, "7")
    sizes = Sizes.of(quick)

    class NoHistory(Cluster):
        def config_for(self, name: str) -> Any:
            return dataclasses.replace(super().config_for(name), history_path=None)

    machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    before = loadavg()
    log(f"forward: send 100 B to the master's endpoint and to a replica's, 3 nodes majority, {sizes.rounds} rounds")
    pool = Pool(PROCESSES)
    with tempfile.TemporaryDirectory(prefix="forward-bench-") as d:
        c = NoHistory(Path(d), ALL, replication_config={"policy": "majority"})
        try:
            c.start_all()
            probe = Probe(c, pool, sizes, log)
            probe.run()
        finally:
            c.close()
            pool.close()
    out = report(probe.runs, machine, {"loadavg_before": before, "loadavg_after": loadavg()}, sizes, log)
    from bench import queue_key_bench

    out["queue_key"] = queue_key_bench.run(1_000 if quick else 3_000)
    log("  queue_key_of against the full parse, µs per request: " + "; ".join(
        f"{name} {r['queue_key_us']:.2f} / {r['full_parse_us']:.2f}" for name, r in out["queue_key"].items()))
    return out


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 1)


def report(runs: list[dict], machine: dict, env: dict, sizes: Sizes, log=print) -> dict:
    by = {(r["mode"], r["round"]): r for r in runs}
    rounds = sorted({r["round"] for r in runs})
    results = {}
    for mode in (DIRECT, FORWARDED):
        rows = [r for r in runs if r["mode"] == mode]
        results[mode] = {
            "msgs_per_s_median": round(statistics.median(r["msgs_per_s"] for r in rows)),
            "p50_ms_median": round(statistics.median(r["p50_ms"] for r in rows), 3),
            "cpu_us_per_send_median": {role: _median([r["cpu_us_per_send"][role] for r in rows])
                                       for role in ("master", "forwarder", "other_replica")},
            "forwarder_cpu_us_per_send_by_thread_median": {
                k: _median([r["forwarder_cpu_us_per_send_by_thread"][k] for r in rows])
                for k in ("loop", "zmq", "other")},
            "forwarder_loop_sleeps_per_send_median": round(
                statistics.median(r["forwarder_loop_sleeps_per_send"] for r in rows), 3),
            "errors": sum(r["error_count"] for r in rows)}
    pairs = [(by[(FORWARDED, n)], by[(DIRECT, n)]) for n in rounds if (FORWARDED, n) in by and (DIRECT, n) in by]

    def within(fn) -> dict:
        xs = [round(fn(a, b), 3) for a, b in pairs]
        return {"per_round": xs, "median": round(statistics.median(xs), 3)}

    cpu = lambda r, role: r["cpu_us_per_send"][role]  # noqa: E731
    ratios = {
        # the forwarder's added CPU per forwarded send: f
        "forward_cost_us": within(lambda a, b: cpu(a, "forwarder") - cpu(b, "forwarder")),
        # the same, against the other replica of the forwarded run: both apply the same stream,
        # at the forwarded run's (lower) rate and batching, so only forwarding differs
        "forward_cost_vs_other_replica_us": within(lambda a, b: cpu(a, "forwarder") - cpu(a, "other_replica")),
        "forward_cost_by_thread_us": {k: within(
            lambda a, b, k=k: a["forwarder_cpu_us_per_send_by_thread"][k] - b["forwarder_cpu_us_per_send_by_thread"][k])
            for k in ("loop", "zmq", "other")},
        "forwarder_cpu_forwarded_over_direct": within(lambda a, b: cpu(a, "forwarder") / cpu(b, "forwarder")),
        "master_cpu_forwarded_over_direct": within(lambda a, b: cpu(a, "master") / cpu(b, "master")),
        # the master's added CPU per send when its load arrives forwarded rather than over HTTP
        "master_extra_us": within(lambda a, b: cpu(a, "master") - cpu(b, "master")),
        "forward_cost_over_master_cpu": within(
            lambda a, b: (cpu(a, "forwarder") - cpu(b, "forwarder")) / cpu(b, "master")),
        "throughput_forwarded_over_direct": within(lambda a, b: a["msgs_per_s"] / b["msgs_per_s"]),
    }
    f = ratios["forward_cost_us"]
    spread = max(f["per_round"]) - min(f["per_round"])
    met = f["median"] <= GOAL_US
    log(f"  f = {f['median']:.1f} µs per forwarded send (rounds {', '.join(f'{x:.1f}' for x in f['per_round'])}; "
        f"spread {spread:.1f} µs); goal <= {GOAL_US:g} µs: {'met' if met else 'not met'}")
    g, th = ratios["forward_cost_vs_other_replica_us"], ratios["forward_cost_by_thread_us"]
    log(f"  against the other replica of the same run: {g['median']:.1f} µs; by thread: "
        + ", ".join(f"{k} {v['median']:.1f}" for k, v in th.items()))
    log(f"  forwarder CPU forwarded / direct {ratios['forwarder_cpu_forwarded_over_direct']['median']:.2f}x, "
        f"master {ratios['master_cpu_forwarded_over_direct']['median']:.2f}x "
        f"({ratios['master_extra_us']['median']:+.1f} µs per send), "
        f"throughput {ratios['throughput_forwarded_over_direct']['median']:.2f}x")
    return {"benchmark": "forward", "machine": machine, "environment": env,
            "config": {"duration_s": sizes.duration, "rounds": sizes.rounds, "connections": CONNECTIONS,
                       "generator_processes": PROCESSES, "policy": "majority", "nodes": len(ALL),
                       "body_bytes": 100, "encrypt_links": True},
            "results": results, "ratios": ratios, "forward_cost_spread_us": round(spread, 1),
            "goal": {"forward_cost_us_at_most": GOAL_US, "met": met}, "runs": runs}
