"""Typed cluster configuration: who the members are, where each link is dialled, and the timers.

A node's identity is its *name*. Addresses only say where to reach it, and the address one node
dials for a peer can differ per directed link, so a test (or an operator) can put a proxy on the
single link n1->n2 and cut just that link.

The file form (TOML or JSON, same keys; a misspelt key is an error)::

    cluster = "orders"            # a peer announcing another cluster name is refused
    secret = "..."                # or secret-file = "/etc/elasticmq-py/secret"
    self = "n1"
    encrypt-links = true          # CurveZMQ on the mutation stream (the default); every member alike
    groups = 1                    # replication groups: each queue lives in one, each group has its
                                  # own master (1..MAX_GROUPS; every member alike; no [storage] yet)

    [[nodes]]
    name = "n1"
    raft = "127.0.0.1:20001"      # where n1 listens for Raft; the default dial address of n1
    stream = "127.0.0.1:20101"    # where n1 listens for the mutation stream
    http = "127.0.0.1:9324"       # n1's SQS endpoint, for the dashboard's links to its members

    [[nodes]]
    name = "n2"
    raft = "127.0.0.1:20002"
    stream = "127.0.0.1:20102"

    [links."n1->n2"]              # n1 reaches n2 through a proxy on this directed link
    raft = "127.0.0.1:25012"

    [timing]                      # see Timing; the defaults are tuned for a LAN
    lease = 0.15

    [replication]                 # see Replication
    policy = "majority"           # none | one | majority | all (a queue's tag can override it)
    forward = true                # non-masters forward client requests to the master

    [node]                        # process-local settings
    history = "n1-history.jsonl"
    state-dir = "n1-state"        # durable Raft state (term, vote, log); see cluster/runtime.py

    [storage]                     # see Durability: this node's journal (and Raft's state)
    data-dir = "n1-data"
    fsync = "always"              # always | interval | never
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from cluster.replication.wire import MAX_GROUPS


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True, order=True)
class Address:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> "Address":
        if not isinstance(text, str) or ":" not in text:
            raise ConfigError(f"address must be 'host:port', got {text!r}")
        host, _, port = text.rpartition(":")
        host = host.strip("[]")
        try:
            number = int(port)
        except ValueError:
            raise ConfigError(f"address {text!r}: port is not a number") from None
        if not host or not 0 <= number <= 65535:
            raise ConfigError(f"address {text!r} is not valid")
        return cls(host, number)

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A member: its name and the addresses it listens on (also the default dial addresses)."""

    name: str
    raft_addr: Address
    stream_addr: Address | None = None
    http_addr: Address | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "raft": str(self.raft_addr)}
        if self.stream_addr is not None:
            d["stream"] = str(self.stream_addr)
        if self.http_addr is not None:
            d["http"] = str(self.http_addr)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NodeSpec":
        _check_keys(d, {"name", "raft", "stream", "http"}, "node")
        name = d.get("name")
        if not isinstance(name, str) or not _valid_name(name):
            raise ConfigError(f"node name {name!r} must be 1-64 characters of [A-Za-z0-9_.-]")
        if "raft" not in d:
            raise ConfigError(f"node {name}: 'raft' address is required")
        stream, http = d.get("stream"), d.get("http")
        return cls(name, Address.parse(d["raft"]), Address.parse(stream) if stream else None,
                   Address.parse(http) if http else None)


@dataclass(frozen=True, slots=True)
class LinkAddrs:
    """Overrides for one directed link src->dst; None means: dial the peer's own address."""

    raft: Address | None = None
    stream: Address | None = None


@dataclass(frozen=True, slots=True)
class Timing:
    """Raft and lease timers, in seconds. `validate()` enforces the inequalities the safety
    argument in cluster/lease.py rests on, so an unsafe combination fails at start-up."""

    heartbeat: float = 0.05          # pysyncobj appendEntriesPeriod
    election_min: float = 0.2        # raftMinTimeout
    election_max: float = 0.4        # raftMaxTimeout
    vote_guard: float = 0.18         # a follower ignores vote requests this long after leader contact
    lease: float = 0.15              # a master is active this long after a quorum-acked heartbeat was sent
    max_drift: float = 0.001         # bound on the relative rate difference of two nodes' monotonic clocks
    leader_fallback: float = 1.0     # pysyncobj leaderFallbackTimeout (Raft-level step-down)
    connection_timeout: float = 1.0  # a link with no frame for this long is dead
    keepalive: float = 0.2           # a link idle this long carries a keepalive frame
    reconnect: float = 0.3           # pysyncobj connectionRetryTime
    suspect: float = 0.5             # the master drops a member from the view after this long without acks
    debounce: float = 0.25           # a changed reachable set must hold this long before a new view
    gather: float = 0.05             # a new master waits this long for stragglers before its first view
    proposal_retry: float = 1.0      # an uncommitted view proposal is re-made after this long
    # Queue groups (cluster/assignment.py). The Raft leader moves a group whose master it has not
    # heard from for `group_suspect` (None: election_min, resolved at construction), and hands a
    # group to a member only once that member has been in the view and reachable for
    # `rebalance_quiet`. Neither is read when the cluster has one group.
    group_suspect: float | None = None
    rebalance_quiet: float = 10.0

    def __post_init__(self) -> None:
        if self.group_suspect is None:
            object.__setattr__(self, "group_suspect", self.election_min)

    def validate(self) -> "Timing":
        problems = []
        if not self.heartbeat > 0:
            problems.append("heartbeat must be > 0")
        if not self.election_min > 3 * self.heartbeat:
            problems.append("election_min must exceed 3 heartbeats (pysyncobj requires it)")
        if not self.election_max > self.election_min:
            problems.append("election_max must exceed election_min")
        if not 0 < self.vote_guard <= self.election_min:
            problems.append("vote_guard must be in (0, election_min]")
        if not 0 <= self.max_drift < 0.1:
            problems.append("max_drift must be in [0, 0.1)")
        if not 0 < self.lease * (1 + self.max_drift) < self.vote_guard * (1 - self.max_drift):
            problems.append("lease*(1+max_drift) must be < vote_guard*(1-max_drift): "
                            "otherwise a cut-off master could still be active when another is elected")
        if not self.lease > self.heartbeat:
            problems.append("lease must exceed the heartbeat, or it can never stay fresh")
        if not self.leader_fallback > self.heartbeat:
            problems.append("leader_fallback must exceed the heartbeat")
        if not self.connection_timeout >= self.election_max:
            problems.append("connection_timeout must be >= election_max (pysyncobj requires it)")
        if not 0 < self.keepalive < self.connection_timeout / 2:
            problems.append("keepalive must be < connection_timeout/2")
        for name in ("reconnect", "suspect", "debounce", "proposal_retry"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0")
        if not self.gather >= 0:
            problems.append("gather must be >= 0")
        if not self.heartbeat < self.group_suspect <= self.election_min:
            problems.append("group_suspect must be in (heartbeat, election_min]: a live member is heard from once a "
                            "heartbeat, and a new leader moves the old leader's groups at once only because an "
                            "election took at least election_min of silence")
        if not self.rebalance_quiet > self.suspect + self.debounce:
            problems.append("rebalance_quiet must exceed suspect + debounce: a member that goes silent right after "
                            "joining must leave the view before it could be handed a group")
        if problems:
            raise ConfigError("unsafe or invalid timing: " + "; ".join(problems))
        return self

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Timing":
        names = {f.name.replace("_", "-"): f.name for f in fields(cls)}
        _check_keys(d, set(names), "timing")
        try:
            return cls(**{names[k]: float(v) for k, v in d.items()}).validate()
        except (TypeError, ValueError) as e:
            raise ConfigError(str(e)) from None


ACK_POLICIES = ("none", "one", "majority", "all")


@dataclass(frozen=True, slots=True)
class Replication:
    """How the mutation stream behaves (the same on every member).

    ``policy`` is when a client operation counts as done (cluster/replication/messages.py's
    AckPolicy says what each one guarantees); a queue tagged ``elasticmq-py:ack-policy`` uses
    its tag's value instead. ``forward``: a member that is not the master forwards client
    requests to the master over the mutation-stream link (elasticmq_py/forwarding.py says why
    not HTTP); off, it refuses them with a retryable 503. The throttle bounds are the lag of a *reachable* replica beyond which the
    master answers producers with SQS's throttling error until the replica catches up.
    ``gather_ms``: how long the master may wait for the clients an ack answered before it cuts
    the next batch (cluster/replication/master.py; 0: never).
    """

    policy: str = "majority"
    forward: bool = True
    throttle_lag_batches: int = 10_000
    throttle_lag_ms: int = 5_000
    log_limit_mb: int = 64
    gather_ms: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.gather_ms, int) or isinstance(self.gather_ms, bool) or self.gather_ms < 0:
            raise ConfigError("replication gather-ms must be a whole number of milliseconds, 0 or more")
        if self.policy not in ACK_POLICIES:
            raise ConfigError(f"replication policy {self.policy!r} must be one of {', '.join(ACK_POLICIES)}")
        for name in ("throttle_lag_batches", "throttle_lag_ms", "log_limit_mb"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) <= 0:
                raise ConfigError(f"replication {name.replace('_', '-')} must be a positive integer")
        if not isinstance(self.forward, bool):
            raise ConfigError("replication forward must be true or false")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Replication":
        names = {f.name.replace("_", "-"): f.name for f in fields(cls)}
        _check_keys(d, set(names), "replication")
        return cls(**{names[k]: v for k, v in d.items()})

    def to_dict(self) -> dict[str, Any]:
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}


FSYNC_POLICIES = ("always", "interval", "never")


@dataclass(frozen=True, slots=True)
class Durability:
    """A node's data directory: its journal of mutation batches and snapshots (cluster/journal/),
    and Raft's state under ``raft/``. Process-local, like [node].

    ``fsync``: ``always`` (group commit: one fsync per batch of writes, and nothing is acked or
    answered before it), ``interval`` (written at once, fsynced every ``fsync_interval_ms``: a
    process crash loses nothing written, a power cut up to that interval), ``never`` (the OS
    writes back when it likes). Compaction snapshots are taken once the journal has grown by
    max(``snapshot_min_mb``, the last snapshot's size). ``gather_ms``: a single node's group
    commit waits up to this long for as many operations as its last fsync answered
    (cluster/standalone.py; 0: cut each turn's entry at once). A cluster member's entries are
    its batches, gathered by [cluster.replication] gather-ms instead.
    """

    data_dir: str
    fsync: str = "always"
    fsync_interval_ms: int = 100
    snapshot_min_mb: int = 64
    gather_ms: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ConfigError("storage data-dir must be a non-empty path")
        if self.fsync not in FSYNC_POLICIES:
            raise ConfigError(f"storage fsync {self.fsync!r} must be one of {', '.join(FSYNC_POLICIES)}")
        for name in ("fsync_interval_ms", "snapshot_min_mb"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"storage {name.replace('_', '-')} must be a positive integer")
        g = self.gather_ms
        if not isinstance(g, int) or isinstance(g, bool) or g < 0:
            raise ConfigError("storage gather-ms must be a non-negative integer (0: no gather)")

    @property
    def journal_dir(self) -> str:
        return str(Path(self.data_dir) / "journal")

    @property
    def raft_dir(self) -> str:
        return str(Path(self.data_dir) / "raft")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: Path | None = None) -> "Durability":
        names = {f.name.replace("_", "-"): f.name for f in fields(cls)}
        _check_keys(d, set(names), "storage")
        if "data-dir" not in d:
            raise ConfigError("storage: data-dir is required")
        kw = {names[k]: v for k, v in d.items()}
        if base_dir is not None and isinstance(kw["data_dir"], str) and not Path(kw["data_dir"]).is_absolute():
            kw["data_dir"] = str(base_dir / kw["data_dir"])
        return cls(**kw)

    def to_dict(self) -> dict[str, Any]:
        return {f.name.replace("_", "-"): getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """What every member must agree on (except `links`, which is each node's own view of how to
    reach its peers: only entries whose source is this node are used by it)."""

    name: str
    secret: str
    nodes: tuple[NodeSpec, ...]
    links: Mapping[tuple[str, str], LinkAddrs] = field(default_factory=dict)
    timing: Timing = field(default_factory=Timing)
    replication: Replication = field(default_factory=Replication)
    # CurveZMQ on the stream's links (cluster/replication/curve.py): off, bodies cross them in
    # clear text, authenticated only. Members that disagree cannot exchange a frame.
    encrypt_links: bool = True
    # Replication groups (cluster/node_core.py): every queue lives in one group for its life, and
    # each group has its own master, so masters spread over the members. Every member must say
    # the same: the stream refuses a peer of another count, the views report the mismatch.
    groups: int = 1

    def __post_init__(self) -> None:
        if not self.secret:
            raise ConfigError("a cluster secret is required: cluster traffic is always authenticated")
        if not isinstance(self.encrypt_links, bool):
            raise ConfigError("encrypt-links must be true or false")
        if type(self.groups) is not int or not 1 <= self.groups <= MAX_GROUPS:
            raise ConfigError(f"groups must be a whole number from 1 to {MAX_GROUPS}, got {self.groups!r}")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ConfigError(f"duplicate node names in {names}")
        for src, dst in self.links:
            if src == dst:
                raise ConfigError(f"link {src}->{dst} links a node to itself")

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def dial_raft(self, src: str, dst: str, default: Address | None = None) -> Address:
        """The address `src` dials to reach `dst`'s Raft port."""
        link = self.links.get((src, dst))
        if link is not None and link.raft is not None:
            return link.raft
        if default is not None:
            return default
        return self.node(dst).raft_addr

    def dial_stream(self, src: str, dst: str) -> Address | None:
        link = self.links.get((src, dst))
        if link is not None and link.stream is not None:
            return link.stream
        return self.node(dst).stream_addr


@dataclass(frozen=True, slots=True)
class NodeConfig:
    self_name: str
    cluster: ClusterConfig
    raft_bind: Address | None = None     # default: the host/port of our own NodeSpec.raft_addr
    history_path: str | None = None
    # Where Raft's term, vote and log survive a restart (messages stay in memory). Without it a
    # restarted member forgets its vote and its log, and can help elect a master that lacks a
    # committed view; with it, a restarted member also knows that it lost its messages.
    state_dir: str | None = None
    # A data-dir ([storage]): the journal, and Raft's state too unless state_dir says elsewhere.
    durability: Durability | None = None

    def __post_init__(self) -> None:
        if self.self_name not in self.cluster.names:
            raise ConfigError(f"self {self.self_name!r} is not one of the nodes {list(self.cluster.names)}")

    @property
    def spec(self) -> NodeSpec:
        return self.cluster.node(self.self_name)

    @property
    def raft_state_dir(self) -> str | None:
        """Where Raft's state lives: ``state-dir`` (the older key keeps working), else the
        data-dir's ``raft/``."""
        if self.state_dir:
            return self.state_dir
        return self.durability.raft_dir if self.durability is not None else None

    @property
    def bind_addr(self) -> Address:
        return self.raft_bind or self.spec.raft_addr

    @property
    def timing(self) -> Timing:
        return self.cluster.timing

    def peers(self) -> tuple[NodeSpec, ...]:
        return tuple(n for n in self.cluster.nodes if n.name != self.self_name)


    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], base_dir: Path | None = None) -> "NodeConfig":
        _check_keys(d, {"cluster", "secret", "secret-file", "self", "nodes", "links", "timing", "replication", "node",
                        "storage", "encrypt-links", "groups"}, "top level")
        secret = d.get("secret")
        if "secret-file" in d:
            if secret is not None:
                raise ConfigError("give either secret or secret-file, not both")
            path = Path(d["secret-file"])
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            secret = path.read_text().strip()
        nodes_raw = d.get("nodes")
        if not isinstance(nodes_raw, list) or not nodes_raw:
            raise ConfigError("'nodes' must be a non-empty list")
        links: dict[tuple[str, str], LinkAddrs] = {}
        for key, v in (d.get("links") or {}).items():
            src, sep, dst = key.partition("->")
            if not sep or not src or not dst:
                raise ConfigError(f"link key {key!r} must look like 'n1->n2'")
            _check_keys(v, {"raft", "stream"}, f"link {key}")
            links[(src.strip(), dst.strip())] = LinkAddrs(
                Address.parse(v["raft"]) if v.get("raft") else None,
                Address.parse(v["stream"]) if v.get("stream") else None,
            )
        cluster = ClusterConfig(
            name=str(d.get("cluster", "elasticmq-py")),
            secret=str(secret or ""),
            nodes=tuple(NodeSpec.from_dict(n) for n in nodes_raw),
            links=links,
            timing=Timing.from_dict(d.get("timing") or {}),
            replication=Replication.from_dict(d.get("replication") or {}),
            encrypt_links=d.get("encrypt-links", True),
            groups=d.get("groups", 1),
        )
        local = d.get("node") or {}
        _check_keys(local, {"history", "raft-bind", "state-dir"}, "node")
        return cls(
            self_name=str(d.get("self", "")),
            cluster=cluster,
            raft_bind=Address.parse(local["raft-bind"]) if local.get("raft-bind") else None,
            history_path=local.get("history"),
            state_dir=local.get("state-dir"),
            durability=Durability.from_dict(d["storage"], base_dir) if d.get("storage") is not None else None,
        )

    @classmethod
    def load(cls, path: str | Path) -> "NodeConfig":
        path = Path(path)
        text = path.read_text()
        try:
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
        return cls.from_dict(data, base_dir=path.parent)

    def to_dict(self) -> dict[str, Any]:
        """The inverse of from_dict (the secret included: this is what a test writes to disk)."""
        t = self.cluster.timing
        d: dict[str, Any] = {
            "cluster": self.cluster.name,
            "secret": self.cluster.secret,
            "self": self.self_name,
            "nodes": [n.to_dict() for n in self.cluster.nodes],
            "links": {
                f"{s}->{t_}": {k: str(v) for k, v in (("raft", l.raft), ("stream", l.stream)) if v is not None}
                for (s, t_), l in self.cluster.links.items()
            },
            "timing": {f.name.replace("_", "-"): getattr(t, f.name) for f in fields(Timing)},
            "replication": self.cluster.replication.to_dict(),
            "encrypt-links": self.cluster.encrypt_links,
        }
        if self.cluster.groups != 1:
            d["groups"] = self.cluster.groups
        local: dict[str, Any] = {}
        if self.history_path:
            local["history"] = self.history_path
        if self.raft_bind:
            local["raft-bind"] = str(self.raft_bind)
        if self.state_dir:
            local["state-dir"] = self.state_dir
        if local:
            d["node"] = local
        if self.durability is not None:
            d["storage"] = self.durability.to_dict()
        return d


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= 64 and all(c.isalnum() or c in "_.-" for c in name)


def _check_keys(d: Any, allowed: set[str], where: str) -> None:
    if not isinstance(d, Mapping):
        raise ConfigError(f"{where}: expected a table/object")
    unknown = set(d) - allowed
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
