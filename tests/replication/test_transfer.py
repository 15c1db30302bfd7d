"""Chunked state transfer while the master keeps serving, over a lossy network.

The master's workload keeps running between chunks (so the snapshot is fuzzy) and appends each
operation's mutations to its log; the joiner restores the chunks into a fresh storage, then
applies the log from the transfer's position on. It must reach the master's digest, also when
frames are lost, the link is cut for a while (the transfer resumes, it does not restart), or the
joiner loses its staging state (the transfer restarts).
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import SendMessageBatch, SendMessageBatchEntry

from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.messages import Batch, Send, SnapshotAck, SnapshotChunk
from cluster.replication.replica import apply_entry
from cluster.replication.transfer import TransferDone, TransferReceiver, TransferSender
from tests.replication.network import FrameNet
from tests.storage.workload import STD, Run, assert_same_state, step

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example])


class Setup:
    def __init__(self, seed: int, chunk_records: int):
        self.run = Run(seed=seed)
        self.clock = self.run.clock
        self.log = ReplicationLog()
        self.seen = 0
        self.net = FrameNet(("m", "j"), self._receive, seed=seed)
        self.chunk_records = chunk_records
        self.sender: TransferSender | None = None
        self.receiver = TransferReceiver("m", 1, lambda: Storage(ManualClock(0), IdSource(5)))
        self.done: TransferDone | None = None
        self.restarts = 0

    def record(self) -> None:
        """Append the mutations the workload emitted since last time as one log entry."""
        muts = self.run.mutations[self.seen:]
        self.seen = len(self.run.mutations)
        if muts:
            self.log.append(Entry(self.log.last_seq + 1, 1, encode_many(muts), self.clock.now_ms()))

    def start(self) -> None:
        self.record()
        self.sender = TransferSender("j", 1, itertools.count(1).__next__, self.run.master, self.log, self.clock.now_ms(),
                                     chunk_records=self.chunk_records, window=3, resend_after_ms=300)
        self.out("m", self.sender.pump(self.clock.now_ms(), 3))

    def out(self, sender: str, actions: list) -> None:
        for a in actions:
            if isinstance(a, Send):
                if isinstance(a.frame, SnapshotAck) and a.frame.index < 0:
                    self.restarts += 1
                self.net.send(sender, a.to, a.frame)
            elif isinstance(a, TransferDone):
                self.done = a

    def _receive(self, sender: str, to: str, frame: object) -> None:
        if isinstance(frame, SnapshotChunk):
            self.out("j", self.receiver.on_chunk(sender, frame))
        else:
            self.out("m", self.sender.on_ack(frame, self.clock.now_ms()))

    def tick(self) -> None:
        self.clock.advance(200)
        self.out("m", self.sender.on_tick(self.clock.now_ms()))

    def finish_join(self) -> Storage:
        taken = self.receiver.take()
        assert taken is not None, "the joiner must hold a finished snapshot"
        storage, at_seq, _, _ = taken
        joined_log = ReplicationLog()
        joined_log.reset(at_seq, 1)
        for e in self.log.since(at_seq + 1, 10**9):
            assert apply_entry(storage, joined_log, Batch(1, e.seq, e.written_epoch, e.mutations), 0) is None
        return storage


def drive(s: Setup, data, *, cut_for: int = 0, lose_staging: bool = False) -> None:
    s.start()
    rounds = 0
    while s.done is None:
        rounds += 1
        assert rounds < 2_000, "the transfer must finish"
        for _ in range(data.draw(st.integers(0, 2), label="ops between chunks")):
            step(s.run, data)
            s.record()
        if cut_for and rounds == 3:
            s.net.down = {"j"}
        if cut_for and rounds == 3 + cut_for:
            s.net.down = set()
        if lose_staging and rounds == 4 and s.receiver.finished is None:
            # the joiner restarts mid-transfer (once it has everything, a restart is a new join)
            s.receiver = TransferReceiver("m", 1, lambda: Storage(ManualClock(0), IdSource(5)))
        s.net.run(data.draw(st.integers(1, 6), label="deliver"))
        s.out("m", s.sender.pump(s.clock.now_ms(), 1))
        if data.draw(st.booleans(), label="tick"):
            s.tick()


@SETTINGS
@given(st.data())
def test_fuzzy_chunked_transfer_converges_over_a_lossy_network(data):
    s = Setup(data.draw(st.integers(0, 2**32), label="seed"), data.draw(st.sampled_from((1, 3, 50))))
    for _ in range(data.draw(st.integers(5, 40), label="before")):
        step(s.run, data)
    s.net.faults(drop=data.draw(st.sampled_from((0.0, 0.2)), label="drop"),
                 dup=data.draw(st.sampled_from((0.0, 0.2)), label="dup"))
    drive(s, data)
    assert_same_state(s.finish_join(), s.run.master)


@SETTINGS
@given(st.data())
def test_a_cut_link_resumes_the_transfer_instead_of_restarting(data):
    s = Setup(data.draw(st.integers(0, 2**32)), 2)
    for _ in range(30):
        step(s.run, data)
    drive(s, data, cut_for=data.draw(st.integers(1, 20)))
    assert s.restarts == 0
    assert_same_state(s.finish_join(), s.run.master)


@SETTINGS
@given(st.data())
def test_a_joiner_that_lost_its_staging_state_gets_a_fresh_transfer(data):
    s = Setup(data.draw(st.integers(0, 2**32)), 1)
    for _ in range(30):
        step(s.run, data)
    drive(s, data, lose_staging=True)
    assert_same_state(s.finish_join(), s.run.master)


def test_a_large_state_moves_in_bounded_steps():
    """20,000 messages: no single call reads more than a window of chunks, so a runtime that
    handles each frame as one event-loop callback keeps serving clients throughout."""
    s = Setup(1, 400)
    entries = tuple(SendMessageBatchEntry(str(i), "x" * 100) for i in range(10))
    for _ in range(2_000):
        s.run.execute(SendMessageBatch(STD, entries))
    s.record()
    window = 4
    # 4 records a chunk: 4 groups of 64 messages, ~80 chunks
    s.sender = TransferSender("j", 1, itertools.count(1).__next__, s.run.master, s.log, s.clock.now_ms(),
                              chunk_records=4, window=window)
    largest_call = calls = 0
    out = s.out

    def counted(sender: str, actions: list) -> None:   # the master's calls: the first pump, each ack
        nonlocal largest_call, calls
        if sender == "m":
            calls += 1
            largest_call = max(largest_call, sum(isinstance(a, Send) for a in actions))
        out(sender, actions)

    s.out = counted
    s.out("m", s.sender.pump(s.clock.now_ms(), 1))
    while s.done is None:
        s.run.execute(SendMessageBatch(STD, entries))   # the master keeps serving between frames
        s.record()
        assert s.net.step(), "the transfer stalled"
    assert largest_call <= window, "one call must never read more than the window"
    assert calls >= 50 and s.done.records >= 20_000
    assert_same_state(s.finish_join(), s.run.master)
