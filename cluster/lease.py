"""The master lease and the vote guard: why two masters are never active at once.

Definitions (all times are seconds of a node's own monotonic clock; no clock is ever compared
with another node's clock):

* h   heartbeat period (Timing.heartbeat). The Raft leader sends AppendEntries at least this often.
* E   minimum election timeout (Timing.election_min). A follower starts an election no sooner
      than E after the last AppendEntries it accepted (pysyncobj resets its deadline on each).
* G   vote guard (Timing.vote_guard, G <= E). A follower that accepted AppendEntries from a leader
      less than G ago drops RequestVote messages unread: it neither raises its term nor votes
      (Raft thesis section 6, "disruptive servers"). The election core decides it on
      pysyncobj's thread (cluster/election.py), in the same step that hands the message to
      pysyncobj, so nothing can be accepted between the check and the vote.
* D   lease (Timing.lease).
* rho bound on the relative drift of two monotonic clocks (Timing.max_drift).

The lease. Every AppendEntries the leader L sends carries a stamp s, L's clock at sending. A
follower that *accepts* it (same term, sender is its leader) first records "leader contact" for
its vote guard, then answers with a lease ack carrying s back. L holds the lease until
q + D, where q is the largest stamp such that acks for stamps >= q, in L's current term, came
from enough followers to make a majority of the configured members together with L. A master is
*active* only while it holds the lease (and is Raft leader, and its view for this term is
committed; see membership.py).

Claim: if a node C != L becomes Raft leader in a term > L's, then at the real time C is elected,
L's lease has expired or L has already stopped being leader.

Argument. Let q be the stamp L's lease rests on, and Q1 the majority that acked stamps >= q. C
was elected by a majority Q2 in a term T' > T (L's term). Q1 and Q2 intersect; take A in both.

1. A = L. L voted for C, so L first processed C's RequestVote with term T' > T. While L leads,
   the election core holds such a request back until the event loop has made L inactive for
   its term (the fence: cluster/election.py, NodeCore.fence), or until L's lease has surely
   run out without an answer. So L was inactive before its vote left, hence before C won.
2. A != L. A accepted L's AppendEntries stamped s >= q at real time r_A >= s (it was received
   after it was sent) while A was still in term T: had A voted in T' first, it would have had a
   higher term and rejected the message, and acked nothing. So A's vote for C came after r_A.
   If A = C, C started its election at least E >= G after its last accepted AppendEntries (its
   own clock); otherwise A's vote guard made A wait at least G (its own clock) after r_A. Either
   way the vote, hence C's election, happened at real time >= r_A + G(1 - rho) >= q + G(1 - rho).
   L's lease ends at L-clock q + D, i.e. at real time <= q + D(1 + rho).

With D(1 + rho) < G(1 - rho) (checked by Timing.validate) L's lease has ended before C is
elected; C itself becomes active even later (it must commit a view and collect its own lease).
A master that is paused (SIGSTOP) cannot be fooled on resuming: acks that queued up while it
was stopped carry the stamps of heartbeats sent *before* the pause, so they do not extend the
lease. Stale-message reordering cannot either: stamps are compared, not arrival times.

Leadership transfer (Raft TimeoutNow) lets its target start an election at once, skipping E. The
runtime only ever transfers from a master that has already made itself inactive for its term
(step-down), so the claim is not needed there; pysyncobj's own admin 'transfer' command is not
reachable, because our transport does not serve pysyncobj utility messages.

Restarts: with ``[node] state-dir`` (cluster/runtime.py) Raft's term, vote and log are durable,
so a restarted node neither votes twice in a term nor votes with an empty log. Without it a node
forgets its vote by restarting; it then still drops vote requests for election_max after it
starts, which narrows the window (the candidate that could exploit it must start the same term
after the restart) but does not close it, and its empty log can elect a candidate lacking a
committed view, which then commits another view under the same id, and the members never
agree again: every configuration we generate sets a state-dir.

Defaults (Timing): h = 0.05, E = 0.2, G = 0.18, D = 0.15, rho = 0.001, so
D(1+rho) = 0.15015 < G(1-rho) = 0.17982: a 30 ms margin.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def majority(n: int) -> int:
    return n // 2 + 1


@dataclass
class LeaseTracker:
    """Lease acks for one leader term; pure, driven by the caller's clock."""

    self_name: str
    duration: float
    term: int = -1
    stamps: dict[str, float] = field(default_factory=dict)   # peer -> newest acked send stamp
    received: dict[str, float] = field(default_factory=dict)  # peer -> when that ack arrived (liveness)

    def reset(self, term: int) -> None:
        self.term = term
        self.stamps.clear()
        self.received.clear()

    def on_ack(self, peer: str, term: int, stamp: float, now: float) -> bool:
        if term != self.term:
            return False
        if stamp > self.stamps.get(peer, float("-inf")):
            self.stamps[peer] = stamp
        self.received[peer] = now
        return True

    def quorum_stamp(self, members: frozenset[str]) -> float | None:
        """The newest send stamp that a majority of `members` (counting self) has acked."""
        need = majority(len(members)) - (1 if self.self_name in members else 0)
        if need <= 0:
            return float("inf")
        acked = sorted((self.stamps[p] for p in members if p in self.stamps and p != self.self_name),
                       reverse=True)
        if len(acked) < need:
            return None
        return acked[need - 1]

    def expiry(self, members: frozenset[str]) -> float | None:
        q = self.quorum_stamp(members)
        return None if q is None else q + self.duration

    def arrival_expiry(self, members: frozenset[str]) -> float | None:
        """decisions.py's lease.expiry: the lease as a bug would run it, from when the acks of a
        majority arrived rather than from the stamps they carry (a paused leader's queued acks
        would renew it)."""
        need = majority(len(members)) - (1 if self.self_name in members else 0)
        if need <= 0:
            return float("inf")
        got = sorted((self.received[p] for p in members if p in self.received and p != self.self_name), reverse=True)
        return got[need - 1] + self.duration if len(got) >= need else None

    def reachable(self, members: frozenset[str], now: float, suspect: float) -> frozenset[str]:
        alive = {p for p in members if p != self.self_name and now - self.received.get(p, float("-inf")) < suspect}
        return frozenset(alive | {self.self_name})


@dataclass
class VoteGuard:
    """Whether a vote request may be delivered to Raft now. Pure; see the module docstring."""

    guard: float
    started_at: float
    startup_quiet: float
    last_contact: float = float("-inf")

    def on_leader_contact(self, now: float) -> None:
        if now > self.last_contact:
            self.last_contact = now

    def allows_vote(self, now: float, self_is_leader: bool) -> bool:
        if now - self.started_at < self.startup_quiet:
            return False
        if self_is_leader:
            # A leader must see a higher-term request so that it steps down (case 1 above).
            return True
        return now - self.last_contact >= self.guard
