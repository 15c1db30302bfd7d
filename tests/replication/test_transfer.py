"""Chunked state transfer while the master keeps serving, over a lossy network.

The master's workload keeps running between chunks (so the snapshot is fuzzy) and appends each
operation's mutations to its log; the joiner restores the chunks into a fresh storage, then
applies the log from the transfer's position on. It must reach the master's digest, also when
frames are lost, the link is cut for a while (the transfer resumes, it does not restart), or the
joiner loses its staging state (the transfer restarts). And before it applies anything more, the
restored state must be exactly the state at the position the transfer names: a master that
fails right after the transfer must leave the joiner with nothing its log lacks.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import PurgeQueue, SendMessageBatch, SendMessageBatchEntry

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
        self.cuts = 0

    def record(self) -> None:
        """Append the mutations the workload emitted since last time as one log entry."""
        muts = self.run.mutations[self.seen:]
        self.seen = len(self.run.mutations)
        if muts:
            self.log.append(Entry(self.log.last_seq + 1, 1, encode_many(muts), self.clock.now_ms()))

    def cut_staged(self, now_ms: int) -> list:
        """The master's side of the transfer asks for its executed operations to be logged."""
        self.cuts += 1
        self.record()
        return []

    def replay(self, seq: int) -> Storage:
        """The state at log position ``seq``: every entry up to it, applied to an empty storage."""
        storage, log = Storage(ManualClock(0), IdSource(7)), ReplicationLog()
        for e in self.log.since(1, seq):
            assert apply_entry(storage, log, Batch(1, e.seq, e.written_epoch, e.mutations), 0) is None
        assert log.last_seq == seq
        return storage

    def start(self) -> None:
        self.record()
        self.sender = TransferSender("j", 1, itertools.count(1).__next__, self.run.master, self.log, self.clock.now_ms(),
                                     chunk_records=self.chunk_records, window=3, resend_after_ms=300,
                                     cut_staged=self.cut_staged)
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


def drive(s: Setup, data, *, cut_for: int = 0, lose_staging: bool = False, staged: bool = False) -> None:
    """``staged``: operations between chunks stay unlogged at random (a master's batching hold),
    until the sender's ``cut_staged`` or a later operation logs them."""
    s.start()
    rounds = 0
    while s.done is None:
        rounds += 1
        assert rounds < 2_000, "the transfer must finish"
        for _ in range(data.draw(st.integers(0, 2), label="ops between chunks")):
            step(s.run, data)
            if not staged or data.draw(st.booleans(), label="log it now"):
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
def test_the_restored_state_is_exactly_the_state_at_the_position_it_names(data):
    """The joiner's log position is the whole truth about its state: the fuzzy read's records
    plus the log's tail since the read began, nothing executed but unlogged."""
    s = Setup(data.draw(st.integers(0, 2**32), label="seed"), data.draw(st.sampled_from((1, 3, 50))))
    for _ in range(data.draw(st.integers(5, 40), label="before")):
        step(s.run, data)
    s.net.faults(drop=data.draw(st.sampled_from((0.0, 0.2)), label="drop"), dup=0.0)
    drive(s, data, staged=True)
    assert s.cuts > 0
    taken = s.receiver.take()
    assert taken is not None
    storage, at_seq, at_epoch, _ = taken
    assert (at_seq, at_epoch) == (s.done.at_seq, 1) and at_seq <= s.log.last_seq
    assert_same_state(storage, s.replay(at_seq))


def test_what_the_master_executed_but_had_not_logged_is_in_the_log_before_the_last_chunk():
    """A master's batching hold keeps executed operations out of its log for a while. The read
    sees their effects (here: a purge empties the groups of messages not read yet), so the sender
    has them cut into the log before it names the last chunk's position."""
    s = Setup(2, 1)
    entries = tuple(SendMessageBatchEntry(str(i), "x" * 10) for i in range(10))
    for _ in range(128):
        s.run.execute(SendMessageBatch(STD, entries))
    s.start()
    s.run.execute(PurgeQueue(STD))      # executed, not yet logged
    while s.done is None:
        assert s.net.step(), "the transfer stalled"
    assert s.cuts > 0
    taken = s.receiver.take()
    assert taken is not None
    storage, at_seq, _, _ = taken
    assert at_seq == s.log.last_seq == 2     # the sends, then the purge
    assert_same_state(storage, s.replay(at_seq))
    assert_same_state(storage, s.run.master)


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


def _large_state_on_a_small_log(seed: int, **log_bounds) -> tuple[Setup, tuple]:
    """3,000 messages on a master whose log holds ~2 KB: a transfer of many chunks, started."""
    s = Setup(seed, 4)
    s.log = ReplicationLog(**log_bounds)
    entries = tuple(SendMessageBatchEntry(str(i), "x" * 50) for i in range(10))
    for _ in range(300):
        s.run.execute(SendMessageBatch(STD, entries))
    s.start()
    return s, entries


def test_the_tail_is_kept_for_the_transfer_however_small_the_log():
    """The log is bounded in bytes, and a transfer's tail may grow past that bound while a large
    state is read: the transfer pins it, so it finishes in one pass instead of beginning again
    (for ever, under a steady write load) each time the log drops the tail's start."""
    s, entries = _large_state_on_a_small_log(4, limit_bytes=2_000)
    first_pass = s.sender.transfer_id
    writes = 0
    while s.done is None:
        if s.sender.end_seq is None:     # the master serves between frames until the last chunk
            s.run.execute(SendMessageBatch(STD, entries))
            s.record()
            writes += 1
            assert writes < 3_000, "the transfer never finished (it began again and again)"
        assert s.net.step(), "the transfer stalled"
    assert writes > 20 and s.sender.transfer_id == first_pass, "one pass, however long the tail"
    assert s.log.size_bytes <= 2_000, "the pin is released once the last chunk is built"
    taken = s.receiver.take()
    assert taken is not None and taken[1] == s.log.last_seq
    assert_same_state(taken[0], s.run.master)


def test_a_tail_that_outgrows_the_pins_bound_makes_the_transfer_begin_again_and_still_end_exact():
    """The pin is bounded: a transfer that falls too far behind (a stalled joiner, a write storm)
    lets the log drop its tail's start and begins a new pass, which must end as exact as one."""
    s, entries = _large_state_on_a_small_log(5, limit_bytes=2_000, pinned_limit_bytes=6_000)
    first_pass = s.sender.transfer_id
    storm = 0
    while s.sender.transfer_id == first_pass:
        s.run.execute(SendMessageBatch(STD, entries))   # a storm while the first pass runs
        s.record()
        storm += 1
        assert storm < 3_000, "the tail never outgrew the pin's bound"
        assert s.net.step(), "the transfer stalled"
    assert s.log.size_bytes <= 6_000 + 1_000, "the pin held no more than its bound (and one entry)"
    while s.done is None:                               # then calm: the new pass finishes
        assert s.net.step(), "the transfer stalled"
    taken = s.receiver.take()
    assert taken is not None and taken[1] == s.log.last_seq
    assert_same_state(taken[0], s.run.master)
