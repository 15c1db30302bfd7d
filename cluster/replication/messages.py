"""Frames of the mutation stream, and the actions the protocol cores ask their runtime for."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class AckPolicy(str, Enum):
    """When a client operation counts as done.

    none      answered before any replica has the mutation: an acknowledged operation can be
              lost if the master dies before a replica got it (the HornetQ race).
    one       at least one replica applied it.
    majority  replicas that, with the master, make a majority of the view applied it (default):
              nothing acknowledged is lost while a majority survives.
    all       every replica of the current view applied it.
    """

    NONE = "none"
    ONE = "one"
    MAJORITY = "majority"
    ALL = "all"

    def required(self, members: int, configured: int = 0) -> int:
        """Replica acks needed (the master counts for itself) in a view of ``members``.

        ``majority`` counts against the *configured* members when that is larger: a view may
        hold just a majority of them, and two majorities of the view need not intersect two
        majorities of the cluster (5 configured, a view of 3: a 2-copy "majority" of the view
        could be missed by the next master's sync with 3 others)."""
        replicas = members - 1
        if self is AckPolicy.NONE:
            return 0
        if self is AckPolicy.ONE:
            return min(1, replicas)
        if self is AckPolicy.MAJORITY:
            return max(members, configured) // 2
        return replicas


# --- frames ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Batch:
    """Master -> replica: the log entry at ``seq`` (written in ``written_epoch``), sent by the
    master of ``epoch``. ``mutations`` is a storage.codec ``encode_many`` frame."""

    epoch: int
    seq: int
    written_epoch: int
    mutations: bytes


@dataclass(frozen=True, slots=True)
class Ack:
    """Replica -> master: everything up to ``seq`` is applied (cumulative)."""

    epoch: int
    seq: int


@dataclass(frozen=True, slots=True)
class Resend:
    """Replica -> master: a gap; send again from ``from_seq``."""

    epoch: int
    from_seq: int


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """New master -> member: report your log position. Answering adopts ``epoch``, after which
    the member refuses the deposed master's frames."""

    epoch: int
    # Sent by a serving master positioning a replica: its log's last seq then. A member that
    # restarted empty is caught up (no longer amnesiac) only once it holds that much, which
    # covers everything it may have acknowledged before its restart. -1: a syncing master's
    # request, which sets no such mark.
    serving_seq: int = -1


@dataclass(frozen=True, slots=True)
class SyncStatus:
    """Member -> new master: the last entry of my log."""

    epoch: int
    last_seq: int
    last_epoch: int
    first_seq: int       # the oldest entry still held (last_seq + 1 when none)
    # Restarted with empty memory and not yet brought up to date by a serving master: whatever
    # this member acknowledged before the restart is gone, so its answer must not count towards
    # a sync quorum (sync.py).
    amnesiac: bool = False


@dataclass(frozen=True, slots=True)
class Fetch:
    """New master -> the most advanced member: send me your entries from ``from_seq`` on."""

    epoch: int
    from_seq: int
    limit: int


@dataclass(frozen=True, slots=True)
class FetchMiss:
    """Member -> new master: I no longer hold ``from_seq`` (only a snapshot can help)."""

    epoch: int
    from_seq: int


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """Master -> joiner: chunk ``index`` of transfer ``transfer_id``; ``records`` is an
    ``encode_many`` frame of snapshot records, or (after them) of the log's mutations since the
    read began (transfer.py). The ``last`` chunk's ``(at_seq, at_epoch)`` is the log position the
    restored state is exactly at, and streaming resumes after it; earlier chunks name where the
    read began."""

    epoch: int
    transfer_id: int
    index: int
    at_seq: int
    at_epoch: int
    records: bytes
    last: bool


@dataclass(frozen=True, slots=True)
class SnapshotAck:
    """Joiner -> master: chunks up to ``index`` are in (cumulative); -1 asks for a restart."""

    epoch: int
    transfer_id: int
    index: int


@dataclass(frozen=True, slots=True)
class TransferRequest:
    """Syncing new master -> the most advanced member: send me your snapshot (our logs
    diverge, or it no longer holds the entries we lack)."""

    epoch: int


@dataclass(frozen=True, slots=True)
class Forward:
    """Member -> master: a client request this member received, to be executed by the master.
    ``payload`` is opaque here (the product layer encodes the HTTP request in it)."""

    request_id: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class ForwardReply:
    """Master -> member: the answer to ``Forward`` ``request_id`` (opaque, like the request)."""

    request_id: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class ForwardBatch:
    """Member -> master: the client requests this member forwarded to the master within one turn
    of its loop, ``(request_id, payload)`` each, in the order they were forwarded. One frame for
    all of them, so the MAC, the ZeroMQ send and the master's wake-up are paid once per turn;
    the master serves each item as the ``Forward`` it stands for. Sent only to a master that
    reads it (``ForwardReply`` with ``request_id`` ``BATCHES_READ``)."""

    items: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True, slots=True)
class ForwardReplies:
    """Master -> member: the answers of one turn to ``ForwardBatch`` items of that member,
    ``(request_id, payload)`` each: each item is the ``ForwardReply`` it stands for."""

    items: tuple[tuple[int, bytes], ...]


# A ForwardReply with this request id answers no request (a member numbers its forwards from 1):
# it tells the member that its sender reads ForwardBatch and ForwardReplies. A build that
# predates those frames drops it as an answer to a request it never sent.
BATCHES_READ = 0


@dataclass(frozen=True, slots=True)
class Place:
    """Member -> Raft leader: commit a placement of the queue ``key`` (region, account, name)
    in the directory (cluster/directory.py), which a CreateQueue of a new name waits for. Only
    a cluster of two groups or more sends it; every member learns the group from Raft."""

    key: tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class GroupBeat:
    """Master of a replication group -> member: the group's lease beat (cluster/group_lease.py),
    stamped with the master's own clock in microseconds. The group travels with the frame in
    its bundle item, not in the frame."""

    epoch: int
    stamp_us: int


@dataclass(frozen=True, slots=True)
class GroupBeatAck:
    """Member -> master of a replication group: the beat of ``stamp_us`` reached a member that
    follows this master in ``epoch``; it renews the master's lease from that stamp."""

    epoch: int
    stamp_us: int


@dataclass(frozen=True, slots=True)
class Released:
    """Master of a replication group -> members: I have abdicated ``epoch`` for good, so a
    member that followed me in it may join a newer epoch's sync without waiting out its guard."""

    epoch: int


# --- moves between replication groups (cluster/moves.py) --------------------------------------
#
# Offers and forgets go to the destination group's master; the answers come back to the source
# group's master. ``src_epoch`` and ``dst_epoch`` fence an offer that a deposed master sent, or
# that was sent to one: only the destination's master of ``dst_epoch`` acts on it, and not once
# it heard from a newer master of the source group.

@dataclass(frozen=True, slots=True)
class MoveOffer:
    """Source group's master -> destination group's master: adopt these messages. ``items`` is a
    storage.codec ``encode_many`` frame of ``MoveItem``s (the message with its move id and
    destination ARN); storage's records are not wire dataclasses, its codec carries them."""

    src_group: int
    src_epoch: int
    dst_epoch: int
    items: bytes


@dataclass(frozen=True, slots=True)
class MoveAccepted:
    """Destination -> source: these moves are adopted, and the adoption is committed."""

    move_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MoveRefused:
    """Destination's master of ``dst_epoch`` -> source: it will not adopt this move (``reason``:
    one of storage.outbox's REFUSED_*), decided on committed state."""

    dst_epoch: int
    move_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class MoveForget:
    """Source -> destination: these moves are accepted for good (committed at the source), which
    never offers them again; drop them from ``moves_in``."""

    src_group: int
    src_epoch: int
    move_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MoveForgot:
    """Destination -> source: these moves are forgotten, and that is committed."""

    move_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HandOver:
    """Raft leader -> master of a replication group: hand the group over (the leader's balance
    step, cluster/assignment.py): abdicate ``epoch``, catch ``to`` up, then release the group."""

    epoch: int
    to: str


@dataclass(frozen=True, slots=True)
class Resign:
    """Master of a replication group -> Raft leader: I give ``epoch`` up. With ``to``, a handover
    finished: the master abdicated for good and ``to`` holds its whole log, so the next view
    moves the group there. Without (""), its group lease lapsed while Raft still reaches it: the
    leader moves the group as if its master were unreachable."""

    epoch: int
    to: str = ""


# --- cross-group reads (cluster/read_barrier.py) -----------------------------------------------

@dataclass(frozen=True, slots=True)
class Barrier:
    """Member -> master of a replication group: where does your log end? A member asks before a
    read across groups (ListQueues, the dead-letter checks), to read its replica once it has
    applied that much."""

    nonce: int


@dataclass(frozen=True, slots=True)
class BarrierAt:
    """Active master of a replication group -> member: my log ends at ``seq`` in ``epoch``
    (everything acknowledged in the group before the ``Barrier`` with ``nonce`` arrived)."""

    nonce: int
    epoch: int
    seq: int


Frame = (Batch | Ack | Resend | SyncRequest | SyncStatus | Fetch | FetchMiss | SnapshotChunk
         | SnapshotAck | TransferRequest | Forward | ForwardReply | Place | ForwardBatch | ForwardReplies
         | GroupBeat | GroupBeatAck | Released | MoveOffer | MoveAccepted | MoveRefused | MoveForget | MoveForgot
         | HandOver | Resign | Barrier | BarrierAt)

# Every frame type that crosses the network, in a fixed order: the transport's wire tags are
# positions in this tuple, so append new types at the end and never reorder.
FRAME_TYPES: tuple[type, ...] = (Batch, Ack, Resend, SyncRequest, SyncStatus, Fetch, FetchMiss,
                                 SnapshotChunk, SnapshotAck, TransferRequest, Forward, ForwardReply, Place,
                                 ForwardBatch, ForwardReplies, GroupBeat, GroupBeatAck, Released,
                                 MoveOffer, MoveAccepted, MoveRefused, MoveForget, MoveForgot, HandOver,
                                 Resign, Barrier, BarrierAt)


# --- actions --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Send:
    to: str
    frame: Frame
    group: int = 0    # the replication group whose frame it is (the node core tags it)


@dataclass(frozen=True, slots=True)
class Complete:
    """These client operations met their ack policy: answer them."""

    op_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class FlushAt:
    """Call ``flush`` at ``at_ms`` (this node's clock) if nothing cut the staged operations
    before: the end of a gather (``Limits.gather_ms``)."""

    at_ms: int


@dataclass(frozen=True, slots=True)
class NeedsTransfer:
    """This replica is behind the start of the log: only a state transfer can catch it up."""

    replica: str


@dataclass(frozen=True, slots=True)
class Throttle:
    """Start (True) or stop (False) slowing producers: a reachable replica lags too far."""

    on: bool


@dataclass(frozen=True, slots=True)
class TransferFrom:
    """The new master's own log diverges from the most advanced member's: take its snapshot."""

    holder: str


@dataclass(frozen=True, slots=True)
class Synced:
    """The new master holds everything a majority acknowledged and may serve.

    ``positions`` are the members whose logs are a prefix of the master's (stream to them from
    there); ``divergent`` members hold entries no majority acknowledged and must be reset by
    state transfer."""

    epoch: int
    last_seq: int
    positions: tuple[tuple[str, int], ...]
    divergent: tuple[str, ...]
    amnesiac: tuple[str, ...] = ()   # members that answered amnesiac (told the mark to reach)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A frame refused (stale epoch, not from the master, undecodable): log it, never crash."""

    sender: str
    reason: str


Action = Send | Complete | FlushAt | NeedsTransfer | Throttle | Rejected | TransferFrom | Synced
