"""Real cluster members as processes on loopback, with per-link proxies and the history checks
every test applies (identical view sequences, never two active masters).

Each node is an ``elasticmq-py serve`` process with a [cluster] section (written with
elasticmq_py/config.py's ``server_toml``, as `local-cluster` writes its own); its "admin" address
is its SQS endpoint, which answers GET /cluster. Our own tests and benchmarks build on it, and so
can a user's: it needs the test extra (toxiproxy-python, boto3) only for what uses them.

Two kinds of link proxies, one per directed link and per protocol (Raft and mutation stream):

* ``proxied=True``: the small in-process LinkProxy (linkproxy.py), cut and heal only.
* ``toxiproxy=True``: proxies on a Toxiproxy server (the builtin ``elasticmq-py toxiproxy`` or a
  real ``toxiproxy-server``, as ELASTICMQ_PY_TOXIPROXY chooses), driven through the unmodified
  toxiproxy-python client, so links can also be slowed, throttled, reset or black-holed.

Either way ``c.proxies[(a, b)]`` is the directed link a->b with ``cut()`` / ``heal()``, and the
nemesis helpers below (``cut``, ``isolate``, ``partition``, ``bridge``, ``ring``, ``heal_all``)
work on both; toxics need ``toxiproxy=True``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
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

from cluster.config import Address, ClusterConfig, Durability, LinkAddrs, NodeConfig, NodeSpec, Replication, Timing
from cluster.history import read_history
from cluster.status import NodeStatus
from elasticmq_py.auth.credentials import Auth
from elasticmq_py.config import server_toml
from elasticmq_py.localcluster import group_masters
from elasticmq_py.testing.linkproxy import LinkProxy, ProxyLoop

SECRET_HEADER = "X-Cluster-Secret"


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


PORT_SLOT_ENV = "ELASTICMQ_PY_TEST_PORT_SLOT"


def pick_ports(n: int) -> list[int]:
    """Ports below the ephemeral range (so no outgoing connection can be holding one), spread
    by xdist worker so two workers do not race for the same ones. A runner outside pytest (the
    chaos runner) names its own slot in ELASTICMQ_PY_TEST_PORT_SLOT, so it does not race a
    concurrent ``make test`` either."""
    worker = os.environ.get(PORT_SLOT_ENV) or os.environ.get("PYTEST_XDIST_WORKER", "gw0")
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


class ToxiNet:
    """One Toxiproxy server for one cluster, and the toxiproxy-python client pointed at it.

    The client keeps its server address in class attributes (APIConsumer.host/port), so every
    call goes through ``with net:``, which points it at this server under a lock: two clusters
    in one process (the chaos runner, a test with two clusters) cannot steer each other's."""

    _lock = threading.RLock()

    def __init__(self, attempts: int = 3, nice: int = 0) -> None:
        from elasticmq_py.toxiproxy.testing import ToxiproxyUnavailable, start_toxiproxy
        from toxiproxy import Toxiproxy
        for attempt in range(attempts):
            try:
                self.server = start_toxiproxy()
                break
            except ToxiproxyUnavailable:
                # a Python start-up can exceed the 15 s allowed when the machine is loaded
                if attempt == attempts - 1:
                    raise
        if nice:
            os.setpriority(os.PRIO_PROCESS, self.server.pid, nice)   # see Cluster.nice
        self.client = Toxiproxy()

    def __enter__(self) -> Any:
        from toxiproxy.api import APIConsumer
        self._lock.acquire()
        APIConsumer.host, APIConsumer.port = self.server.host, self.server.port
        return self.client

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def create(self, name: str, listen_port: int, upstream: Address) -> Any:
        with self as tp:
            try:
                return tp.create(upstream=f"{upstream.host}:{upstream.port}", name=name,
                                 listen=f"127.0.0.1:{listen_port}")
            except KeyError:
                # the client builds a Proxy from whatever came back, and an error body has no name
                raise RuntimeError(f"toxiproxy could not create proxy {name} listening on "
                                   f"127.0.0.1:{listen_port} (port taken?)") from None

    def reset(self) -> None:
        """Every proxy enabled, every toxic removed (POST /reset)."""
        with self as tp:
            tp.reset()

    def close(self) -> None:
        self.server.stop()


CUT_TOXIC = "cut"   # the black-hole cut: a `timeout` toxic with timeout 0 holds and drops all data


class ToxiLink:
    """The directed link a->b as two Toxiproxy proxies: a's Raft and stream connections to b.

    On a->b, ``upstream`` toxics act on what a sends to b and ``downstream`` ones on what b
    answers on a's connection (handshakes, acks of the stream's transport): b's own messages to
    a travel on the link b->a. ``which`` chooses the proxies, ``raft`` and/or ``stream``."""

    KINDS = ("raft", "stream")

    def __init__(self, net: ToxiNet, src: str, dst: str, proxies: dict[str, Any], ports: dict[str, int]) -> None:
        self.net = net
        self.src, self.dst = src, dst
        self.proxies = proxies
        self.ports = ports
        self.toxics: dict[str, set[str]] = {k: set() for k in self.KINDS}   # names we added, per proxy

    def _selected(self, which: str | tuple[str, ...]) -> list[str]:
        kinds = self.KINDS if which == "both" else ((which,) if isinstance(which, str) else which)
        bad = set(kinds) - set(self.KINDS)
        if bad:
            raise ValueError(f"unknown link kind(s) {sorted(bad)}")
        return list(kinds)

    # -- cut and heal ---------------------------------------------------------------------------

    def cut(self, mode: str = "refuse", which: str | tuple[str, ...] = "both") -> None:
        """``refuse``: the proxy is disabled (connections dropped, new ones refused: a crashed
        or firewalled-with-RST peer). ``drop``: connections stay up and every byte vanishes (a
        black hole, noticed only by timeouts)."""
        if mode == "refuse":
            with self.net:
                for k in self._selected(which):
                    self.proxies[k].disable()
        elif mode == "drop":
            for k in self._selected(which):
                for stream in ("upstream", "downstream"):
                    if f"{CUT_TOXIC}_{stream}" not in self.toxics[k]:   # cutting a cut link is a no-op
                        self._add(k, f"{CUT_TOXIC}_{stream}", "timeout", {"timeout": 0}, stream)
        else:
            raise ValueError(f"unknown cut mode {mode!r}")

    def heal(self, which: str | tuple[str, ...] = "both") -> None:
        """Undo both kinds of cut (other toxics stay: ``clear()`` removes those)."""
        for k in self._selected(which):
            for stream in ("upstream", "downstream"):
                if f"{CUT_TOXIC}_{stream}" in self.toxics[k]:
                    self.remove(f"{CUT_TOXIC}_{stream}", which=k)
        with self.net:
            for k in self._selected(which):
                self.proxies[k].enable()

    def close(self) -> None:
        pass   # the proxies go with their server (ToxiNet.close)

    # -- toxics ---------------------------------------------------------------------------------

    def _add(self, kind: str, name: str, type_: str, attributes: dict[str, Any], stream: str,
             toxicity: float = 1.0) -> None:
        with self.net:
            self.proxies[kind].add_toxic(name=name, type=type_, stream=stream, toxicity=toxicity,
                                         attributes=attributes)
        self.toxics[kind].add(name)

    def add(self, type_: str, attributes: dict[str, Any], *, stream: str = "both",
            which: str | tuple[str, ...] = "both", name: str | None = None, toxicity: float = 1.0) -> None:
        """Add a toxic on ``stream`` (upstream, downstream or both) of the chosen proxies; its
        name is ``name`` (default the type) with ``_upstream``/``_downstream`` appended."""
        streams = ("upstream", "downstream") if stream == "both" else (stream,)
        for k in self._selected(which):
            for st in streams:
                self._add(k, f"{name or type_}_{st}", type_, attributes, st, toxicity)

    def remove(self, name: str, which: str | tuple[str, ...] = "both") -> None:
        """Remove toxics by full name (``latency_upstream``) or by the name given to ``add``
        (``latency``: both streams)."""
        from toxiproxy.exceptions import NotFound
        for k in self._selected(which):
            for full in [t for t in self.toxics[k] if t == name or t.rsplit("_", 1)[0] == name]:
                with self.net:
                    try:
                        self.proxies[k].destroy_toxic(full)
                    except NotFound:
                        pass
                self.toxics[k].discard(full)

    def clear(self, which: str | tuple[str, ...] = "both") -> None:
        for k in self._selected(which):
            for full in list(self.toxics[k]):
                self.remove(full, which=k)

    def latency(self, ms: int, jitter: int = 0, **kw: Any) -> None:
        self.add("latency", {"latency": ms, "jitter": jitter}, **kw)

    def bandwidth(self, rate_kb: int, **kw: Any) -> None:
        self.add("bandwidth", {"rate": rate_kb}, **kw)

    def reset_peer(self, timeout_ms: int = 0, **kw: Any) -> None:
        self.add("reset_peer", {"timeout": timeout_ms}, **kw)

    def timeout(self, timeout_ms: int, **kw: Any) -> None:
        self.add("timeout", {"timeout": timeout_ms}, **kw)

    def slicer(self, average_size: int, size_variation: int = 0, delay_us: int = 0, **kw: Any) -> None:
        self.add("slicer", {"average_size": average_size, "size_variation": size_variation, "delay": delay_us}, **kw)

    def limit_data(self, nbytes: int, **kw: Any) -> None:
        self.add("limit_data", {"bytes": nbytes}, **kw)

    def listed(self) -> dict[str, list[dict[str, Any]]]:
        """The server's own view of this link's toxics (what GET /proxies/{p}/toxics says)."""
        out = {}
        with self.net:
            for k, p in self.proxies.items():
                out[k] = [{"name": t.name, "type": t.type, "stream": t.stream, "attributes": t.attributes}
                          for t in p.toxics().values()]
        return out


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
    toxiproxy: bool = False   # per-link proxies on a Toxiproxy server (ToxiLink) instead of LinkProxy
    # Scheduling niceness of the node processes and the proxy server: a cluster whose timing
    # tolerates a starved scheduler can yield the CPU to tests (on the other xdist worker) whose
    # LAN timing does not.
    nice: int = 0
    secret: str = "test-secret"
    secrets: dict[str, str] = field(default_factory=dict)   # per-node override (wrong-secret test)
    replication_config: dict[str, Any] = field(default_factory=dict)   # [cluster.replication] keys
    encrypt_links: bool = True   # [cluster] encrypt-links
    limits: str = "strict"
    cluster_for: dict[str, list[str]] = field(default_factory=dict)  # per-node member list (join test)
    # A data-dir per node (tmp/NAME.data) with this fsync policy; None: in memory, Raft's state
    # in tmp/NAME.state
    fsync: str | None = None
    auth: Auth | None = None   # [auth] on every member (SigV4 verification of clients)
    groups: int = 1   # [cluster] groups: replication groups, each with a master of its own
    procs: dict[str, Proc] = field(default_factory=dict)
    kills: dict[str, list[float]] = field(default_factory=dict)  # wall times each node was killed
    proxies: dict[tuple[str, str], Any] = field(default_factory=dict)   # DirectedLink or ToxiLink
    _ploop: ProxyLoop | None = None
    net: ToxiNet | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        # One draw for the nodes' and the proxies' ports: two draws could hand out the same
        # port twice, since neither is bound yet when the other is drawn.
        ports = pick_ports(2 * n + (2 * n * (n - 1) if self.toxiproxy else 0))
        self.specs = [NodeSpec(name, Address("127.0.0.1", p), Address("127.0.0.1", q))
                      for name, p, q in zip(self.names, ports[:n], ports[n:2 * n])]
        links: dict[tuple[str, str], LinkAddrs] = {}
        if self.proxied and self.toxiproxy:
            raise ValueError("choose one kind of link proxy: proxied or toxiproxy")
        if self.toxiproxy:
            pairs = [(a, b) for a in self.specs for b in self.specs if a.name != b.name]
            # Fixed listen ports below the ephemeral range: a disabled proxy gives its port up,
            # and must get the same one back when it is enabled again.
            lports = ports[2 * n:]
            plan = []
            for i, (a, b) in enumerate(pairs):
                pp = {"raft": lports[2 * i], "stream": lports[2 * i + 1]}
                plan.append((a, b, pp))
                links[(a.name, b.name)] = LinkAddrs(raft=Address("127.0.0.1", pp["raft"]),
                                                    stream=Address("127.0.0.1", pp["stream"]))
            # The proxy server starts while the nodes do (both are mostly Python imports): a
            # node that dials before its proxy exists is refused and redials, as after a cut.
            self._net_error: BaseException | None = None
            self._net_thread = threading.Thread(target=self._make_net, args=(plan,), name="toxinet", daemon=True)
            self._net_thread.start()
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
        self.cluster = ClusterConfig("test", self.secret, tuple(self.specs), links, self.timing,
                                     encrypt_links=self.encrypt_links, groups=self.groups)

    def _make_net(self, plan: list[tuple[NodeSpec, NodeSpec, dict[str, int]]]) -> None:
        try:
            net = self.net = ToxiNet(nice=self.nice)
            for a, b, ports in plan:
                made = {"raft": net.create(f"{a.name}__{b.name}__raft", ports["raft"], b.raft_addr),
                        "stream": net.create(f"{a.name}__{b.name}__stream", ports["stream"], b.stream_addr)}
                self.proxies[(a.name, b.name)] = ToxiLink(net, a.name, b.name, made, ports)
        except BaseException as e:   # noqa: BLE001 - raised to the test by _await_net
            self._net_error = e

    def _await_net(self) -> None:
        """The Toxiproxy proxies exist (toxiproxy mode: they are made in the background)."""
        t = getattr(self, "_net_thread", None)
        if t is None:
            return
        t.join(60)
        if t.is_alive():
            raise RuntimeError("the Toxiproxy server and its proxies were not ready within 60 s")
        if self._net_error is not None:
            raise RuntimeError(f"could not set up the Toxiproxy links: {self._net_error!r}") from self._net_error

    # -- processes --------------------------------------------------------------------------------

    def config_for(self, name: str) -> NodeConfig:
        cluster = self.cluster
        members = set(self.cluster_for.get(name, self.names))
        cluster = ClusterConfig(cluster.name, self.secrets.get(name, cluster.secret),
                                tuple(s for s in cluster.nodes if s.name in members),
                                {k: v for k, v in cluster.links.items() if set(k) <= members}, cluster.timing,
                                Replication.from_dict(self.replication_config), cluster.encrypt_links,
                                cluster.groups)
        if self.fsync is not None:
            return NodeConfig(name, cluster, history_path=str(self.tmp / f"{name}.history.jsonl"),
                              durability=Durability(str(self.tmp / f"{name}.data"), self.fsync))
        return NodeConfig(name, cluster, history_path=str(self.tmp / f"{name}.history.jsonl"),
                          state_dir=str(self.tmp / f"{name}.state"))

    def start(self, name: str, timeout: float = 15.0) -> None:
        self._ready(name, self._spawn(name), timeout)

    def config_path(self, name: str) -> Path:
        return self.tmp / f"{name}.toml"

    def _spawn(self, name: str) -> subprocess.Popen:
        path = self.config_path(name)
        path.write_text(server_toml(self.config_for(name), host="127.0.0.1", port=0, limits=self.limits,
                                    auth=self.auth))
        err = open(self.tmp / f"{name}.log", "ab")
        return subprocess.Popen([*self._nice_prefix(), sys.executable, "-m", "elasticmq_py", "serve", "--config",
                                 str(path), "--print-port", "--log-level", "INFO"],
                                stdout=subprocess.PIPE, stderr=err, cwd=str(self.tmp))

    def _nice_prefix(self) -> list[str]:
        # nice(1) execs the node in its own place (same pid, so signals reach the node); a
        # preexec_fn would do the same but is unsafe while the test's client threads run
        nice = shutil.which("nice") if self.nice else None
        return [nice, "-n", str(self.nice)] if nice else []

    def _ready(self, name: str, p: subprocess.Popen, timeout: float) -> None:
        line = _readline(p, timeout)
        if not line.isdigit():
            p.kill()
            p.wait(5)
            raise RuntimeError(f"{name} did not start: {line!r}; see {self.tmp / (name + '.log')}")
        self.procs[name] = Proc(name, p, f"127.0.0.1:{line}")

    def start_all(self, parallel: bool = False, timeout: float = 30.0) -> None:
        """``parallel``: spawn every node before waiting for any (start-up is mostly imports,
        which two cores do side by side); the default keeps the nodes' start order."""
        if not parallel:
            for n in self.names:
                self.start(n)
        else:
            spawned = [(n, self._spawn(n)) for n in self.names]
            for i, (n, p) in enumerate(spawned):
                try:
                    self._ready(n, p, timeout)
                except BaseException:
                    for _, q in spawned[i + 1:]:
                        q.kill()
                        q.wait(5)
                    raise
        self._await_net()

    def kill(self, name: str) -> None:
        p = self.procs[name]
        p.popen.send_signal(signal.SIGKILL)
        self.kills.setdefault(name, []).append(time.time())
        p.popen.wait(10)

    def stop(self, name: str, timeout: float = 10.0) -> None:
        """SIGTERM, as an operator stops a member, and wait for the process to end."""
        p = self.procs[name]
        p.popen.terminate()
        p.popen.wait(timeout)

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
        if getattr(self, "_net_thread", None) is not None:
            self._net_thread.join(60)
        for px in self.proxies.values():
            px.close()
        if self._ploop is not None:
            self._ploop.close()
        if self.net is not None:
            self.net.close()

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
                timeout: float = 10.0, secret: str | None = "default") -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else (b"" if method != "GET" else None)
        headers = {}
        if secret is not None:
            headers[SECRET_HEADER] = self.secret if secret == "default" else secret
        req = urllib.request.Request(f"http://{self.procs[name].admin}{path}", data=data, method=method,
                                     headers=headers)
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
        """A predicate: exactly one active master among `among`, and all of them agree on its view.
        With several groups no member is active as a whole (each serves its own groups): the
        master is the Raft leader the view names, and every group's master the view names must
        be among `among` and serve its group (``group_masters``)."""
        def pred() -> str | None:
            names = among or self.alive()
            sts = self.statuses(names)
            if any(s is None for s in sts.values()):
                return None
            if self.groups > 1:
                actives = [n for n, s in sts.items() if s["role"] == "leader"]
            else:
                actives = [n for n, s in sts.items() if s["active"]]
            if len(actives) != 1:
                return None
            views = {json.dumps(s["view"], sort_keys=True) for s in sts.values()}
            if len(views) != 1:
                return None
            view = next(iter(sts.values()))["view"]
            if view is None or view["master"] != actives[0]:
                return None
            if members is not None and set(view["members"]) != members:
                return None
            if self.groups > 1 and group_masters({n: NodeStatus.from_dict(s) for n, s in sts.items()}) is None:
                return None
            return actives[0]
        return pred

    def group_masters(self, names: list[str] | None = None) -> list[str] | None:
        """Each group's master, once the named nodes (default: the live ones) name the same ones
        and each serves its group; else None."""
        return group_masters({n: None if s is None else NodeStatus.from_dict(s)
                              for n, s in self.statuses(names).items()})

    def history(self, name: str) -> list[dict[str, Any]]:
        path = self.tmp / f"{name}.history.jsonl"
        return read_history(str(path)) if path.exists() else []

    def histories(self) -> dict[str, list[dict[str, Any]]]:
        return {n: self.history(n) for n in self.names}

    # -- the nodes' own routes --------------------------------------------------------------------------

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

    def sqs(self, name: str, key: str = "x", secret: str = "x", **config: Any):
        """A boto3 client of ``name``'s endpoint, signing with ``key`` and ``secret``."""
        import boto3
        from botocore.config import Config
        return boto3.client("sqs", endpoint_url=self.url(name), region_name="us-east-1",
                            aws_access_key_id=key, aws_secret_access_key=secret,
                            config=Config(**config))

    # -- the proxies: nemesis helpers ------------------------------------------------------------------

    def link(self, src: str, dst: str) -> Any:
        self._await_net()
        if not self.proxies:
            raise RuntimeError("this cluster has no link proxies: make it with proxied=True or toxiproxy=True")
        return self.proxies[(src, dst)]

    def _cut(self, src: str, dst: str, mode: str) -> None:
        px = self.link(src, dst)
        if isinstance(px, ToxiLink):
            px.cut(mode)
        else:
            px.cut()   # LinkProxy only refuses

    def cut(self, src: str, dst: str, mode: str = "refuse", both: bool = False) -> None:
        """Cut the directed link src->dst (``both``: and dst->src)."""
        self._cut(src, dst, mode)
        if both:
            self._cut(dst, src, mode)

    def heal(self, src: str, dst: str, both: bool = False) -> None:
        self.link(src, dst).heal()
        if both:
            self.link(dst, src).heal()

    def isolate(self, name: str, mode: str = "refuse") -> None:
        self._await_net()
        for (a, b) in self.proxies:
            if name in (a, b):
                self._cut(a, b, mode)

    def partition(self, groups: list[list[str]], mode: str = "refuse") -> None:
        """Cut every link between nodes of different groups, both directions. Nodes named in no
        group form one more group together."""
        self._await_net()
        rest = [n for n in self.names if not any(n in g for g in groups)]
        side = {n: i for i, g in enumerate(groups + ([rest] if rest else [])) for n in g}
        for (a, b) in self.proxies:
            if side[a] != side[b]:
                self._cut(a, b, mode)

    def bridge(self, left: str, middle: str, right: str, mode: str = "refuse") -> None:
        """left and right cannot talk (both directions); both still talk to middle."""
        self.cut(left, right, mode, both=True)

    def ring(self, order: list[str] | None = None, mode: str = "refuse") -> None:
        """Each node keeps only its two neighbours in ``order`` (Jepsen's majorities ring: with
        five nodes every node sees a majority, and no two nodes see the same one)."""
        self._await_net()
        order = order or list(self.names)
        n = len(order)
        keep = {frozenset((order[i], order[(i + 1) % n])) for i in range(n)}
        for (a, b) in self.proxies:
            if frozenset((a, b)) not in keep:
                self._cut(a, b, mode)

    def one_way_ring(self, order: list[str] | None = None, mode: str = "refuse") -> None:
        """A ring of partial cuts: each node's link to the next in ``order`` is cut in that
        direction only (n1->n2, n2->n3, n3->n1), so every pair still talks one way."""
        order = order or list(self.names)
        for i, a in enumerate(order):
            self._cut(a, order[(i + 1) % len(order)], mode)

    def heal_all(self) -> None:
        """Every link back up; on Toxiproxy every toxic removed too."""
        self._await_net()
        if self.net is not None:
            self.net.reset()
            for px in self.proxies.values():
                for k in px.toxics.values():
                    k.clear()
            return
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
            v = {k: e[k] for k in ("view_id", "members", "master", "epoch", "groups") if k in e}
            assert v["view_id"] > last, f"{node}: view ids not increasing: {last} then {v['view_id']}"
            last = v["view_id"]
            seen = by_id.setdefault(v["view_id"], v)
            assert seen == v, f"view {v['view_id']} differs: {seen} vs {v} (at {node})"
    epochs = [by_id[i]["epoch"] for i in sorted(by_id)]
    assert epochs == sorted(epochs), f"epochs go back: {epochs}"
    return by_id


def active_intervals(histories: dict[str, list[dict[str, Any]]], kills: dict[str, list[float]],
                     now: float | None = None, group: int = 0) -> list[tuple[str, float, float]]:
    """(node, from, to) for every period a node was the active master of ``group`` (lines without
    a group are group 0's). An interval still open when the node restarted, or at the end, was
    closed by a kill (the last one before that point)."""
    now = now if now is not None else time.time()
    out = []
    for node, events in histories.items():
        start: float | None = None

        def killed_before(t: float) -> float:
            ks = [k for k in kills.get(node, []) if start is not None and start <= k <= t]
            return min(ks) if ks else t

        for e in events:
            ev = e["event"]
            if ev in ("activated", "deactivated") and e.get("group", 0) != group:
                continue
            if ev == "activated":
                start = e["ts"]
            elif ev in ("deactivated", "stopped") and start is not None:
                out.append((node, start, e["ts"]))
                start = None
            elif ev == "started" and start is not None:
                out.append((node, start, killed_before(e["ts"])))
                start = None
        if start is not None:
            out.append((node, start, killed_before(now)))
    return out


def check_single_master(histories: dict[str, list[dict[str, Any]]], kills: dict[str, list[float]]) -> None:
    """Never two active masters of one replication group."""
    groups = {e.get("group", 0) for events in histories.values() for e in events if e["event"] == "activated"}
    for group in sorted(groups):
        iv = sorted(active_intervals(histories, kills, group=group), key=lambda x: x[1])
        for i, (n1, s1, e1) in enumerate(iv):
            for n2, s2, e2 in iv[i + 1:]:
                if n1 != n2 and s2 < e1:
                    raise AssertionError(f"two active masters of group {group}: {n1} [{s1:.6f}, {e1:.6f}] "
                                         f"and {n2} [{s2:.6f}, {e2:.6f}]")
