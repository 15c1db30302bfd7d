"""The docs' benchmark tables, rendered from bench/results/*.json.

    python -m bench.report            # rewrite every block in docs/performance.md, docs/production.md
                                      # (and README.md's headline)
    python -m bench.report --check    # exit 1, naming each block that differs from its results

A block is the text between a line ``<!-- bench:NAME -->`` and a line ``<!-- /bench:NAME -->``,
NAME one of ``BLOCKS`` (bench/tables.py, bench/replication_tables.py). Blocks are rendered from
the full runs' results files (``NAME.json``; the ``-quick`` files of a smoke run are never
rendered, bench/resultfiles.py), so every number on the page comes from a file that ``make
bench`` rewrites, and each block names it. A file or field that a block needs and that is
missing is an error naming both, never a blank cell. ``python -m bench`` runs this after
writing its results, ``--only`` runs too.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Callable

from bench import replication_tables as rt
from bench import tables as t
from bench.resultfiles import MissingResult, Results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PERFORMANCE = ROOT / "docs" / "performance.md"
PRODUCTION = ROOT / "docs" / "production.md"
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- (/?)bench:([a-z0-9-]+) -->$")

BLOCKS: dict[str, Callable[[Results], str]] = {
    "headline": t.headline,
    "storage": t.storage,
    "endpoint": t.endpoint,
    "endpoint-goals": t.endpoint_goals,
    "cpu-profile": t.cpu_profile,
    "failover": t.failover,
    "replication-throughput": rt.replication_throughput,
    "replication-cpu": rt.replication_cpu,
    "replication-threads": rt.replication_threads,
    "replication-history": rt.replication_history,
    "replication-failover": rt.replication_failover,
    "replication-transfer": rt.replication_transfer,
    "replication-goals": rt.replication_goals,
    "wake-cost": rt.wake_cost,
    "master-budget": rt.master_budget,
    "cpu-model": rt.cpu_model,
    "encryption": t.encryption,
    "forward": t.forward,
    "groups": t.groups,
    "groups-failover": t.groups_failover,
    "sigv4": t.sigv4,
    "durability-throughput": t.durability_throughput,
    "durability-recovery": t.durability_recovery,
    "durability-restart": t.durability_restart,
    "durability-goals": t.durability_goals,
    "sim": t.sim,
    "sizing-memory": t.sizing_memory,
    "sizing-disk": t.sizing_disk,
}
# Blocks shown on docs/production.md rather than on the performance page.
PRODUCTION_BLOCKS = frozenset({"sizing-memory", "sizing-disk"})


def rewrite(text: str, results: Results, origin: str = "the page") -> tuple[str, list[str]]:
    """``text`` with every block rendered anew, and the names of the blocks that changed."""
    out: list[str] = []
    changed: list[str] = []
    open_name: str | None = None
    old: list[str] = []
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        m = MARKER.match(line.rstrip("\n"))
        if open_name is None:
            out.append(line)
            if m is None:
                continue
            closing, name = m.groups()
            if closing or name not in BLOCKS:
                raise ValueError(f"{origin}:{n}: {line.strip()} "
                                 + ("closes no block" if closing else f"names no block (known: {', '.join(BLOCKS)})"))
            open_name, old = name, []
        elif m is not None and m.groups() == ("/", open_name):
            new = BLOCKS[open_name](results) + "\n"
            if "".join(old) != new:
                changed.append(open_name)
            out += [new, line]
            open_name = None
        elif m is not None:
            raise ValueError(f"{origin}:{n}: {line.strip()} inside the block {open_name}")
        else:
            old.append(line)
    if open_name is not None:
        raise ValueError(f"{origin}: the block {open_name} is never closed")
    return "".join(out), changed


def pages() -> list[Path]:
    """The pages with blocks: the performance page, the production page once it exists, and
    README.md once it has the headline block."""
    found = [PERFORMANCE]
    if PRODUCTION.exists():
        found.append(PRODUCTION)
    if README.exists() and "<!-- bench:headline -->" in README.read_text().splitlines():
        found.append(README)
    return found


def update(check: bool) -> list[str]:
    """Rewrite (or, ``check``, only compare) every page's blocks; returns 'page: block' for each stale one."""
    results = Results.load(RESULTS)
    stale = []
    for path in pages():
        text = path.read_text()
        new, changed = rewrite(text, results, str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
        stale += [f"{path.name}: {name}" for name in changed]
        if changed and not check:
            path.write_text(new)
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block differs from its results")
    args = p.parse_args(argv)
    try:
        stale = update(args.check)
    except (MissingResult, ValueError) as e:
        print(f"bench.report: {e}", file=sys.stderr)
        return 2
    if args.check:
        for s in stale:
            print(f"stale: {s}")
        return 1 if stale else 0
    for s in stale:
        print(f"rewrote {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
