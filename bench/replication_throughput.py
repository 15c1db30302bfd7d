"""Part 1 of the replication benchmark: throughput and latency of each target, scenario by scenario,
round after round, with each run's CPU split by process and thread (bench/process_cpu.py)."""

from __future__ import annotations

import statistics
import uuid
from dataclasses import dataclass

from bench.loadgen.runner import Job, Pool
from bench.loadgen.sqs import JSON
from bench.process_cpu import CpuWindow, loadavg
from bench.replication_setup import (
    CONNECTIONS, LABEL, PROCESSES, SINGLE, TARGETS, Sizes, Target, stream_counts, call, create_queue,
)


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    kind: str
    connections: int = CONNECTIONS
    mode: str = "async"
    prefill: bool = False


SCENARIOS = (
    Scenario("send_100B", "send 100 B", "send"),
    Scenario("send_batch", "send-batch 10x100 B", "send_batch"),
    Scenario("receive_delete", "receive+delete-batch", "receive_delete", prefill=True),
    Scenario("latency_1conn", "latency send, 1 conn", "send", connections=1, mode="blocking"),
)




class ThroughputPart:
    def __init__(self, targets: dict[str, Target], pool: Pool, sizes: Sizes, log=print,
                 scenarios: tuple[Scenario, ...] = SCENARIOS, names: tuple[str, ...] = TARGETS):
        self.targets, self.pool, self.sizes, self.log = targets, pool, sizes, log
        self.scenarios, self.names = scenarios, names
        self.runs: list[dict] = []

    def _job(self, sc: Scenario, t: Target, url: str, **kw) -> Job:
        base = dict(kind=sc.kind, protocol=JSON, port=t.entry.port, host_header=t.entry.host_header, queue_url=url,
                    connections=sc.connections, processes=1 if sc.mode == "blocking" else PROCESSES,
                    duration=self.sizes.duration, body_size=100, mode=sc.mode)
        base.update(kw)
        return Job(**base)

    def warm_up(self) -> None:
        for t in self.targets.values():
            t.ready()
            url = create_queue(t.entry.port, f"warmup-{uuid.uuid4().hex[:8]}")
            try:
                self.pool.run(self._job(SCENARIOS[0], t, url, duration=1.5))
            finally:
                call(t.entry.port, "DeleteQueue", {"QueueUrl": url}, retry_s=10)

    def run_one(self, sc: Scenario, t: Target, rnd: int) -> dict:
        t.ready()
        url = create_queue(t.entry.port, f"bench-{sc.key.replace('_', '-')}-{uuid.uuid4().hex[:8]}")
        try:
            prefilled = None
            if sc.prefill:
                r = self.pool.run(self._job(sc, t, url, kind="send_batch", mode="async", connections=CONNECTIONS,
                                            processes=PROCESSES, duration=10.0, max_messages=self.sizes.prefill))
                prefilled = r.messages
            window = CpuWindow(self.targets, t)
            before = stream_counts(t)
            r = self.pool.run(self._job(sc, t, url), on_start=window.start)
            window.stop()
            after = stream_counts(t)
        finally:
            call(t.entry.port, "DeleteQueue", {"QueueUrl": url}, retry_s=10)
        row = {"scenario": sc.key, "target": t.name, "round": rnd, "master": t.master,
               "connections": sc.connections, "requests": r.requests, "messages": r.messages,
               "seconds": round(r.wall, 3), "req_per_s": round(r.req_rate), "msgs_per_s": round(r.msg_rate),
               "p50_ms": round(1e3 * r.percentile(50), 3), "p90_ms": round(1e3 * r.percentile(90), 3),
               "p99_ms": round(1e3 * r.percentile(99), 3), "errors": r.errors, "error_count": r.error_count,
               "loadavg": loadavg()[0]}
        row.update(window.shares(r.client_cpu, r.requests))
        if before and after and after["batches"] > before["batches"]:
            # how well the master batches (group commit) and how many frames each batch costs
            batches = after["batches"] - before["batches"]
            row["requests_per_batch"] = round(r.requests / batches, 2)
            row["master_frames_out_per_batch"] = round((after["frames_out"] - before["frames_out"]) / batches, 2)
            row["master_frames_in_per_batch"] = round((after["frames_in"] - before["frames_in"]) / batches, 2)
        if prefilled is not None:
            row["prefilled"] = prefilled
            # a receiver stops at an empty queue: a run that ends early measured its ramp and
            # its tail, not the steady rate the prefill is sized for
            row["ran_dry"] = r.wall < 0.95 * self.sizes.duration
        self.runs.append(row)
        return row

    def run(self) -> dict:
        self.warm_up()
        order = list(self.names)
        for rnd in range(self.sizes.rounds):
            for sc in self.scenarios:
                for name in (order if rnd % 2 == 0 else order[::-1]):
                    row = self.run_one(sc, self.targets[name], rnd)
                    self.log(f"  [{rnd + 1}/{self.sizes.rounds}] {sc.title:22} {LABEL.get(name, name):18} {_fmt(row)}")
        return self.summary()

    def summary(self) -> dict:
        by = {(r["scenario"], r["target"], r["round"]): r for r in self.runs}
        results, ratios = {}, {}
        for sc in self.scenarios:
            for name in self.names:
                rows = [r for r in self.runs if r["scenario"] == sc.key and r["target"] == name]
                if sc.mode == "blocking":
                    best = min(rows, key=lambda r: r["p50_ms"])
                    results[f"{sc.key}/{name}"] = {"p50_ms_best": best["p50_ms"], "p99_ms_of_best": best["p99_ms"],
                                                   "p50_ms_median": round(statistics.median(r["p50_ms"] for r in rows), 3)}
                else:
                    best = max(rows, key=lambda r: r["msgs_per_s"])
                    results[f"{sc.key}/{name}"] = {
                        "msgs_per_s_best": best["msgs_per_s"], "req_per_s_best": best["req_per_s"],
                        "msgs_per_s_median": round(statistics.median(r["msgs_per_s"] for r in rows)),
                        "p50_ms_of_best": best["p50_ms"], "p99_ms_of_best": best["p99_ms"],
                        "master_cpu_pct_of_best": best["master_cpu_pct"],
                        "replicas_cpu_pct_of_best": best["replicas_cpu_pct"],
                        "master_cpu_us_per_req_median": round(statistics.median(r["master_cpu_us_per_req"] for r in rows), 1),
                        "all_nodes_cpu_us_per_req_median": round(statistics.median(r["all_nodes_cpu_us_per_req"]
                                                                                   for r in rows), 1)}
                    if name != SINGLE:
                        results[f"{sc.key}/{name}"]["replica_cpu_us_per_req_median"] = round(
                            statistics.median(r.get("replica_cpu_us_per_req", 0.0) for r in rows), 1)
                    for role in ("master", "replica"):
                        slept = [r["loop_sleeps_per_req"][role] for r in rows if role in r.get("loop_sleeps_per_req", {})]
                        if slept:
                            results[f"{sc.key}/{name}"][f"{role}_loop_sleeps_per_req_median"] = round(
                                statistics.median(slept), 3)
            for name in (n for n in self.names if n != SINGLE):
                per_round = []
                for rnd in range(self.sizes.rounds):
                    a, b = by.get((sc.key, name, rnd)), by.get((sc.key, SINGLE, rnd))
                    if not a or not b:
                        continue
                    if sc.mode == "blocking":
                        per_round.append(round(a["p50_ms"] - b["p50_ms"], 3))
                    elif b["msgs_per_s"]:
                        per_round.append(round(a["msgs_per_s"] / b["msgs_per_s"], 3))
                key = f"{sc.key}: {name} - single, p50 ms" if sc.mode == "blocking" else f"{sc.key}: {name} / single"
                ratios[key] = {"per_round": per_round,
                               "median": round(statistics.median(per_round), 3) if per_round else None}
                if sc.mode == "blocking":
                    continue
                # CPU per acknowledged operation, each process against the single node's
                for who, field in (("master", "master_cpu_us_per_req"), ("replica", "replica_cpu_us_per_req")):
                    per_round = []
                    for rnd in range(self.sizes.rounds):
                        a, b = by.get((sc.key, name, rnd)), by.get((sc.key, SINGLE, rnd))
                        if a and b and b.get("master_cpu_us_per_req") and a.get(field) is not None:
                            per_round.append(round(a[field] / b["master_cpu_us_per_req"], 3))
                    ratios[f"{sc.key}: {name} {who} CPU/op / single"] = {
                        "per_round": per_round, "median": round(statistics.median(per_round), 3) if per_round else None}
        return {"results": results, "within_round": ratios,
                "errors_total": sum(r["error_count"] for r in self.runs), "runs": self.runs}


def _fmt(row: dict) -> str:
    main = (f"p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms" if row["connections"] == 1
            else f"{row['msgs_per_s']:>7,} msgs/s {row['req_per_s']:>6,} req/s p50 {row['p50_ms']:.2f} ms")
    err = f"  ERRORS {row['errors']}" if row["error_count"] else ""
    return (f"{main}  cpu master {row['master_cpu_pct']}% replicas {row['replicas_cpu_pct']}% "
            f"gen {row['client_cpu_pct']}% idle-targets {row['idle_targets_cpu_pct']}% other {row['other_cpu_pct']}%{err}")
