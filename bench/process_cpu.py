"""CPU accounting for the benchmarks that run real processes, from /proc: a process's CPU (all its
threads, or by kind of thread), how often its event loop slept, the whole machine's busy time and
load; and ``CpuWindow``, which splits one measured run's CPU among the measured target's processes,
the idle targets, the load generator and the rest of the machine.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.replication_setup import Target

_TICK = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU-seconds spent busy by the whole machine so far (all cores)."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    return (sum(vals[:8]) - idle) / _TICK


def cpu_of(pid: int) -> float:
    """user+sys CPU seconds of a process (all its threads); nan once it is gone."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return float("nan")


def threads_cpu(pid: int) -> dict[str, float]:
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


def loop_sleeps(pid: int) -> int | None:
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


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def background_busy(seconds: float = 2.0) -> float:
    """% of one core the machine spends busy while this benchmark runs nothing."""
    m0, t0 = machine_busy(), time.monotonic()
    time.sleep(seconds)
    return round(100 * (machine_busy() - m0) / (time.monotonic() - t0))


class CpuWindow:
    """CPU of every process of every target, of the generator and of the rest of the machine."""

    def __init__(self, targets: dict[str, Target], measured: Target):
        self.targets, self.measured = targets, measured

    def _sample(self) -> tuple[dict[tuple[str, str], float], float, float]:
        per = {(t.name, n): cpu_of(pid) for t in self.targets.values() for n, pid in t.pids().items()}
        return per, machine_busy(), time.monotonic()

    def _threads(self) -> dict[str, dict[str, float]]:
        return {n: threads_cpu(pid) for n, pid in self.measured.pids().items()}

    def _sleeps(self) -> dict[str, int | None]:
        return {n: loop_sleeps(pid) for n, pid in self.measured.pids().items()}

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
                # what each replica spends per operation it applies (their mean)
                out["replica_cpu_us_per_req"] = us(replicas / n_replicas)
            # where each process's CPU went, by thread (see threads_cpu), per request,
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
