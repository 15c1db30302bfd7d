"""Seeds fanned out over Spark: one task per seed (by default), Parquet out, a progress bar.

    spark = session("local[2]")
    summary = run_seeds(spark, range(1000), out="runs-2026", nodes=3, policy="majority")

Each task generates its seed's scenario, simulates it and checks the history in the executor
(the project is installed in the executors' python: nothing is shipped but the seed and, for a
user's workload, its factory as cloudpickle bytes: sim/shipped.py), and
returns one row: the verdict's counts, the failures, the scenario, the run's node/nemesis/digest
lines (small: what the analysis measures), and, for failing runs (or all, with
``keep_histories``), the whole history as JSON lines. ``DIR/runs/`` is that table in Parquet;
``DIR/summary.json`` the totals, the failing seeds and the throughput.

Spark settings. For ``local[...]`` masters the session binds the driver to loopback, disables
the UI, keeps shuffles small, runs the executors' Python with this interpreter (the venv's),
and starts the JVM with the quick compiler only, which is what this machine needs. ``conf`` (and
``ELASTICMQ_PY_SPARK_CONF="k=v,k=v"``) override any of it, e.g. for a real cluster:
``--master spark://host:7077 --conf spark.executor.memory=4g``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, TextIO

from sim.coverage import total
from sim.scenario import generate
from sim.shipped import ShippedCallable
from sim.world import simulate

LOCAL_DEFAULTS = {
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    # In local mode the driver JVM is the whole cluster and lives for one short job: the JIT's
    # optimising compiler (C2) and a parallel collector cost more CPU than they save there
    # (measured: session start-up 17 -> 7 CPU-seconds, a 24-seed run 30 -> 20).
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}
DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.python.worker.reuse": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
}
CONF_ENV = "ELASTICMQ_PY_SPARK_CONF"


def spark_conf(master: str, conf: dict[str, str] | None = None) -> dict[str, str]:
    out = dict(DEFAULTS)
    if master.startswith("local"):
        out.update(LOCAL_DEFAULTS)
    for item in filter(None, (os.environ.get(CONF_ENV) or "").split(",")):
        k, _, v = item.partition("=")
        out[k.strip()] = v.strip()
    out.update(conf or {})
    return out


def session(master: str = "local[*]", app: str = "elasticmq-py-sim", conf: dict[str, str] | None = None):
    """A SparkSession with this machine's settings (see the module docstring)."""
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(master).appName(app)
    for k, v in spark_conf(master, conf).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# --- the per-seed task ---------------------------------------------------------------------------

RUN_FIELDS = (
    ("seed", "long"), ("nodes", "int"), ("policy", "string"), ("bugs", "array<string>"), ("duration", "double"),
    ("ok", "boolean"), ("failures", "array<string>"), ("converged", "boolean"),
    ("attempted", "int"), ("acknowledged", "int"), ("lost", "int"), ("unexpected", "int"), ("duplicated", "int"),
    ("in_window", "int"), ("lost_deletes", "int"), ("order_violations", "int"), ("two_masters", "int"),
    ("divergence", "int"), ("ops", "int"), ("ops_ok", "int"), ("ops_failed", "int"), ("ops_unknown", "int"),
    ("lines", "int"), ("bytes", "long"), ("events", "long"),
    ("sim_end_s", "double"), ("wall_s", "double"), ("cpu_s", "double"), ("scenario", "string"), ("verdict", "string"),
    ("node_lines", "string"), ("history", "string"),
    ("decisions", "string"),     # JSON: decision point -> [ran, differed] (cluster/decisions.py)
)


def run_schema():
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string("struct<" + ",".join(f"{n}:{t}" for n, t in RUN_FIELDS) + ">")


def compact_verdict(v: Any) -> dict[str, Any]:
    """The verdict without the legitimate redeliveries (which are most of its bulk)."""
    d = v.to_json()
    d["duplicates"] = [x for x in d["duplicates"] if x["category"] in ("in_window", "after_acked_delete")]
    return d


def op_outcomes(v: Any) -> dict[str, int]:
    """Client operations by outcome, over every queue of a verdict."""
    ops = {"ok": 0, "failed": 0, "unknown": 0}
    for q in v.queues.values():
        for by in q.ops.values():
            for k, n in by.items():
                ops[k] = ops.get(k, 0) + n
    return ops


def run_one(seed: int, params: dict[str, Any], workload: ShippedCallable | None = None) -> tuple:
    t0 = time.perf_counter()
    c0 = time.process_time()
    sc = generate(seed, nodes=params.get("nodes", 3), policy=params.get("policy", "majority"),
                  duration=params.get("duration", 60.0), bugs=tuple(params.get("bugs", ())),
                  crash_policy=params.get("crash_policy", "any"), groups=params.get("groups", 1))
    r = simulate(sc, strict=params.get("strict", False), workload=workload.get() if workload is not None else None)
    v = r.verdict
    t = v.totals
    node_lines = "".join(line + "\n" for line in r.history.splitlines() if '"event":"client_op"' not in line)
    keep = params.get("keep_histories", False) or not r.ok
    ops = op_outcomes(v)
    return (seed, sc.nodes, sc.policy, list(sc.bugs), sc.duration, r.ok, list(r.failures), r.converged,
            t.attempted, t.acknowledged, t.lost, t.unexpected, t.duplicated, t.in_window, t.lost_deletes,
            t.order_violations, len(v.two_masters), len(v.divergence), r.stats["ops"], ops["ok"], ops["failed"],
            ops["unknown"], r.stats["lines"],
            r.stats["bytes"], r.stats["events"], r.stats["sim_end_s"], round(time.perf_counter() - t0, 4),
            round(time.process_time() - c0, 4), sc.dumps(), json.dumps(compact_verdict(v), separators=(",", ":"), default=str), node_lines,
            r.history if keep else None, json.dumps(r.decisions, separators=(",", ":"), sort_keys=True))


# --- fan-out ------------------------------------------------------------------------------------

class Progress:
    """A one-line progress bar on a terminal (a line every few seconds when not a terminal)."""

    def __init__(self, total: int, stream: TextIO | None = None, label: str = "seeds") -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.label = label
        self.t0 = time.monotonic()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_print = 0.0

    def show(self, done: int, failing: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and not self.tty and now - self._last_print < 5:
            return
        self._last_print = now
        el = now - self.t0
        rate = done / el if el > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        width = 30
        fill = int(width * done / self.total) if self.total else width
        bar = "#" * fill + "-" * (width - fill)
        eta_s = "--" if eta == float("inf") else f"{int(eta) // 60}m{int(eta) % 60:02d}s"
        line = (f"{self.label} [{bar}] {done}/{self.total} {100 * done / max(1, self.total):3.0f}%  "
                f"{rate * 60:7.0f}/min  failing {failing}  elapsed {el:5.1f}s  eta {eta_s}")
        if self.tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def run_seeds(spark: Any, seeds: Iterable[int], out: str | os.PathLike[str] | None = None, *,
              nodes: int | None = 3, policy: str | None = "majority", duration: float = 60.0,
              bugs: tuple[str, ...] = (), strict: bool = False, keep_histories: bool = False,
              crash_policy: str = "any", workload: ShippedCallable | None = None,
              seeds_per_task: int = 1, progress: bool = True, stream: TextIO | None = None,
              groups: int | None = 1) -> dict[str, Any]:
    """Simulate every seed on Spark; write ``out/runs`` (Parquet) and ``out/summary.json`` when
    ``out`` is given. Returns the summary; ``summary["rows"]`` holds the rows when ``out`` is None.
    ``workload``: a user's workload factory (sim/workload.py), else ours."""
    from pyspark import InheritableThread

    seeds = list(seeds)
    params = {"nodes": nodes, "policy": policy, "duration": duration, "bugs": list(bugs), "strict": strict,
              "keep_histories": keep_histories, "crash_policy": crash_policy, "groups": groups,
              "workload": workload.spec if workload is not None else None}
    sc = spark.sparkContext
    failing = sc.accumulator(0)
    done = sc.accumulator(0)

    def task(seed: int) -> tuple:
        row = run_one(seed, params, workload)
        done.add(1)
        if not row[5]:     # ok
            failing.add(1)
        return row

    slices = max(1, -(-len(seeds) // max(1, seeds_per_task)))
    rdd = sc.parallelize(seeds, slices).map(task)
    result: dict[str, Any] = {}
    error: list[BaseException] = []
    group = f"sim-{time.monotonic_ns()}"

    def action() -> None:
        try:
            sc.setJobGroup(group, f"simulate {len(seeds)} seeds")
            if out is None:
                result["rows"] = rdd.collect()
            else:
                df = spark.createDataFrame(rdd, run_schema())
                df.write.mode("overwrite").parquet(str(Path(out) / "runs"))
        except BaseException as e:   # re-raised on the caller's thread
            error.append(e)

    t0 = time.monotonic()
    bar = Progress(len(seeds), stream) if progress else None
    th = InheritableThread(target=action, daemon=True)
    th.start()
    while th.is_alive():
        th.join(0.5)
        if bar is not None:
            bar.show(min(done.value, len(seeds)), failing.value)
    wall = time.monotonic() - t0
    if bar is not None:
        bar.show(len(seeds) if not error else done.value, failing.value, final=True)
    if error:
        raise error[0]
    summary: dict[str, Any] = {
        "seeds": len(seeds), "first_seed": seeds[0] if seeds else None, "params": params,
        "master": sc.master, "parallelism": sc.defaultParallelism, "wall_s": round(wall, 2),
        "seeds_per_min": round(len(seeds) / wall * 60, 1) if wall > 0 else None,
    }
    if out is None:
        rows = result["rows"]
        summary["failing"] = sorted(r[0] for r in rows if not r[5])
        summary["decisions"] = total(r[-1] for r in rows)
        summary["rows"] = rows
    else:
        df = spark.read.parquet(str(Path(out) / "runs"))
        bad = df.where("NOT ok").select("seed", "failures", "lines").orderBy("lines").collect()
        summary["failing"] = sorted(r["seed"] for r in bad)
        summary["decisions"] = total(r["decisions"] for r in df.select("decisions").toLocalIterator())
        summary["failing_detail"] = [{"seed": r["seed"], "failures": list(r["failures"]), "lines": r["lines"]}
                                     for r in bad[:50]]
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary
