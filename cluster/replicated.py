"""ReplicatedStorage: the node core (cluster/node_core.py) bound to the event loop, ZeroMQ and Raft.

Every decision is the core's; this runtime only translates. On the node's event loop it owns the
NodeCore, the stream's StreamTransport (ZeroMQ) and a periodic tick; pysyncobj runs on its own
thread in MembershipNode (cluster/runtime.py), which posts what Raft reports to this loop and
carries out what the core asks of Raft. Nothing here is thread-safe: call it from the loop.

* Frames in, the tick, the end of a loop turn (``FlushDue``: one batch and one cumulative ack per
  peer for everything of that turn), and Raft's events become core events.
* ``execute(command, done)``: the one calling convention from the endpoint down. ``done(result,
  None)`` once the command's ack policy is met, ``done(None, error)`` otherwise: ``NotServing``
  (nothing was executed; at once), ``Throttled``, an ``SqsError``, or ``OutcomeUnknown`` (it
  was executed and may or may not survive). Called at most once, maybe before ``execute``
  returns.
* ``route()`` is the core's gating; ``forward(payload, done)`` hands a client request to the
  master over the stream, ``done(answer_payload, None)`` or ``done(None, ForwardFailed)``.
  Requests other members forward to us go to ``serve_forwarded`` (given to ``start``), whose
  ``reply`` callable sends the answer back. Both directions leave at the end of the turn, one
  frame per peer for all of the turn's requests or answers (cluster/forward_batches.py).
* Replication groups (``[cluster] groups`` >= 2): ``route``, ``execute`` and ``forward`` take the
  group the core says runs the request (``request_group``; a CreateQueue of a name with no group
  waits in the core for Raft's placement: ``place``). Every frame of a turn leaves in one EM2 bundle
  per peer, items (group, frame), and each received item goes to the core with its group; forwarded
  requests travel in their group's ``ForwardBatch``, so the master serves each in the group the
  forwarder routed it to. One group keeps the path above, frame by frame.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from storage import Storage
from storage.commands import Command
from storage.limits import STRICT, Limits as StorageLimits

from cluster.compaction import Snapshot
from cluster.config import NodeConfig, NodeSpec
from cluster.errors import NotServing
from cluster.forward_batches import ForwardBatcher
from cluster.history import HistoryWriter
from cluster.membership import RaftSample, View
from cluster.node_actions import (
    Answer, FlushDue, ForgetDropped, ForwardAnswered, ForwardFailed, MessagesArrived, Persist, PersistReset,
    PlaceFailed, Placed, Route, ServeForwarded, ServingChanged, ThrottleChanged, ToRaft, TransferLeadership, Warn,
)
from cluster.node_core import CoreSettings, NodeCore, restarts_amnesiac
from cluster import view_floor
from cluster.journaling import JournalBinding, Recovered, journal_status, open_journal, open_shared_journal
from cluster.replication.core import StorageReplaced
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy, Forward, ForwardBatch, ForwardReplies, ForwardReply, Rejected, Send
from cluster.replication.transport import StreamTransport, _RateLimitedLog
from cluster.membership import Record
from cluster.runtime import MembershipNode, RaftStats
from cluster.status import NodeStatus, node_status
from cluster.turn_bundles import TurnBundles

log = logging.getLogger("cluster.replicated")

_FORWARDING = frozenset((Forward, ForwardReply, ForwardBatch, ForwardReplies))
# How often an operator's step-down of one group looks whether a view moved the group yet.
HANDOVER_POLL_S = 0.02


class ForwardError(RuntimeError):
    """A forwarded request got no answer. ``sent``: it reached the master, which may have run it."""

    def __init__(self, reason: str, sent: bool) -> None:
        super().__init__(reason)
        self.sent = sent


@dataclass
class ForwardCounts:
    forwarded: int = 0
    served_for_others: int = 0
    failed: int = 0


class ReplicatedStorage:
    def __init__(self, config: NodeConfig, clock: Any, limits: StorageLimits = STRICT, *,
                 history: HistoryWriter | None = None, tick: float = 0.05,
                 on_serving: Callable[[bool], None] | None = None,
                 on_storage: Callable[[Storage], None] | None = None,
                 on_changed: Callable[[], None] | None = None,
                 client_error: Callable[[BaseException], BaseException] | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 raft: Callable[[NodeConfig, Any], MembershipNode] = MembershipNode) -> None:
        self.config = config
        self.name = config.self_name
        self.history = history
        self.tick_interval = tick
        self.on_serving = on_serving
        self.on_storage = on_storage
        self.on_changed = on_changed
        # what a client's callback gets instead of the core's error (the SQS error, say)
        self.client_error = client_error or (lambda err: err)
        self._now = monotonic
        self._wall = time.time
        rep = config.cluster.replication
        # ``raft``: pysyncobj's runtime; tests of this runtime alone script Raft's side instead
        self.n_groups = groups = config.cluster.groups
        self.membership = raft(config, self)
        # several groups: the newest view applied, kept where Raft's state is (cluster/view_floor.py)
        self._floor_dir = config.raft_state_dir if groups > 1 else None
        self._floor = view_floor.read(self._floor_dir) if self._floor_dir else 0
        durability = config.durability
        log_limit = rep.log_limit_mb * 1024 * 1024
        settings = CoreSettings(
            timing=config.timing, policy=AckPolicy(rep.policy), forward=rep.forward,
            limits=Limits(throttle_lag_batches=rep.throttle_lag_batches, throttle_lag_ms=rep.throttle_lag_ms,
                          gather_ms=rep.gather_ms),
            log_limit_bytes=log_limit, journal=durability is not None,
            snapshot_min_bytes=(durability.snapshot_min_mb if durability is not None else 64) * 1024 * 1024,
            groups=groups)
        new_storage = lambda: Storage(clock=clock, limits=limits)  # noqa: E731
        self.recovered: Recovered | None = None
        self._journal = None
        self._binding: JournalBinding | None = None
        group_state = None
        if durability is not None and groups > 1:
            # one shared journal for every group (cluster/journal/shared.py)
            self._journal, every = open_shared_journal(durability, groups, new_storage, log_limit)
            self.recovered = every[0]
            group_state = [(r.storage, r.log) for r in every]
            storage, rlog = group_state[0]
            dropped = self.recovered.entries_dropped
            amnesiac = restarts_amnesiac(self.membership.restarted, durability.fsync, self.recovered.existed, dropped)
        elif durability is not None:
            self._journal, self.recovered = open_journal(durability, new_storage, log_limit)
            storage, rlog = self.recovered.storage, self.recovered.log
            dropped = self.recovered.entries_dropped
            amnesiac = restarts_amnesiac(self.membership.restarted, durability.fsync, self.recovered.existed, dropped)
        else:
            storage, rlog, dropped = new_storage(), None, False
            amnesiac = restarts_amnesiac(self.membership.restarted, None)
        self.core = NodeCore(
            self.name, config.cluster.names, settings, storage, new_storage,
            incarnation=random.SystemRandom().getrandbits(62), amnesiac=amnesiac, entries_dropped=dropped, log=rlog,
            started=self._now(), group_state=group_state,
            view_floor=self._floor)
        if groups == 1:
            self.stream = StreamTransport(config.cluster, self.name, on_frame=self._on_frame,
                                          on_drained=self._event_ended)
        else:
            self.stream = StreamTransport(config.cluster, self.name, on_bundle=self._on_bundle, groups=groups,
                                          on_drained=self._event_ended)
        # several groups: this turn's frames, one bundle per peer (cluster/turn_bundles.py)
        self._bundles = TurnBundles()
        self._bundles_due = False
        self._flush_at_end = False
        self._in_persisted = False
        self.forwarding = ForwardCounts()
        # forwards and their answers leave at the end of the turn, one frame per peer
        self._forward_batches = ForwardBatcher()
        if groups > 1:
            # per group, so that each request travels with the group it was routed to; a build of
            # several groups reads batches (it speaks EM2), so they are used from the first
            self._group_batches = [ForwardBatcher() for _ in range(groups)]
            for b in self._group_batches:
                b.readers.update(n for n in config.cluster.names if n != self.name)
        self._forward_flush_due = False
        self.last_raft_stats: RaftStats | None = None
        self._serve_forwarded: Callable[..., None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick_task: asyncio.Task | None = None
        self._transfer: asyncio.Future | None = None
        self._rlog = _RateLimitedLog(10.0)
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self, serve_forwarded: Callable[..., None] | None = None) -> None:
        """Bind the stream, then join the cluster (raises cluster.runtime.BindError/OSError).
        ``serve_forwarded(payload, reply)`` answers requests other members forward here; with
        several groups ``serve_forwarded(payload, reply, group)``, the group to run it in."""
        self._loop = asyncio.get_running_loop()
        self._serve_forwarded = serve_forwarded
        try:
            await self.stream.start()
        except BaseException:
            self.close_journal()
            raise
        try:
            self._record(Record(self._now(), "started", {
                "raft": str(self.config.bind_addr), "members": sorted(self.config.cluster.names),
                "restarted": self.membership.restarted}))
            self.membership.start()
        except BaseException:
            await self.stream.close()
            self.close_journal()
            raise
        # No await since the stream and Raft started: nothing they deliver has run yet, so no
        # journal action can come before the writer exists.
        if self._journal is not None:
            self._binding = JournalBinding(self._journal, self.config.durability, self._loop,
                                           self._persisted, self._journal_failed)
        self._tick_task = self._loop.create_task(self._ticker(), name=f"node-tick-{self.name}")
        self._started = True

    def close_journal(self) -> None:
        """Release the data-dir of a node that will not start (its lock is held from the
        constructor on, so that a second process on the same data-dir is refused at once)."""
        if self._journal is not None and self._binding is None:
            self._journal.close()
            self._journal = None

    async def stop(self) -> None:
        if not self._started:
            self.close_journal()
            return
        self._started = False
        was_active = self.core.membership.active
        if self._tick_task is not None:
            self._tick_task.cancel()
            try:
                await self._tick_task
            except (asyncio.CancelledError, Exception):
                pass
        self._act(self.core.flush(self._now()))
        self._flush_forwards()
        self._send_bundles()
        await self.stream.close()
        # destroy_synchronous joins pysyncobj's thread: keep the loop free meanwhile
        await asyncio.get_running_loop().run_in_executor(None, self.membership.stop)
        if self._binding is not None:
            # drains and syncs what was handed over; their durability reports find the loop
            # still running and the core answering nobody (stopped below)
            await asyncio.get_running_loop().run_in_executor(None, self._binding.close)
            await asyncio.sleep(0)
        self._act(self.core.stopped(f"{self.name} stopped before the ack policy was met"))
        self._record(Record(self._now(), "stopped", {"was_active": was_active}))
        if self.history is not None:
            self.history.close()

    # -- clients ---------------------------------------------------------------------------------

    @property
    def storage(self) -> Storage:
        return self.core.groups[0].storage

    @property
    def serving(self) -> bool:
        """The active master, synchronised: client operations are accepted."""
        return self.core.serving(self._now())

    def route(self, group: int = 0) -> Route:
        return self.core.route(self._now(), group)

    def execute(self, command: Command, done: Callable[[Any, BaseException | None], None], group: int = 0) -> None:
        if not self._started:
            done(None, self.client_error(NotServing(f"Node {self.name} is not running.")))
            return
        actions = self.core.execute(done, command, self._now(), group)
        if actions:   # most often none: the operation waits for its batch's acks
            self._act(actions)

    def forward(self, payload: Any, done: Callable[[Any, BaseException | None], None], group: int = 0) -> None:
        self.forwarding.forwarded += 1
        self._act(self.core.forward(done, payload, self._now(), group))

    def unavailable_reason(self, group: int = 0) -> str:
        return self.core.unavailable_reason(self._now(), group)

    # -- the queue directory (several groups) ----------------------------------------------------

    def request_group(self, key: Any, creates: bool = False) -> int | None:
        """The group that runs a request on the queue ``key`` (region, account, name; None: no
        queue), or None for a CreateQueue (``creates``) of a name no group holds: ``place`` it."""
        return self.core.request_group(key, creates)

    def storage_of(self, key: Any) -> Storage:
        """The storage that holds the queue ``key`` (group 0's for a name no group holds)."""
        if self.n_groups == 1:
            return self.core.groups[0].storage
        return self.core.groups[self.core.request_group(key)].storage

    def place(self, key: Any, done: Callable[[int | None], None]) -> None:
        """Have the queue ``key`` placed in a group: ``done(group)`` once Raft committed it (at
        once if it is known), ``done(None)`` when the core gave up waiting (``place_timeout``)."""
        self._act(self.core.place(key, done, self._now()))

    def master_name(self) -> str | None:
        view = self.core.view
        return view.master if view is not None else None

    # -- operators -------------------------------------------------------------------------------

    def status(self, digest: bool = False) -> NodeStatus:
        return node_status(self, digest=digest)

    async def step_down(self, timeout: float = 5.0, to: str | None = None, group: int | None = None) -> bool:
        """Make this master inactive at once and hand Raft leadership to ``to``, or to the most
        caught-up follower. False if this node is not the master, or ``to`` is no other member
        (nothing is done then), or pysyncobj refused (``to`` not connected or not caught up).
        With several groups and a ``group``: hand that group over (group_handover.py), and say
        once a view moved it (True) or the handover gave up with the target not caught up (False);
        False at once if this node is not the group's serving master."""
        if self.n_groups > 1 and group is not None:
            return await asyncio.wait_for(self._hand_over(group, to), timeout)
        actions = self.core.step_down(self._now(), to)
        if not actions:
            return False
        self._act(actions)
        assert self._transfer is not None
        return await asyncio.wait_for(self._transfer, timeout)

    async def _hand_over(self, group: int, to: str | None) -> bool:
        actions = self.core.step_down(self._now(), to, group)
        if not actions:
            return False
        self._act(actions)
        g = self.core.groups[group]
        # the core releases the group on its ticks, and a committed view moves it
        while g.mastery.master == self.name and g.handover.handing is not None:   # type: ignore[union-attr]
            await asyncio.sleep(HANDOVER_POLL_S)
        return g.mastery.master != self.name   # type: ignore[union-attr]

    async def add_member(self, spec: NodeSpec) -> None:
        await self.membership.add_member(spec)

    async def remove_member(self, name: str) -> None:
        await self.membership.remove_member(name)

    # -- events posted from Raft's thread (cluster/runtime.py's RaftEvents) -----------------------

    def raft_sample(self, sample: RaftSample) -> None:
        self._act(self.core.raft_sample(replace(sample, now=self._now())))

    def lease_acked(self, peer: str, term: int, stamp: float) -> None:
        self._act(self.core.lease_acked(peer, term, stamp, self._now()))

    def leader_contact(self, leader: str, at: float) -> None:
        self.core.leader_contact(leader, at)

    def view_committed(self, view: View) -> None:
        if self._floor_dir is not None and view.view_id > self._floor:
            # durably before the core installs it: after a restart this node masters no slot
            # a view it may have acted on assigned
            view_floor.record(self._floor_dir, view.view_id)
            self._floor = view.view_id
        self._act(self.core.view_committed(view, self._now()))

    def placed(self, key: Any, group: int) -> None:
        self._act(self.core.placed(key, group, self._now()))

    def directory_restored(self, record: tuple) -> None:
        self._act(self.core.directory_restored(record))

    def fence(self, term: int) -> None:
        self._act(self.core.fence(term, self._now()))

    def raft_stats(self, stats: RaftStats) -> None:
        self.last_raft_stats = stats

    def member_changed(self, change: str, spec: NodeSpec) -> None:
        """A member added or removed at runtime: the stream learns where to reach it."""
        cluster = self.config.cluster
        nodes = tuple(n for n in cluster.nodes if n.name != spec.name)
        if change == "added":
            if spec.stream_addr is None:
                log.warning("member %s was added without a stream address: nothing can be streamed to it",
                            spec.name)
                return
            nodes += (spec,)
        self.config = replace(self.config, cluster=replace(cluster, nodes=nodes))
        self.stream.update_config(self.config.cluster)
        if self.n_groups > 1 and change == "added":
            for b in self._group_batches:
                b.readers.add(spec.name)
        log.info("stream: member %s %s", spec.name, change)
        self._act(self.core.members_changed(self.config.cluster.names, self._now()))

    # -- internals -------------------------------------------------------------------------------

    def _on_frame(self, sender: str, frame: Any) -> None:
        if type(frame) in _FORWARDING:
            self._forwarding_frame(sender, frame)
        else:
            self._act(self.core.frame(sender, frame, self._now()))

    def _on_bundle(self, sender: str, items: Any) -> None:
        """A peer's turn (several groups): each item goes to the core with its group."""
        core, act = self.core, self._act
        for group, frame in items:
            if type(frame) in _FORWARDING:
                self._forwarding_frame(sender, frame, group)
            else:
                act(core.frame(sender, frame, self._now(), group))

    def _forwarding_frame(self, sender: str, frame: Any, group: int | None = None) -> None:
        """A frame of forwarded requests or answers: the core reads the ones it stands for."""
        core, now = self.core, self._now()
        actions: list[Any] = []
        if group is None:
            batches = self._forward_batches
            for f in batches.received(sender, frame):
                actions += core.frame(sender, f, now)
        else:
            batches = self._group_batches[group]
            for f in batches.received(sender, frame):
                actions += core.frame(sender, f, now, group)
        if batches.pending:
            self._forwards_at_turn_end()
        if actions:
            self._act(actions)

    def _forwards_at_turn_end(self) -> None:
        if not self._forward_flush_due:
            self._forward_flush_due = True
            self._loop.call_soon(self._flush_forwards)

    def _flush_forwards(self) -> None:
        """The end of a turn: what was forwarded and answered in it leaves, a frame per peer."""
        self._forward_flush_due = False
        if self.n_groups > 1:
            waiting = self.core.forwards.waiting_for
            for group, batches in enumerate(self._group_batches):
                for to, frame, ids in batches.take(waiting):
                    self._bundle(to, group, frame, ids)
            self._send_bundles()
            return
        unsent: list[int] = []
        for to, frame, ids in self._forward_batches.take(self.core.forwards.waiting_for):
            if not self.stream.send(to, frame):
                unsent += ids
        for rid in unsent:
            self._act(self.core.forward_unsent(rid))

    def _bundle(self, to: str, group: int, frame: Any, ids: tuple[int, ...] = ()) -> None:
        """A frame of this turn for ``to`` (several groups): it leaves in the turn's bundle."""
        if self._bundles.add(to, group, frame, ids) and not self._bundles_due:
            self._bundles_due = True
            self._loop.call_soon(self._send_bundles)

    def _send_bundles(self) -> None:
        """The end of a turn (several groups): one bundle per peer of everything it produced."""
        self._bundles_due = False
        unsent: list[int] = []
        for to, items, ids in self._bundles.take():
            if not self.stream.send_bundle(to, items):
                unsent += ids
        for rid in unsent:
            self._act(self.core.forward_unsent(rid))

    def _persisted(self, token: int) -> None:
        # the acks the journal held back leave at the end of its report, as at a drain's end
        self._in_persisted = True
        try:
            self._act(self.core.persisted(token, self._now()))
        finally:
            self._in_persisted = False
        self._event_ended()

    def _journal_failed(self, reason: str) -> None:
        self._act(self.core.journal_failed(reason, self._now()))

    def journal_stats(self) -> dict[str, Any] | None:
        if self._binding is None:
            return None
        return journal_status(self._binding, self.recovered)

    def _flush(self) -> None:
        self._act(self.core.flush(self._now()))
        if self._bundles_due:      # (several groups: frames wait for the turn's end)
            self._send_bundles()   # the flush ends the turn: its batches and acks leave now

    def _event_ended(self) -> None:
        """The end of a drain of stream frames or of a journal's report: the flush a FlushDue
        raised during it asked for (``_do``)."""
        if self._flush_at_end:
            self._flush_at_end = False
            self._flush()

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval)
            try:
                self._act(self.core.tick(self._now()))
            except Exception:
                log.exception("node tick failed")

    def _act(self, actions: list[Any]) -> None:
        # One failing action (a client callback that raises, a closed socket) must not drop the
        # ones after it: an answer or a FlushDue lost here would stall every later operation.
        changed = False
        for a in actions:
            try:
                if type(a) is Answer:
                    # inline rather than in _do: an ack answers a batch's every operation here
                    err = a.error
                    if err is None:
                        changed = changed or a.changed
                        a.token(a.result, None)
                    else:
                        a.token(a.result, self.client_error(err))
                else:
                    self._do(a)
            except Exception:
                log.exception("node %s: action %s failed", self.name, type(a).__name__)
        if changed and self.on_changed is not None:
            # once for all the answers: the long polls it wakes re-check the whole queue anyway
            try:
                self.on_changed()
            except Exception:
                log.exception("node %s: waking long polls failed", self.name)

    def _do(self, a: Any) -> None:
        t = type(a)
        if t is Send:
            if self.n_groups > 1:
                if type(a.frame) is Forward:
                    self._group_batches[a.group].forward(a.to, a.frame)
                    self._forwards_at_turn_end()
                else:
                    self._bundle(a.to, a.group, a.frame)
            elif type(a.frame) is Forward:
                self._forward_batches.forward(a.to, a.frame)
                self._forwards_at_turn_end()
            else:
                self.stream.send(a.to, a.frame)
        elif t is FlushDue and a.at is not None:
            self._loop.call_later(max(0.0, a.at - self._now()), self._flush)
        elif t is FlushDue:
            # The end of this turn. While frames are being drained it comes when the drain
            # ends, so the acks and the batch they release leave in this turn, not a turn later
            # (a loop turn per batch was a measurable share of a replica's CPU); the same at the
            # end of a journal's durability report.
            if self.stream.draining or self._in_persisted:
                self._flush_at_end = True
            else:
                self._loop.call_soon(self._flush)
        elif t is Record:
            self._record(a)
        elif t is ForwardAnswered:
            a.token(a.payload, None)
        elif t is ForwardFailed:
            self.forwarding.failed += 1
            a.token(None, ForwardError(a.reason, a.sent))
        elif t is ServeForwarded:
            self._serve(a)
        elif t is ToRaft:
            if type(a.action) is TransferLeadership:
                self._transfer = self.membership.transfer_leadership(a.action.to)
            else:
                self.membership.submit(a.action)
        elif t is ServingChanged:
            log.info("node %s is %s", self.name, "ACTIVE: the master, serving clients" if a.on
                     else "not the active master: forwarding or refusing")
            if self.on_serving is not None:
                self.on_serving(a.on)
        elif t is StorageReplaced:
            if self.on_storage is not None:
                self.on_storage(a.storage)
        elif t is MessagesArrived:
            if self.on_changed is not None:
                self.on_changed()
        elif t is ThrottleChanged:
            log.warning("stream: %s producer throttling", "starting" if a.on else "ending")
        elif t is Rejected:
            self._rlog.warn(f"rejected-{a.sender}", self._now(), "stream: %s refused a frame from %s: %s",
                            self.name, a.sender, a.reason)
        elif t is Warn:
            self._rlog.warn(a.text, self._now(), "%s", a.text)
        elif t is Persist or t is PersistReset or t is Snapshot or t is ForgetDropped:
            if self._binding is not None:
                self._binding.do(a)
        elif t is Placed:
            a.token(a.group)
        elif t is PlaceFailed:
            a.token(None)

    def _serve(self, a: ServeForwarded) -> None:
        if self._serve_forwarded is None:
            return
        self.forwarding.served_for_others += 1
        sender, rid, group = a.sender, a.request_id, a.group
        if self.n_groups == 1:
            self._serve_forwarded(a.payload, lambda answer: self._answer_forwarded(sender, rid, answer))
        else:   # the group the forwarder routed it to: the master runs it there
            self._serve_forwarded(a.payload, lambda answer: self._answer_forwarded(sender, rid, answer, group), group)

    def _answer_forwarded(self, to: str, request_id: int, payload: bytes, group: int = 0) -> None:
        batches = self._forward_batches if self.n_groups == 1 else self._group_batches[group]
        batches.reply(to, request_id, payload)
        self._forwards_at_turn_end()

    def _record(self, r: Record) -> None:
        if self.history is None:
            return
        # the record's time is this node's monotonic clock: the history wants wall-clock time
        ts = self._wall() - (self._now() - r.at)
        self.history.write(r.event, ts, **r.fields)
