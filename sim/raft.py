"""A deterministic Raft model that drives the real MembershipCore in the simulator.

Why a model and not pysyncobj itself: pysyncobj runs its own thread and reads the wall clock
(time.time / time.monotonic) throughout, so neither its timing nor its interleaving with the rest
of the node can be replayed from a seed. This module is a small Raft (elections, log replication,
commitment) that exchanges real messages over the simulated network and gives the guarantees the
membership layer builds on:

* at most one leader per term (votes, one per term per node, majority to win);
* a leader's log entries commit only with a majority (view changes are Raft log entries,
  applied in log order with ``accept_view`` on every node, exactly like cluster/runtime.py);
* the election restriction (a candidate's log must be at least as up to date as the voter's);
* leader fallback: a leader that has not heard from a majority within ``leader_fallback`` steps
  down (pysyncobj's leaderFallbackTimeout);
* every AppendEntries carries the leader's send stamp, as the product's transport adds it.

Like pysyncobj in the product, it never starts an election on its own: the election core
(cluster/election.py, the same code the product runs on pysyncobj's thread) decides when this
node stands (``start_election``) after its pre-vote, which messages reach this model (the vote
guard, the fence), and answers accepted AppendEntries with lease acks (sim/node.py binds them).
* durable Raft state, as the product keeps it in ``[node] state-dir`` (pysyncobj's journal):
  a restarted node comes back with its term, its vote, its log and its commit index, and
  re-applies the committed entries (``RaftNode.durable`` / ``restore``). Without it a restarted
  node votes with an empty log for a candidate that lacks a committed view, and a majority that
  never saw that view elects it.
* with queue groups, queue placements (``PlaceEntry``) share the log with the views and are
  applied in log order through the product's ``Directory.apply_place``, as cluster/runtime.py's
  ``_DirectoryLog`` applies them; a restarted node rebuilds its directory by re-applying its
  committed log (this model never compacts it).

The node feeds the membership core what the live runtime feeds it: a ``RaftSample`` on every
role/term change, a ``LeaseAck`` per accepted heartbeat, a ``ViewCommitted`` per applied view
entry. What it leaves to the chaos tests (tests against real pysyncobj processes):
pysyncobj's own bugs and timing quirks, its batching and snapshots, dynamic membership changes,
and clock drift between nodes (the simulator shares one clock). Leadership transfer is modelled
on pysyncobj's ``transferLeadership`` (``RaftNode.transfer_leadership``): the leader sends
``TimeoutNow`` to a fully caught-up follower, whose election core then stands at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from cluster.config import Timing
from cluster.directory import Directory, Key
from cluster.lease import majority
from cluster.membership import CANDIDATE, FOLLOWER, LEADER


@dataclass(frozen=True, slots=True)
class Durable:
    """What pysyncobj's journal keeps across a restart (written before any message leaves)."""

    term: int
    voted_for: str | None
    log: tuple[tuple[int, Any], ...]      # (term, view record or PlaceEntry)
    commit: int


@dataclass(frozen=True, slots=True)
class PlaceEntry:
    """A log entry placing the queue ``key`` among ``groups`` groups (cluster/directory.py)."""

    key: Key
    groups: int


@dataclass(frozen=True, slots=True)
class RequestVote:
    term: int
    last_index: int
    last_term: int


@dataclass(frozen=True, slots=True)
class VoteReply:
    term: int
    granted: bool


@dataclass(frozen=True, slots=True)
class AppendEntries:
    term: int
    prev_index: int
    prev_term: int
    entries: tuple[tuple[int, Any], ...]   # (term, view record or PlaceEntry)
    commit: int
    stamp: float                           # the leader's clock when sent (lease.py)


@dataclass(frozen=True, slots=True)
class TimeoutNow:
    term: int


@dataclass(frozen=True, slots=True)
class AppendReply:
    term: int
    success: bool
    match: int


class RaftNode:
    """One member's Raft state. ``send(to, msg)``, ``changed()`` (role/term/leader changed),
    ``apply(record)`` (a committed view record) and ``on_place(key, group)`` (a committed
    placement, a repeat of a placed key included) are the host's."""

    def __init__(self, name: str, names: list[str], timing: Timing, now: float, *,
                 send: Callable[[str, Any], None], changed: Callable[[], None], apply: Callable[[Any], None],
                 restore: Durable | None = None, on_place: Callable[[Key, int], None] | None = None):
        self.name = name
        self.peers = [n for n in names if n != name]
        self.configured = frozenset(names)
        self.quorum = majority(len(names))
        self.t = timing
        self._send = send
        self._changed = changed
        self._apply = apply
        self._on_place = on_place
        self.directory = Directory()
        self.term = 0
        self.voted_for: str | None = None
        self.role = FOLLOWER
        self.leader: str | None = None
        self.log: list[tuple[int, Any]] = []
        self.commit = 0
        self.applied = 0
        self.votes: set[str] = set()
        self.next_index: dict[str, int] = {}
        self.match: dict[str, int] = {}
        self.last_response: dict[str, float] = {}
        self.last_heartbeat = 0.0
        self.leader_since = 0.0     # when it last took office (sim/elections.py judges disruptions by it)
        if restore is not None:
            self.term, self.voted_for, self.commit = restore.term, restore.voted_for, restore.commit
            self.log = list(restore.log)

    def durable(self) -> Durable:
        return Durable(self.term, self.voted_for, tuple(self.log), self.commit)

    def replay(self) -> None:
        """At start: apply what the journal says was committed (pysyncobj does on its first tick)."""
        self._apply_committed()

    @property
    def last_index(self) -> int:
        return len(self.log)

    @property
    def last_term(self) -> int:
        return self.log[-1][0] if self.log else 0

    # --- time -----------------------------------------------------------------------------------

    def tick(self, now: float) -> None:
        if self.role == LEADER:
            alive = 1 + sum(1 for p in self.peers if now - self.last_response.get(p, -1e9) < self.t.leader_fallback)
            if alive < self.quorum:
                self._become_follower(self.term, now)
                self._changed()
                return
            if now - self.last_heartbeat >= self.t.heartbeat:
                self._broadcast(now)

    def start_election(self, now: float) -> None:
        """The election core says: stand now."""
        if self.role == LEADER:
            return
        self.term += 1
        self.role = CANDIDATE
        self.leader = None
        self.voted_for = self.name
        self.votes = {self.name}
        self._changed()
        msg = RequestVote(self.term, self.last_index, self.last_term)
        for p in self.peers:
            self._send(p, msg)
        self._maybe_win(now)

    def _become_follower(self, term: int, now: float) -> None:
        if term > self.term:
            self.term = term
            self.voted_for = None
            self.leader = None
        if self.role == LEADER:
            self.leader = None
        self.role = FOLLOWER
        self.votes = set()

    def _maybe_win(self, now: float) -> None:
        if self.role != CANDIDATE or len(self.votes) < self.quorum:
            return
        self.role = LEADER
        self.leader = self.name
        self.leader_since = now
        for p in self.peers:
            self.next_index[p] = self.last_index + 1
            self.match[p] = 0
            self.last_response[p] = now   # grace: fallback counts from taking office
        self._changed()
        self._broadcast(now)

    # --- the leader's side ----------------------------------------------------------------------

    def transfer_leadership(self, to: str | None, now: float) -> bool:
        """pysyncobj's ``transferLeadership``: only a leader, only to a connected follower (here:
        one heard from within the connection timeout) whose log matches the leader's to the end;
        None picks the most caught-up of them. True if ``TimeoutNow`` was sent."""
        if self.role != LEADER:
            return False
        connected = [p for p in self.peers if now - self.last_response.get(p, -1e9) < self.t.connection_timeout]
        if to is None:
            if not connected:
                return False
            to = max((self.match.get(p, 0), p) for p in connected)[1]
        if to not in connected or self.match.get(to, 0) != self.last_index:
            return False
        self._send(to, TimeoutNow(self.term))
        return True

    def propose(self, record: Any, now: float) -> bool:
        if self.role != LEADER:
            return False
        self.log.append((self.term, record))
        self._advance_commit(now)
        self._broadcast(now)
        return True

    def propose_place(self, key: Key, groups: int, now: float) -> bool:
        """The leader's ``ToRaft(ProposePlacement)``."""
        return self.propose(PlaceEntry(key, groups), now)

    def _broadcast(self, now: float) -> None:
        self.last_heartbeat = now
        for p in self.peers:
            self._append_to(p, now)

    def _append_to(self, p: str, now: float) -> None:
        nxt = self.next_index.get(p, self.last_index + 1)
        prev = nxt - 1
        entries = tuple(self.log[prev:prev + 64])
        self._send(p, AppendEntries(self.term, prev, self.log[prev - 1][0] if prev else 0, entries,
                                    self.commit, now))

    def _advance_commit(self, now: float) -> None:
        for n in range(self.last_index, self.commit, -1):
            if self.log[n - 1][0] != self.term:
                break      # only entries of the current term commit by counting (Raft 5.4.2)
            if 1 + sum(1 for p in self.peers if self.match.get(p, 0) >= n) >= self.quorum:
                self.commit = n
                break
        self._apply_committed()

    def _apply_committed(self) -> None:
        while self.applied < self.commit:
            self.applied += 1
            record = self.log[self.applied - 1][1]
            if type(record) is PlaceEntry:
                group = self.directory.apply_place(record.key, record.groups)
                if self._on_place is not None:
                    self._on_place(record.key, group)
            else:
                self._apply(record)

    # --- messages -------------------------------------------------------------------------------

    def on_message(self, sender: str, msg: Any, now: float) -> None:
        t = type(msg)
        if t is AppendEntries:
            self._on_append(sender, msg, now)
        elif t is AppendReply:
            self._on_append_reply(sender, msg, now)
        elif t is RequestVote:
            self._on_vote_request(sender, msg, now)
        elif t is VoteReply:
            self._on_vote_reply(sender, msg, now)

    def _on_vote_request(self, sender: str, m: RequestVote, now: float) -> None:
        if m.term < self.term:
            return      # pysyncobj does not answer a vote request of an older term
        changed = False
        if m.term > self.term:
            self._become_follower(m.term, now)
            changed = True
        granted = False
        if m.term == self.term and self.voted_for in (None, sender) \
                and (m.last_term, m.last_index) >= (self.last_term, self.last_index):
            self.voted_for = sender
            granted = True
        if changed:
            self._changed()
        if granted:     # pysyncobj answers only a granted vote
            self._send(sender, VoteReply(self.term, granted))

    def adopt_term(self, term: int, now: float) -> None:
        """Take a higher term as a follower that voted for nobody in it (the election core's
        AdoptTerm; the product gets pysyncobj there with a vote request it refuses)."""
        if term > self.term:
            self._become_follower(term, now)
            self._changed()

    def _on_vote_reply(self, sender: str, m: VoteReply, now: float) -> None:
        if self.role == CANDIDATE and m.term == self.term and m.granted:
            self.votes.add(sender)
            self._maybe_win(now)

    def _on_append(self, sender: str, m: AppendEntries, now: float) -> None:
        if m.term < self.term:
            return      # pysyncobj drops an AppendEntries of an older term without a word
        changed = m.term > self.term or self.role != FOLLOWER or self.leader != sender
        if m.term > self.term or self.role != FOLLOWER:
            self._become_follower(m.term, now)
        self.leader = sender
        if changed:
            self._changed()
        if m.prev_index > self.last_index or (m.prev_index and self.log[m.prev_index - 1][0] != m.prev_term):
            self._send(sender, AppendReply(self.term, False, min(self.last_index, m.prev_index - 1)))
            return
        i = m.prev_index
        for e in m.entries:
            i += 1
            if i <= self.last_index:
                if self.log[i - 1][0] == e[0]:
                    continue
                del self.log[i - 1:]
            self.log.append(e)
        match = m.prev_index + len(m.entries)
        if m.commit > self.commit:
            self.commit = min(m.commit, match)
            self._apply_committed()
        self._send(sender, AppendReply(self.term, True, match))

    def _on_append_reply(self, sender: str, m: AppendReply, now: float) -> None:
        # pysyncobj's answers carry no term a leader could learn from: it never steps down on one
        if self.role != LEADER or m.term != self.term:
            return
        self.last_response[sender] = now
        if m.success:
            if m.match > self.match.get(sender, 0):
                self.match[sender] = m.match
            self.next_index[sender] = self.match[sender] + 1
            self._advance_commit(now)
            if self.next_index[sender] <= self.last_index:
                self._append_to(sender, now)
        else:
            self.next_index[sender] = max(1, min(self.next_index.get(sender, 1) - 1, m.match + 1))
            self._append_to(sender, now)
