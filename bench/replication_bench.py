"""Replication benchmark (issues 5 and 18): what the replicated cluster costs and what it buys, measured
with real `elasticmq-py serve` processes on 127.0.0.1, all in one run.

1. Throughput and latency. The same load generator and scenarios as the endpoint benchmark
   (bench.loadgen: raw keep-alive HTTP, JSON protocol, every response validated): send 100 B at
   16 connections, send-batch 10 x 100 B, the receive + delete-batch cycle on a pre-filled queue,
   and sequential send latency on one connection. Targets: one `elasticmq-py serve` without a
   cluster, a 3-node cluster with ack policy `majority`, and one with `none`; the clients talk
   to the master's endpoint. All three are up for the whole part (an idle 3-node cluster costs
   ~5-10% of a core for its Raft heartbeats; each run records it); every scenario runs
   every target in turn, round after round, with the order reversed every other round. Ratios
   are taken within each round (runs seconds apart) and their median reported. The single node
   writes no history log, and neither do these clusters (the comparison is of replication
   alone); 1b then measures send 100 B against the kill rounds' 3-node majority cluster, which
   writes its history (a JSON line per client operation on the master), beside the single node.
2. The `none` window (the HornetQ race): rounds of "send unique bodies at full speed to the
   master, kill -9 it, drain the queue through the new master", counting acknowledged sends that
   never come back. `majority` is the control, on its own cluster, rounds alternating.
3. State transfer: a 2-of-3 cluster holding 1,000,000 100-byte messages (a 1 MB replication log,
   so the third member must be brought up by transfer, not by replaying the log); a steady
   send load runs throughout while the third node starts empty and joins. The master's send rate
   is sampled before and during the transfer. A transfer that does not complete within generous
   bounds is reported as such, with the cluster's timeline from the nodes' histories (views,
   masters, transfers started and finished, time with an active master).
4. End-to-end failover, in the same kill rounds as 2: from the kill to the first acknowledged
   SendMessage through a surviving node's endpoint (the other survivor forwards to the new master).

Goals (issue 18, measured side by side in one run): the majority master's CPU per send at most
1.5x the single node's, each replica's at most 0.5x (CPU of each process from /proc, per
acknowledged request; part 1 also splits it by thread: the event loop, libzmq's threads, the
rest, mostly pysyncobj's tick thread); added median latency at 1 connection <= 0.5 ms;
on this 2-core machine throughput >= 45% of single for `majority` and >= 55% for `none`, for
send, send-batch and receive+delete-batch; failover <= 0.4 s median with no acknowledged send
lost; a transfer of 1,000,000 messages <= 10 s (and issue 5's: the master keeps >= 70% of its
throughput meanwhile).

    python -m bench --only replication [--quick]
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import http.client
import json
import multiprocessing as mp
import os
import platform
import statistics
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench import wake_cost
from bench.endpoint_bench import _machine_busy
from bench.loadgen import servers
from bench.loadgen.runner import Job, Pool, Result
from bench.loadgen.sqs import AMZ_DATE, AUTH, JSON, JSON_CT, Api

SINGLE, MAJORITY, NONE = "single", "majority", "none"
TARGETS = (SINGLE, MAJORITY, NONE)
LABEL = {SINGLE: "single node", MAJORITY: "3 nodes, majority", NONE: "3 nodes, none"}
ALL = ["n1", "n2", "n3"]
CONNECTIONS = 16
PROCESSES = 2
# bench/wake_cost.py's cycles, full run and --quick (about 1.3 s and 0.3 s on this machine)
WAKE_COST_SIZE = {False: {"cycles": 1000}, True: {"cycles": 200}}
# Issue 18's goals (issue 5 asked for 80% of single's throughput and +1 ms; its closing note
# showed why two shared cores cannot give that, and issue 18 measures CPU per operation instead).
# The throughput ratios hold for this 2-core machine only; the CPU ratios hold on any.
GOALS = {"master_cpu_ratio": 1.5, "replica_cpu_ratio": 0.5, "throughput_ratio_majority": 0.45,
         "throughput_ratio_none": 0.55, "added_p50_ms": 0.5, "transfer_s": 10.0,
         "master_throughput_during_transfer": 0.70, "failover_median_s": 0.4}
_TICK = os.sysconf("SC_CLK_TCK")
# Part 3 loads the machine flat out (three nodes, the joiner restoring a million messages, the
# generator) next to whatever else runs here; with the LAN timers a node starved for 0.2 s
# triggers an election, and the part would measure the scheduler rather than the transfer.
# These are the timers tests/cluster/test_replication.py's join test uses for the same reason.
TRANSFER_TIMING_KW = dict(heartbeat=0.1, election_min=0.8, election_max=1.6, vote_guard=0.7, lease=0.6,
                          leader_fallback=2.0, connection_timeout=2.0, keepalive=0.4, suspect=2.0, debounce=0.5)
CHUNK_S, AFTER_S = 10.0, 4.0   # part 3: the steady load's chunks; how long it goes on after catch-up
TRANSFER_TIMING = ", ".join(f"{k}={v}" for k, v in TRANSFER_TIMING_KW.items())


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


@dataclass
class Sizes:
    duration: float         # per measured run
    rounds: int
    prefill: int
    kill_rounds: int        # per policy
    send_before_kill: float
    transfer_messages: int
    load_before_join: float

    @classmethod
    def of(cls, quick: bool) -> "Sizes":
        if quick:
            return cls(1.0, 1, 150_000, 2, 1.0, 100_000, 2.0)
        return cls(3.0, 3, 400_000, 10, 1.5, 1_000_000, 5.0)


# -- processes and their CPU ------------------------------------------------------------------

def _cpu_of(pid: int) -> float:
    """user+sys CPU seconds of a process (all its threads); nan once it is gone."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return float("nan")


def _threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process by kind of thread: ``loop`` (the main thread: the event loop),
    ``zmq`` (libzmq's I/O and reaper threads), ``other`` (pysyncobj's tick thread, and a
    journal's writer where there is one). Threads that ended since are not counted."""
    out = {"loop": 0.0, "zmq": 0.0, "other": 0.0}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        f = raw.rsplit(")", 1)[1].split()
        cpu = (int(f[11]) + int(f[12])) / _TICK
        kind = "loop" if tid == str(pid) else "zmq" if comm.startswith("ZMQbg") else "other"
        out[kind] += cpu
    return out


def _loop_sleeps(pid: int) -> int | None:
    """How many times the process's main thread (its event loop) has slept: its voluntary
    context switches. A loop that always has work never sleeps; see bench/wake_cost.py for
    what each sleep costs the work that follows it."""
    try:
        for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _background_busy(seconds: float = 2.0) -> float:
    """% of one core the machine spends busy while this benchmark runs nothing."""
    m0, t0 = _machine_busy(), time.monotonic()
    time.sleep(seconds)
    return round(100 * (_machine_busy() - m0) / (time.monotonic() - t0))


def _port(c: Any, name: str) -> int:
    return int(c.procs[name].admin.rpartition(":")[2])


class Target:
    """One system under test: a lone server, or a cluster whose master takes the load."""

    def __init__(self, name: str, single: servers.ServerProc | None = None, cluster: Any = None):
        self.name = name
        self.single = single
        self.cluster = cluster
        self.master: str | None = None
        self.entry: servers.ServerProc | None = single
        self.master_changes = 0

    def pids(self) -> dict[str, int]:
        if self.single is not None:
            return {"server": self.single.proc.pid}
        return {n: p.popen.pid for n, p in self.cluster.procs.items() if p.popen.poll() is None}

    def ready(self, timeout: float = 30.0) -> None:
        """Point `entry` at the active master (it may have moved since the last run)."""
        if self.cluster is None:
            return
        c = self.cluster
        m = c.wait_for(f"{self.name}: a stable master", c.stable_master(members=set(ALL)), timeout)
        if self.master is not None and m != self.master:
            self.master_changes += 1
        if m != self.master:
            self.master = m
            self.entry = servers.ServerProc(f"{self.name}/{m}", c.procs[m].popen, _port(c, m), (JSON,))
        c.wait_for(f"{self.name}: replicas caught up", lambda: _replicas_caught_up(c, m), timeout)

    def alive(self) -> bool:
        return self.entry is not None and self.entry.alive()


def _stream_counts(t: Target) -> dict[str, int] | None:
    """The master's log end (one entry per batch) and its stream frame counters, from its status
    (taken outside the measured window: the call costs the master CPU)."""
    if t.cluster is None or t.master is None:
        return None
    st = t.cluster.status(t.master)
    if not st:
        return None
    rep = st["replication"]
    peers = rep["transport"]["peers"].values()
    return {"batches": rep["log"]["last_seq"], "frames_out": sum(p["frames_out"] for p in peers),
            "frames_in": sum(p["frames_in"] for p in peers)}


def _replicas_caught_up(c: Any, master: str) -> bool:
    st = c.status(master)
    if not st:
        return False
    reps = st["replication"]["replicas"]
    return all(r["connected"] and not r["needs_transfer"] and r["lag_batches"] == 0 for r in reps.values())


class CpuWindow:
    """CPU of every process of every target, of the generator and of the rest of the machine."""

    def __init__(self, targets: dict[str, Target], measured: Target):
        self.targets, self.measured = targets, measured

    def _sample(self) -> tuple[dict[tuple[str, str], float], float, float]:
        per = {(t.name, n): _cpu_of(pid) for t in self.targets.values() for n, pid in t.pids().items()}
        return per, _machine_busy(), time.monotonic()

    def _threads(self) -> dict[str, dict[str, float]]:
        return {n: _threads_cpu(pid) for n, pid in self.measured.pids().items()}

    def _sleeps(self) -> dict[str, int | None]:
        return {n: _loop_sleeps(pid) for n, pid in self.measured.pids().items()}

    def start(self) -> None:
        self.sa = self._sleeps()
        self.ta = self._threads()
        self.a = self._sample()

    def stop(self) -> None:
        self.b = self._sample()
        self.tb = self._threads()
        self.sb = self._sleeps()

    def shares(self, client_cpu: float, requests: int = 0) -> dict:
        (pa, ma, ta), (pb, mb, tb) = self.a, self.b
        wall = max(1e-9, tb - ta)
        used = {k: pb[k] - pa[k] for k in pb if k in pa and pb[k] == pb[k] and pa[k] == pa[k]}
        m = self.measured
        mine = {n: v for (t, n), v in used.items() if t == m.name}
        master = mine.get("server" if m.single else m.master, 0.0)
        replicas = sum(v for n, v in mine.items() if n not in ("server", m.master))
        idle = sum(v for (t, _), v in used.items() if t != m.name)
        other = max(0.0, (mb - ma) - sum(used.values()) - client_cpu)
        pct = lambda x: round(100 * x / wall)  # noqa: E731
        out = {"master_cpu_pct": pct(master), "replicas_cpu_pct": pct(replicas),
               "client_cpu_pct": pct(client_cpu), "idle_targets_cpu_pct": pct(idle), "other_cpu_pct": pct(other)}
        if requests:
            # CPU cost is what a saturated machine divides among the processes, so it explains
            # a throughput ratio independently of how busy the machine was.
            us = lambda x: round(1e6 * x / requests, 1)  # noqa: E731
            out["master_cpu_us_per_req"] = us(master)
            out["all_nodes_cpu_us_per_req"] = us(master + replicas)
            n_replicas = sum(1 for n in mine if n not in ("server", m.master))
            if n_replicas:
                # issue 18: what each replica spends per operation it applies (their mean)
                out["replica_cpu_us_per_req"] = us(replicas / n_replicas)
            # where each process's CPU went, by thread (see _threads_cpu), per request,
            # and how often each loop slept per request: each sleep is a wake-up whose cost
            # environment.wake_cost_* measures (the replicas' is their mean, as their CPU)
            by_thread: dict[str, dict[str, float]] = {}
            sleeps: dict[str, list[float]] = {}
            for n, b in self.tb.items():
                a = self.ta.get(n) or {}
                role = "master" if n in ("server", m.master) else "replica"
                acc = by_thread.setdefault(role, {"loop": 0.0, "zmq": 0.0, "other": 0.0})
                for kind, v in b.items():
                    acc[kind] += (v - a.get(kind, 0.0)) / (1 if role == "master" else max(1, n_replicas))
                slept_a, slept_b = self.sa.get(n), self.sb.get(n)
                if slept_a is not None and slept_b is not None:
                    sleeps.setdefault(role, []).append((slept_b - slept_a) / requests)
            out["cpu_us_per_req_by_thread"] = {role: {k: us(v) for k, v in d.items()} for role, d in by_thread.items()}
            out["loop_sleeps_per_req"] = {role: round(statistics.mean(v), 3) for role, v in sleeps.items()}
        return out


# -- control-plane calls (JSON protocol, plain http.client; not measured) -----------------------

def call(port: int, action: str, params: dict, timeout: float = 30.0, retry_s: float = 0.0) -> tuple[int, dict]:
    """One JSON-protocol call; with `retry_s`, 503s and throttling are retried that long."""
    deadline = time.monotonic() + retry_s
    while True:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.request("POST", "/", json.dumps(params), {"Content-Type": JSON_CT, "X-Amz-Target": f"AmazonSQS.{action}",
                                                         "X-Amz-Date": AMZ_DATE, "Authorization": AUTH,
                                                         "Host": f"localhost:{port}"})
            r = c.getresponse()
            status, body = r.status, json.loads(r.read() or b"{}")
        except OSError as e:
            status, body = 0, {"error": repr(e)}
        finally:
            c.close()
        if status == 200 or time.monotonic() > deadline or status not in (0, 400, 503):
            return status, body
        if status == 400 and "Throttl" not in str(body.get("__type", "")):
            return status, body
        time.sleep(0.05)


def create_queue(port: int, name: str) -> str:
    status, body = call(port, "CreateQueue", {"QueueName": name}, retry_s=15)
    if status != 200:
        raise RuntimeError(f"CreateQueue {name} on :{port}: {status} {body}")
    return body["QueueUrl"]


def queue_url_at(port: int, url: str) -> str:
    """The same queue, addressed through another node's endpoint."""
    return f"http://localhost:{port}/" + url.split("/", 3)[3]


# -- part 1: throughput and latency ---------------------------------------------------------------

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
            before = _stream_counts(t)
            r = self.pool.run(self._job(sc, t, url), on_start=window.start)
            window.stop()
            after = _stream_counts(t)
        finally:
            call(t.entry.port, "DeleteQueue", {"QueueUrl": url}, retry_s=10)
        row = {"scenario": sc.key, "target": t.name, "round": rnd, "master": t.master,
               "connections": sc.connections, "requests": r.requests, "messages": r.messages,
               "seconds": round(r.wall, 3), "req_per_s": round(r.req_rate), "msgs_per_s": round(r.msg_rate),
               "p50_ms": round(1e3 * r.percentile(50), 3), "p90_ms": round(1e3 * r.percentile(90), 3),
               "p99_ms": round(1e3 * r.percentile(99), 3), "errors": r.errors, "error_count": r.error_count,
               "loadavg": _loadavg()[0]}
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
                    self.log(f"  [{rnd + 1}/{self.sizes.rounds}] {sc.title:22} {LABEL[name]:18} {_fmt(row)}")
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
                # issue 18: CPU per acknowledged operation, each process against the single node's
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


# -- parts 2 and 4: kill rounds -------------------------------------------------------------------

def _warm(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def race_sender(port: int, queue_url: str, tag: str, connections: int, start_at: float, max_s: float) -> dict:
    """Runs in a worker process: send unique 100-byte bodies on `connections` keep-alive
    connections as fast as the master answers, until the connections die (the kill) or `max_s`.
    Returns the acknowledged bodies (200, a MessageId and the right MD5)."""
    return asyncio.run(_race(port, queue_url, tag, connections, start_at, max_s))


async def _race(port: int, queue_url: str, tag: str, connections: int, start_at: float, max_s: float) -> dict:
    api = Api(JSON, f"localhost:{port}", queue_url)
    acked: list[str] = []
    errors: Counter[str] = Counter()
    state = {"requests": 0, "in_flight_at_end": 0, "last_ack": 0.0}

    async def conn(i: int) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as e:
            errors[f"connect_failed:{type(e).__name__}:{e}"[:120]] += 1
            return
        n = 0
        deadline = start_at + max_s
        try:
            while time.time() < deadline:
                n += 1
                body = f"{tag}-{i:03d}-{n:08d}-".ljust(100, "x")
                writer.write(api.send(body))
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            length = int(v)
                    data = await reader.readexactly(length)
                except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    state["in_flight_at_end"] += 1
                    return
                state["requests"] += 1
                status = int(head.split(b" ", 2)[1])
                if status != 200:
                    errors[api.error_kind(status, data)] += 1
                    continue
                o = json.loads(data)
                if o.get("MessageId") and o.get("MD5OfMessageBody") == hashlib.md5(body.encode()).hexdigest():
                    acked.append(body)
                    state["last_ack"] = time.time()
                else:
                    errors["bad_send_response"] += 1
        finally:
            writer.close()

    await asyncio.sleep(max(0.0, start_at - time.time()))
    t0 = time.time()
    if t0 > start_at + 0.2:
        errors["started_late"] += 1
    await asyncio.gather(*(conn(i) for i in range(connections)))
    return {"acked": acked, "errors": dict(errors), "t0": t0, **state}


class Prober:
    """SendMessage through one endpoint every few ms on its own connections (a failed or refused
    attempt is retried at once), recording (sent, answered, status) of every attempt."""

    def __init__(self, port: int, queue_url: str, threads: int = 2, pace_s: float = 0.005):
        self.port, self.url, self.pace = port, queue_url, pace_s
        self.attempts: list[tuple[float, float, int | str]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(threads)]

    def start(self) -> "Prober":
        for t in self.threads:
            t.start()
        return self

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)

    def _loop(self, k: int) -> None:
        conn = None
        headers = {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.SendMessage", "X-Amz-Date": AMZ_DATE,
                   "Authorization": AUTH, "Host": f"localhost:{self.port}"}
        i = 0
        while not self.stop.is_set():
            i += 1
            t0 = time.time()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3)
                conn.request("POST", "/", json.dumps({"QueueUrl": self.url, "MessageBody": f"probe {k} {i}"}), headers)
                r = conn.getresponse()
                r.read()
                status: int | str = r.status
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
            self.attempts.append((t0, time.time(), status))
            time.sleep(self.pace)
        if conn is not None:
            conn.close()

    def first_ack_after(self, t_kill: float, sent_after: bool = True) -> float | None:
        ok = [b for a, b, s in self.attempts if s == 200 and b > t_kill and (a >= t_kill or not sent_after)]
        return min(ok) - t_kill if ok else None


def drain_bodies(port: int, url: str, empties: int = 3) -> list[str]:
    """Every body the queue hands out (received with a long visibility timeout, not deleted)."""
    out: list[str] = []
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.ReceiveMessage", "X-Amz-Date": AMZ_DATE,
               "Authorization": AUTH, "Host": f"localhost:{port}"}
    req = json.dumps({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 3600, "WaitTimeSeconds": 0})
    empty, failures = 0, 0
    try:
        while empty < empties:
            c.request("POST", "/", req, headers)
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                failures += 1
                if failures > 200:
                    raise RuntimeError(f"drain: {r.status} {body[:200]!r}")
                time.sleep(0.05)
                continue
            msgs = json.loads(body).get("Messages") or []
            empty = 0 if msgs else empty + 1
            out.extend(m["Body"] for m in msgs)
    finally:
        c.close()
    return out


class KillPart:
    """Parts 2 and 4: per round, full-speed unique sends to the master, a kill -9 of the master,
    probes through both survivors; then the queue is drained through the new master."""

    def __init__(self, clusters: dict[str, Target], sizes: Sizes, log=print):
        self.clusters, self.sizes, self.log = clusters, sizes, log
        self.rounds: list[dict] = []

    def run(self) -> dict:
        with ProcessPoolExecutor(PROCESSES, mp_context=mp.get_context("spawn")) as ex:
            # Every worker started and this module imported before the first round: a worker
            # spawned on demand would connect after the kill.
            list(ex.map(_warm, [0.5] * PROCESSES))
            for i in range(self.sizes.kill_rounds):
                for policy in ((NONE, MAJORITY) if i % 2 == 0 else (MAJORITY, NONE)):
                    for _attempt in range(3):
                        try:
                            row = self.one(ex, self.clusters[policy], i)
                        except Exception as e:  # a round that cannot finish is reported, the rest go on
                            row = {"policy": policy, "round": i, "failed": f"{type(e).__name__}: {e}"[:500]}
                            self.log(f"  kill round {i + 1} {policy}: FAILED {row['failed']}")
                        self.rounds.append(row)
                        if "invalid" not in row:
                            break
                        self.log(f"  kill round {i + 1} {policy}: not counted ({row['invalid']}); again")
        return self.summary()

    def one(self, ex: ProcessPoolExecutor, t: Target, i: int) -> dict:
        c = t.cluster
        t.ready()
        master = t.master
        mport = _port(c, master)
        survivors = [n for n in ALL if n != master]
        tag = f"{t.name}{i}-{uuid.uuid4().hex[:6]}"
        url = create_queue(mport, f"race-{tag}")
        probe_url = create_queue(mport, f"probe-{tag}")
        start_at = time.time() + 0.5
        futs = [ex.submit(race_sender, mport, url, f"{tag}w{w}", CONNECTIONS // PROCESSES, start_at, 30.0)
                for w in range(PROCESSES)]
        time.sleep(max(0.0, start_at + self.sizes.send_before_kill - 0.3 - time.time()))
        probers = {n: Prober(_port(c, n), queue_url_at(_port(c, n), probe_url)).start() for n in survivors}
        time.sleep(0.3)
        la = _loadavg()[0]
        still = c.stable_master(members=set(ALL))() == master
        c.kill(master)
        t_kill = c.killed_at(master)
        senders = [f.result(timeout=60) for f in futs]
        new = c.wait_for("a new master", c.stable_master(among=survivors), 20)
        deadline = time.time() + 15
        while time.time() < deadline and any(p.first_ack_after(t_kill) is None for p in probers.values()):
            time.sleep(0.05)
        for p in probers.values():
            p.close()
        activated = [e["ts"] for e in c.history(new) if e["event"] == "activated" and e["ts"] >= t_kill]
        nport = _port(c, new)
        got = drain_bodies(nport, queue_url_at(nport, url))
        acked = [b for s in senders for b in s["acked"]]
        got_set = set(got)
        lost = [b for b in acked if b not in got_set]
        send_s = max(s["last_ack"] for s in senders) - min(s["t0"] for s in senders) if acked else 0.0
        rate = len(acked) / send_s if send_s > 0 else 0.0
        first = {n: p.first_ack_after(t_kill) for n, p in probers.items()}
        first_any = {n: p.first_ack_after(t_kill, sent_after=False) for n, p in probers.items()}
        row = {
            "policy": t.name, "round": i, "old_master": master, "new_master": new,
            "acked_sends": len(acked), "send_rate_per_s": round(rate), "sending_s": round(send_s, 3),
            "unknown_outcome_in_flight": sum(s["in_flight_at_end"] for s in senders),
            "send_errors": dict(sum((Counter(s["errors"]) for s in senders), Counter())),
            "received_after_failover": len(got), "duplicates_received": len(got) - len(got_set),
            "lost_acked": len(lost), "lost_pct": round(100 * len(lost) / len(acked), 3) if acked else None,
            "loss_window_ms": round(1e3 * len(lost) / rate, 1) if rate else None,
            "kill_to_new_master_active_s": round(min(activated) - t_kill, 4) if activated else None,
            "kill_to_first_ack_s": {n: (round(v, 4) if v is not None else None) for n, v in first.items()},
            "kill_to_first_ack_any_send_time_s": {n: (round(v, 4) if v is not None else None)
                                                  for n, v in first_any.items()},
            "probe_attempts_after_kill": {n: Counter(str(s) for a, b, s in p.attempts if a >= t_kill)
                                          for n, p in probers.items()},
            "loadavg": la,
        }
        e2e = [v for v in first.values() if v is not None]
        row["kill_to_first_ack_min_s"] = round(min(e2e), 4) if e2e else None
        if not still or not activated:
            # Mastership had moved (a lease lapse on the busy machine) just before the kill:
            # what was killed was not the serving master, so this round measures nothing.
            row["invalid"] = "the killed node was not the active master at the kill"
        self.log(f"  kill round {i + 1}/{self.sizes.kill_rounds} {t.name:8} acked {len(acked):6} "
                 f"({row['send_rate_per_s']:,}/s) lost {len(lost):5} ({row['lost_pct']}%), new master active "
                 f"+{row['kill_to_new_master_active_s']} s, first ack via survivors "
                 f"{ {n: v for n, v in row['kill_to_first_ack_s'].items()} }")
        for q in (url, probe_url):
            call(nport, "DeleteQueue", {"QueueUrl": queue_url_at(nport, q)}, retry_s=5)
        c.start(master)
        t.master = None
        t.ready(timeout=60)
        return row

    def summary(self) -> dict:
        out: dict[str, Any] = {}
        for policy in (NONE, MAJORITY):
            rows = [r for r in self.rounds if r["policy"] == policy and "failed" not in r and "invalid" not in r]
            acked = sum(r["acked_sends"] for r in rows)
            lost = sum(r["lost_acked"] for r in rows)
            e2e = [r["kill_to_first_ack_min_s"] for r in rows if r["kill_to_first_ack_min_s"] is not None]
            act = [r["kill_to_new_master_active_s"] for r in rows if r["kill_to_new_master_active_s"] is not None]
            out[policy] = {
                "rounds": len(rows), "failed_rounds": sum(1 for r in self.rounds if r["policy"] == policy and "failed" in r),
                "invalid_rounds": sum(1 for r in self.rounds if r["policy"] == policy and "invalid" in r),
                "acked_sends": acked, "lost_acked": lost,
                "lost_pct": round(100 * lost / acked, 3) if acked else None,
                "rounds_with_loss": sum(1 for r in rows if r["lost_acked"]),
                "lost_per_round": [r["lost_acked"] for r in rows],
                "loss_window_ms_median": _median([r["loss_window_ms"] for r in rows if r["loss_window_ms"] is not None]),
                "kill_to_first_ack_s": _stats(e2e),
                "kill_to_new_master_active_s": _stats(act),
            }
        return {"by_policy": out, "rounds": self.rounds}


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def _stats(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    return {"n": len(s), "median_s": round(statistics.median(s), 4), "max_s": round(s[-1], 4),
            "min_s": round(s[0], 4), "p90_s": round(s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))], 4)}


# -- part 3: state transfer -------------------------------------------------------------------------

class Sampler:
    """Every `every` s: how many messages the steady-load queue holds (the master's completed
    sends; a read, answered without replication) and the CPU of each node."""

    def __init__(self, port: int, url: str, pids: Callable[[], dict[str, int]], every: float = 0.25):
        self.port, self.url, self.pids, self.every = port, url, pids, every
        self.samples: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "Sampler":
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def _loop(self) -> None:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.GetQueueAttributes", "X-Amz-Date": AMZ_DATE,
                   "Authorization": AUTH, "Host": f"localhost:{self.port}"}
        req = json.dumps({"QueueUrl": self.url, "AttributeNames": ["ApproximateNumberOfMessages"]})
        nxt = time.time()
        while not self.stop.is_set():
            t0 = time.time()
            try:
                c.request("POST", "/", req, headers)
                r = c.getresponse()
                body = r.read()
                n = int(json.loads(body)["Attributes"]["ApproximateNumberOfMessages"]) if r.status == 200 else None
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                n = None
            t1 = time.time()
            self.samples.append({"t": t1, "rtt": t1 - t0, "count": n,
                                 "cpu": {k: _cpu_of(p) for k, p in self.pids().items()}, "busy": _machine_busy()})
            nxt += self.every
            self.stop.wait(max(0.0, nxt - time.time()))
        c.close()

    def rate(self, a: float, b: float) -> dict | None:
        """Sends/s completed between wall times a and b (interpolated from the samples), and
        the CPU share of each node and of the machine over the same span."""
        s = [x for x in self.samples if x["count"] is not None]
        lo = [x for x in s if x["t"] <= a]
        hi = [x for x in s if x["t"] >= b] or [x for x in s if x["t"] > a][-1:]
        if not lo or not hi:
            return None
        x, y = lo[-1], hi[0]
        span = y["t"] - x["t"]
        if span <= 0:
            return None
        cpu = {k: round(100 * (y["cpu"][k] - x["cpu"].get(k, y["cpu"][k])) / span)
               for k in y["cpu"] if k in x["cpu"]}
        return {"from": round(x["t"], 3), "to": round(y["t"], 3), "seconds": round(span, 3),
                "sends_per_s": round((y["count"] - x["count"]) / span), "cpu_pct": cpu,
                "machine_busy_pct": round(100 * (y["busy"] - x["busy"]) / span),
                "max_sample_gap_s": round(max((q["t"] - p["t"] for p, q in zip(s, s[1:]) if x["t"] <= p["t"] < y["t"]),
                                              default=0.0), 3)}


class TransferPart:
    def __init__(self, workdir: Path, pool: Pool, sizes: Sizes, log=print):
        self.workdir, self.pool, self.sizes, self.log = workdir, pool, sizes, log

    def run(self) -> dict:
        from cluster.config import Timing
        from elasticmq_py.testing.cluster import Cluster

        c = Cluster(self.workdir, ALL, timing=Timing(**TRANSFER_TIMING_KW))
        # A 16 MB replication log: the fill (~230 MB of mutations) trims it long before the join,
        # so only a transfer can bring the empty joiner up. (It was 1 MB, as in the 100k join
        # test: at this fill rate that is half a second of history, so any member that fell
        # behind for longer under load needed a 1M-message transfer of its own too.)
        c.replication_config = {"policy": "majority", "log-limit-mb": 16}
        self.partial: dict[str, Any] = {}
        try:
            return self._run(c)
        except Exception as e:
            # What happened instead is the result: the timeline from the nodes' histories.
            self.log(f"  transfer did not complete: {type(e).__name__}: {str(e)[:300]}")
            return {**self.partial, "converged": False, "failure": f"{type(e).__name__}: {e}".split("; statuses")[0][:500],
                    "timeline": _timeline(c, self.partial.get("t_join"))}
        finally:
            c.close()

    def _run(self, c: Any) -> dict:
        n = self.sizes.transfer_messages
        for name in ("n1", "n2"):
            c.start(name)
        master = c.wait_for("a master of two", c.stable_master(among=["n1", "n2"]), 20)
        mport = _port(c, master)
        host = f"localhost:{mport}"
        bulk = create_queue(mport, "bulk")
        steady = create_queue(mport, "steady")
        t0 = time.time()
        fill = self.pool.run(Job(kind="send_batch", protocol=JSON, port=mport, host_header=host, queue_url=bulk,
                                 connections=CONNECTIONS, processes=PROCESSES, duration=1800.0, body_size=100,
                                 max_messages=n))
        fill_s = time.time() - t0
        self.log(f"  transfer: filled {fill.messages:,} messages in {fill_s:.1f} s "
                 f"({fill.msg_rate:,.0f}/s, errors {fill.errors or 0})")
        c.wait_for("n2 caught up", lambda: _replicas_caught_up(c, master), 120)
        status, attrs = call(mport, "GetQueueAttributes", {"QueueUrl": bulk, "AttributeNames": ["All"]})
        held = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
        self.partial.update(messages_filled=fill.messages, fill_seconds=round(fill_s, 1), fill_errors=fill.errors,
                            messages_held_at_join=held, master=master)

        def pids() -> dict[str, int]:
            return {k: p.popen.pid for k, p in c.procs.items() if p.popen.poll() is None}

        sampler = Sampler(mport, steady, pids).start()
        # The load runs in back-to-back chunks until the joiner has caught up (how long that
        # takes is what is measured); the pool's lead between chunks is ~0.5 s without load,
        # every CHUNK_S, in every window alike.
        chunks: list[Result] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                chunks.append(self.pool.run(Job(kind="send", protocol=JSON, port=mport, host_header=host,
                                                 queue_url=steady, connections=CONNECTIONS, processes=PROCESSES,
                                                 duration=CHUNK_S, body_size=100)))

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        t_load = time.time() + 0.4   # the pool's start lead
        time.sleep(0.4 + self.sizes.load_before_join)
        joiner = "n3"
        t_start = time.time()
        self.partial["t_join"] = t_start
        try:
            c.start(joiner)
            t_up = time.time()
            # Generous bounds (the goal is 10 s): past them the transfer is reported as failed.
            lt = c.wait_for("the joiner's state transfer", lambda: ((c.status(joiner) or {}).get("replication") or {})
                            .get("last_transfer"), 60 + n / 5_000, interval=0.1)
            t_transferred = time.time()
            c.wait_for("the joiner caught up", lambda: _caught_up(c, master, joiner), 120, interval=0.1)
            t_caught = time.time()
        except BaseException:
            stop.set()
            self.partial["master_rate_before"] = sampler.rate(t_load + 0.5, t_start)
            self.partial["master_rate_after_join_started"] = sampler.rate(t_start, time.time())
            sampler.close()
            loader.join(CHUNK_S + 60)   # the pool must be idle before anyone closes it
            raise
        time.sleep(AFTER_S)
        stop.set()
        loader.join(CHUNK_S + 60)
        sampler.close()
        end_of_load = time.time()
        # The transfer's window, from the joiner's report: it finished at `at` and took duration_s.
        tr_end = lt.get("at") or t_transferred
        tr_start = tr_end - float(lt.get("duration_s") or 0.0)
        before = sampler.rate(t_load + 0.5, t_start)
        during = sampler.rate(tr_start, tr_end)
        join_to_caught = sampler.rate(t_start, t_caught)
        after = sampler.rate(t_caught + 0.5, t_caught + AFTER_S)
        c.wait_for("all three converge (digests)", lambda: c.converged(ALL), 180)
        views = {n: [e for e in c.history(n) if e["event"] == "view"] for n in ALL}
        masters = sorted({e["master"] for evs in views.values() for e in evs})
        ratio = round(during["sends_per_s"] / before["sends_per_s"], 3) if before and during and before["sends_per_s"] else None
        cost = None
        if during and lt.get("records"):
            # per snapshot record, what the transfer window cost each node beyond serving the
            # load (the master's CPU minus what it spent per send before the join)
            secs = during["seconds"]
            per_send_before = (before["cpu_pct"].get(master, 0) / 100) / max(1, before["sends_per_s"]) if before else 0.0
            m_cpu = during["cpu_pct"].get(master, 0) / 100 * secs
            cost = {"joiner_cpu_s": round(during["cpu_pct"].get(joiner, 0) / 100 * secs, 2),
                    "master_cpu_s": round(m_cpu, 2),
                    "master_cpu_s_beyond_the_load": round(m_cpu - per_send_before * during["sends_per_s"] * secs, 2)}
            cost["joiner_us_per_record"] = round(1e6 * cost["joiner_cpu_s"] / lt["records"], 1)
            cost["master_us_per_record"] = round(1e6 * cost["master_cpu_s_beyond_the_load"] / lt["records"], 1)
        return {
            "messages_filled": fill.messages, "fill_seconds": round(fill_s, 1), "fill_errors": fill.errors,
            "messages_held_at_join": held, "master": master,
            "joiner_last_transfer": lt,
            "transfer_duration_s": lt.get("duration_s"),
            "join_process_start_s": round(t_up - t_start, 3),
            "start_to_transfer_reported_s": round(t_transferred - t_start, 3),
            "start_to_caught_up_s": round(t_caught - t_start, 3),
            "master_rate_before": before, "master_rate_during_transfer": during,
            "master_rate_start_to_caught_up": join_to_caught, "master_rate_after": after,
            "throughput_during_over_before": ratio, "transfer_cpu": cost,
            "throughput_start_to_caught_up_over_before": (round(join_to_caught["sends_per_s"] / before["sends_per_s"], 3)
                                                          if before and join_to_caught and before["sends_per_s"] else None),
            "steady_load": _merged(chunks, end_of_load - t_load),
            "converged": True,
            "masters_seen": masters, "views_seen_by_master": len(views[master]),
            "timeline": _timeline(c, t_start),
            "samples": [{"t": round(s["t"] - t_load, 3), "count": s["count"], "rtt_ms": round(1e3 * s["rtt"], 1)}
                        for s in sampler.samples],
            "marks_s": {"join_started": round(t_start - t_load, 3), "transfer_started": round(tr_start - t_load, 3),
                        "transfer_finished": round(tr_end - t_load, 3), "caught_up": round(t_caught - t_load, 3)},
        }


def _timeline(c: Any, since: float | None) -> dict:
    """From the nodes' histories after `since`: elections, views, transfers, and how long the
    cluster had an active master."""
    from elasticmq_py.testing.cluster import active_intervals

    hs = c.histories()
    since = since or 0.0
    evs = sorted((e for h in hs.values() for e in h if e["ts"] >= since and e["event"] != "op"), key=lambda e: e["ts"])
    end = time.time()
    served = 0.0
    for _, a, b in active_intervals(hs, c.kills, now=end):
        served += max(0.0, min(b, end) - max(a, since))
    count = Counter(e["event"] for e in evs)
    return {
        "seconds_observed": round(end - since, 1),
        "seconds_with_an_active_master": round(served, 1),
        "views": count["view"] // max(1, len(hs)), "terms": sorted({e.get("term") for e in evs if "term" in e})[-1:],
        "masters": [e["master"] for e in evs if e["event"] == "view" and e["node"] == e["master"]],
        "deactivations": Counter(e.get("reason", "?") for e in evs if e["event"] == "deactivated"),
        "transfers_started": Counter(f"{e['node']}->{e['peer']}" if e.get("direction") == "sent" else f"{e['peer']}->{e['node']}"
                                     for e in evs if e["event"] == "transfer_started"),
        "transfers_finished": Counter(f"{e['node']}:{e.get('direction')}:{e.get('peer')}"
                                      for e in evs if e["event"] == "transfer_finished"),
        "sync_divergent": [(e["node"], e.get("divergent")) for e in evs if e["event"] == "synced" and e.get("divergent")],
        "masters_that_had_to_pull_state_first": [e["node"] for e in evs if e["event"] == "sync_transfer"],
    }


def _merged(chunks: list[Result], seconds: float) -> dict:
    lat = sorted(x for r in chunks for x in r.latencies)
    errors: Counter[str] = Counter()
    for r in chunks:
        errors.update(r.errors)
    pick = lambda p: round(1e3 * lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 3) if lat else None  # noqa: E731
    return {"connections": CONNECTIONS, "chunks": len(chunks), "chunk_s": CHUNK_S, "seconds": round(seconds, 1),
            "sends": sum(r.messages for r in chunks), "errors": dict(errors), "p50_ms": pick(50), "p99_ms": pick(99),
            "max_ms": round(1e3 * lat[-1], 1) if lat else None}


def _caught_up(c: Any, master: str, name: str, within_batches: int = 5) -> bool:
    """The master streams to `name` live: connected, no transfer pending, at most a few batches
    behind (under a steady load a replica is never exactly at the log's end). Asked of whoever
    is master now: if mastership moves during the transfer, the joiner must catch up with the
    new one (the timeline in the report counts the moves)."""
    st = c.status(master)
    current = ((st or {}).get("replication") or {}).get("master")
    if current and current != master and current in c.procs:
        st = c.status(current)
    rep = (st or {}).get("replication") or {}
    if current == name:
        # The joiner was elected and, as a new master must, pulled the state before serving.
        return bool(rep.get("role") == "master" and rep.get("serving"))
    r = (rep.get("replicas") or {}).get(name)
    return bool(rep.get("role") == "master" and r and r["connected"] and not r["needs_transfer"]
                and (r["caught_up"] or r["lag_batches"] <= within_batches))


# -- the suite ----------------------------------------------------------------------------------------

def _goals(tp: dict, kills: dict, tr: dict | None) -> list[dict]:
    goals = []

    def goal(name: str, measured: Any, op: str, target: float, note: str = "") -> None:
        met = None if measured is None else (measured >= target if op == ">=" else measured <= target)
        goals.append({"goal": name, "measured": measured, "target": f"{op} {target}", "met": met, "note": note})

    wr = tp["within_round"]
    for who in ("master", "replica"):
        m = wr.get(f"send_100B: majority {who} CPU/op / single", {})
        goal(f"send_100B: 3-node majority {who}'s CPU per send / single node's", m.get("median"), "<=",
             GOALS[f"{who}_cpu_ratio"], f"median of within-round ratios {m.get('per_round')}")
    for sc in ("send_100B", "send_batch", "receive_delete"):
        for policy in (MAJORITY, NONE):
            m = wr.get(f"{sc}: {policy} / single", {})
            goal(f"{sc}: 3-node {policy} / single node throughput", m.get("median"), ">=",
                 GOALS[f"throughput_ratio_{policy}"], f"median of within-round ratios {m.get('per_round')}")
    m = wr.get("latency_1conn: majority - single, p50 ms", {})
    goal("added median latency, 3-node majority vs single node, 1 conn, ms", m.get("median"), "<=",
         GOALS["added_p50_ms"], f"median of within-round differences {m.get('per_round')}")
    if tr is not None:
        held = tr.get("messages_held_at_join") or 0
        small = "" if held >= 1_000_000 else f"; only {held:,} messages (quick size): not the goal's 1,000,000"
        goal("state transfer of the master's messages, joiner's duration_s", tr.get("transfer_duration_s"), "<=",
             GOALS["transfer_s"], f"{held:,} messages held; from starting the joiner's "
             f"process to caught up: {tr.get('start_to_caught_up_s')} s{small}")
        goal("master throughput during the transfer / before", tr.get("throughput_during_over_before"), ">=",
             GOALS["master_throughput_during_transfer"],
             f"from starting the joiner to caught up: {tr.get('throughput_start_to_caught_up_over_before')}{small}")
        if tr.get("converged") is False:
            why = f"the joiner never caught up: {tr.get('failure', '').split('; statuses')[0][:200]}; see transfer.timeline"
            for g in goals[-2:]:
                g["met"], g["note"] = False, why + small
        elif small:
            goals[-1]["met"] = goals[-2]["met"] = None
    f = kills["by_policy"][MAJORITY]["kill_to_first_ack_s"]
    goal("failover (majority): kill -9 of the master -> first acknowledged send via a survivor, median s",
         f.get("median_s"), "<=", GOALS["failover_median_s"], f"n={f.get('n')}, max {f.get('max_s')}")
    goal("majority loses no acknowledged send on failover (count)", kills["by_policy"][MAJORITY]["lost_acked"], "<=", 0)
    return goals


def _print(report: dict) -> None:
    tp, kills, tr = report["throughput"], report["failover"], report.get("transfer")
    env = report["environment"]
    print(f"\nreplication (real processes on 127.0.0.1; clients talk to the master; {env['cpus']} cpus; "
          f"busy before start {env['background_busy_pct']}% of a core, load avg {env['loadavg_before']} -> "
          f"{env['loadavg_after']})")
    print(f"{'scenario':22} {'target':18} {'msgs/s best':>11} {'median':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'vs single':>10} {'CPU us/req master':>17} {'x single':>8} {'replica':>8} {'x single':>8} "
          f"{'all nodes':>9}")
    for sc in SCENARIOS:
        for name in TARGETS:
            r = tp["results"][f"{sc.key}/{name}"]
            if sc.mode == "blocking":
                rel = tp["within_round"].get(f"{sc.key}: {name} - single, p50 ms", {}).get("median")
                print(f"{sc.title:22} {LABEL[name]:18} {'':>11} {'':>8} {r['p50_ms_best']:>7.3f} {r['p99_ms_of_best']:>7.3f} "
                      f"{'' if rel is None else f'+{rel:.3f} ms':>10}")
            else:
                wr = tp["within_round"]
                rel = wr.get(f"{sc.key}: {name} / single", {}).get("median")
                mx = wr.get(f"{sc.key}: {name} master CPU/op / single", {}).get("median")
                rx = wr.get(f"{sc.key}: {name} replica CPU/op / single", {}).get("median")
                rep = r.get("replica_cpu_us_per_req_median")
                x = lambda v: "" if v is None else f"{v:.2f}x"  # noqa: E731
                print(f"{sc.title:22} {LABEL[name]:18} {r['msgs_per_s_best']:>11,} {r['msgs_per_s_median']:>8,} "
                      f"{r['p50_ms_of_best']:>7.3f} {r['p99_ms_of_best']:>7.3f} "
                      f"{'' if rel is None else f'{100 * rel:.0f}%':>10} {r['master_cpu_us_per_req_median']:>17} "
                      f"{x(mx):>8} {'' if rep is None else rep:>8} {x(rx):>8} "
                      f"{r['all_nodes_cpu_us_per_req_median']:>9}")
    wh = report.get("with_history")
    if wh:
        r = wh["results"]
        m = wh["within_round"].get("send_100B: majority master CPU/op / single", {})
        rep = wh["within_round"].get("send_100B: majority replica CPU/op / single", {})
        print(f"with history logs (part 1b), send 100 B, 3 nodes majority: "
              f"{r['send_100B/majority']['msgs_per_s_median']:,} msgs/s median "
              f"({wh['within_round'].get('send_100B: majority / single', {}).get('median')} of single), master "
              f"{r['send_100B/majority']['master_cpu_us_per_req_median']} us/req ({m.get('median')}x single "
              f"{r['send_100B/single']['master_cpu_us_per_req_median']}), replica "
              f"{r['send_100B/majority'].get('replica_cpu_us_per_req_median')} ({rep.get('median')}x)")
    wb, wa = env.get("wake_cost_before") or {}, env.get("wake_cost_after") or {}
    if wb:
        res = tp["results"]
        slept = {name: res.get(f"send_100B/{name}", {}) for name in TARGETS}
        print(f"wake-ups (bench/wake_cost.py): after a {wb['sleep_ms']} ms sleep, {wb['piece']} took "
              f"{wb['cold_us_per_piece']} us of CPU against {wb['hot_us_per_piece']} right after (medians) "
              f"({wb['penalty_us_per_wake']} us per wake-up; at the end {wa.get('penalty_us_per_wake')}); "
              f"send 100 B, loop sleeps per send: single {slept[SINGLE].get('master_loop_sleeps_per_req_median')}, "
              f"majority master {slept[MAJORITY].get('master_loop_sleeps_per_req_median')} replica "
              f"{slept[MAJORITY].get('replica_loop_sleeps_per_req_median')}")
    for policy in (NONE, MAJORITY):
        k = kills["by_policy"][policy]
        f, a = k["kill_to_first_ack_s"], k["kill_to_new_master_active_s"]
        print(f"kill -9 rounds, {policy:8}: {k['rounds']} rounds, acked {k['acked_sends']:,} sends, lost "
              f"{k['lost_acked']:,} ({k['lost_pct']}%) in {k['rounds_with_loss']} rounds {k['lost_per_round']}; "
              f"first ack via a survivor median {f.get('median_s')} s max {f.get('max_s')} s; "
              f"new master active median {a.get('median_s')} s")
    if tr and tr.get("converged") is False:
        tl = tr.get("timeline") or {}
        print(f"state transfer: {tr.get('messages_held_at_join', 0):,} messages: the joiner did NOT catch up "
              f"({tr.get('failure', '').split('; statuses')[0][:120]}); in {tl.get('seconds_observed')} s after the join: "
              f"{tl.get('views')} views, an active master {tl.get('seconds_with_an_active_master')} s, "
              f"transfers started {dict(tl.get('transfers_started') or {})}")
    elif tr:
        b, d = tr["master_rate_before"] or {}, tr["master_rate_during_transfer"] or {}
        print(f"state transfer: {tr['messages_held_at_join']:,} messages, joiner's transfer {tr['transfer_duration_s']} s, "
              f"start to caught up {tr['start_to_caught_up_s']} s; master sends/s before {b.get('sends_per_s')} "
              f"during {d.get('sends_per_s')} ({tr['throughput_during_over_before']})")
    for g in report["goals"]:
        mark = {True: "MET", False: "NOT MET", None: "NOT MEASURED"}[g["met"]]
        print(f"  goal {g['goal']}: {g['measured']} ({g['target']}) {mark}" + (f"  [{g['note']}]" if g["note"] else ""))


def run(quick: bool = False, parts: tuple[str, ...] = ("throughput", "failover", "transfer"), log=print,
        keep: Path | None = None, transfer_messages: int | None = None) -> dict:
    """``keep``: run in this folder and leave the nodes' logs and histories there.
    ``transfer_messages``: part 3's state size instead of the default (to study a transfer)."""
    sizes = Sizes.of(quick)
    if transfer_messages:
        sizes = dataclasses.replace(sizes, transfer_messages=transfer_messages)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return _run(sizes, quick, parts, log, keep)
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as d:
        return _run(sizes, quick, parts, log, Path(d))


def _run(sizes: Sizes, quick: bool, parts: tuple[str, ...], log, tmp: Path) -> dict:
    from elasticmq_py.testing.cluster import PORT_SLOT_ENV
    from elasticmq_py.testing.cluster import Cluster

    # Ports of their own, so these clusters do not race a concurrent `make test` (the xdist
    # workers' slots) or the chaos runner (slot 6) for the same ones.
    os.environ.setdefault(PORT_SLOT_ENV, "7")

    env: dict[str, Any] = {"cpus": os.cpu_count(), "loadavg_before": _loadavg(),
                           "background_busy_pct": _background_busy(),
                           "wake_cost_before": wake_cost.measure(**WAKE_COST_SIZE[quick])}
    log(f"replication bench: {'quick; ' if quick else ''}before starting, the machine was busy "
        f"{env['background_busy_pct']}% of a core, load avg {env['loadavg_before']}")
    report: dict[str, Any] = {"config": {**sizes.__dict__, "connections": CONNECTIONS, "generator_processes": PROCESSES,
                                         "timing": "cluster.config.Timing defaults (parts 1, 2, 4); "
                                                   f"part 3: {TRANSFER_TIMING}"},
                              "environment": env}
    pool = Pool(PROCESSES)
    try:
        if "throughput" in parts or "failover" in parts:
            clusters: dict[str, Cluster] = {}
            single = None

            class NoHistory(Cluster):
                def config_for(self, name: str) -> Any:
                    return dataclasses.replace(super().config_for(name), history_path=None)

            def start(policy: str, history: bool) -> Target:
                folder = tmp / f"{policy}{'' if history else '-no-history'}"
                folder.mkdir()
                c = (Cluster if history else NoHistory)(folder, ALL)
                c.replication_config = {"policy": policy}
                clusters[folder.name] = c
                c.start_all()
                return Target(policy, cluster=c)

            try:
                single = servers.start_ours()
                targets = {SINGLE: Target(SINGLE, single=single)}
                if "throughput" in parts:
                    # The single node writes no history log, and neither do these clusters: the
                    # comparison is of replication alone. What the history costs is measured
                    # next, on the clusters of the kill rounds (which read their histories).
                    for policy in (MAJORITY, NONE):
                        targets[policy] = start(policy, history=False)
                    log("part 1: throughput and latency (no history logs)")
                    report["throughput"] = ThroughputPart(targets, pool, sizes, log).run()
                    report["master_changes_during_part_1"] = {p: targets[p].master_changes for p in (MAJORITY, NONE)}
                    for name in list(clusters):
                        clusters.pop(name).close()
                for policy in (MAJORITY, NONE):
                    targets[policy] = start(policy, history=True)
                if "throughput" in parts:
                    log("part 1b: send 100 B, the same against a 3-node majority cluster with history logs")
                    report["with_history"] = ThroughputPart(
                        {SINGLE: targets[SINGLE], MAJORITY: targets[MAJORITY]}, pool, sizes, log,
                        scenarios=SCENARIOS[:1], names=(SINGLE, MAJORITY)).run()
                if "failover" in parts:
                    single.stop()
                    log("parts 2 and 4: kill -9 rounds")
                    report["failover"] = KillPart({p: targets[p] for p in (NONE, MAJORITY)}, sizes, log).run()
            finally:
                for c in clusters.values():
                    c.close()
                if single is not None:
                    single.stop()
        if "transfer" in parts:
            log(f"part 3: state transfer of {sizes.transfer_messages:,} messages to a joining node")
            (tmp / "transfer").mkdir()
            try:
                report["transfer"] = TransferPart(tmp / "transfer", pool, sizes, log=log).run()
            except Exception as e:
                report["transfer"] = None
                report["transfer_failed"] = f"{type(e).__name__}: {e}"[:3000]
                log(f"  transfer FAILED: {report['transfer_failed'][:1000]}")
    finally:
        pool.close()
    env["loadavg_after"] = _loadavg()
    env["wake_cost_after"] = wake_cost.measure(**WAKE_COST_SIZE[quick])
    report["goals"] = _goals(report.get("throughput") or {"within_round": {}}, report.get("failover")
                             or {"by_policy": {MAJORITY: {"kill_to_first_ack_s": {}, "lost_acked": None}}},
                             report.get("transfer"))
    return report


def suite(quick: bool) -> dict:
    """``python -m bench --only replication``: prints the table, returns the JSON report."""
    report = run(quick)
    _print(report)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {"benchmark": "replication", "machine": machine, "quick": quick, **report}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="one or more parts of the replication benchmark")
    ap.add_argument("parts", nargs="*", default=["throughput", "failover", "transfer"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="write the whole report here as JSON")
    ap.add_argument("--keep", help="run in this folder and keep the nodes' logs and histories")
    ap.add_argument("--transfer-messages", type=int, help="part 3's state size (default 1,000,000; quick 100,000)")
    a = ap.parse_args()
    rep = run(quick=a.quick, parts=tuple(a.parts), keep=Path(a.keep) if a.keep else None,
              transfer_messages=a.transfer_messages)
    if a.out:
        Path(a.out).write_text(json.dumps(rep, indent=1, default=str) + "\n")
    print(json.dumps(rep["goals"], indent=1))
