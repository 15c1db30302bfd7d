"""Durability benchmark: what a data-dir costs and what it buys, in one run.

1. Throughput. Send 100 B at 16 connections (bench.loadgen: raw keep-alive HTTP, JSON protocol,
   every response validated) against four targets that are up together: one `serve` in memory,
   one `serve --data-dir` with `fsync = always`, a 3-node `majority` cluster in memory and the
   same with data-dirs and `fsync = always`. Every round runs each target in turn (order
   reversed every other round); the journal / memory ratios are taken within a round and their
   median reported, with CPU per send and how many sends each fsync carried.
2. Recovery. 1,000,000 messages of 100 B are written to a journal by the product's own code
   (storage executes SendMessageBatch; one journal entry per 100 batches, as group commit
   makes them under load), then recovered by `cluster.journaling.open_journal` in a fresh
   process: once from the whole journal, once after a compaction snapshot. Journal and snapshot
   bytes per message are reported. (The files are in the page cache: a cold disk adds its read
   time, ~200 MB here.)
3. Restart. A 3-node `majority` cluster holds N messages; one replica is killed, the others
   take writes for 10 s, and it restarts. Measured: from its start to being level with the
   master, and how it got there (journal + log fetch, or a state transfer). The same on an
   in-memory cluster, where the restarted node is empty and gets a full state transfer.

Goals: send with `fsync = always` >= 60% of in memory, single node and 3-node
majority; recovery of 1,000,000 messages <= 5 s (<= 10 us per message); restart of one node of
three after 10 s down >= 10x faster than a full state transfer of the same state.

    python -m bench --only durability [--quick]
    python -m bench.durability_bench [throughput recovery restart] [--quick]
"""

from __future__ import annotations

import gc
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.loadgen import servers
from bench.loadgen.runner import Job, Pool
from bench.loadgen.sqs import JSON
from bench.process_cpu import CpuWindow, background_busy, loadavg
from bench.replication_setup import ALL, CONNECTIONS, PROCESSES, Target, call, create_queue

ROOT = Path(__file__).resolve().parents[1]
MEM_1, DISK_1, MEM_3, DISK_3 = "single, memory", "single, fsync always", "3 nodes, memory", "3 nodes, fsync always"
TARGETS = (MEM_1, DISK_1, MEM_3, DISK_3)
LOG_LIMIT_MB = 16
GOALS = {"single_ratio": 0.60, "cluster_ratio": 0.60, "recovery_s_1m": 5.0, "recovery_us_per_msg": 10.0,
         "restart_speedup": 10.0}


@dataclass(frozen=True)
class Sizes:
    duration: float
    rounds: int
    recovery_messages: int
    restart_messages: int
    down_s: float

    @classmethod
    def of(cls, quick: bool) -> "Sizes":
        if quick:
            return cls(1.5, 1, 100_000, 150_000, 3.0)
        return cls(3.0, 3, 1_000_000, 1_000_000, 10.0)


def _start_single(data_dir: Path | None) -> servers.ServerProc:
    argv = [sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", "--print-port", "--log-level", "WARNING"]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir), "--fsync", "always"]
    return servers._print_port_server("elasticmq-py", argv, (JSON,), "")


def _journal_of(port: int) -> dict | None:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/cluster", timeout=5) as r:
            return json.loads(r.read()).get("journal")
    except OSError:
        return None


# -- part 1 --------------------------------------------------------------------------------------

def throughput(tmp: Path, sizes: Sizes, pool: Pool, log=print) -> dict:
    from elasticmq_py.testing.cluster import Cluster

    singles: list[servers.ServerProc] = []
    clusters: list[Any] = []
    try:
        mem1 = _start_single(None)
        singles.append(mem1)
        disk1 = _start_single(tmp / "single-data")
        singles.append(disk1)
        targets = {MEM_1: Target(MEM_1, single=mem1), DISK_1: Target(DISK_1, single=disk1)}
        for name, fsync in ((MEM_3, None), (DISK_3, "always")):
            folder = tmp / ("mem3" if fsync is None else "disk3")
            folder.mkdir()
            c = Cluster(folder, ALL, fsync=fsync)
            c.replication_config = {"policy": "majority"}
            clusters.append(c)
            c.start_all()
            targets[name] = Target(name, cluster=c)
        runs: list[dict] = []
        for t in targets.values():   # warm-up
            t.ready()
            url = create_queue(t.entry.port, f"warm-{uuid.uuid4().hex[:6]}")
            pool.run(Job(kind="send", protocol=JSON, port=t.entry.port, host_header=t.entry.host_header,
                         queue_url=url, connections=CONNECTIONS, processes=PROCESSES, duration=1.0))
        for rnd in range(sizes.rounds):
            for name in (TARGETS if rnd % 2 == 0 else TARGETS[::-1]):
                t = targets[name]
                t.ready()
                url = create_queue(t.entry.port, f"bench-{uuid.uuid4().hex[:8]}")
                before = _journal_of(t.entry.port)
                window = CpuWindow(targets, t)
                r = pool.run(Job(kind="send", protocol=JSON, port=t.entry.port, host_header=t.entry.host_header,
                                 queue_url=url, connections=CONNECTIONS, processes=PROCESSES,
                                 duration=sizes.duration), on_start=window.start)
                window.stop()
                after = _journal_of(t.entry.port)
                call(t.entry.port, "DeleteQueue", {"QueueUrl": url}, retry_s=10)
                row = {"target": name, "round": rnd, "requests": r.requests, "msgs_per_s": round(r.msg_rate),
                       "p50_ms": round(1e3 * r.percentile(50), 3), "p99_ms": round(1e3 * r.percentile(99), 3),
                       "errors": r.error_count, **window.shares(r.client_cpu, r.requests)}
                if before and after and after["fsyncs"] > before["fsyncs"]:
                    fs = after["fsyncs"] - before["fsyncs"]
                    row["fsyncs_per_s"] = round(fs / max(r.wall, 1e-9))
                    row["sends_per_fsync"] = round(r.requests / fs, 1)
                    row["fsync_ms_avg"] = after["fsync_ms_avg"]
                runs.append(row)
                log(f"  [{rnd + 1}/{sizes.rounds}] {name:22} {row['msgs_per_s']:>7,}/s  p50 {row['p50_ms']:.2f} ms  "
                    f"master {row.get('master_cpu_us_per_req')} us/send"
                    + (f"  {row['sends_per_fsync']} sends/fsync" if "sends_per_fsync" in row else ""))
        by = {(r["target"], r["round"]): r for r in runs}
        ratios = {}
        for label, mem, disk in (("single", MEM_1, DISK_1), ("cluster", MEM_3, DISK_3)):
            per = [round(by[(disk, k)]["msgs_per_s"] / by[(mem, k)]["msgs_per_s"], 3)
                   for k in range(sizes.rounds) if by[(mem, k)]["msgs_per_s"]]
            ratios[label] = {"per_round": per, "median": statistics.median(per) if per else None}
        summary = {}
        for name in TARGETS:
            rows = [r for r in runs if r["target"] == name]
            summary[name] = {k: statistics.median(r[k] for r in rows) for k in
                             ("msgs_per_s", "p50_ms", "master_cpu_us_per_req", "all_nodes_cpu_us_per_req")
                             if all(k in r for r in rows)}
            if all("sends_per_fsync" in r for r in rows):
                summary[name]["sends_per_fsync"] = statistics.median(r["sends_per_fsync"] for r in rows)
                summary[name]["fsync_ms_avg"] = statistics.median(r["fsync_ms_avg"] for r in rows)
        return {"runs": runs, "ratios": ratios, "summary": summary}
    finally:
        for c in clusters:
            c.close()
        for s in singles:
            s.stop()


# -- part 2 --------------------------------------------------------------------------------------

_RECOVER = """
import gc, json, sys, time
from elasticmq_py.gcpolicy import _NEVER
t0, t1, _ = gc.get_threshold()
gc.set_threshold(t0, t1, _NEVER)   # as `serve` runs it (elasticmq_py/gcpolicy.py): no full collections
t0 = time.monotonic()
from cluster.config import Durability
from cluster.journaling import open_journal
from storage import Storage
from cluster.clock import SystemClock
imported = time.monotonic() - t0
cpu0 = time.process_time()
journal, rec = open_journal(Durability(sys.argv[1]), lambda: Storage(SystemClock()), 64 << 20)
cpu = time.process_time() - cpu0
print(json.dumps({"seconds": rec.seconds, "cpu_s": cpu, "messages": rec.messages, "entries": rec.entries,
                  "snapshot_seq": rec.snapshot_seq, "import_s": imported}))
journal.close()
"""


def _write_journal(data_dir: Path, messages: int) -> dict:
    """``messages`` 100 B messages through storage and the journal, as a busy node writes them."""
    from storage import IdSource, Storage

    from cluster.clock import SystemClock
    from storage.codec import encode_many
    from storage.commands import CreateQueue, Namespace, SendMessageBatch, SendMessageBatchEntry

    from cluster.journal.disk import OsDisk
    from cluster.journal.format import JournalEntry
    from cluster.journal.journal import Journal

    ns = Namespace("us-east-1", "000000000000")
    storage = Storage(SystemClock(), IdSource(1))
    journal, _ = Journal.open(OsDisk(data_dir / "journal"))
    staged: list = []
    seq = 0
    t0 = time.monotonic()

    def cut() -> None:
        nonlocal seq, staged
        if staged:
            seq += 1
            journal.append([JournalEntry(seq, 1, encode_many(staged))])
            staged = []

    _, muts = storage.execute(CreateQueue(ns, "q"))
    staged += muts
    key = ns.key("q")
    rng = random.Random(16)
    for i in range(0, messages, 10):
        # distinct 100-character bodies: what the codec makes of real ones, not of repeats
        _, muts = storage.execute(SendMessageBatch(key, tuple(SendMessageBatchEntry(str(j), rng.randbytes(50).hex())
                                                              for j in range(10))))
        staged += muts
        if (i // 10) % 100 == 99:
            cut()
    cut()
    journal.sync()
    journal_bytes = journal.stats().bytes_on_disk
    wrote_s = time.monotonic() - t0
    return {"journal": journal, "storage": storage, "seq": seq, "journal_bytes": journal_bytes, "write_s": wrote_s}


def _recover(data_dir: Path) -> dict:
    """Recover ``data_dir`` in a fresh process, as a restart does. The caller must not hold a
    big heap meanwhile: a restarted node reuses the memory its dead process freed, while pages
    this VM never touched cost far more to fault in (recovering 1,000,000 messages took 5.2 s
    of CPU beside a process holding the writer's 1,000,000 messages, 2.9 s without)."""
    p = subprocess.run([sys.executable, "-c", _RECOVER, str(data_dir)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"recovery failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def recovery(tmp: Path, sizes: Sizes, log=print) -> dict:
    from storage.codec import encode_many

    n = sizes.recovery_messages
    data = tmp / "recovery-data"
    w = _write_journal(data, n)
    journal, storage = w["journal"], w["storage"]
    journal.close()
    # the compaction snapshot a node would take, through the product's journal, in a copy of the
    # data-dir: both recoveries then run after this process dropped its own copy of the state
    # (see _recover)
    snap_data = tmp / "recovery-snapshot"
    shutil.copytree(data, snap_data)
    from cluster.journal.disk import OsDisk
    from cluster.journal.journal import Journal
    journal, _ = Journal.open(OsDisk(snap_data / "journal"))
    snap = journal.begin_snapshot(w["seq"], 1)
    batch: list = []
    for rec in storage.iter_snapshot():
        batch.append(rec)
        if len(batch) >= 256:
            snap.add(encode_many(batch))
            batch = []
    if batch:
        snap.add(encode_many(batch))
    st = snap.finish(w["seq"])
    journal.close()
    stats = {"journal_bytes": w["journal_bytes"], "write_s": w["write_s"]}
    del w, storage, batch, rec
    gc.collect()
    whole = _recover(data)
    log(f"  whole journal: {whole['messages']:,} messages in {whole['seconds']:.2f} s "
        f"({1e6 * whole['seconds'] / n:.1f} us/msg, {whole['cpu_s']:.2f} s CPU); journal {stats['journal_bytes'] / n:.1f} B/msg")
    snapped = _recover(snap_data)
    log(f"  from a snapshot: {snapped['messages']:,} messages in {snapped['seconds']:.2f} s "
        f"({1e6 * snapped['seconds'] / n:.1f} us/msg, {snapped['cpu_s']:.2f} s CPU); snapshot {st.bytes / n:.1f} B/msg")
    return {"messages": n, "journal_bytes_per_msg": round(stats["journal_bytes"] / n, 1),
            "snapshot_bytes_per_msg": round(st.bytes / n, 1), "write_s": round(stats["write_s"], 2),
            "whole_journal": {**whole, "us_per_msg": round(1e6 * whole["seconds"] / n, 2)},
            "from_snapshot": {**snapped, "us_per_msg": round(1e6 * snapped["seconds"] / n, 2)}}


# -- part 3 --------------------------------------------------------------------------------------

def _restart_once(folder: Path, fsync: str | None, sizes: Sizes, pool: Pool, log=print) -> dict:
    from cluster.config import Timing
    from elasticmq_py.testing.cluster import Cluster

    from bench.replication_transfer import TRANSFER_TIMING_KW

    folder.mkdir()
    c = Cluster(folder, ALL, timing=Timing(**TRANSFER_TIMING_KW), fsync=fsync)
    # The log holds the writes of the node's time down (~5 MB) but not the whole history, so
    # the empty node of the in-memory cluster needs a full transfer, as a real one would.
    c.replication_config = {"policy": "majority", "log-limit-mb": LOG_LIMIT_MB}
    try:
        c.start_all()
        t = Target("restart", cluster=c)
        t.ready(60)
        url = create_queue(t.entry.port, "bulk")
        pool.run(Job(kind="send_batch", protocol=JSON, port=t.entry.port, host_header=t.entry.host_header,
                     queue_url=url, connections=CONNECTIONS, processes=PROCESSES, duration=600.0,
                     max_messages=sizes.restart_messages))
        t.ready(120)
        victim = next(n for n in ALL if n != t.master)
        c.kill(victim)
        pool.run(Job(kind="send", protocol=JSON, port=t.entry.port, host_header=t.entry.host_header, queue_url=url,
                     connections=4, processes=1, duration=sizes.down_s))
        started = time.monotonic()
        c.start(victim, timeout=120)
        listening = time.monotonic() - started

        def level() -> bool:
            # status, not replication(): the latter adds the state digest, seconds at 1M messages
            st = (c.status(t.master) or {}).get("replication") or {}
            r = (st.get("replicas") or {}).get(victim) or {}
            return bool(r.get("connected")) and r.get("lag_batches") == 0 and not r.get("needs_transfer")
        c.wait_for(f"{victim} level with the master", level, 300)
        took = time.monotonic() - started
        vs = c.status(victim) or {}
        st = vs.get("replication") or {}
        journal = vs.get("journal") or {}
        return {"seconds": round(took, 2), "process_listening_s": round(listening, 2),
                "transfer": st.get("last_transfer"),
                "recovery": journal.get("recovery"), "amnesiac": st.get("amnesiac")}
    finally:
        c.close()


def restart(tmp: Path, sizes: Sizes, pool: Pool, log=print) -> dict:
    out = {}
    for label, fsync in (("journal", "always"), ("memory", None)):
        r = _restart_once(tmp / f"restart-{label}", fsync, sizes, pool, log)
        how = "state transfer" if r["transfer"] else "journal + log fetch"
        log(f"  {label:8} restart to level: {r['seconds']:.2f} s ({how}; listening after "
            f"{r['process_listening_s']:.2f} s)")
        out[label] = r
    j, m = out["journal"]["seconds"], out["memory"]["seconds"]
    out["speedup"] = round(m / j, 2) if j else None
    return out


# -- the whole ---------------------------------------------------------------------------------

def run(quick: bool = False, parts: tuple[str, ...] = ("throughput", "recovery", "restart"), log=print) -> dict:
    from elasticmq_py.testing.cluster import PORT_SLOT_ENV
    os.environ.setdefault(PORT_SLOT_ENV, "7")
    sizes = Sizes.of(quick)
    env = {"cpus": os.cpu_count(), "loadavg_before": loadavg(), "background_busy_pct": background_busy()}
    report: dict[str, Any] = {"config": sizes.__dict__, "environment": env}
    pool = Pool(PROCESSES)
    try:
        with tempfile.TemporaryDirectory(prefix="durability-bench-") as d:
            tmp = Path(d)
            if "throughput" in parts:
                log("part 1: send throughput, journal (fsync always) against memory")
                report["throughput"] = throughput(tmp, sizes, pool, log)
            if "recovery" in parts:
                log(f"part 2: recovery of {sizes.recovery_messages:,} messages")
                report["recovery"] = recovery(tmp, sizes, log)
            if "restart" in parts:
                log(f"part 3: restart of one node of three after {sizes.down_s:g} s down "
                    f"({sizes.restart_messages:,} messages stored)")
                report["restart"] = restart(tmp, sizes, pool, log)
    finally:
        pool.close()
    env["loadavg_after"] = loadavg()
    report["goals"] = _goals(report)
    return report


def _goals(report: dict) -> list[dict]:
    goals = []
    tp = report.get("throughput")
    if tp:
        for label in ("single", "cluster"):
            v = tp["ratios"][label]["median"]
            goals.append({"goal": f"{label}: send with fsync always / in memory >= {GOALS[label + '_ratio']}",
                          "value": v, "met": v is not None and v >= GOALS[label + "_ratio"]})
    rec = report.get("recovery")
    if rec:
        for key in ("whole_journal", "from_snapshot"):
            r = rec[key]
            scaled = r["seconds"] * 1_000_000 / rec["messages"]
            goals.append({"goal": f"recovery ({key.replace('_', ' ')}) of 1,000,000 messages <= 5 s, <= 10 us/msg",
                          "value": {"seconds_for_1m": round(scaled, 2), "us_per_msg": r["us_per_msg"]},
                          "met": scaled <= GOALS["recovery_s_1m"] and r["us_per_msg"] <= GOALS["recovery_us_per_msg"]})
    rs = report.get("restart")
    if rs:
        goals.append({"goal": "restart after 10 s down >= 10x faster than a full state transfer",
                      "value": rs["speedup"], "met": rs["speedup"] is not None and rs["speedup"] >= GOALS["restart_speedup"]})
    return goals


def _print(report: dict) -> None:
    tp = report.get("throughput")
    if tp:
        print("\ndurability: send 100 B, 16 connections (medians over rounds)")
        print(f"{'target':24} {'msgs/s':>9} {'p50 ms':>8} {'master us/send':>15} {'all us/send':>12} {'sends/fsync':>12}")
        for name, s in tp["summary"].items():
            print(f"{name:24} {s.get('msgs_per_s', 0):>9,.0f} {s.get('p50_ms', 0):>8.2f} "
                  f"{s.get('master_cpu_us_per_req', 0):>15.0f} {s.get('all_nodes_cpu_us_per_req', 0):>12.0f} "
                  f"{s.get('sends_per_fsync', '-'):>12}")
    for g in report.get("goals", []):
        print(f"  {'MET ' if g['met'] else 'NOT MET'}  {g['goal']}: {g['value']}")


def suite(quick: bool) -> dict:
    report = run(quick)
    _print(report)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {"benchmark": "durability", "machine": machine, "quick": quick, **report}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="one or more parts of the durability benchmark")
    ap.add_argument("parts", nargs="*", default=["throughput", "recovery", "restart"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", help="write the whole report here as JSON")
    a = ap.parse_args()
    rep = run(quick=a.quick, parts=tuple(a.parts))
    _print(rep)
    if a.out:
        Path(a.out).write_text(json.dumps(rep, indent=1, default=str) + "\n")
