"""``python -m tests.chaos --runs N --seed S``: many seeded chaos schedules (``make chaos``).

Run i draws its scenario, its ack policy and (inside the scenario) its timings, victims and cut
modes from ``(seed, i)``, so ``--seed S --only i`` replays run i of a schedule. Each run prints
one line as it ends; at the end a table per scenario and policy: runs, passes, and the checker's
counts summed over the runs (under ``none`` the lost sends are the measured price of asynchronous
acks, not a failure). Folders of failing runs are kept (and printed); passing ones only with
``--keep``. The exit status is 1 if any run failed. ``--groups G`` runs every schedule on
clusters of G replication groups (the same draws as with one).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tests.chaos.runner import Result, run_scenario
from tests.chaos.scenarios import COMBOS, SCENARIOS, SHORT_SUITE
from elasticmq_py.testing.cluster import PORT_SLOT_ENV

COLUMNS = ("acked", "lost", "unexpected", "duplicated", "in_window", "lost_deletes", "recovered", "order",
           "two_masters", "divergence")


def plan(seed: int, runs: int, scenarios: list[str], policies: list[str]) -> list[tuple[int, str, str, int]]:
    """(index, scenario, policy, run seed) for each run: a function of the seed alone."""
    out = []
    for i in range(runs):
        rng = random.Random(f"chaos/{seed}/{i}")
        out.append((i, rng.choice(scenarios), rng.choice(policies), rng.randrange(1 << 31)))
    return out


def table(results: list[Result]) -> str:
    groups: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.scenario, r.policy), []).append(r)
    hdr = ("scenario", "policy", "runs", "pass", "fail", *COLUMNS, "mean_s")
    rows = [hdr]
    for (sc, pol), rs in sorted(groups.items()):
        sums = {k: sum(r.counts.get(k, 0) for r in rs) for k in COLUMNS}
        rows.append((sc, pol, str(len(rs)), str(sum(r.ok for r in rs)), str(sum(not r.ok for r in rs)),
                     *(str(sums[k]) for k in COLUMNS), f"{sum(r.duration_s for r in rs) / len(rs):.1f}"))
    tot = {k: sum(r.counts.get(k, 0) for r in results) for k in COLUMNS}
    rows.append(("TOTAL", "", str(len(results)), str(sum(r.ok for r in results)),
                 str(sum(not r.ok for r in results)), *(str(tot[k]) for k in COLUMNS),
                 f"{sum(r.duration_s for r in results) / max(len(results), 1):.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(hdr))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="how many runs (default 20)")
    p.add_argument("--seed", type=int, default=None, help="schedule seed (default: the time; printed)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS),
                   help=f"comma-separated, from: {', '.join(SCENARIOS)}; or the combos {', '.join(COMBOS)} "
                        f"(default: every single scenario; 'short-suite' means make test's five)")
    p.add_argument("--policies", default="majority,none,one,all",
                   help="ack policies to draw from (default majority,none,one,all)")
    p.add_argument("--short", action="store_true", help="the short schedules of make test instead of long ones")
    p.add_argument("--only", type=int, action="append", help="run only these run indexes of the plan (replay)")
    p.add_argument("--out", default=None, help="folder for the runs (default: a new temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the folders of passing runs too")
    p.add_argument("--json", default=None, help="write every result as JSON to this file")
    p.add_argument("--groups", type=int, default=1, metavar="G",
                   help="replication groups of every cluster ([cluster] groups; default 1)")
    args = p.parse_args(argv)

    seed = args.seed if args.seed is not None else int(time.time())
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    if scenarios == ["short-suite"]:
        scenarios = list(SHORT_SUITE)
    unknown = set(scenarios) - set(SCENARIOS) - set(COMBOS)
    if unknown:
        p.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join([*SCENARIOS, *COMBOS])}")
    policies = [s.strip() for s in args.policies.split(",") if s.strip()]
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix=f"elasticmq-chaos-{seed}-"))
    out.mkdir(parents=True, exist_ok=True)
    # A port range of its own, so a concurrent `make test` (xdist workers gw0, gw1) is not raced.
    os.environ.setdefault(PORT_SLOT_ENV, "6")

    runs = plan(seed, args.runs, scenarios, policies)
    if args.only:
        runs = [r for r in runs if r[0] in set(args.only)]
    print(f"chaos: seed {seed}, {len(runs)} runs of {', '.join(scenarios)} under {', '.join(policies)}; "
          f"{'short' if args.short else 'long'} schedules; {args.groups} group(s); folders under {out}", flush=True)
    results: list[Result] = []
    t0 = time.time()
    for i, name, policy, run_seed in runs:
        folder = out / f"run{i:03d}-{name}-{policy}"
        res = run_scenario(name, folder, seed=run_seed, policy=policy, long=not args.short, groups=args.groups)
        results.append(res)
        c = res.counts
        print(f"[{i:3d}] {'PASS' if res.ok else 'FAIL'} {name:<15} {policy:<8} {res.duration_s:5.1f}s "
              f"acked={c.get('acked', 0)} lost={c.get('lost', 0)} dup={c.get('duplicated', 0)} "
              f"in_window={c.get('in_window', 0)} lost_del={c.get('lost_deletes', 0)} "
              f"order={c.get('order', 0)} 2m={c.get('two_masters', 0)} div={c.get('divergence', 0)}"
              + ("" if res.ok else f"\n      replay: python -m tests.chaos --seed {seed} --runs {args.runs}"
                 f" --scenarios {args.scenarios} --policies {args.policies} --only {i}"
                 + (" --short" if args.short else "") + (f" --groups {args.groups}" if args.groups != 1 else "")
                 + "".join(f"\n      checker: {f}" for f in res.failures)
                 + "".join(f"\n      scenario: {pr[:500]}" for pr in res.problems)
                 + f"\n      kept in {folder}"), flush=True)
        if res.ok and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    print(f"\nchaos: seed {seed}, {len(results)} runs in {time.time() - t0:.0f}s\n")
    print(table(results))
    failed = [r for r in results if not r.ok]
    if failed:
        print(f"\n{len(failed)} failing runs kept under {out}:")
        for r in failed:
            print(f"  {r.folder}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
