"""Everything one member decides on its event loop, sans-I/O: the node core.

NodeCore composes the membership core (views, the lease, activity: membership.py), its
replication group (the group core: cluster/group_core.py, which holds the replication core, the
operations waiting for their ack policy, flow control, the journal's bookkeeping), the stream's
peer liveness (replication/liveness.py) and the table of forwarded requests (forwards.py), and
decides what is node-wide:

* **Request gating.** ``route`` says whether this node answers a client itself (it is the active
  master: Raft leader with a fresh lease, its view committed, synchronised), forwards it to the
  master of its view (only while that master is connected), or refuses it with the reason; and
  ``execute`` checks again before the group runs anything. A member of a minority partition
  therefore never answers a write or a receive with success.
* **Stand-or-not.** While a state transfer from a connected master is bringing this node up, it
  tells the election core (on Raft's thread) not to stand: a joiner starved by restoring misses
  heartbeats, and standing then would depose the healthy master, which would have to pull the
  whole state first.
* **The fence** (cluster/election.py): asked before a leader lets a higher-term vote request
  through, it stops being active for its term at once and says so.
* **Forwarding.** Gating says where a request goes; the requests this node forwarded wait in
  ``Forwards`` (cluster/forwards.py) until answered or failed; a request forwarded to this node
  runs once, however often its frame arrives.
* **The journal's failure.** After a failed write or fsync the node stores nothing more until
  restarted: it stops serving and never stands.
* Views, liveness and the clock reach the group as events: a view the membership core delivers
  is installed in it, a peer's link going up or down, each tick.
* **Replication groups** (``CoreSettings.groups`` >= 2, docs/groups.md). A group core per group,
  each with its mastery (cluster/group_mastery.py: the view's slot, the group lease and the sync
  guard) in place of the Raft leader's activity; gating, execution and forwarding take the
  group; the journal's tokens are the node's, one journal taking every group's writes.
* **Which group runs a request** (``request_group``): its queue's, as Raft placed it; group 0
  for a request naming no queue or a queue no group holds. A CreateQueue of a name no group
  holds waits here (``place``, cluster/placement_waits.py) while the Raft leader is asked for
  its placement, again every ``place_retry``, until Raft commits it (``placed``: ``Placed``) or
  ``place_timeout`` passes (``PlaceFailed``). A command that reads other groups' queues waits
  for their barriers (cluster/read_barrier.py).

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
from typing import Any, Callable, Sequence

from storage import Storage
from storage.catalogue import StoragesCatalogue
from storage.commands import Command

from cluster import decisions
from cluster.compaction import RECORDS_PER_BLOB, STEP_BYTES
from cluster.config import Timing
from cluster.errors import NotServing
from cluster.directory import Directory, Key
from cluster.forwards import Forwards
from cluster.group_core import REPLICATION_GATE, GroupCore
from cluster.group_mastery import GroupMastery
from cluster.membership import (
    ActivityChanged, DeliverView, Fenced, GroupReleased, GroupResigned, HandOverRequested, LeaseAck, MembershipCore,
    ProposeView, RaftSample, Record, StepDown, TimePassed, View, ViewCommitted,
)
from cluster.node_actions import (
    LOCAL, Action, Answer, FenceDone, ForwardFailed, ForwardTo, MayStand, PlaceFailed, Placed, ProposePlacement,
    Refuse, Route, ServeForwarded, ToRaft, TransferLeadership, Warn,
)
from cluster.placement_waits import PlacementWaits
from cluster.plantable import check_bugs
from cluster.read_barrier import ReadBarriers, reads_across_groups
from cluster.replication.core import TransferSettings
from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits
from cluster.replication.messages import (
    AckPolicy, Barrier, BarrierAt, Forward, ForwardReply, HandOver, Place, Rejected, Resign, Send, SnapshotChunk,
)
from cluster.replication.liveness import PeerLiveness
from cluster.replication.wire import Heartbeat

FORWARD_IDS_KEPT = 10_000     # per forwarder: far more than can be in flight within the forward timeout

# Planted bugs this core knows (cluster/plantable.py): never set in production.
BUGS = frozenset({"minority-answers"})


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
    # Replication groups: every queue lives in one, and each has its own master, which the Raft
    # leader's views name (cluster/assignment.py); 1: the Raft leader masters everything.
    groups: int = 1
    # A CreateQueue of a name no group holds waits for its placement this long (then its client
    # gets a retryable refusal), asking the Raft leader again this often meanwhile.
    place_timeout: float = 5.0
    place_retry: float = 0.25


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
                 bugs: frozenset[str] = frozenset(), started: float = 0.0,
                 group_state: Sequence[tuple[Storage, ReplicationLog]] | None = None, view_floor: int = 0) -> None:
        all_bugs = check_bugs(bugs)
        self.bugs = all_bugs & BUGS
        self.name = name
        self.settings = settings
        t = settings.timing
        self.timing = t
        self.members = tuple(sorted(members))
        self.membership = MembershipCore(name, t, frozenset({REPLICATION_GATE}), settings.groups,
                                         configured=frozenset(self.members))
        if log is None:
            log = ReplicationLog(settings.log_limit_bytes, journaled=settings.journal)
        assert (log.unjournaled is not None) == settings.journal, "a journaled node needs a journaled log"
        self.liveness = PeerLiveness(tuple(m for m in self.members if m != name), incarnation,
                                     keepalive=t.keepalive, dead_after=t.connection_timeout)
        self._active_until = float("-inf")   # a yes from the membership core holds until then
        self._may_stand: bool | None = None
        self.forwards = Forwards()
        # per forwarder: (its incarnation, the request ids served, in arrival order)
        self._forwarded: dict[str, tuple[int | None, set[int], deque[int]]] = {}
        self._leader_contact: tuple[str, float] | None = None   # (Raft leader, when it last led us)
        self.journal_error: str | None = None
        self.tokens = itertools.count(1)   # the journal's writes, of every group, in order
        self.multi = settings.groups > 1
        if not self.multi:
            self.groups = [GroupCore(self, storage, new_storage, log=log, amnesiac=amnesiac,
                                     entries_dropped=entries_dropped, bugs=all_bugs)]
        else:
            # One storage, log, stream and mastery per group. Their journal is one shared journal
            # (cluster/journal/shared.py): ``group_state`` is what it recovered, group by group.
            state = list(group_state) if group_state is not None else [
                (storage if g == 0 else new_storage(), ReplicationLog(settings.log_limit_bytes, journaled=settings.journal))
                for g in range(settings.groups)]
            assert len(state) == settings.groups
            self.groups = [
                GroupCore(self, st, new_storage, log=lg, amnesiac=amnesiac, entries_dropped=entries_dropped,
                          bugs=all_bugs, index=g, mastery=GroupMastery(name, g, self.members, t, started, view_floor))
                for g, (st, lg) in enumerate(state)]
            # each group's storage reads the others' queues (storage/catalogue.py); a group whose
            # storage a transfer replaces puts the new one in this list
            self.storages = [g.storage for g in self.groups]
            StoragesCatalogue.join(self.storages)
            # which group holds each queue: what Raft committed, learned here (cluster/directory.py)
            self.directory = Directory()
            # CreateQueues of names no group holds yet, waiting for their placement
            self.placements = PlacementWaits(settings.place_retry, settings.place_timeout)
            # reads across groups wait for the other groups' barriers (cluster/read_barrier.py)
            self.barriers = ReadBarriers(self)

    # -- queries ---------------------------------------------------------------------------------

    @property
    def view(self) -> View | None:
        return self.membership.view

    def serving(self, now: float, group: int = 0) -> bool:
        """The active master (of ``group``), synchronised: client operations run here. (``route``
        and ``execute`` inline its first answer, from the lease it caches: keep them in step.)"""
        if self.multi:
            return self.groups[group].serving_now(now)
        if not self.groups[0].replication.serving or self.journal_error is not None:
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

    def route(self, now: float, group: int = 0) -> Route:
        if self.multi:
            return self._route_group(now, group)
        if (now < self._active_until and self.groups[0].replication.serving and self.journal_error is None) \
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

    def _route_group(self, now: float, group: int) -> Route:
        g = self.groups[group]
        if g.serving_now(now):
            return LOCAL
        reason = self.unavailable_reason(now, group)
        if not self.settings.forward:
            return Refuse(f"{reason} Forwarding is off (forward = false).")
        m = g.mastery
        master = m.master   # type: ignore[union-attr]
        if master is None or master == self.name:
            return Refuse(reason)
        if not self.liveness.connected(master):
            return Refuse(f"Node {self.name} cannot reach the master {master} of group {group} (its stream link "
                          "is down), so it cannot forward.")
        if not m.heard_master(now):   # type: ignore[union-attr]
            return Refuse(f"Node {self.name} has not heard from the master {master} of group {group} within an "
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

    def unavailable_reason(self, now: float, group: int = 0) -> str:
        if self.journal_error is not None:
            return f"Node {self.name} cannot store anything: its journal failed ({self.journal_error})."
        view = self.membership.view
        if view is None:
            return f"Node {self.name} has not joined a view of the cluster yet."
        if self.multi:
            g = self.groups[group]
            return f"Node {self.name} is not serving group {group}: " + g.reason(now) + "."
        if view.master != self.name:
            return f"Node {self.name} is not the master (the master is {view.master})."
        if not self.groups[0].replication.serving:
            return f"Node {self.name} is the new master and is synchronising with a majority of the members."
        return f"Node {self.name} is the master but not active ({self.membership.evaluate(now)[1]})."

    def forwards_in_flight(self) -> int:
        return len(self.forwards)

    # -- client operations -------------------------------------------------------------------------

    def execute(self, token: Any, command: Command, now: float, group: int = 0) -> list[Action]:
        """Run ``command`` if this node is the serving master (of ``group``); its ``Answer``
        comes once its ack policy is met (maybe among the actions returned now)."""
        out: list[Action] = []
        if self.multi:
            return self._execute_group(token, command, now, group)
        g = self.groups[0]
        # serving()'s first answer, inline: this runs once per client operation
        if not (now < self._active_until and g.replication.serving and self.journal_error is None) \
                and not self.serving(now):
            self._time_passed(now, out)
            out.append(Answer(token, None, NotServing(self.unavailable_reason(now))))
            return out
        g.execute(token, command, now, out)
        return out

    def _execute_group(self, token: Any, command: Command, now: float, group: int) -> list[Action]:
        out: list[Action] = []
        if not (reads_across_groups(command) and self.groups[group].serving_now(now)
                and self.barriers.start(token, command, group, now, out)):
            self.run_in_group(token, command, now, group, out)
        return out

    def run_in_group(self, token: Any, command: Command, now: float, group: int, out: list[Action]) -> None:
        """Run ``command`` in ``group`` if this node serves it (a read across groups: once past
        the other groups' barriers), else refuse it."""
        g = self.groups[group]
        if not g.serving_now(now):
            g.serving_check(now, out)
            out.append(Answer(token, None, NotServing(self.unavailable_reason(now, group))))
        else:
            g.execute(token, command, now, out)

    def forward(self, token: Any, payload: Any, now: float, group: int = 0) -> list[Action]:
        """Hand a client request to the master (of ``group``: ``route`` said ForwardTo)."""
        route = self.route(now, group)
        if type(route) is not ForwardTo:
            reason = route.reason if type(route) is Refuse else f"Node {self.name} is the master now."
            return [ForwardFailed(token, reason, sent=False)]
        send = self.forwards.send(token, route.master, payload, now)
        return [send if group == 0 else Send(send.to, send.frame, group)]

    def forward_unsent(self, request_id: int) -> list[Action]:
        """The runtime could not even queue a Forward frame: the master never saw the request, so
        its client may retry it safely now rather than after the forward timeout."""
        return self.forwards.unsent(request_id)

    # -- the queue directory (several groups) -----------------------------------------------------

    def request_group(self, key: Key | None, creates: bool = False) -> int | None:
        """The group that runs a client request on the queue ``key`` (None: it names no queue).
        Its queue's group; group 0 for no queue, or a queue no group holds (group 0's master
        answers QueueDoesNotExist, or lists); None where the request creates a queue no group
        holds (``creates``: a CreateQueue), which waits for its placement (``place``)."""
        if not self.multi or key is None:
            return 0
        group = self.directory.group_of(key)
        if group is None and not creates:
            return 0
        return group

    def place(self, key: Key, token: Any, now: float) -> list[Action]:
        """A CreateQueue (``token``) of the queue ``key`` waits for its placement: ``Placed(token,
        group)`` once Raft committed it (at once if it is known), ``PlaceFailed(token)`` after
        ``place_timeout``. The Raft leader is asked once for all the requests of one key."""
        group = self.directory.group_of(key)
        if group is not None:
            return [Placed(token, group)]
        if self.placements.add(key, token, now):
            return self._ask_placement(key)
        return []

    def _ask_placement(self, key: Key) -> list[Action]:
        """Ask the Raft leader to place ``key``: it commits it (``placed`` says when it is known
        here). Nothing while no leader is known or reachable: the next ask may find one."""
        m = self.membership
        if m.role == "leader":
            return [ToRaft(ProposePlacement(key, len(self.groups)))]
        if m.leader is not None and m.leader != self.name and self.liveness.connected(m.leader):
            return [Send(m.leader, Place(key))]
        return []

    def placed(self, key: Key, group: int, now: float) -> list[Action]:
        """Raft committed the placement of ``key`` in ``group`` (or it was already placed)."""
        if self.directory.group_of(key) is not None:
            return []
        self.directory.learn(key, group)
        out: list[Action] = [Record(now, "placed", {"region": key[0], "account": key[1], "queue": key[2],
                                                    "group": group})]
        out += [Placed(token, group) for token in self.placements.take(key)]
        return out

    def directory_restored(self, record: Any) -> list[Action]:
        """Raft loaded a snapshot: the directory is the one it holds."""
        self.directory = Directory.from_record(record)
        out: list[Action] = []
        for key in self.placements.keys():
            group = self.directory.group_of(key)
            if group is not None:
                out += [Placed(token, group) for token in self.placements.take(key)]
        return out

    def stopped(self, reason: str) -> list[Action]:
        """The node stops: waiting operations and forwards end with "outcome unknown"."""
        out: list[Action] = []
        for group in self.groups:
            group.abandon(reason, out)
        if self.multi:
            self.barriers.stop(reason, out)
        self.forwards.stop(reason, out)
        return out

    def step_down(self, now: float, to: str | None = None, group: int | None = None) -> list[Action]:
        """An operator's step-down: nothing (no actions) unless this node leads Raft and ``to``,
        if named, is another member. With several groups and a ``group``: that group's handover
        (GroupCore.hand_over), if this node is its serving master; elsewhere the admin route
        answers 409 naming the group's master."""
        if self.multi and group is not None:
            out: list[Action] = []
            if 0 <= group < len(self.groups):
                self.groups[group].hand_over(to, now, out)
            return out
        if self.membership.role != "leader" or (to is not None and (to == self.name or to not in self.members)):
            return []
        out = []
        self.membership_event(StepDown(now), now, out)
        out.append(ToRaft(TransferLeadership(to)))
        return out

    # -- events from the Raft thread ---------------------------------------------------------------

    def raft_sample(self, sample: RaftSample) -> list[Action]:
        out: list[Action] = []
        self.membership_event(sample, sample.now, out)
        return out

    def leader_contact(self, leader: str, at: float) -> list[Action]:
        """Raft's thread says: ``leader`` led us at ``at``."""
        self._leader_contact = (leader, at)
        self.membership.leader_contact(leader, at)
        return []

    def lease_acked(self, peer: str, term: int, stamp: float, now: float) -> list[Action]:
        out: list[Action] = []
        self.membership_event(LeaseAck(now, peer, term, stamp), now, out)
        return out

    def view_committed(self, view: View, now: float) -> list[Action]:
        out: list[Action] = []
        self.membership_event(ViewCommitted(now, view), now, out)
        return out

    def fence(self, term: int, now: float) -> list[Action]:
        out: list[Action] = []
        self.membership_event(Fenced(now, term), now, out)
        out.append(ToRaft(FenceDone(term)))
        return out

    def members_changed(self, members: tuple[str, ...], now: float) -> list[Action]:
        """The Raft configuration changed at runtime (a member added or removed)."""
        self.members = tuple(sorted(members))
        for group in self.groups:
            group.replication.configured = len(self.members)
            if group.mastery is not None:
                group.mastery.members_changed(self.members)
        out: list[Action] = []
        for peer, up in self.liveness.set_peers(tuple(m for m in self.members if m != self.name)):
            self._peer(peer, up, now, out)
        return out

    # -- events from the stream --------------------------------------------------------------------

    def frame(self, sender: str, frame: Any, now: float, group: int = 0) -> list[Action]:
        """A frame of the stream: the link's own, or one of ``group``'s."""
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
                out.append(ServeForwarded(sender, frame.request_id, frame.payload, group))
        elif t is ForwardReply:
            self.forwards.answered(sender, frame, out)
        elif t is Place:
            if self.multi and self.membership.role == "leader":
                out.append(ToRaft(ProposePlacement(frame.key, len(self.groups))))
        elif t is HandOver:
            if self.multi:
                self.groups[group].hand_over(frame.to or None, now, out, frame.epoch)
        elif t is Resign:
            if self.multi:
                self._resigned(sender, group, frame, now, out)
        elif t is Barrier:
            if self.multi:
                self.barriers.answer(sender, frame, group, now, out)
        elif t is BarrierAt:
            if self.multi:
                self.barriers.answered(frame, group, now, out)
        else:
            self.groups[group].frame(sender, frame, now, out)
            if t is SnapshotChunk:
                self._stand_check(out)
            if self.multi and self.barriers.reads:
                self.barriers.settle(now, out)     # the replica may have applied what a read waits for
        return out

    def tick(self, now: float) -> list[Action]:
        out: list[Action] = []
        beats, changes = self.liveness.tick(now)
        for peer, hb in beats:
            out.append(Send(peer, hb))
        for peer, up in changes:
            self._peer(peer, up, now, out)
        groups = self.groups
        for group in groups:
            group.tick(now, out)
        self.membership_event(TimePassed(now), now, out)
        for group in groups:
            group.abandon_due(now, out)
        self.forwards.expire(now, out)
        for group in groups:
            group.upkeep(now, out)
        if self.multi and self.barriers.reads:
            self.barriers.tick(now, out)
        self._stand_check(out)
        for group in groups:
            group.end_tick(now, out)
        if self.multi and self.placements:
            ask, given_up = self.placements.due(now)
            for key in ask:
                out += self._ask_placement(key)
            out += [PlaceFailed(token) for token in given_up]
        return out

    def flush(self, now: float) -> list[Action]:
        """The end of a turn of the loop: each group's staged operations go out as one batch,
        and its newest ack per master."""
        if not self.multi:
            return self.groups[0].flush(now)
        out: list[Action] = []
        for group in self.groups:
            out += group.flush(now)
        return out

    # -- events from the journal -------------------------------------------------------------------

    def persisted(self, token: int, now: float) -> list[Action]:
        """The journal made every write up to ``token`` durable (as its fsync policy promises)."""
        if not self.multi:
            return self.groups[0].persisted(token, now)
        out: list[Action] = []
        for group in self.groups:
            out += group.persisted(token, now)
        return out

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
        for group in self.groups:
            group.journal_failed(reason, now, out)
        self._stand_check(out)
        if self.membership.role == "leader":
            out.append(ToRaft(TransferLeadership()))
        return out

    # -- internals ---------------------------------------------------------------------------------

    def membership_event(self, event: Any, now: float, out: list[Action]) -> None:
        self._active_until = float("-inf")
        for a in self.membership.handle(event):
            t = type(a)
            if t is Record:
                out.append(a)
            elif t is ProposeView:
                out.append(ToRaft(a))
            elif t is DeliverView:
                v = a.view
                for group in self.groups:
                    group.install_view(v, now, out)
                if not self.multi:
                    # (a group that moved answers forwards with a refusal: they are left to it)
                    self.forwards.master_changed(v.master, out)
            elif t is ActivityChanged:
                if not self.multi:   # the Raft leader's activity is the one group's
                    self.groups[0].activity_changed(a.active, now)
            elif t is HandOverRequested:
                # the leader's balance step reaches the group's master: this node, or over the stream
                if a.master == self.name:
                    self.groups[a.group].hand_over(a.to, now, out, a.epoch)
                else:
                    out.append(Send(a.master, HandOver(a.epoch, a.to), a.group))
        for group in self.groups:
            group.serving_check(now, out)

    def _resigned(self, sender: str, group: int, frame: Resign, now: float, out: list[Action]) -> None:
        """A group master gave its epoch up (GroupHandover._tell_leader): the Raft leader takes it, if
        the committed view names the sender master of that group in that epoch."""
        view = self.membership.view
        if self.membership.role != "leader" or view is None or not 0 <= group < len(view.groups) \
                or view.groups[group] != (sender, frame.epoch):
            return
        event = GroupReleased(now, group, frame.epoch, frame.to) if frame.to \
            else GroupResigned(now, group, frame.epoch)
        self.membership_event(event, now, out)

    def _time_passed(self, now: float, out: list[Action]) -> None:
        # Between events only the clock can end activity (at the lease's expiry): tell the
        # membership core, so that it says so (and when) the moment anyone looks.
        if self.membership.active and not self.membership.evaluate(now)[0]:
            self.membership_event(TimePassed(now), now, out)

    def _peer(self, peer: str, up: bool, now: float, out: list[Action]) -> None:
        for group in self.groups:
            group.on_peer(peer, up, now, out)
        if not up:
            self.forwards.link_lost(peer, out)
        self._stand_check(out)

    def _stand_check(self, out: list[Action]) -> None:
        allowed = not any(group.being_restored() for group in self.groups) and self.journal_error is None
        if allowed != self._may_stand:
            self._may_stand = allowed
            why = "" if allowed else "its journal failed" if self.journal_error is not None \
                else "a state transfer is bringing this node up"
            out.append(ToRaft(MayStand(allowed, why)))
