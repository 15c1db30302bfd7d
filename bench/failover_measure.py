"""Failover measurements with real processes: `python -m bench.failover_measure --trials 20`.

Per trial on one 3-node cluster (the victim is restarted between trials):
* kill:    SIGKILL the active master; time until a new master is active (from its history).
* sigstop: SIGSTOP the active master; time until it is inactive (its lease expiry, from its own
           history after SIGCONT) and until a new master is active; check the first came first.
Prints a JSON summary (median, p99, max) and, with --out, writes every trial's numbers.
Goals: new master active <= 0.5 s median, <= 1.5 s p99; old master inactive before the
new one is active in 100% of trials.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from elasticmq_py.testing.cluster import Cluster, check_single_master, check_views

ALL = ["n1", "n2", "n3"]


def _first(c: Cluster, node: str, kind: str, after: float) -> float | None:
    ts = [e["ts"] for e in c.history(node) if e["event"] == kind and e["ts"] >= after]
    return min(ts) if ts else None


def _end_of_activity(c: Cluster, node: str, t0: float) -> float | None:
    """When the active interval that contained t0 ended."""
    events = c.history(node)
    started = max((e["ts"] for e in events if e["event"] == "activated" and e["ts"] <= t0), default=None)
    if started is None:
        return None
    ends = [e["ts"] for e in events if e["event"] == "deactivated" and e["ts"] >= started]
    return min(ends) if ends else None


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _summary(xs: list[float]) -> dict[str, float]:
    return {"n": len(xs), "median_s": round(statistics.median(xs), 4), "p99_s": round(_pct(xs, 99), 4),
            "max_s": round(max(xs), 4), "min_s": round(min(xs), 4)} if xs else {"n": 0}


def run(trials: int, workdir: Path) -> dict:
    """Trials on three `elasticmq-py serve` processes (elasticmq_py/testing/cluster.py)."""
    c = Cluster(workdir, ALL)
    kill_times: list[float] = []
    stop_inactive: list[float] = []
    stop_new_active: list[float] = []
    ordered = 0
    try:
        c.start_all()
        for i in range(trials):
            for mode in ("kill", "sigstop"):
                master = c.wait_for("stable master", c.stable_master(members=set(ALL)), 20)
                time.sleep(0.3)  # let the lease settle into its steady rhythm
                if c.stable_master(members=set(ALL))() != master:
                    print("mastership moved before the fault; retrying", file=sys.stderr)
                    continue
                rest = [n for n in ALL if n != master]
                t0 = time.time()
                if mode == "kill":
                    c.kill(master)
                else:
                    c.sigstop(master)
                new = c.wait_for("new master", c.stable_master(among=rest, members=set(rest)), 20)
                act = _first(c, new, "activated", t0)
                if mode == "kill":
                    kill_times.append(act - t0)
                    c.start(master)
                else:
                    time.sleep(max(0.0, c.timing.leader_fallback + 0.2 - (time.time() - t0)))
                    c.sigcont(master)
                    c.wait_for("resumed master reports", lambda: (c.status(master) or {}).get("role") == "follower", 10)
                    deact = _end_of_activity(c, master, t0)
                    stop_inactive.append(deact - t0)
                    stop_new_active.append(act - t0)
                    ordered += deact < act
            print(f"trial {i + 1}/{trials}: kill {kill_times[-1]:.3f}s, "
                  f"sigstop inactive {stop_inactive[-1]:.3f}s / new active {stop_new_active[-1]:.3f}s",
                  file=sys.stderr, flush=True)
    finally:
        c.close()
    check_views(c.histories())
    check_single_master(c.histories(), c.kills)
    return {
        "trials": trials,
        "nodes": "elasticmq-py serve",
        "timing": {k: getattr(c.timing, k) for k in ("heartbeat", "election_min", "election_max",
                                                      "vote_guard", "lease", "leader_fallback")},
        "kill_to_new_active": _summary(kill_times),
        "sigstop_to_old_inactive": _summary(stop_inactive),
        "sigstop_to_new_active": _summary(stop_new_active),
        "old_inactive_before_new_active": f"{ordered}/{len(stop_inactive)}",
        "activations_per_node": {n: sum(e["event"] == "activated" for e in c.history(n)) for n in ALL},
        "raw": {"kill": kill_times, "sigstop_inactive": stop_inactive, "sigstop_new_active": stop_new_active},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--out", help="write the full result as JSON here")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="failover-") as d:
        result = run(args.trials, Path(d))
    raw = result.pop("raw")
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(dict(result, raw=raw), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
