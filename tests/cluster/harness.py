"""Real membership nodes as processes on loopback, with optional per-link proxies, and the
history checks every test applies (identical view sequences, never two active masters)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cluster.config import Address, ClusterConfig, LinkAddrs, NodeConfig, NodeSpec, Timing
from cluster.history import read_history
from tests.cluster.proxy import LinkProxy, ProxyLoop

REPO = Path(__file__).resolve().parents[2]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_ports(n: int) -> list[int]:
    """Ports below the ephemeral range (so no outgoing connection can be holding one), spread
    by xdist worker so two workers do not race for the same ones."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    idx = int("".join(c for c in worker if c.isdigit()) or 0)
    lo = 20000 + (idx % 8) * 1500
    rng = random.Random(time.time_ns() ^ os.getpid())
    out: list[int] = []
    while len(out) < n:
        p = rng.randrange(lo, lo + 1500)
        if p not in out and _port_is_free(p):
            out.append(p)
    return out


@dataclass
class DirectedLink:
    """The proxies of one directed link a->b: a's Raft and mutation-stream connections to b."""

    raft: LinkProxy
    stream: LinkProxy

    def cut(self) -> None:
        self.raft.cut()
        self.stream.cut()

    def heal(self) -> None:
        self.raft.heal()
        self.stream.heal()

    def close(self) -> None:
        self.raft.close()
        self.stream.close()


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    admin: str
    stopped: bool = False


@dataclass
class Cluster:
    tmp: Path
    names: list[str]
    timing: Timing = field(default_factory=Timing)
    proxied: bool = False
    secret: str = "test-secret"
    secrets: dict[str, str] = field(default_factory=dict)   # per-node override (wrong-secret test)
    cluster_for: dict[str, list[str]] = field(default_factory=dict)  # per-node member list (join test)
    procs: dict[str, Proc] = field(default_factory=dict)
    kills: dict[str, list[float]] = field(default_factory=dict)  # wall times each node was killed
    proxies: dict[tuple[str, str], LinkProxy] = field(default_factory=dict)
    _ploop: ProxyLoop | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        ports = pick_ports(2 * n)
        self.specs = [NodeSpec(name, Address("127.0.0.1", p), Address("127.0.0.1", q))
                      for name, p, q in zip(self.names, ports[:n], ports[n:])]
        links: dict[tuple[str, str], LinkAddrs] = {}
        if self.proxied:
            self._ploop = ProxyLoop()
            for a in self.specs:
                for b in self.specs:
                    if a.name != b.name:
                        px = DirectedLink(LinkProxy(self._ploop, f"{a.name}->{b.name}", "127.0.0.1", b.raft_addr.port),
                                          LinkProxy(self._ploop, f"{a.name}->{b.name} stream", "127.0.0.1",
                                                    b.stream_addr.port))
                        self.proxies[(a.name, b.name)] = px
                        links[(a.name, b.name)] = LinkAddrs(raft=Address("127.0.0.1", px.raft.port),
                                                            stream=Address("127.0.0.1", px.stream.port))
        self.cluster = ClusterConfig("test", self.secret, tuple(self.specs), links, self.timing)

    # -- processes --------------------------------------------------------------------------------

    def config_for(self, name: str) -> NodeConfig:
        cluster = self.cluster
        members = set(self.cluster_for.get(name, self.names))
        cluster = ClusterConfig(cluster.name, self.secrets.get(name, cluster.secret),
                                tuple(s for s in cluster.nodes if s.name in members),
                                {k: v for k, v in cluster.links.items() if set(k) <= members}, cluster.timing)
        return NodeConfig(name, cluster, history_path=str(self.tmp / f"{name}.history.jsonl"))

    def start(self, name: str, timeout: float = 15.0) -> None:
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(self.config_for(name).to_dict()))
        err = open(self.tmp / f"{name}.log", "ab")
        env = dict(os.environ, PYTHONPATH=str(REPO))
        p = subprocess.Popen([sys.executable, "-m", "cluster.node", "--config", str(path), "--log-level", "INFO"],
                             stdout=subprocess.PIPE, stderr=err, cwd=str(REPO), env=env)
        line = _readline(p, timeout)
        if not line.startswith("READY "):
            p.kill()
            p.wait(5)
            raise RuntimeError(f"{name} did not start: {line!r}; see {self.tmp / (name + '.log')}")
        self.procs[name] = Proc(name, p, json.loads(line[6:])["admin"])

    def start_all(self) -> None:
        for n in self.names:
            self.start(n)

    def kill(self, name: str) -> None:
        p = self.procs[name]
        p.popen.send_signal(signal.SIGKILL)
        self.kills.setdefault(name, []).append(time.time())
        p.popen.wait(10)

    def killed_at(self, name: str) -> float:
        return self.kills[name][-1]

    def sigstop(self, name: str) -> None:
        self.procs[name].popen.send_signal(signal.SIGSTOP)
        self.procs[name].stopped = True

    def sigcont(self, name: str) -> None:
        self.procs[name].popen.send_signal(signal.SIGCONT)
        self.procs[name].stopped = False

    def close(self) -> None:
        for name, p in self.procs.items():
            if p.popen.poll() is None:
                if p.stopped:
                    p.popen.send_signal(signal.SIGCONT)
                p.popen.terminate()
        for p in self.procs.values():
            try:
                p.popen.wait(10)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait(5)
        for px in self.proxies.values():
            px.close()
        if self._ploop is not None:
            self._ploop.close()

    def alive(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.popen.poll() is None and not p.stopped]

    # -- observation ----------------------------------------------------------------------------------

    def status(self, name: str, timeout: float = 2.0) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://{self.procs[name].admin}/cluster", timeout=timeout) as r:
                return json.loads(r.read())
        except OSError:
            return None

    def post(self, name: str, path: str, body: dict | None = None, timeout: float = 10.0) -> tuple[int, Any]:
        return self.request(name, "POST", path, body, timeout)

    def request(self, name: str, method: str, path: str, body: dict | None = None,
                timeout: float = 10.0) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://{self.procs[name].admin}{path}", data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def statuses(self, names: list[str] | None = None) -> dict[str, dict[str, Any] | None]:
        return {n: self.status(n) for n in (names or self.alive())}

    def wait_for(self, what: str, pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; statuses: "
                                     f"{json.dumps(self.statuses(), indent=1, default=str)[:6000]}")
            time.sleep(interval)

    def stable_master(self, among: list[str] | None = None, members: set[str] | None = None) -> Callable[[], str | None]:
        """A predicate: exactly one active master among `among`, and all of them agree on its view."""
        def pred() -> str | None:
            names = among or self.alive()
            sts = self.statuses(names)
            if any(s is None for s in sts.values()):
                return None
            actives = [n for n, s in sts.items() if s["active"]]
            if len(actives) != 1:
                return None
            views = {json.dumps(s["view"], sort_keys=True) for s in sts.values()}
            if len(views) != 1:
                return None
            view = next(iter(sts.values()))["view"]
            if view["master"] != actives[0]:
                return None
            if members is not None and set(view["members"]) != members:
                return None
            return actives[0]
        return pred

    def history(self, name: str) -> list[dict[str, Any]]:
        path = self.tmp / f"{name}.history.jsonl"
        return read_history(str(path)) if path.exists() else []

    def histories(self) -> dict[str, list[dict[str, Any]]]:
        return {n: self.history(n) for n in self.names}

    # -- the proxies ----------------------------------------------------------------------------------

    def isolate(self, name: str) -> None:
        for (a, b), px in self.proxies.items():
            if name in (a, b):
                px.cut()

    def heal_all(self) -> None:
        for px in self.proxies.values():
            px.heal()


def _readline(p: subprocess.Popen, timeout: float) -> str:
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(p.stdout.readline().decode(errors="replace").strip()), daemon=True)
    t.start()
    t.join(timeout)
    return out[0] if out else "(no output)"


# -- checks over histories ---------------------------------------------------------------------------

def check_views(histories: dict[str, list[dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Every node's view ids strictly increase, and a view id means the same view everywhere."""
    by_id: dict[int, dict[str, Any]] = {}
    for node, events in histories.items():
        last = 0
        for e in events:
            if e["event"] == "started":
                last = 0   # a restarted node learns the views again from the log
            if e["event"] != "view":
                continue
            v = {k: e[k] for k in ("view_id", "members", "master", "epoch")}
            assert v["view_id"] > last, f"{node}: view ids not increasing: {last} then {v['view_id']}"
            last = v["view_id"]
            seen = by_id.setdefault(v["view_id"], v)
            assert seen == v, f"view {v['view_id']} differs: {seen} vs {v} (at {node})"
    epochs = [by_id[i]["epoch"] for i in sorted(by_id)]
    assert epochs == sorted(epochs), f"epochs go back: {epochs}"
    return by_id


def active_intervals(histories: dict[str, list[dict[str, Any]]], kills: dict[str, list[float]],
                     now: float | None = None) -> list[tuple[str, float, float]]:
    """(node, from, to) for every period a node was active. An interval still open when the node
    restarted, or at the end, was closed by a kill (the last one before that point)."""
    now = now if now is not None else time.time()
    out = []
    for node, events in histories.items():
        start: float | None = None

        def killed_before(t: float) -> float:
            ks = [k for k in kills.get(node, []) if start is not None and start <= k <= t]
            return min(ks) if ks else t

        for e in events:
            if e["event"] == "activated":
                start = e["ts"]
            elif e["event"] in ("deactivated", "stopped") and start is not None:
                out.append((node, start, e["ts"]))
                start = None
            elif e["event"] == "started" and start is not None:
                out.append((node, start, killed_before(e["ts"])))
                start = None
        if start is not None:
            out.append((node, start, killed_before(now)))
    return out


def check_single_master(histories: dict[str, list[dict[str, Any]]], kills: dict[str, list[float]]) -> None:
    iv = sorted(active_intervals(histories, kills), key=lambda x: x[1])
    for i, (n1, s1, e1) in enumerate(iv):
        for n2, s2, e2 in iv[i + 1:]:
            if n1 != n2 and s2 < e1:
                raise AssertionError(f"two active masters: {n1} [{s1:.6f}, {e1:.6f}] and {n2} [{s2:.6f}, {e2:.6f}]")
