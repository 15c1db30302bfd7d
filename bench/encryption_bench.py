"""What CurveZMQ on the stream's links costs: replicated sends with encrypt-links on and off, side
by side in one run.

Two 3-node clusters with ack policy ``majority`` on 127.0.0.1, one with ``[cluster]
encrypt-links = true`` (the default) and one with ``false``, both up for the whole run and without
history logs. The load is replication benchmark part 1's send 100 B at 16 connections (the same
load generator, bench/loadgen, against the master's endpoint); the two clusters take turns, round
after round, the order reversed every other round, and each round's ratio encrypted / clear is
taken (runs seconds apart), then their median. CPU per send is every node's CPU (from /proc) per
acknowledged send. Goal: encrypted throughput at least 90% of clear.

    python -m bench --only encryption [--quick]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loadgen.runner import Pool
from bench.process_cpu import loadavg
from bench.replication_setup import ALL, CONNECTIONS, PROCESSES, Sizes, Target
from bench.replication_throughput import SCENARIOS, ThroughputPart

ENCRYPTED, CLEAR = "encrypted", "clear"
GOAL_RATIO = 0.9


def suite(quick: bool, log=print) -> dict:
    from elasticmq_py.testing.cluster import PORT_SLOT_ENV, Cluster

    os.environ.setdefault(PORT_SLOT_ENV, "7")
    sizes = dataclasses.replace(Sizes.of(quick), duration=1.0 if quick else 3.0, rounds=2 if quick else 5)

    class NoHistory(Cluster):
        def config_for(self, name: str) -> Any:
            return dataclasses.replace(super().config_for(name), history_path=None)

    machine = {"python": __import__("platform").python_version(), "cpus": os.cpu_count(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    before = loadavg()
    clusters: list[Cluster] = []
    pool = Pool(PROCESSES)
    with tempfile.TemporaryDirectory(prefix="encryption-bench-") as d:
        try:
            targets = {}
            for name, encrypt in ((ENCRYPTED, True), (CLEAR, False)):
                (Path(d) / name).mkdir()
                c = NoHistory(Path(d) / name, ALL, encrypt_links=encrypt, replication_config={"policy": "majority"})
                clusters.append(c)
                c.start_all()
                targets[name] = Target(name, cluster=c)
            log(f"encryption: send 100 B, 3 nodes majority, links encrypted and clear, {sizes.rounds} rounds")
            part = ThroughputPart(targets, pool, sizes, log, scenarios=SCENARIOS[:1], names=(ENCRYPTED, CLEAR))
            part.run()
        finally:
            for c in clusters:
                c.close()
            pool.close()
    return report(part.runs, machine, {"loadavg_before": before, "loadavg_after": loadavg()}, sizes, log)


def report(runs: list[dict], machine: dict, env: dict, sizes: Sizes, log=print) -> dict:
    by = {(r["target"], r["round"]): r for r in runs}
    rounds = sorted({r["round"] for r in runs})
    per_target = {}
    for name in (ENCRYPTED, CLEAR):
        rows = [r for r in runs if r["target"] == name]
        per_target[name] = {
            "msgs_per_s_median": round(statistics.median(r["msgs_per_s"] for r in rows)),
            "msgs_per_s_best": max(r["msgs_per_s"] for r in rows),
            "p50_ms_median": round(statistics.median(r["p50_ms"] for r in rows), 3),
            "all_nodes_cpu_us_per_send_median": round(statistics.median(r["all_nodes_cpu_us_per_req"] for r in rows), 1),
            "master_cpu_us_per_send_median": round(statistics.median(r["master_cpu_us_per_req"] for r in rows), 1),
            "errors": sum(r["error_count"] for r in rows)}
    pairs = [(by[(ENCRYPTED, n)], by[(CLEAR, n)]) for n in rounds if (ENCRYPTED, n) in by and (CLEAR, n) in by]
    throughput = [round(a["msgs_per_s"] / b["msgs_per_s"], 3) for a, b in pairs if b["msgs_per_s"]]
    cpu = [round(a["all_nodes_cpu_us_per_req"] / b["all_nodes_cpu_us_per_req"], 3)
           for a, b in pairs if b["all_nodes_cpu_us_per_req"]]
    ratios = {"throughput": {"per_round": throughput, "median": round(statistics.median(throughput), 3)},
              "cpu_per_send": {"per_round": cpu, "median": round(statistics.median(cpu), 3)}}
    met = ratios["throughput"]["median"] >= GOAL_RATIO
    log(f"  encrypted / clear: throughput {ratios['throughput']['median']:.3f} (goal >= {GOAL_RATIO}: "
        f"{'met' if met else 'not met'}), CPU per send {ratios['cpu_per_send']['median']:.3f}")
    return {"benchmark": "encryption", "machine": machine, "environment": env,
            "config": {"duration_s": sizes.duration, "rounds": sizes.rounds, "connections": CONNECTIONS,
                       "generator_processes": PROCESSES, "policy": "majority", "nodes": len(ALL)},
            "results": per_target, "ratios": ratios,
            "goal": {"throughput_ratio_at_least": GOAL_RATIO, "met": met}, "runs": runs}
