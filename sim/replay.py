"""The command that replays one seed of a ``sim run``, with that run's options."""

from __future__ import annotations

import shlex
from typing import Any, Mapping

DEFAULTS = {"nodes": 3, "policy": "majority", "duration": 60.0, "crash_policy": "any", "groups": 1}


def replay_command(seed: int, params: Mapping[str, Any], out: str | None = None) -> str:
    """``params``: the run's (``summary.json``'s "params"; None for nodes or policy is 'random').
    Options left at their defaults are left out; everything that shapes the seed is in."""
    argv = ["elasticmq-py", "sim", "replay", str(seed), "--out", out or f"seed-{seed}"]
    nodes = params.get("nodes", 3)
    if nodes != DEFAULTS["nodes"]:
        argv += ["--nodes", "random" if nodes is None else str(nodes)]
    groups = params.get("groups", 1)
    if groups != DEFAULTS["groups"]:
        argv += ["--groups", "random" if groups is None else str(groups)]
    policy = params.get("policy", "majority")
    if policy != DEFAULTS["policy"]:
        argv += ["--policy", "random" if policy is None else policy]
    duration = float(params.get("duration", 60.0))
    if duration != DEFAULTS["duration"]:
        argv += ["--duration", f"{duration:g}"]
    crash = params.get("crash_policy", "any")
    if crash != DEFAULTS["crash_policy"]:
        argv += ["--crash-policy", crash]
    for bug in params.get("bugs") or ():
        argv += ["--bug", bug]
    if params.get("strict"):
        argv.append("--strict")
    if params.get("workload"):
        argv += ["--workload", params["workload"]]
    return shlex.join(argv)
