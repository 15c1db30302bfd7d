"""One simulated member: the real Storage, ReplicationCore and MembershipCore, plus the Raft
model and a model of the stream transport's liveness, bound to the simulated network and clock.

This is the simulator's counterpart of cluster/replication/runtime.py (StreamNode) plus
cluster/runtime.py (MembershipNode) plus the product's gating (elasticmq_py/clustered.py): it
carries out the cores' actions the way those do.

* ``Send`` goes on the stream plane of the network; ``Complete`` answers the waiting clients;
  ``Abandoned`` answers every waiting client "unknown" (never success); ``Throttle`` makes sends
  fail with a throttling error before they execute; ``Serving(True, epoch)`` opens the
  membership layer's "replication" gate for that epoch; ``Note`` becomes a history line.
* The membership core gets a ``RaftSample`` every Raft tick and on every role change, lease acks
  from the Raft model, and committed views, which are installed into the replication core.
  ``ProposeView`` goes into the Raft model's log. An ``ActivityChanged(False)`` abandons every
  waiting client operation (StreamNode.abandon): the node lost its quorum, the outcome is unknown.
* A client request is executed only when the membership core says *active* (evaluated at the
  request's arrival, like MembershipNode.active) and the replication core is serving; otherwise
  it is refused with ServiceUnavailable before anything is executed (outcome "failed").
* Liveness of stream peers follows StreamTransport: a heartbeat per peer every ``keepalive``
  carrying the sender's incarnation and whether it hears the recipient; a peer is connected when
  heard from within ``dead_after`` and its last heartbeat says it hears us; a new incarnation is a
  disconnection followed by a connection.

A paused node (SIGSTOP) defers everything that reaches it, timers included, and handles it all in
order when it resumes. A crashed node is replaced by a new SimNode on restart: its storage and
replication log are empty, its Raft state comes back from the "disk" (sim/raft.py ``Durable``, the
product's state-dir), and its replication core starts amnesiac (core.py).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Callable

from storage import IdSource, SqsError, Storage
from storage.commands import SendMessage

from cluster.checker.schema import NodeEvent
from cluster.config import Timing
from cluster.membership import (ActivityChanged, DeliverView, GateOpened, LeaseAck, MembershipCore,
                                ProposeView, RaftSample, Record, TimePassed, View, ViewCommitted, accept_view)
from cluster.replication.core import (Abandoned, Note, ReplicationCore, Serving, StorageReplaced,
                                     TransferSettings)
from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy, Complete, Rejected, Send, Throttle
from cluster.replication.wire import Heartbeat

from sim.net import RAFT, STREAM
from sim.raft import Durable, RaftNode

if TYPE_CHECKING:
    from sim.world import Request, World

REPLICATION_GATE = "replication"
RAFT_TICK_US = 20_000        # pysyncobj's autoTickPeriod
SAMPLE_US = 50_000           # the membership core hears the time at least this often (and at
                             # once on every Raft role, term or leader change)
STREAM_TICK_US = 50_000      # StreamNode's tick
KEEPALIVE_US = 200_000       # Timing.keepalive: stream heartbeat period
DEAD_AFTER_US = 1_000_000    # Timing.connection_timeout


class _Peer:
    __slots__ = ("name", "last_rx", "incarnation", "hears_me", "connected", "last_hb_tx")

    def __init__(self, name: str) -> None:
        self.name = name
        self.last_rx: int | None = None
        self.incarnation: int | None = None
        self.hears_me = False
        self.connected = False
        self.last_hb_tx = -10**12


class SimNode:
    def __init__(self, world: "World", name: str, names: list[str], incarnation: int, *,
                 policy: AckPolicy, timing: Timing, log_limit_bytes: int, chunk_records: int,
                 bugs: frozenset[str], rng: random.Random, disk: Durable | None = None):
        self.world = world
        self.name = name
        self.incarnation = incarnation
        self.alive = True
        self.paused = False
        self.deferred: list[tuple[Callable, tuple]] = []
        self.rng = rng
        now = world.now
        clock = world.storage_clock

        def new_storage() -> Storage:
            return Storage(clock, IdSource(rng.getrandbits(64)))

        self.core = ReplicationCore(
            name, new_storage(), new_storage, log=ReplicationLog(log_limit_bytes), policy=policy,
            limits=Limits(), configured=len(names), transfer=TransferSettings(chunk_records=chunk_records),
            bugs=bugs, amnesiac=disk is not None)
        self.membership = MembershipCore(name, timing, frozenset({REPLICATION_GATE}), configured=frozenset(names))
        self.view: View | None = None     # the Raft-applied view record (cluster/runtime._ViewLog)
        self.raft = RaftNode(name, names, timing, rng, now / 1e6, send=self._raft_send, changed=self._raft_changed,
                             lease_ack=self._lease_ack, apply=self._view_applied, restore=disk)
        self.peers = {n: _Peer(n) for n in names if n != name}
        self.stream_incarnation = rng.getrandbits(62)
        self.pending: dict[int, tuple["Request", Any]] = {}
        self.next_op = 0
        self.flush_scheduled = False
        self.throttling = False
        self.rejected = 0
        self.last_sample = -10**12

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        w = self.world
        w.record(NodeEvent(w.now_s, self.name, "started", {"raft": f"sim:{self.name}",
                                                           "members": sorted(self.raft.configured)}))
        self.raft.replay()
        # Ticks start at a random phase, as independent processes would.
        w.at(w.now + self.rng.randrange(RAFT_TICK_US), self._node_event, self._raft_tick, ())
        w.at(w.now + self.rng.randrange(STREAM_TICK_US), self._node_event, self._stream_tick, ())

    def crash(self) -> None:
        self.alive = False
        self.pending.clear()   # its clients find out by timing out
        self.deferred.clear()

    def resume(self) -> None:
        self.paused = False
        backlog, self.deferred = self.deferred, []
        for fn, args in backlog:
            if not self.alive or self.paused:
                break
            fn(*args)

    # --- event dispatch (everything that reaches a node passes here) ------------------------------

    def _node_event(self, fn: Callable, args: tuple) -> None:
        if not self.alive or self.world.nodes.get(self.name) is not self:
            return
        if self.paused:
            self.deferred.append((fn, args))
            return
        fn(*args)

    def receive(self, plane: int, sender: str, msg: Any) -> None:
        self._node_event(self._on_raft if plane == RAFT else self._on_stream, (sender, msg))

    def request(self, req: "Request") -> None:
        self._node_event(self._on_request, (req,))

    # --- timers ------------------------------------------------------------------------------------

    def _raft_tick(self) -> None:
        w = self.world
        now_s = w.now_s
        self.raft.tick(now_s)
        if w.now - self.last_sample >= SAMPLE_US:
            self._membership(self._sample(now_s))
        w.at(w.now + RAFT_TICK_US, self._node_event, self._raft_tick, ())

    def _stream_tick(self) -> None:
        w = self.world
        now = w.now
        now_ms = w.now_ms
        for p in self.peers.values():
            if now - p.last_hb_tx >= KEEPALIVE_US:
                hears = p.last_rx is not None and now - p.last_rx < DEAD_AFTER_US
                if w.net.send(self.name, p.name, STREAM, Heartbeat(self.stream_incarnation, hears)):
                    p.last_hb_tx = now
            self._evaluate(p, now)
        self._handle(self.core.on_tick(now_ms))
        w.at(now + STREAM_TICK_US, self._node_event, self._stream_tick, ())

    # --- membership -----------------------------------------------------------------------------------

    def _sample(self, now_s: float) -> RaftSample:
        self.last_sample = self.world.now
        r = self.raft
        return RaftSample(now_s, r.term, r.role, r.leader, r.configured)

    def _raft_changed(self) -> None:
        self._membership(self._sample(self.world.now_s))

    def _lease_ack(self, peer: str, term: int, stamp: float) -> None:
        self._membership(LeaseAck(self.world.now_s, peer, term, stamp))

    def _view_applied(self, record: Any) -> None:
        proposed = View.from_record(record)
        if not accept_view(self.view, proposed):
            return
        self.view = proposed
        self._membership(ViewCommitted(self.world.now_s, proposed))

    def _raft_send(self, to: str, msg: Any) -> None:
        self.world.net.send(self.name, to, RAFT, msg)

    def _on_raft(self, sender: str, msg: Any) -> None:
        self.raft.on_message(sender, msg, self.world.now_s)

    def _membership(self, event: Any) -> None:
        w = self.world
        for a in self.membership.handle(event):
            t = type(a)
            if t is Record:
                w.record(NodeEvent(a.at, self.name, a.event, dict(a.fields)))
            elif t is ProposeView:
                self.raft.propose(a.view.to_record(), w.now_s)
            elif t is DeliverView:
                v = a.view
                self._handle(self.core.install_view(v.master, v.epoch, v.members, w.now_ms))
            elif t is ActivityChanged:
                if not a.active:
                    self._abandon("the node lost its quorum (" + a.reason + ")")

    def active(self) -> bool:
        """MembershipNode.active: evaluated now (a lease that just ran out counts)."""
        self._membership(TimePassed(self.world.now_s))
        return self.membership.active

    def can_serve(self) -> bool:
        return self.active() and self.core.serving

    # --- the stream ---------------------------------------------------------------------------------

    def _on_stream(self, sender: str, frame: Any) -> None:
        p = self.peers.get(sender)
        if p is None:
            return
        now = self.world.now
        p.last_rx = now
        if type(frame) is Heartbeat:
            if p.incarnation is not None and frame.incarnation != p.incarnation and p.connected:
                p.connected = False
                p.hears_me = False
                self._handle(self.core.on_peer(sender, False, self.world.now_ms))
            p.incarnation = frame.incarnation
            p.hears_me = frame.hears_you
            self._evaluate(p, now)
            return
        self._handle(self.core.on_frame(sender, frame, self.world.now_ms))

    def _evaluate(self, p: _Peer, now: int) -> None:
        up = p.last_rx is not None and now - p.last_rx < DEAD_AFTER_US and p.hears_me
        if up != p.connected:
            p.connected = up
            if not up:
                p.hears_me = False
            self._handle(self.core.on_peer(p.name, up, self.world.now_ms))

    def _handle(self, actions: list[Any]) -> None:
        w = self.world
        for a in actions:
            t = type(a)
            if t is Send:
                w.net.send(self.name, a.to, STREAM, a.frame)
            elif t is Complete:
                for op in a.op_ids:
                    entry = self.pending.pop(op, None)
                    if entry is not None:
                        w.reply(entry[0], "ok", entry[1], None)
            elif t is Abandoned:
                self._abandon(a.reason)
                self.throttling = False
            elif t is Serving:
                if a.on:
                    self._membership(GateOpened(w.now_s, REPLICATION_GATE, a.epoch))
            elif t is Note:
                # as cluster/replicated.py writes them (cluster/HISTORY.md, "Replication events")
                w.record(NodeEvent(w.now_s, self.name, a.event.replace("-", "_"),
                                   _plain({k: v for k, v in a.fields.items() if k != "started_ms"})))
            elif t is Throttle:
                self.throttling = a.on
            elif t is Rejected:
                self.rejected += 1
            elif t is StorageReplaced:
                pass    # core.storage is the new state already

    def _abandon(self, reason: str) -> None:
        if not self.pending:
            return
        pending, self.pending = self.pending, {}
        for op in sorted(pending):
            self.world.reply(pending[op][0], "unknown", None, "MasterChanged: " + reason)

    # --- clients ------------------------------------------------------------------------------------

    def _on_request(self, req: "Request") -> None:
        w = self.world
        if not self.can_serve():
            master = self.view.master if self.view is not None else None
            w.reply(req, "failed", None, "ServiceUnavailable", hint=master)
            return
        if self.throttling and type(req.command) is SendMessage:
            w.reply(req, "failed", None, "ThrottlingException")
            return
        try:
            result, mutations = self.core.storage.execute(req.command)
        except SqsError as err:
            w.reply(req, "failed", None, err.code)
            return
        op = self.next_op = self.next_op + 1
        self.pending[op] = (req, result)
        self._handle(self.core.submit(op, mutations))
        if mutations and not self.flush_scheduled:
            # StreamNode flushes with call_soon: everything submitted in this turn of the loop goes
            # into one batch. Here a turn is one instant of simulated time.
            self.flush_scheduled = True
            w.at(w.now, self._node_event, self._flush, ())

    def _flush(self) -> None:
        self.flush_scheduled = False
        self._handle(self.core.flush(self.world.now_ms))

    # --- state for the world's god view ----------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return self.core.status(self.world.now_ms)


def _plain(d: dict) -> dict:
    """History fields as JSON-friendly values (tuples become lists)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, tuple):
            v = list(v)
        out[k] = v
    return out
