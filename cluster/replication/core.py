"""One member's whole replication protocol, sans-I/O: roles, master-change sync, state transfers.

The pieces (MasterReplicator, ReplicaApplier, SyncCoordinator, TransferSender/Receiver) each
handle one concern; this core decides which of them runs and routes events between them, so the
live runtime (cluster/replication/runtime.py) and the simulator (sim/) drive the very same logic.

Inputs are method calls (a view installed, a frame in, a peer (dis)connected, a timer tick, a
client operation submitted, a flush); every call returns actions for the runtime to carry out.
Besides the pieces' own actions (Send, Complete, Throttle, Rejected) the core emits:

* ``Serving(on, epoch)``: this node starts (or stops) serving as master of ``epoch``. It starts
  only after the master-change sync with a majority of the configured members (sync.py); the
  runtime opens the membership layer's "replication" gate then.
* ``Abandoned(reason)``: every operation still waiting for its ack policy has an unknown outcome
  (the view changed under it): tell those clients so, never "success".
* ``StorageReplaced(storage)``: a state transfer finished here; this storage is now the state.
* ``Note(event, fields)``: a line for the history log (transfers, syncs, role changes).

Role changes. A view naming us master builds a MasterReplicator and a SyncCoordinator; nothing
is streamed and no client is served until the sync ends. A view naming another master makes us
its replica; our log (and so what a later master can pull from us) carries over.

State transfers. The master starts one to each replica that its MasterReplicator (or the sync,
for divergent members) says needs it; the replica creates its receiver on the first chunk. A
syncing master whose log cannot be brought level by fetching asks the most advanced member for
its snapshot (``TransferRequest``). Senders are paced: a few chunks per ack or tick, so a large
state never stalls the member that sends it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Sequence

from storage import Storage

from cluster import decisions
from cluster.plantable import check_bugs
from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits, MasterReplicator
from cluster.replication.messages import (
    AckPolicy, Batch, FetchMiss, NeedsTransfer, Rejected, Send, SnapshotAck, SnapshotChunk, Synced,
    SyncRequest, SyncStatus, TransferFrom, TransferRequest,
)
from cluster.replication.replica import ReplicaApplier
from cluster.replication.sync import SyncCoordinator
from cluster.replication.transfer import TransferDone, TransferReceiver, TransferSender

MASTER = "master"
REPLICA = "replica"
NO_VIEW = "none"


@dataclass(frozen=True, slots=True)
class Serving:
    on: bool
    epoch: int


@dataclass(frozen=True, slots=True)
class Abandoned:
    reason: str


@dataclass(frozen=True, slots=True)
class StorageReplaced:
    storage: Storage


@dataclass(frozen=True, slots=True)
class Note:
    event: str
    fields: dict = field(default_factory=dict)


# The planted bugs this core knows (cluster/plantable.py): never set in production.
BUGS = frozenset({"early-ack", "skip-sync", "accept-stale-epoch"})


@dataclass(frozen=True, slots=True)
class TransferSettings:
    chunk_records: int = 2_000
    window: int = 8
    resend_after_ms: int = 1_000


class ReplicationCore:
    def __init__(self, name: str, storage: Storage, new_storage: Callable[[], Storage], *,
                 log: ReplicationLog | None = None, policy: AckPolicy = AckPolicy.MAJORITY,
                 limits: Limits = Limits(), configured: int = 0,
                 transfer: TransferSettings = TransferSettings(), sync_retry_ms: int = 300,
                 bugs: frozenset[str] = frozenset(), amnesiac: bool = False, durable_seq: int | None = None):
        self.bugs = check_bugs(bugs) & BUGS
        self.name = name
        self.group = 0          # its replication group (the group core sets it)
        self.storage = storage
        self.new_storage = new_storage
        self.log = log if log is not None else ReplicationLog()
        self.policy = policy
        self.limits = limits
        self.configured = configured
        self.transfer_settings = transfer
        self.sync_retry_ms = sync_retry_ms
        self.role = NO_VIEW
        self.master: str | None = None
        self.epoch = 0
        self.members: tuple[str, ...] = ()
        self.serving = False
        # True for a member restarted with empty memory (its durable Raft state says it was a
        # member before) until a serving master has brought it up to date, or it finished its
        # own sync as master: until then its position counts in no sync quorum (sync.py).
        self.amnesiac = amnesiac
        # With a journal (a log built with journaled=True): how far the log is on disk, as the
        # node core learns it; -1 after a transfer replaced the state until its snapshot is.
        # None without a journal.
        self.durable_seq = durable_seq
        self._amnesia_target: int | None = None   # the serving master's log end when it positioned us
        self._streamed_from: tuple[str, int] | None = None   # (master, epoch) whose batch we applied
        self.master_core: MasterReplicator | None = None
        self.replica_core: ReplicaApplier | None = None
        self.sync: SyncCoordinator | None = None
        self.senders: dict[str, TransferSender] = {}
        self.receiver: TransferReceiver | None = None
        self.connected: set[str] = set()
        self.last_transfer: dict[str, Any] | None = None
        self._transfer_ids = itertools.count(1)
        self._receive_started = 0
        # Transfers already taken here, by (sender, epoch, transfer_id): late copies of their
        # chunks (a resend crossing the final ack) must never be taken a second time, which
        # would reset the state and log below what this replica has acknowledged since.
        self._finished_transfers: set[tuple[str, int, int]] = set()

    # --- inputs -------------------------------------------------------------------------------

    def install_view(self, master: str, epoch: int, members: Iterable[str], now_ms: int,
                     counts_self_from_ms: int | None = None) -> list[Any]:
        """``counts_self_from_ms``: when this node, named master, may count its own position in
        its sync (a group master's guard: cluster/group_lease.py); None: at once."""
        members = tuple(sorted(members))
        if epoch < self.epoch:
            return [Note("stream-view-ignored", {"epoch": epoch, "current": self.epoch})]
        if epoch == self.epoch and master == self.master:
            added = set(members) - set(self.members)
            self.members = members
            for to in [t for t in self.senders if t not in members]:
                self.senders.pop(to).release()    # a member the view no longer has
            out: list[Any] = []
            if self.master_core is not None:
                out += self.master_core.view_changed(members)
                if self.serving:
                    for m in sorted(added & self.connected):
                        out += self.master_core.replica_connected(m, now_ms, fresh=True)
            if self.sync is not None and self.sync.state == SyncCoordinator.COLLECTING:
                self.sync.members = tuple(sorted(set(self.sync.members) | set(members)))
                for m in sorted(added & self.connected):
                    out += self._sync_actions(self.sync.ask_again(m), now_ms)
            return out
        out = []
        if self.master_core is not None:
            # Operations executed here but not yet cut into a batch already changed the state:
            # log them (as this epoch's unacknowledged tail) rather than leave state ahead of log.
            out += [a for a in self.master_core.flush(now_ms, force=True) if not isinstance(a, Send)]
        out.append(Abandoned(f"view changed to master {master} in epoch {epoch}"))
        if self.serving:
            out.append(Serving(False, self.epoch))
        self.serving = False
        # A node that (re)started empty may hear from the master, and start receiving its
        # transfer, before membership tells it the view; when the view then names that very
        # master and epoch, the half-restored staging is kept (dropping it restarted the
        # transfer from scratch).
        rec = self.receiver
        keep = rec is not None and master != self.name and rec.master == master and rec.epoch == epoch
        self.master, self.epoch, self.members = master, epoch, members
        # A member the new master asked for its snapshot (TransferRequest, while syncing) may hear
        # that request before membership delivers the view naming that master: the transfer is
        # for this very view and must go on. Dropping it left the master waiting for chunks nobody
        # would resend (the simulator, seed 26490, under a 10%-lossy network). Any other transfer
        # belongs to a view that has ended.
        kept = {to: s for to, s in self.senders.items() if to == master and master != self.name and s.epoch == epoch}
        for to, s in self.senders.items():
            if to not in kept:
                s.release()
        self.senders = kept
        if not keep:
            self.receiver = None
        self.sync = None
        if master == self.name:
            self.role = MASTER
            self.replica_core = None
            self.master_core = MasterReplicator(self.name, epoch, members, self.log, policy=self.policy,
                                                limits=self.limits, configured=self.configured)
            self.master_core.local_durable = self.durable_seq
            self.master_core.group = self.group
            self.sync = SyncCoordinator(self.name, epoch, members, self.storage, self.log,
                                        retry_ms=self.sync_retry_ms, configured=self.configured,
                                        amnesiac=self.amnesiac,
                                        # a few of the holder's own resend periods
                                        transfer_retry_ms=4 * self.transfer_settings.resend_after_ms,
                                        counts_self_from_ms=counts_self_from_ms)
            out.append(Note("sync-started", {"epoch": epoch, "members": list(members),
                                             "last_seq": self.log.last_seq, "last_epoch": self.log.last_epoch}))
            if "skip-sync" in self.bugs:
                return out + self._synced(Synced(epoch, self.log.last_seq, (), ()), now_ms)
            out += self._sync_actions(self.sync.start(now_ms), now_ms)
        else:
            self.role = REPLICA
            self.master_core = None
            if self.replica_core is None:
                self.replica_core = self._new_applier()
            out += self.replica_core.view_changed(master, epoch)
        return out

    def submit(self, op_id: int, mutations: Sequence, policy: AckPolicy | None = None) -> list[Any]:
        """Stage a served operation's mutations (already executed on ``self.storage``)."""
        assert self.master_core is not None and self.serving, "submit only while serving"
        if "early-ack" in self.bugs:
            policy = AckPolicy.NONE
        return self.master_core.submit(op_id, mutations, policy)

    def flush(self, now_ms: int) -> list[Any]:
        if self.master_core is None or not self.serving:
            return []
        self.master_core.sending_transfer = bool(self.senders)
        return self._master_actions(self.master_core.flush(now_ms), now_ms)

    def cut_staged(self, now_ms: int) -> list[Any]:
        """Cut every operation executed on the storage into the log now, held or not: whoever
        reads the storage next (a transfer's tail, a compaction step) must find nothing there
        that the log does not hold."""
        if self.master_core is None or not self.serving:
            return []
        return self._master_actions(self.master_core.flush(now_ms, force=True), now_ms)

    def on_peer(self, name: str, connected: bool, now_ms: int) -> list[Any]:
        if connected:
            self.connected.add(name)
        else:
            self.connected.discard(name)
        if self.master_core is not None and self.serving:
            if connected:
                return self._master_actions(self.master_core.replica_connected(name, now_ms, fresh=True), now_ms)
            return self._master_actions(self.master_core.replica_disconnected(name, now_ms), now_ms)
        if self.sync is not None:
            if connected:
                return self._sync_actions(self.sync.ask_again(name), now_ms)
            out = self._sync_actions(self.sync.forget(name, now_ms), now_ms)
            if self.sync is not None and self.sync.state == SyncCoordinator.COLLECTING \
                    and self.receiver is not None and self.receiver.master == name:
                self.receiver = None   # a snapshot from a holder that may come back empty
            return out
        return []

    def on_tick(self, now_ms: int) -> list[Any]:
        out: list[Any] = []
        if self.sync is not None:
            out += self._sync_actions(self.sync.on_tick(now_ms), now_ms)
        elif self.master_core is not None and self.serving:
            self.master_core.sending_transfer = bool(self.senders)
            out += self._master_actions(self.master_core.on_tick(now_ms), now_ms)
        for sender in list(self.senders.values()):
            out += sender.on_tick(now_ms)
        return out

    def on_frame(self, sender: str, frame: Any, now_ms: int) -> list[Any]:
        t = type(frame)
        if t is SnapshotChunk:
            return self._on_chunk(sender, frame, now_ms)
        if t is SnapshotAck:
            return self._on_snapshot_ack(sender, frame, now_ms)
        if t is TransferRequest:
            return self._on_transfer_request(sender, frame, now_ms)
        if self.sync is not None and (t is SyncStatus or t is FetchMiss or t is Batch):
            return self._sync_actions(self.sync.on_frame(sender, frame, now_ms), now_ms)
        if self.master_core is not None:
            if not self.serving:
                return [Rejected(sender, f"{t.__name__} before this master serves")]
            self.master_core.sending_transfer = bool(self.senders)
            return self._master_actions(self.master_core.on_frame(sender, frame, now_ms), now_ms)
        if self.replica_core is None and t is SyncRequest:
            # A new master asks before membership told us of any view (we just started): follow
            # it, as the view will say once it arrives.
            self.role = REPLICA
            self.replica_core = self._new_applier()
        if self.replica_core is not None:
            out = self.replica_core.on_frame(sender, frame, now_ms)
            rec = self.receiver
            if t is Batch and rec is not None and rec.master == sender and rec.epoch == frame.epoch:
                # A master streams to a member only once it found the member's log a prefix of
                # its own, and never while it transfers to it: a transfer it started and then
                # dropped (a same-epoch view removed the member while its first chunk was on the
                # way) is over, and its half-restored staging would otherwise stay for good.
                self.receiver = None
                out.append(Note("transfer-abandoned", {"from": sender, "epoch": frame.epoch,
                                                       "chunks": rec.expected}))
            if not self.amnesiac:
                return out
            applier = self.replica_core
            if t is SyncRequest:
                out = [Send(a.to, replace(a.frame, amnesiac=True))
                       if type(a) is Send and type(a.frame) is SyncStatus else a for a in out]
                if frame.serving_seq >= 0 and applier.master == sender and applier.epoch == frame.epoch:
                    # Everything this member may have acknowledged before its restart is in the
                    # serving master's log by now: holding up to here, it holds all of that.
                    self._amnesia_target = frame.serving_seq
                    if frame.serving_seq == 0:
                        out += self._caught_up(f"{sender} has logged nothing yet")
                    elif self._streamed_from == (sender, frame.epoch) and self.log.last_seq >= frame.serving_seq:
                        out += self._caught_up(f"holds {sender}'s stream up to seq {frame.serving_seq}")
            elif t is Batch and applier.master == sender and applier.epoch == frame.epoch:
                # A batch is streamed only once the master has checked that our log is a prefix
                # of its own: our entries up to here are its entries.
                self._streamed_from = (sender, frame.epoch)
                if self._amnesia_target is not None and self.log.last_seq >= self._amnesia_target:
                    out += self._caught_up(f"applied {sender}'s stream up to seq {self._amnesia_target}")
            return out
        return [Rejected(sender, f"{t.__name__} before any view")]

    def persisted(self, seq: int, now_ms: int) -> list[Any]:
        """The journal holds the log up to ``seq`` as durably as its policy promises."""
        self.durable_seq = seq
        if self.master_core is not None:
            return self.master_core.durable(seq, now_ms)
        return []

    def _caught_up(self, how: str) -> list[Any]:
        if not self.amnesiac:
            return []
        self.amnesiac = False
        return [Note("caught-up", {"how": how, "epoch": self.epoch, "last_seq": self.log.last_seq})]

    # --- state for operators --------------------------------------------------------------------

    def status(self, now_ms: int) -> dict[str, Any]:
        d: dict[str, Any] = {
            "role": self.role, "master": self.master, "epoch": self.epoch, "members": list(self.members),
            "serving": self.serving, "amnesiac": self.amnesiac,
            "log": {"first_seq": self.log.first_seq, "last_seq": self.log.last_seq,
                    "last_epoch": self.log.last_epoch, "entries": len(self.log), "bytes": self.log.size_bytes},
            "applied_seq": self.log.last_seq,
            "sync": self.sync.state if self.sync is not None else None,
            "transfers_out": sorted(self.senders),
            "transfer_in": self.receiver.master if self.receiver is not None and self.receiver.staging is not None
            else None,
            "last_transfer": self.last_transfer,
            "replicas": {}, "replication_queue": 0, "delay_ms": 0, "throttling": False,
        }
        if self.master_core is not None:
            core = self.master_core.status(now_ms)
            d["replicas"] = core["replicas"]
            d["replication_queue"] = core["staged_ops"] + core["waiting_ops"]
            d["delay_ms"] = max((r["lag_ms"] for r in core["replicas"].values()), default=0)
            d["throttling"] = core["throttling"]
        return d

    # --- internals ------------------------------------------------------------------------------

    def _new_applier(self) -> ReplicaApplier:
        return ReplicaApplier(self.storage, self.log, accept_stale="accept-stale-epoch" in self.bugs)

    def _master_actions(self, actions: list[Any], now_ms: int) -> list[Any]:
        """Carry out the master core's NeedsTransfer here; pass everything else on."""
        out: list[Any] = []
        for a in actions:
            if type(a) is NeedsTransfer:
                out += self._start_sending(a.replica, now_ms)
            else:
                out.append(a)
        return out

    def _start_sending(self, to: str, now_ms: int, epoch: int | None = None) -> list[Any]:
        if to in self.senders:
            return []
        ts = self.transfer_settings
        sender = TransferSender(to, self.epoch if epoch is None else epoch, lambda: next(self._transfer_ids),
                                self.storage, self.log, now_ms, chunk_records=ts.chunk_records, window=ts.window,
                                resend_after_ms=ts.resend_after_ms, cut_staged=self.cut_staged)
        self.senders[to] = sender
        return [Note("transfer-started", {"direction": "sent", "peer": to, "at_seq": sender.at_seq})] \
            + sender.pump(now_ms, ts.window)

    def _sync_actions(self, actions: list[Any], now_ms: int) -> list[Any]:
        out: list[Any] = []
        for a in actions:
            if type(a) is Synced:
                out += self._synced(a, now_ms)
            elif type(a) is TransferFrom:
                self.receiver = TransferReceiver(a.holder, self.epoch, self.new_storage,
                                                 keep_blobs=self.log.unjournaled is not None)
                out.append(Note("sync-transfer", {"holder": a.holder, "epoch": self.epoch}))
                out.append(Send(a.holder, TransferRequest(self.epoch)))
            else:
                out.append(a)
        return out

    def _synced(self, synced: Synced, now_ms: int) -> list[Any]:
        assert self.master_core is not None
        self.sync = None
        self.receiver = None
        self.serving = True
        out_caught_up = self._caught_up("synced as master")
        out: list[Any] = [Note("synced", {"epoch": self.epoch, "last_seq": synced.last_seq,
                                          "positions": dict(synced.positions),
                                          "divergent": list(synced.divergent)}),
                          Serving(True, self.epoch)] + out_caught_up
        out += self._master_actions(self.master_core.adopt_sync(synced, now_ms), now_ms)
        # Members that answered nothing yet are asked where they are once connected.
        known = {n for n, _ in synced.positions} | set(synced.divergent)
        for m in sorted((self.connected & set(self.members)) - known - {self.name}):
            out += self._master_actions(self.master_core.replica_connected(m, now_ms), now_ms)
        return out

    def _on_transfer_request(self, sender: str, frame: TransferRequest, now_ms: int) -> list[Any]:
        # Only the master we follow in this epoch (which is syncing, hence asking us) may ask.
        master, epoch = self.following()
        if self.role != REPLICA or sender != master or frame.epoch != epoch:
            return [Rejected(sender, f"transfer request in epoch {frame.epoch} from {sender}")]
        if decisions.ON:
            decisions.note("transfer.empty_holder", self.amnesiac and self.log.last_seq > 0)
        if self.amnesiac and self.log.last_seq == 0:
            # restarted empty and nothing since: our state is no truth for anyone. A member that
            # restarted with a journal (fsync interval or never) is amnesiac too, yet holds the
            # exact state at its log position: after a power cut of every member, the sync may
            # find it the most advanced, and a master that needs its snapshot must get it
            # (the simulator: the sync retried for ever and the cluster never served).
            return [Rejected(sender, "transfer request to a member that restarted empty")]
        old = self.senders.pop(sender, None)
        if old is not None:
            old.release()
        return self._start_sending(sender, now_ms, epoch)

    def following(self) -> tuple[str | None, int]:
        """The master (and epoch) a replica follows. A new master's SyncRequest is adopted by
        the applier before membership delivers the view here: the applier is ahead then."""
        if self.replica_core is not None and self.replica_core.epoch >= self.epoch:
            return self.replica_core.master, self.replica_core.epoch
        return self.master, self.epoch

    def _on_snapshot_ack(self, sender: str, frame: SnapshotAck, now_ms: int) -> list[Any]:
        s = self.senders.get(sender)
        if s is None:
            return [Rejected(sender, "snapshot ack without a transfer to it")]
        out: list[Any] = []
        for a in s.on_ack(frame, now_ms):
            if type(a) is TransferDone:
                del self.senders[sender]
                self.last_transfer = _transfer_stats("sent", sender, a.at_seq, a.records, a.bytes,
                                                     a.started_ms, a.finished_ms)
                out.append(Note("transfer-finished", dict(self.last_transfer)))
                if self.master_core is not None and self.serving:
                    out += self._master_actions(self.master_core.replica_restored(sender, a.at_seq, now_ms), now_ms)
            else:
                out.append(a)
        return out

    def _on_chunk(self, sender: str, chunk: SnapshotChunk, now_ms: int) -> list[Any]:
        if decisions.ON:
            taken = (sender, chunk.epoch, chunk.transfer_id)
            decisions.note("transfer.taken_twice", taken in self._finished_transfers)
        if (sender, chunk.epoch, chunk.transfer_id) in self._finished_transfers:
            # Taken already: the sender resends because our acks were lost. Ack again (taking
            # it twice is what the set prevents): unanswered, the sender resent for ever and
            # never streamed to us (the simulator, seed 27331, 10% frame loss).
            return [Send(sender, SnapshotAck(chunk.epoch, chunk.transfer_id, chunk.index))]
        rec = self.receiver
        if rec is None:
            master, epoch = self.following()
            if self.role != REPLICA or sender != master or chunk.epoch != epoch:
                return [Rejected(sender, f"snapshot chunk from {sender} in epoch {chunk.epoch}")]
            rec = self.receiver = TransferReceiver(sender, chunk.epoch, self.new_storage,
                                                         keep_blobs=self.log.unjournaled is not None)
        if chunk.index == 0 and chunk.transfer_id != rec.transfer_id:
            self._receive_started = now_ms
        out = rec.on_chunk(sender, chunk)
        if self.sync is not None and sender == rec.master:
            self.sync.chunk_arrived(now_ms)
        taken = rec.take()
        if taken is None:
            return out
        staging, at_seq, at_epoch, blobs = taken
        self._finished_transfers.add((sender, chunk.epoch, chunk.transfer_id))
        self.receiver = None
        self.storage = staging
        if self.durable_seq is not None:
            # the new state is on no disk until the journal has written its snapshot
            self.durable_seq = -1
            if self.master_core is not None:
                self.master_core.local_durable = -1
        self.last_transfer = _transfer_stats("received", sender, at_seq, rec.received_records, rec.received_bytes,
                                             self._receive_started, now_ms)
        out += [StorageReplaced(staging), Note("transfer-finished", dict(self.last_transfer))]
        if self.replica_core is not None:
            self.replica_core.storage = staging
            self.replica_core.restored(at_seq, at_epoch, blobs)
            out += self._caught_up(f"transfer from {sender}")
        if self.sync is not None:
            self.log.reset(at_seq, at_epoch, blobs)
            self.sync.storage = staging
            out += self._sync_actions(self.sync.restored(now_ms), now_ms)
        return out


def _transfer_stats(direction: str, peer: str, at_seq: int, records: int | None, size: int | None,
                    started_ms: int, finished_ms: int) -> dict[str, Any]:
    return {"direction": direction, "peer": peer, "at_seq": at_seq, "records": records, "bytes": size,
            "started_ms": started_ms, "duration_s": round((finished_ms - started_ms) / 1000, 3)}
