"""What one replication group decides on the node's event loop, sans-I/O: the group core.

A group is a replicated store: a storage, the replication core that streams its mutations
(replication/core.py: the stream, the master-change sync, transfers), and the operations waiting
for their ack policy. GroupCore holds one and decides, for it:

* **Client operations.** ``execute`` runs a command the node's gating let through, and answers it
  once its ack policy is met (``Complete``).
* **Flow control.** While a reachable, caught-up replica lags too far (the master core says so),
  producers (SendMessage and SendMessageBatch) are refused with ``Throttled`` before anything
  runs.
* **Per-queue ack policies.** A queue tagged ``elasticmq-py:ack-policy`` is replicated under that
  policy; the cluster's otherwise (cluster/queue_policies.py).
* **The abandon delay.** When the node stops being active, operations still waiting for their
  ack policy are not failed at once: a lapse under load can be a few heartbeats long, and an
  operation whose batch a majority acks meanwhile is as durable as any (no minority can collect
  those acks). Only if the node stays inactive for ``leader_fallback`` are they told "outcome
  unknown". A view change fails them at once.
* **Ack coalescing and group commit.** Acks produced while frames are handled, and operations
  executed, within one turn of the loop go out at its end (``flush``): one cumulative ack per
  master and one batch per replica. ``FlushDue`` asks the runtime for that end of turn.
* **The journal.** The log's entries and resets go to the journal (``Persist``, ``PersistReset``);
  a replica acks, and a master counts its own copy, only once the journal reports them durable
  (``persisted``), and a finished transfer is acked only once the journal holds the new state.
  Compaction snapshots are taken in steps (cluster/compaction.py).
* **The truncate marker.** A member amnesiac because `journal truncate` dropped entries it had
  fsynced has the marker removed (``ForgetDropped``) once its amnesia clears and its journal
  holds, durably, what it caught up to.
* **The hand-on.** An amnesiac Raft leader whose sync cannot finish hands leadership on.
* **Handover and resignation** (several groups, cluster/group_handover.py). ``hand_over`` is
  today's step-down, per group; a master whose group lease stays lapsed resigns the group.
* **Moves between groups** (several groups, cluster/group_moves.py): the serving master's move
  driver, whose steps run as the master's own operations under ``majority``.
* The master's time acting through replicated ``Tick`` commands, and the master's
  ``replication`` history line.

The group reads what is node-wide from its node (cluster/node_core.py): the membership core (is
the node active, does it lead Raft), the peers' liveness and the journal's failure; it tells the
node's membership core when its sync opens the replication gate, and when it steps down.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from storage import Storage
from storage.catalogue import StoragesCatalogue
from storage.commands import Command, SendMessage, SendMessageBatch, Tick
from storage.errors import SqsError

from cluster import decisions
from cluster.compaction import Compactor
from cluster.errors import MasterChanged, NotStored, Throttled
from cluster.group_handover import GroupHandover
from cluster.group_moves import MOVE_FRAMES, GroupMoves
from cluster.membership import GateOpened, Record, StepDown, View
from cluster.node_actions import (
    Action, Answer, FlushDue, ForgetDropped, Persist, PersistReset, ServingChanged, ThrottleChanged, ToRaft,
    TransferLeadership,
)
from cluster.queue_policies import TAG_CHANGES, QueuePolicies
from cluster.replication.core import Abandoned, Note, ReplicationCore, Serving, StorageReplaced
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.messages import Ack, AckPolicy, Complete, FlushAt, Rejected, Send, SnapshotAck, Throttle

if TYPE_CHECKING:
    from cluster.group_mastery import GroupMastery
    from cluster.node_core import NodeCore

REPLICATION_GATE = "replication"
STORAGE_TICK_S = 1.0          # how often the master lets time act (retention, dedup windows, moves)
PROGRESS_EVERY_S = 1.0        # the master's `replication` history line, at most this often

_PRODUCERS = (SendMessage, SendMessageBatch)
_INTERNAL = object()          # the token of the master's own Tick operations

# Planted bugs this core knows (cluster/plantable.py): never set in production.
BUGS = frozenset({"abandon-as-success", "batches-unthrottled", "ack-before-fsync"})


class GroupCore:
    def __init__(self, node: NodeCore, storage: Storage, new_storage: Callable[[], Storage], *,
                 log: ReplicationLog, amnesiac: bool, entries_dropped: bool, bugs: frozenset[str],
                 index: int = 0, mastery: GroupMastery | None = None) -> None:
        self.node = node
        self.index = index
        # Who masters this group and whether it is active, with several groups
        # (cluster/group_mastery.py); None: the node's Raft leadership decides, as for one group.
        self.mastery = mastery
        settings = node.settings
        self.settings = settings
        self.bugs = bugs & BUGS
        self.journaled = settings.journal
        self.replication = ReplicationCore(
            node.name, storage, new_storage, log=log, policy=settings.policy,
            limits=settings.limits, configured=len(node.members), transfer=settings.transfer,
            bugs=bugs, amnesiac=amnesiac,
            # what a journaled node starts with was read from its disk; the planted bug acks and
            # answers what is merely written, as if no journal were waited for
            durable_seq=log.last_seq if settings.journal and "ack-before-fsync" not in bugs else None)
        self.throttling = False
        self.rejected = 0
        self._policies = QueuePolicies(settings.policy)
        # op id -> (token, result, changed, the error to answer instead of the result)
        self._pending: dict[int, tuple[Any, Any, bool, SqsError | None]] = {}
        self._op_ids = itertools.count(1)
        self.flush_due = False
        self._acks: dict[str, Ack] = {}
        self._serving = False                # what ServingChanged last said
        self._abandon_at: float | None = None
        self._next_storage_tick = 0.0
        self._sync_stuck_since: float | None = None
        self._progress: tuple | None = None
        self._progress_at = float("-inf")
        self.last_transfer_at: float | None = None
        # the journal (settings.journal): this group's writes not yet durable, (token, seq, is_reset);
        # tokens are the node's (node.tokens): one journal takes every group's writes, in order
        self._unpersisted: deque[tuple[int, int, bool]] = deque()
        self._resets_pending = 0
        self._held_acks: dict[str, Ack] = {}            # acks beyond what is durable, per master
        self._durable_parts: dict[str, Ack] = {}        # durable acks a newer one displaced, for the flush
        self._held_snapshot_acks: list[tuple[int, Send]] = []   # (reset token, the transfer's last ack)
        # the journal holds `journal truncate`'s marker (``entries_dropped``): once amnesia clears,
        # it goes (ForgetDropped) when the journal holds the log up to ``_forget_at`` durably
        self._entries_dropped = entries_dropped
        self._forget_at: int | None = None
        self.compactor = Compactor(settings.snapshot_min_bytes, settings.snapshot_step_bytes,
                                   settings.snapshot_blob_records)
        self.handover = GroupHandover(self)     # several groups: giving the group up
        self.moves = GroupMoves(self)           # several groups: moves to and from the others
        if mastery is not None:
            self.replication.group = index
            mastery.follow(self.replication.following)

    # -- queries ---------------------------------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self.replication.storage

    def pending_ops(self) -> int:
        return len(self._pending)

    def held_ack(self, master: str) -> Ack | None:
        """The ack this replica holds back from ``master`` until its journal holds what it acks."""
        return self._held_acks.get(master)

    def being_restored(self) -> bool:
        """A state transfer from a connected master is bringing this group up."""
        rec = self.replication.receiver
        return rec is not None and rec.staging is not None and self.node.liveness.connected(rec.master)

    # -- events ----------------------------------------------------------------------------------

    def execute(self, token: Any, command: Command, now: float, out: list[Action]) -> None:
        """Run ``command`` (the node's gating let it through); its ``Answer`` comes once its ack
        policy is met (maybe among ``out`` now)."""
        if self.throttling and isinstance(command, _PRODUCERS) \
                and not ("batches-unthrottled" in self.bugs and type(command) is SendMessageBatch):
            out.append(Answer(token, None, Throttled(
                "a replica lags too far behind; the master slows producers until it catches up")))
            return
        policy = self._policies.of(command, self.replication.storage, out)
        error: SqsError | None = None
        try:
            result, mutations = self.replication.storage.execute(command)
        except SqsError as e:
            if not e.applied:
                out.append(Answer(token, None, e))
                return
            # It failed after changing the state (a storage bug): the replicas must get the same
            # change; its client gets the error once they have it.
            result, mutations, error = None, list(e.applied), e
        if mutations and isinstance(command, TAG_CHANGES):
            self._policies.clear()   # rare: the next command of each queue reads its tags again
        # Every operation goes through the stream, those without mutations too: a FIFO send that
        # deduplication turns into a no-op answers with a message only this master may hold yet,
        # and must wait for what came before it.
        op = next(self._op_ids)
        self._pending[op] = (token, result, bool(mutations), error)
        staged = self.replication.submit(op, mutations, policy)
        if staged:   # most often nothing yet: the operation waits in the stage for its batch
            self._replication(staged, now, out)
        if mutations and not self.flush_due:
            self.flush_due = True
            out.append(FlushDue())

    def frame(self, sender: str, frame: Any, now: float, out: list[Action]) -> None:
        """A frame of the stream for the replication core (with several groups, the group's
        mastery sees it first: its beats, and a new master's sync request, which it may hold)."""
        m = self.mastery
        if m is not None:
            if type(frame) in MOVE_FRAMES:
                self.moves.frame(sender, frame, now, out)
                return
            handled, sends = m.on_frame(sender, frame, now)
            for to, f in sends:
                out.append(Send(to, f, self.index))
            if handled:
                self.serving_check(now, out)
                return
        self._replication(self.replication.on_frame(sender, frame, int(now * 1000)), now, out)

    def install_view(self, view: View, now: float, out: list[Action]) -> None:
        m = self.mastery
        if m is None:
            master, epoch = view.master, view.epoch
        elif not view.groups:
            return     # no group has a master before the first view that assigns them
        else:
            master, epoch = view.groups[self.index]
            m.install(master, epoch, now, view.view_id)
            self.handover.view_installed(master, epoch)
            if m.stale:
                return     # it follows whoever the next view names
            if master == self.node.name:
                self._replication(self.replication.install_view(
                    master, epoch, view.members, int(now * 1000), m.counts_self_from_ms(epoch)), now, out)
                return
        self._replication(self.replication.install_view(master, epoch, view.members, int(now * 1000)), now, out)

    def activity_changed(self, active: bool, now: float) -> None:
        self._abandon_at = None if active else now + self.node.timing.leader_fallback

    def on_peer(self, peer: str, up: bool, now: float, out: list[Action]) -> None:
        self._replication(self.replication.on_peer(peer, up, int(now * 1000)), now, out)

    def tick(self, now: float, out: list[Action]) -> None:
        """The replication core's timers (with several groups: the master's beats, and the sync
        requests the guard held, once due)."""
        m = self.mastery
        if m is not None:
            for to, f in m.tick(now):
                out.append(Send(to, f, self.index))
            for sender, f in m.due(now):
                self.frame(sender, f, now, out)
        self._replication(self.replication.on_tick(int(now * 1000)), now, out)

    def abandon_due(self, now: float, out: list[Action]) -> None:
        """The abandon delay ran out: fail what still waits, unless the node is active again."""
        if self._abandon_at is not None and now >= self._abandon_at:
            self._abandon_at = None
            node = self.node
            if not (node.membership.evaluate(now)[0] if self.mastery is None else self.serving_now(now)):
                self.abandon(f"{node.name} stopped being the active master before the ack policy was met", out)

    def upkeep(self, now: float, out: list[Action]) -> None:
        """Once a tick: time acting on the master's storage, the progress line, the hand-on check
        (with several groups: the moves to and from other groups, the handover's progress and the
        resignation check)."""
        if self.settings.storage_ticks and now >= self._next_storage_tick and self.node.serving(now, self.index):
            self._storage_tick(now, out)
        self._progress_line(now, out)
        if self.mastery is None:
            self._hand_on_check(now, out)
        else:
            self.moves.step(now, out)
            self.handover.step(now, out)
            self.handover.resign_check(now, out)

    def hand_over(self, to: str | None, now: float, out: list[Action], epoch: int | None = None) -> bool:
        """Hand the group over to ``to`` (None: a caught-up replica): today's step-down, per group
        (cluster/group_handover.py). False, with nothing done, unless this node is the group's
        serving master (in ``epoch``, when given) and ``to`` another member."""
        return self.handover.start(to, now, out, epoch)

    def cut_staged(self, now: float, out: list[Action]) -> None:
        """Cut every operation executed here into the log now, held or not."""
        self._replication(self.replication.cut_staged(int(now * 1000)), now, out)

    def reason(self, now: float) -> str:
        """Why this node does not serve the group (several groups), or that it does."""
        handing = self.handover.reason() if self.node.journal_error is None else None
        return handing or self.mastery.reason(   # type: ignore[union-attr]
            now, self.replication.serving, self.node.journal_error)

    def end_tick(self, now: float, out: list[Action]) -> None:
        """A compaction step; then the flush, should the runtime have lost its FlushDue."""
        self._snapshot_step(now, out)
        if self.flush_due:
            # FlushDue is asked for once per batch; should the runtime lose it, the staged
            # operations go out at the next tick instead of waiting forever
            out += self.flush(now)

    def flush(self, now: float) -> list[Action]:
        """The end of a turn of the loop: cut the staged operations into one batch, and send the
        newest ack per master."""
        self.flush_due = False
        out: list[Action] = []
        self._replication(self.replication.flush(int(now * 1000)), now, out)
        if self._acks:
            acks, self._acks = self._acks, {}
            parts = self._durable_parts
            if parts:
                self._durable_parts = {}
            durable = self.replication.durable_seq
            for to, ack in acks.items():
                if decisions.ON and durable is not None:
                    decisions.note("group.durable_ack", durable < ack.seq)
                if durable is not None and ack.seq > durable:
                    # a replica acks only what its journal holds: ``persisted`` sends it then
                    self._held_acks[to] = ack
                    part = parts.get(to)
                    if part is not None:
                        if decisions.ON:
                            decisions.note("group.durable_part", part.epoch == ack.epoch)
                        if part.epoch == ack.epoch:
                            out.append(Send(to, part, self.index))
                else:
                    held = self._held_acks.get(to)
                    if held is not None and (held.epoch != ack.epoch or held.seq <= ack.seq):
                        del self._held_acks[to]
                    # else ``persisted`` sent the durable part of ``held``: the rest stays held
                    out.append(Send(to, ack, self.index))
        return out

    def persisted(self, token: int, now: float) -> list[Action]:
        """The journal made every write up to ``token`` durable (as its fsync policy promises)."""
        out: list[Action] = []
        seq = None
        while self._unpersisted and self._unpersisted[0][0] <= token:
            tok, seq, is_reset = self._unpersisted.popleft()
            if is_reset:
                self._resets_pending -= 1
                out += [send for t, send in self._held_snapshot_acks if t == tok]
                self._held_snapshot_acks = [(t, send) for t, send in self._held_snapshot_acks if t != tok]
        if seq is None or self._resets_pending or self.replication.durable_seq is None:
            return out   # positions of a history a later reset replaced mean nothing now
        self._replication(self.replication.persisted(seq, int(now * 1000)), now, out)
        for to, ack in list(self._held_acks.items()):
            part = Ack(ack.epoch, min(ack.seq, seq)) if ack.seq > seq else ack
            waiting = self._acks.get(to)
            if waiting is not None and (waiting.epoch != part.epoch or waiting.seq > part.seq):
                # A newer ack waits for this turn's flush, which holds it again should the
                # journal lack it; the part of the held one that is durable now goes all the same
                # (left to the next report, it waited a whole fsync more).
                self._keep_part(to, part)
                continue
            if decisions.ON and waiting is not None:
                # an earlier report's part waits: this one's goes instead (the alternative kept that)
                decisions.note("group.durable_part", part.seq > waiting.seq)
            if not self._acks and not self.flush_due:
                self.flush_due = True
                out.append(FlushDue())
            self._acks[to] = part
        return out

    def journal_failed(self, reason: str, now: float, out: list[Action]) -> None:
        """The node's journal failed: waiting operations get "not stored", and nothing held is
        acked any more."""
        pending, self._pending = self._pending, {}
        node = self.node
        for token, _, _, _ in pending.values():
            if token is not _INTERNAL:
                out.append(Answer(token, None, NotStored(f"not stored: the journal of {node.name} failed ({reason})")))
        self._held_acks.clear()
        self._durable_parts.clear()
        self.compactor.abort()
        self.serving_check(now, out)

    def abandon(self, reason: str, out: list[Action]) -> None:
        pending, self._pending = self._pending, {}
        as_success = "abandon-as-success" in self.bugs
        for token, result, changed, error in pending.values():
            if token is _INTERNAL:
                continue
            if as_success:
                out.append(Answer(token, result, error, changed))
            else:
                out.append(Answer(token, None, MasterChanged(reason)))

    def serving_now(self, now: float) -> bool:
        """With several groups: this node is the group's active master, synchronised."""
        return self.replication.serving and self.node.journal_error is None \
            and self.handover.stopped != self.mastery.epoch and self.mastery.active(now)   # type: ignore[union-attr]

    def serving_check(self, now: float, out: list[Action]) -> None:
        node = self.node
        m = self.mastery
        if m is None:
            serving = self.replication.serving and node.membership.active and node.journal_error is None
        else:
            serving = self.serving_now(now)
        if serving != self._serving:
            self._serving = serving
            self._policies.clear()
            out.append(ServingChanged(serving))
            if m is not None:
                # the membership core says this for the one group a Raft leader masters
                at = now if serving else m.inactive_since(now)
                self.activity_changed(serving, at)
                out.append(Record(at, "activated" if serving else "deactivated", self._fields(
                    {"reason": self.reason(now), "epoch": m.epoch})))

    # -- internals ---------------------------------------------------------------------------------

    def _fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """A history line's fields, naming the group when the node has several."""
        if self.mastery is not None:
            fields["group"] = self.index
        return fields

    def _keep_part(self, to: str, part: Ack) -> None:
        """``part`` is durable and unsent, and a newer ack the journal lacks takes (or keeps) its
        place for this turn's flush: the flush sends ``part`` when it holds that one."""
        kept = self._durable_parts.get(to)
        if kept is None or kept.epoch != part.epoch or kept.seq < part.seq:
            self._durable_parts[to] = part

    def _replication(self, actions: list[Any], now: float, out: list[Action]) -> None:
        # A transfer that finished here is acked (its last chunk) only once the journal holds the
        # new state: the master counts the member as holding everything up to the snapshot then.
        # (A resent last chunk is acked again meanwhile: held too.)
        hold = self.replication.durable_seq is not None \
            and (self._resets_pending > 0 or any(type(a) is StorageReplaced for a in actions))
        held: list[Send] = []
        for a in actions:
            t = type(a)
            if t is Send:
                if self.index:
                    a = Send(a.to, a.frame, self.index)
                if hold and type(a.frame) is SnapshotAck:
                    held.append(a)
                elif type(a.frame) is Ack:
                    if not self._acks and not self.flush_due:
                        self.flush_due = True
                        out.append(FlushDue())
                    waiting = self._acks.get(a.to)
                    durable = self.replication.durable_seq
                    if waiting is not None and durable is not None and waiting.epoch == a.frame.epoch \
                            and waiting.seq <= durable < a.frame.seq:
                        # the journal holds the waiting ack (a report's part), not this newer
                        # one, which the flush will hold: the waiting one goes all the same
                        self._keep_part(a.to, waiting)
                    self._acks[a.to] = a.frame
                else:
                    out.append(a)
            elif t is Complete:
                pending = self._pending
                for op in a.op_ids:
                    entry = pending.pop(op, None)
                    if entry is not None and entry[0] is not _INTERNAL:
                        out.append(Answer(entry[0], entry[1], entry[3], entry[2]))
            elif t is FlushAt:
                # half a millisecond late: the flush reads its clock as whole milliseconds
                out.append(FlushDue((a.at_ms + 0.5) / 1000))
            elif t is Throttle:
                self._set_throttle(a.on, out, now)
            elif t is Abandoned:
                self.abandon(a.reason, out)
                self._set_throttle(False, out, now)
            elif t is Serving:
                self._policies.clear()
                if a.on:
                    if self.mastery is None:
                        self.node.membership_event(GateOpened(now, REPLICATION_GATE, a.epoch), now, out)
                    else:
                        self.mastery.opened(a.epoch)
            elif t is Note:
                if a.event == "transfer-finished":
                    self.last_transfer_at = now
                elif a.event == "caught-up" and self._entries_dropped:
                    self._forget_at = self.replication.log.last_seq
                # started_ms is this node's clock: meaningless to a reader of the history
                out.append(Record(now, a.event.replace("-", "_"),
                                  self._fields({k: v for k, v in a.fields.items() if k != "started_ms"})))
            elif t is StorageReplaced:
                self._policies.clear()
                if self.mastery is not None:
                    storages = self.node.storages
                    storages[self.index] = a.storage
                    a.storage.catalogue = StoragesCatalogue(storages, self.index)
                out.append(a)
            elif t is Rejected:
                self.rejected += 1
                out.append(a)
        if self.journaled:
            self._journal(out)
            if held:
                reset = next(tok for tok, _, is_reset in reversed(self._unpersisted) if is_reset)
                self._held_snapshot_acks += [(reset, send) for send in held]
            if self._forget_at is not None:
                self._forget_check(self._forget_at, out)
        self.serving_check(now, out)

    def _forget_check(self, caught_up_at: int, out: list[Action]) -> None:
        """The marker goes once the journal holds what amnesia cleared with: removed earlier, a
        crash could leave a journal without entries this node acknowledged, and no marker."""
        durable = self.replication.durable_seq
        if self._resets_pending or self.node.journal_error is not None \
                or (durable is not None and durable < caught_up_at):
            return
        self._entries_dropped = False
        self._forget_at = None
        # the marker is the node's: with several groups it goes once every group is caught up
        if not any(g._entries_dropped for g in self.node.groups):
            out.append(ForgetDropped())

    def _journal(self, out: list[Action]) -> None:
        """Hand what the log took since the last call to the journal, in order."""
        entries: list[Entry] = []
        for change in self.replication.log.drain():
            if type(change) is Entry:
                entries.append(change)
                continue
            self._persist(entries, out)
            entries = []
            tok = next(self.node.tokens)
            out.append(PersistReset(tok, change.seq, change.epoch, change.blobs, self.index))
            self._unpersisted.append((tok, change.seq, True))
            self._resets_pending += 1
            self.compactor.replaced(sum(len(b) for b in change.blobs))
        self._persist(entries, out)

    def _persist(self, entries: list[Entry], out: list[Action]) -> None:
        if not entries:
            return
        tok = next(self.node.tokens)
        out.append(Persist(tok, tuple(entries), self.index))
        self._unpersisted.append((tok, entries[-1].seq, False))
        self.compactor.journaled(sum(len(e.mutations) for e in entries))

    def _snapshot_step(self, now: float, out: list[Action]) -> None:
        if not self.journaled or self.node.journal_error is not None or not self.compactor.due:
            return
        # Each read must see no more than the log holds: the master's executed operations are
        # cut into a batch first, even while the batching hold would keep them (otherwise a
        # restart could hold changes no log entry carries).
        self._replication(self.replication.cut_staged(int(now * 1000)), now, out)
        snap = self.compactor.step(self.storage, self.replication.log)
        if snap is not None:
            out.append(snap if not self.index else replace(snap, group=self.index))

    def _set_throttle(self, on: bool, out: list[Action], now: float) -> None:
        if on != self.throttling:
            self.throttling = on
            out.append(ThrottleChanged(on))
            out.append(Record(now, "throttle", self._fields({"on": on})))

    def _hand_on_check(self, now: float, out: list[Action]) -> None:
        """An amnesiac Raft leader whose sync cannot finish with the members it reaches hands
        leadership to a member that answered with its memory intact. Without this, a node that
        restarted empty into a bridge and won Raft through the bridging member would hold the
        whole group without a master until the bridge healed: the members beyond the bridge,
        which its sync needs, can elect nobody while it leads them (the simulator's seed 103
        plays this). The wait is the connection timeout: a member not heard from for that long
        is unreachable."""
        sync = self.replication.sync
        node = self.node
        m = node.membership
        to = None
        if sync is not None and m.role == "leader" and m.abdicated_term != m.term:
            liveness = node.liveness
            to = sync.hand_on_to(frozenset(p for p in liveness.peers if liveness.connected(p)))
        if to is None:
            self._sync_stuck_since = None
            return
        if self._sync_stuck_since is None:
            self._sync_stuck_since = now
        elif now - self._sync_stuck_since >= node.timing.connection_timeout:
            self._sync_stuck_since = None
            out.append(Record(now, "hand_on", {"to": to, "term": m.term,
                                               "reason": "amnesiac, and its sync lacks a majority it can reach"}))
            node.membership_event(StepDown(now), now, out)
            out.append(ToRaft(TransferLeadership(to)))

    def _storage_tick(self, now: float, out: list[Action]) -> None:
        """Let time act on the master: its effects are replicated like a client's operation."""
        result = self.execute_internal(Tick(), self.settings.policy, now, out)
        # Hitting the cap means more is due: tick again at the next core tick.
        self._next_storage_tick = now if result.effects >= Tick().max_effects else now + STORAGE_TICK_S

    def execute_internal(self, command: Command, policy: AckPolicy, now: float, out: list[Action]) -> Any:
        """Run the master's own ``command`` (a ``Tick``, a move's step) on the storage and
        replicate its effects under ``policy``; nobody waits for its answer."""
        result, mutations = self.replication.storage.execute(command)
        if mutations:
            op = next(self._op_ids)
            self._pending[op] = (_INTERNAL, None, True, None)
            self._replication(self.replication.submit(op, mutations, policy), now, out)
            if not self.flush_due:
                self.flush_due = True
                out.append(FlushDue())
        return result

    def _progress_line(self, now: float, out: list[Action]) -> None:
        """The master's `replication` history line: each replica's acknowledged position and lag,
        at most once a second and only when something moved (the acks without a line per ack)."""
        mc = self.replication.master_core
        if mc is None or now - self._progress_at < PROGRESS_EVERY_S:
            return
        st = mc.status(int(now * 1000))
        progress = (st["epoch"], tuple((k, r["acked_seq"], r["connected"]) for k, r in sorted(st["replicas"].items())))
        if progress == self._progress:
            return
        self._progress, self._progress_at = progress, now
        out.append(Record(now, "replication", self._fields({
            "epoch": st["epoch"], "last_seq": st["last_seq"],
            "replicas": {k: {"acked_seq": r["acked_seq"], "lag_batches": r["lag_batches"],
                             "lag_ms": r["lag_ms"], "connected": r["connected"]}
                         for k, r in sorted(st["replicas"].items())}})))
