"""The cluster-history analysis: Spark SQL over histories from the simulator, the chaos tests or
real nodes (one schema: cluster/HISTORY.md), for the report (sim/report.py).

Input. ``DIR`` is either a ``sim run`` output (``DIR/runs`` in Parquet: one row per seed with its
verdict and its node/nemesis/digest lines; failing seeds carry their whole history), or a
directory of JSON-lines history files: each subdirectory holding ``*.jsonl`` files (at any depth)
is one run, or ``DIR`` itself is one run when the files lie directly in it. For history
directories the checker (cluster/checker) runs in the executors, one task per run.

Two views come out of either input, and every measurement is SQL over them:

* ``runs(run, seed, policy, bugs, ok, failures, converged, <checker counts>, lines, ...)``
* ``events(run, ts, node, event, line)``: every node, nemesis and digest line (client operations
  too for history directories); fields are read with ``get_json_object`` / ``from_json``.

Measured: the checker's counts per run and in total; unavailability gaps (from the end of one
active-master interval to the next activation: a different node is a failover, the same node a
lease blip); the master-change sync's duration; replication delay percentiles (from the master's
``replication`` lines: per connected replica, the age of its oldest unacknowledged batch); state
transfer sizes and durations; client operation outcomes; decision coverage (simulator runs: per
decision point of the cores, how often it ran and how often its alternative differed, sim/coverage.py);
and the failing runs, shortest history
first (the easiest to read), each with the command that replays it (a simulated seed) or the files
it came from (history directories).

Extra checks. ``check`` (``analyze --check module:function``, shipped as sim/shipped.py says) is
called in the executors once per run as ``fn(records, policy)``: ``records`` the run's history
as ``cluster.checker.schema`` records (``NodeEvent``, ``ClientOp``, ``NemesisEvent``,
``DigestRecord``; every line of a history directory; for a ``sim run``, the whole history of a
failing seed, and only the node, nemesis and digest lines of a passing one unless it ran with
``--keep-histories``), ``policy`` the run's ack policy. It returns failure messages (an empty
iterable: the run passes it); each one fails the run, prefixed with the check's name, as does an
exception it raises.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster.checker.during import HEALTH, QUIESCENT
from cluster.checker.schema import HISTORY_SUFFIXES

from sim.replay import replay_command
from sim.shipped import ShippedCallable

COUNT_COLUMNS = ("attempted", "acknowledged", "lost", "unexpected", "duplicated", "in_window", "lost_deletes",
                 "order_violations", "two_masters", "divergence")


def _history_runs(d: Path) -> list[tuple[str, str]]:
    """(run, file URI) for every history file under ``d``."""
    files = sorted(f for f in d.rglob("*") if f.is_file() and f.name.endswith(HISTORY_SUFFIXES))
    out = []
    for f in files:
        rel = f.relative_to(d)
        run = rel.parts[0] if len(rel.parts) > 1 else "."
        out.append((run, f.resolve().as_uri()))
    return out


def extra_failures(check: ShippedCallable, lines: list[str], policy: str) -> list[str]:
    """The user's check on one run's lines (in an executor)."""
    from cluster.checker import parse_lines

    try:
        found = [str(m) for m in (check.get()(list(parse_lines(lines)), policy) or ())]
    except Exception as e:   # the user's code: its failure is the run's, reported, not the job's
        found = [f"raised {type(e).__name__}: {e}"]
    return [f"check {check.spec}: {m}" for m in found]


def check_run(run: str, lines: list[str], policy: str) -> tuple:
    """The checker on one run's lines (in an executor)."""
    from cluster.checker import check, parse_lines
    from cluster.checker.schema import History

    v = check(History.of(parse_lines(lines)))
    t = v.totals
    from sim.spark import op_outcomes

    failures = v.failures(policy)
    ops = op_outcomes(v)
    return (run, None, policy, [], not failures, failures, None, t.attempted, t.acknowledged, t.lost,
            t.unexpected, t.duplicated, t.in_window, t.lost_deletes, t.order_violations, len(v.two_masters),
            len(v.divergence), sum(ops.values()), ops["ok"], ops["failed"], ops["unknown"], len(lines),
            None, None)


RUNS_SCHEMA = ("run string, seed long, policy string, bugs array<string>, ok boolean, failures array<string>, "
               "converged boolean, attempted int, acknowledged int, lost int, unexpected int, duplicated int, "
               "in_window int, lost_deletes int, order_violations int, two_masters int, divergence int, ops int, "
               "ops_ok int, ops_failed int, ops_unknown int, lines int, sim_end_s double, wall_s double")


def load(spark: Any, d: Path, policy: str = "majority", check: ShippedCallable | None = None) -> str:
    """Register the ``runs`` and ``events`` views for ``d``; returns the source kind."""
    from pyspark.sql import functions as F

    extra = None     # (run, lines) pairs for the extra check
    if (d / "runs").is_dir():
        df = spark.read.parquet(str(d / "runs"))
        df.createOrReplaceTempView("sim_runs")
        spark.sql(f"""
            SELECT concat('seed-', seed) AS run, seed, policy, bugs, ok, failures, converged,
                   {", ".join(COUNT_COLUMNS)}, ops, ops_ok, ops_failed, ops_unknown, lines, sim_end_s, wall_s
            FROM sim_runs""").createOrReplaceTempView("runs")
        spark.sql("""
            SELECT run, line FROM (
              SELECT concat('seed-', seed) AS run, explode(split(node_lines, '\\n')) AS line FROM sim_runs)
            WHERE line != ''""").createOrReplaceTempView("lines")
        source = "simulator"
        if check is not None:
            extra = spark.sql("""SELECT concat('seed-', seed) AS run, policy, coalesce(history, node_lines) AS text
                                 FROM sim_runs""").rdd.map(lambda r: (r["run"], r["text"].splitlines(), r["policy"]))
    else:
        pairs = _history_runs(d)
        if not pairs:
            raise ValueError(f"{d}: neither a 'sim run' output (runs/) nor a directory of *.jsonl histories")
        files = spark.createDataFrame(pairs, "run string, path string")
        text = spark.read.text([p for _, p in pairs]).withColumn("path", F.input_file_name())
        lines = text.join(F.broadcast(files), "path").select("run", F.col("value").alias("line")) \
            .where(F.trim("line") != "")
        lines.createOrReplaceTempView("lines")
        grouped = lines.rdd.map(lambda r: (r["run"], r["line"])).groupByKey()
        checked = grouped.map(lambda kv: check_run(kv[0], list(kv[1]), policy))
        spark.createDataFrame(checked, RUNS_SCHEMA).createOrReplaceTempView("runs")
        files.createOrReplaceTempView("run_files")
        source = "history files"
        if check is not None:
            extra = grouped.map(lambda kv: (kv[0], list(kv[1]), policy))
    if extra is not None:
        found = extra.map(lambda x: (x[0], extra_failures(check, x[1], x[2])))
        more = F.coalesce(F.col("extra"), F.array().cast("array<string>"))
        spark.table("runs").join(spark.createDataFrame(found, "run string, extra array<string>"), "run", "left") \
            .withColumn("ok", F.col("ok") & (F.size(more) == 0)) \
            .withColumn("failures", F.concat(F.col("failures"), more)).drop("extra") \
            .createOrReplaceTempView("runs")
    spark.sql("""
        SELECT run, CAST(get_json_object(line, '$.ts') AS DOUBLE) AS ts, get_json_object(line, '$.node') AS node,
               get_json_object(line, '$.event') AS event, line
        FROM lines""").createOrReplaceTempView("events")
    spark.table("events").cache()
    return source


def _where_from(spark: Any, d: Path, source: str, summary: dict[str, Any], failing: list[dict[str, Any]]) -> None:
    """Each failing run's way back: the command that replays a simulated seed with its run's
    options, or the history files a recorded run was read from (relative to ``d``)."""
    if source == "simulator":
        params = dict((summary.get("sim") or {}).get("params") or {})
        for f in failing:
            # without summary.json, the run's own row still gives its size, policy and bugs
            p = {**params, "policy": params.get("policy", f["policy"]), "bugs": params.get("bugs", f["bugs"].split(",") if f["bugs"] else [])}
            f["replay"] = replay_command(f["seed"], p)
        return
    names = [f["run"] for f in failing]
    if not names:
        return
    from pyspark.sql import functions as F

    paths: dict[str, list[str]] = {}
    for r in spark.table("run_files").where(F.col("run").isin(names)).orderBy("path").collect():
        paths.setdefault(r["run"], []).append(r["path"])
    base = d.resolve()
    for f in failing:
        f["files"] = [_relative(p, base) for p in paths.get(f["run"], [])]


def _relative(uri: str, base: Path) -> str:
    from urllib.parse import unquote, urlparse

    path = Path(unquote(urlparse(uri).path))
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def _rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.sql(sql).collect()]


def _one(spark: Any, sql: str) -> dict[str, Any]:
    rows = _rows(spark, sql)
    return rows[0] if rows else {}


GAPS_SQL = """
WITH ch AS (
  SELECT run, ts, node, event FROM events WHERE event IN ('activated', 'deactivated', 'stopped', 'started')
  UNION ALL
  SELECT run, ts, node, 'kill' AS event FROM events
  WHERE event = 'nemesis' AND get_json_object(line, '$.action') = 'kill'
),
per_node AS (
  SELECT *, lag(event) OVER (PARTITION BY run, node ORDER BY ts, event) AS prev FROM ch
),
marks AS (
  SELECT run, ts, node, 'end' AS kind FROM per_node
  WHERE event IN ('deactivated', 'stopped', 'started', 'kill') AND prev = 'activated'
  UNION ALL
  SELECT run, ts, node, 'start' AS kind FROM per_node WHERE event = 'activated'
),
ordered AS (
  SELECT *,
    max(CASE WHEN kind = 'end' THEN ts END) OVER w AS last_end,
    max(CASE WHEN kind = 'start' THEN ts END) OVER w AS last_start,
    last_value(CASE WHEN kind = 'end' THEN node END, true) OVER w AS last_end_node
  FROM marks
  WINDOW w AS (PARTITION BY run ORDER BY ts, kind ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
)
SELECT run, node, ts AS at, ts - last_end AS gap_s, last_end_node AS previous,
       node != last_end_node AS failover
FROM ordered
WHERE kind = 'start' AND last_end IS NOT NULL AND (last_start IS NULL OR last_start <= last_end)
"""

SYNC_SQL = """
SELECT s.run, s.node, s.epoch, f.ts - s.ts AS sync_s FROM
  (SELECT run, node, CAST(get_json_object(line, '$.epoch') AS INT) AS epoch, max(ts) AS ts
   FROM events WHERE event = 'sync_started' GROUP BY run, node, get_json_object(line, '$.epoch')) s
JOIN
  (SELECT run, node, CAST(get_json_object(line, '$.epoch') AS INT) AS epoch, min(ts) AS ts
   FROM events WHERE event = 'synced' GROUP BY run, node, get_json_object(line, '$.epoch')) f
ON s.run = f.run AND s.node = f.node AND s.epoch = f.epoch AND f.ts >= s.ts
"""


MEASURES_SQL = """
SELECT 'failover' AS kind, run, gap_s AS value, CAST(NULL AS DOUBLE) AS value2 FROM gaps WHERE failover
UNION ALL SELECT 'blip', run, gap_s, NULL FROM gaps WHERE NOT failover
UNION ALL SELECT 'sync', run, sync_s, NULL FROM syncs
UNION ALL SELECT 'delay', run, delay_ms, lag_batches FROM replication
UNION ALL SELECT 'transfer', run, bytes, duration_s FROM transfers
"""


# Runs failing each rule judged during the run or by the world itself (failure prefixes).
JUDGED_RULES = (("quiescent_divergence", "divergence at t=%"), ("unavailable", "unavailable%"),
                ("lost_deletes", "lost deletes%"), ("in_window", "in-window%"),
                ("provenance", "provenance: %"), ("waste", "waste: %"), ("throttling", "throttling: %"),
                ("terms", "terms: %"))


def analyze(spark: Any, d: str | Path, policy: str = "majority",
            check: ShippedCallable | None = None) -> dict[str, Any]:
    """Everything the report shows, as plain data (JSON-able). A handful of Spark jobs: every
    query that can share a scan does (grouping sets, one union of all timing measures)."""
    d = Path(d)
    source = load(spark, d, policy, check)
    spark.table("runs").cache()
    sums = ", ".join(f"sum({c}) AS {c}" for c in COUNT_COLUMNS)
    grouped = _rows(spark, f"""
        SELECT grouping_id() AS gid, policy, concat_ws(',', bugs) AS bugs, count(*) AS runs,
               sum(CASE WHEN ok THEN 1 ELSE 0 END) AS passed, sum(CASE WHEN ok THEN 0 ELSE 1 END) AS failed,
               {sums}, sum(ops) AS ops, sum(ops_ok) AS ops_ok, sum(ops_failed) AS ops_failed,
               sum(ops_unknown) AS ops_unknown, sum(lines) AS lines,
               sum(CASE WHEN converged = false THEN 1 ELSE 0 END) AS not_converged,
               sum(sim_end_s) AS simulated_s, sum(wall_s) AS task_wall_s
        FROM runs GROUP BY GROUPING SETS ((), (policy, concat_ws(',', bugs)))
        ORDER BY gid DESC, policy, bugs""")
    summary = next((g for g in grouped if g["gid"] != 0), {"runs": 0})
    by_group = [g for g in grouped if g["gid"] == 0]
    summary["source"] = source
    summary["dir"] = str(d)
    sim_summary = d / "summary.json"
    if source == "simulator" and sim_summary.exists():
        summary["sim"] = {k: v for k, v in json.loads(sim_summary.read_text()).items() if k != "failing_detail"}
    per_run = _rows(spark, f"""
        SELECT run, seed, policy, concat_ws(',', bugs) AS bugs, ok, failures, converged,
               {", ".join(COUNT_COLUMNS)}, ops, lines, sim_end_s
        FROM runs ORDER BY ok, lines, run LIMIT 500""")
    failing = [r for r in per_run if not r["ok"]][:50]
    _where_from(spark, d, source, summary, failing)
    spark.sql(GAPS_SQL).createOrReplaceTempView("gaps")
    spark.sql(SYNC_SQL).createOrReplaceTempView("syncs")
    spark.sql("""
        SELECT run, node, ts, key AS replica, value.lag_ms AS delay_ms, value.lag_batches AS lag_batches,
               value.connected AS connected
        FROM (SELECT run, node, ts, explode(from_json(get_json_object(line, '$.replicas'),
                'map<string,struct<acked_seq:long,lag_batches:long,lag_ms:double,connected:boolean>>')) AS (key, value)
              FROM events WHERE event = 'replication')
        WHERE value.connected""").createOrReplaceTempView("replication")
    spark.sql("""
        SELECT run, node, ts, CAST(get_json_object(line, '$.bytes') AS DOUBLE) AS bytes,
               CAST(get_json_object(line, '$.duration_s') AS DOUBLE) AS duration_s
        FROM events WHERE event = 'transfer_finished' AND get_json_object(line, '$.direction') = 'sent'
        """).createOrReplaceTempView("transfers")
    measures = spark.sql(MEASURES_SQL)
    measures.cache().createOrReplaceTempView("measures")
    stats = {r["kind"]: r for r in _rows(spark, """
        SELECT kind, count(*) AS n, percentile_approx(value, array(0.5, 0.9, 0.99, 0.999)) AS p, max(value) AS max,
               percentile_approx(value2, array(0.5, 0.9, 0.99)) AS p2, max(value2) AS max2
        FROM measures GROUP BY kind""")}
    raw: dict[str, list[tuple[Any, Any]]] = {}
    for r in spark.sql("SELECT kind, value, value2 FROM measures ORDER BY kind, run").collect():
        raw.setdefault(r["kind"], []).append((r["value"], r["value2"]))
    counts = _rows(spark, """
        SELECT 'event' AS what, event AS k, count(*) AS n FROM events GROUP BY event
        UNION ALL
        SELECT 'fault', get_json_object(line, '$.action'), count(*) FROM events WHERE event = 'nemesis'
        GROUP BY get_json_object(line, '$.action')
        ORDER BY what, n DESC, k""")
    rules = _rows(spark, """
        SELECT """ + ", ".join(f"sum(CASE WHEN exists(failures, f -> f LIKE '{like}') THEN 1 ELSE 0 END) AS {k}"
                              for k, like in JUDGED_RULES) + " FROM runs")[0]
    measures.unpersist()
    spark.table("runs").unpersist()
    decided = None
    if source == "simulator" and "decisions" in spark.table("sim_runs").columns:
        from sim.coverage import rows as coverage_rows, total

        decided = coverage_rows(total(r[0] for r in spark.sql("SELECT decisions FROM sim_runs").toLocalIterator()))

    def st(kind: str) -> dict[str, Any]:
        return stats.get(kind) or {"n": 0, "p": None, "max": None, "p2": None, "max2": None}

    gap_stats = [{"failover": k == "failover", "n": st(k)["n"], "p": (st(k)["p"] or [])[:3], "max_s": st(k)["max"]}
                 for k in ("blip", "failover") if st(k)["n"]]
    sync, delay, tr = st("sync"), st("delay"), st("transfer")
    return {
        "summary": summary, "by_group": by_group, "runs": per_run, "failing": failing,
        "gaps": [{"gap_s": v, "failover": True} for v, _ in raw.get("failover", [])]
        + [{"gap_s": v, "failover": False} for v, _ in raw.get("blip", [])],
        "gap_stats": gap_stats,
        "sync_stats": {"n": sync["n"], "p": (sync["p"] or [])[:3] or None, "max_s": sync["max"]},
        "delay_stats": {"samples": delay["n"], "p": delay["p"], "max_ms": delay["max"],
                        "avg_lag_batches": None},
        "delays": [v for v, _ in raw.get("delay", [])],
        "transfer_stats": {"n": tr["n"], "bytes_p": (tr["p"] or [])[:3] or None, "max_bytes": tr["max"],
                           "duration_p": tr["p2"], "max_s": tr["max2"]},
        "transfers": [{"bytes": v, "duration_s": v2} for v, v2 in raw.get("transfer", [])],
        "faults": [{"action": r["k"], "n": r["n"]} for r in counts
                   if r["what"] == "fault" and r["k"] not in (HEALTH, QUIESCENT)],
        "judged": {"quiescent_points": next((r["n"] for r in counts if r["what"] == "fault" and r["k"] == QUIESCENT), 0),
                   "health_changes": next((r["n"] for r in counts if r["what"] == "fault" and r["k"] == HEALTH), 0),
                   "failing_runs": {k: rules[k] or 0 for k, _ in JUDGED_RULES}},
        "events": [{"event": r["k"], "n": r["n"]} for r in counts if r["what"] == "event"],
        # decision coverage (sim/coverage.py), for simulator runs that recorded it
        "decisions": decided,
    }
