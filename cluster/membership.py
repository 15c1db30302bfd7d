"""Views, master activity and view proposals as a pure state machine (sans-I/O).

`MembershipCore.handle(event)` takes one event (a Raft state sample, a lease ack, a committed
view, the passing of time, an operator request) and returns the actions the runtime must carry
out: propose a view through Raft, deliver a view to subscribers, record a history event, report
an activity change. It never reads a clock or touches a socket, so the tests and the simulator
drive it with their own clocks. The runtime (cluster/runtime.py) feeds it from pysyncobj's thread.

A view is (view_id, members, master, epoch). Views are agreed through the Raft log: the master
proposes view_id = current + 1 and `accept_view` (applied identically on every member, in log
order) installs it only if the id is exactly the next one and the epoch does not go back. So
every member sees the same sequence of views with strictly increasing ids; a member that falls
behind skips views (it catches up by log or snapshot) but never sees a different one.

The epoch is the Raft term in which the master took office. It is strictly increasing across
masters (a term has at most one leader), and several views of one master share it.

With queue groups (``groups`` > 1) a view also names each group's master and epoch, and the Raft
leader's proposals carry what the pure planner (cluster/assignment.py) decides: the first
view's spread, failover of a group whose master went silent or resigned, a released group's
move to its target. Balance is never a proposal: the leader asks the group's master to hand
the group over (``HandOverRequested``), and the master's ``GroupReleased`` ends in a view. With
one group nothing of this runs, and the record stays a 4-tuple.

A node is *active* when all of these hold (see lease.py for why this prevents two active masters):
it is Raft leader; the committed view names it master with epoch = its current term; its lease
is fresh; it has not stepped down in this term; and every required gate (the replication layer's
"synchronised with a majority") has been opened for this epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from cluster import decisions
from cluster.assignment import PlanInput, plan
from cluster.config import Timing
from cluster.lease import LeaseTracker, majority

LEADER, CANDIDATE, FOLLOWER = "leader", "candidate", "follower"


@dataclass(frozen=True, slots=True)
class View:
    view_id: int
    members: tuple[str, ...]  # sorted
    master: str
    epoch: int
    # With queue groups (cluster/assignment.py): (master, epoch) of each group, by group id. Empty
    # for a cluster of one group, whose master is the view's.
    groups: tuple[tuple[str, int], ...] = ()

    def to_record(self) -> tuple[Any, ...]:
        """The plain-tuple form stored in the Raft log (no classes: nothing to unpickle but
        builtins): a 4-tuple without groups, so a one-group cluster's Raft state reads as ever."""
        if not self.groups:
            return (self.view_id, tuple(self.members), self.master, self.epoch)
        return (self.view_id, tuple(self.members), self.master, self.epoch,
                tuple((m, e) for m, e in self.groups))

    @classmethod
    def from_record(cls, r: Any) -> "View":
        if len(r) == 4:
            view_id, members, master, epoch = r
            groups: tuple[tuple[str, int], ...] = ()
        else:
            view_id, members, master, epoch, slots = r
            groups = tuple((str(m), int(e)) for m, e in slots)
        return cls(int(view_id), tuple(sorted(str(m) for m in members)), str(master), int(epoch), groups)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"view_id": self.view_id, "members": list(self.members), "master": self.master,
                             "epoch": self.epoch}
        if self.groups:
            d["groups"] = [{"group": g, "master": m, "epoch": e} for g, (m, e) in enumerate(self.groups)]
        return d


def accept_view(current: View | None, proposed: View) -> bool:
    """The deterministic install rule, applied in log order on every member."""
    if proposed.master not in proposed.members:
        return False
    if current is None:
        return proposed.view_id == 1 and (not proposed.groups or groups_follow(None, proposed))
    if decisions.ON:
        # a second view with the current id (two proposals for one id were both committed)
        decisions.note("membership.accept_view", proposed.view_id == current.view_id and current.epoch <= proposed.epoch)
    return proposed.view_id == current.view_id + 1 and proposed.epoch >= current.epoch \
        and (not (proposed.groups or current.groups) or groups_follow(current.groups, proposed))


def groups_follow(previous: tuple[tuple[str, int], ...] | None, proposed: View) -> bool:
    """The groups part of the install rule. The first view fixes the number of groups for good;
    every group master is a member; and each group either keeps its master and its epoch, or
    takes an epoch above the one it had (the proposer uses max(previous + 1, term)). Checked
    against the previous *committed* view, never the proposer's memory, so a group's epoch
    rises strictly along the log and no (group, epoch) ever has two masters."""
    members = proposed.members
    if previous is None:
        return all(m in members and e >= 1 for m, e in proposed.groups)
    if len(proposed.groups) != len(previous):
        return False
    for (m0, e0), (m1, e1) in zip(previous, proposed.groups):
        if m1 not in members or ((m1, e1) != (m0, e0) and e1 <= e0):
            return False
    return True


# -- events ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RaftSample:
    """What pysyncobj says now. Sent on every tick and on every role change."""
    now: float
    term: int
    role: str
    leader: str | None
    configured: frozenset[str]  # the Raft configuration, self included


@dataclass(frozen=True, slots=True)
class LeaseAck:
    now: float
    peer: str
    term: int
    stamp: float


@dataclass(frozen=True, slots=True)
class ViewCommitted:
    now: float
    view: View


@dataclass(frozen=True, slots=True)
class TimePassed:
    now: float


@dataclass(frozen=True, slots=True)
class StepDown:
    now: float


@dataclass(frozen=True, slots=True)
class Fenced:
    """Raft is about to see a vote request for ``term`` while we lead (cluster/election.py): it
    will depose us, and may vote for that candidate, so we stop being active in our term now."""
    now: float
    term: int


@dataclass(frozen=True, slots=True)
class GateOpened:
    now: float
    gate: str
    epoch: int


@dataclass(frozen=True, slots=True)
class GroupResigned:
    """The master of ``group`` in ``epoch`` gave it up: its group lease lapsed while Raft still
    reaches it. The leader moves the group as if its master were unreachable."""
    now: float
    group: int
    epoch: int


@dataclass(frozen=True, slots=True)
class GroupReleased:
    """The master of ``group`` in ``epoch`` abdicated it for good and caught ``to`` up (a
    handover): the leader's next view moves the group to ``to``."""
    now: float
    group: int
    epoch: int
    to: str


Event = Union[RaftSample, LeaseAck, ViewCommitted, TimePassed, StepDown, Fenced, GateOpened, GroupResigned,
              GroupReleased]


# -- actions --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProposeView:
    view: View


@dataclass(frozen=True, slots=True)
class DeliverView:
    view: View


@dataclass(frozen=True, slots=True)
class ActivityChanged:
    active: bool
    at: float        # monotonic time the predicate changed (for a lease expiry: the expiry itself)
    reason: str
    view: View | None


@dataclass(frozen=True, slots=True)
class Record:
    """A history event; `fields` excludes the timestamp and node name, which the runtime adds."""
    at: float
    event: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HandOverRequested:
    """The leader's balance step: ``master``, which masters ``group`` in ``epoch``, should hand
    it over to ``to`` (abdicate, catch ``to`` up, then release it)."""
    group: int
    epoch: int
    master: str
    to: str


Action = Union[ProposeView, DeliverView, ActivityChanged, Record, HandOverRequested]


@dataclass
class MembershipCore:
    self_name: str
    timing: Timing
    required_gates: frozenset[str] = frozenset()
    groups: int = 1         # queue groups; the state below the lease is theirs, unused with one

    term: int = 0
    role: str = FOLLOWER
    leader: str | None = None
    configured: frozenset[str] = frozenset()
    leader_since: float = 0.0
    view: View | None = None
    active: bool = False
    inactive_reason: str = "starting"
    abdicated_term: int | None = None
    _step_down_at: float | None = None
    gates: dict[str, int] = field(default_factory=dict)
    _pending: tuple[View, float] | None = None
    _candidate: tuple[frozenset[str], float] | None = None
    lease: LeaseTracker = field(init=False)
    groups_mismatch: str | None = None            # the committed views have another number of groups
    in_view_since: dict[str, float] = field(default_factory=dict)
    _unsteady_at: dict[str, float] = field(default_factory=dict)   # last time the leader found it silent
    _led_by: tuple[str, float] | None = None      # (Raft leader, when it last led us)
    _heard_seed: dict[str, float] = field(default_factory=dict)    # a new leader's contact before any ack
    _resigned: dict[int, int] = field(default_factory=dict)        # group -> the epoch resigned
    _released: dict[int, tuple[int, str]] = field(default_factory=dict)  # group -> (epoch, to)
    _handover: tuple[int, int, str, float] | None = None   # (group, epoch, to, asked at)

    def __post_init__(self) -> None:
        self.lease = LeaseTracker(self.self_name, self.timing.lease)
        if not self.configured:
            self.configured = frozenset({self.self_name})

    # -- queries (pure functions of state and `now`) --------------------------------------------

    def lease_expiry(self) -> float | None:
        if self.role != LEADER:
            return None
        return self.lease.expiry(self.configured)

    def evaluate(self, now: float) -> tuple[bool, str]:
        if self.role != LEADER:
            return False, f"not leader ({self.role})"
        if self.abdicated_term == self.term:
            return False, "stepped down (or deposed by a higher term)"
        v = self.view
        if v is None or v.master != self.self_name or v.epoch != self.term:
            return False, "view for this term not committed yet"
        expiry = self.lease.expiry(self.configured)
        if decisions.ON:
            # acks arrive after their stamps: the alternative can only hold on to a lease that ran out
            arrived = self.lease.arrival_expiry(self.configured) if expiry is not None and now >= expiry else None
            decisions.note("lease.expiry", arrived is not None and now < arrived)
        if expiry is None:
            return False, "no quorum contact in this term"
        if now >= expiry:
            return False, "lease expired (lost contact with a majority)"
        for g in sorted(self.required_gates):
            if self.gates.get(g) != v.epoch:
                return False, f"waiting for gate {g}"
        return True, "master of the current view with a fresh lease"

    def has_quorum(self, now: float) -> bool:
        if self.role == LEADER:
            e = self.lease.expiry(self.configured)
            return e is not None and now < e
        return False

    # -- the transition function -----------------------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        out: list[Action] = []
        now = event.now
        # If we were active, the lease bounded that; if nobody looked in between (a paused
        # process), activity really ended at the lease expiry, not when we notice.
        deadline = self.lease.expiry(self.configured) if self.active else None
        if isinstance(event, RaftSample):
            self._on_raft(event, out)
        elif isinstance(event, LeaseAck):
            if self.role == LEADER:
                self.lease.on_ack(event.peer, event.term, event.stamp, now)
        elif isinstance(event, ViewCommitted):
            self._on_view(event, out)
        elif isinstance(event, StepDown):
            if self.role == LEADER and self.abdicated_term != self.term:
                self.abdicated_term = self.term
                self._step_down_at = now
                out.append(Record(now, "step_down", {"term": self.term}))
        elif isinstance(event, Fenced):
            if self.role == LEADER and event.term > self.term and self.abdicated_term != self.term:
                self.abdicated_term = self.term
                out.append(Record(now, "fenced", {"term": self.term, "for_term": event.term}))
        elif isinstance(event, GateOpened):
            self.gates[event.gate] = event.epoch
        elif isinstance(event, GroupResigned):
            if 0 <= event.group < self.groups:
                self._resigned[event.group] = event.epoch
        elif isinstance(event, GroupReleased):
            if 0 <= event.group < self.groups:
                self._released[event.group] = (event.epoch, event.to)
        self._step_down_failed(now, out)
        self._propose_if_needed(now, out)
        self._update_activity(now, out, deadline)
        return out

    def leader_contact(self, leader: str, at: float) -> None:
        """``leader`` led us at ``at`` (from Raft's thread): a new leader's first view moves the
        groups of the one it last heard only if that was at least ``group_suspect`` ago."""
        self._led_by = (leader, at)

    def _step_down_failed(self, now: float, out: list[Action]) -> None:
        # A leadership transfer that has not produced a new leader within the fallback plus an
        # election failed (no follower caught up, or its election lost): a leader that stayed
        # abdicated would keep the whole group without a master for the rest of its term.
        if self._step_down_at is None:
            return
        if self.role != LEADER or self.abdicated_term != self.term:
            self._step_down_at = None
        elif now - self._step_down_at >= self.timing.leader_fallback + self.timing.election_max:
            self._step_down_at = None
            self.abdicated_term = None
            out.append(Record(now, "step_down_failed", {"term": self.term}))

    def _on_raft(self, s: RaftSample, out: list[Action]) -> None:
        if s.configured and s.configured != self.configured:
            out.append(Record(s.now, "configuration", {"members": sorted(s.configured)}))
            self.configured = s.configured
        changed_term = s.term != self.term
        changed_role = s.role != self.role
        if changed_term or changed_role:
            if s.role == LEADER:
                self.leader_since = s.now
                self.lease.reset(s.term)
                self._pending = None
                self._candidate = None
                if self.groups > 1:
                    self._seed_heard(s.now)
            out.append(Record(s.now, "role", {"role": s.role, "term": s.term}))
        if s.leader != self.leader or (changed_term and s.leader is not None):
            out.append(Record(s.now, "leader", {"leader": s.leader, "term": s.term}))
        self.term, self.role, self.leader = s.term, s.role, s.leader

    def _on_view(self, e: ViewCommitted, out: list[Action]) -> None:
        previous = self.view
        if previous is not None and e.view.view_id <= previous.view_id:
            return
        self.view = e.view
        if self._pending is not None and self._pending[0].view_id <= e.view.view_id:
            self._pending = None
        if self.groups > 1 or e.view.groups:
            self._groups_installed(e.now, previous, e.view, out)
        out.append(DeliverView(e.view))
        out.append(Record(e.now, "view", e.view.to_dict()))

    def _propose_if_needed(self, now: float, out: list[Action]) -> None:
        if self.role != LEADER or self.abdicated_term == self.term:
            return
        if self._pending is not None and now - self._pending[1] < self.timing.proposal_retry:
            return
        reachable = self.lease.reachable(self.configured, now, self.timing.suspect)
        if len(reachable) < majority(len(self.configured)):
            self._candidate = None
            return  # it could not commit anyway; and we are not active either
        v = self.view
        taking_office = v is None or v.epoch != self.term or v.master != self.self_name
        members = self._members_due(now, reachable, v, taking_office)
        if self.groups > 1:
            if members is not None or not taking_office:
                self._propose_groups(now, v, members, taking_office, out)
            return
        if members is None:
            return
        proposal = View((v.view_id if v else 0) + 1, tuple(sorted(members)), self.self_name, self.term)
        self._pending = (proposal, now)
        self._candidate = None
        out.append(ProposeView(proposal))

    def _members_due(self, now: float, reachable: frozenset[str], v: View | None,
                     taking_office: bool) -> frozenset[str] | None:
        """The members of the next view, once a change of them is due (None: none is yet)."""
        if taking_office:
            if reachable != self.configured and now - self.leader_since < self.timing.gather:
                return None
            return reachable
        if frozenset(v.members) == reachable:
            self._candidate = None
            return None
        if self._candidate is None or self._candidate[0] != reachable:
            self._candidate = (reachable, now)
            return None
        if now - self._candidate[1] < self.timing.debounce:
            return None
        return reachable

    # -- queue groups (only with groups > 1) ------------------------------------------------------

    def _seed_heard(self, now: float) -> None:
        # Before any ack of our term, a member counts as heard when we took office, except the
        # leader we last heard: its silence is what elected us (>= election_min >= group_suspect),
        # so its groups move in our first view while live followers get group_suspect to ack.
        self._heard_seed = {m: now for m in self.configured}
        if self._led_by is not None and self._led_by[0] != self.self_name:
            self._heard_seed[self._led_by[0]] = self._led_by[1]
        self._handover = None

    def _groups_installed(self, now: float, previous: View | None, view: View, out: list[Action]) -> None:
        have = len(view.groups) or 1
        if have != self.groups:
            if self.groups_mismatch is None:
                self.groups_mismatch = f"cluster has groups = {have}, this node {self.groups}"
                out.append(Record(now, "groups_mismatch", {"cluster": have, "node": self.groups}))
            return
        before = frozenset(previous.members) if previous is not None else frozenset()
        self.in_view_since = {m: self.in_view_since[m] if m in before else now for m in view.members}
        epochs = [e for _, e in view.groups]
        self._resigned = {g: e for g, e in self._resigned.items() if e >= epochs[g]}
        self._released = {g: r for g, r in self._released.items() if r[0] >= epochs[g]}
        if self._handover is not None and self._handover[1] != epochs[self._handover[0]]:
            self._handover = None

    def _group_reachable(self, now: float, members: tuple[str, ...]) -> frozenset[str]:
        """Members heard within group_suspect (Raft acks of our term, or the seed), ourselves too."""
        suspect = self.timing.group_suspect
        received, seed, never = self.lease.received, self._heard_seed, float("-inf")
        heard = {m for m in self.configured.union(members)
                 if now - max(received.get(m, never), seed.get(m, never)) < suspect}
        return frozenset(heard | {self.self_name})

    def _propose_groups(self, now: float, v: View | None, members: frozenset[str] | None, taking_office: bool,
                        out: list[Action]) -> None:
        """Propose the next view when its members or its groups change; else maybe a handover."""
        if self.groups_mismatch is not None:
            return
        old = v.members if v is not None else ()
        reachable = self._group_reachable(now, old)
        if members is None:
            proposed = old
        elif taking_office:
            # A member of the last view that has had no time to ack our term yet stays in our first
            # view (it keeps its groups for group_suspect, as the seed says); only the silent go.
            proposed = tuple(sorted(members.union(m for m in old if m in reachable)))
        else:
            proposed = tuple(sorted(members))
        for m in proposed:
            if m not in reachable:
                self._unsteady_at[m] = now
        t = self.timing
        if self._handover is not None and now - self._handover[3] >= 2 * (t.leader_fallback + t.election_max):
            # twice what the master waits before it resumes: a request that reached it late has ended
            self._handover = None
        committed = v.groups if v is not None else ()
        in_epoch = {g: e for g, (_, e) in enumerate(committed)}
        never = float("-inf")
        p = plan(PlanInput(
            count=self.groups, proposer=self.self_name, groups=committed, members=proposed,
            configured=self.configured, reachable=reachable,
            steady_since={m: max(self.in_view_since.get(m, now), self._unsteady_at.get(m, never)) for m in proposed},
            now=now, term=self.term, timing=t,
            resigned=frozenset(g for g, e in self._resigned.items() if in_epoch.get(g) == e),
            released={g: to for g, (e, to) in self._released.items() if in_epoch.get(g) == e},
            handover_in_flight=self._handover[0] if self._handover is not None else None))
        if p.groups is None and members is None:
            if p.handover is not None:
                g, to = p.handover
                master, epoch = committed[g]
                self._handover = (g, epoch, to, now)
                out.append(HandOverRequested(g, epoch, master, to))
                out.append(Record(now, "handover_requested", {"group": g, "epoch": epoch, "master": master, "to": to}))
            return
        proposal = View((v.view_id if v else 0) + 1, proposed, self.self_name, self.term,
                        p.groups if p.groups is not None else committed)
        self._pending = (proposal, now)
        if members is not None:
            self._candidate = None
        out.append(ProposeView(proposal))

    def _update_activity(self, now: float, out: list[Action], deadline: float | None) -> None:
        active, reason = self.evaluate(now)
        if active == self.active:
            self.inactive_reason = "" if active else reason
            return
        at = now
        if not active and deadline is not None and deadline < now:
            at = deadline
            reason = "lease expired (lost contact with a majority)"
        self.active = active
        self.inactive_reason = "" if active else reason
        out.append(ActivityChanged(active, at, reason, self.view))
        fields: dict[str, Any] = {"reason": reason, "term": self.term}
        if self.view is not None:
            fields.update(view_id=self.view.view_id, epoch=self.view.epoch)
        out.append(Record(at, "activated" if active else "deactivated", fields))
