"""The product as cluster members: `elasticmq-py serve --config` processes on loopback.

`ServerCluster` is harness.Cluster with the node process swapped: each node is a full SQS server
with a [cluster] section, and its "admin" address is the SQS endpoint itself (GET /cluster there
reports the same status as cluster/node.py's admin port), so every harness helper — status(),
stable_master(), kill/SIGSTOP, proxies, the history checks — works unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import fields
from pathlib import Path
from typing import Any

from cluster.config import Timing
from tests.cluster.harness import REPO, Cluster, Proc, _readline

SECRET_HEADER = "X-Cluster-Secret"


def _s(v: Any) -> str:
    return json.dumps(v)  # a JSON string literal is a valid TOML basic string for what we write


def server_toml(cluster: Cluster, name: str) -> str:
    """The elasticmq-py TOML for one node of `cluster` (the same members/links/timing/secret)."""
    cfg = cluster.config_for(name)
    c = cfg.cluster
    out = ["host = \"127.0.0.1\"", "port = 0", f"limits = {_s(getattr(cluster, 'limits', 'strict'))}", "", "[cluster]", f"name = {_s(c.name)}", f"self = {_s(name)}",
           f"secret = {_s(c.secret)}", f"history = {_s(cfg.history_path)}", f"state-dir = {_s(cfg.state_dir)}", ""]
    for n in c.nodes:
        out += ["[[cluster.nodes]]", f"name = {_s(n.name)}", f"raft = {_s(str(n.raft_addr))}"]
        if n.stream_addr is not None:
            out.append(f"stream = {_s(str(n.stream_addr))}")
        out.append("")
    for (src, dst), link in c.links.items():
        out.append(f"[cluster.links.\"{src}->{dst}\"]")
        if link.raft is not None:
            out.append(f"raft = {_s(str(link.raft))}")
        if link.stream is not None:
            out.append(f"stream = {_s(str(link.stream))}")
        out.append("")
    replication = getattr(cluster, "replication_config", None) or {}
    if replication:
        out.append("[cluster.replication]")
        out += [f"{k} = {json.dumps(v)}" for k, v in replication.items()]
        out.append("")
    out.append("[cluster.timing]")
    for f in fields(Timing):
        out.append(f"{f.name.replace('_', '-')} = {getattr(c.timing, f.name)!r}")
    return "\n".join(out) + "\n"


class ServerCluster(Cluster):
    replication_config: dict[str, Any] = {}   # [cluster.replication] keys; set before start()
    limits: str = "strict"
    def url(self, name: str) -> str:
        return f"http://{self.procs[name].admin}"

    def replication(self, name: str, timeout: float = 5.0) -> dict[str, Any] | None:
        """The node's replication status with its state digest (GET /cluster?digest=1)."""
        try:
            with urllib.request.urlopen(self.url(name) + "/cluster?digest=1", timeout=timeout) as r:
                return json.loads(r.read())["replication"]
        except OSError:
            return None

    def converged(self, names: list[str]) -> bool:
        """Every named node holds the same log position and the same state digest. The digest
        is O(state) and computed on the node's loop, so it is asked for only once the cheap
        log positions agree (polling it would stall the nodes under test)."""
        sts = [self.status(n) for n in names]
        if any(s is None for s in sts) or len({s["replication"]["log"]["last_seq"] for s in sts}) != 1:
            time.sleep(0.2)
            return False
        reps = [self.replication(n, timeout=30) for n in names]
        if any(r is None for r in reps):
            return False
        if len({(r["log"]["last_seq"], r["digest"]) for r in reps}) == 1:
            return True
        time.sleep(0.5)
        return False

    def health(self, name: str, role: str | None = None, timeout: float = 2.0) -> int | None:
        return self.health_doc(name, role, timeout)[0]

    def health_doc(self, name: str, role: str | None = None, timeout: float = 2.0) -> tuple[int | None, dict]:
        """GET /health (``role``: its role parameter): the status code and the JSON body."""
        path = "/health" + (f"?role={role}" if role is not None else "")
        try:
            with urllib.request.urlopen(self.url(name) + path, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")
        except OSError:
            return None, {}

    def sqs(self, name: str, **config: Any):
        import boto3
        from botocore.config import Config
        return boto3.client("sqs", endpoint_url=self.url(name), region_name="us-east-1",
                            aws_access_key_id="x", aws_secret_access_key="x",
                            config=Config(**config))
