"""A node's status as typed values: what GET /cluster shows, `elasticmq-py status` prints and
/metrics exports.

``node_status`` reads it off a running node on its event loop; ``to_dict`` is the JSON form, and
``NodeStatus.from_dict`` reads that form back (the CLI and the launchers read other nodes' status
over HTTP), so every reader uses the same names instead of parsing keys of its own.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cluster.replicated import ReplicatedStorage


@dataclass(frozen=True)
class RaftLink:
    """Both directions of the Raft link to one peer (cluster/transport.py)."""

    dial: str
    out: str                      # up | connecting | down: the connection we dial
    out_for_s: float
    incoming: bool                # the connection it dialled to us is up
    last_rx_s_ago: float | None
    connects: int
    last_error: str | None
    last_ack_s_ago: float | None = None   # on the leader: its last lease ack


@dataclass(frozen=True)
class RaftInfo:
    commit_index: int | None = None
    last_applied: int | None = None
    auth_failures: int = 0
    refused_connections: int = 0
    votes_dropped: int = 0
    pre_votes_granted: int = 0
    pre_votes_refused: int = 0
    not_standing: str | None = None


@dataclass(frozen=True)
class ViewInfo:
    view_id: int
    members: tuple[str, ...]
    master: str
    epoch: int


@dataclass(frozen=True)
class LogInfo:
    first_seq: int | None = None
    last_seq: int | None = None
    last_epoch: int | None = None
    entries: int | None = None
    bytes: int | None = None


@dataclass(frozen=True)
class ReplicaInfo:
    connected: bool | None = None
    acked_seq: int | None = None
    lag_batches: int | None = None
    lag_ms: int | None = None
    needs_transfer: bool | None = None
    caught_up: bool | None = None


@dataclass(frozen=True)
class TransferInfo:
    direction: str
    peer: str
    at_seq: int | None = None
    records: int | None = None
    bytes: int | None = None
    duration_s: float | None = None
    at: float | None = None       # wall-clock time it finished


@dataclass(frozen=True)
class ForwardingInfo:
    forwarded: int = 0
    served_for_others: int = 0
    failed: int = 0
    in_flight: int = 0


@dataclass(frozen=True)
class StreamPeer:
    dial: str | None
    last_frame_age_s: float | None
    frames_in: int
    frames_out: int
    bytes_in: int
    bytes_out: int
    send_dropped: int


@dataclass(frozen=True)
class StreamInfo:
    bound: str | None
    refused: dict[str, int]
    peers: dict[str, StreamPeer]


@dataclass(frozen=True)
class ReplicationStatus:
    enabled: bool = False
    node: str | None = None
    role: str | None = None
    master: str | None = None
    epoch: int | None = None
    members: tuple[str, ...] = ()
    serving: bool | None = None
    amnesiac: bool | None = None
    log: LogInfo | None = None
    applied_seq: int | None = None
    sync: str | None = None
    transfers_out: tuple[str, ...] = ()
    transfer_in: str | None = None
    last_transfer: TransferInfo | None = None
    replicas: dict[str, ReplicaInfo] = field(default_factory=dict)
    replication_queue: int | None = None
    delay_ms: int | None = None
    throttling: bool | None = None
    pending_ops: int | None = None
    rejected_frames: int | None = None
    peers: dict[str, bool] = field(default_factory=dict)     # stream peer -> connected
    transport: StreamInfo | None = None
    halted: bool | None = None
    policy: str | None = None
    forward: bool | None = None
    forwarding: ForwardingInfo | None = None
    digest: str | None = None


@dataclass(frozen=True)
class SnapshotInfo:
    at_seq: int
    end_seq: int
    bytes: int
    duration_s: float
    finished_at: float            # wall-clock time


@dataclass(frozen=True)
class RecoveryInfo:
    seconds: float
    messages: int
    entries: int                  # journal entries replayed after the snapshot
    snapshot_seq: int | None
    truncated: str | None         # a torn tail dropped at start
    entries_dropped: bool = False  # `journal truncate` dropped fsynced entries: restarted amnesiac


@dataclass(frozen=True)
class JournalInfo:
    """A node's data-dir (cluster/journaling.py): None in memory."""

    data_dir: str
    fsync: str
    bytes: int
    segments: int
    last_seq: int
    durable_seq: int
    fsyncs: int
    fsyncs_per_s: float
    fsync_ms_last: float | None
    fsync_ms_avg: float | None
    entries_per_fsync: float | None
    queue_depth: int
    last_snapshot: SnapshotInfo | None = None
    recovery: RecoveryInfo | None = None
    error: str | None = None      # the journal failed: the node stores nothing until restarted
    groups: tuple[JournalGroupInfo, ...] = ()   # each group's position, in a shared journal


@dataclass(frozen=True)
class JournalGroupInfo:
    group: int
    last_seq: int
    durable_seq: int
    snapshot_seq: int | None


@dataclass(frozen=True)
class GroupInfo:
    """One replication group as this member sees it ([cluster] groups >= 2)."""

    id: int
    master: str | None            # the group's master, as the committed view names it
    epoch: int                    # its epoch (strictly rising per group)
    queues: int                   # queues held in this member's copy of the group
    lag: int | None               # on the group's active master: its replication delay (ms); else None
    serving: bool                 # this member is the group's active master


@dataclass(frozen=True)
class NodeStatus:
    node: str
    role: str | None = None
    active: bool | None = None
    master: str | None = None
    members: tuple[str, ...] = ()
    view: ViewInfo | None = None
    cluster: str | None = None
    term: int | None = None
    leader: str | None = None
    epoch: int | None = None
    serving: bool | None = None
    inactive_reason: str | None = None
    quorum: bool | None = None
    lease_remaining_s: float | None = None
    configured: tuple[str, ...] | None = None
    reachable: tuple[str, ...] | None = None
    peers: dict[str, RaftLink] = field(default_factory=dict)
    raft: RaftInfo | None = None
    replication: ReplicationStatus = field(default_factory=ReplicationStatus)
    journal: JournalInfo | None = None
    groups: tuple[GroupInfo, ...] = ()    # replication groups; none listed with one group
    # the committed views have another number of groups than this node's [cluster] groups
    groups_mismatch: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = _plain(self)
        if not self.groups:
            del d["groups"]     # one group: the form it always had
        if self.groups_mismatch is None:
            del d["groups_mismatch"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NodeStatus":
        return _typed(cls, d)


# -- the JSON form ------------------------------------------------------------------------------

# Field names that are Python keywords or would read badly as attributes, and their JSON keys.
_KEYS = {"incoming": "in"}


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v):
        return {_KEYS.get(f.name, f.name): _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (tuple, list)):
        return [_plain(x) for x in v]
    return v


def _typed(tp: Any, v: Any) -> Any:
    """``v`` (parsed JSON) as ``tp``; unknown keys are ignored and missing ones take defaults,
    so a reader and a node of neighbouring versions still understand each other."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        if v is None:
            return None
        for arg in typing.get_args(tp):
            if arg is not type(None):
                return _typed(arg, v)
    if dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise ValueError(f"{tp.__name__}: expected an object, got {type(v).__name__}")
        hints = typing.get_type_hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            key = _KEYS.get(f.name, f.name)
            if key in v and not (v[key] is None and not _optional(hints[f.name])):
                kwargs[f.name] = _typed(hints[f.name], v[key])
        return tp(**kwargs)
    if origin is dict:
        _, vt = typing.get_args(tp)
        return {k: _typed(vt, x) for k, x in (v or {}).items()}
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis and dataclasses.is_dataclass(args[0]):
            return tuple(_typed(args[0], x) for x in v or ())
        return tuple(v or ())
    return v


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)


# -- reading it off a running node --------------------------------------------------------------

def node_status(node: "ReplicatedStorage", digest: bool = False) -> NodeStatus:
    core = node.core
    now = node._now()
    now_ms = int(now * 1000)
    m = core.membership
    active, reason = m.evaluate(now)
    expiry = m.lease_expiry()
    leading = m.role == "leader"
    acks = {p: round(now - r, 3) for p, r in m.lease.received.items()} if leading else {}
    stats = node.last_raft_stats
    links = {name: RaftLink(str(info["dial"]), info["out"], info["out_for_s"], bool(info["in"]),
                            info["last_rx_s_ago"], info["connects"], info["last_error"], acks.get(name))
             for name, info in (stats.links if stats is not None else {}).items()}
    v = m.view
    view = ViewInfo(v.view_id, v.members, v.master, v.epoch) if v is not None else None
    return NodeStatus(
        node=node.name, cluster=node.config.cluster.name, role=m.role, term=m.term, leader=m.leader,
        view=view, master=v.master if v else None, epoch=v.epoch if v else None,
        active=active, serving=core.serving(now), inactive_reason=None if active else reason,
        quorum=m.has_quorum(now) if leading else (
            m.leader is not None and stats is not None and stats.leader_contact_s_ago is not None
            and stats.leader_contact_s_ago < m.timing.election_min),
        lease_remaining_s=round(expiry - now, 3) if expiry is not None and expiry != float("inf") else None,
        configured=tuple(sorted(m.configured)),
        reachable=tuple(sorted(m.lease.reachable(m.configured, now, m.timing.suspect))) if leading else None,
        members=v.members if v else (),
        peers=links,
        raft=RaftInfo(stats.commit_index, stats.last_applied, stats.auth_failures, stats.refused_connections,
                      stats.votes_dropped, stats.pre_votes_granted, stats.pre_votes_refused, stats.not_standing)
        if stats is not None else RaftInfo(),
        replication=_replication(node, now, now_ms, digest),
        journal=journal_info(node.journal_stats()),
        groups=_groups(node, now, now_ms) if core.multi else (), groups_mismatch=m.groups_mismatch)


def _groups(node: "ReplicatedStorage", now: float, now_ms: int) -> tuple[GroupInfo, ...]:
    out = []
    for g in node.core.groups:
        m = g.mastery
        serving = g.serving_now(now)
        lag = g.replication.status(now_ms)["delay_ms"] if serving else None
        out.append(GroupInfo(g.index, m.master, m.epoch, len(g.storage.queue_stats()), lag, serving))
    return tuple(out)


def journal_info(stats: dict[str, Any] | None) -> JournalInfo | None:
    return _typed(JournalInfo, stats) if stats is not None else None


def _replication(node: "ReplicatedStorage", now: float, now_ms: int, digest: bool) -> ReplicationStatus:
    core = node.core
    group = core.groups[0]
    rc = group.replication
    d = rc.status(now_ms)
    connected = {p: core.liveness.connected(p) for p in core.liveness.peers}
    replicas = {name: ReplicaInfo(connected.get(name, False), r["acked_seq"], r["lag_batches"], r["lag_ms"],
                                  r["needs_transfer"], r["caught_up"]) for name, r in d["replicas"].items()}
    if rc.role == "master":
        halted = any(not connected.get(n, False) for n in replicas)
    else:
        master, _ = rc.following()
        halted = master is None or not connected.get(master, False)
    lt = d["last_transfer"]
    last_transfer = None
    if lt is not None:
        at = None if group.last_transfer_at is None else node._wall() - (now - group.last_transfer_at)
        last_transfer = TransferInfo(lt["direction"], lt["peer"], lt["at_seq"], lt["records"], lt["bytes"],
                                     lt["duration_s"], at)
    tr = node.stream.status()
    ages = core.liveness.status(now)
    transport = StreamInfo(tr["bound"], tr["refused"], {
        name: StreamPeer(p["dial"], ages.get(name), p["frames_in"], p["frames_out"], p["bytes_in"],
                         p["bytes_out"], p["send_dropped"]) for name, p in tr["peers"].items()})
    f = node.forwarding
    return ReplicationStatus(
        enabled=True, node=node.name, role=d["role"], master=d["master"], epoch=d["epoch"],
        members=tuple(d["members"]), serving=d["serving"], amnesiac=d["amnesiac"], log=LogInfo(**d["log"]),
        applied_seq=d["applied_seq"], sync=d["sync"], transfers_out=tuple(d["transfers_out"]),
        transfer_in=d["transfer_in"], last_transfer=last_transfer, replicas=replicas,
        replication_queue=d["replication_queue"], delay_ms=d["delay_ms"], throttling=group.throttling,
        pending_ops=group.pending_ops(), rejected_frames=group.rejected, peers=connected, transport=transport,
        halted=halted, policy=core.settings.policy.value, forward=core.settings.forward,
        forwarding=ForwardingInfo(f.forwarded, f.served_for_others, f.failed, core.forwards_in_flight()),
        digest=group.storage.digest() if digest else None)
