"""``elasticmq-py local-cluster``: N cluster members as processes on loopback, in the foreground.

    elasticmq-py local-cluster [--nodes 3] [--http-port 9324] [--policy majority] [--dir DIR]
                               [--forward | --no-forward] [--groups G] [--in-memory]

Node ``nK`` (K = 1..N) is ``python -m elasticmq_py serve --config DIR/nK.toml``. Its SQS endpoint
is http://127.0.0.1:BASE+K-1; its Raft and mutation-stream ports are BASE+10000+K-1 and
BASE+10100+K-1. Those must stay below 32768, the start of Linux's ephemeral range, where a port
we checked could be taken by some outgoing connection before the node binds it. ``--http-port 0``
picks free ports for everything (from below 32768 too, for the same reason).

DIR holds the node configurations, a random cluster secret (``secret``), each node's history
(``nK.history.jsonl``), log (``nK.log``) and data-dir (``nK.data``: its journal of queues and
messages, and Raft's state; ``--in-memory`` keeps messages in memory and Raft's state in
``nK.state``); without --dir a new temporary directory is made and kept, so the histories can be
analysed afterwards. Started again on the same --dir, the nodes recover what they stored.

``--groups G`` splits the queues into G replication groups, each with a master of its own, so
every node masters some (``[cluster] groups``; default: one per node). Each node's groups share
one journal in its data-dir.

Once every node answers GET /cluster and they agree on a master, the command prints (a format the
tests parse, keep it stable)::

    elasticmq-py local-cluster: 3 nodes, policy majority, forwarding on
      n1  http://127.0.0.1:9324  pid 4242  master
      n2  http://127.0.0.1:9325  pid 4243  follower
      n3  http://127.0.0.1:9326  pid 4244  follower
    master     n1  http://127.0.0.1:9324
    directory  /tmp/elasticmq-py-local-...
    data       /tmp/elasticmq-py-local-.../nK.data per node (fsync always)
    status     elasticmq-py status --endpoint http://127.0.0.1:9324
    dashboard  http://127.0.0.1:9324/ui   (every node serves one at /ui)
    ready: Ctrl-C stops the cluster

(with several groups "master" is group 0's, and a line ``groups     g0 n1, g1 n2, g2 n3`` names
each group's master),
(a follower's role reads "replica (forwards to the master)" once replication is on), then stays
in the foreground. Ctrl-C, SIGTERM or SIGHUP stops every node (SIGTERM, then SIGKILL after
--stop-timeout). A node that exits during start-up fails the command with its log's tail; one
that exits later (say, its pid was killed to watch a failover) is reported and the others keep
running.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from cluster.config import FSYNC_POLICIES, Address, ClusterConfig, Durability, NodeConfig, NodeSpec, Replication, Timing
from cluster.replication.wire import MAX_GROUPS
from cluster.status import NodeStatus

from elasticmq_py import loglevel
from elasticmq_py.config import DEFAULT_PORT, server_toml

HOST = "127.0.0.1"
RAFT_OFFSET = 10_000
STREAM_OFFSET = 10_100
PORT_CEILING = 32_768         # Linux's ephemeral range starts here (net.ipv4.ip_local_port_range)
FREE_PORT_FLOOR = 10_000
MAX_NODES = STREAM_OFFSET - RAFT_OFFSET   # beyond this the Raft and stream ranges would overlap
POLICIES = ("none", "one", "majority", "all")
LOG_TAIL_LINES = 25


class LocalClusterError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class NodePlan:
    name: str
    http: int
    raft: int
    stream: int

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.http}"


# -- ports --------------------------------------------------------------------------------------

def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR as the servers themselves use it: a port left in TIME_WAIT by the previous
        # run is free for them, and must not be reported as taken.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def plan_ports(nodes: int, base: int) -> list[NodePlan]:
    """The nodes' names and ports; ``base`` 0 picks free ports. Raises LocalClusterError."""
    if not 1 <= nodes <= MAX_NODES:
        raise LocalClusterError(f"--nodes must be between 1 and {MAX_NODES}")
    names = [f"n{k}" for k in range(1, nodes + 1)]
    if base == 0:
        candidates = random.sample(range(FREE_PORT_FLOOR, PORT_CEILING), 3 * nodes * 4)
        free = [p for p in candidates if _port_free(p)][:3 * nodes]
        if len(free) < 3 * nodes:
            raise LocalClusterError("cannot find enough free ports below 32768 on 127.0.0.1")
        return [NodePlan(n, *free[3 * i:3 * i + 3]) for i, n in enumerate(names)]
    if base < 0 or base > 65535:
        raise LocalClusterError(f"--http-port {base} is not a port (0 picks free ones)")
    if base + STREAM_OFFSET + nodes - 1 >= PORT_CEILING:
        raise LocalClusterError(
            f"--http-port {base}: the Raft and stream ports (--http-port + {RAFT_OFFSET} and + {STREAM_OFFSET}) "
            f"must stay below {PORT_CEILING}; use a base of at most {PORT_CEILING - STREAM_OFFSET - nodes}, "
            f"or 0 for free ports")
    plan = [NodePlan(n, base + i, base + RAFT_OFFSET + i, base + STREAM_OFFSET + i) for i, n in enumerate(names)]
    taken = [f"{p} ({n.name} {kind})" for n in plan
             for kind, p in (("http", n.http), ("raft", n.raft), ("stream", n.stream)) if not _port_free(p)]
    if taken:
        raise LocalClusterError(
            f"port{'s' if len(taken) > 1 else ''} {', '.join(taken)} on {HOST} "
            f"{'are' if len(taken) > 1 else 'is'} taken (another local cluster or server running?); "
            f"choose other ports with --http-port BASE, or --http-port 0 for free ones")
    return plan


# -- configuration files ------------------------------------------------------------------------

def node_toml(plan: list[NodePlan], me: NodePlan, policy: str, forward: bool, secret: str,
              fsync: str | None = "always", groups: int = 1, timing: Timing | None = None) -> str:
    """The `serve --config` file of node ``me``; relative paths resolve against its directory,
    and the secret is read from the file ``secret`` there. ``fsync`` None: in memory only (Raft's
    state still survives a restart, in nK.state); otherwise each node keeps a data-dir nK.data.
    ``timing``: [cluster.timing] (None: the defaults)."""
    nodes = tuple(NodeSpec(n.name, Address(HOST, n.raft), Address(HOST, n.stream), Address(HOST, n.http))
                  for n in plan)
    cluster = ClusterConfig("local", secret, nodes, timing=timing or Timing(),
                            replication=Replication(policy=policy, forward=forward), groups=groups)
    if fsync is None:
        node = NodeConfig(me.name, cluster, history_path=f"{me.name}.history.jsonl", state_dir=f"{me.name}.state")
    else:
        node = NodeConfig(me.name, cluster, history_path=f"{me.name}.history.jsonl",
                          durability=Durability(f"{me.name}.data", fsync))
    return server_toml(node, host=HOST, port=me.http, secret_file="secret")


def write_configs(directory: Path, plan: list[NodePlan], policy: str, forward: bool,
                  fsync: str | None = "always", groups: int = 1, timing: Timing | None = None) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    fd = os.open(directory / "secret", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    paths = {}
    for me in plan:
        path = directory / f"{me.name}.toml"
        path.write_text(node_toml(plan, me, policy, forward, secret, fsync, groups, timing))
        paths[me.name] = path
    return paths


# -- the node processes ---------------------------------------------------------------------------

def _die_with_parent() -> None:
    # Runs in the child between fork and exec. The nodes live in their own process group (so a
    # terminal's Ctrl-C reaches only us and we stop them in order); this makes sure a
    # local-cluster killed with SIGKILL still takes them down instead of leaving them on the ports.
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except OSError as e:
        return f"(cannot read {path}: {e})\n"


def _get_status(url: str, timeout: float = 1.0) -> NodeStatus | None:
    try:
        with urllib.request.urlopen(url + "/cluster", timeout=timeout) as r:
            return NodeStatus.from_dict(json.loads(r.read()))
    except (OSError, ValueError, TypeError):  # not listening yet, 5xx (HTTPError is an OSError), not a status
        return None


class LocalCluster:
    def __init__(self, directory: Path, plan: list[NodePlan], policy: str = "majority", forward: bool = True,
                 log_level: str = "INFO", fsync: str | None = "always", groups: int = 1, timing: Timing | None = None):
        self.directory, self.plan, self.policy, self.forward = directory, plan, policy, forward
        self.fsync = fsync
        self.groups = groups
        self.timing = timing
        self.log_level = log_level
        self.procs: dict[str, subprocess.Popen] = {}
        self.configs: dict[str, Path] = {}

    def log_path(self, name: str) -> Path:
        return self.directory / f"{name}.log"

    def start(self) -> None:
        self.configs = write_configs(self.directory, self.plan, self.policy, self.forward, self.fsync, self.groups,
                                     self.timing)
        for n in self.plan:
            self.log_path(n.name).write_bytes(b"")
            self.start_node(n.name)

    def start_node(self, name: str) -> None:
        """Start node ``name`` from the configuration ``start`` wrote (a node that exited, say
        killed to watch a failover, comes back with the same secret and ports); its log is
        appended to."""
        with open(self.log_path(name), "ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "elasticmq_py", "serve", "--config", str(self.configs[name]),
                 "--log-level", self.log_level],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                process_group=0, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def exited(self) -> dict[str, int]:
        return {name: p.returncode for name, p in self.procs.items() if p.poll() is not None}

    def statuses(self) -> dict[str, NodeStatus | None]:
        return {n.name: _get_status(n.url) for n in self.plan}

    @staticmethod
    def ready_master(statuses: dict[str, NodeStatus | None]) -> str | None:
        """The master every node agrees on, once it serves; else None. With several groups:
        group 0's, once every group has a master that every node names and that serves it."""
        if any(st is None for st in statuses.values()):
            return None
        if any(st.groups for st in statuses.values()):   # type: ignore[union-attr]
            masters = group_masters(statuses)
            return masters[0] if masters else None
        masters = {st.master for st in statuses.values()}
        if len(masters) != 1 or None in masters:
            return None
        master = masters.pop()
        st = statuses.get(master)
        if st is None or not st.active:
            return None
        if st.replication.enabled and st.replication.serving is False:
            return None
        return master

    def group_masters(self) -> list[str] | None:
        return group_masters(self.statuses())

    def stop(self, timeout: float = 10.0) -> list[str]:
        """SIGTERM every live node, SIGKILL what is left after ``timeout``; the killed ones."""
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + timeout
        killed = []
        for name, p in self.procs.items():
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                killed.append(name)
        return killed


def group_masters(statuses: dict[str, NodeStatus | None]) -> list[str] | None:
    """Each group's master, once every node names the same ones and each serves its groups;
    else None."""
    if any(st is None or not st.groups for st in statuses.values()):
        return None
    seen = {tuple(g.master for g in st.groups) for st in statuses.values()}   # type: ignore[union-attr]
    if len(seen) != 1:
        return None
    masters = list(seen.pop())
    for g, master in enumerate(masters):
        st = statuses.get(master)   # type: ignore[arg-type]
        if st is None or not st.groups[g].serving:
            return None
    return masters   # type: ignore[return-value]


# -- the command --------------------------------------------------------------------------------

def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "local-cluster", help="run an N-node cluster on loopback in the foreground",
        description="Start N cluster members as processes on 127.0.0.1, print their endpoints and "
                    "the master, and stop them all on Ctrl-C or SIGTERM. Configurations, the "
                    "generated cluster secret, histories and logs go to --dir.")
    p.add_argument("--nodes", type=int, default=3, help="how many members (default 3)")
    p.add_argument("--http-port", type=int, default=DEFAULT_PORT, metavar="BASE",
                   help=f"node K's SQS port is BASE+K-1; Raft and stream ports are BASE+{RAFT_OFFSET}+K-1 "
                        f"and BASE+{STREAM_OFFSET}+K-1; 0 picks free ports for all (default {DEFAULT_PORT})")
    p.add_argument("--policy", choices=POLICIES, default="majority",
                   help="replication ack policy (default majority)")
    p.add_argument("--forward", action=argparse.BooleanOptionalAction, default=True,
                   help="non-masters forward client requests to the master (default); "
                        "--no-forward: they answer a retryable 503")
    p.add_argument("--dir", metavar="DIR",
                   help="where configs, the secret, histories and logs go (default: a new temporary "
                        "directory, kept)")
    p.add_argument("--fsync", choices=FSYNC_POLICIES, default="always",
                   help="each node keeps its queues and messages in DIR/nK.data (a journal); fsync every "
                        "batch before acking (always, the default), every 100 ms (interval), or never")
    p.add_argument("--in-memory", action="store_true",
                   help="no data-dirs: queues and messages live in memory only and a restart of every "
                        "node loses them (Raft's state still goes to DIR/nK.state)")
    p.add_argument("--groups", type=int, metavar="G",
                   help="replication groups, each with its own master (default: the number of nodes)")
    p.add_argument("--start-timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for the nodes to agree on a master (default 30)")
    p.add_argument("--stop-timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long a node may take to stop before it is killed (default 10)")
    loglevel.add_argument(p, "the nodes' logging level")
    return p


def _err(msg: str) -> None:
    print(f"elasticmq-py local-cluster: {msg}", file=sys.stderr, flush=True)


def _role(name: str, master: str, st: NodeStatus, forward: bool) -> str:
    if name == master:
        return "master"
    if st.replication.enabled:
        role = st.replication.role or "replica"
        return f"{role} (forwards to the master)" if forward else f"{role} (answers 503: --no-forward)"
    return st.role or "member"


def run(args: argparse.Namespace) -> int:
    try:
        plan = plan_ports(args.nodes, args.http_port)
    except LocalClusterError as e:
        _err(str(e))
        return 1
    groups = args.groups if args.groups is not None else len(plan)
    if not 1 <= groups <= MAX_GROUPS:
        _err(f"--groups must be between 1 and {MAX_GROUPS}")
        return 1
    directory = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="elasticmq-py-local-"))

    stop = threading.Event()
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in handled}
    fsync = None if args.in_memory else args.fsync
    cluster = LocalCluster(directory, plan, args.policy, args.forward, args.log_level, fsync, groups)
    try:
        print(f"elasticmq-py local-cluster: starting {len(plan)} nodes in {directory}", flush=True)
        try:
            cluster.start()
        except OSError as e:
            _err(f"cannot start the nodes: {e}")
            return 1
        master, statuses = None, {}
        deadline = time.monotonic() + args.start_timeout
        while master is None:
            dead = cluster.exited()
            if dead:
                for name, code in dead.items():
                    log = cluster.log_path(name)
                    _err(f"node {name} exited with code {code} during start-up; the end of {log}:\n"
                         + _tail(log).rstrip())
                return 1
            if stop.is_set():
                return 130
            if time.monotonic() > deadline:
                seen = {n: (st or {}).get("master") if st else "no answer" for n, st in statuses.items()}
                _err(f"no master agreed on after {args.start_timeout:g}s (each node's master: {seen}); "
                     f"logs are in {directory}")
                return 1
            statuses = cluster.statuses()
            master = cluster.ready_master(statuses)
            if master is None:
                stop.wait(0.1)
        by_name = {n.name: n for n in plan}
        width = max(len(n.name) for n in plan)
        lines = [f"elasticmq-py local-cluster: {len(plan)} nodes, policy {args.policy}, "
                 f"forwarding {'on' if args.forward else 'off'}"]
        for n in plan:
            lines.append(f"  {n.name.ljust(width)}  {n.url}  pid {cluster.procs[n.name].pid}  "
                         f"{_role(n.name, master, statuses[n.name], args.forward)}")
        lines.append(f"master     {master}  {by_name[master].url}")
        if groups > 1:
            masters = group_masters(statuses) or []
            lines.append("groups     " + ", ".join(f"g{g} {m}" for g, m in enumerate(masters)))
        lines += [
                  f"directory  {directory}",
                  f"data       {directory}/nK.data per node (fsync {fsync})" if fsync is not None
                  else "data       in memory only (--in-memory): a restart of every node loses it",
                  f"status     elasticmq-py status --endpoint {by_name[master].url}",
                  f"dashboard  {by_name[master].url}/ui   (every node serves one at /ui)",
                  "ready: Ctrl-C stops the cluster"]
        print("\n".join(lines), flush=True)

        reported: set[str] = set()
        while not stop.wait(0.5):
            dead = cluster.exited()
            for name in sorted(set(dead) - reported):
                _err(f"node {name} exited with code {dead[name]} (log: {cluster.log_path(name)})")
            if len(dead) == len(plan):
                _err("every node has exited")
                return 1
            if set(dead) - reported:
                _err(f"{len(plan) - len(dead)} of {len(plan)} nodes keep running")
            reported |= set(dead)
        return 0
    finally:
        if cluster.procs:
            killed = cluster.stop(args.stop_timeout)
            if killed:
                _err(f"killed {', '.join(killed)} after {args.stop_timeout:g}s")
            print(f"elasticmq-py local-cluster: stopped ({directory} kept)", flush=True)
        for s, h in previous.items():
            signal.signal(s, h)
