"""One simulated member: the node core and the election core that the product runs, bound to the
simulated network and clock, with the Raft model in place of pysyncobj.

A member in the product runs two threads, and so does this one, as two sides of the node:

* **the Raft side** (pysyncobj's thread in cluster/runtime.py): the Raft model (sim/raft.py) and
  the election core (cluster/election.py). Every message on the Raft plane goes to the election
  core first, which delivers it to the model (or holds it behind a fence, or drops it under the
  vote guard) or answers it itself (pre-votes, lease acks); the model never stands on its own, only
  on the core's ``Stand``.
* **the loop side** (the event loop in cluster/replicated.py): the node core (cluster/node_core.py)
  with the real storage, the replication core and stream liveness. Stream frames, client requests,
  ticks and the ends of loop turns (``FlushDue``) go to it; its actions become frames, answers to
  clients, history lines and calls on the Raft side.

What crosses between the two sides is exactly what the product posts with
``call_soon_threadsafe`` and its mailbox: samples of Raft's role and term, lease acks, committed
views and fences one way; view proposals, may-stand, fence-done the other. Each crossing takes a
small random delay (``HOP_US``), in order, as a thread hop does.

Client requests go through the core's gating as in the product: the active master executes, a
member with a reachable master forwards (over the stream plane, like ``Forward`` frames carrying
the command instead of an HTTP request), anything else refuses with ServiceUnavailable and a
master hint. A paused node (SIGSTOP) defers everything that reaches it, timers included, and
handles it all in order when it resumes. A crashed node is replaced by a new SimNode on restart:
its storage and replication log are empty, its Raft state comes back from the "disk" (sim/raft.py
``Durable``, the product's state-dir), and its node core starts amnesiac.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from storage import IdSource, SqsError, Storage
from storage.commands import CreateQueue
from storage.keys import command_key, key_names

from cluster.checker.schema import NodeEvent
from cluster.compaction import Snapshot
from cluster.config import Timing
from cluster.election import (
    APPEND, OTHER, TIMEOUT_NOW, VOTE_REQUEST, AdoptTerm, Deliver, ElectionCore, Fence, LeaderContact, LeaseAck, LeaseAcked,
    PreVote, PreVoteReply, RaftState, Release, Send as RaftSend, Stand, TermAhead,
)
from cluster.errors import NotServing, OutcomeUnknown, Throttled
from cluster.membership import ProposeView, RaftSample, Record, View, accept_view
from cluster.journal.journal import Journal
from cluster.journal.shared import SharedJournal
from cluster.journaling import rebuild
from cluster.node_actions import (
    Answer, FenceDone, FlushDue, ForgetDropped, ForwardAnswered, ForwardFailed, ForwardTo, Local, MayStand, Persist,
    PersistReset, PlaceFailed, Placed, ProposePlacement, ServeForwarded, ToRaft, TransferLeadership,
)
from cluster.node_core import CoreSettings, NodeCore, restarts_amnesiac
from cluster.replication.core import StorageReplaced, TransferSettings
from cluster.replication.master import Limits
from cluster.replication.messages import Ack, AckPolicy, ForwardReply, Rejected, Send

from sim.disk import SimDisk
from sim.journal_writer import JournalWriter
from sim.flow_control import counted
from sim.net import RAFT, STREAM
from sim.raft import AppendEntries, Durable, RaftNode, RequestVote, TimeoutNow

if TYPE_CHECKING:
    from sim.clients import Request
    from sim.world import World

RAFT_TICK_US = 20_000        # pysyncobj's autoTickPeriod
CORE_TICK_US = 50_000        # the node runtime's tick
HOP_US = (20, 400)           # a post from one thread of a node to the other

_CORE_MESSAGES = (PreVote, PreVoteReply, LeaseAck, TermAhead)


class _Op:
    """A client operation this node executes: for its answer and its history `op` line."""

    __slots__ = ("asker", "command", "started", "group")

    def __init__(self, asker: Any, command: Any, started: float, group: int | None = None) -> None:
        self.asker = asker        # the client's Request, or ("forwarded", member, request id)
        self.command = command
        self.started = started
        self.group = group        # its replication group, with several (None: one group)


def _view_floor(disk: Durable | None) -> int:
    """The newest view id in a restarted node's durable Raft log (cluster/group_mastery.py)."""
    if disk is None:
        return 0
    return max((int(rec[0]) for _, rec in disk.log if type(rec) is tuple), default=0)


@dataclass(frozen=True)
class JournalSpec:
    """A node's data-dir, as the scenario draws it (the same for every node of a run)."""

    fsync: str                       # always | interval | never
    interval_us: int
    fsync_us: tuple[int, int]        # an fsync's latency, uniform
    snapshot_min_bytes: int
    segment_bytes: int
    snapshot_step: tuple[int, int] = (1024 * 1024, 256)   # compaction: bytes a step, records a blob


class SimNode:
    def __init__(self, world: "World", name: str, names: list[str], incarnation: int, *,
                 policy: AckPolicy, forward: bool, timing: Timing, limits: Limits, log_limit_bytes: int,
                 chunk_records: int, transfer_window: int = 8,
                 bugs: frozenset[str], rng: random.Random, disk: Durable | None = None,
                 journal: JournalSpec | None = None, data: SimDisk | None = None,
                 disk_rng: random.Random | None = None):
        """``disk``: the Raft state a crash left (None: a first start). ``journal`` and ``data``:
        its data-dir, recovered here as the product recovers it (``Journal.open``, then
        ``cluster.journaling.rebuild``); JournalDamaged goes to the caller: the node cannot start."""
        self.world = world
        self.name = name
        self.incarnation = incarnation
        self.alive = True
        self.paused = False               # the whole process stopped (SIGSTOP)
        self.stalled = False              # only its event loop stopped; Raft's thread goes on
        self.deferred: list[tuple[Callable, tuple]] = []
        self.rng = rng
        self.acked = 0                    # the highest seq this node acked since its state was last replaced
        now_s = world.now_s
        clock = world.storage_clock

        def new_storage() -> Storage:
            return Storage(clock, IdSource(rng.getrandbits(64)))

        self.n_groups = world.sc.groups
        settings = CoreSettings(timing=timing, policy=policy, forward=forward, limits=limits, groups=self.n_groups,
                                transfer=TransferSettings(chunk_records=chunk_records, window=transfer_window),
                                log_limit_bytes=log_limit_bytes, journal=journal is not None,
                                **({"snapshot_min_bytes": journal.snapshot_min_bytes,
                                    "snapshot_step_bytes": journal.snapshot_step[0],
                                    "snapshot_blob_records": journal.snapshot_step[1]} if journal else {}))
        restarted = disk is not None      # its Raft state says it was a member
        self.writer: JournalWriter | None = None
        self.recovered: dict[str, Any] | None = None
        # with several groups: the highest seq acked in each group since its state was last replaced
        self.acked_groups = [0] * self.n_groups
        group_state = None
        if journal is not None and self.n_groups > 1:
            # one shared journal for every group, recovered group by group, as the product does
            assert data is not None and disk_rng is not None
            existed = any(n.endswith((".seg", ".snap")) for n in data.list())
            sjnl, srec = SharedJournal.open(data, self.n_groups, segment_bytes=journal.segment_bytes)
            group_state = [rebuild(g, new_storage, log_limit_bytes) for g in srec.groups]
            storage, rlog = group_state[0]
            dropped = srec.entries_dropped
            amnesiac = restarts_amnesiac(restarted, journal.fsync, existed, dropped)
            self.writer = JournalWriter(self, sjnl, journal, disk_rng)
            self.recovered = {"seq": rlog.last_seq, "seqs": [lg.last_seq for _, lg in group_state],
                              "existed": existed, "truncated": srec.truncated, "amnesiac": amnesiac}
        elif journal is not None:
            assert data is not None and disk_rng is not None
            existed = any(n.endswith((".seg", ".snap")) for n in data.list())
            jnl, rec = Journal.open(data, segment_bytes=journal.segment_bytes)
            storage, rlog = rebuild(rec, new_storage, log_limit_bytes)
            dropped = rec.entries_dropped     # `journal truncate` ran on it (no seed runs it)
            amnesiac = restarts_amnesiac(restarted, journal.fsync, existed, dropped)
            self.writer = JournalWriter(self, jnl, journal, disk_rng)
            self.recovered = {"seq": rlog.last_seq, "epoch": rlog.last_epoch, "existed": existed,
                              "snapshot_seq": rec.snapshot.at_seq if rec.snapshot is not None else None,
                              "entries": len(rec.entries), "truncated": rec.truncated, "amnesiac": amnesiac}
        else:
            storage, rlog, dropped = new_storage(), None, False
            amnesiac = restarts_amnesiac(restarted, None)
        self.core = NodeCore(name, tuple(names), settings, storage, new_storage, incarnation=rng.getrandbits(62),
                             amnesiac=amnesiac, entries_dropped=dropped, log=rlog, bugs=bugs, started=now_s,
                             group_state=group_state, view_floor=_view_floor(disk))
        self.election = ElectionCore(name, timing, rng, now_s, bugs=bugs)
        self.view: View | None = None     # the Raft-applied view record (cluster/runtime._ViewLog)
        self.raft = RaftNode(name, names, timing, now_s, send=self._raft_send, changed=self._raft_changed,
                             apply=self._view_applied, restore=disk,
                             on_place=self._placed if self.n_groups > 1 else None)
        self._hops = [0, 0]               # per direction: the latest delivery time of a post (FIFO)
        self._last_sample: tuple | None = None
        self.rejected = 0

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        w = self.world
        fields: dict[str, Any] = {"raft": f"sim:{self.name}", "members": sorted(self.raft.configured)}
        if self.recovered is not None:
            fields["journal"] = self.recovered
        w.record(NodeEvent(w.now_s, self.name, "started", fields))
        self.raft.replay()
        # Ticks start at a random phase, as independent processes would.
        w.at(w.now + self.rng.randrange(RAFT_TICK_US), self._node_event, self._raft_tick, ())
        w.at(w.now + self.rng.randrange(CORE_TICK_US), self._node_event, self._core_tick, ())

    def crash(self) -> None:
        self.alive = False
        self.deferred.clear()   # its clients find out by timing out

    @property
    def frozen(self) -> bool:
        """Paused or stalled: its loop side is not running."""
        return self.paused or self.stalled

    def freeze(self, loop_only: bool) -> None:
        """A pause (the whole process) or, ``loop_only``, a stall of its event loop."""
        if loop_only:
            self.stalled = True
        else:
            self.paused = True

    def resume(self) -> None:
        """The end of a pause or a stall: the backlog runs in the order it came."""
        self.paused = self.stalled = False
        backlog, self.deferred = self.deferred, []
        for fn, args in backlog:
            if not self.alive or self.frozen:
                break
            fn(*args)

    # --- event dispatch (everything that reaches a node passes here) ------------------------------

    def _node_event(self, fn: Callable, args: tuple) -> None:
        if not self.alive or self.world.nodes.get(self.name) is not self:
            return
        if self.paused or (self.stalled and getattr(fn, "__func__", None) in _LOOP_SIDE):
            self.deferred.append((fn, args))
            return
        fn(*args)

    def receive(self, plane: int, sender: str, msg: Any) -> None:
        turn = self.world.rare.turn
        if plane == STREAM and turn.wait is not None and turn.hold(self, sender, msg):
            return      # the `turn` rare path: read in the turn of the next client operation
        self._node_event(self._on_raft if plane == RAFT else self._on_stream, (sender, msg))

    def read_held(self, sender: str, msg: Any) -> None:
        """A stream frame that arrived earlier is read now (sim/rare/turn.py ``Turn.hold``)."""
        self._node_event(self._on_stream, (sender, msg))

    def request(self, req: "Request") -> None:
        self._node_event(self._on_request, (req,))

    def _post(self, to_loop: bool, fn: Callable, *args: Any) -> None:
        """A post from one side of the node to the other: a little later, in order."""
        w = self.world
        i = 0 if to_loop else 1
        t = max(w.now + self.rng.randint(*HOP_US), self._hops[i])
        self._hops[i] = t
        w.at(t, self._node_event, fn, args)

    # --- the Raft side ------------------------------------------------------------------------------

    def _state(self) -> RaftState:
        r = self.raft
        return RaftState(r.term, r.role, r.leader, r.last_index, r.last_term, tuple(r.peers))

    def _raft_tick(self) -> None:
        # In pysyncobj's order: a stand the election core asked for since the last tick (if it
        # still stands, and Raft is connected to anyone), Raft's own tick, then ours.
        w = self.world
        now_s = w.now_s
        if self.election.standing and self.raft.role != "leader" and self._connected_to_anyone():
            w.elections.stood(self.name)
            w.terms.stood(self.name, now_s, self.raft.term + 1)
            self.raft.start_election(now_s)
        self.raft.tick(now_s)
        self._election(self.election.tick(now_s, self._state()))
        w.at(w.now + RAFT_TICK_US, self._node_event, self._raft_tick, ())

    def _connected_to_anyone(self) -> bool:
        net = self.world.net
        return any(net.up(self.name, p) and net.up(p, self.name) for p in self.raft.peers)

    def _raft_changed(self) -> None:
        r = self.raft
        self.world.terms.term(self.name, self.world.now_s, r.term)
        key = (r.term, r.role, r.leader)
        if key == self._last_sample:
            return
        self._last_sample = key
        self._post(True, self._loop_sample, RaftSample(self.world.now_s, r.term, r.role, r.leader, r.configured))

    def _view_applied(self, record: Any) -> None:
        proposed = View.from_record(record)
        if not accept_view(self.view, proposed):
            return
        self.view = proposed
        self._post(True, self._loop_view, proposed)

    def _placed(self, key: tuple[str, str, str], group: int) -> None:
        """Raft applied a placement (cluster/runtime.py posts it to the loop the same way)."""
        self._post(True, self._loop_placed, key, group)

    def _raft_send(self, to: str, msg: Any) -> None:
        self.world.net.send(self.name, to, RAFT, msg)

    def _on_raft(self, sender: str, msg: Any) -> None:
        now_s = self.world.now_s
        if type(msg) in _CORE_MESSAGES:
            if type(msg) is PreVoteReply and msg.granted:
                self.world.terms.pre_vote_granted(self.name, sender, msg.round)
            self._election(self.election.on_message(sender, msg, now_s, self._state()))
            return
        t = type(msg)
        if t is TimeoutNow and sender == self.raft.leader and msg.term >= self.raft.term:
            self.world.terms.transfer_asked(self.name)
        elif t is RequestVote and self.world.rare.gc.wait is not None:
            self.world.rare.gc.check(self, sender, msg.term)   # the `gc` rare path stalls the loop then
        kind = VOTE_REQUEST if t is RequestVote else APPEND if t is AppendEntries \
            else TIMEOUT_NOW if t is TimeoutNow else OTHER
        self._election(self.election.on_raft(sender, kind, msg.term, msg, now_s, self._state()))

    def _election(self, actions: list[Any]) -> None:
        w = self.world
        for a in actions:
            t = type(a)
            if t is Deliver:
                r = self.raft
                before = (r.term, r.voted_for)
                r.on_message(a.sender, a.message, w.now_s)
                if a.kind == VOTE_REQUEST and r.voted_for == a.sender and (r.term, r.voted_for) != before:
                    w.elections.voted(self.name, a.sender, r.term)
                elif a.kind == APPEND and r.term == a.term and r.leader == a.sender:
                    w.elections.leader_contact[self.name] = (w.now, a.sender)
                if a.kind == APPEND:
                    self._election(self.election.appended(a.sender, a.term, a.message.stamp, w.now_s, self._state()))
            elif t is RaftSend:
                if type(a.message) is PreVote:
                    w.terms.pre_vote_sent(self.name, a.message.round)
                    if w.rare.deaf.wait is not None:
                        w.rare.deaf.pre_voting(self.name)     # the `deaf` rare path heals in this instant
                w.net.send(self.name, a.to, RAFT, a.message)
            elif t is Stand:
                pass    # carried out at Raft's next tick (_raft_tick), as pysyncobj does
            elif t is AdoptTerm:
                self.raft.adopt_term(a.term, w.now_s)
            elif t is Release:
                for item in a.held:
                    if type(item) is AdoptTerm:
                        self.raft.adopt_term(item.term, w.now_s)
                    else:
                        self._election(self.election.on_raft(item.sender, item.kind, item.term, item.message,
                                                             w.now_s, self._state()))
            elif t is LeaseAcked:
                self._post(True, self._loop_lease_ack, a.peer, a.term, a.stamp)
            elif t is LeaderContact:
                self._post(True, self._loop_contact, a.leader, a.at)
            elif t is Fence:
                r = self.raft
                self._last_sample = (r.term, r.role, r.leader)
                self._post(True, self._loop_sample, RaftSample(w.now_s, r.term, r.role, r.leader, r.configured))
                self._post(True, self._loop_fence, a.term)

    def step_down(self, to: str | None) -> None:
        """An operator's step-down (the admin route POST /cluster/step-down), ``to`` its target."""
        self._node_event(self._loop_step_down, (to,))

    def _raft_do(self, action: Any) -> None:
        """What the loop side asks of the Raft side (the product's mailbox)."""
        t = type(action)
        if t is ProposeView:
            self.raft.propose(action.view.to_record(), self.world.now_s)
        elif t is MayStand:
            self._election(self.election.may_stand(action.allowed, action.why))
        elif t is FenceDone:
            self._election(self.election.fence_done(action.term))
        elif t is TransferLeadership:
            self.raft.transfer_leadership(action.to, self.world.now_s)
        elif t is ProposePlacement:
            self.raft.propose_place(action.key, action.groups, self.world.now_s)

    # --- the loop side -------------------------------------------------------------------------------

    def _loop_sample(self, sample: RaftSample) -> None:
        self._act(self.core.raft_sample(RaftSample(self.world.now_s, sample.term, sample.role, sample.leader,
                                                   sample.configured)))

    def _loop_view(self, view: View) -> None:
        self._act(self.core.view_committed(view, self.world.now_s))

    def _loop_lease_ack(self, peer: str, term: int, stamp: float) -> None:
        self._act(self.core.lease_acked(peer, term, stamp, self.world.now_s))

    def _loop_contact(self, leader: str, at: float) -> None:
        self._act(self.core.leader_contact(leader, at))

    def _loop_fence(self, term: int) -> None:
        self._act(self.core.fence(term, self.world.now_s))

    def _loop_placed(self, key: tuple[str, str, str], group: int) -> None:
        self._act(self.core.placed(key, group, self.world.now_s))

    def _loop_step_down(self, to: str | None) -> None:
        self._act(self.core.step_down(self.world.now_s, to))

    def _core_tick(self) -> None:
        w = self.world
        self._act(self.core.tick(w.now_s))
        if self.n_groups == 1:
            w.flow.ticked(self.name, w.now_s, self.core.groups[0].throttling, counted(self, w.now_s))
        else:    # each group's master throttles its own producers: judged per group
            for g in self.core.groups:
                w.flow.ticked(f"{self.name}/g{g.index}", w.now_s, g.throttling, counted(self, w.now_s, g.index))
        w.at(w.now + CORE_TICK_US, self._node_event, self._core_tick, ())

    def _flush(self) -> None:
        self._act(self.core.flush(self.world.now_s))
        self.world.waste.flushed(self.world.now_s, self)

    def _loop_persisted(self, token: int) -> None:
        group = self.core.groups[0]
        rep = group.replication
        held, durable = group.held_ack(rep.master) if rep.master else None, rep.durable_seq
        self._act(self.core.persisted(token, self.world.now_s))
        self.world.waste.journal_report(self, held, durable)
        if self.world.rare.race.armed is not None:
            self.world.rare.race.check(self, "persisted")

    def _loop_journal_failed(self, reason: str) -> None:
        self._act(self.core.journal_failed(reason, self.world.now_s))

    def _on_stream(self, sender: str, frame: Any) -> None:
        if self.n_groups > 1:
            group, frame = frame      # (group, frame): what an EM2 bundle's item carries
            self._act(self.core.frame(sender, frame, self.world.now_s, group))
        else:
            self._act(self.core.frame(sender, frame, self.world.now_s))
        rare = self.world.rare
        if rare.race.armed is not None:
            rare.race.check(self, "stream")
        if rare.wiped.wait is not None:
            rare.wiped.check(self, sender, frame)   # the `wiped` rare path isolates the master then

    def _on_request(self, req: "Request") -> None:
        now_s = self.world.now_s
        if self.n_groups > 1:
            self._on_grouped_request(req, now_s)
            return
        route = self.core.route(now_s)
        t = type(route)
        if t is Local:
            self._act(self.core.execute(_Op(req, req.command, now_s), req.command, now_s))
            if self.world.rare.turn.wait is not None:
                self.world.rare.turn.op(self)   # the `turn` rare path: a frame read in this turn
        elif t is ForwardTo:
            self._act(self.core.forward(req, req.command, now_s))
        else:
            self._refuse(req)

    def _on_grouped_request(self, req: "Request", now_s: float) -> None:
        """With several groups: the request runs in the group the core names for its queue (as
        the product's endpoint asks it); a CreateQueue of a name no group holds waits in the core
        for its placement (``Placed``, or ``PlaceFailed``: refused)."""
        core = self.core
        key = command_key(req.command)
        plain = key_names(key) if key is not None else None
        group = core.request_group(plain, type(req.command) is CreateQueue)
        if group is None:
            self._act(core.place(plain, req, now_s))   # type: ignore[arg-type]
            return
        self._in_group(req, group, now_s)

    def _in_group(self, req: "Request", group: int, now_s: float) -> None:
        core = self.core
        route = core.route(now_s, group)
        t = type(route)
        if t is Local:
            self._act(core.execute(_Op(req, req.command, now_s, group), req.command, now_s, group))
        elif t is ForwardTo:
            self._act(core.forward(req, req.command, now_s, group))
        else:
            self._refuse(req, group)

    def _refuse(self, req: "Request", group: int = 0) -> None:
        view = self.core.view
        hint = None if view is None else view.master if not view.groups else view.groups[group][0]
        self.world.reply(req, "failed", None, "ServiceUnavailable", hint=hint)

    def _act(self, actions: list[Any]) -> None:
        w = self.world
        for a in actions:
            t = type(a)
            if t is Send:
                if type(a.frame) is Ack:
                    if a.frame.seq > self.acked and a.group == 0:
                        self.acked = a.frame.seq
                    if a.frame.seq > self.acked_groups[a.group]:
                        self.acked_groups[a.group] = a.frame.seq
                w.net.send(self.name, a.to, STREAM, a.frame if self.n_groups == 1 else (a.group, a.frame))
            elif t is Persist or t is PersistReset or t is Snapshot or t is ForgetDropped:
                if self.writer is not None:
                    self.writer.submit(a)
            elif t is StorageReplaced:
                self.acked = 0      # a new history: what it acked before may rightly be gone
                for g in self.core.groups:
                    if g.storage is a.storage:
                        self.acked_groups[g.index] = 0
            elif t is Answer:
                op: _Op = a.token
                outcome, error = _outcome(a.error)
                self._op_line(op, outcome, error)
                if type(op.asker) is tuple:    # ("forwarded", sender, request id)
                    _, sender, rid = op.asker
                    reply = ForwardReply(rid, (outcome, a.result, error))
                    w.net.send(self.name, sender, STREAM, reply if self.n_groups == 1 else (0, reply))
                    if w.rare.replay.wait is not None:   # the `replay` rare path breaks a connection then
                        w.rare.replay.check(self, sender, rid, op.command, a.result if outcome == "ok" else None)
                else:
                    hint = None
                    view = self.core.view
                    if isinstance(a.error, NotServing) and view is not None:
                        hint = view.master if op.group is None else view.groups[op.group][0]
                    w.reply(op.asker, outcome, a.result if outcome == "ok" else None, error, hint=hint)
            elif t is FlushDue:
                # at the end of this turn, or at the time asked for (a gather's end)
                when = w.now if a.at is None else max(w.now, int(a.at * 1e6 + 0.999))
                w.at(when, self._node_event, self._flush, ())
            elif t is ForwardAnswered:
                outcome, result, error = a.payload
                w.reply(a.token, outcome, result, error)
            elif t is ForwardFailed:
                if a.sent:
                    w.reply(a.token, "unknown", None, f"ForwardFailed: {a.reason}")
                else:
                    self._refuse(a.token)
            elif t is ServeForwarded:
                if self.n_groups == 1:
                    op = _Op(("forwarded", a.sender, a.request_id), a.payload, w.now_s)
                    self._act(self.core.execute(op, a.payload, w.now_s))
                else:
                    op = _Op(("forwarded", a.sender, a.request_id), a.payload, w.now_s, a.group)
                    self._act(self.core.execute(op, a.payload, w.now_s, a.group))
                if w.rare.turn.wait is not None:
                    w.rare.turn.op(self)
            elif t is ToRaft:
                self._post(False, self._raft_do, a.action)
            elif t is Record:
                # as cluster/replicated.py writes them (cluster/HISTORY.md)
                w.record(NodeEvent(a.at, self.name, a.event, _plain(a.fields)))
            elif t is Rejected:
                self.rejected += 1
            elif t is Placed:
                self._in_group(a.token, a.group, w.now_s)
            elif t is PlaceFailed:
                w.reply(a.token, "failed", None, "ServiceUnavailable")

    def _op_line(self, op: _Op, outcome: str, error: str | None) -> None:
        """The history's `op` line, as the product's ClusterBackend writes it: what this node
        executed for a client (forwarded ones included), and how it ended."""
        w = self.world
        queue = getattr(op.command, "queue", None)
        fields: dict[str, Any] = {"action": type(op.command).__name__, "queue": queue.name if queue else None,
                                  "outcome": outcome, "completed": w.now_s}
        if error is not None:
            fields["error"] = error.split(":", 1)[0]
        if op.group is not None:
            fields["group"] = op.group
        w.record(NodeEvent(op.started, self.name, "op", fields))

    # --- state for the world's god view ----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return self.core.groups[0].replication.status(self.world.now_ms)


def _outcome(error: BaseException | None) -> tuple[str, str | None]:
    """What a careful client concludes from the node core's answer."""
    if error is None:
        return "ok", None
    if isinstance(error, NotServing):
        return "failed", "ServiceUnavailable"
    if isinstance(error, Throttled):
        return "failed", "ThrottlingException"
    if isinstance(error, OutcomeUnknown):
        return "unknown", f"MasterChanged: {error}"
    if isinstance(error, SqsError):
        return "failed", error.code
    return "failed", type(error).__name__


def _plain(d: dict) -> dict:
    """History fields as JSON-friendly values (tuples become lists)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out


# What runs on the node's event loop (cluster/replicated.py): a stall holds these back, and
# only these, while the Raft side keeps its timers and its peers.
_LOOP_SIDE = frozenset({
    SimNode._on_stream, SimNode._on_request, SimNode._core_tick, SimNode._flush, SimNode._loop_sample,
    SimNode._loop_view, SimNode._loop_lease_ack, SimNode._loop_contact, SimNode._loop_fence,
    SimNode._loop_persisted, SimNode._loop_journal_failed, SimNode._loop_step_down, SimNode._loop_placed,
})
