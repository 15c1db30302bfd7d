"""Sizing: what a stored message costs in memory and on disk, per million, at three body sizes.

For each body size (100 B, 1 KiB, 10 KiB) the run starts real `elasticmq-py serve` processes
and fills one standard queue through the HTTP API: SendMessageBatch of 10 over the JSON
protocol at 16 keep-alive connections (bench.loadgen, every response checked), until it holds
N messages (a million at 100 B, fewer for the larger bodies: see ``Sizes``). Per million is N's
figure scaled linearly, and the tables say so.

1. Memory. A node in memory: its resident set (VmRSS) after the fill, less the same process's
   resident set with the empty queue, per message; read once the node has been idle for
   ``SETTLE_S`` (its managed collector has run). The same for a journaled node (`fsync =
   always`), reported as its excess over the in-memory node. At 1 KiB, also a 3-node
   `majority` cluster in memory: the master's and a replica's growth.
2. Disk. The journaled node is stopped (SIGTERM gives a segment's reserved space back) and its
   data-dir measured: the journal as written (every batch an entry). Then the compaction snapshot
   the node would take of the same state is written into that data-dir by the product's own code
   (cluster.compaction.Compactor, Journal.begin_snapshot), offline, and the data-dir measured
   again: the snapshot, and the segment a running node keeps after it (the current one, which
   does not grow with the count). A running node also reserves its current segment's full size
   (64 MB) ahead.

    python -m bench --only sizing [--quick]
"""

from __future__ import annotations

import dataclasses
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loadgen import servers
from bench.loadgen.runner import Job, Pool
from bench.loadgen.sqs import JSON
from bench.process_cpu import loadavg
from bench.replication_setup import ALL, CONNECTIONS, PROCESSES, Target, call, create_queue

MIB = 1024 * 1024
SETTLE_S = 2.5          # the managed collector runs once a second
REPLICA_BODY = 1024


@dataclasses.dataclass(frozen=True)
class Sizes:
    messages: dict[int, int]        # body size -> messages stored

    @classmethod
    def of(cls, quick: bool) -> "Sizes":
        if quick:
            return cls({100: 20_000, 1024: 10_000, 10240: 2_000})
        return cls({100: 1_000_000, 1024: 300_000, 10240: 60_000})


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def _start(data_dir: Path | None) -> servers.ServerProc:
    argv = [sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", "--print-port", "--log-level", "WARNING"]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir), "--fsync", "always"]
    return servers._print_port_server("elasticmq-py", argv, (JSON,), "")


def _stop(p: servers.ServerProc) -> None:
    p.proc.terminate()
    p.proc.wait(60)


def _fill(pool: Pool, port: int, url: str, body: int, n: int) -> dict:
    t0 = time.monotonic()
    r = pool.run(Job(kind="send_batch", protocol=JSON, port=port, host_header=f"localhost:{port}", queue_url=url,
                     connections=CONNECTIONS, processes=PROCESSES, duration=1800.0, body_size=body, max_messages=n))
    _, attrs = call(port, "GetQueueAttributes", {"QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages"]},
                    retry_s=30)
    held = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
    return {"held": held, "seconds": round(time.monotonic() - t0, 1), "errors": r.error_count}


def _growth(pid: int, before: int, held: int) -> dict:
    time.sleep(SETTLE_S)
    after = rss_bytes(pid)
    per_msg = (after - before) / held
    return {"rss_empty_mib": round(before / MIB, 1), "rss_full_mib": round(after / MIB, 1),
            "bytes_per_msg": round(per_msg), "mib_per_million": round(per_msg * 1e6 / MIB)}


def _node(pool: Pool, body: int, n: int, data_dir: Path | None, log) -> dict:
    p = _start(data_dir)
    try:
        url = create_queue(p.port, "sizing")
        time.sleep(SETTLE_S)
        before = rss_bytes(p.proc.pid)
        fill = _fill(pool, p.port, url, body, n)
        out = {"body_bytes": body, "messages": fill["held"], "fill_s": fill["seconds"],
               "fill_errors": fill["errors"], **_growth(p.proc.pid, before, fill["held"])}
    finally:
        _stop(p)
    kind = "journaled" if data_dir is not None else "in memory"
    log(f"  {body:>6} B, {kind:9}: {out['messages']:,} messages in {out['fill_s']} s; RSS {out['rss_empty_mib']} -> "
        f"{out['rss_full_mib']} MiB, {out['bytes_per_msg']} B/message, {out['mib_per_million']:,} MiB per million")
    return out


def _dir_bytes(path: Path) -> dict[str, int]:
    sizes = {"segments": 0, "snapshots": 0}
    for f in path.iterdir():
        if f.suffix == ".seg":
            sizes["segments"] += f.stat().st_size
        elif f.suffix == ".snap":
            sizes["snapshots"] += f.stat().st_size
    return sizes


def _compact(data_dir: Path) -> None:
    """The compaction snapshot a node would take of this state, taken with the node stopped."""
    from storage import Storage

    from cluster.clock import SystemClock
    from cluster.compaction import Compactor
    from cluster.config import Durability
    from cluster.journaling import open_journal

    journal, rec = open_journal(Durability(str(data_dir)), lambda: Storage(SystemClock()), 64 * MIB)
    try:
        compactor = Compactor(min_bytes=0)
        snap = None
        while snap is None:
            snap = compactor.step(rec.storage, rec.log)
        writer = journal.begin_snapshot(snap.at_seq, snap.at_epoch)
        for blob in snap.blobs:
            writer.add(blob)
        writer.finish(snap.end_seq)
    finally:
        journal.close()


def _disk(data_dir: Path, held: int) -> dict:
    journal = data_dir / "journal"
    written = _dir_bytes(journal)
    _compact(data_dir)
    compacted = _dir_bytes(journal)

    def per_million(nbytes: int) -> int:
        return round(nbytes / held * 1e6 / MIB)

    return {"journal_bytes_per_msg": round(written["segments"] / held),
            "journal_mib_per_million": per_million(written["segments"]),
            "snapshot_bytes_per_msg": round(compacted["snapshots"] / held),
            "snapshot_mib_per_million": per_million(compacted["snapshots"]),
            # the current segment stays beside the snapshot: up to one segment, whatever the count
            "kept_segment_mib": round(compacted["segments"] / MIB, 1)}


def _cluster(tmp: Path, pool: Pool, n: int, log) -> dict:
    from elasticmq_py.testing.cluster import Cluster

    folder = tmp / "cluster"
    folder.mkdir()
    c = Cluster(folder, ALL, replication_config={"policy": "majority"})
    try:
        c.start_all()
        t = Target("sizing", cluster=c)
        t.ready(60)
        url = create_queue(t.entry.port, "sizing")
        t.ready(60)
        pids = t.pids()
        time.sleep(SETTLE_S)
        before = {name: rss_bytes(pid) for name, pid in pids.items()}
        fill = _fill(pool, t.entry.port, url, REPLICA_BODY, n)
        t.ready(120)
        replica = next(name for name in sorted(pids) if name != t.master)
        master = _growth(pids[t.master], before[t.master], fill["held"])
        rep = {**_growth(pids[replica], before[replica], fill["held"])}
    finally:
        c.close()
    log(f"  {REPLICA_BODY:>6} B, 3 nodes:   {fill['held']:,} messages; master {master['mib_per_million']:,}, "
        f"replica {rep['mib_per_million']:,} MiB per million")
    return {"body_bytes": REPLICA_BODY, "messages": fill["held"], "fill_s": fill["seconds"], "master": master,
            "replica": rep}


def run(quick: bool = False, log=print) -> dict:
    from elasticmq_py.testing.cluster import PORT_SLOT_ENV

    os.environ.setdefault(PORT_SLOT_ENV, "7")
    sizes = Sizes.of(quick)
    env: dict[str, Any] = {"loadavg_before": loadavg()}
    memory, journaled = [], []
    pool = Pool(PROCESSES)
    try:
        with tempfile.TemporaryDirectory(prefix="sizing-bench-") as d:
            tmp = Path(d)
            for body, n in sizes.messages.items():
                memory.append(_node(pool, body, n, None, log))
                data = tmp / f"data-{body}"
                node = _node(pool, body, n, data, log)
                node.update(_disk(data, node["messages"]))
                log(f"  {body:>6} B on disk: journal {node['journal_mib_per_million']:,} MiB per million, snapshot "
                    f"{node['snapshot_mib_per_million']:,} MiB per million")
                journaled.append(node)
            cluster = _cluster(tmp, pool, sizes.messages[REPLICA_BODY], log)
    finally:
        pool.close()
    env["loadavg_after"] = loadavg()
    return {"config": {"messages": {str(k): v for k, v in sizes.messages.items()}, "connections": CONNECTIONS,
                       "generator_processes": PROCESSES, "fill": "SendMessageBatch of 10, JSON protocol",
                       "settle_s": SETTLE_S, "gc": "managed"},
            "environment": env, "memory": memory, "journaled": journaled, "cluster": cluster}


def suite(quick: bool) -> dict:
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {"benchmark": "sizing", "machine": machine, "quick": quick, **run(quick)}
