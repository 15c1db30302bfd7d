"""cluster/node_core.py: what a node decides on its event loop, driven directly (no sockets, no
threads): gating, flow control for every producer, per-queue ack policies, the abandon delay,
the fence, stand-or-not, ack coalescing, forwarding bookkeeping and the master's storage ticks.

Three cores exchange stream frames through an in-order queue; Raft's side is played by the test
(role samples, lease acks, committed views), as the election core and pysyncobj would post them.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from storage import IdSource, ManualClock, Storage
from storage.commands import (
    CreateQueue, Namespace, SendMessage, SendMessageBatch, SendMessageBatchEntry, TagQueue,
)

from cluster.config import Timing
from cluster.errors import MasterChanged, NotServing, Throttled
from cluster.membership import FOLLOWER, LEADER, ProposeView, RaftSample, Record
from cluster.node_actions import (
    Answer, FenceDone, FlushDue, ForwardAnswered, ForwardFailed, ForwardTo, Local, MayStand, Refuse, ServeForwarded,
    ServingChanged, ToRaft, TransferLeadership, Warn,
)
from cluster.node_core import CoreSettings, NodeCore
from cluster.queue_policies import POLICY_TAG
from cluster.replication.core import TransferSettings
from cluster.replication.master import Limits
from cluster.replication.messages import Ack, AckPolicy, Batch, Forward, ForwardReply, Send

NS = Namespace("us-east-1", "000000000000")
NAMES = ("n1", "n2", "n3")
TIMING = Timing()


class Cores:
    def __init__(self, names: tuple[str, ...] = NAMES, policy: AckPolicy = AckPolicy.MAJORITY,
                 forward: bool = True, bugs: frozenset[str] = frozenset(), log_limit_bytes: int = 64 << 20,
                 chunk_records: int = 2_000, journal: bool = False, snapshot_min_bytes: int = 64 << 20,
                 limits: Limits = Limits()) -> None:
        self.clock = ManualClock(1_000_000)
        self.now = 100.0
        self.cores: dict[str, NodeCore] = {}
        self.queue: deque[tuple[str, str, Any]] = deque()
        self.down: set[str] = set()
        self.cut: set[tuple[str, str]] = set()   # (from, to) links that lose every frame
        self.out: dict[str, list[Any]] = {n: [] for n in names}
        self.to_raft: dict[str, list[Any]] = {n: [] for n in names}
        for i, n in enumerate(names):
            settings = CoreSettings(timing=TIMING, policy=policy, forward=forward, log_limit_bytes=log_limit_bytes,
                                    transfer=TransferSettings(chunk_records=chunk_records, window=1),
                                    journal=journal, snapshot_min_bytes=snapshot_min_bytes, limits=limits)
            self.cores[n] = NodeCore(n, names, settings, Storage(self.clock, IdSource(i + 1)),
                                     lambda i=i: Storage(self.clock, IdSource(i + 100)), incarnation=i + 1,
                                     bugs=bugs)
        self.settings = settings

    def restart_amnesiac(self, name: str, entries_dropped: bool = False) -> None:
        """``name`` comes back with empty memory (no journal, or ``entries_dropped``: one that
        `journal truncate` emptied), under a new incarnation."""
        i = 1 + list(self.cores).index(name)
        self.cores[name] = NodeCore(name, tuple(self.cores), self.settings, Storage(self.clock, IdSource(i + 200)),
                                    lambda: Storage(self.clock, IdSource(i + 300)), incarnation=i + 1000,
                                    amnesiac=True, entries_dropped=entries_dropped)
        self.out[name], self.to_raft[name] = [], []
        view = next(c.membership.view for n, c in self.cores.items() if n != name and n not in self.down)
        self.handle(name, self.cores[name].view_committed(view, self.now))   # Raft's state is kept

    def handle(self, name: str, actions: list[Any]) -> list[Any]:
        flush = False
        for a in actions:
            t = type(a)
            if t is Send:
                if name not in self.down and a.to not in self.down and (name, a.to) not in self.cut:
                    self.queue.append((name, a.to, a.frame))
            elif t is ToRaft:
                self.to_raft[name].append(a.action)
                if type(a.action) is ProposeView:
                    self.commit(a.action.view)
            elif t is FlushDue:
                flush = True
            else:
                self.out[name].append(a)
        if flush:
            self.handle(name, self.cores[name].flush(self.now))
        return actions

    def commit(self, view: Any) -> None:
        for n, c in self.cores.items():
            if n not in self.down:
                self.handle(n, c.view_committed(view, self.now))

    def run(self) -> None:
        while self.queue:
            sender, to, frame = self.queue.popleft()
            if to not in self.down and sender not in self.down:
                self.handle(to, self.cores[to].frame(sender, frame, self.now))

    def tick(self, seconds: float = 0.05, rounds: int = 1, leading: str | None = None) -> None:
        """Time passes; ``leading``: that master's followers keep acking its lease meanwhile."""
        for _ in range(rounds):
            self.now += seconds
            self.clock.advance(int(seconds * 1000))
            if leading is not None:
                self.ack(leading, self.cores[leading].membership.term)
            for n, c in self.cores.items():
                if n not in self.down:
                    self.handle(n, c.tick(self.now))
            self.run()

    def lead(self, leader: str, term: int = 1, ackers: tuple[str, ...] | None = None) -> None:
        configured = frozenset(self.cores)
        for n, c in self.cores.items():
            if n not in self.down:
                self.handle(n, c.raft_sample(RaftSample(self.now, term, LEADER if n == leader else FOLLOWER,
                                                        leader, configured)))
        self.ack(leader, term, ackers)

    def ack(self, leader: str, term: int, ackers: tuple[str, ...] | None = None) -> None:
        """Followers accept the leader's heartbeat: contact on their side, a lease ack on its."""
        for p in (ackers if ackers is not None else [n for n in self.cores if n not in self.down]):
            if p != leader:
                self.handle(p, self.cores[p].leader_contact(leader, self.now))
                self.handle(leader, self.cores[leader].lease_acked(p, term, self.now, self.now))

    def serving(self, leader: str = "n1", term: int = 1) -> None:
        """Heartbeats until every link is up, then ``leader`` takes office and syncs."""
        self.tick(rounds=6)
        self.lead(leader, term)
        for _ in range(40):
            self.tick()
            self.ack(leader, term)
            if self.cores[leader].serving(self.now):
                return
        raise AssertionError(f"{leader} never served")

    def execute(self, name: str, command: Any, token: Any = None) -> list[Answer]:
        token = token if token is not None else object()
        self.handle(name, self.cores[name].execute(token, command, self.now))
        self.run()
        return self.answers(name, token)

    def answers(self, name: str, token: Any) -> list[Answer]:
        return [a for a in self.out[name] if type(a) is Answer and a.token is token]


def test_only_the_active_master_answers_and_the_others_forward_or_refuse():
    c = Cores()
    c.serving("n1")
    assert c.cores["n1"].route(c.now) is not None and type(c.cores["n1"].route(c.now)) is Local
    assert c.cores["n2"].route(c.now) == ForwardTo("n1")
    (a,) = c.execute("n2", CreateQueue(NS, "q"))
    assert isinstance(a.error, NotServing) and "not the master (the master is n1)" in str(a.error)
    (a,) = c.execute("n1", CreateQueue(NS, "q"))
    assert a.error is None
    # without forwarding, a replica refuses with the reason
    c2 = Cores(forward=False)
    c2.serving("n1")
    assert type(c2.cores["n2"].route(c2.now)) is Refuse


def test_each_kind_of_member_routes_as_it_should():
    c = Cores()
    assert c.cores["n2"].route(c.now) == Refuse("Node n2 has not joined a view of the cluster yet.")
    c.serving("n1")
    rep = c.cores["n2"]
    assert rep.route(c.now) == ForwardTo("n1")
    # the master stops leading n2 (its heartbeats stop reaching n2's Raft, or it lost its majority)
    c.now += TIMING.election_min + TIMING.heartbeat
    r = rep.route(c.now)
    assert type(r) is Refuse and "has not heard from the master n1 as Raft leader" in r.reason
    c.ack("n1", 1)
    assert rep.route(c.now) == ForwardTo("n1")
    # the stream to the master goes down: nothing to forward over
    c.down.add("n1")
    c.tick(0.1, rounds=12)
    r = rep.route(c.now)
    assert type(r) is Refuse and "cannot reach the master n1" in r.reason
    # forwarding off: the reason, and why
    off = Cores(forward=False)
    off.serving("n1")
    r = off.cores["n2"].route(off.now)
    assert type(r) is Refuse and r.reason.startswith("Node n2 is not the master (the master is n1).")
    assert r.reason.endswith("Forwarding is off (forward = false).")


def test_a_new_master_refuses_while_it_synchronises():
    c = Cores()
    c.tick(rounds=6)
    c.down |= {"n2", "n3"}                # nobody answers its sync
    c.lead("n1", 1, ackers=())
    c.handle("n1", c.cores["n1"].lease_acked("n2", 1, c.now, c.now))
    c.handle("n1", c.cores["n1"].lease_acked("n3", 1, c.now, c.now))
    c.tick(0.05, rounds=3)
    r = c.cores["n1"].route(c.now)
    assert type(r) is Refuse, r


def test_a_master_whose_lease_ran_out_refuses_at_once_without_any_event():
    c = Cores()
    c.serving("n1")
    core = c.cores["n1"]
    assert core.serving(c.now)
    c.now += TIMING.lease + 0.01          # no ack, no tick: only the clock moved
    assert not core.serving(c.now)
    (a,) = c.execute("n1", CreateQueue(NS, "q"))
    assert isinstance(a.error, NotServing) and "lease expired" in str(a.error)
    assert any(type(x) is ServingChanged and not x.on for x in c.out["n1"]), "and it says so when asked"


def test_planted_minority_answers_lets_an_expired_master_execute():
    c = Cores(bugs=frozenset({"minority-answers"}))
    c.serving("n1")
    c.now += TIMING.lease + 0.01
    (a,) = c.execute("n1", CreateQueue(NS, "q"))
    assert a.error is None, "the planted bug gates on the replication layer only"


def test_producers_are_throttled_batches_included():
    c = Cores()
    c.serving("n1")
    (a,) = c.execute("n1", CreateQueue(NS, "q"))
    c.cores["n1"].groups[0].throttling = True
    batch = SendMessageBatch(NS.key("q"), (SendMessageBatchEntry("a", "x"),))
    for cmd in (SendMessage(NS.key("q"), "x"), batch):
        (a,) = c.execute("n1", cmd)
        assert isinstance(a.error, Throttled), type(cmd).__name__
    planted = Cores(bugs=frozenset({"batches-unthrottled"}))
    planted.serving("n1")
    planted.execute("n1", CreateQueue(NS, "q"))
    planted.cores["n1"].groups[0].throttling = True
    (a,) = planted.execute("n1", batch)
    assert a.error is None, "the planted bug lets batches through"


def test_a_queues_tag_picks_its_ack_policy_and_a_bad_tag_warns():
    c = Cores(policy=AckPolicy.MAJORITY)
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "fast", tags={POLICY_TAG: "none"}))
    c.execute("n1", CreateQueue(NS, "odd", tags={POLICY_TAG: "sometimes"}))
    c.down |= {"n2", "n3"}                # nobody can ack from now on
    tok = object()
    c.handle("n1", c.cores["n1"].execute(tok, SendMessage(NS.key("fast"), "x"), c.now))
    assert [a.error for a in c.answers("n1", tok)] == [None], "policy none: answered at once"
    odd = NS.key("odd")   # one key object throughout, as the endpoint hands out per queue URL
    tok = object()
    c.handle("n1", c.cores["n1"].execute(tok, SendMessage(odd, "x"), c.now))
    assert c.answers("n1", tok) == [], "the cluster's majority: waits for acks"
    assert any(type(a) is Warn and "not an ack policy" in a.text for a in c.out["n1"])
    # a tag change applies to the next operation of that queue (the core's cache of the last
    # queue's policy included), whether it names the queue by the same key object or an equal one
    c.handle("n1", c.cores["n1"].execute(object(), TagQueue(odd, {POLICY_TAG: "none"}), c.now))
    for key in (odd, NS.key("odd")):
        tok = object()
        c.handle("n1", c.cores["n1"].execute(tok, SendMessage(key, "y"), c.now))
        assert [a.error for a in c.answers("n1", tok)] == [None]


def test_waiting_operations_are_abandoned_only_after_the_fallback_not_at_a_lapse():
    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    c.down |= {"n2", "n3"}
    tok = object()
    c.handle("n1", c.cores["n1"].execute(tok, SendMessage(NS.key("q"), "x"), c.now))
    c.tick(0.05, rounds=6)                # the lease lapses: inactive, but the op still waits
    assert not c.cores["n1"].serving(c.now)
    assert c.answers("n1", tok) == []
    c.tick(0.1, rounds=int(TIMING.leader_fallback / 0.1) + 1)
    (a,) = c.answers("n1", tok)
    assert isinstance(a.error, MasterChanged)


def test_planted_abandon_as_success_answers_ok():
    c = Cores(bugs=frozenset({"abandon-as-success"}))
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    c.down |= {"n2", "n3"}
    tok = object()
    c.handle("n1", c.cores["n1"].execute(tok, SendMessage(NS.key("q"), "x"), c.now))
    c.tick(0.1, rounds=int(TIMING.leader_fallback / 0.1) + 8)
    (a,) = c.answers("n1", tok)
    assert a.error is None and a.result is not None


def test_a_fence_ends_activity_before_the_lease_and_answers_the_raft_thread():
    c = Cores()
    c.serving("n1")
    core = c.cores["n1"]
    assert core.serving(c.now)
    c.handle("n1", core.fence(2, c.now))
    assert not core.serving(c.now), "inactive at once, with the lease still fresh"
    assert FenceDone(2) in c.to_raft["n1"]
    assert any(type(r) is Record and r.event == "fenced" for r in c.out["n1"])
    c.ack("n1", 1)
    assert not core.serving(c.now), "and for the rest of its term"


def test_acks_of_a_turn_are_coalesced_into_one_per_master():
    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    rep = c.cores["n2"]
    last = c.cores["n1"].groups[0].replication.log.last_seq
    # three batches reach n2 in one turn: one ack, for the last, at the end of the turn
    frames = [Batch(1, last + i, 1, c.cores["n1"].groups[0].replication.log.get(last).mutations) for i in (1, 2, 3)]
    acks: list[Any] = []
    for f in frames:
        acks += [a for a in rep.frame("n1", f, c.now) if type(a) is Send and type(a.frame) is Ack]
    assert acks == [], "no ack before the end of the turn"
    flushed = [a for a in rep.flush(c.now) if type(a) is Send and type(a.frame) is Ack]
    assert [(a.to, a.frame.seq) for a in flushed] == [("n1", last + 3)], "one cumulative ack, for the newest"


def test_forwarding_is_answered_failed_on_a_lost_link_or_a_new_master():
    c = Cores()
    c.serving("n1")
    rep = c.cores["n2"]
    tok = object()
    (send,) = rep.forward(tok, b"request", c.now)
    assert send.to == "n1" and type(send.frame) is Forward
    served = c.cores["n1"].frame("n2", send.frame, c.now)
    assert served == [ServeForwarded("n2", send.frame.request_id, b"request")]
    (ans,) = rep.frame("n1", ForwardReply(send.frame.request_id, b"response"), c.now)
    assert ans == ForwardAnswered(tok, b"response")
    # the link to the master goes: a forward in flight ends "sent, outcome unknown"
    tok2 = object()
    rep.forward(tok2, b"again", c.now)
    c.down.add("n1")
    c.tick(0.1, rounds=12)
    failed = [a for a in c.out["n2"] if type(a) is ForwardFailed and a.token is tok2]
    assert failed and failed[0].sent
    assert type(rep.forward(object(), b"x", c.now)[0]) is ForwardFailed, "no forwarding to an unreachable master"


def test_a_forward_the_runtime_could_not_queue_fails_at_once_as_never_sent():
    c = Cores()
    c.serving("n1")
    rep = c.cores["n2"]
    tok = object()
    (send,) = rep.forward(tok, b"request", c.now)
    assert rep.forward_unsent(send.frame.request_id) == [
        ForwardFailed(tok, "no connection to the master n1", sent=False)]
    assert rep.forward_unsent(send.frame.request_id) == [], "answered once"
    c.tick(0.1, rounds=3)
    assert not [a for a in c.out["n2"] if type(a) is ForwardFailed], "and not again at the timeout"


def test_a_lost_flush_request_is_made_good_by_the_next_tick():
    c = Cores()
    c.serving("n1")
    master = c.cores["n1"]
    tok = object()
    out = master.execute(tok, CreateQueue(NS, "lost"), c.now)
    assert FlushDue() in out
    # the runtime drops the FlushDue: nothing is sent, the operation waits
    c.handle("n1", [a for a in out if type(a) is not FlushDue])
    c.run()
    assert c.answers("n1", tok) == []
    c.tick(0.05, leading="n1")
    (ans,) = c.answers("n1", tok)
    assert ans.error is None


def test_a_node_taking_a_transfer_from_a_connected_master_must_not_stand():
    c = Cores(log_limit_bytes=2_000, chunk_records=1)
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    assert c.to_raft["n3"][-1:] == [MayStand(True, "")]
    c.down.add("n3")
    for i in range(60):                   # more than the log holds: n3 will need a transfer
        c.execute("n1", SendMessage(NS.key("q"), f"m{i}"))
    c.down.discard("n3")
    seen: list[bool] = []
    for _ in range(200):
        c.tick(0.05, leading="n1")
        seen += [a.allowed for a in c.to_raft["n3"] if type(a) is MayStand][len(seen):]
        if c.cores["n3"].groups[0].storage.digest() == c.cores["n1"].groups[0].storage.digest() and seen[-1]:
            break
    assert False in seen, "not while the transfer from a connected master runs"
    assert seen[-1] is True, "and again once it is done"
    assert c.cores["n3"].groups[0].replication.last_transfer["direction"] == "received"


def test_the_master_lets_time_act_through_replicated_ticks():
    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q", {"MessageRetentionPeriod": "60"}))
    c.execute("n1", SendMessage(NS.key("q"), "expires"))
    c.clock.advance(61_000)               # the storage's clock: past the retention period
    c.tick(0.1, rounds=12, leading="n1")  # the core's: past its next storage tick
    assert c.cores["n1"].groups[0].storage.message_count() == 0, "retention acted on the master"
    assert c.cores["n2"].groups[0].storage.digest() == c.cores["n1"].groups[0].storage.digest(), "through the stream"


def test_a_command_that_fails_after_changing_the_state_still_replicates_the_change():
    # The storage contract is to validate completely before changing anything; a handler that
    # breaks it (a bug) must not leave the replicas out of step.
    from storage.errors import INVALID_PARAMETER_VALUE

    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    storage = c.cores["n1"].groups[0].storage
    send = storage._handlers[SendMessage]

    def broken(command, now, out):
        send(command, now, out)
        raise INVALID_PARAMETER_VALUE("failed after the message was added")

    storage._handlers[SendMessage] = broken
    (a,) = c.execute("n1", SendMessage(NS.key("q"), "half-done"))
    assert a.error is not None and "after the message was added" in str(a.error)
    assert storage.message_count() == 1
    assert {c.cores[n].groups[0].storage.digest() for n in NAMES} == {storage.digest()}, "the replicas have it too"


def test_an_operation_that_changes_nothing_waits_for_what_came_before_it():
    # A FIFO send retried with the same dedup id is a no-op whose answer names a message that only
    # the master may hold; it is answered once that message is acknowledged, never before.
    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q.fifo", {"FifoQueue": "true"}))
    c.down |= {"n2", "n3"}                # no acks for now
    send = SendMessage(NS.key("q.fifo"), "b", group_id="g", deduplication_id="d")
    first, retry = object(), object()
    c.handle("n1", c.cores["n1"].execute(first, send, c.now))
    c.handle("n1", c.cores["n1"].execute(retry, send, c.now))
    assert c.answers("n1", first) == [] and c.answers("n1", retry) == []
    c.down.clear()
    c.tick(0.1, rounds=8, leading="n1")
    (a1,), (a2,) = c.answers("n1", first), c.answers("n1", retry)
    assert a1.error is None and a2.error is None and a1.result.message_id == a2.result.message_id


def test_a_forwarded_request_delivered_twice_is_served_once():
    # (the simulator's duplicating network, seed 166: a receive run twice hid a message behind
    # a receipt its client never got, and the client's delete then changed nothing)
    c = Cores()
    c.serving("n1")
    n1 = c.cores["n1"]
    first = n1.frame("n2", Forward(7, b"receive"), c.now)
    again = n1.frame("n2", Forward(7, b"receive"), c.now)
    assert [type(a) for a in first] == [ServeForwarded] and again == []
    assert [type(a) for a in n1.frame("n3", Forward(7, b"receive"), c.now)] == [ServeForwarded], \
        "ids are per forwarder"
    # a forwarder that restarted counts its ids from 1 again: its requests are new
    from cluster.replication.wire import Heartbeat
    n1.frame("n2", Heartbeat(incarnation=999, hears_you=True), c.now)
    assert [type(a) for a in n1.frame("n2", Forward(7, b"receive"), c.now)] == [ServeForwarded]


def test_an_amnesiac_master_whose_sync_cannot_finish_hands_leadership_on():
    """The simulator's seed 103: n2 restarts empty into a bridge through n1 (n2 and n3 cut
    apart) and wins Raft there. Its own position counts in no sync quorum, so with n3 out of
    reach the sync can never finish; after the connection timeout it steps down and hands
    leadership to n1, which answered with its memory intact and may reach n3."""
    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    c.restart_amnesiac("n2")
    c.cut |= {("n2", "n3"), ("n3", "n2")}
    c.lead("n2", 2, ackers=("n1",))
    c.tick(0.05, rounds=10, leading="n2")
    assert not [a for a in c.to_raft["n2"] if type(a) is TransferLeadership], "not before the timeout"
    c.tick(0.05, rounds=20, leading="n2")
    assert [a for a in c.to_raft["n2"] if type(a) is TransferLeadership] == [TransferLeadership("n1")]
    assert [a.event for a in c.out["n2"] if type(a) is Record and a.event in ("hand_on", "step_down")] \
        == ["hand_on", "step_down"]
    assert type(c.cores["n2"].route(c.now)) is Refuse


def test_an_amnesiac_master_that_reaches_everyone_finishes_its_sync_and_keeps_leading():
    c = Cores()
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    c.restart_amnesiac("n2")
    c.lead("n2", 2)
    for _ in range(40):
        c.tick(0.05, leading="n2")
        if c.cores["n2"].serving(c.now):
            break
    assert c.cores["n2"].serving(c.now), "every member answered: the sync decides"
    assert not [a for a in c.to_raft["n2"] if type(a) is TransferLeadership]


def test_a_step_down_is_refused_unless_leading_and_to_another_member():
    c = Cores()
    c.serving("n1")
    assert c.cores["n2"].step_down(c.now) == [], "not the leader"
    assert c.cores["n1"].step_down(c.now, "n1") == [] and c.cores["n1"].step_down(c.now, "n9") == []
    assert [a for a in c.cores["n1"].step_down(c.now, "n2") if type(a) is ToRaft] == [ToRaft(TransferLeadership("n2"))]


def test_a_gather_asks_the_runtime_for_a_flush_at_its_end():
    # The replication core's FlushAt (a gather holding operations) becomes a FlushDue with a
    # time: half a millisecond after the gather's last millisecond, so the flush reads it as over.
    c = Cores(limits=Limits(gather_ms=2))
    c.serving("n1")
    c.execute("n1", CreateQueue(NS, "q"))
    core = c.cores["n1"]
    key = NS.key("q")
    core.execute(object(), SendMessage(key, "a"), c.now)
    core.execute(object(), SendMessage(key, "b"), c.now)
    c.handle("n1", core.flush(c.now))      # one batch of two
    c.run()                                # acked: both answered, a gather for two begins
    cut = core.groups[0].replication.log.last_seq
    out = core.execute(object(), SendMessage(key, "c"), c.now)
    assert FlushDue() in out
    due = [a for a in core.flush(c.now) if type(a) is FlushDue]
    assert due == [FlushDue((int(c.now * 1000) + 2 + 0.5) / 1000)], due
    assert core.groups[0].replication.log.last_seq == cut, "held: one staged of the two it waits for"
    later = c.now + 0.0025
    assert any(type(a) is Send for a in core.flush(later)), "cut at the time asked for"
