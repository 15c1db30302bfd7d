"""The mutation stream over a lossy simulated network, with the real storage on every node.

The master runs the random SQS workload of the storage property tests; each operation's
mutations go through MasterReplicator, frames cross a network that drops, duplicates and
reorders them (seeded), and replicas apply through ReplicaApplier. Throughout: an operation
completes only once its policy's number of replicas applied its batch. At the end, with the
network healed: every operation completed and every replica has the master's digest.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import CreateQueue, Namespace

from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.master import Limits, MasterReplicator
from cluster.replication.messages import (
    Ack, AckPolicy, Batch, Complete, NeedsTransfer, Rejected, Send, SyncRequest, SyncStatus, Throttle,
)
from cluster.replication.replica import ReplicaApplier
from tests.replication.network import FrameNet, note_batches
from tests.storage.workload import Run, assert_same_state, step

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Cluster:
    def __init__(self, seed: int, n: int, policy: AckPolicy, log_limit: int = 64 << 20):
        self.run = Run(seed=seed)
        self.clock = self.run.clock
        names = [f"n{i}" for i in range(1, n + 1)]
        self.master_name = names[0]
        self.master = MasterReplicator(self.master_name, 1, names, ReplicationLog(log_limit), policy=policy,
                                       limits=Limits(resend_after_ms=200))
        self.replicas = {name: ReplicaApplier(Storage(ManualClock(0), IdSource(1)), ReplicationLog(log_limit))
                         for name in names[1:]}
        for r in self.replicas.values():
            r.view_changed(self.master_name, 1)
            # the setup commands ran before replication started: the replica gets them by snapshot
            r.storage.restore(self.run.master.snapshot())
        self.net = FrameNet(names, self._receive, seed=seed)
        self.completed: set[int] = set()
        self.op_seq: dict[int, int] = {}
        self.policy = policy
        self.next_op = 0
        self.rejected: list[Rejected] = []
        self.transfers = 0
        self.mutations_seen = len(self.run.mutations)
        now = self.clock.now_ms()
        for name in self.replicas:
            self.handle(self.master_name, self.master.replica_connected(name, now))

    def handle(self, sender: str, actions: list) -> None:
        if sender == self.master_name:
            self.note_batches()
        for a in actions:
            if isinstance(a, Send):
                self.net.send(sender, a.to, a.frame)
            elif isinstance(a, Complete):
                for op in a.op_ids:
                    self.check_policy_met(op)
                    self.completed.add(op)
            elif isinstance(a, NeedsTransfer):
                self.transfer(a.replica)
            elif isinstance(a, Rejected):
                self.rejected.append(a)
            elif isinstance(a, Throttle):
                pass

    def check_policy_met(self, op: int) -> None:
        seq = self.op_seq.get(op)
        if seq is None:            # completed at submit: nothing to wait for, or policy none
            return
        have = sum(1 for r in self.replicas.values() if r.applied_seq >= seq)
        n = len(self.replicas) + 1   # stated here independently of AckPolicy.required
        need = {AckPolicy.NONE: 0, AckPolicy.ONE: 1, AckPolicy.MAJORITY: n // 2, AckPolicy.ALL: n - 1}[self.policy]
        assert have >= need, f"op {op} (batch {seq}) completed with {have} replicas, {need} required"

    def transfer(self, name: str) -> None:
        """A state transfer, done at once (the chunked, resumable one is tested elsewhere)."""
        self.transfers += 1
        r = self.replicas[name]
        r.storage.restore(self.run.master.snapshot())
        r.log.reset(self.master.log.last_seq, self.master.epoch)
        self.handle(self.master_name, self.master.replica_restored(name, self.master.log.last_seq,
                                                                    self.clock.now_ms()))

    def workload_step(self, data) -> None:
        step(self.run, data)
        muts = self.run.mutations[self.mutations_seen:]
        self.mutations_seen = len(self.run.mutations)
        op = self.next_op
        self.next_op += 1
        self.handle(self.master_name, self.master.submit(op, muts))
        if muts and op not in self.completed:
            self.op_seq[op] = -1   # filled in once its batch is cut (note_batches)

    def note_batches(self) -> None:
        note_batches(self.master, self.op_seq)

    def flush(self) -> None:
        self.handle(self.master_name, self.master.flush(self.clock.now_ms()))

    def _receive(self, sender: str, to: str, frame: object) -> None:
        now = self.clock.now_ms()
        if to == self.master_name:
            self.handle(to, self.master.on_frame(sender, frame, now))
        else:
            self.handle(to, self.replicas[to].on_frame(sender, frame, now))

    def settle(self) -> None:
        """Heal the network and let the protocol finish."""
        self.net.faults()
        for _ in range(200):
            self.flush()
            self.net.run()
            self.clock.advance(250)
            self.handle(self.master_name, self.master.on_tick(self.clock.now_ms()))
            if self.net.idle and all(r.applied_seq == self.master.log.last_seq for r in self.replicas.values()):
                break


@SETTINGS
@given(st.data(), st.sampled_from(list(AckPolicy)), st.integers(2, 5))
def test_lossy_stream_converges_and_never_completes_early(data, policy, n):
    c = Cluster(data.draw(st.integers(0, 2**32), label="seed"), n, policy)
    c.net.faults(drop=data.draw(st.sampled_from((0.0, 0.1, 0.3)), label="drop"),
                 dup=data.draw(st.sampled_from((0.0, 0.1)), label="dup"),
                 reorder=data.draw(st.booleans(), label="reorder"))
    for _ in range(data.draw(st.integers(5, 50), label="steps")):
        c.workload_step(data)
        if data.draw(st.booleans(), label="flush"):
            c.flush()
        c.net.run(data.draw(st.integers(0, 6), label="deliver"))
        if data.draw(st.integers(0, 4), label="tick") == 0:
            c.clock.advance(300)
            c.handle(c.master_name, c.master.on_tick(c.clock.now_ms()))
    c.settle()
    assert c.completed == set(range(c.next_op)), "every operation completes once the network heals"
    for r in c.replicas.values():
        assert_same_state(r.storage, c.run.master)
    assert not c.rejected, c.rejected[:3]


@SETTINGS
@given(st.data())
def test_replica_behind_the_log_gets_a_transfer_and_converges(data):
    """A replica cut off while the log rolls past its position is caught up by state transfer."""
    c = Cluster(data.draw(st.integers(0, 2**32)), 3, AckPolicy.ONE, log_limit=2_000)
    c.net.down = {"n3"}
    c.handle(c.master_name, c.master.replica_disconnected("n3", c.clock.now_ms()))
    for _ in range(40):
        c.workload_step(data)
        c.flush()
        c.net.run(100)
    c.net.down = set()
    c.handle(c.master_name, c.master.replica_connected("n3", c.clock.now_ms()))
    c.settle()
    if c.master.log.first_seq > 1:
        assert c.transfers >= 1
    assert c.completed == set(range(c.next_op))
    for r in c.replicas.values():
        assert_same_state(r.storage, c.run.master)


def test_stale_epoch_and_foreign_batches_are_refused_without_effect():
    r = ReplicaApplier(Storage(ManualClock(0), IdSource(1)), ReplicationLog())
    r.view_changed("n1", 5)
    before = r.storage.digest()
    master = Storage(ManualClock(), IdSource(2))
    _, muts = master.execute(CreateQueue(Namespace(), "q"))
    blob = encode_many(muts)
    for sender, frame in (("n1", Batch(4, 1, 4, blob)),     # a deposed master's epoch
                          ("n2", Batch(5, 1, 5, blob)),     # not the master of the view
                          ("n1", Batch(5, 1, 5, b"\x01garbage"))):  # undecodable
        actions = r.on_frame(sender, frame, 0)
        assert len(actions) == 1 and isinstance(actions[0], Rejected), actions
    assert r.storage.digest() == before and r.applied_seq == 0
    assert r.on_frame("n1", Batch(5, 1, 5, blob), 0) == [Send("n1", Ack(5, 1))]
    assert r.storage.digest() == master.digest()


def test_ack_policies_count_replicas():
    assert [p.required(3) for p in AckPolicy] == [0, 1, 1, 2]
    assert [p.required(5) for p in AckPolicy] == [0, 1, 2, 4]
    assert [p.required(1) for p in AckPolicy] == [0, 0, 0, 0]


def test_group_commit_puts_many_operations_in_one_batch():
    log = ReplicationLog()
    m = MasterReplicator("n1", 1, ["n1", "n2", "n3"], log)
    master = Storage(ManualClock(), IdSource(2))
    for op in range(100):
        _, muts = master.execute(CreateQueue(Namespace(), f"q{op}"))
        assert m.submit(op, muts) == []
    for name in ("n2", "n3"):
        assert m.replica_connected(name, 0) == [Send(name, SyncRequest(1, 0))], "position first"
        m.on_frame(name, SyncStatus(1, 0, 0, 1), 0)
    actions = m.flush(0)
    sends = [a for a in actions if isinstance(a, Send)]
    assert len(sends) == 2 and log.last_seq == 1, "one batch, one frame per replica"
    done = m.on_frame("n2", Ack(1, 1), 1)
    assert done == [Complete(tuple(range(100)))]


def test_a_replica_whose_last_entry_the_master_trimmed_gets_a_transfer_not_the_stream():
    # Once the master trimmed the entry at a member's last seq it cannot tell whether the member
    # holds that entry or a deposed master's (is_prefix_of says None): streaming the next entries
    # would graft them onto what may be a divergent tail, so only a transfer is safe.
    log = ReplicationLog(1_000)
    for seq in range(1, 40):
        log.append(Entry(seq, 3, b"x" * 100, 0))
    first = log.first_seq
    assert first > 2
    m = MasterReplicator("n1", 3, ("n1", "n2"), log, policy=AckPolicy.NONE)
    assert m.replica_connected("n2", 0) == [Send("n2", SyncRequest(3, 39))]
    out = m.on_frame("n2", SyncStatus(3, first - 1, 2, 1), 0)
    assert out == [NeedsTransfer("n2")], "the entry at its last seq is gone: no stream from first_seq"
    assert not [a for a in out if type(a) is Send and type(a.frame) is Batch]
