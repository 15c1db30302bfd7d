"""A replica's side of the mutation stream, sans-I/O.

It accepts batches only from the master of its current view and only for that view's epoch
(stale-epoch traffic from a deposed master is refused, which fences it), applies them strictly in
log order, keeps them in its own log (a future master may pull them), and acks cumulatively.
A duplicate is re-acked, a gap is answered with one resend request per missing position, and an
undecodable batch is refused without touching the state. It also answers a new master's
master-change sync (its log position, and entries from its log: see sync.py).
"""

from __future__ import annotations

import logging
import typing

from storage import Storage
from storage.codec import CodecError, decode_many
from storage.mutations import Mutation

from cluster import decisions
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.messages import (
    Ack, Action, Batch, Fetch, FetchMiss, Rejected, Resend, Send, SyncRequest, SyncStatus,
)

MUTATION_TYPES: tuple[type, ...] = typing.get_args(Mutation)

log = logging.getLogger(__name__)


class ReplicaApplier:
    def __init__(self, storage: Storage, log_: ReplicationLog, *, accept_stale: bool = False):
        self.accept_stale = accept_stale   # a planted bug (core.PLANTABLE_BUGS), never in production
        self.storage = storage
        self.log = log_
        self.master: str | None = None
        self.epoch = 0
        self._asked_from = 0   # the resend already requested for the current gap

    @property
    def applied_seq(self) -> int:
        return self.log.last_seq

    def view_changed(self, master: str, epoch: int) -> list[Action]:
        if epoch < self.epoch:
            return []
        self.master, self.epoch = master, epoch
        self._asked_from = 0
        return []

    def on_frame(self, sender: str, frame: object, now_ms: int) -> list[Action]:
        if isinstance(frame, SyncRequest):
            # A new master takes office: adopt its epoch (which fences the deposed one) and
            # report where our log ends.
            if decisions.ON:
                decisions.note("replica.sync_fence", self.epoch > frame.epoch)
            if frame.epoch < self.epoch or (frame.epoch == self.epoch and self.master not in (None, sender)):
                return [Rejected(sender, f"sync request for epoch {frame.epoch}; we are in {self.epoch} "
                                         f"under {self.master}")]
            self.master, self.epoch = sender, frame.epoch
            self._asked_from = 0
            return [Send(sender, answer_sync(self.log, self.epoch, frame))]  # type: ignore[arg-type]
        if decisions.ON:
            _note_fence(self, sender, frame)
        if (sender != self.master or getattr(frame, "epoch", None) != self.epoch) \
                and not (self.accept_stale and isinstance(frame, Batch)):
            return [Rejected(sender, f"{type(frame).__name__} from {sender} in epoch "
                                     f"{getattr(frame, 'epoch', None)}; the master is {self.master} "
                                     f"in epoch {self.epoch}")]
        if isinstance(frame, Fetch):
            answer = answer_sync(self.log, self.epoch, frame)
            return [Send(sender, a) for a in (answer if isinstance(answer, list) else [answer])]  # type: ignore[union-attr]
        if not isinstance(frame, Batch):
            return [Rejected(sender, f"unexpected frame {type(frame).__name__}")]
        applied = self.log.last_seq
        if decisions.ON:
            decisions.note("replica.duplicate", frame.seq == applied)
        if frame.seq <= applied:
            return [Send(sender, Ack(self.epoch, applied))]
        if frame.seq > applied + 1:
            if self._asked_from == applied + 1:
                return []
            self._asked_from = applied + 1
            return [Send(sender, Resend(self.epoch, applied + 1))]
        rejected = apply_entry(self.storage, self.log, frame, now_ms)
        if rejected:
            return [Rejected(sender, rejected)]
        self._asked_from = 0
        return [Send(sender, Ack(self.epoch, frame.seq))]

    def restored(self, last_seq: int, last_epoch: int, blobs: tuple[bytes, ...] = ()) -> None:
        """A state transfer replaced the storage: the log restarts at the snapshot's position."""
        self.log.reset(last_seq, last_epoch, blobs)
        self._asked_from = 0


def _note_fence(applier: ReplicaApplier, sender: str, frame: object) -> None:
    """replica.epoch_fence: a fence that lets a frame of an older epoch in (decisions.py)."""
    epoch = getattr(frame, "epoch", None)
    refused = sender != applier.master or epoch != applier.epoch
    decisions.note("replica.epoch_fence", refused and epoch is not None and epoch < applier.epoch)


def apply_entry(storage: Storage, log_: ReplicationLog, frame: Batch, now_ms: int) -> str | None:
    """Decode and apply one batch in log order and keep it in the log; the reason if refused.

    The whole batch is decoded before anything is applied, so garbage never half-applies."""
    try:
        mutations: list[Mutation] = decode_many(frame.mutations, expect=MUTATION_TYPES)
    except CodecError as err:
        return f"undecodable batch {frame.seq}: {err}"
    storage.apply_many(mutations)
    log_.append(Entry(frame.seq, frame.written_epoch, frame.mutations, now_ms))
    return None


def answer_sync(log: ReplicationLog, epoch: int, frame: object) -> Action | list[Action] | None:
    """A member's answers to a new master's sync requests."""
    if isinstance(frame, SyncRequest):
        return SyncStatus(epoch, log.last_seq, log.last_epoch, log.first_seq)
    if isinstance(frame, Fetch):
        entries = log.since(frame.from_seq, frame.limit)
        if not entries:
            return FetchMiss(epoch, frame.from_seq)
        return [Batch(epoch, e.seq, e.written_epoch, e.mutations) for e in entries]  # type: ignore[return-value]
    return None
