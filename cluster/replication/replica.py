"""A replica's side of the mutation stream, sans-I/O.

It accepts batches only from the master of its current view and only for that view's epoch
(stale-epoch traffic from a deposed master is refused, which fences it), applies them strictly in
log order, keeps them in its own log (a future master may pull them), and acks cumulatively.
A duplicate is re-acked, a gap is answered with one resend request per missing position, and an
undecodable batch is refused without touching the state.
"""

from __future__ import annotations

import logging

from storage import Storage
from storage.codec import CodecError, decode_many
from storage.mutations import Mutation

from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.messages import Ack, Action, Batch, Rejected, Resend, Send

log = logging.getLogger(__name__)


class ReplicaApplier:
    def __init__(self, storage: Storage, log_: ReplicationLog):
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
        if not isinstance(frame, Batch):
            return [Rejected(sender, f"unexpected frame {type(frame).__name__}")]
        if sender != self.master or frame.epoch != self.epoch:
            return [Rejected(sender, f"batch from {sender} in epoch {frame.epoch}; the master is "
                                     f"{self.master} in epoch {self.epoch}")]
        applied = self.log.last_seq
        if frame.seq <= applied:
            return [Send(sender, Ack(self.epoch, applied))]
        if frame.seq > applied + 1:
            if self._asked_from == applied + 1:
                return []
            self._asked_from = applied + 1
            return [Send(sender, Resend(self.epoch, applied + 1))]
        try:
            mutations: list[Mutation] = decode_many(frame.mutations)
        except CodecError as err:
            return [Rejected(sender, f"undecodable batch {frame.seq}: {err}")]
        apply = self.storage.apply
        for m in mutations:
            apply(m)
        self.log.append(Entry(frame.seq, frame.written_epoch, frame.mutations, now_ms))
        self._asked_from = 0
        return [Send(sender, Ack(self.epoch, frame.seq))]
