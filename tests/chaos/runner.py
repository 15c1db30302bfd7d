"""Running one chaos scenario and judging it.

Every run is the same story: a cluster of real ``elasticmq-py serve`` processes, every directed
link (Raft and mutation stream) through a Toxiproxy proxy; boto3 clients recording every attempt
(tests/cluster/workload.py: sends to a standard and a FIFO queue, receives, deletes and, for one
received message in ten, ChangeMessageVisibility to 0, 1 or 3 s); the scenario's faults
(tests/chaos/scenarios.py), bounded in time; then the faults stop, the network heals, paused
nodes resume and killed ones restart, the queues are drained through the master, every member's
digest is recorded, and ``cluster.checker`` decides.

Verdicts. Under ``majority`` and ``all``: lost, unexpected, FIFO order violations, two active
masters, digest divergence, in-window duplicates and lost deletes must all be 0. Under ``none``
and ``one`` those counts are reported, not asserted, except what no ack policy relaxes: never two
active masters, never a message nobody sent, and every member converges to the master's digest
once the network heals (DESIGN.md invariants 2 and 4). Besides the checker, each scenario asserts
what it is about: those are ``problems``. A run that breaks a rule keeps its folder: node logs
(``n1.log``), node histories, client histories, ``nemesis.jsonl``, ``digests.jsonl``,
``verdict.txt`` and ``result.json``.
"""

from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cluster.checker import Verdict, check, load_dir
from elasticmq_py.testing.cluster import Cluster, check_views
from tests.chaos.harness import CLIENT_READ_TIMEOUT, QUEUES, Run, client_urls, heal
from tests.chaos.scenarios import COMBOS, SCENARIOS
from tests.cluster.workload import VISIBILITY, Nemesis, Recorder, bulk_fill, record_digests, stop_all

STRICT = ("majority", "all")


@dataclass
class Result:
    scenario: str
    seed: int
    policy: str
    long: bool
    ok: bool
    failures: list[str]                   # checker rules broken (under this policy)
    problems: list[str]                   # the scenario's own expectations broken, or errors
    counts: dict[str, int]
    params: dict[str, Any]
    observations: dict[str, Any]
    duration_s: float
    folder: str
    summary: str = ""

    def message(self) -> str:
        lines = [f"{self.scenario} seed={self.seed} policy={self.policy} {'long' if self.long else 'short'}: "
                 f"{'PASS' if self.ok else 'FAIL'} in {self.duration_s:.1f}s"]
        lines += [f"  checker: {f}" for f in self.failures]
        lines += [f"  scenario: {p}" for p in self.problems]
        lines.append(f"  params: {json.dumps(self.params, default=str)}")
        lines.append(f"  observations: {json.dumps(self.observations, default=str)}")
        lines.append(self.summary)
        lines.append(f"(histories, node logs and the verdict are in {self.folder})")
        return "\n".join(lines)


# -- running one ------------------------------------------------------------------------------------

def _setup_queues(c: Cluster, names: list[str]) -> str:
    """Create the workload's queues; -> the master. Set-up, not under test: a master that lost
    its lease for a moment on a loaded machine (a retryable 503) is simply asked again."""
    from botocore.exceptions import ClientError
    deadline = time.time() + 30
    while True:
        master = c.wait_for("a master", c.stable_master(members=set(names)), 30)
        try:
            sqs = c.sqs(master, retries={"mode": "standard", "total_max_attempts": 5})
            sqs.create_queue(QueueName="jobs")
            sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true"})
            return master
        except ClientError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def _counts(v: Verdict) -> dict[str, int]:
    t = v.totals
    return {"attempted": t.attempted, "acked": t.acknowledged, "lost": t.lost, "unexpected": t.unexpected,
            "duplicated": t.duplicated, "in_window": t.in_window, "lost_deletes": t.lost_deletes,
            "recovered": t.recovered, "order": t.order_violations, "two_masters": len(v.two_masters),
            "divergence": len(v.divergence)}


def verdict_failures(v: Verdict, policy: str) -> list[str]:
    """The chaos rules under ``policy``; under none/one only what no policy relaxes."""
    if policy in STRICT:
        return v.failures(policy, strict=True)
    out = []
    if v.unexpected:
        out.append(f"unexpected: {len(v.unexpected)} deliveries of messages never sent")
    if v.two_masters:
        out.append(f"two active masters: {len(v.two_masters)} overlaps")
    if v.divergence:
        out.append(f"divergence: {len(v.divergence)} nodes differ from the reference digest")
    return out


def run_scenario(name: str, folder: Path, seed: int = 0, policy: str = "majority", long: bool = False,
                 nice: int = 0, groups: int = 1) -> Result:
    """Run scenario (or combo) ``name`` once in ``folder`` (created) and judge it. Never raises
    for what the cluster does: an error is a problem of the result. ``nice``: the node
    processes' niceness (make test runs the scenarios beside LAN-timed tests). ``groups``: the
    cluster's replication groups; the judges work per queue and per group either way."""
    sc = SCENARIOS.get(name) or COMBOS[name]
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    run = Run(sc, folder, seed, policy, long, nice, groups)
    c = run.c
    failures: list[str] = []
    counts: dict[str, int] = {}
    summary = ""
    try:
        try:
            for attempt in range(1, 4):
                try:
                    c.start_all(parallel=True)
                    break
                except RuntimeError as e:
                    if attempt == 3 or not _port_clash(folder, e):
                        raise
                # Ports are drawn free below the ephemeral range, but another test process on
                # the machine (another worktree's worker of the same slot) can bind one first:
                # that is no finding, so start over on fresh ports. The failed start is kept
                # beside the run's folder, not in it (its histories are no part of this run).
                c.close()
                folder.rename(folder.with_name(f"{folder.name}.port-clash-{attempt}"))
                folder.mkdir()
                run = Run(sc, folder, seed, policy, long, nice, groups)
                c = run.c
            _setup_queues(c, run.names)
            run.aim("a master after the set-up", 30)
            n_fill = sc.prefill[1 if long else 0]
            if n_fill:
                c.sqs(run.master, retries={"mode": "standard", "total_max_attempts": 5}).create_queue(
                    QueueName="bulk")
                bulk_fill(c.url(run.master), "bulk", n_fill, body_size=1000)
                c.wait_for("the replicas hold the prefill", lambda: c.converged(run.names), 60)
                run.observations["prefill"] = n_fill
            run.nemesis = Nemesis(folder / "nemesis.jsonl")
            on = (lambda: [run.masters[0]]) if sc.clients_on_master else (lambda: run.names)
            run.recorders = [Recorder(f"c{i}", folder / f"c{i}.jsonl", client_urls(c, on), QUEUES,
                                      seed=run.rng.randrange(1 << 30), receive_ratio=sc.receive_ratio,
                                      read_timeout=CLIENT_READ_TIMEOUT)
                             for i in range(sc.clients)]
            for r in run.recorders:
                r.start()
            run.started = True
            run.observations["setup_s"] = round(time.time() - t0, 1)
            run.hold(run.draw("warmup_s", 1.0, (1.0, 3.0)))
            # the scenario aims at whoever is master now (a loaded machine may have elected anew)
            run.aim("a master before the faults", 30)
            t_body = time.time()
            sc.body(run)
            run.observations["faults_s"] = round(time.time() - t_body, 1)
        except Exception as e:   # noqa: BLE001 - a scenario that cannot go on is a finding, not a crash
            run.problems.append(f"scenario error: {type(e).__name__}: {str(e)[:3000]}")
            (folder / "error.txt").write_text(traceback.format_exc())
        t_fin = time.time()
        master = None
        if run.started:   # else the cluster never came up: nothing to heal, nothing to judge
            try:
                master = _heal_and_finish(run)
                run.observations["finish_s"] = round(time.time() - t_fin, 1)
            except Exception as e:   # noqa: BLE001
                run.problems.append(f"recovery error: {type(e).__name__}: {str(e)[:3000]}")
                (folder / "error-recovery.txt").write_text(traceback.format_exc())
        for r in run.recorders:
            r.close()
        if run.nemesis is not None:
            run.nemesis.close()
        history = load_dir(folder)
        verdict = check(history)
        failures = verdict_failures(verdict, policy)
        counts = _counts(verdict)
        summary = verdict.summary(policy)
        try:
            check_views({n: c.history(n) for n in run.names})
        except AssertionError as e:
            run.problems.append(f"views: {e}")
        for rule in run.checks:
            rule(history)
        if master is not None and counts["acked"] < 20:
            run.problems.append(f"too little acknowledged work to mean anything ({counts['acked']} sends)")
        (folder / "verdict.txt").write_text(summary + "\n")
    finally:
        stop_all(run.recorders)
        c.close()
    res = Result(name, seed, policy, long, not failures and not run.problems, failures, run.problems, counts,
                 run.params, run.observations, round(time.time() - t0, 1), str(folder), summary)
    (folder / "result.json").write_text(json.dumps(asdict(res), indent=1, default=str))
    return res


def _port_clash(folder: Path, e: Exception) -> bool:
    if "port taken" in str(e):
        return True
    return any("Address already in use" in f.read_text(errors="replace") for f in folder.glob("*.log"))


def _heal_and_finish(run: Run) -> str:
    """Faults stop; the cluster heals; drain through the master; digests once converged."""
    c = run.c
    heal(run)
    run.hold(run.draw("after_heal_s", 0.5, (0.5, 3.0)))   # some work on the healed cluster
    stop_all(run.recorders)
    master = c.wait_for("a stable master before the drain", c.stable_master(members=set(run.names)), 45)
    # Messages handed out by receives whose answers were lost are invisible for one timeout.
    run.recorders[0].drain(master, c.url(master), rounds_empty=1, visible_at=time.time() + VISIBILITY + 0.5)
    c.wait_for("members converge", lambda: c.converged(run.names), 60)
    record_digests(run.folder / "digests.jsonl",
                   {n: (c.replication(n, timeout=30)["digest"], master) for n in run.names})
    return master
