"""What queue groups buy: the busiest member's CPU per send with one group and with three.

Two 3-node in-memory clusters with ack policy ``majority`` on 127.0.0.1 run side by side
(elasticmq_py/localcluster.py, links encrypted): one with ``groups = 1``, one with ``groups = 3``
once every member masters one group. Each gets 30 queues before the load (10 per group where
there are three) and the replication benchmark's send 100 B at 16 connections, split over six
generator processes, each on its own queue (the queues rotate by round) and endpoint. The runs
alternate, in turns:

- ``one_group``: clients at every endpoint of the one-group cluster (two thirds forwarded);
- ``one_group_direct``: the same clients all at its master's endpoint (nothing forwarded);
- ``groups``: clients at every endpoint of the three-group cluster.

Each node's CPU comes from /proc over the measured window, per acknowledged send of its cluster.
The goals: the groups cluster's busiest member at most 0.6 of the one-group master, and its
busiest at most 1.3 times its idlest.

The projection. With M members, M groups and requests spread evenly over the endpoints, a member
spends per cluster send its master share m/M, its replica share r(M-1)/M and, for the 1/M of the
requests it receives, f(M-1)/M forwarding them: c(M) = m/M + r(M-1)/M + f(M-1)/M^2. The three
costs are fitted from the one-group runs: m is the master's CPU per send with clients at every
endpoint (it takes forwarded requests as the groups members do); r is a replica's with every
client at the master (it only applies the stream); a replica of ``one_group`` spends r + f/3 (it
receives a third of the requests and forwards all of them), so f = 3 (that - r). c(3) is then
checked against the measured groups cluster, and a member on a core of its own serves
1e6 / c(M) sends/s against one master's 1e6 / m.

    python -m bench --only groups [--quick]
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loadgen.runner import Job, Pool
from bench.loadgen.sqs import JSON
from bench.process_cpu import cpu_of, loadavg
from bench.replication_setup import CONNECTIONS, call, create_queue, queue_url_at

ONE, DIRECT, GROUPS = "one_group", "one_group_direct", "groups"
QUEUES = 30
WORKERS = 6
GOAL_RATIO = 0.6     # busiest(groups) / master(one group)
GOAL_BALANCE = 1.3   # busiest / idlest within the groups cluster
PROJECT = (3, 5, 9)


def _start(d: Path, groups: int) -> Any:
    from elasticmq_py import localcluster

    c = localcluster.LocalCluster(d, localcluster.plan_ports(3, 0), fsync=None, groups=groups, log_level="WARNING")
    c.start()
    return c


def _masters(c: Any, groups: int, timeout: float = 40.0) -> list[str]:
    """The one master (one group), or each group's once every member masters one; a member that
    exits, or no such masters within ``timeout``, is an error."""
    names = sorted(n.name for n in c.plan)
    deadline = time.monotonic() + timeout
    while not c.exited():
        if groups == 1:
            m = c.ready_master(c.statuses())
            masters = [m] if m else None
        else:
            masters = c.group_masters()
        if masters and (groups == 1 or sorted(masters) == names):
            return masters
        if time.monotonic() > deadline:
            raise RuntimeError(f"{groups} group(s): no masters spread over the members within {timeout:g} s")
        time.sleep(0.1)
    raise RuntimeError(f"a member exited: {c.exited()}")


def _run(pool: Pool, jobs: list[Job], on_start) -> dict:
    """Each job to its own generator process, all starting at once; their results summed."""
    start_at = time.monotonic() + 0.4
    for (_, pipe), job in zip(pool.workers, jobs):
        pipe.send(Job(**{**job.__dict__, "start_at": start_at}))
    time.sleep(max(0.0, start_at - time.monotonic()))
    on_start()
    outs = [pipe.recv() for (_, pipe), _ in zip(pool.workers, jobs)]
    bad = [o for s, o in outs if s != "ok"]
    if bad:
        raise RuntimeError(f"generator failed: {bad[0]}")
    outs = [o for _, o in outs]
    errors: dict[str, int] = {}
    for o in outs:
        for k, v in o["errors"].items():
            errors[k] = errors.get(k, 0) + v
    return {"requests": sum(o["requests"] for o in outs), "messages": sum(o["messages"] for o in outs),
            "wall": max(o["wall"] for o in outs), "client_cpu": sum(o["cpu"] for o in outs), "errors": errors}


class Bench:
    def __init__(self, clusters: dict[int, Any], pool: Pool, duration: float, log=print):
        self.clusters, self.pool, self.duration, self.log = clusters, pool, duration, log
        self.urls: dict[int, list[str]] = {}
        self.runs: list[dict] = []

    def setup(self) -> None:
        for g, c in self.clusters.items():
            _masters(c, g)
            ports = [n.http for n in c.plan]
            # created through every endpoint in turn; with groups they spread over the groups
            self.urls[g] = [create_queue(ports[k % 3], f"cap-{k:02d}") for k in range(QUEUES)]

    def run_one(self, mode: str, rnd: int, duration: float) -> dict:
        g = 3 if mode == GROUPS else 1
        c = self.clusters[g]
        masters = _masters(c, g)
        plan = {n.name: n.http for n in c.plan}
        names = sorted(plan)
        jobs = []
        for i in range(WORKERS):
            entry = masters[0] if mode == DIRECT else names[i % 3]
            port = plan[entry]
            url = queue_url_at(port, self.urls[g][(rnd * WORKERS + i) % QUEUES])
            jobs.append(Job(kind="send", protocol=JSON, port=port, host_header=f"localhost:{port}", queue_url=url,
                            connections=CONNECTIONS // WORKERS + (1 if i < CONNECTIONS % WORKERS else 0),
                            duration=duration, body_size=100))
        marks: dict[str, Any] = {}
        pids = {n: p.pid for n, p in c.procs.items()}
        r = _run(self.pool, jobs, lambda: marks.update(a={n: cpu_of(p) for n, p in pids.items()}, t=time.monotonic()))
        wall = time.monotonic() - marks["t"]
        used = {n: cpu_of(p) - marks["a"][n] for n, p in pids.items()}
        sends = max(1, r["requests"])
        row = {"mode": mode, "round": rnd, "masters": masters, "requests": r["requests"],
               "msgs_per_s": round(r["messages"] / max(1e-9, r["wall"])), "errors": r["errors"],
               "error_count": sum(r["errors"].values()), "loadavg": loadavg()[0],
               "client_cpu_us_per_send": round(1e6 * r["client_cpu"] / sends, 1),
               "cpu_us_per_send": {n: round(1e6 * used[n] / sends, 1) for n in names},
               "cpu_pct": {n: round(100 * used[n] / max(1e-9, wall)) for n in names}}
        self.runs.append(row)
        return row

    def run(self, rounds: int) -> None:
        for mode in (ONE, DIRECT, GROUPS):
            self.run_one(mode, -1, 1.0)     # warm-up: connections, caches, the streams' batching
        self.runs.clear()
        order = (ONE, DIRECT, GROUPS)
        for rnd in range(rounds):
            for mode in (order if rnd % 2 == 0 else order[::-1]):
                row = self.run_one(mode, rnd, self.duration)
                cpu = row["cpu_us_per_send"]
                err = f"  ERRORS {row['errors']}" if row["error_count"] else ""
                self.log(f"  [{rnd + 1}/{rounds}] {mode:16} {row['msgs_per_s']:>7,} sends/s  CPU µs/send: "
                         + " ".join(f"{n}{'*' if n in row['masters'] else ''} {v:.1f}" for n, v in cpu.items()) + err)


def _med(xs) -> float:
    return round(statistics.median(xs), 1)


def report(runs: list[dict], machine: dict, env: dict, config: dict, log=print) -> dict:
    def rows(mode: str) -> list[dict]:
        return [r for r in runs if r["mode"] == mode]

    def master_of(r: dict) -> float:
        return r["cpu_us_per_send"][r["masters"][0]]

    def replicas_of(r: dict) -> float:
        return statistics.mean(v for n, v in r["cpu_us_per_send"].items() if n != r["masters"][0])

    per_mode = {}
    for mode in (ONE, DIRECT, GROUPS):
        rs = rows(mode)
        per_mode[mode] = {"msgs_per_s_median": round(statistics.median(r["msgs_per_s"] for r in rs)),
                          "busiest_cpu_us_per_send_median": _med(max(r["cpu_us_per_send"].values()) for r in rs),
                          "idlest_cpu_us_per_send_median": _med(min(r["cpu_us_per_send"].values()) for r in rs),
                          "errors": sum(r["error_count"] for r in rs)}
        if mode != GROUPS:
            per_mode[mode]["master_cpu_us_per_send_median"] = _med(master_of(r) for r in rs)
            per_mode[mode]["replica_cpu_us_per_send_median"] = _med(replicas_of(r) for r in rs)
    one, direct, grp = per_mode[ONE], per_mode[DIRECT], per_mode[GROUPS]
    ratio = round(grp["busiest_cpu_us_per_send_median"] / one["master_cpu_us_per_send_median"], 3)
    balance = round(statistics.median(max(r["cpu_us_per_send"].values()) / min(r["cpu_us_per_send"].values())
                                      for r in rows(GROUPS)), 3)
    m = one["master_cpu_us_per_send_median"]
    r_ = direct["replica_cpu_us_per_send_median"]
    f = round(3 * (one["replica_cpu_us_per_send_median"] - r_), 1)
    mean_groups = _med(statistics.mean(r["cpu_us_per_send"].values()) for r in rows(GROUPS))

    def c(M: int) -> float:
        return m / M + r_ * (M - 1) / M + f * (M - 1) / M ** 2

    projection = {str(M): {"cpu_us_per_send": round(c(M), 1), "sends_per_s_per_core": round(1e6 / c(M)),
                           "over_one_master": round(m / c(M), 2),
                           "arithmetic": f"{m}/{M} + {r_}*{M - 1}/{M} + {f}*{M - 1}/{M}^2 = {c(M):.1f} µs"}
                  for M in PROJECT}
    goals = {"busiest_over_master_at_most": GOAL_RATIO, "busiest_over_master": ratio,
             "ratio_met": ratio <= GOAL_RATIO, "balance_at_most": GOAL_BALANCE, "balance": balance,
             "balance_met": balance <= GOAL_BALANCE}
    log(f"  busiest(groups) / master(one group) = {grp['busiest_cpu_us_per_send_median']:.1f} / {m:.1f} = {ratio:.2f} "
        f"(goal <= {GOAL_RATIO}: {'met' if goals['ratio_met'] else 'not met'}); balance busiest/idlest {balance:.2f} "
        f"(goal <= {GOAL_BALANCE}: {'met' if goals['balance_met'] else 'not met'})")
    log(f"  sends/s: one group {one['msgs_per_s_median']:,}, groups {grp['msgs_per_s_median']:,}")
    log(f"  fit: m {m} µs, r {r_} µs, f = 3 * ({one['replica_cpu_us_per_send_median']} - {r_}) = {f} µs; "
        f"c(3) {c(3):.1f} µs against the groups cluster's mean {mean_groups} µs")
    for M, p in projection.items():
        log(f"  M={M}: {p['arithmetic']}: {p['sends_per_s_per_core']:,} cluster sends/s at one core per member, "
            f"{p['over_one_master']}x one master")
    return {"benchmark": "groups", "machine": machine, "environment": env, "config": config,
            "results": per_mode, "goals": goals,
            "fit": {"m_us": m, "r_us": r_, "f_us": f, "c3_predicted_us": round(c(3), 1),
                    "groups_mean_measured_us": mean_groups},
            "projection": projection, "runs": runs}


def suite(quick: bool, log=print) -> dict:
    duration, rounds = (1.0, 2) if quick else (3.0, 3)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    before = loadavg()
    log(f"groups: 3 nodes majority, one group against three, {QUEUES} queues, send 100 B, {rounds} rounds")
    pool = Pool(WORKERS)
    clusters: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="groups-bench-") as d:
        try:
            for g in (1, 3):
                (Path(d) / f"g{g}").mkdir()
                clusters[g] = _start(Path(d) / f"g{g}", g)
            b = Bench(clusters, pool, duration, log)
            b.setup()
            b.run(rounds)
        finally:
            for c in clusters.values():
                c.stop()
            pool.close()
    config = {"duration_s": duration, "rounds": rounds, "connections": CONNECTIONS, "generator_processes": WORKERS,
              "queues": QUEUES, "policy": "majority", "nodes": 3, "body_bytes": 100, "in_memory": True}
    return report(b.runs, machine, {"loadavg_before": before, "loadavg_after": loadavg()}, config, log)
