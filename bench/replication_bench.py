"""Replication benchmark: what the replicated cluster costs and what it buys, measured with real
`elasticmq-py serve` processes on 127.0.0.1, all in one run.

1. Throughput and latency (bench/replication_throughput.py). The same load generator and
   scenarios as the endpoint benchmark (bench.loadgen: raw keep-alive HTTP, JSON protocol, every
   response validated): send 100 B at 16 connections, send-batch 10 x 100 B, the receive +
   delete-batch cycle on a pre-filled queue, and sequential send latency on one connection.
   Targets: one `elasticmq-py serve` without a cluster, a 3-node cluster with ack policy
   `majority`, and one with `none`; the clients talk to the master's endpoint. All three are up
   for the whole part (an idle 3-node cluster costs ~5-10% of a core for its Raft heartbeats;
   each run records it); every scenario runs every target in turn, round after round, with the
   order reversed every other round. Ratios are taken within each round (runs seconds apart)
   and their median reported. The single node writes no history log, and neither do these
   clusters (the comparison is of replication alone); 1b then measures send 100 B against the
   kill rounds' 3-node majority cluster, which writes its history (a JSON line per client
   operation on the master), beside the single node.
2. The `none` window (the HornetQ race; bench/replication_kills.py): rounds of "send unique
   bodies at full speed to the master, kill -9 it, drain the queue through the new master",
   counting acknowledged sends that never come back. `majority` is the control, on its own
   cluster, rounds alternating.
3. State transfer (bench/replication_transfer.py): a 2-of-3 cluster holding 1,000,000 100-byte
   messages (a 16 MB replication log, so the third member must be brought up by transfer, not by
   replaying the log); a steady send load runs throughout while the third node starts empty and
   joins. The master's send rate is sampled before and during the transfer. A transfer that
   does not complete within generous bounds is reported as such, with the cluster's timeline
   from the nodes' histories (views, masters, transfers started and finished, time with an
   active master).
4. End-to-end failover, in the same kill rounds as 2: from the kill to the first acknowledged
   SendMessage through a surviving node's endpoint (the other survivor forwards to the new master).

Goals, measured side by side in one run (bench/replication_report.py): the majority master's CPU
per send at most 1.5x the single node's, each replica's at most 0.5x (CPU of each process from
/proc, per acknowledged request; part 1 also splits it by thread: the event loop, libzmq's
threads, the rest, mostly pysyncobj's tick thread: bench/process_cpu.py); added median latency at
1 connection <= 0.5 ms; on this 2-core machine throughput >= 45% of single for `majority` and
>= 55% for `none`, for send, send-batch and receive+delete-batch; failover <= 0.4 s median with no
acknowledged send lost; a transfer of 1,000,000 messages <= 10 s, the master keeping >= 70% of its
throughput meanwhile.

    python -m bench --only replication [--quick]
    python -m bench.replication_bench [throughput failover transfer] [--quick] [--out FILE]
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import wake_cost
from bench.loadgen import servers
from bench.loadgen.runner import Pool
from bench.process_cpu import background_busy, loadavg
from bench.replication_kills import KillPart
from bench.replication_report import judge_goals, print_report
from bench.replication_setup import ALL, CONNECTIONS, MAJORITY, NONE, PROCESSES, SINGLE, Sizes, Target
from bench.replication_throughput import SCENARIOS, ThroughputPart
from bench.replication_transfer import TRANSFER_TIMING, TransferPart

# bench/wake_cost.py's cycles, full run and --quick (about 1.3 s and 0.3 s on this machine)
WAKE_COST_SIZE = {False: {"cycles": 1000}, True: {"cycles": 200}}


def run(quick: bool = False, parts: tuple[str, ...] = ("throughput", "failover", "transfer"), log=print,
        keep: Path | None = None, transfer_messages: int | None = None) -> dict:
    """``keep``: run in this folder and leave the nodes' logs and histories there.
    ``transfer_messages``: part 3's state size instead of the default (to study a transfer)."""
    sizes = Sizes.of(quick)
    if transfer_messages:
        sizes = dataclasses.replace(sizes, transfer_messages=transfer_messages)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return _run(sizes, quick, parts, log, keep)
    with tempfile.TemporaryDirectory(prefix="replication-bench-") as d:
        return _run(sizes, quick, parts, log, Path(d))


def _run(sizes: Sizes, quick: bool, parts: tuple[str, ...], log, tmp: Path) -> dict:
    from elasticmq_py.testing.cluster import PORT_SLOT_ENV
    from elasticmq_py.testing.cluster import Cluster

    # Ports of their own, so these clusters do not race a concurrent `make test` (the xdist
    # workers' slots) or the chaos runner (slot 6) for the same ones.
    os.environ.setdefault(PORT_SLOT_ENV, "7")

    env: dict[str, Any] = {"cpus": os.cpu_count(), "loadavg_before": loadavg(),
                           "background_busy_pct": background_busy(),
                           "wake_cost_before": wake_cost.measure(**WAKE_COST_SIZE[quick])}
    log(f"replication bench: {'quick; ' if quick else ''}before starting, the machine was busy "
        f"{env['background_busy_pct']}% of a core, load avg {env['loadavg_before']}")
    report: dict[str, Any] = {"config": {**sizes.__dict__, "connections": CONNECTIONS, "generator_processes": PROCESSES,
                                         "timing": "cluster.config.Timing defaults (parts 1, 2, 4); "
                                                   f"part 3: {TRANSFER_TIMING}"},
                              "environment": env}
    pool = Pool(PROCESSES)
    try:
        if "throughput" in parts or "failover" in parts:
            clusters: dict[str, Cluster] = {}
            single = None

            class NoHistory(Cluster):
                def config_for(self, name: str) -> Any:
                    return dataclasses.replace(super().config_for(name), history_path=None)

            def start(policy: str, history: bool) -> Target:
                folder = tmp / f"{policy}{'' if history else '-no-history'}"
                folder.mkdir()
                c = (Cluster if history else NoHistory)(folder, ALL)
                c.replication_config = {"policy": policy}
                clusters[folder.name] = c
                c.start_all()
                return Target(policy, cluster=c)

            try:
                single = servers.start_ours()
                targets = {SINGLE: Target(SINGLE, single=single)}
                if "throughput" in parts:
                    # The single node writes no history log, and neither do these clusters: the
                    # comparison is of replication alone. What the history costs is measured
                    # next, on the clusters of the kill rounds (which read their histories).
                    for policy in (MAJORITY, NONE):
                        targets[policy] = start(policy, history=False)
                    log("part 1: throughput and latency (no history logs)")
                    report["throughput"] = ThroughputPart(targets, pool, sizes, log).run()
                    report["master_changes_during_part_1"] = {p: targets[p].master_changes for p in (MAJORITY, NONE)}
                    for name in list(clusters):
                        clusters.pop(name).close()
                for policy in (MAJORITY, NONE):
                    targets[policy] = start(policy, history=True)
                if "throughput" in parts:
                    log("part 1b: send 100 B, the same against a 3-node majority cluster with history logs")
                    report["with_history"] = ThroughputPart(
                        {SINGLE: targets[SINGLE], MAJORITY: targets[MAJORITY]}, pool, sizes, log,
                        scenarios=SCENARIOS[:1], names=(SINGLE, MAJORITY)).run()
                if "failover" in parts:
                    single.stop()
                    log("parts 2 and 4: kill -9 rounds")
                    report["failover"] = KillPart({p: targets[p] for p in (NONE, MAJORITY)}, sizes, log).run()
            finally:
                for c in clusters.values():
                    c.close()
                if single is not None:
                    single.stop()
        if "transfer" in parts:
            log(f"part 3: state transfer of {sizes.transfer_messages:,} messages to a joining node")
            (tmp / "transfer").mkdir()
            try:
                report["transfer"] = TransferPart(tmp / "transfer", pool, sizes, log=log).run()
            except Exception as e:
                report["transfer"] = None
                report["transfer_failed"] = f"{type(e).__name__}: {e}"[:3000]
                log(f"  transfer FAILED: {report['transfer_failed'][:1000]}")
    finally:
        pool.close()
    env["loadavg_after"] = loadavg()
    env["wake_cost_after"] = wake_cost.measure(**WAKE_COST_SIZE[quick])
    report["goals"] = judge_goals(report.get("throughput") or {"within_round": {}}, report.get("failover")
                             or {"by_policy": {MAJORITY: {"kill_to_first_ack_s": {}, "lost_acked": None}}},
                             report.get("transfer"))
    return report


def suite(quick: bool) -> dict:
    """``python -m bench --only replication``: prints the table, returns the JSON report."""
    report = run(quick)
    print_report(report)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {"benchmark": "replication", "machine": machine, "quick": quick, **report}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="one or more parts of the replication benchmark")
    ap.add_argument("parts", nargs="*", default=["throughput", "failover", "transfer"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="write the whole report here as JSON")
    ap.add_argument("--keep", help="run in this folder and keep the nodes' logs and histories")
    ap.add_argument("--transfer-messages", type=int, help="part 3's state size (default 1,000,000; quick 100,000)")
    a = ap.parse_args()
    rep = run(quick=a.quick, parts=tuple(a.parts), keep=Path(a.keep) if a.keep else None,
              transfer_messages=a.transfer_messages)
    if a.out:
        Path(a.out).write_text(json.dumps(rep, indent=1, default=str) + "\n")
    print(json.dumps(rep["goals"], indent=1))
