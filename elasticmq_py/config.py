"""Server configuration as one typed value. The TOML file and CLI flags both produce it.

The file (all keys optional)::

    host = "127.0.0.1"
    port = 9324
    account-id = "000000000000"
    region = "us-east-1"
    limits = "strict"            # or "relaxed"
    node-name = "local"
    public-host = "sqs.local:9324"   # host:port in queue URLs for requests without a Host header
    gc = "managed"               # or "default": how `elasticmq-py serve` runs Python's cycle
                                 # collector (elasticmq_py/gcpolicy.py); an embedded Server never
                                 # touches its host program's

    # Optional: HTTPS on the SQS port (and so on the dashboard and admin routes it serves).
    # Both keys or neither; paths are relative to this file. Without it the port speaks HTTP.
    [tls]
    cert-file = "server.pem"     # PEM: the server's certificate, then any intermediates
    key-file = "server.key"      # PEM: its private key, unencrypted

    # Optional: the operator's console (the dashboard's actions, elasticmq_py/dashboard/console/)
    # and the admin routes. A cluster member's admin secret is its cluster secret unless one is
    # given here; a single node has one only from here, and without one its console is read-only.
    [admin]
    secret-file = "admin-secret.txt"   # or secret = "..."; relative to this file
    from = ["127.0.0.1", "::1"]  # who may log in and act (CIDRs allowed); the default. On a
                                 # cluster member this or [cluster] admin-from, not both
    history = "node.history.jsonl"   # a single node's history log, where console actions are
                                 # audited; a cluster member's is [cluster] history

    # Optional: verify clients' SigV4 signatures (elasticmq_py/auth/). Without it, or with
    # mode = "off", any credentials work and every request acts as account-id.
    [auth]
    mode = "sigv4"               # or "off" (the default)
    [[auth.credentials]]         # one per access key
    access-key-id = "AKIAEXAMPLE1"
    secret-access-key = "..."    # or secret-access-key-file = "key.txt" (relative to this file)
    account-id = "111111111111"  # the account the key acts as: its queue URLs and ARNs carry it
    session-token = "..."        # optional: temporary credentials; requests must carry the token

    # ElasticMQ's queues {} block: created at start-up, dead-letter queues first.
    [queues.orders]
    attributes = { VisibilityTimeout = 30, DelaySeconds = 0 }
    tags = { team = "payments" }
    dead-letter-queue = { name = "orders-dlq", max-receive-count = 3 }

    [queues."orders-dlq"]

    [queues."jobs.fifo"]
    region = "eu-west-1"         # defaults to the server's region and account
    attributes = { ContentBasedDeduplication = true }

    # Optional: keep queues and messages on disk (the journal, cluster/journal/), so that they
    # survive a restart. Without it everything is in memory.
    [storage]
    data-dir = "data"            # the journal and snapshots; a cluster member's Raft state too
    fsync = "always"             # always (default) | interval | never: see cluster/config.py
    fsync-interval-ms = 100      # with fsync = "interval"
    snapshot-min-mb = 64         # compaction: snapshot once the journal grew this much (or more)
    gather-ms = 2                # a single node's group commit waits up to this for as many
                                 # writes as its last fsync answered (0: none); see
                                 # cluster/standalone.py (a cluster's: [cluster.replication])

    # Optional: run as a member of a cluster. Without this section the server is a single node.
    # The keys are cluster/config.py's (the same types are used, nothing is re-declared here).
    [cluster]
    name = "orders"              # a peer announcing another cluster name is refused
    self = "n1"                  # this node's name (default: node-name); becomes node-name
    secret = "..."               # or secret-file = "secret.txt" (relative to this file)
    encrypt-links = true         # CurveZMQ on the mutation stream (default); the same on every member
    groups = 1                   # replication groups, each with its own master (the same on every
                                 # member; 2 or more: no [storage] data-dir yet)
    history = "n1.history.jsonl" # optional JSON-lines history of views and activity
    state-dir = "n1.state"       # durable Raft state (term, vote, log); strongly advised, see
                                 # cluster/runtime.py: without it a restarted node can vote unsafely
    raft-bind = "0.0.0.0:20001"  # optional: where to listen for Raft, if not our own raft address
    admin-from = ["127.0.0.1", "::1"]  # who may call the mutating admin routes (CIDRs allowed)

    [[cluster.nodes]]
    name = "n1"
    raft = "127.0.0.1:20001"     # Raft listen address, and every peer's default dial address
    stream = "127.0.0.1:20101"   # the mutation stream
    http = "127.0.0.1:9324"      # n1's SQS endpoint, for the dashboard's links to its members

    [[cluster.nodes]]
    name = "n2"
    raft = "127.0.0.1:20002"
    stream = "127.0.0.1:20102"

    [cluster.links."n1->n2"]     # per directed link: dial n2 through this address (a proxy)
    raft = "127.0.0.1:25012"

    [cluster.timing]             # cluster/config.py's Timing; the defaults suit a LAN
    lease = 0.15

    [cluster.replication]        # cluster/config.py's Replication
    policy = "majority"          # none | one | majority | all
    forward = true               # false: non-masters answer 503 instead of forwarding

Keys are checked: a misspelt key is an error, not a silently ignored setting.

With [cluster], only the node that is *active* (the master of the current view, holding a quorum
and a fresh lease) executes SQS calls; every other node forwards them to it, or with
``forward = false`` answers a retryable HTTP 503 (ServiceUnavailable). GET /health is 200 on any
node that serves clients either way, GET /health?role=master on the active master only.
"""

from __future__ import annotations

import ipaddress
import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from storage.commands import DEFAULT_ACCOUNT, DEFAULT_REGION
from storage.limits import Limits, by_name

from cluster.config import ConfigError as ClusterConfigError
from cluster.config import Durability, NodeConfig

from elasticmq_py.auth.credentials import Auth, AuthConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9324  # ElasticMQ's


GC_MODES = ("managed", "default")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class DeadLetterQueue:
    name: str
    max_receive_count: int


@dataclass(frozen=True, slots=True)
class Tls:
    """[tls]: the certificate chain and key the SQS port serves HTTPS with (elasticmq_py/tls.py)."""
    cert_file: str
    key_file: str


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    dead_letter_queue: DeadLetterQueue | None = None
    region: str | None = None
    account_id: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    account_id: str = DEFAULT_ACCOUNT
    region: str = DEFAULT_REGION
    limits: str = "strict"
    node_name: str = "local"
    public_host: str | None = None
    queues: tuple[QueueSpec, ...] = ()
    cluster: NodeConfig | None = None
    # Sources allowed to call the mutating admin routes (POST/DELETE /cluster/...): addresses or
    # networks. They also need the cluster secret in the X-Cluster-Secret header.
    admin_from: tuple[str, ...] = ("127.0.0.1/32", "::1/128")
    # [admin]: the console's (and admin routes') secret, where it is not the cluster secret, and
    # a single node's history log, which the console's audit lines go to.
    admin_secret: str | None = None
    history: str | None = None
    gc: str = "managed"
    # [storage]: a data-dir makes queues and messages survive a restart (the journal); without
    # one everything is in memory, as for the embedded Server by default.
    durability: Durability | None = None
    tls: Tls | None = None
    auth: Auth = Auth()

    @property
    def scheme(self) -> str:
        return "http" if self.tls is None else "https"

    def __post_init__(self) -> None:
        by_name(self.limits)  # raises on an unknown profile
        if self.gc not in GC_MODES:
            raise ConfigError(f"gc: {self.gc!r} is not one of {', '.join(GC_MODES)}")
        for net in self.admin_from:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError:
                raise ConfigError(f"admin-from: {net!r} is not an address or network") from None

    @property
    def limits_profile(self) -> Limits:
        return by_name(self.limits)

    def max_body_bytes(self) -> int:
        # Sizes are checked by storage on decoded values; this only bounds what we buffer. An
        # encoded request can be 3x its payload (percent-encoding in Query; \uXXXX escapes of
        # astral characters in the JSON that botocore sends with ensure_ascii), plus overhead.
        return 3 * self.limits_profile.max_batch_bytes + 256 * 1024

    def with_overrides(self, **kw) -> "Config":
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    @classmethod
    def from_toml(cls, path: str | Path) -> "Config":
        try:
            doc = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"{path}: {e}") from None
        return cls.from_dict(doc, source=str(path))

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], source: str = "config") -> "Config":
        top = _Keys(doc, source)
        top.seen.update({"cluster", "storage"})  # parsed below, by cluster/config.py
        tls_doc = top.table("tls")
        admin_doc = top.table("admin")
        auth_doc = top.table("auth")
        queues = []
        for name, q in (top.table("queues") or {}).items():
            queues.append(_queue_spec(name, q, f"{source}: queues.{name}"))
        cfg = cls(
            host=top.str("host", DEFAULT_HOST),
            port=top.int("port", DEFAULT_PORT),
            account_id=top.str("account-id", DEFAULT_ACCOUNT),
            region=top.str("region", DEFAULT_REGION),
            limits=top.str("limits", "strict"),
            node_name=top.str("node-name", "local"),
            public_host=top.str("public-host", None),
            gc=top.str("gc", "managed"),
            queues=tuple(_creation_order(queues)),
        )
        top.done()
        base_dir = Path(source).parent if source != "config" else None
        if tls_doc is not None:
            cfg = replace(cfg, tls=_tls_section(tls_doc, f"{source}: tls", base_dir))
        if auth_doc is not None:
            try:
                cfg = replace(cfg, auth=Auth.from_dict(auth_doc, f"{source}: auth", base_dir))
            except AuthConfigError as e:
                raise ConfigError(str(e)) from None
        storage_doc = doc.get("storage")
        if storage_doc is not None:
            try:
                cfg = replace(cfg, durability=Durability.from_dict(storage_doc, base_dir))
            except ClusterConfigError as e:
                raise ConfigError(f"{source}: {e}") from None
        cluster_doc = doc.get("cluster")
        if cluster_doc is not None:
            node, admin_from = _cluster_section(cluster_doc, cfg.node_name if "node-name" in doc else None,
                                                f"{source}: cluster", base_dir)
            try:
                node = replace(node, durability=cfg.durability)
            except ClusterConfigError as e:
                raise ConfigError(f"{source}: cluster: {e}") from None
            cfg = replace(cfg, cluster=node, node_name=node.self_name,
                          admin_from=admin_from if admin_from is not None else cfg.admin_from)
        if admin_doc is not None:
            cfg = _admin_section(cfg, admin_doc, "admin-from" in (cluster_doc or {}), f"{source}: admin", base_dir)
        return cfg


class _Keys:
    def __init__(self, doc: Mapping[str, Any], where: str):
        if not isinstance(doc, Mapping):
            raise ConfigError(f"{where}: expected a table")
        self.doc, self.where, self.seen = doc, where, set()

    def _get(self, key, types, default):
        self.seen.add(key)
        v = self.doc.get(key, default)
        if v is not default and not isinstance(v, types):
            raise ConfigError(f"{self.where}: {key} has the wrong type ({type(v).__name__})")
        return v

    def str(self, key, default):
        return self._get(key, str, default)

    def int(self, key, default):
        v = self._get(key, int, default)
        if isinstance(v, bool):
            raise ConfigError(f"{self.where}: {key} must be an integer")
        return v

    def table(self, key):
        return self._get(key, dict, None)

    def done(self) -> None:
        unknown = sorted(set(self.doc) - self.seen)
        if unknown:
            raise ConfigError(f"{self.where}: unknown key(s) {', '.join(unknown)}")


_CLUSTER_KEYS = {"name", "self", "secret", "secret-file", "nodes", "links", "timing", "replication",
                 "history", "raft-bind", "admin-from", "state-dir", "encrypt-links", "groups"}


def _cluster_section(doc: Any, node_name: str | None, where: str,
                     base_dir: Path | None) -> tuple[NodeConfig, tuple[str, ...] | None]:
    """[cluster] -> cluster/config.py's NodeConfig (its parser and checks, under our key names)."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: expected a table")
    unknown = sorted(set(doc) - _CLUSTER_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_CLUSTER_KEYS))}")
    self_name = doc.get("self", node_name)
    if not self_name:
        raise ConfigError(f"{where}: 'self' (this node's name) is required")
    if node_name is not None and doc.get("self") not in (None, node_name):
        raise ConfigError(f"{where}: self = {doc['self']!r} contradicts node-name = {node_name!r}")
    translated: dict[str, Any] = {k: doc[k] for k in ("secret", "secret-file", "nodes", "links", "timing", "replication",
                                                      "encrypt-links", "groups") if k in doc}
    translated["self"] = self_name
    if "name" in doc:
        translated["cluster"] = doc["name"]
    local = {k: doc[k] for k in ("history", "raft-bind", "state-dir") if k in doc}
    for k in ("history", "state-dir"):
        if k in local and base_dir is not None and not Path(local[k]).is_absolute():
            local[k] = str(base_dir / local[k])
    if local:
        translated["node"] = local
    try:
        node = NodeConfig.from_dict(translated, base_dir=base_dir)
    except (ClusterConfigError, OSError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None
    admin_from = doc.get("admin-from")
    if admin_from is not None:
        if isinstance(admin_from, str):
            admin_from = [admin_from]
        if not isinstance(admin_from, list) or not all(isinstance(a, str) for a in admin_from):
            raise ConfigError(f"{where}: admin-from must be a list of addresses or networks")
        admin_from = tuple(admin_from)
    return node, admin_from


def _admin_section(cfg: Config, doc: Mapping[str, Any], cluster_admin_from: bool, where: str,
                   base_dir: Path | None) -> Config:
    k = _Keys(doc, where)
    secret, secret_file = k.str("secret", None), k.str("secret-file", None)
    allow = k._get("from", (str, list), None)
    history = k.str("history", None)
    k.done()
    if secret is not None and secret_file is not None:
        raise ConfigError(f"{where}: secret or secret-file, not both")
    if secret_file is not None:
        path = Path(secret_file) if base_dir is None or Path(secret_file).is_absolute() else base_dir / secret_file
        try:
            secret = path.read_text().strip()
        except OSError as e:
            raise ConfigError(f"{where}: secret-file: {e}") from None
    if secret is not None and len(secret) < 16:
        raise ConfigError(f"{where}: the secret must be at least 16 characters (it guards every action)")
    if allow is not None:
        if cluster_admin_from:
            raise ConfigError(f"{where}: from and [cluster] admin-from both say who may act: keep one")
        allow = (allow,) if isinstance(allow, str) else tuple(allow)
        if not all(isinstance(a, str) for a in allow):
            raise ConfigError(f"{where}: from must be a list of addresses or networks")
    if history is not None:
        if cfg.cluster is not None:
            raise ConfigError(f"{where}: history: a cluster member audits to its [cluster] history")
        if base_dir is not None and not Path(history).is_absolute():
            history = str(base_dir / history)
    return replace(cfg, admin_secret=secret, history=history,
                   admin_from=allow if allow is not None else cfg.admin_from)


def _tls_section(doc: Mapping[str, Any], where: str, base_dir: Path | None) -> Tls:
    k = _Keys(doc, where)
    files = [k.str("cert-file", None), k.str("key-file", None)]
    k.done()
    if None in files:
        raise ConfigError(f"{where}: needs both cert-file and key-file")
    if base_dir is not None:
        files = [str(base_dir / f) if not Path(f).is_absolute() else f for f in files]
    return Tls(*files)


def _attr_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, str)):
        return str(v)
    if isinstance(v, dict):
        return json.dumps(v, separators=(",", ":"))  # RedrivePolicy and friends, written inline
    raise ConfigError(f"attribute value {v!r} must be a string, integer, boolean or table")


def _queue_spec(name: str, doc: Any, where: str) -> QueueSpec:
    k = _Keys(doc, where)
    attrs = {a: _attr_value(v) for a, v in (k.table("attributes") or {}).items()}
    tags = {t: str(v) for t, v in (k.table("tags") or {}).items()}
    dlq_doc = k.table("dead-letter-queue")
    dlq = None
    if dlq_doc is not None:
        d = _Keys(dlq_doc, f"{where}.dead-letter-queue")
        dlq = DeadLetterQueue(d.str("name", None), d.int("max-receive-count", None))
        d.done()
        if not dlq.name or not dlq.max_receive_count:
            raise ConfigError(f"{where}.dead-letter-queue needs name and max-receive-count")
    spec = QueueSpec(name, attrs, tags, dlq, k.str("region", None), k.str("account-id", None))
    k.done()
    return spec


def _creation_order(specs: list[QueueSpec]) -> list[QueueSpec]:
    """Dead-letter queues before the queues that name them (RedrivePolicy needs the target)."""
    by_name = {s.name: s for s in specs}
    out: list[QueueSpec] = []
    state: dict[str, int] = {}

    def visit(s: QueueSpec) -> None:
        if state.get(s.name) == 2:
            return
        if state.get(s.name) == 1:
            raise ConfigError(f"dead-letter queues form a cycle through {s.name}")
        state[s.name] = 1
        if s.dead_letter_queue and s.dead_letter_queue.name in by_name:
            visit(by_name[s.dead_letter_queue.name])
        state[s.name] = 2
        out.append(s)

    for s in specs:
        visit(s)
    return out


# -- writing a server's configuration ----------------------------------------------------------

def server_toml(node: NodeConfig, *, host: str, port: int, limits: str | None = None,
                secret_file: str | None = None, auth: Auth | None = None) -> str:
    """The `serve --config` file of cluster member ``node``: the inverse of reading [cluster].
    `local-cluster` and the process clusters of elasticmq_py/testing write their nodes' files
    with it. ``secret_file``: name that file instead of writing the secret itself; ``auth``:
    the [auth] section, the same on every member."""
    d = node.to_dict()
    cluster: dict[str, Any] = {"name": d["cluster"], "self": d["self"]}
    if secret_file is not None:
        cluster["secret-file"] = secret_file
    else:
        cluster["secret"] = d["secret"]
    cluster.update({k: v for k, v in d.get("node", {}).items() if k in ("history", "state-dir", "raft-bind")})
    cluster["nodes"] = d["nodes"]
    if d["links"]:
        cluster["links"] = d["links"]
    cluster["timing"] = d["timing"]
    cluster["replication"] = d["replication"]
    cluster["encrypt-links"] = d["encrypt-links"]
    if "groups" in d:
        cluster["groups"] = d["groups"]
    top: dict[str, Any] = {"host": host, "port": port}
    if limits is not None:
        top["limits"] = limits
    if "storage" in d:
        top["storage"] = d["storage"]
    if auth is not None and auth.enabled:
        top["auth"] = {"mode": auth.mode, "credentials": [
            {"access-key-id": c.access_key_id, "secret-access-key": c.secret_access_key, "account-id": c.account_id,
             **({"session-token": c.session_token} if c.session_token is not None else {})}
            for c in auth.credentials]}
    top["cluster"] = cluster
    return "\n".join(_toml_lines(top, [])) + "\n"


def _toml_lines(table: Mapping[str, Any], path: list[str]) -> list[str]:
    # Python reads TOML (tomllib) but has no writer; this covers the shapes above (scalars,
    # tables, arrays of tables) in a dozen lines instead of another dependency.
    def key(k: str) -> str:
        return k if k.replace("-", "").replace("_", "").isalnum() else json.dumps(k)

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        return json.dumps(str(v))   # a JSON string literal is a valid TOML basic string

    out = [f"{key(k)} = {value(v)}" for k, v in table.items() if not isinstance(v, (dict, list))]
    for k, v in table.items():
        if isinstance(v, dict):
            header = [] if all(isinstance(x, dict) for x in v.values()) else [f"[{'.'.join(key(p) for p in path + [k])}]"]
            out += ([""] + header if header else []) + _toml_lines(v, path + [k])
        elif isinstance(v, list):
            for item in v:
                out += ["", f"[[{'.'.join(key(p) for p in path + [k])}]]"] + _toml_lines(item, path + [k])
    return out
