"""Typed records of a cluster history: what nodes, clients and the nemesis write (JSON lines).

The line format is documented in cluster/HISTORY.md ("Client operations, digests and the nemesis").
Every record has the three common fields `ts`, `node`, `event`; `from_json` dispatches on
`event`. Unknown event kinds load as `NodeEvent`, so a newer writer never breaks an older reader.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

# Operation kinds and outcomes a client records.
SEND, RECEIVE, DELETE, CHANGE_VISIBILITY = "send", "receive", "delete", "change_visibility"
CREATE_QUEUE, LIST_QUEUES = "create_queue", "list_queues"
OP_KINDS = (SEND, RECEIVE, DELETE, CHANGE_VISIBILITY, CREATE_QUEUE, LIST_QUEUES)
MESSAGE_OPS = frozenset((SEND, RECEIVE, DELETE, CHANGE_VISIBILITY))   # the per-queue rules judge these
OK, FAILED, UNKNOWN = "ok", "failed", "unknown"
OUTCOMES = (OK, FAILED, UNKNOWN)

CLIENT_OP = "client_op"
DIGEST = "digest"
NEMESIS = "nemesis"


def _opt(d: dict[str, Any], k: str, v: Any) -> None:
    if v is not None:
        d[k] = v


def _ts(v: float) -> float:
    return round(float(v), 6)


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    """One message in the output of a receive."""
    message_id: str | None
    token: str | None = None          # the client-chosen token found in the body / attribute
    receipt: str | None = None
    group: str | None = None          # MessageGroupId, when the client asked for it
    seq: str | None = None            # SequenceNumber (FIFO), when the client asked for it
    receive_count: int | None = None  # ApproximateReceiveCount, when asked for
    visibility_timeout: float | None = None  # overrides the op's, if ever per message

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        _opt(d, "message_id", self.message_id)
        _opt(d, "token", self.token)
        _opt(d, "receipt", self.receipt)
        _opt(d, "group", self.group)
        _opt(d, "seq", self.seq)
        _opt(d, "receive_count", self.receive_count)
        _opt(d, "visibility_timeout", self.visibility_timeout)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ReceivedMessage":
        rc = d.get("receive_count")
        vt = d.get("visibility_timeout")
        seq = d.get("seq")
        return cls(d.get("message_id"), d.get("token"), d.get("receipt"), d.get("group"),
                   None if seq is None else str(seq), None if rc is None else int(rc),
                   None if vt is None else float(vt))


@dataclass(frozen=True, slots=True)
class ClientOp:
    """One attempt of one client operation. `ts` is the invocation time, `completed` the time
    the client got an answer or gave up (None: never completed, e.g. the client was killed; the
    outcome is then `unknown`). `node` is the node the client contacted.

    Inputs: send -> token (and body, group, dedup); receive -> visibility_timeout (the
    *effective* one: requested, or the queue's default), max_messages; delete and
    change_visibility -> receipt (and message_id / token of the message the client believes
    the receipt is for); change_visibility -> visibility_timeout (the new value);
    create_queue -> queue (the name); list_queues -> queue (the prefix listed).
    Outputs (outcome ok): send -> message_id, seq; receive -> messages; list_queues -> listed
    (the names of the queues it returned).
    """
    ts: float
    node: str
    client: str
    op_id: str
    op: str
    queue: str
    outcome: str
    completed: float | None = None
    error: str | None = None
    token: str | None = None
    body: str | None = None
    group: str | None = None
    dedup: str | None = None
    receipt: str | None = None
    message_id: str | None = None
    seq: str | None = None
    visibility_timeout: float | None = None
    max_messages: int | None = None
    messages: tuple[ReceivedMessage, ...] = ()
    phase: str | None = None   # free label, e.g. "drain" for the final drain after heal
    listed: tuple[str, ...] = ()
    event: str = field(default=CLIENT_OP, init=False)

    def __post_init__(self) -> None:
        if self.op not in OP_KINDS:
            raise ValueError(f"unknown op kind {self.op!r} (expected one of {OP_KINDS})")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r} (expected one of {OUTCOMES})")

    @property
    def end(self) -> float:
        """The latest moment the operation can have taken effect."""
        return float("inf") if self.completed is None else self.completed

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": _ts(self.ts), "node": self.node, "event": CLIENT_OP,
                             "client": self.client, "op_id": self.op_id, "op": self.op,
                             "queue": self.queue, "outcome": self.outcome}
        _opt(d, "completed", None if self.completed is None else _ts(self.completed))
        for k in ("error", "token", "body", "group", "dedup", "receipt", "message_id", "seq",
                  "visibility_timeout", "max_messages", "phase"):
            _opt(d, k, getattr(self, k))
        if self.messages:
            d["messages"] = [m.to_json() for m in self.messages]
        if self.listed:
            d["listed"] = list(self.listed)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ClientOp":
        vt = d.get("visibility_timeout")
        mm = d.get("max_messages")
        seq = d.get("seq")
        completed = d.get("completed")
        return cls(float(d["ts"]), d.get("node", ""), d["client"], str(d["op_id"]), d["op"],
                   d["queue"], d["outcome"], None if completed is None else float(completed),
                   d.get("error"), d.get("token"), d.get("body"), d.get("group"), d.get("dedup"),
                   d.get("receipt"), d.get("message_id"), None if seq is None else str(seq),
                   None if vt is None else float(vt), None if mm is None else int(mm),
                   tuple(ReceivedMessage.from_json(m) for m in d.get("messages") or ()),
                   d.get("phase"), tuple(str(q) for q in d.get("listed") or ()))


@dataclass(frozen=True, slots=True)
class DigestRecord:
    """A node's state digest, taken after the faults stopped and the cluster healed. `master`
    is the master this node knew of when it took the digest (optional)."""
    ts: float
    node: str
    digest: str
    master: str | None = None
    view_id: int | None = None
    event: str = field(default=DIGEST, init=False)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": _ts(self.ts), "node": self.node, "event": DIGEST, "digest": self.digest}
        _opt(d, "master", self.master)
        _opt(d, "view_id", self.view_id)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "DigestRecord":
        vid = d.get("view_id")
        return cls(float(d["ts"]), d["node"], str(d["digest"]), d.get("master"),
                   None if vid is None else int(vid))


@dataclass(frozen=True, slots=True)
class NemesisEvent:
    """A fault the test harness injected. `node` is the target (a node name, or "" for a
    network-wide action); `action` one of kill, pause, resume, restart, partition, heal, ...
    Only `kill` matters to the checker: a killed node writes nothing, so its active interval
    ends at the kill."""
    ts: float
    node: str
    action: str
    detail: str | None = None
    event: str = field(default=NEMESIS, init=False)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": _ts(self.ts), "node": self.node, "event": NEMESIS, "action": self.action}
        _opt(d, "detail", self.detail)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "NemesisEvent":
        return cls(float(d["ts"]), d.get("node", ""), d["action"], d.get("detail"))


@dataclass(frozen=True, slots=True, eq=True)
class NodeEvent:
    """Any node event of cluster/HISTORY.md (started, view, activated, ...): the common fields
    plus the rest of the line, as read."""
    ts: float
    node: str
    event: str
    fields: dict[str, Any] = field(default_factory=dict, hash=False)

    def get(self, k: str, default: Any = None) -> Any:
        return self.fields.get(k, default)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ts": _ts(self.ts), "node": self.node, "event": self.event}
        d.update(self.fields)
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "NodeEvent":
        rest = {k: v for k, v in d.items() if k not in ("ts", "node", "event")}
        return cls(float(d["ts"]), d.get("node", ""), d["event"], rest)


Record = Union[ClientOp, DigestRecord, NemesisEvent, NodeEvent]


def record_from_json(d: dict[str, Any]) -> Record:
    kind = d.get("event")
    if kind == CLIENT_OP:
        return ClientOp.from_json(d)
    if kind == DIGEST:
        return DigestRecord.from_json(d)
    if kind == NEMESIS:
        return NemesisEvent.from_json(d)
    return NodeEvent.from_json(d)


def to_line(r: Record) -> str:
    return json.dumps(r.to_json(), separators=(",", ":"), default=str)


@dataclass(frozen=True, slots=True)
class History:
    """Everything recorded in one run, each list ordered by `ts` (stable)."""
    ops: tuple[ClientOp, ...] = ()
    node_events: tuple[NodeEvent, ...] = ()
    digests: tuple[DigestRecord, ...] = ()
    nemesis: tuple[NemesisEvent, ...] = ()

    @classmethod
    def of(cls, records: Iterable[Record]) -> "History":
        by_id: dict[tuple[str, str], ClientOp] = {}
        evs, dig, nem = [], [], []
        for r in records:
            if isinstance(r, ClientOp):
                # A client may write an attempt twice: `unknown` without `completed` when it
                # starts, the final line when it ends. Keep the final one.
                k = (r.client, r.op_id)
                old = by_id.get(k)
                if old is None or (r.completed is not None or old.completed is None):
                    by_id[k] = r
            elif isinstance(r, DigestRecord):
                dig.append(r)
            elif isinstance(r, NemesisEvent):
                nem.append(r)
            else:
                evs.append(r)
        key = lambda r: r.ts  # noqa: E731
        return cls(tuple(sorted(by_id.values(), key=key)), tuple(sorted(evs, key=key)),
                   tuple(sorted(dig, key=key)), tuple(sorted(nem, key=key)))

    def records(self) -> Iterator[Record]:
        yield from self.node_events
        yield from self.nemesis
        yield from self.ops
        yield from self.digests

    @property
    def end(self) -> float:
        """The last moment anything was recorded (open intervals are closed here)."""
        t = 0.0
        for r in self.records():
            t = max(t, r.ts)
            if isinstance(r, ClientOp) and r.completed is not None:
                t = max(t, r.completed)
        return t


def parse_lines(lines: Iterable[str]) -> Iterator[Record]:
    """Records from JSON lines; blank, torn (a killed writer's last line) or malformed lines are
    skipped."""
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            d = json.loads(line)
            if not isinstance(d, dict) or "ts" not in d or "event" not in d:
                continue
            yield record_from_json(d)
        except (ValueError, KeyError, TypeError):
            continue


def read_records(path: str | os.PathLike[str]) -> list[Record]:
    with open(path, encoding="utf-8") as f:
        return list(parse_lines(f))


HISTORY_SUFFIXES = (".jsonl", ".ndjson")


def load_dir(path: str | os.PathLike[str]) -> History:
    """One history from every `*.jsonl` / `*.ndjson` file under `path` (recursively): node
    histories, client histories and the nemesis log, in any number of files."""
    p = Path(path)
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(HISTORY_SUFFIXES))
    records: list[Record] = []
    for f in files:
        records.extend(read_records(f))
    return History.of(records)


def write_records(path: str | os.PathLike[str], records: Iterable[Record]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(to_line(r) + "\n")
