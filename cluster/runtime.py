"""The Raft runtime: pysyncobj on its own thread, bound to the election core.

pysyncobj runs a tick thread of its own. On that thread, and only there, this runtime owns
pysyncobj, our ClusterTransport and the election core (cluster/election.py), and translates:

* every message a peer sends on its Raft link goes to the election core, which says whether and
  when Raft sees it (the vote guard, the fence) or answers it itself (pre-votes, lease acks);
* pysyncobj's election timer is held off after every tick and every message, so only the
  election core's ``Stand`` (or a leadership transfer) starts an election;
* outgoing AppendEntries carry a lease stamp: our clock when they are handed to the transport,
  which can only understate how fresh the follower's contact is (the safe direction).

Everything the node core on the event loop must know (samples of Raft's role and term, lease
acks, committed views and queue placements, fence requests, runtime membership changes,
statistics) is *posted* to it with ``call_soon_threadsafe``; what it asks of Raft (proposing a
view or a placement, may-stand, fence done, leadership transfer, membership changes) comes back
through ``submit``, a mailbox that wakes pysyncobj's poller. No state is read across the two
threads.

Durable Raft state. With ``[node] state-dir`` set, pysyncobj keeps its journal (term, vote, log,
commit index) and its log-compaction dumps there, so a restarted member neither votes twice in
a term nor votes, with an empty log, for a candidate that lacks a committed view (Raft's safety
needs both; without the second, the simulator sees two views committed under one id). The files
survive a process crash (they are memory-mapped, not fsynced per entry: a power loss is not
covered). A journal found at start also tells the node that it was a member before and so lost
its messages: ``restarted`` is what the replication layer's amnesia flag starts from. Only our
own files are read back; nothing from the network is unpickled unless it passed pysyncobj's authentication.

Construct and start a MembershipNode from the thread that runs the event loop and lives as long
as the node (pysyncobj stops ticking when the thread that created it exits).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import random
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.config import FAIL_REASON
from pysyncobj.poller import POLL_EVENT_TYPE

from cluster.config import Address, ConfigError, NodeConfig, NodeSpec
from cluster.directory import Directory, Key
from cluster.election import (
    APPEND, CANDIDATE, FOLLOWER, LEADER, OTHER, TIMEOUT_NOW, VOTE_REQUEST, AdoptTerm, Deliver, ElectionCore,
    Fence, LeaderContact, LeaseAck, LeaseAcked, NotStanding, PreVote, PreVoteReply, RaftState, Release, Send,
    Stand, TermAhead,
)
from cluster.membership import ProposeView, RaftSample, View, accept_view
from cluster.node_actions import FenceDone, MayStand, ProposePlacement
from cluster.transport import ClusterTransport, NamedNode

log = logging.getLogger("cluster.runtime")

_ROLES = {0: FOLLOWER, 1: CANDIDATE, 2: LEADER}
_KINDS = {"request_vote": VOTE_REQUEST, "append_entries": APPEND, "timeout_now": TIMEOUT_NOW}
# pysyncobj's own election timer, pushed this far out after every tick and message: it never
# fires on its own, only when the election core says Stand (or a leadership transfer does).
_HOLD_S = 3600.0
STATS_EVERY_S = 0.25


class BindError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class RaftStats:
    """Plain values about Raft and its links, sampled on pysyncobj's thread for the status."""

    commit_index: int
    last_applied: int
    auth_failures: int
    refused_connections: int
    votes_dropped: int
    pre_votes_granted: int
    pre_votes_refused: int
    not_standing: str | None
    leader_contact_s_ago: float | None      # since we last accepted an AppendEntries
    links: dict[str, dict[str, Any]]


class RaftEvents(Protocol):
    """What the event loop's side takes (cluster/replicated.py); called on the loop."""

    def raft_sample(self, sample: RaftSample) -> None: ...
    def lease_acked(self, peer: str, term: int, stamp: float) -> None: ...
    def leader_contact(self, leader: str, at: float) -> None: ...
    def view_committed(self, view: View) -> None: ...
    def placed(self, key: Key, group: int) -> None: ...                   # groups >= 2 only
    def directory_restored(self, record: tuple) -> None: ...              # groups >= 2 only
    def fence(self, term: int) -> None: ...
    def member_changed(self, change: str, spec: NodeSpec) -> None: ...
    def raft_stats(self, stats: RaftStats) -> None: ...


class _ViewLog(SyncObjConsumer):
    """The replicated view record. Only `record` (a plain tuple) is replicated and snapshotted."""

    def __init__(self, on_install: Callable[[View], None]) -> None:
        # Attributes set before SyncObjConsumer.__init__ are excluded from snapshots.
        self._on_install = on_install
        super().__init__()
        self.record: tuple | None = None

    @replicated
    def install(self, record: tuple) -> bool:
        try:
            proposed = View.from_record(record)
        except (TypeError, ValueError):
            return False
        current = View.from_record(self.record) if self.record is not None else None
        if not accept_view(current, proposed):
            return False
        self.record = proposed.to_record()
        self._on_install(proposed)
        return True

    def _deserialize(self, data: dict) -> None:
        # A snapshot from the leader replaces the record without replaying the entries.
        super()._deserialize(data)
        if self.record is not None:
            self._on_install(View.from_record(self.record))


class _DirectoryLog(SyncObjConsumer):
    """The queue directory (cluster/directory.py), for a cluster of two groups or more. Its
    snapshot is the directory's record, builtins only."""

    def __init__(self, on_place: Callable[[Key, int], None], on_restore: Callable[[tuple], None]) -> None:
        # Attributes set before SyncObjConsumer.__init__ are excluded from snapshots: _serialize
        # below says what a snapshot holds.
        self._on_place = on_place
        self._on_restore = on_restore
        self.directory = Directory()
        super().__init__()

    @replicated
    def place(self, key_record: tuple, groups: int) -> int | None:
        """Every committed placement, a repeat of a placed key included (it keeps its group)."""
        try:
            group = self.directory.apply_place(key_record, groups)
        except ValueError:
            return None
        self._on_place(tuple(key_record), group)
        return group

    def _serialize(self) -> dict:
        return {"record": self.directory.to_record()}

    def _deserialize(self, data: dict) -> None:
        # A snapshot from the leader (or the dump file at start) replaces the directory.
        self.directory = Directory.from_record(data["record"])
        self._on_restore(self.directory.to_record())


# Our messages on the Raft links travel as dicts of builtins (pysyncobj pickles what it sends;
# after authentication, but a class of ours on the wire would still tie both ends' versions).
def _encode(message: Any) -> dict:
    t = type(message)
    if t is PreVote:
        return {"type": "_pre_vote", "term": message.term, "li": message.last_index, "lt": message.last_term,
                "round": message.round}
    if t is PreVoteReply:
        return {"type": "_pre_vote_reply", "term": message.term, "granted": message.granted,
                "round": message.round, "vt": message.voter_term}
    if t is TermAhead:
        return {"type": "_term_ahead", "term": message.term}
    return {"type": "_lease_ack", "term": message.term, "ls": message.stamp}


def _decode(message: dict) -> Any:
    kind = message.get("type")
    if kind == "_pre_vote":
        return PreVote(int(message["term"]), int(message["li"]), int(message["lt"]), int(message["round"]))
    if kind == "_pre_vote_reply":
        return PreVoteReply(int(message["term"]), bool(message["granted"]), int(message["round"]),
                            int(message["vt"]))
    if kind == "_term_ahead":
        return TermAhead(int(message["term"]))
    if kind == "_lease_ack":
        return LeaseAck(int(message["term"]), float(message["ls"]))
    return None


class MembershipNode:
    def __init__(self, config: NodeConfig, events: RaftEvents, *, loop: asyncio.AbstractEventLoop | None = None,
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None,
                 bugs: frozenset[str] = frozenset(), groups: int | None = None) -> None:
        self.config = config
        self.name = config.self_name
        self._events = events
        self._loop = loop
        self._clock = clock
        self._election = ElectionCore(self.name, config.timing, rng or random.Random(), clock(), bugs=bugs)
        self._role_code = 0
        self._so: SyncObj | None = None
        self._transport: ClusterTransport | None = None
        self._views = _ViewLog(self._on_view_applied)
        # Only a cluster of two groups or more has a directory. With one, Raft holds exactly the
        # views, so its journal, dump and method ids read as they always have; with more, the
        # directory comes after the views, which keep their method id.
        # (``groups`` None: the configured [cluster] groups)
        self._groups = groups = config.cluster.groups if groups is None else groups
        self._directory = _DirectoryLog(self._on_placed, self._on_directory_restored) if groups >= 2 else None
        self._mailbox: collections.deque[Any] = collections.deque()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._last_sample: tuple | None = None
        self._stats_at = float("-inf")
        self._not_standing: str | None = None
        self._stopped = False
        self._journal = self._dump = None
        state_dir = config.raft_state_dir
        if state_dir:
            os.makedirs(state_dir, exist_ok=True)
            self._journal = os.path.join(state_dir, "raft.journal")
            self._dump = os.path.join(state_dir, "raft.dump")
        # A journal already there: this node was a member before this process started.
        self.restarted = self._journal is not None and os.path.exists(self._journal)

    # -- lifecycle (the loop's thread) ------------------------------------------------------------

    def start(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        t = self.config.timing
        conf = SyncObjConf(
            password=self.config.cluster.secret,
            autoTickPeriod=0.02,                       # tick granularity bounds heartbeat jitter
            appendEntriesPeriod=t.heartbeat,
            raftMinTimeout=t.election_min,
            raftMaxTimeout=t.election_max,
            leaderFallbackTimeout=t.leader_fallback,
            connectionTimeout=t.connection_timeout,
            connectionRetryTime=t.reconnect,
            appendEntriesUseBatch=False,               # a view commits in one round trip, not a batch period
            dynamicMembershipChange=True,
            maxBindRetries=1,
            onStateChanged=self._on_state_changed,
            journalFile=self._journal,                 # None without a state-dir (module docstring)
            fullDumpFile=self._dump,
            useFork=False,                             # never fork a process that runs threads and zmq
        )
        if self._journal is None:
            log.warning("%s: no [node] state-dir nor [storage] data-dir: Raft state is not durable, and a restarted member "
                        "cannot tell that it lost its messages (see cluster/runtime.py)", self.name)
        me = NamedNode(self.name, str(self.config.spec.raft_addr))
        others = [NamedNode(p.name, str(p.raft_addr)) for p in self.config.peers()]

        def make_transport(so: Any, self_node: Any, other_nodes: Any) -> ClusterTransport:
            self._transport = ClusterTransport(so, self_node, other_nodes, config=self.config,
                                               on_message=self._on_message, outgoing=self._stamp,
                                               on_member=self._on_member, clock=self._clock)
            return self._transport

        consumers: list[SyncObjConsumer] = [self._views]
        if self._directory is not None:
            consumers.append(self._directory)
        so = SyncObj(me, others, conf, consumers=consumers, nodeClass=NamedNode,
                     transportClass=make_transport)
        assert self._transport is not None
        if not self._transport.ready:
            so.destroy()
            raise BindError(self._transport.bind_error or "raft transport failed to bind")
        self._so = so
        so._poller.subscribe(self._wake_r.fileno(), self._on_wake, POLL_EVENT_TYPE.READ)
        so.addOnTickCallback(self._on_tick)

    def stop(self) -> None:
        """Blocks until pysyncobj's thread has stopped: run it off the loop."""
        if self._stopped:
            return
        self._stopped = True
        so, self._so = self._so, None
        if so is not None:
            so.destroy_synchronous()
        self._wake_r.close()
        self._wake_w.close()

    # -- the mailbox (any thread; used by the loop) ------------------------------------------------

    def submit(self, action: Any) -> None:
        """Carry out the node core's ``ProposeView``, ``ProposePlacement``, ``MayStand`` or
        ``FenceDone`` on Raft's thread."""
        self._mailbox.append(action)
        self._wake()

    def propose_place(self, key: Key) -> None:
        """On the Raft leader: commit a placement of ``key`` among this cluster's groups; every
        member's loop then hears ``placed(key, group)``."""
        self.submit(ProposePlacement(key, self._groups))

    def transfer_leadership(self, to: str | None = None) -> "asyncio.Future[bool]":
        """Hand Raft leadership to ``to`` (None: the most caught-up follower); the future says
        whether it went."""
        fut = self._loop.create_future()

        def done(_res: Any, err: Any) -> None:
            self._loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(err == FAIL_REASON.SUCCESS))

        def transfer() -> None:
            node = None if to is None else self._node(to)
            if to is not None and node is None:
                done(None, FAIL_REASON.REQUEST_DENIED)   # no longer a member
            else:
                self._so.transferLeadership(node, callback=done)

        self._mailbox.append(transfer)
        self._wake()
        return fut

    async def add_member(self, spec: NodeSpec, timeout: float = 5.0) -> None:
        stream = str(spec.stream_addr) if spec.stream_addr is not None else None
        await self._membership_change(lambda cb: self._so.addNodeToCluster(
            NamedNode(spec.name, str(spec.raft_addr), stream), callback=cb), timeout)

    async def remove_member(self, name: str, timeout: float = 5.0) -> None:
        await self._membership_change(lambda cb: self._so.removeNodeFromCluster(NamedNode(name), callback=cb), timeout)

    async def _membership_change(self, call: Callable[[Callable], None], timeout: float) -> None:
        if self._so is None:
            raise RuntimeError("node not started")
        fut: asyncio.Future = self._loop.create_future()

        def done(_res: Any, err: Any) -> None:
            self._loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(err))

        self._mailbox.append(lambda: call(done))
        self._wake()
        err = await asyncio.wait_for(fut, timeout)
        if err != FAIL_REASON.SUCCESS:
            raise RuntimeError(f"membership change failed (pysyncobj reason {err})")

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass   # already awake (the buffer is full of wake-ups), or stopped

    # -- pysyncobj's thread ---------------------------------------------------------------------------

    def _on_wake(self, _descr: int, _event: int) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        self._drain()

    def _drain(self) -> None:
        while self._mailbox:
            a = self._mailbox.popleft()
            try:
                t = type(a)
                if t is ProposeView:
                    self._views.install(a.view.to_record(), callback=functools.partial(self._proposal_done, a.view))
                elif t is ProposePlacement:
                    if self._directory is None:
                        log.warning("a placement of %r proposed in a cluster of one group: dropped", a.key)
                    else:
                        self._directory.place(a.key, a.groups, callback=functools.partial(self._placement_done, a.key))
                elif t is MayStand:
                    self._do(self._election.may_stand(a.allowed, a.why))
                elif t is FenceDone:
                    self._do(self._election.fence_done(a.term))
                else:
                    a()
            except Exception:
                log.exception("a call on Raft's thread failed")

    def _state(self) -> RaftState:
        so = self._so if self._so is not None else (self._transport._so if self._transport else None)
        if so is None:
            return RaftState(0, FOLLOWER, None, 0, 0, ())
        leader = so._getLeader()
        return RaftState(so.raftCurrentTerm, _ROLES.get(self._role_code, FOLLOWER),
                         leader.id if leader is not None else None,
                         so._SyncObj__getCurrentLogIndex(), so._SyncObj__getCurrentLogTerm(),
                         tuple(sorted(n.id for n in so.otherNodes)))

    def _post_sample(self, force: bool = False) -> None:
        s = self._state()
        key = (s.term, s.role, s.leader, s.peers)
        if key == self._last_sample and not force:
            return
        self._last_sample = key
        sample = RaftSample(self._clock(), s.term, s.role, s.leader, frozenset((self.name, *s.peers)))
        self._loop.call_soon_threadsafe(self._events.raft_sample, sample)

    def _on_state_changed(self, _old: int, new: int) -> None:
        self._role_code = new
        if new == 1:
            # pysyncobj announces candidacy before raising the term; the same tick samples the
            # new term right after, so posting here would only report a stale (role, term) pair.
            return
        self._post_sample()

    def _on_tick(self) -> None:
        self._drain()
        try:
            self._do(self._election.tick(self._clock(), self._state()))
        except Exception:
            log.exception("election tick failed")
        self._post_sample()
        now = self._clock()
        if now - self._stats_at >= STATS_EVERY_S:
            self._stats_at = now
            self._post_stats()

    def _on_message(self, node: NamedNode, message: dict) -> None:
        now = self._clock()
        kind = message.get("type")
        try:
            if isinstance(kind, str) and kind.startswith("_"):
                ours = _decode(message)
                if ours is not None:
                    self._do(self._election.on_message(node.id, ours, now, self._state()))
                return
            term = message.get("term")
            self._do(self._election.on_raft(node.id, _KINDS.get(kind, OTHER),
                                            term if isinstance(term, int) else 0, message, now, self._state()))
        except (KeyError, TypeError, ValueError):
            log.warning("malformed %s message from %s", kind, node.id)

    def _do(self, actions: list[Any]) -> None:
        for a in actions:
            t = type(a)
            if t is Deliver:
                node = self._node(a.sender)
                if node is None:
                    continue
                self._transport.deliver(node, a.message)
                if a.kind == APPEND:
                    self._do(self._election.appended(a.sender, a.term, a.message.get("_ls"), self._clock(),
                                                     self._state()))
            elif t is Stand:
                pass    # the deadline line below makes pysyncobj stand at its next tick
            elif t is AdoptTerm:
                self._adopt(a.term)
            elif t is Release:
                for item in a.held:
                    if type(item) is AdoptTerm:
                        self._adopt(item.term)
                    else:
                        self._do(self._election.on_raft(item.sender, item.kind, item.term, item.message,
                                                        self._clock(), self._state()))
            elif t is Send:
                node = self._node(a.to)
                if node is not None:
                    self._transport.send(node, _encode(a.message))
            elif t is LeaseAcked:
                self._loop.call_soon_threadsafe(self._events.lease_acked, a.peer, a.term, a.stamp)
            elif t is LeaderContact:
                self._loop.call_soon_threadsafe(self._events.leader_contact, a.leader, a.at)
            elif t is Fence:
                # the role and term the loop must see first (it may not have had this tick's sample)
                self._post_sample(force=True)
                self._loop.call_soon_threadsafe(self._events.fence, a.term)
            elif t is NotStanding:
                if a.reason is not None:
                    log.info("not standing for election: %s", a.reason)
                elif self._not_standing is not None:
                    log.info("may stand for election again")
                self._not_standing = a.reason
        so = self._so if self._so is not None else (self._transport._so if self._transport else None)
        if so is not None:
            # Raft's own timer never fires: only Stand (or a leadership transfer) starts an election.
            so._SyncObj__raftElectionDeadline = 0 if self._election.standing else time.monotonic() + _HOLD_S

    def _adopt(self, term: int) -> None:
        """Make pysyncobj adopt ``term`` without voting: it has no call for that, but a vote
        request of a higher term from a candidate with no log does exactly that (it takes the
        term, becomes a follower, and refuses the vote: the candidate's log is behind)."""
        so = self._so if self._so is not None else (self._transport._so if self._transport else None)
        peers = list(so.otherNodes) if so is not None else []
        if not peers or term <= so.raftCurrentTerm:
            return
        self._transport.deliver(peers[0], {"type": "request_vote", "term": term, "last_log_index": -1,
                                           "last_log_term": -1})

    def _node(self, name: str) -> NamedNode | None:
        so = self._so if self._so is not None else (self._transport._so if self._transport else None)
        if so is None:
            return None
        for n in so.otherNodes:
            if n.id == name:
                return n
        return None

    def _stamp(self, message: dict) -> dict:
        if message.get("type") == "append_entries":
            return dict(message, _ls=self._clock())
        return message

    def _post_stats(self) -> None:
        so, tr, e = self._so, self._transport, self._election
        contact = e.guard.last_contact
        stats = RaftStats(so.raftCommitIndex if so else 0, so.raftLastApplied if so else 0,
                          tr.auth_failures if tr else 0, tr.refused_hellos if tr else 0,
                          e.votes_dropped, e.pre_votes_granted, e.pre_votes_refused, self._not_standing,
                          None if contact == float("-inf") else round(self._clock() - contact, 3),
                          tr.link_status() if tr else {})
        self._loop.call_soon_threadsafe(self._events.raft_stats, stats)

    def _on_member(self, change: str, node: NamedNode) -> None:
        try:
            raft = getattr(node, "raft_addr", None)
            stream = getattr(node, "stream_addr", None)
            spec = NodeSpec(node.id, Address.parse(raft) if raft else Address("0.0.0.0", 0),
                            Address.parse(stream) if stream else None)
        except ConfigError as e:
            log.warning("member %s %s with unusable addresses: %s", node.id, change, e)
            return
        self._loop.call_soon_threadsafe(self._events.member_changed, change, spec)

    def _on_view_applied(self, view: View) -> None:
        self._loop.call_soon_threadsafe(self._events.view_committed, view)

    def _on_placed(self, key: Key, group: int) -> None:
        self._loop.call_soon_threadsafe(self._events.placed, key, group)

    def _on_directory_restored(self, record: tuple) -> None:
        self._loop.call_soon_threadsafe(self._events.directory_restored, record)

    def _placement_done(self, key: Key, result: Any, err: Any) -> None:
        if err != FAIL_REASON.SUCCESS or result is None:
            log.debug("placement of %r not committed (err=%s, result=%s)", key, err, result)

    def _proposal_done(self, view: View, result: Any, err: Any) -> None:
        if err != FAIL_REASON.SUCCESS or not result:
            log.debug("view proposal %s not installed (err=%s, result=%s)", view.view_id, err, result)
