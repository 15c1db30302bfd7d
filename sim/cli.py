"""The ``elasticmq-py sim ...`` and ``elasticmq-py analyze`` commands.

    elasticmq-py sim run --seeds N [--first-seed S] [--nodes 3] [--policy majority] --out DIR
                         [--master local[*]|spark://...] [--duration 60] [--bug NAME] [--strict]
                         [--workload module:function]
    elasticmq-py sim replay SEED [--nodes 3] [--policy majority] [--out DIR] [--workload module:function]
    elasticmq-py analyze DIR [--report report.html] [--json FILE] [--master local[*]] [--check module:function]

elasticmq_py/cli.py registers them with ``add_parsers(sub)`` and dispatches to ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from cluster.plantable import PLANTABLE_BUGS

from sim.scenario import CRASH_POLICIES, POLICIES


def _conf(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"--conf expects KEY=VALUE, got {item!r}")
        out[k] = v
    return out


def _nodes(v: str) -> int | None:
    if v == "random":
        return None
    n = int(v)
    if n < 1:
        raise argparse.ArgumentTypeError("at least one node")
    return n


def _scenario_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=_nodes, default=3, help="cluster size, or 'random' (3 or 5 per seed); default 3")
    p.add_argument("--groups", type=_nodes, default=1,
                   help="replication groups ([cluster] groups), or 'random' (1 to 4 per seed); default 1")
    p.add_argument("--policy", choices=POLICIES + ("random",), default="majority",
                   help="ack policy, or 'random' per seed (default majority)")
    p.add_argument("--duration", type=float, default=60.0,
                   help="simulated seconds of workload and faults per seed (default 60); the drain comes after")
    p.add_argument("--bug", action="append", choices=sorted(PLANTABLE_BUGS), default=[],
                   help="plant a known bug (repeatable): the run should then fail")
    p.add_argument("--crash-policy", choices=CRASH_POLICIES, default="any",
                   help="when crashes may happen: 'any' crash the cluster must tolerate (default), or only "
                        "'safe' ones that cannot take away a copy a majority needs")
    p.add_argument("--strict", action="store_true",
                   help="kept for old command lines: in-window duplicates and lost deletes fail majority and "
                        "all runs by default now")
    p.add_argument("--workload", metavar="MODULE:FUNCTION",
                   help="your own workload: a factory taking the scenario and returning an object with "
                        "queues() and draw(client), as sim/workload.py describes (module:function or "
                        "path/to/file.py:function; shipped to the executors with cloudpickle). "
                        "Default: the simulator's own, sim.workload:standard")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser("sim", help="simulate clusters under faults (deterministic, fanned out on Spark)",
                       description="Deterministic cluster simulation: the real storage, replication and "
                                   "membership code over a simulated network and clock, one seed per run.")
    ss = s.add_subparsers(dest="sim_command", metavar="SUBCOMMAND")
    r = ss.add_parser("run", help="simulate many seeds on Spark; write Parquet",
                      description="Simulate seeds FIRST..FIRST+N-1 on Spark (--seeds-per-task seeds per "
                                  "task); write DIR/runs (Parquet: verdicts, failures, scenarios, histories "
                                  "of failing runs) and DIR/summary.json. Exit status 1 when a seed failed; "
                                  "the replay command of the first failing seed is printed.")
    r.add_argument("--seeds", type=int, required=True, help="how many seeds")
    r.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    r.add_argument("--out", required=True, metavar="DIR", help="output directory")
    r.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    r.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark setting (repeatable)")
    r.add_argument("--seeds-per-task", type=int, default=1, help="seeds per Spark task (default 1)")
    r.add_argument("--keep-histories", action="store_true", help="keep the full history of passing runs too")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    _scenario_args(r)
    p = ss.add_parser("replay", help="simulate one seed here; write its history as JSON lines",
                      description="Run one seed in this process (no Spark), print the checker's summary, and "
                                  "with --out write the history one file per node, client and the nemesis, "
                                  "as cluster/HISTORY.md describes (readable by cluster.checker.check_dir and analyze). "
                                  "Give the options the seed ran with (sim run prints the command, and so "
                                  "does the report). Exit status 1 when the seed fails.")
    p.add_argument("seed", type=int, help="the seed to run")
    p.add_argument("--out", metavar="DIR", help="write the history files here")
    _scenario_args(p)
    a = sub.add_parser("analyze", help="analyse cluster histories with Spark SQL; write an HTML report",
                       description="DIR is a 'sim run' output directory, or a directory of history JSON-lines "
                                   "files (one run per subdirectory, or DIR itself is one run): the chaos "
                                   "tests' or real nodes' history logs. Prints the failing runs and writes "
                                   "the report; exits 0 whatever the runs' verdicts (2 when DIR is missing).")
    a.add_argument("dir", metavar="DIR", help="the directory to analyse")
    a.add_argument("--report", metavar="FILE", help="write the HTML report here (default DIR/report.html)")
    a.add_argument("--json", metavar="FILE", help="also write the analysis as JSON")
    a.add_argument("--policy", choices=POLICIES, default="majority",
                   help="the ack policy history directories were run with (default majority); a sim run's "
                        "own policies are used for its seeds")
    a.add_argument("--check", metavar="MODULE:FUNCTION",
                   help="an extra check over each run's history: a function taking (records, policy) and "
                        "returning failure messages (module:function or path/to/file.py:function; shipped "
                        "to the executors with cloudpickle; see docs/simulator.md)")
    a.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    a.add_argument("--conf", action="append", metavar="KEY=VALUE", help="extra Spark setting (repeatable)")


def run_sim(args: argparse.Namespace) -> int:
    if args.sim_command == "run":
        return _run(args)
    if args.sim_command == "replay":
        return _replay(args)
    print("usage: elasticmq-py sim {run,replay} ... (see --help)", file=sys.stderr)
    return 2


def _shipped(spec: str | None) -> Any:
    """The user's callable named on the command line, ready for the executors (None: none)."""
    from sim.shipped import LoadError, ShippedCallable

    if spec is None:
        return None
    try:
        return ShippedCallable.of(spec)
    except LoadError as e:
        raise SystemExit(f"elasticmq-py: {e}") from None


def _run(args: argparse.Namespace) -> int:
    from sim.coverage import format_table
    from sim.replay import replay_command
    from sim.spark import run_seeds

    if args.seeds < 1:
        print("--seeds must be at least 1", file=sys.stderr)
        return 2
    workload = _shipped(args.workload)
    spark, owned = _spark(args.master, "elasticmq-py-sim", _conf(args.conf))
    try:
        summary = run_seeds(spark, range(args.first_seed, args.first_seed + args.seeds), args.out,
                            nodes=args.nodes, policy=None if args.policy == "random" else args.policy,
                            duration=args.duration, bugs=tuple(args.bug), strict=args.strict,
                            keep_histories=args.keep_histories, seeds_per_task=args.seeds_per_task,
                            progress=not args.no_progress, crash_policy=args.crash_policy, workload=workload,
                            groups=args.groups)
    finally:
        if owned:
            spark.stop()
    failing = summary["failing"]
    print(f"{summary['seeds']} seeds in {summary['wall_s']} s ({summary['seeds_per_min']} seeds/min on "
          f"{summary['master']}): {summary['seeds'] - len(failing)} passed, {len(failing)} failed")
    for f in summary.get("failing_detail", [])[:10]:
        print(f"  seed {f['seed']} ({f['lines']} history lines): {'; '.join(f['failures'])}")
    if failing:
        print(f"replay one with: {replay_command(failing[0], summary['params'])}")
    print("decision coverage (cluster/decisions.py: how often each decision ran, and how often a plausible "
          "alternative would have decided differently):")
    print(format_table(summary.get("decisions") or {}))
    print(f"results: {Path(args.out) / 'runs'} (Parquet), {Path(args.out) / 'summary.json'}")
    return 1 if failing else 0


def write_history_dir(records: list[Any], out: Path) -> list[Path]:
    """One file per node, per client and for the nemesis (as a real run's logs would be)."""
    from cluster.checker.schema import ClientOp, NemesisEvent, to_line

    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[str]] = {}
    for r in records:
        if isinstance(r, ClientOp):
            name = f"client-{r.client}"
        elif isinstance(r, NemesisEvent):
            name = "nemesis"
        else:
            name = r.node or "cluster"
        files.setdefault(name, []).append(to_line(r))
    paths = []
    for name in sorted(files):
        p = out / f"{name}.jsonl"
        p.write_text("\n".join(files[name]) + "\n")
        paths.append(p)
    return paths


def _replay(args: argparse.Namespace) -> int:
    from cluster.checker import parse_lines

    from sim.scenario import generate
    from sim.world import simulate

    workload = _shipped(args.workload)
    sc = generate(args.seed, nodes=args.nodes, policy=None if args.policy == "random" else args.policy,
                  duration=args.duration, bugs=tuple(args.bug), crash_policy=args.crash_policy, groups=args.groups)
    r = simulate(sc, strict=args.strict, workload=workload.get() if workload is not None else None)
    print(f"seed {sc.seed}: {sc.nodes} nodes, {sc.groups} group(s), policy {sc.policy}, {len(sc.faults)} faults, "
          f"{r.stats['ops']} client operations, {r.stats['lines']} history lines")
    print(r.verdict.summary(sc.policy))
    for f in r.failures:
        if f.startswith("liveness"):
            print(f)
    if args.out:
        out = Path(args.out)
        paths = write_history_dir(list(parse_lines(r.history.splitlines())), out)
        (out / "scenario.json").write_text(json.dumps(sc.to_json(), indent=2) + "\n")
        print(f"history: {len(paths)} files in {out} (scenario in {out / 'scenario.json'})")
    print("PASS" if r.ok else "FAIL: " + "; ".join(r.failures))
    return 0 if r.ok else 1


def _spark(master: str, app: str, conf: dict[str, str]) -> tuple[Any, bool]:
    """The session already active in this process (an embedding program's, a test's), else a new
    one that the command stops when done."""
    from pyspark.sql import SparkSession

    from sim.spark import session

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    return session(master, app=app, conf=conf), True


def run_analyze(args: argparse.Namespace) -> int:
    from sim.analysis import analyze
    from sim.report import write_report

    d = Path(args.dir)
    if not d.exists():
        print(f"{d}: no such directory", file=sys.stderr)
        return 2
    check = _shipped(args.check)
    spark, owned = _spark(args.master, "elasticmq-py-analyze", _conf(args.conf))
    try:
        result = analyze(spark, d, policy=args.policy, check=check)
    finally:
        if owned:
            spark.stop()
    report = Path(args.report) if args.report else d / "report.html"
    write_report(result, report)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str) + "\n")
    s = result["summary"]
    print(f"{s['runs']} runs ({s['source']}): {s['passed']} passed, {s['failed']} failed")
    for f in result["failing"][:10]:
        print(f"  {f['run']} ({f['lines']} lines): {'; '.join(f['failures'])}")
        if f.get("replay"):
            print(f"    replay: {f['replay']}")
        if f.get("files"):
            print(f"    files: {', '.join(f['files'])}")
    print(f"report: {report}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"sim": run_sim, "analyze": run_analyze}
