"""The membership runtime: binds MembershipCore to pysyncobj's thread and the node's event loop.

pysyncobj runs its own tick thread. Everything it reports (role changes, applied view entries,
lease acks from the transport, the tick itself) is turned into a core event under one lock, and
the core's actions are carried out at once: proposals go into pysyncobj's command queue (which
is thread-safe), history lines are written, and subscriber callbacks are *scheduled* onto the
asyncio loop with call_soon_threadsafe, so `on_view` and `on_active` never run on pysyncobj's
thread. Calls into pysyncobj that are not thread-safe (leadership transfer) are queued and run on
its thread at the next tick.

`active` is evaluated on demand from the core and the monotonic clock, so a lease that expires
between two ticks is already reported as expired.

Durable Raft state. With ``[node] state-dir`` set, pysyncobj keeps its journal (term, vote, log,
commit index) and its log-compaction dumps there, so a restarted member neither votes twice in
a term nor votes, with an empty log, for a candidate that lacks a committed view (Raft's safety
needs both; the simulator found the second, sim/README.md bug 1). The files survive a process
crash (they are memory-mapped, not fsynced per entry: a power loss is not covered). A journal
found at start also tells the node that it was a member before and so lost its messages:
``restarted`` is what the replication layer's amnesia flag starts from. Only our own files are
read back; nothing from the network is unpickled unless it passed pysyncobj's authentication.

Construct and start a MembershipNode from the thread that runs the event loop and lives as long
as the node (pysyncobj stops ticking when the thread that created it exits).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import threading
import time
from typing import Any, Callable

from pysyncobj import SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj.config import FAIL_REASON

from cluster.config import Address, ConfigError, NodeConfig, NodeSpec
from cluster.history import HistoryWriter
from cluster.lease import VoteGuard, may_campaign
from cluster.membership import (CANDIDATE, FOLLOWER, LEADER, ActivityChanged, DeliverView, GateOpened,
                                LeaseAck, MembershipCore, ProposeView, RaftSample, Record, StepDown, View,
                                ViewCommitted, accept_view)
from cluster.transport import ClusterTransport, NamedNode

log = logging.getLogger("cluster.runtime")

_ROLES = {0: FOLLOWER, 1: CANDIDATE, 2: LEADER}


class BindError(RuntimeError):
    pass


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


class MembershipNode:
    def __init__(self, config: NodeConfig, *, loop: asyncio.AbstractEventLoop | None = None,
                 history: HistoryWriter | None = None, required_gates: tuple[str, ...] = (),
                 may_stand: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.config = config
        self.name = config.self_name
        self._loop = loop
        self._history = history
        self._clock = clock
        self._wall = wall
        t = config.timing
        self._lock = threading.RLock()
        # `active` is asked on every client operation. Between two events only the clock can end
        # activity (at the lease's expiry), so a yes is remembered with that deadline and read
        # without the lock; every event forgets it before it touches the core.
        self._active_until = float("-inf")
        self._core = MembershipCore(self.name, t, frozenset(required_gates),
                                    configured=frozenset(config.cluster.names))
        self._guard = VoteGuard(t.vote_guard, started_at=clock(), startup_quiet=t.election_max)
        self._role_code = 0
        self._so: SyncObj | None = None
        self._transport: ClusterTransport | None = None
        self._views = _ViewLog(self._on_view_applied)
        self._view_listeners: list[Callable[[View], Any]] = []
        self._active_listeners: list[Callable[[bool], Any]] = []
        self._member_listeners: list[Callable[[str, NodeSpec], Any]] = []
        # Asked on every Raft tick (pysyncobj's thread): False keeps this node from standing for
        # election. The replication layer says False while it is being brought up by a state
        # transfer: starved by restoring, a joiner missed heartbeats, stood with a higher term,
        # deposed the healthy master and won, and then had to pull the whole state before
        # anyone could be served (pysyncobj has no pre-vote). It still votes.
        self._may_stand = may_stand
        self._withheld: str | None = None   # why standing is off now (logged on change)
        self._on_raft_thread: collections.deque[Callable[[], None]] = collections.deque()
        self._stopped = False
        self._journal = self._dump = None
        if config.state_dir:
            os.makedirs(config.state_dir, exist_ok=True)
            self._journal = os.path.join(config.state_dir, "raft.journal")
            self._dump = os.path.join(config.state_dir, "raft.dump")
        # A journal already there: this node was a member before this process started.
        self.restarted = self._journal is not None and os.path.exists(self._journal)

    # -- lifecycle ---------------------------------------------------------------------------------

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
            log.warning("%s: no [node] state-dir: Raft state is not durable, and a restarted member "
                        "cannot tell that it lost its messages (see cluster/runtime.py)", self.name)
        me = NamedNode(self.name, str(self.config.spec.raft_addr))
        others = [NamedNode(p.name, str(p.raft_addr)) for p in self.config.peers()]

        def make_transport(so: Any, self_node: Any, other_nodes: Any) -> ClusterTransport:
            self._transport = ClusterTransport(so, self_node, other_nodes, config=self.config,
                                               vote_guard=self._guard, on_lease_ack=self._on_lease_ack,
                                               on_member=self._on_member, clock=self._clock)
            return self._transport

        self._record("started", self._clock(), raft=str(self.config.bind_addr),
                     members=sorted(self.config.cluster.names), restarted=self.restarted)
        so = SyncObj(me, others, conf, consumers=[self._views], nodeClass=NamedNode,
                     transportClass=make_transport)
        assert self._transport is not None
        if not self._transport.ready:
            so.destroy()
            raise BindError(self._transport.bind_error or "raft transport failed to bind")
        self._so = so
        so.addOnTickCallback(self._on_tick)

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        so, self._so = self._so, None
        if so is not None:
            so.destroy_synchronous()
        with self._lock:
            was_active = self._core.active
        self._record("stopped", self._clock(), was_active=was_active)
        if self._history is not None:
            self._history.close()

    # -- subscriptions and queries (event-loop thread) --------------------------------------------

    def subscribe(self, on_view: Callable[[View], Any] | None = None,
                  on_active: Callable[[bool], Any] | None = None,
                  on_member: Callable[[str, NodeSpec], Any] | None = None) -> None:
        """Callbacks run on the node's event loop, in the order the events happened.
        ``on_member("added" | "removed", spec)``: the Raft configuration changed at runtime."""
        if on_view is not None:
            self._view_listeners.append(on_view)
        if on_active is not None:
            self._active_listeners.append(on_active)
        if on_member is not None:
            self._member_listeners.append(on_member)

    @property
    def view(self) -> View | None:
        with self._lock:
            return self._core.view

    @property
    def active(self) -> bool:
        if self._clock() < self._active_until:
            return True
        with self._lock:
            core = self._core
            active = core.evaluate(self._clock())[0]
            if active:
                self._active_until = core.lease_expiry()  # type: ignore[assignment]
            return active

    @property
    def epoch(self) -> int | None:
        v = self.view
        return None if v is None else v.epoch

    @property
    def bound_raft_addr(self) -> str | None:
        t = self._transport
        return str(t.bound_addr) if t is not None and t.bound_addr is not None else None

    def open_gate(self, gate: str, epoch: int) -> None:
        """The replication layer says: synchronised for `epoch`. Activity needs this per epoch."""
        self._handle(GateOpened(self._clock(), gate, epoch))

    def status(self) -> dict[str, Any]:
        now = self._clock()
        with self._lock:
            core = self._core
            active, reason = core.evaluate(now)
            expiry = core.lease_expiry()
            v = core.view
            reachable = sorted(core.lease.reachable(core.configured, now, self.config.timing.suspect)) \
                if core.role == LEADER else None
            acks = {p: round(now - r, 3) for p, r in core.lease.received.items()} if core.role == LEADER else {}
            st: dict[str, Any] = {
                "node": self.name,
                "cluster": self.config.cluster.name,
                "role": core.role,
                "term": core.term,
                "leader": core.leader,
                "view": v.to_dict() if v else None,
                "master": v.master if v else None,
                "epoch": v.epoch if v else None,
                "active": active,
                "inactive_reason": None if active else reason,
                "quorum": core.has_quorum(now) if core.role == LEADER
                else (core.leader is not None and now - self._guard.last_contact < self.config.timing.election_min),
                "lease_remaining_s": round(expiry - now, 3) if expiry is not None and expiry != float("inf") else None,
                "configured": sorted(core.configured),
                "reachable": reachable,
            }
        tr = self._transport
        peers = tr.link_status() if tr is not None else {}
        for p, info in peers.items():
            info["last_ack_s_ago"] = acks.get(p)
        st["peers"] = peers
        so = self._so
        st["raft"] = {
            "commit_index": so.raftCommitIndex if so else None,
            "last_applied": so.raftLastApplied if so else None,
            "auth_failures": tr.auth_failures if tr else 0,
            "refused_connections": tr.refused_hellos if tr else 0,
            "votes_dropped": tr.votes_dropped if tr else 0,
        }
        return st

    # -- operator actions ----------------------------------------------------------------------------

    async def step_down(self, timeout: float = 5.0) -> bool:
        """Make this master inactive at once and hand Raft leadership to the most caught-up
        follower. Returns False if this node is not the master (nothing is done then)."""
        with self._lock:
            if self._core.role != LEADER:
                return False
        self._handle(StepDown(self._clock()))
        fut: asyncio.Future = self._loop.create_future()

        def done(_res: Any, err: Any) -> None:
            self._loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(err))

        def transfer() -> None:
            assert self._so is not None
            self._so.transferLeadership(callback=done)

        self._on_raft_thread.append(transfer)
        err = await asyncio.wait_for(fut, timeout)
        return err == FAIL_REASON.SUCCESS

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

        call(done)
        err = await asyncio.wait_for(fut, timeout)
        if err != FAIL_REASON.SUCCESS:
            raise RuntimeError(f"membership change failed (pysyncobj reason {err})")

    # -- pysyncobj thread -------------------------------------------------------------------------------

    def _sample(self) -> RaftSample | None:
        so = self._so if self._so is not None else (self._transport._so if self._transport else None)
        if so is None:
            return None
        leader = so._getLeader()
        configured = frozenset({self.name} | {n.id for n in so.otherNodes})
        return RaftSample(self._clock(), so.raftCurrentTerm, _ROLES.get(self._role_code, FOLLOWER),
                          leader.id if leader is not None else None, configured)

    def _on_state_changed(self, old: int, new: int) -> None:
        # Runs inside pysyncobj's state change, before e.g. a vote it is about to send leaves:
        # this is where a deposed leader stops being active (lease.py, case 1).
        self._role_code = new
        if new == 1:
            # pysyncobj announces candidacy before raising the term; the same tick samples the
            # new term right after, so recording here would only log a stale (role, term) pair.
            return
        sample = self._sample()
        if sample is not None:
            self._handle(sample)

    def _on_tick(self) -> None:
        so = self._so
        if so is not None:
            try:
                why = self._withhold_campaign(so)
                if why is not None:
                    # pysyncobj's election timer: pushed past the next tick while standing is off
                    so._SyncObj__raftElectionDeadline = time.monotonic() + self.config.timing.election_max
                if why != self._withheld:
                    if why is not None:
                        log.info("not standing for election: %s", why)
                    elif self._withheld is not None:
                        log.info("may stand for election again")
                    self._withheld = why
            except Exception:
                log.exception("campaign check failed")
        while self._on_raft_thread:
            try:
                self._on_raft_thread.popleft()()
            except Exception:
                log.exception("queued raft-thread call failed")
        sample = self._sample()
        if sample is not None:
            self._handle(sample)

    def _withhold_campaign(self, so: SyncObj) -> str | None:
        """Why this node must not stand for election now, or None."""
        if self._may_stand is not None and not self._may_stand():
            return "a state transfer is bringing this node up"
        if self._transport is not None and not may_campaign(
                self._transport.heard_ago(), len(so.otherNodes) + 1, self.config.timing.connection_timeout):
            return "no majority of the members heard from (pre-vote)"
        return None

    def _on_lease_ack(self, peer: str, term: int, stamp: float, now: float) -> None:
        self._handle(LeaseAck(now, peer, term, stamp))

    def _on_member(self, change: str, node: NamedNode) -> None:
        try:
            raft = getattr(node, "raft_addr", None)
            stream = getattr(node, "stream_addr", None)
            spec = NodeSpec(node.id, Address.parse(raft) if raft else Address("0.0.0.0", 0),
                            Address.parse(stream) if stream else None)
        except ConfigError as e:
            log.warning("member %s %s with unusable addresses: %s", node.id, change, e)
            return
        for cb in self._member_listeners:
            self._loop.call_soon_threadsafe(cb, change, spec)

    def _on_view_applied(self, view: View) -> None:
        self._handle(ViewCommitted(self._clock(), view))

    def _on_proposal_done(self, view: View, result: Any, err: Any) -> None:
        if err != FAIL_REASON.SUCCESS or not result:
            log.debug("view proposal %s not installed (err=%s, result=%s)", view.view_id, err, result)

    # -- carrying out actions -----------------------------------------------------------------------------

    def _handle(self, event: Any) -> None:
        with self._lock:
            self._active_until = float("-inf")
            actions = self._core.handle(event)
            for a in actions:
                self._do(a)

    def _do(self, a: Any) -> None:
        if isinstance(a, ProposeView):
            so = self._so if self._so is not None else (self._transport._so if self._transport else None)
            if so is not None:
                self._views.install(a.view.to_record(),
                                    callback=functools.partial(self._on_proposal_done, a.view))
        elif isinstance(a, DeliverView):
            log.info("view %d: master %s epoch %d members %s", a.view.view_id, a.view.master,
                     a.view.epoch, ",".join(a.view.members))
            for cb in self._view_listeners:
                self._loop.call_soon_threadsafe(cb, a.view)
        elif isinstance(a, ActivityChanged):
            log.info("%s: %s", "ACTIVE" if a.active else "inactive", a.reason)
            for cb in self._active_listeners:
                self._loop.call_soon_threadsafe(cb, a.active)
        elif isinstance(a, Record):
            self._record(a.event, a.at, **a.fields)

    def _record(self, event: str, at: float, **fields: Any) -> None:
        if self._history is None:
            return
        ts = self._wall() - (self._clock() - at)
        self._history.write(event, ts, **fields)
