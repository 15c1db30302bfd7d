"""Everything one member decides on its event loop, sans-I/O: the node core.

NodeCore composes the membership core (views, the lease, activity: membership.py), the replication
core (the stream, the master-change sync, transfers: replication/core.py), the stream's peer
liveness (replication/liveness.py) and the table of forwarded requests (forwards.py), and decides
what no runtime may:

* **Request gating.** ``route`` says whether this node answers a client itself (it is the active
  master: Raft leader with a fresh lease, its view committed, synchronised), forwards it to the
  master of its view (only while that master is connected), or refuses it with the reason; and
  ``execute`` checks again before anything runs. A member of a minority partition therefore
  never answers a write or a receive with success.
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
* **Stand-or-not.** While a state transfer from a connected master is bringing this node up, it
  tells the election core (on Raft's thread) not to stand: a joiner starved by restoring misses
  heartbeats, and standing then would depose the healthy master, which would have to pull the
  whole state first.
* **The fence** (cluster/election.py): asked before a leader lets a higher-term vote request
  through, it stops being active for its term at once and says so.
* **Ack coalescing and group commit.** Acks produced while frames are handled, and operations
  executed, within one turn of the loop go out at its end (``flush``): one cumulative ack per
  master and one batch per replica. ``FlushDue`` asks the runtime for that end of turn.
* **Forwarding.** Gating says where a request goes; the requests this node forwarded wait in
  ``Forwards`` (cluster/forwards.py) until answered or failed; a request forwarded to this node
  runs once, however often its frame arrives.
* **The truncate marker.** A member amnesiac because `journal truncate` dropped entries it had
  fsynced has the marker removed (``ForgetDropped``) once its amnesia clears and its journal
  holds, durably, what it caught up to.
* The master's time acting through replicated ``Tick`` commands, and the master's
  ``replication`` history line.

Events are method calls that return actions (cluster/node_actions.py); time is passed in
(seconds, float). Both runtimes bind this same class: cluster/replicated.py to ZeroMQ,
pysyncobj's thread and the event loop, sim/node.py to the simulated network and clock. The
Raft-thread half of the node's decisions is cluster/election.py; the two exchange only the
events below ("events from the Raft thread") and the values a ``ToRaft`` action carries.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from storage import Storage
from storage.commands import Command, SendMessage, SendMessageBatch, Tick
from storage.errors import SqsError

from cluster import decisions
from cluster.compaction import RECORDS_PER_BLOB, STEP_BYTES, Compactor
from cluster.config import Timing
from cluster.errors import MasterChanged, NotServing, NotStored, Throttled
from cluster.forwards import Forwards
from cluster.membership import (
    ActivityChanged, DeliverView, Fenced, GateOpened, LeaseAck, MembershipCore, ProposeView, RaftSample,
    Record, StepDown, TimePassed, View, ViewCommitted,
)
from cluster.node_actions import (
    LOCAL, Action, Answer, FenceDone, FlushDue, ForgetDropped, ForwardFailed, ForwardTo, MayStand, Persist,
    PersistReset, Refuse, Route, ServeForwarded, ServingChanged, ThrottleChanged, ToRaft, TransferLeadership, Warn,
)
from cluster.plantable import check_bugs
from cluster.queue_policies import TAG_CHANGES, QueuePolicies
from cluster.replication.core import (
    Abandoned, Note, ReplicationCore, Serving, StorageReplaced, TransferSettings,
)
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.master import Limits
from cluster.replication.messages import (
    Ack, AckPolicy, Complete, FlushAt, Forward, ForwardReply, Rejected, Send, SnapshotAck, SnapshotChunk, Throttle,
)
from cluster.replication.liveness import PeerLiveness
from cluster.replication.wire import Heartbeat

REPLICATION_GATE = "replication"
STORAGE_TICK_S = 1.0          # how often the master lets time act (retention, dedup windows, moves)
FORWARD_IDS_KEPT = 10_000     # per forwarder: far more than can be in flight within the forward timeout
PROGRESS_EVERY_S = 1.0        # the master's `replication` history line, at most this often

_PRODUCERS = (SendMessage, SendMessageBatch)
_INTERNAL = object()          # the token of the master's own Tick operations

# Planted bugs this core knows (cluster/plantable.py): never set in production.
BUGS = frozenset({"abandon-as-success", "minority-answers", "batches-unthrottled", "ack-before-fsync"})


@dataclass(frozen=True, slots=True)
class CoreSettings:
    """What a node core is told at start (the same on every member)."""

    timing: Timing
    policy: AckPolicy = AckPolicy.MAJORITY
    forward: bool = True
    limits: Limits = Limits()
    transfer: TransferSettings = TransferSettings()
    log_limit_bytes: int = 64 * 1024 * 1024
    storage_ticks: bool = True
    # A journal: the node persists its log (Persist actions) and acks, answers and serves only
    # what its journal reports durable (``persisted``). Compaction snapshots are taken once the
    # journal grew by max(snapshot_min_bytes, the last snapshot's size) since the last one.
    journal: bool = False
    snapshot_min_bytes: int = 64 * 1024 * 1024
    snapshot_step_bytes: int = STEP_BYTES          # how much a compaction step reads
    snapshot_blob_records: int = RECORDS_PER_BLOB


def restarts_amnesiac(restarted: bool, fsync: str | None, journal_existed: bool = False,
                      entries_dropped: bool = False) -> bool:
    """Whether a node starts amnesiac (replication/core.py): its Raft state says it was a member
    (``restarted``), and what it acknowledged then may be gone. Only a journal with
    ``fsync = always`` (``fsync`` None: no journal) keeps all of it, and only a journal that was
    there before, whole: a lost data-dir is a lost memory, and so are the fsynced entries that
    `journal truncate` dropped from a damaged one (``entries_dropped``: its marker is there)."""
    return restarted and not (fsync == "always" and journal_existed and not entries_dropped)


class NodeCore:
    def __init__(self, name: str, members: tuple[str, ...], settings: CoreSettings, storage: Storage,
                 new_storage: Callable[[], Storage], *, incarnation: int, amnesiac: bool = False,
                 entries_dropped: bool = False, log: ReplicationLog | None = None,
                 bugs: frozenset[str] = frozenset()) -> None:
        all_bugs = check_bugs(bugs)
        self.bugs = all_bugs & BUGS
        self.name = name
        self.settings = settings
        t = settings.timing
        self.timing = t
        self.members = tuple(sorted(members))
        self.membership = MembershipCore(name, t, frozenset({REPLICATION_GATE}), configured=frozenset(self.members))
        if log is None:
            log = ReplicationLog(settings.log_limit_bytes, journaled=settings.journal)
        assert (log.unjournaled is not None) == settings.journal, "a journaled node needs a journaled log"
        self.journaled = settings.journal
        self.replication = ReplicationCore(
            name, storage, new_storage, log=log, policy=settings.policy,
            limits=settings.limits, configured=len(self.members), transfer=settings.transfer,
            bugs=all_bugs, amnesiac=amnesiac,
            # what a journaled node starts with was read from its disk; the planted bug acks and
            # answers what is merely written, as if no journal were waited for
            durable_seq=log.last_seq if settings.journal and "ack-before-fsync" not in all_bugs else None)
        self.liveness = PeerLiveness(tuple(m for m in self.members if m != name), incarnation,
                                     keepalive=t.keepalive, dead_after=t.connection_timeout)
        self.throttling = False
        self.rejected = 0
        self._policies = QueuePolicies(settings.policy)
        # op id -> (token, result, changed, the error to answer instead of the result)
        self._pending: dict[int, tuple[Any, Any, bool, SqsError | None]] = {}
        self._op_ids = itertools.count(1)
        self._flush_due = False
        self._acks: dict[str, Ack] = {}
        self._active_until = float("-inf")   # a yes from the membership core holds until then
        self._serving = False                # what ServingChanged last said
        self._abandon_at: float | None = None
        self._may_stand: bool | None = None
        self.forwards = Forwards()
        # per forwarder: (its incarnation, the request ids served, in arrival order)
        self._forwarded: dict[str, tuple[int | None, set[int], deque[int]]] = {}
        self._next_storage_tick = 0.0
        self._leader_contact: tuple[str, float] | None = None   # (Raft leader, when it last led us)
        self._sync_stuck_since: float | None = None
        self._progress: tuple | None = None
        self._progress_at = float("-inf")
        self.last_transfer_at: float | None = None
        # the journal (settings.journal): tokens of writes not yet durable, (token, seq, is_reset)
        self._tokens = itertools.count(1)
        self._unpersisted: deque[tuple[int, int, bool]] = deque()
        self._resets_pending = 0
        self._held_acks: dict[str, Ack] = {}            # acks beyond what is durable, per master
        self._durable_parts: dict[str, Ack] = {}        # durable acks a newer one displaced, for the flush
        self._held_snapshot_acks: list[tuple[int, Send]] = []   # (reset token, the transfer's last ack)
        self.journal_error: str | None = None
        # the journal holds `journal truncate`'s marker (``entries_dropped``): once amnesia clears,
        # it goes (ForgetDropped) when the journal holds the log up to ``_forget_at`` durably
        self._entries_dropped = entries_dropped
        self._forget_at: int | None = None
        self.compactor = Compactor(settings.snapshot_min_bytes, settings.snapshot_step_bytes,
                                   settings.snapshot_blob_records)

    # -- queries ---------------------------------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self.replication.storage

    @property
    def view(self) -> View | None:
        return self.membership.view

    def serving(self, now: float) -> bool:
        """The active master, synchronised: client operations run here. (``route`` and
        ``execute`` inline its first answer, from the lease it caches: keep them in step.)"""
        if not self.replication.serving or self.journal_error is not None:
            return False
        if "minority-answers" in self.bugs:
            return True
        if now < self._active_until:
            return True
        m = self.membership
        active = m.evaluate(now)[0]
        if decisions.ON:
            decisions.note("node.gating", not active)
        if active:
            self._active_until = m.lease_expiry()  # type: ignore[assignment]
        return active

    def route(self, now: float) -> Route:
        if (now < self._active_until and self.replication.serving and self.journal_error is None) \
                or self.serving(now):   # serving()'s first answer inline: once per client request
            return LOCAL
        reason = self.unavailable_reason(now)
        if not self.settings.forward:
            return Refuse(f"{reason} Forwarding is off (forward = false).")
        view = self.membership.view
        master = view.master if view is not None else None
        if master is None or master == self.name:
            return Refuse(reason)      # no master yet, or ourselves still synchronising
        if not self.liveness.connected(master):
            return Refuse(f"Node {self.name} cannot reach the master {master} (its stream link is down), "
                          "so it cannot forward.")
        if decisions.ON:
            decisions.note("node.forward_lead", not self._heard_lead(master, now))
        if not self._heard_lead(master, now):
            # Connected, but not leading us: it lost its majority (or we are cut off from it on
            # Raft's links). Forwarding would only collect its refusal.
            return Refuse(f"Node {self.name} has not heard from the master {master} as Raft leader within an "
                          "election timeout: the master may have lost its majority.")
        return ForwardTo(master)

    def _first_forward(self, sender: str, request_id: int) -> bool:
        """A forwarded request is executed once: a copy of its frame (delivered twice) would run
        a receive twice, hiding a message from the client behind a receipt it never got."""
        incarnation = self.liveness.peers[sender].incarnation
        seen = self._forwarded.get(sender)
        if seen is None or seen[0] != incarnation:
            # request ids restart with the forwarder's process: a new incarnation starts afresh
            seen = self._forwarded[sender] = (incarnation, set(), deque())
        _, ids, order = seen
        if decisions.ON:
            decisions.note("node.forward_once", ids.__contains__(request_id))
        if request_id in ids:
            return False
        ids.add(request_id)
        order.append(request_id)
        if len(order) > FORWARD_IDS_KEPT:
            ids.discard(order.popleft())
        return True

    def _heard_lead(self, master: str, now: float) -> bool:
        c = self._leader_contact
        t = self.timing
        return c is not None and c[0] == master and now - c[1] < t.election_min + t.heartbeat

    def unavailable_reason(self, now: float) -> str:
        if self.journal_error is not None:
            return f"Node {self.name} cannot store anything: its journal failed ({self.journal_error})."
        view = self.membership.view
        if view is None:
            return f"Node {self.name} has not joined a view of the cluster yet."
        if view.master != self.name:
            return f"Node {self.name} is not the master (the master is {view.master})."
        if not self.replication.serving:
            return f"Node {self.name} is the new master and is synchronising with a majority of the members."
        return f"Node {self.name} is the master but not active ({self.membership.evaluate(now)[1]})."

    def pending_ops(self) -> int:
        return len(self._pending)

    def forwards_in_flight(self) -> int:
        return len(self.forwards)

    # -- client operations -------------------------------------------------------------------------

    def execute(self, token: Any, command: Command, now: float) -> list[Action]:
        """Run ``command`` if this node is the serving master; its ``Answer`` comes once its ack
        policy is met (maybe among the actions returned now)."""
        out: list[Action] = []
        # serving()'s first answer, inline: this runs once per client operation
        if not (now < self._active_until and self.replication.serving and self.journal_error is None) \
                and not self.serving(now):
            self._time_passed(now, out)
            out.append(Answer(token, None, NotServing(self.unavailable_reason(now))))
            return out
        if self.throttling and isinstance(command, _PRODUCERS) \
                and not ("batches-unthrottled" in self.bugs and type(command) is SendMessageBatch):
            out.append(Answer(token, None, Throttled(
                "a replica lags too far behind; the master slows producers until it catches up")))
            return out
        policy = self._policies.of(command, self.replication.storage, out)
        error: SqsError | None = None
        try:
            result, mutations = self.replication.storage.execute(command)
        except SqsError as e:
            if not e.applied:
                out.append(Answer(token, None, e))
                return out
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
        if mutations and not self._flush_due:
            self._flush_due = True
            out.append(FlushDue())
        return out

    def forward(self, token: Any, payload: Any, now: float) -> list[Action]:
        """Hand a client request to the master (``route`` said ForwardTo)."""
        route = self.route(now)
        if type(route) is not ForwardTo:
            reason = route.reason if type(route) is Refuse else f"Node {self.name} is the master now."
            return [ForwardFailed(token, reason, sent=False)]
        return [self.forwards.send(token, route.master, payload, now)]

    def forward_unsent(self, request_id: int) -> list[Action]:
        """The runtime could not even queue a Forward frame: the master never saw the request, so
        its client may retry it safely now rather than after the forward timeout."""
        return self.forwards.unsent(request_id)

    def stopped(self, reason: str) -> list[Action]:
        """The node stops: waiting operations and forwards end with "outcome unknown"."""
        out: list[Action] = []
        self._abandon(reason, out)
        self.forwards.stop(reason, out)
        return out

    def step_down(self, now: float, to: str | None = None) -> list[Action]:
        """An operator's step-down: nothing (no actions) unless this node leads Raft and ``to``,
        if named, is another member."""
        if self.membership.role != "leader" or (to is not None and (to == self.name or to not in self.members)):
            return []
        out: list[Action] = []
        self._membership(StepDown(now), now, out)
        out.append(ToRaft(TransferLeadership(to)))
        return out

    # -- events from the Raft thread ---------------------------------------------------------------

    def raft_sample(self, sample: RaftSample) -> list[Action]:
        out: list[Action] = []
        self._membership(sample, sample.now, out)
        return out

    def leader_contact(self, leader: str, at: float) -> list[Action]:
        """Raft's thread says: ``leader`` led us at ``at``."""
        self._leader_contact = (leader, at)
        return []

    def lease_acked(self, peer: str, term: int, stamp: float, now: float) -> list[Action]:
        out: list[Action] = []
        self._membership(LeaseAck(now, peer, term, stamp), now, out)
        return out

    def view_committed(self, view: View, now: float) -> list[Action]:
        out: list[Action] = []
        self._membership(ViewCommitted(now, view), now, out)
        return out

    def fence(self, term: int, now: float) -> list[Action]:
        out: list[Action] = []
        self._membership(Fenced(now, term), now, out)
        out.append(ToRaft(FenceDone(term)))
        return out

    def members_changed(self, members: tuple[str, ...], now: float) -> list[Action]:
        """The Raft configuration changed at runtime (a member added or removed)."""
        self.members = tuple(sorted(members))
        self.replication.configured = len(self.members)
        out: list[Action] = []
        for peer, up in self.liveness.set_peers(tuple(m for m in self.members if m != self.name)):
            self._peer(peer, up, now, out)
        return out

    # -- events from the stream --------------------------------------------------------------------

    def frame(self, sender: str, frame: Any, now: float) -> list[Action]:
        out: list[Action] = []
        if not self.liveness.heard(sender, now):
            out.append(Rejected(sender, "not a member"))
            return out
        t = type(frame)
        if t is Heartbeat:
            for peer, up in self.liveness.heartbeat(sender, frame, now):
                self._peer(peer, up, now, out)
        elif t is Forward:
            if self._first_forward(sender, frame.request_id):
                out.append(ServeForwarded(sender, frame.request_id, frame.payload))
        elif t is ForwardReply:
            self.forwards.answered(sender, frame, out)
        else:
            self._replication(self.replication.on_frame(sender, frame, int(now * 1000)), now, out)
            if t is SnapshotChunk:
                self._stand_check(out)
        return out

    def tick(self, now: float) -> list[Action]:
        out: list[Action] = []
        now_ms = int(now * 1000)
        beats, changes = self.liveness.tick(now)
        for peer, hb in beats:
            out.append(Send(peer, hb))
        for peer, up in changes:
            self._peer(peer, up, now, out)
        self._replication(self.replication.on_tick(now_ms), now, out)
        self._membership(TimePassed(now), now, out)
        if self._abandon_at is not None and now >= self._abandon_at:
            self._abandon_at = None
            if not self.membership.evaluate(now)[0]:
                self._abandon(f"{self.name} stopped being the active master before the ack policy was met", out)
        self.forwards.expire(now, out)
        if self.settings.storage_ticks and now >= self._next_storage_tick and self.serving(now):
            self._storage_tick(now, out)
        self._progress_line(now, out)
        self._hand_on_check(now, out)
        self._stand_check(out)
        self._snapshot_step(now, out)
        if self._flush_due:
            # FlushDue is asked for once per batch; should the runtime lose it, the staged
            # operations go out at the next tick instead of waiting forever
            out += self.flush(now)
        return out

    def flush(self, now: float) -> list[Action]:
        """The end of a turn of the loop: cut the staged operations into one batch, and send the
        newest ack per master."""
        self._flush_due = False
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
                    decisions.note("node.durable_ack", durable < ack.seq)
                if durable is not None and ack.seq > durable:
                    # a replica acks only what its journal holds: ``persisted`` sends it then
                    self._held_acks[to] = ack
                    part = parts.get(to)
                    if part is not None:
                        if decisions.ON:
                            decisions.note("node.durable_part", part.epoch == ack.epoch)
                        if part.epoch == ack.epoch:
                            out.append(Send(to, part))
                else:
                    held = self._held_acks.get(to)
                    if held is not None and (held.epoch != ack.epoch or held.seq <= ack.seq):
                        del self._held_acks[to]
                    # else ``persisted`` sent the durable part of ``held``: the rest stays held
                    out.append(Send(to, ack))
        return out

    # -- events from the journal -------------------------------------------------------------------

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
                decisions.note("node.durable_part", part.seq > waiting.seq)
            if not self._acks and not self._flush_due:
                self._flush_due = True
                out.append(FlushDue())
            self._acks[to] = part
        return out

    def _keep_part(self, to: str, part: Ack) -> None:
        """``part`` is durable and unsent, and a newer ack the journal lacks takes (or keeps) its
        place for this turn's flush: the flush sends ``part`` when it holds that one."""
        kept = self._durable_parts.get(to)
        if kept is None or kept.epoch != part.epoch or kept.seq < part.seq:
            self._durable_parts[to] = part

    def held_ack(self, master: str) -> Ack | None:
        """The ack this replica holds back from ``master`` until its journal holds what it acks."""
        return self._held_acks.get(master)

    def journal_failed(self, reason: str, now: float) -> list[Action]:
        """The journal could not write or fsync (a full disk, an I/O error). After a failed fsync
        nothing can tell what reached the disk, so the node stores nothing more until restarted:
        its waiting operations get "not stored", it stops serving, and it never stands."""
        out: list[Action] = []
        if self.journal_error is not None:
            return out
        self.journal_error = reason
        out.append(Warn(f"node {self.name}: journal failed, serving nothing until restarted: {reason}"))
        out.append(Record(now, "journal_failed", {"reason": reason}))
        pending, self._pending = self._pending, {}
        for token, _, _, _ in pending.values():
            if token is not _INTERNAL:
                out.append(Answer(token, None, NotStored(f"not stored: the journal of {self.name} failed ({reason})")))
        self._held_acks.clear()
        self._durable_parts.clear()
        self.compactor.abort()
        self._serving_check(now, out)
        self._stand_check(out)
        if self.membership.role == "leader":
            out.append(ToRaft(TransferLeadership()))
        return out

    # -- internals ---------------------------------------------------------------------------------

    def _membership(self, event: Any, now: float, out: list[Action]) -> None:
        self._active_until = float("-inf")
        for a in self.membership.handle(event):
            t = type(a)
            if t is Record:
                out.append(a)
            elif t is ProposeView:
                out.append(ToRaft(a))
            elif t is DeliverView:
                v = a.view
                self._replication(self.replication.install_view(v.master, v.epoch, v.members, int(now * 1000)),
                                  now, out)
                self.forwards.master_changed(v.master, out)
            elif t is ActivityChanged:
                self._abandon_at = None if a.active else now + self.timing.leader_fallback
        self._serving_check(now, out)

    def _time_passed(self, now: float, out: list[Action]) -> None:
        # Between events only the clock can end activity (at the lease's expiry): tell the
        # membership core, so that it says so (and when) the moment anyone looks.
        if self.membership.active and not self.membership.evaluate(now)[0]:
            self._membership(TimePassed(now), now, out)

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
                if hold and type(a.frame) is SnapshotAck:
                    held.append(a)
                elif type(a.frame) is Ack:
                    if not self._acks and not self._flush_due:
                        self._flush_due = True
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
                self._abandon(a.reason, out)
                self._set_throttle(False, out, now)
            elif t is Serving:
                self._policies.clear()
                if a.on:
                    self._membership(GateOpened(now, REPLICATION_GATE, a.epoch), now, out)
            elif t is Note:
                if a.event == "transfer-finished":
                    self.last_transfer_at = now
                elif a.event == "caught-up" and self._entries_dropped:
                    self._forget_at = self.replication.log.last_seq
                # started_ms is this node's clock: meaningless to a reader of the history
                out.append(Record(now, a.event.replace("-", "_"),
                                  {k: v for k, v in a.fields.items() if k != "started_ms"}))
            elif t is StorageReplaced:
                self._policies.clear()
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
        self._serving_check(now, out)

    def _forget_check(self, caught_up_at: int, out: list[Action]) -> None:
        """The marker goes once the journal holds what amnesia cleared with: removed earlier, a
        crash could leave a journal without entries this node acknowledged, and no marker."""
        durable = self.replication.durable_seq
        if self._resets_pending or self.journal_error is not None or (durable is not None and durable < caught_up_at):
            return
        self._entries_dropped = False
        self._forget_at = None
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
            tok = next(self._tokens)
            out.append(PersistReset(tok, change.seq, change.epoch, change.blobs))
            self._unpersisted.append((tok, change.seq, True))
            self._resets_pending += 1
            self.compactor.replaced(sum(len(b) for b in change.blobs))
        self._persist(entries, out)

    def _persist(self, entries: list[Entry], out: list[Action]) -> None:
        if not entries:
            return
        tok = next(self._tokens)
        out.append(Persist(tok, tuple(entries)))
        self._unpersisted.append((tok, entries[-1].seq, False))
        self.compactor.journaled(sum(len(e.mutations) for e in entries))

    def _snapshot_step(self, now: float, out: list[Action]) -> None:
        if not self.journaled or self.journal_error is not None or not self.compactor.due:
            return
        # Each read must see no more than the log holds: the master's executed operations are
        # cut into a batch first, even while the batching hold would keep them (otherwise a
        # restart could hold changes no log entry carries).
        self._replication(self.replication.cut_staged(int(now * 1000)), now, out)
        snap = self.compactor.step(self.storage, self.replication.log)
        if snap is not None:
            out.append(snap)

    def _peer(self, peer: str, up: bool, now: float, out: list[Action]) -> None:
        self._replication(self.replication.on_peer(peer, up, int(now * 1000)), now, out)
        if not up:
            self.forwards.link_lost(peer, out)
        self._stand_check(out)

    def _abandon(self, reason: str, out: list[Action]) -> None:
        pending, self._pending = self._pending, {}
        as_success = "abandon-as-success" in self.bugs
        for token, result, changed, error in pending.values():
            if token is _INTERNAL:
                continue
            if as_success:
                out.append(Answer(token, result, error, changed))
            else:
                out.append(Answer(token, None, MasterChanged(reason)))

    def _set_throttle(self, on: bool, out: list[Action], now: float) -> None:
        if on != self.throttling:
            self.throttling = on
            out.append(ThrottleChanged(on))
            out.append(Record(now, "throttle", {"on": on}))

    def _serving_check(self, now: float, out: list[Action]) -> None:
        serving = self.replication.serving and self.membership.active and self.journal_error is None
        if serving != self._serving:
            self._serving = serving
            self._policies.clear()
            out.append(ServingChanged(serving))

    def _stand_check(self, out: list[Action]) -> None:
        rec = self.replication.receiver
        allowed = (rec is None or rec.staging is None or not self.liveness.connected(rec.master)) \
            and self.journal_error is None
        if allowed != self._may_stand:
            self._may_stand = allowed
            why = "" if allowed else "its journal failed" if self.journal_error is not None \
                else "a state transfer is bringing this node up"
            out.append(ToRaft(MayStand(allowed, why)))

    def _hand_on_check(self, now: float, out: list[Action]) -> None:
        """An amnesiac Raft leader whose sync cannot finish with the members it reaches hands
        leadership to a member that answered with its memory intact. Without this, a node that
        restarted empty into a bridge and won Raft through the bridging member would hold the
        whole group without a master until the bridge healed: the members beyond the bridge,
        which its sync needs, can elect nobody while it leads them (the simulator's seed 103
        plays this). The wait is the connection timeout: a member not heard from for that long
        is unreachable."""
        sync = self.replication.sync
        m = self.membership
        to = None
        if sync is not None and m.role == "leader" and m.abdicated_term != m.term:
            to = sync.hand_on_to(frozenset(p for p in self.liveness.peers if self.liveness.connected(p)))
        if to is None:
            self._sync_stuck_since = None
            return
        if self._sync_stuck_since is None:
            self._sync_stuck_since = now
        elif now - self._sync_stuck_since >= self.timing.connection_timeout:
            self._sync_stuck_since = None
            out.append(Record(now, "hand_on", {"to": to, "term": m.term,
                                               "reason": "amnesiac, and its sync lacks a majority it can reach"}))
            self._membership(StepDown(now), now, out)
            out.append(ToRaft(TransferLeadership(to)))

    def _storage_tick(self, now: float, out: list[Action]) -> None:
        """Let time act on the master: its effects are replicated like a client's operation."""
        result, mutations = self.replication.storage.execute(Tick())
        # Hitting the cap means more is due: tick again at the next core tick.
        self._next_storage_tick = now if result.effects >= Tick().max_effects else now + STORAGE_TICK_S
        if mutations:
            op = next(self._op_ids)
            self._pending[op] = (_INTERNAL, None, True, None)
            self._replication(self.replication.submit(op, mutations, self.settings.policy), now, out)
            if not self._flush_due:
                self._flush_due = True
                out.append(FlushDue())

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
        out.append(Record(now, "replication", {
            "epoch": st["epoch"], "last_seq": st["last_seq"],
            "replicas": {k: {"acked_seq": r["acked_seq"], "lag_batches": r["lag_batches"],
                             "lag_ms": r["lag_ms"], "connected": r["connected"]}
                         for k, r in sorted(st["replicas"].items())}}))
