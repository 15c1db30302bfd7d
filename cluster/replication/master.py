"""The master's side of the mutation stream, sans-I/O.

Client operations are executed on the master's storage first; their mutations are *staged*
here and cut into one batch per ``flush`` (group commit: under load one batch, hence one network
round trip, carries many operations). Each batch gets the next ``seq`` of the log and is
streamed to every connected replica at once; replicas ack cumulatively.

Under load a batch waits for the one before it (``Limits.hold_ms``): while the newest batch is
in flight (no replica has acked it yet) and younger than ``hold_ms``, a flush cuts nothing, and
the first ack (or a flush after ``hold_ms``, or a tick) cuts everything staged meanwhile into one
batch. An ack (or this master's own fsync) that completes operations then *gathers*
(``Limits.gather_ms``): the clients it answered usually send again within a fraction of a
millisecond, so the next batch is cut once as many operations are staged as it completed, or
when ``gather_ms`` ran out (``FlushAt``). Without it 16 busy clients settle into two groups
that alternate, each in a batch of its own; with it they share one (7.5 -> 13 operations per
batch, a replica's CPU per send down a fifth, measured side by side; README, "Performance").
A lone client never waits (its previous batch is acked before it sends again, except
under ``none``, where it was answered already); under load each round trip to the fastest
replica carries one batch instead of one per turn of the loop. What that saves is per frame,
not per operation: each batch costs the master a ZeroMQ send per replica and an ack received
from each, and each replica a frame received, a loop turn and an ack sent, 150-300 µs of CPU in
all on this 2-core machine whatever the batch holds. An operation completes
when enough replicas acked its batch for *its* ack policy (policies can differ per queue, so
there is one queue of waiting operations per policy, each completing in seq order).

Lost or reordered frames are repaired from the log: a replica that sees a gap asks for a resend,
and a replica that stays silent past ``resend_after_ms`` is re-sent everything after its last
ack (go-back-N). A replica behind the start of the log needs a state transfer. Only reachable
replicas can slow producers (flow control): an unreachable one is simply not waited for, except
by the ``all`` policy, which waits until membership removes it from the view.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Sequence

from storage.codec import encode_many

from cluster import decisions
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.messages import (
    Ack, Action, AckPolicy, Batch, Complete, FlushAt, NeedsTransfer, Rejected, Resend, Send, Synced, SyncRequest,
    SyncStatus, Throttle,
)
from cluster.replication.sync import Position, is_prefix_of, seq_only_prefix_differs


@dataclass
class ReplicaProgress:
    name: str
    connected: bool = False
    acked: int = 0          # everything up to here is applied there
    sent: int = 0           # highest seq sent since the last (re)connection or resend
    last_progress_ms: int = 0
    needs_transfer: bool = False
    positioned: bool = False  # its log position is known to be a prefix of ours (or it awaits a transfer)
    # It has held the whole log at least once since it was (re)positioned. Only such a replica
    # can slow producers: one that is joining or catching up after a transfer is expected to be
    # far behind, and throttling clients for it would stall the master for the whole catch-up.
    caught_up: bool = False


@dataclass(frozen=True, slots=True)
class Limits:
    max_batch_ops: int = 512           # a flush cuts at most this many operations into one batch
    resend_after_ms: int = 500         # silence after which unacked batches are sent again
    max_resend_entries: int = 256      # per resend, to bound one burst
    # A replica catching up from the log gets more entries as it acks, up to this many unacked
    # in flight: catch-up runs at the speed of the link instead of one burst per resend timeout.
    max_inflight_entries: int = 1_024
    throttle_lag_batches: int = 10_000
    throttle_lag_ms: int = 5_000
    # Staged operations wait for the newest batch's first ack, at most this long (module
    # docstring); 0 cuts a batch at every flush.
    hold_ms: int = 10
    # After an ack that completed operations, staged ones wait for as many to be staged, at
    # most this long (module docstring); 0 never gathers.
    gather_ms: int = 0


class MasterReplicator:
    def __init__(self, self_name: str, epoch: int, members: Sequence[str], log: ReplicationLog, *,
                 policy: AckPolicy = AckPolicy.MAJORITY, limits: Limits = Limits(), configured: int = 0):
        self.self_name = self_name
        self.group = 0                 # its replication group (what the simulator's checks key entries by)
        self.configured = configured   # configured cluster size: what `majority` counts against
        self.epoch = epoch
        self.policy = policy
        self.limits = limits
        self.log = log
        self.members: tuple[str, ...] = ()
        self.replicas: dict[str, ReplicaProgress] = {}
        self._staged: list[tuple[int, AckPolicy, Sequence]] = []
        self._waiting: dict[AckPolicy, deque[tuple[int, int]]] = {p: deque() for p in AckPolicy}
        self._throttling = False
        self._gather_until = 0        # a gather runs until then (ms), or until this many are staged
        self._gather_target = 0
        self._gather_timed = False    # its end was asked for (FlushAt)
        # Set by the core while it sends a state transfer: no hold then (``holding``).
        self.sending_transfer = False
        # How far this master's own log is durable (its journal's fsync): None without a journal,
        # where holding the batch in memory is all a copy on this node means.
        self.local_durable: int | None = None
        self.view_changed(members)

    # --- inputs -----------------------------------------------------------------------------

    def submit(self, op_id: int, mutations: Sequence, policy: AckPolicy | None = None) -> list[Action]:
        """Stage a client operation's mutations; it completes when its batch meets its policy.

        ``none`` waits for nothing; an operation that changed nothing waits for what came before it.
        """
        policy = policy or self.policy
        if not mutations:
            # It changed nothing, yet its answer may rest on state that is not committed: a
            # retried FIFO send that the dedup id turns into a no-op answers "ok" with a message
            # only this master may hold (the simulator plays it). So it completes once
            # everything before it meets its policy.
            if policy is AckPolicy.NONE:
                return [Complete((op_id,))]
            if self._staged:
                self._staged.append((op_id, policy, ()))
                return []
            if self._committed(policy) >= self.log.last_seq:
                return [Complete((op_id,))]
            self._waiting[policy].append((self.log.last_seq, op_id))
            return []
        self._staged.append((op_id, policy, mutations))
        if policy is AckPolicy.NONE:
            return [Complete((op_id,))]
        return []

    def flush(self, now_ms: int, force: bool = False) -> list[Action]:
        """Cut staged operations into batches and stream them; unless ``force``d, not while the
        newest batch is still in flight (``holding``)."""
        actions: list[Action] = []
        if not force and self._staged and self.holding(now_ms):
            return self._gather_end(now_ms)
        if self._staged:
            self._gather_until = 0
        while self._staged:
            ops = self._staged[:self.limits.max_batch_ops]
            del self._staged[:self.limits.max_batch_ops]
            seq = self.log.last_seq + 1
            blob = encode_many([m for _, _, muts in ops for m in muts])
            entry = Entry(seq, self.epoch, blob, now_ms)
            if decisions.ON:
                decisions.wrote(self.epoch, seq, blob, self.group)
            self.log.append(entry)
            for op_id, policy, _ in ops:
                if policy is not AckPolicy.NONE:
                    self._waiting[policy].append((seq, op_id))
            frame = Batch(self.epoch, seq, self.epoch, blob)
            for r in self.replicas.values():
                if r.connected and r.positioned and not r.needs_transfer and r.sent == seq - 1:
                    actions.append(Send(r.name, frame))
                    r.sent = seq
        actions.extend(self._completions())
        actions.extend(self._flow_control(now_ms))
        return actions

    def on_frame(self, sender: str, frame: object, now_ms: int) -> list[Action]:
        r = self.replicas.get(sender)
        if r is None:
            return [Rejected(sender, "not a replica of the current view")]
        if isinstance(frame, Ack):
            if frame.epoch != self.epoch:
                return [Rejected(sender, f"ack for epoch {frame.epoch}, ours is {self.epoch}")]
            if frame.seq > self.log.last_seq:
                return [Rejected(sender, f"ack for seq {frame.seq} beyond the log ({self.log.last_seq})")]
            if frame.seq > r.acked:
                r.acked = frame.seq
                r.last_progress_ms = now_ms
            if r.acked == self.log.last_seq:
                r.caught_up = True
            r.connected = True
            out = self._pump(r, now_ms) + self._completions()
            if out and self.limits.gather_ms > 0:
                self._gather(out, now_ms)
            if self._staged and not self.holding(now_ms):
                return out + self.flush(now_ms)   # the operations held behind the acked batch
            return out + self._gather_end(now_ms) + self._flow_control(now_ms)
        if isinstance(frame, SyncStatus):
            if frame.epoch != self.epoch:
                return [Rejected(sender, f"sync status for epoch {frame.epoch}, ours is {self.epoch}")]
            r.connected = True
            return self._position(r, Position(frame.last_seq, frame.last_epoch, frame.first_seq), now_ms)
        if isinstance(frame, Resend):
            if frame.epoch != self.epoch:
                return [Rejected(sender, f"resend for epoch {frame.epoch}, ours is {self.epoch}")]
            r.connected = True
            if frame.from_seq <= r.acked and r.positioned and not r.needs_transfer:
                # It acked beyond this before: it lost its state (restarted with empty memory
                # faster than a disconnection could be noticed). Learn where it is now.
                return self._reposition(r, now_ms)
            return self._send_from(r, max(frame.from_seq, r.acked + 1), now_ms)
        return [Rejected(sender, f"unexpected frame {type(frame).__name__}")]

    def on_tick(self, now_ms: int) -> list[Action]:
        actions: list[Action] = []
        if self._staged and not self.holding(now_ms):
            actions.extend(self.flush(now_ms))   # held past hold_ms with no flush since
        for r in self.replicas.values():
            if not r.connected or r.needs_transfer or now_ms - r.last_progress_ms < self.limits.resend_after_ms:
                continue
            if not r.positioned:
                r.last_progress_ms = now_ms
                actions.append(Send(r.name, SyncRequest(self.epoch, self.log.last_seq)))
            elif r.acked < self.log.last_seq:
                r.last_progress_ms = now_ms  # one go-back-N burst per silence, not one per tick
                actions.extend(self._send_from(r, r.acked + 1, now_ms))
        actions.extend(self._flow_control(now_ms))
        return actions

    def replica_connected(self, name: str, now_ms: int, fresh: bool = False) -> list[Action]:
        """``fresh``: a new connection (the peer may have restarted since we last heard from it),
        so its log position is asked again rather than assumed."""
        r = self.replicas.get(name)
        if r is None:
            return []
        if decisions.ON:
            decisions.note("master.awaiting_transfer", r.needs_transfer)
        if r.needs_transfer:
            # Nothing streams to a replica awaiting a transfer: its log may be a deposed
            # master's tail, which takes our entries by seq alone and would then claim our
            # position over a divergent state (the simulator, seed 216). The core resumes the
            # transfer, or starts one if its sender is gone.
            r.connected = True
            r.last_progress_ms = now_ms
            return [NeedsTransfer(name)]
        if fresh and r.positioned:
            return self._reposition(r, now_ms)
        r.connected = True
        r.last_progress_ms = now_ms
        if not r.positioned:
            # Never stream to a member before knowing where its log ends: one holding a deposed
            # master's tail would take our batches for duplicates of its own.
            return [Send(name, SyncRequest(self.epoch, self.log.last_seq))]
        r.sent = r.acked
        return self._send_from(r, r.acked + 1, now_ms)

    def replica_disconnected(self, name: str, now_ms: int) -> list[Action]:
        r = self.replicas.get(name)
        if r is not None:
            r.connected = False
        return self._flow_control(now_ms)

    def replica_restored(self, name: str, seq: int, now_ms: int) -> list[Action]:
        """A state transfer brought ``name`` to ``seq``: stream from there."""
        r = self.replicas.get(name)
        if r is None:
            return []
        r.needs_transfer = False
        r.positioned = True
        r.caught_up = False
        r.acked = seq
        return self.replica_connected(name, now_ms)

    def adopt_sync(self, synced: Synced, now_ms: int) -> list[Action]:
        """Start streaming from the positions the master-change sync found."""
        actions: list[Action] = []
        for name, seq in synced.positions:
            r = self.replicas.get(name)
            if r is not None:
                if name in synced.amnesiac:
                    # it answered the sync's request, which names no mark: tell it ours first
                    actions.append(Send(name, SyncRequest(self.epoch, self.log.last_seq)))
                r.positioned, r.acked, r.connected = True, seq, True
                actions.extend(self.replica_connected(name, now_ms))
        for name in synced.divergent:
            r = self.replicas.get(name)
            if r is not None:
                r.positioned, r.needs_transfer, r.connected = True, True, True
                actions.append(NeedsTransfer(name))
        return actions

    def _reposition(self, r: ReplicaProgress, now_ms: int) -> list[Action]:
        r.positioned = False
        r.caught_up = False
        r.connected = True
        r.acked = r.sent = 0
        r.last_progress_ms = now_ms
        return [Send(r.name, SyncRequest(self.epoch, self.log.last_seq))]

    def _position(self, r: ReplicaProgress, pos: Position, now_ms: int) -> list[Action]:
        if r.positioned:
            return []   # already streaming to it, or a transfer is under way
        r.positioned = True
        if decisions.ON:
            decisions.note("master.position", seq_only_prefix_differs(pos, self.log))
        if is_prefix_of(pos, self.log):
            r.acked = pos.last_seq
            r.sent = pos.last_seq
            r.last_progress_ms = now_ms
            return self._send_from(r, pos.last_seq + 1, now_ms) + self._completions()
        r.needs_transfer = True
        return [NeedsTransfer(r.name)]

    def view_changed(self, members: Iterable[str]) -> list[Action]:
        self.members = tuple(sorted(members))
        replicas = {m: self.replicas.get(m) or ReplicaProgress(m) for m in self.members if m != self.self_name}
        self.replicas = replicas
        return self._completions()

    def _gather(self, acted: list[Action], now_ms: int) -> None:
        """Start a gather for the clients a completion (an ack, this master's fsync) just
        answered (module docstring)."""
        done = sum(len(a.op_ids) for a in acted if type(a) is Complete)
        if done:
            self._gather_target = done
            self._gather_until = now_ms + self.limits.gather_ms
            self._gather_timed = False

    def _gathering(self, now_ms: int) -> bool:
        return now_ms < self._gather_until and len(self._staged) < self._gather_target

    def _gather_end(self, now_ms: int) -> list[Action]:
        """Operations held by a gather are cut at its end, even if the clients it waits for
        never come back: ask for a flush then, once per gather."""
        if self._staged and not self._gather_timed and self._gathering(now_ms):
            self._gather_timed = True
            return [FlushAt(self._gather_until)]
        return []

    def holding(self, now_ms: int) -> bool:
        """Whether staged operations wait: during a gather (``_gather``), or for the newest
        batch: it went to a replica that may ack it, none has yet, and it is younger than
        ``hold_ms``. Never while this master sends a state transfer: the hold let it serve more
        meanwhile, and on two saturated cores the
        joiner then took twice as long (1,000,000 messages: 10.8-13.5 s in 4 of 5 runs with the
        hold, 6.0-6.9 s in 5 of 5 without)."""
        hold = self.limits.hold_ms
        last = self.log.last_seq
        if hold <= 0 or last == 0 or self.sending_transfer:
            return False
        if self._gathering(now_ms):
            return True
        in_flight = False
        for r in self.replicas.values():
            if r.connected and r.positioned and not r.needs_transfer and r.sent >= last:
                if r.acked >= last:
                    return False
                in_flight = True
        if not in_flight:
            return False
        newest = self.log.newest()
        return newest is not None and newest.seq == last and now_ms - newest.created_ms < hold

    # --- state for operators ------------------------------------------------------------------

    def status(self, now_ms: int) -> dict:
        return {
            "epoch": self.epoch, "last_seq": self.log.last_seq, "log_entries": len(self.log),
            "log_bytes": self.log.size_bytes, "staged_ops": len(self._staged),
            "waiting_ops": sum(len(q) for q in self._waiting.values()), "throttling": self._throttling,
            "replicas": {r.name: {"connected": r.connected, "acked_seq": r.acked,
                                  "lag_batches": self.log.last_seq - r.acked,
                                  "lag_ms": self._lag_ms(r, now_ms), "needs_transfer": r.needs_transfer,
                                  "caught_up": r.caught_up}
                         for r in self.replicas.values()},
        }

    # --- internals ------------------------------------------------------------------------------

    def _pump(self, r: ReplicaProgress, now_ms: int) -> list[Action]:
        """More of the log for a replica that is behind, as its acks open the window."""
        if not r.positioned or r.needs_transfer or r.sent >= self.log.last_seq:
            return []
        sent = max(r.sent, r.acked)
        room = self.limits.max_inflight_entries - (sent - r.acked)
        if room < self.limits.max_resend_entries // 2:
            return []   # wait for a bigger window than a trickle of single entries
        if sent + 1 < self.log.first_seq:
            return self._send_from(r, sent + 1, now_ms)   # trimmed meanwhile: a transfer
        entries = self.log.since(sent + 1, min(room, self.limits.max_resend_entries))
        if not entries:
            return []
        r.sent = entries[-1].seq
        return [Send(r.name, Batch(self.epoch, e.seq, e.written_epoch, e.mutations)) for e in entries]

    def _send_from(self, r: ReplicaProgress, seq: int, now_ms: int) -> list[Action]:
        if seq > self.log.last_seq:
            return []
        if seq < self.log.first_seq:
            if r.needs_transfer:
                return []
            r.needs_transfer = True
            return [NeedsTransfer(r.name)]
        entries = self.log.since(seq, self.limits.max_resend_entries)
        if entries:
            r.sent = entries[-1].seq
        return [Send(r.name, Batch(self.epoch, e.seq, e.written_epoch, e.mutations)) for e in entries]

    def durable(self, seq: int, now_ms: int) -> list[Action]:
        """This master's journal made its log durable up to ``seq``."""
        self.local_durable = seq
        out = self._completions()
        if out and self.limits.gather_ms > 0:
            self._gather(out, now_ms)
        return out

    def committed(self, policy: AckPolicy) -> int:
        """The highest seq held by as many copies as ``policy`` requires."""
        return self._committed(policy)

    def _committed(self, policy: AckPolicy) -> int:
        """The highest seq held by as many copies as ``policy`` requires: the master's own and
        ``required`` replicas'. With a journal the master's copy counts only once on its disk,
        so `majority` means "on disk on a majority", and a lone node answers after its fsync."""
        need = policy.required(len(self.members), self.configured)
        local = self.log.last_seq if self.local_durable is None else self.local_durable
        if decisions.ON:
            self._note_commit(need, local)
        if need == 0:
            return local
        acked = sorted([r.acked for r in self.replicas.values()] + [local], reverse=True)
        return acked[need] if len(acked) > need else 0

    def _note_commit(self, need: int, local: int) -> None:
        """master.commit_count (one copy fewer) and master.own_copy (the master's copy counted
        once in memory): what ``_committed`` would say instead (decisions.py)."""
        def committed(own: int, copies: int) -> int:
            if copies == 0:
                return own
            held = sorted([r.acked for r in self.replicas.values()] + [own], reverse=True)
            return held[copies] if len(held) > copies else 0
        actual = committed(local, need)
        if need > 0:
            decisions.note("master.commit_count", committed(local, need - 1) != actual)
        if self.local_durable is not None:
            decisions.note("master.own_copy", committed(self.log.last_seq, need) != actual)

    def _completions(self) -> list[Action]:
        done: list[int] = []
        for policy, waiting in self._waiting.items():
            if not waiting:
                continue
            committed = self._committed(policy)
            while waiting and waiting[0][0] <= committed:
                done.append(waiting.popleft()[1])
        return [Complete(tuple(done))] if done else []

    def _lag_ms(self, r: ReplicaProgress, now_ms: int) -> int:
        oldest = self.log.get(r.acked + 1)
        return now_ms - oldest.created_ms if oldest is not None else 0

    def _flow_control(self, now_ms: int) -> list[Action]:
        lim = self.limits
        worst_batches = worst_ms = 0
        for r in self.replicas.values():
            if r.connected and r.caught_up and not r.needs_transfer:
                worst_batches = max(worst_batches, self.log.last_seq - r.acked)
                worst_ms = max(worst_ms, self._lag_ms(r, now_ms))
        if decisions.ON:
            self._note_throttle(worst_batches, worst_ms, now_ms)
        if not self._throttling and (worst_batches > lim.throttle_lag_batches or worst_ms > lim.throttle_lag_ms):
            self._throttling = True
            return [Throttle(True)]
        if self._throttling and worst_batches <= lim.throttle_lag_batches // 2 and worst_ms <= lim.throttle_lag_ms // 2:
            self._throttling = False
            return [Throttle(False)]
        return []

    def _note_throttle(self, worst_batches: int, worst_ms: int, now_ms: int) -> None:
        """master.throttle_reachable: the throttle's next state if every replica counted."""
        alt_b, alt_ms = worst_batches, worst_ms
        for r in self.replicas.values():
            if not (r.connected and r.caught_up and not r.needs_transfer):   # one the decision left out
                alt_b = max(alt_b, self.log.last_seq - r.acked)
                # _lag_ms's lookup through ``since``, so that log.lookup counts only the real lookups
                held = self.log.since(r.acked + 1, 1)
                if held:
                    alt_ms = max(alt_ms, now_ms - held[0].created_ms)
        if alt_b == worst_batches and alt_ms == worst_ms:
            decisions.note("master.throttle_reachable", False)
            return
        lim = self.limits

        def after(b: int, ms: int) -> bool:
            on = self._throttling
            if not on and (b > lim.throttle_lag_batches or ms > lim.throttle_lag_ms):
                return True
            if on and b <= lim.throttle_lag_batches // 2 and ms <= lim.throttle_lag_ms // 2:
                return False
            return on
        decisions.note("master.throttle_reachable", after(alt_b, alt_ms) != after(worst_batches, worst_ms))
