"""`make bench`: run the benchmarks, write JSON to bench/results/, print a short table, and render
the docs' tables from the results (bench/report.py).

    python -m bench [--quick] [--only storage]

A full run writes NAME.json, which docs/performance.md is rendered from; ``--quick`` (smaller
sizes, for a smoke run) writes NAME-quick.json, which no page shows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _machine() -> dict:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def storage(quick: bool) -> dict:
    from bench import storage_bench

    results = storage_bench.run(quick=quick)
    by = {(r.scenario, r.depth): r.rate for r in results}
    rows = [{"scenario": r.scenario, "queue_depth": r.depth, "ops": r.ops, "seconds": round(r.seconds, 4),
             "per_second": round(r.rate), "cpu_seconds": round(r.cpu_seconds, 4),
             "cpu_per_second": round(r.cpu_rate)} for r in results]
    cpu = {(r.scenario, r.depth): r.cpu_rate for r in results}
    depths = sorted({r.depth for r in results if r.scenario == "send"})
    ratios = {}
    if len(depths) == 2:
        for name in ("send", "send_batch", "receive_delete", "receive_delete_batch10"):
            ratios[f"{name}: empty / deep"] = round(by[(name, depths[0])] / by[(name, depths[1])], 2)
            ratios[f"{name}: empty / deep, cpu"] = round(cpu[(name, depths[0])] / cpu[(name, depths[1])], 2)
    floor = by.get(("floor_dict_deque_put_get", 0))
    if floor:
        ratios["floor / send (empty)"] = round(floor / by[("send", 0)], 1)
    print("\nstorage (one thread, mutations encoded)")
    print(f"{'scenario':32} {'depth':>9} {'ops/s':>10}")
    for r in rows:
        print(f"{r['scenario']:32} {r['queue_depth']:>9} {r['per_second']:>10,}")
    for k, val in ratios.items():
        print(f"  ratio {k}: {val}")
    return {"benchmark": "storage", "machine": {**_machine(), "loadavg": os.getloadavg()}, "results": rows,
            "ratios": ratios}


def endpoint(quick: bool) -> dict:
    from bench import endpoint_bench  # imported here: it starts peers and needs their installs

    return endpoint_bench.suite(quick)


def failover(quick: bool) -> dict:
    from bench import failover_bench  # imported here: it starts real cluster processes

    return failover_bench.suite(quick)


def replication(quick: bool) -> dict:
    from bench import replication_bench  # imported here: it starts real cluster processes

    return replication_bench.suite(quick)


def encryption(quick: bool) -> dict:
    from bench import encryption_bench  # imported here: it starts real cluster processes

    return encryption_bench.suite(quick)


def forward(quick: bool) -> dict:
    from bench import forward_bench  # imported here: it starts real cluster processes

    return forward_bench.suite(quick)


def groups(quick: bool) -> dict:
    from bench import groups_bench  # imported here: it starts real cluster processes

    return groups_bench.suite(quick)


def groups_failover(quick: bool) -> dict:
    from bench import groups_failover as gf  # imported here: it starts real cluster processes

    return gf.suite(quick)


def sigv4(quick: bool) -> dict:
    from bench import sigv4_bench  # imported here: it starts real server processes

    return sigv4_bench.suite(quick)


def durability(quick: bool) -> dict:
    from bench import durability_bench  # imported here: it starts real processes

    return durability_bench.suite(quick)


def sizing(quick: bool) -> dict:
    from bench import sizing_bench  # imported here: it starts real processes

    return sizing_bench.suite(quick)


def sim(quick: bool) -> dict:
    from bench import sim_bench  # imported here: it starts Spark

    return sim_bench.suite(quick)


def cpu_profile(quick: bool) -> dict | None:
    """Instructions per request under callgrind (bench/cpu_profile.py): independent of the machine's
    load, so one run gives every phase. Without valgrind the suite is skipped and its results file
    is left as it was."""
    from bench import cpu_profile as cp

    if shutil.which("valgrind") is None:
        print("\ncpu_profile: valgrind is not installed; skipped")
        return None
    n = 100 if quick else 500
    per = cp.profile(list(cp.PHASES), n)
    version = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=True).stdout
    print("\ncpu_profile (instructions per request, in process)")
    for name, ir in per.items():
        print(f"{name:16} {ir:>11,}")
    return {"benchmark": "cpu_profile", "machine": _machine(),
            "valgrind": re.sub(r"^valgrind-", "", version.strip()), "requests": n,
            "cluster_batch": cp.CLUSTER_BATCH, "instructions_per_request": per}


SUITES = {"storage": storage, "endpoint": endpoint, "failover": failover, "replication": replication,
          "encryption": encryption, "forward": forward, "groups": groups,
          "groups_failover": groups_failover, "sigv4": sigv4, "durability": durability,
          "sizing": sizing, "sim": sim, "cpu_profile": cpu_profile}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    p.add_argument("--only", choices=sorted(SUITES), action="append", help="run just these suites")
    args = p.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    for name in args.only or sorted(SUITES):
        report = SUITES[name](args.quick)
        if report is None:
            continue
        path = RESULTS / f"{name}{'-quick' if args.quick else ''}.json"
        path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"  -> {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    from bench import report as docs

    return docs.main([])


if __name__ == "__main__":
    sys.exit(main())
