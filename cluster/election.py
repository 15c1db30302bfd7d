"""When a node stands for election, and which Raft messages it lets through: sans-I/O.

This is the half of the node core that runs on pysyncobj's thread (cluster/runtime.py binds it
there; the simulator binds it to its Raft model). The other half, NodeCore (cluster/node_core.py),
runs on the event loop; they talk only through the events and actions below, so no state of
either is ever read from the other thread.

pysyncobj starts an election whenever its own timer runs out and has no pre-vote. That timer is
held off for good (the runtime pushes it into the future after every tick and every message);
only this core decides when the node stands:

* **Pre-vote** (Raft thesis 9.6). When no leader has been heard from for a randomised election
  timeout, the node asks every peer whether it would vote for it (``PreVote``: the term it would
  stand in and its last log entry), without raising its term. A peer says yes only if it has not
  heard from a live leader within the minimum election timeout, is not the leader itself, and
  the asker's log is at least as up to date as its own. Only once a majority (itself included)
  said yes does the node stand (``Stand``: pysyncobj raises its term and asks for votes, at its
  next tick). A node cut off from the majority, or from the leader only while the others still
  hear it (a bridge), therefore never raises its term, and healing it deposes nobody. An
  AppendEntries accepted from the leader before Raft stands calls the stand off.
* **Terms**, which pysyncobj never tells: it answers neither a vote request nor an AppendEntries
  of a lower term, and its replies carry none. So terms are not compared in a pre-vote; the
  answers carry the voter's term instead, and a node that stands first adopts the highest it
  heard (``AdoptTerm``), or its vote requests would be ignored one term at a time. And a node
  whose term ran ahead of the leader's (a candidate's vote request reached it, the candidate
  lost) answers the leader's AppendEntries with its term (``TermAhead``, as etcd does): the
  leader adopts it, behind the fence, and steps down, so that the cluster elects anew with that
  node instead of leaving it locked out for as long as the leader lives.
* **Stand-or-not**: while the event loop says it may not stand (a state transfer from a live
  master is bringing it up: it holds nothing worth leading with), it does not even ask.
* **Leadership transfer**: a ``timeout_now`` from the current leader makes it stand at once,
  without a pre-vote (the leader asked, and has already made itself inactive).
* **The vote guard** (cluster/lease.py): a vote request that arrives within G of accepted leader
  contact, or within election_max of start, is dropped unread. It is decided here, on the thread
  that hands the message to Raft, in the same step: the lease argument needs the check and the
  vote to be one atomic step.
* **The fence** (lease.py, case 1). A leader hands a vote request for a higher term to Raft only
  after the event loop has stopped serving (``Fence`` out, ``fence_done`` back): Raft deposes it
  on that request and may vote for the candidate, so the lease argument needs it inactive first.
  Messages that arrive meanwhile wait behind the held one, in order. If the loop does not answer
  within the lease, they go on anyway: by then no lease this leader held can be fresh.
* **Lease acks**: an AppendEntries that Raft accepted (same term, sender is the leader) is leader
  contact for the guard, and is answered with a ``LeaseAck`` carrying the leader's stamp.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Union

from cluster import decisions
from cluster.config import Timing
from cluster.lease import VoteGuard, majority
from cluster.plantable import check_bugs

LEADER, CANDIDATE, FOLLOWER = "leader", "candidate", "follower"


@dataclass(frozen=True, slots=True)
class RaftState:
    """pysyncobj (or the simulator's Raft model) as sampled on its own thread."""

    term: int
    role: str
    leader: str | None
    last_index: int
    last_term: int
    peers: tuple[str, ...]       # the other members of the Raft configuration


# -- messages of ours on the Raft links ------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PreVote:
    term: int          # the term the asker would stand in
    last_index: int
    last_term: int
    round: int         # which of the asker's rounds: a late answer to an old one is ignored


@dataclass(frozen=True, slots=True)
class PreVoteReply:
    term: int          # the PreVote's
    granted: bool
    round: int
    voter_term: int    # the voter's own term: a node stands beyond every term it heard


@dataclass(frozen=True, slots=True)
class TermAhead:
    """To the sender of an AppendEntries of an older term: my term is ``term``."""

    term: int


@dataclass(frozen=True, slots=True)
class LeaseAck:
    term: int
    stamp: float       # the leader's clock when it sent the AppendEntries acked


CoreMessage = Union[PreVote, PreVoteReply, LeaseAck, TermAhead]

# Raft's own messages, as the runtime classifies them for this core (the message itself is opaque).
VOTE_REQUEST, APPEND, TIMEOUT_NOW, OTHER = "vote_request", "append", "timeout_now", "other"


# -- actions -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Send:
    to: str
    message: CoreMessage


@dataclass(frozen=True, slots=True)
class Deliver:
    """Hand this Raft message to Raft now."""

    sender: str
    kind: str
    term: int
    message: Any


@dataclass(frozen=True, slots=True)
class Stand:
    """Start an election at Raft's next tick (unless an accepted AppendEntries calls it off)."""


@dataclass(frozen=True, slots=True)
class AdoptTerm:
    """Make Raft adopt ``term``, as a follower that voted for nobody in it."""

    term: int


@dataclass(frozen=True, slots=True)
class Release:
    """Messages held behind a fence: run each through ``on_raft`` again, in order, with Raft's
    state sampled afresh before each (an AdoptTerm among them is carried out as it comes)."""

    held: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Fence:
    """Ask the event loop to stop serving for ``term`` and answer with ``fence_done``."""

    term: int


@dataclass(frozen=True, slots=True)
class LeaseAcked:
    """For the event loop's lease (cluster/lease.py): ``peer`` acked our stamp ``stamp``."""

    peer: str
    term: int
    stamp: float


@dataclass(frozen=True, slots=True)
class LeaderContact:
    """For the event loop's gating: ``leader`` led us at ``at`` (sent at most once a heartbeat
    period, so the loop's view of it is never staler than that)."""

    leader: str
    at: float


@dataclass(frozen=True, slots=True)
class NotStanding:
    """Why this node does not stand now (None: it may again); reported on change, for the log."""

    reason: str | None


Action = Union[Send, Deliver, Stand, AdoptTerm, Release, Fence, LeaseAcked, LeaderContact, NotStanding]

# Planted bugs this core knows (cluster/plantable.py): never set in production.
BUGS = frozenset({"no-pre-vote"})


@dataclass
class _Round:
    id: int
    term: int
    granted: set[str]
    voter_terms: list[int]


@dataclass
class _Fence:
    term: int
    since: float
    held: list[Any] = field(default_factory=list)   # Deliver, or AdoptTerm


class ElectionCore:
    def __init__(self, name: str, timing: Timing, rng: random.Random, now: float, *,
                 bugs: frozenset[str] = frozenset()) -> None:
        self.bugs = check_bugs(bugs) & BUGS
        self.name = name
        self.timing = timing
        self.rng = rng
        self.guard = VoteGuard(timing.vote_guard, started_at=now, startup_quiet=timing.election_max)
        self.deadline = now + self._timeout()
        self.standing = False            # Stand given; cleared once Raft has started the election
        self._transfer = False           # ... and given for a leadership transfer (no pre-vote)
        self._stood_in = 0               # the term Raft was in (or adopts) when we told it to stand
        self.allowed = True              # what the event loop last said (may_stand)
        self._disallowed_why = ""
        self.round: _Round | None = None
        self._rounds = 0
        self.fence: _Fence | None = None
        self._passed_term = 0            # the highest term a fence has let through
        self._said: str | None = None    # the last NotStanding reason reported
        self.votes_dropped = 0
        self.pre_votes_granted = 0
        self.pre_votes_refused = 0
        self._contact_told = float("-inf")
        self._contact_leader: str | None = None
        self._ahead_told: dict[str, float] = {}

    # -- inputs ----------------------------------------------------------------------------------

    def tick(self, now: float, state: RaftState) -> list[Action]:
        out: list[Action] = []
        if self.fence is not None and now - self.fence.since >= self.timing.lease * (1 + self.timing.max_drift):
            out += self._release()
        if self.standing and (state.role == LEADER or state.term > self._stood_in or now >= self.deadline):
            # Raft has stood (or somebody else won meanwhile, or Raft could not stand: ask again)
            self.standing = self._transfer = False
        if state.role == LEADER:
            self.round = None
            self.deadline = now + self._timeout()
            return out + self._say(None)
        if self.standing or now < self.deadline:
            return out
        if not self.allowed:
            self.round = None
            self.deadline = now + self._timeout()
            return out + self._say(self._disallowed_why)
        if "no-pre-vote" in self.bugs:
            return out + self._stand(now, state)
        if self.round is not None:
            out += self._say("no majority of the members would vote for us (pre-vote)")
        # Nobody led us for a whole timeout (or the last round found no majority): ask again.
        self._rounds += 1
        term = state.term + 1
        self.round = _Round(self._rounds, term, {self.name}, [])
        self.deadline = now + self._timeout()
        out += [Send(p, PreVote(term, state.last_index, state.last_term, self._rounds)) for p in state.peers]
        return out + self._count(now, state)

    def may_stand(self, allowed: bool, why: str = "") -> list[Action]:
        """The event loop's say: False while a state transfer from a live master brings us up."""
        self.allowed, self._disallowed_why = allowed, why
        if not allowed:
            self.round = None
        return []

    def on_message(self, sender: str, message: CoreMessage, now: float, state: RaftState) -> list[Action]:
        t = type(message)
        if t is LeaseAck:
            return [LeaseAcked(sender, message.term, message.stamp)]
        if t is PreVote:
            granted = (state.role != LEADER
                       and now - self.guard.last_contact >= self.timing.election_min
                       and (message.last_term, message.last_index) >= (state.last_term, state.last_index))
            if decisions.ON:
                self._note_pre_vote(message, now, state, granted)
            if granted:
                self.pre_votes_granted += 1
            else:
                self.pre_votes_refused += 1
            return [Send(sender, PreVoteReply(message.term, granted, message.round, state.term))]
        if t is PreVoteReply:
            r = self.round
            if (r is None or message.round != r.id or not message.granted or state.role == LEADER
                    or sender not in state.peers):
                return []
            r.granted.add(sender)
            r.voter_terms.append(message.voter_term)
            return self._count(now, state)
        if t is TermAhead:
            if message.term <= state.term:
                return []
            if self.fence is not None:
                # Behind what the fence holds, in order: a new fence would drop the held vote
                # request of the candidate whose term this is, and it would then lose its
                # election (a leadership transfer's candidate lost one try in ten that way).
                self.fence.held.append(AdoptTerm(message.term))
                return []
            if state.role == LEADER:
                # Adopting it deposes us: not before the loop has stopped serving (as for a vote).
                return self._fence(message.term, now, AdoptTerm(message.term))
            return [AdoptTerm(message.term)]
        return []

    def on_raft(self, sender: str, kind: str, term: int, message: Any, now: float,
                state: RaftState) -> list[Action]:
        """A Raft message arrived (or is let through a fence again): what to do with it."""
        d = Deliver(sender, kind, term, message)
        if self.fence is not None:
            self.fence.held.append(d)
            return []
        if kind == VOTE_REQUEST:
            leading = state.role == LEADER
            if decisions.ON:
                self._note_vote(now, leading, term, state)
            if not self.guard.allows_vote(now, leading):
                self.votes_dropped += 1
                return []
            if leading and term > state.term and term > self._passed_term:
                return self._fence(term, now, d)
            if term > state.term:
                # Raft restarts its election timer when it votes; a candidate with a higher
                # term is at least as good a reason to wait before asking for ourselves, and
                # standing now would only disrupt the election it is holding.
                self.deadline = max(self.deadline, now + self._timeout())
                self.round = None
                if not self._transfer:
                    self.standing = False
            return [d]
        if kind == APPEND and term < state.term:
            # Raft drops it without a word; the leader must learn that our term is ahead.
            if now - self._ahead_told.get(sender, float("-inf")) >= self.timing.election_min:
                self._ahead_told[sender] = now
                return [d, Send(sender, TermAhead(state.term))]
            return [d]
        if kind == TIMEOUT_NOW and sender == state.leader and term >= state.term:
            out = [d] + self._stand(now, state)
            self._transfer = True
            return out
        return [d]

    def appended(self, sender: str, term: int, stamp: float | None, now: float, state: RaftState) -> list[Action]:
        """Raft has handled an AppendEntries from ``sender``; ``state`` is sampled after it."""
        if term != state.term or state.leader != sender:
            return []
        # Contact first, then the ack (lease.py, step 2 of the argument).
        self.guard.on_leader_contact(now)
        if not self._transfer:
            # The leader is alive and leads us: no round, and no stand either. A stand already
            # given would raise the term at Raft's next tick, after this ack has extended the
            # leader's lease: the lease argument needs E between the two.
            self.standing = False
            self.round = None
            self.deadline = now + self._timeout()
        out: list[Action] = [Send(sender, LeaseAck(term, stamp))] if stamp is not None else []
        if now - self._contact_told >= self.timing.heartbeat or sender != self._contact_leader:
            self._contact_told = now
            self._contact_leader = sender
            out.append(LeaderContact(sender, now))
        return out

    def fence_done(self, term: int) -> list[Action]:
        if self.fence is None or term < self.fence.term:
            return []
        return self._release()

    # -- internals -------------------------------------------------------------------------------

    def _count(self, now: float, state: RaftState) -> list[Action]:
        r = self.round
        if decisions.ON and r is not None:
            # standing with one grant fewer: a node cut off with a minority would stand
            decisions.note("election.pre_vote_count", len(r.granted) + 1 == majority(len(state.peers) + 1))
        if r is None or len(r.granted) < majority(len(state.peers) + 1):
            return []
        # Stand beyond every term a voter holds: a vote request of a lower term is ignored.
        adopt = max(r.voter_terms, default=0)
        out: list[Action] = [AdoptTerm(adopt)] if adopt > state.term else []
        return out + self._stand(now, state, max(adopt, state.term))

    def _stand(self, now: float, state: RaftState, from_term: int | None = None) -> list[Action]:
        self.round = None
        self.standing = True
        self._transfer = False
        self._stood_in = state.term if from_term is None else from_term
        self.deadline = now + self._timeout()
        return self._say(None) + [Stand()]

    def _fence(self, term: int, now: float, first: Any) -> list[Action]:
        self.fence = _Fence(term, now, [first])
        return [Fence(term)]

    def _release(self) -> list[Action]:
        f, self.fence = self.fence, None
        if f is None:
            return []
        self._passed_term = max(self._passed_term, f.term)
        return [Release(tuple(f.held))]

    def _say(self, reason: str | None) -> list[Action]:
        if reason == self._said:
            return []
        self._said = reason
        return [NotStanding(reason)]

    def _note_pre_vote(self, m: PreVote, now: float, state: RaftState, granted: bool) -> None:
        """election.pre_vote_contact (granted despite a live leader) and election.pre_vote_log
        (granted whatever the asker's log): decisions.py."""
        not_leader = state.role != LEADER
        no_contact = now - self.guard.last_contact >= self.timing.election_min
        log_ok = (m.last_term, m.last_index) >= (state.last_term, state.last_index)
        decisions.note("election.pre_vote_contact", (not_leader and log_ok) != granted)
        decisions.note("election.pre_vote_log", (not_leader and no_contact) != granted)

    def _note_vote(self, now: float, leading: bool, term: int, state: RaftState) -> None:
        """election.vote_guard (a guard that lets every vote through, start-up quiet kept) and
        election.leader_fence (a leader that hands a higher-term request to Raft at once)."""
        g = self.guard
        quiet = now - g.started_at < g.startup_quiet
        decisions.note("election.vote_guard", not leading and not quiet and now - g.last_contact < g.guard)
        if g.allows_vote(now, leading):
            decisions.note("election.leader_fence", leading and term > max(state.term, self._passed_term))

    def _timeout(self) -> float:
        return self.rng.uniform(self.timing.election_min, self.timing.election_max)
