"""Decision coverage of a sweep: per decision point of the cores (cluster/decisions.py), how often
it ran and how often its plausible alternative would have decided differently, added up over
the seeds. ``sim run`` prints the table and writes it to ``summary.json``; the report shows it.

A point whose alternative differed fewer than ``MIN_DIFFERED`` times in the sweep is flagged:
a mutant making exactly that change would likely pass it. A point that never ran is a missing
scenario.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from cluster.decisions import POINTS, merge

MIN_DIFFERED = 10


def total(per_seed: Iterable[str | dict[str, Any] | None]) -> dict[str, list[int]]:
    """The sweep's counts from each seed's (JSON or dict) point -> (ran, differed)."""
    out: dict[str, list[int]] = {}
    for d in per_seed:
        if d:
            merge(out, json.loads(d) if isinstance(d, str) else d)
    return out


def rows(totals: dict[str, Any], min_differed: int = MIN_DIFFERED) -> list[dict[str, Any]]:
    """Every known point (those that never ran too), then any unknown name, in POINTS' order."""
    names = list(POINTS) + sorted(set(totals) - set(POINTS))
    out = []
    for name in names:
        ran, differed = totals.get(name, (0, 0))
        flag = "never ran" if not ran else f"differed < {min_differed}" if differed < min_differed else ""
        out.append({"point": name, "ran": int(ran), "differed": int(differed), "flag": flag,
                    "alternative": POINTS.get(name, "")})
    return out


def flagged(totals: dict[str, Any], min_differed: int = MIN_DIFFERED) -> list[str]:
    return [r["point"] for r in rows(totals, min_differed) if r["flag"]]


def format_table(totals: dict[str, Any], min_differed: int = MIN_DIFFERED) -> str:
    rs = rows(totals, min_differed)
    w = max(len(r["point"]) for r in rs)
    lines = [f"{'decision point':<{w}}  {'ran':>10}  {'differed':>9}"]
    for r in rs:
        lines.append(f"{r['point']:<{w}}  {r['ran']:>10}  {r['differed']:>9}" + (f"  <- {r['flag']}" if r["flag"] else ""))
    bad = sum(1 for r in rs if r["flag"])
    lines.append(f"{len(rs) - bad} of {len(rs)} points had a differing alternative at least {min_differed} times"
                 + (f"; {bad} flagged" if bad else ""))
    return "\n".join(lines)
