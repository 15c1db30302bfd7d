"""Failover benchmark: real `elasticmq-py serve` processes in a 3-node cluster on loopback.

Per trial (bench/failover_measure.py does the work):
* kill -9 the active master; time until a new master is active (from the new master's history);
* SIGSTOP the active master; time until it is inactive (its lease running out, from its own
  history after SIGCONT) and until a new master is active; and whether the first came first.

Goals: new master active <= 0.5 s median and <= 1.5 s p99 after kill -9; the old master inactive
before the new one is active in 100% of trials.

    python -m bench --only failover [--quick]
    python -c 'from bench.failover_bench import suite; suite(quick=True)'
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from pathlib import Path

TRIALS, QUICK_TRIALS = 20, 5
GOALS = {"kill_to_new_active_median_s": 0.5, "kill_to_new_active_p99_s": 1.5, "old_inactive_first_pct": 100.0}


def suite(quick: bool = False, trials: int | None = None) -> dict:
    """Run the trials, print a short table, and return a JSON-able report."""
    from bench import failover_measure

    n = trials or (QUICK_TRIALS if quick else TRIALS)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="failover-bench-") as d:
        result = failover_measure.run(n, Path(d))
    raw = result.pop("raw")
    ordered, total = (int(x) for x in result["old_inactive_before_new_active"].split("/"))
    pct = round(100.0 * ordered / total, 1) if total else None
    kill, stop_in, stop_new = (result[k] for k in ("kill_to_new_active", "sigstop_to_old_inactive",
                                                   "sigstop_to_new_active"))
    met = {
        "kill_to_new_active_median_s": kill.get("median_s") is not None and kill["median_s"] <= GOALS["kill_to_new_active_median_s"],
        "kill_to_new_active_p99_s": kill.get("p99_s") is not None and kill["p99_s"] <= GOALS["kill_to_new_active_p99_s"],
        "old_inactive_first_pct": pct == GOALS["old_inactive_first_pct"],
    }

    print(f"\nfailover ({result['nodes']}, 3 nodes, {n} trials, {time.monotonic() - started:.0f} s)")
    print(f"{'measure':40} {'median':>8} {'p99':>8} {'max':>8} {'n':>4}")
    for label, s in (("kill -9 -> new master active", kill),
                     ("SIGSTOP -> old master inactive", stop_in),
                     ("SIGSTOP -> new master active", stop_new)):
        if s.get("n"):
            print(f"{label:40} {s['median_s']:>7.3f}s {s['p99_s']:>7.3f}s {s['max_s']:>7.3f}s {s['n']:>4}")
        else:
            print(f"{label:40} {'-':>8} {'-':>8} {'-':>8} {0:>4}")
    print(f"old master inactive before new active: {ordered}/{total} ({pct}%)")
    print("goals: " + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in met.items()))

    return {
        "benchmark": "failover",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
                    "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "quick": quick,
        **result,
        "old_inactive_before_new_active_pct": pct,
        "goals": GOALS,
        "goals_met": met,
        "raw": raw,
    }


if __name__ == "__main__":
    import json
    import sys

    report = suite(quick="--quick" in sys.argv)
    print(json.dumps({k: v for k, v in report.items() if k != "raw"}, indent=2))
