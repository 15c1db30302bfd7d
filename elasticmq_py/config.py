"""Server configuration as one typed value. The TOML file and CLI flags both produce it.

The file (all keys optional)::

    host = "127.0.0.1"
    port = 9324
    account-id = "000000000000"
    region = "us-east-1"
    limits = "strict"            # or "relaxed"
    node-name = "local"
    public-host = "sqs.local:9324"   # host:port in queue URLs for requests without a Host header

    # ElasticMQ's queues {} block: created at start-up, dead-letter queues first.
    [queues.orders]
    attributes = { VisibilityTimeout = 30, DelaySeconds = 0 }
    tags = { team = "payments" }
    dead-letter-queue = { name = "orders-dlq", max-receive-count = 3 }

    [queues."orders-dlq"]

    [queues."jobs.fifo"]
    region = "eu-west-1"         # defaults to the server's region and account
    attributes = { ContentBasedDeduplication = true }

Keys are checked: a misspelt key is an error, not a silently ignored setting.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from storage.commands import DEFAULT_ACCOUNT, DEFAULT_REGION
from storage.limits import Limits, by_name

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9324  # ElasticMQ's


class ConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class DeadLetterQueue:
    name: str
    max_receive_count: int


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

    def __post_init__(self) -> None:
        by_name(self.limits)  # raises on an unknown profile

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
            queues=tuple(_creation_order(queues)),
        )
        top.done()
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
