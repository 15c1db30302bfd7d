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

A node is *active* when all of these hold (see lease.py for why this prevents two active masters):
it is Raft leader; the committed view names it master with epoch = its current term; its lease
is fresh; it has not stepped down in this term; and every required gate (the replication layer's
"synchronised with a majority") has been opened for this epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from cluster import decisions
from cluster.config import Timing
from cluster.lease import LeaseTracker, majority

LEADER, CANDIDATE, FOLLOWER = "leader", "candidate", "follower"


@dataclass(frozen=True, slots=True)
class View:
    view_id: int
    members: tuple[str, ...]  # sorted
    master: str
    epoch: int

    def to_record(self) -> tuple[int, tuple[str, ...], str, int]:
        """The plain-tuple form stored in the Raft log (no classes: nothing to unpickle but builtins)."""
        return (self.view_id, tuple(self.members), self.master, self.epoch)

    @classmethod
    def from_record(cls, r: Any) -> "View":
        view_id, members, master, epoch = r
        return cls(int(view_id), tuple(sorted(str(m) for m in members)), str(master), int(epoch))

    def to_dict(self) -> dict[str, Any]:
        return {"view_id": self.view_id, "members": list(self.members), "master": self.master, "epoch": self.epoch}


def accept_view(current: View | None, proposed: View) -> bool:
    """The deterministic install rule, applied in log order on every member."""
    if proposed.master not in proposed.members:
        return False
    if current is None:
        return proposed.view_id == 1
    if decisions.ON:
        # a second view with the current id (two proposals for one id were both committed)
        decisions.note("membership.accept_view", proposed.view_id == current.view_id and current.epoch <= proposed.epoch)
    return proposed.view_id == current.view_id + 1 and proposed.epoch >= current.epoch


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


Event = Union[RaftSample, LeaseAck, ViewCommitted, TimePassed, StepDown, Fenced, GateOpened]


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


Action = Union[ProposeView, DeliverView, ActivityChanged, Record]


@dataclass
class MembershipCore:
    self_name: str
    timing: Timing
    required_gates: frozenset[str] = frozenset()

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
        self._step_down_failed(now, out)
        self._propose_if_needed(now, out)
        self._update_activity(now, out, deadline)
        return out

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
            out.append(Record(s.now, "role", {"role": s.role, "term": s.term}))
        if s.leader != self.leader or (changed_term and s.leader is not None):
            out.append(Record(s.now, "leader", {"leader": s.leader, "term": s.term}))
        self.term, self.role, self.leader = s.term, s.role, s.leader

    def _on_view(self, e: ViewCommitted, out: list[Action]) -> None:
        if self.view is not None and e.view.view_id <= self.view.view_id:
            return
        self.view = e.view
        if self._pending is not None and self._pending[0].view_id <= e.view.view_id:
            self._pending = None
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
        if taking_office:
            if reachable != self.configured and now - self.leader_since < self.timing.gather:
                return
        elif frozenset(v.members) == reachable:
            self._candidate = None
            return
        elif self._candidate is None or self._candidate[0] != reachable:
            self._candidate = (reachable, now)
            return
        elif now - self._candidate[1] < self.timing.debounce:
            return
        proposal = View((v.view_id if v else 0) + 1, tuple(sorted(reachable)), self.self_name, self.term)
        self._pending = (proposal, now)
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
