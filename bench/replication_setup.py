"""What every part of the replication benchmark (bench/replication_bench.py) shares: the targets
under test (a lone server, or a cluster whose master takes the load), the run's sizes, and the
control-plane calls that set a run up (JSON protocol over plain http.client; never measured).
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Any

from bench.loadgen import servers
from bench.loadgen.sqs import AMZ_DATE, AUTH, JSON, JSON_CT

SINGLE, MAJORITY, NONE = "single", "majority", "none"
TARGETS = (SINGLE, MAJORITY, NONE)
LABEL = {SINGLE: "single node", MAJORITY: "3 nodes, majority", NONE: "3 nodes, none"}
ALL = ["n1", "n2", "n3"]
CONNECTIONS = 16
PROCESSES = 2


@dataclass
class Sizes:
    duration: float         # per measured run
    rounds: int
    prefill: int
    kill_rounds: int        # per policy
    send_before_kill: float
    transfer_messages: int
    load_before_join: float

    @classmethod
    def of(cls, quick: bool) -> "Sizes":
        if quick:
            return cls(1.0, 1, 150_000, 2, 1.0, 100_000, 2.0)
        return cls(3.0, 3, 400_000, 10, 1.5, 1_000_000, 5.0)


def port_of(c: Any, name: str) -> int:
    return int(c.procs[name].admin.rpartition(":")[2])


class Target:
    """One system under test: a lone server, or a cluster whose master takes the load."""

    def __init__(self, name: str, single: servers.ServerProc | None = None, cluster: Any = None):
        self.name = name
        self.single = single
        self.cluster = cluster
        self.master: str | None = None
        self.entry: servers.ServerProc | None = single
        self.master_changes = 0

    def pids(self) -> dict[str, int]:
        if self.single is not None:
            return {"server": self.single.proc.pid}
        return {n: p.popen.pid for n, p in self.cluster.procs.items() if p.popen.poll() is None}

    def ready(self, timeout: float = 30.0) -> None:
        """Point `entry` at the active master (it may have moved since the last run)."""
        if self.cluster is None:
            return
        c = self.cluster
        m = c.wait_for(f"{self.name}: a stable master", c.stable_master(members=set(ALL)), timeout)
        if self.master is not None and m != self.master:
            self.master_changes += 1
        if m != self.master:
            self.master = m
            self.entry = servers.ServerProc(f"{self.name}/{m}", c.procs[m].popen, port_of(c, m), (JSON,))
        c.wait_for(f"{self.name}: replicas caught up", lambda: replicas_caught_up(c, m), timeout)

    def alive(self) -> bool:
        return self.entry is not None and self.entry.alive()


def stream_counts(t: Target) -> dict[str, int] | None:
    """The master's log end (one entry per batch) and its stream frame counters, from its status
    (taken outside the measured window: the call costs the master CPU)."""
    if t.cluster is None or t.master is None:
        return None
    st = t.cluster.status(t.master)
    if not st:
        return None
    rep = st["replication"]
    peers = rep["transport"]["peers"].values()
    return {"batches": rep["log"]["last_seq"], "frames_out": sum(p["frames_out"] for p in peers),
            "frames_in": sum(p["frames_in"] for p in peers)}


def replicas_caught_up(c: Any, master: str) -> bool:
    st = c.status(master)
    if not st:
        return False
    reps = st["replication"]["replicas"]
    return all(r["connected"] and not r["needs_transfer"] and r["lag_batches"] == 0 for r in reps.values())


# -- control-plane calls (JSON protocol, plain http.client; not measured) -----------------------

def call(port: int, action: str, params: dict, timeout: float = 30.0, retry_s: float = 0.0) -> tuple[int, dict]:
    """One JSON-protocol call; with `retry_s`, 503s and throttling are retried that long."""
    deadline = time.monotonic() + retry_s
    while True:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            c.request("POST", "/", json.dumps(params), {"Content-Type": JSON_CT, "X-Amz-Target": f"AmazonSQS.{action}",
                                                         "X-Amz-Date": AMZ_DATE, "Authorization": AUTH,
                                                         "Host": f"localhost:{port}"})
            r = c.getresponse()
            status, body = r.status, json.loads(r.read() or b"{}")
        except OSError as e:
            status, body = 0, {"error": repr(e)}
        finally:
            c.close()
        if status == 200 or time.monotonic() > deadline or status not in (0, 400, 503):
            return status, body
        if status == 400 and "Throttl" not in str(body.get("__type", "")):
            return status, body
        time.sleep(0.05)


def create_queue(port: int, name: str) -> str:
    status, body = call(port, "CreateQueue", {"QueueName": name}, retry_s=15)
    if status != 200:
        raise RuntimeError(f"CreateQueue {name} on :{port}: {status} {body}")
    return body["QueueUrl"]


def queue_url_at(port: int, url: str) -> str:
    """The same queue, addressed through another node's endpoint."""
    return f"http://localhost:{port}/" + url.split("/", 3)[3]
