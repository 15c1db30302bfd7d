"""Group commit under load (Limits.hold_ms): a batch waits for the one before it.

MasterReplicator alone, its frames inspected: while the newest batch is in flight (sent, acked by
no replica) and younger than ``hold_ms``, a flush cuts nothing; the first ack, a flush after
``hold_ms`` or a tick cuts everything staged meanwhile into one batch; a lone client never waits;
a forced flush (a view change) always cuts. After an ack that completed operations the master
gathers (Limits.gather_ms): it cuts once as many are staged as the ack completed, or at the
gather's end, which it asks for once (FlushAt).
"""

from __future__ import annotations

from storage import IdSource, ManualClock, Storage
from storage.commands import CreateQueue, Namespace

from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits, MasterReplicator
from cluster.replication.messages import Ack, AckPolicy, Batch, Complete, FlushAt, Send, SyncStatus

NAMES = ("n1", "n2", "n3")
# real mutations (the batch is encoded): one CreateQueue's
MUTATIONS = Storage(ManualClock(0), IdSource(1)).execute(CreateQueue(Namespace("us-east-1", "000000000000"), "q"))[1]


def _master(policy: AckPolicy = AckPolicy.MAJORITY, hold_ms: int = 10, gather_ms: int = 0) -> MasterReplicator:
    m = MasterReplicator("n1", 1, NAMES, ReplicationLog(1 << 20), policy=policy,
                         limits=Limits(hold_ms=hold_ms, gather_ms=gather_ms))
    for r in ("n2", "n3"):
        m.replica_connected(r, 0)
        m.on_frame(r, SyncStatus(1, 0, 0, 1), 0)   # empty logs: positioned at 0
    return m


def _batches(actions) -> list[tuple[str, int]]:
    return [(a.to, a.frame.seq) for a in actions if type(a) is Send and type(a.frame) is Batch]


def _completed(actions) -> list[int]:
    return [op for a in actions if type(a) is Complete for op in a.op_ids]


def test_a_lone_client_never_waits():
    m = _master()
    for op in range(1, 4):
        m.submit(op, MUTATIONS)
        assert _batches(m.flush(100 * op)) == [("n2", op), ("n3", op)]
        assert _completed(m.on_frame("n2", Ack(1, op), 100 * op + 1)) == [op]


def test_operations_staged_behind_a_batch_in_flight_go_out_together_at_its_first_ack():
    m = _master()
    m.submit(1, MUTATIONS)
    assert _batches(m.flush(0)) == [("n2", 1), ("n3", 1)]
    for op in (2, 3, 4):
        m.submit(op, MUTATIONS)
        assert _batches(m.flush(op)) == []            # held: batch 1 is in flight
    out = m.on_frame("n3", Ack(1, 1), 5)
    assert _completed(out) == [1]
    assert _batches(out) == [("n2", 2), ("n3", 2)]   # 2, 3 and 4 in one batch
    assert m.log.last_seq == 2
    out = m.on_frame("n2", Ack(1, 1), 6)             # the slower replica's ack cuts nothing more
    assert _batches(out) == [] and m.log.last_seq == 2
    assert _completed(m.on_frame("n2", Ack(1, 2), 7)) == [2, 3, 4]


def test_the_hold_ends_after_hold_ms_at_a_flush_or_a_tick():
    m = _master(hold_ms=10)
    m.submit(1, MUTATIONS)
    m.flush(0)
    m.submit(2, MUTATIONS)
    assert _batches(m.flush(9)) == []
    assert _batches(m.flush(10)) == [("n2", 2), ("n3", 2)]   # the acks were lost, say
    m.submit(3, MUTATIONS)
    assert _batches(m.flush(11)) == []
    assert _batches(m.on_tick(21)) == [("n2", 3), ("n3", 3)]


def test_no_hold_without_a_replica_to_ack_or_with_hold_ms_zero():
    m = _master()
    m.replica_disconnected("n2", 0)
    m.replica_disconnected("n3", 0)
    for op in (1, 2):
        m.submit(op, MUTATIONS)
        m.flush(op)
        assert m.log.last_seq == op
    m = _master(hold_ms=0)
    for op in (1, 2):
        m.submit(op, MUTATIONS)
        assert _batches(m.flush(op)) == [("n2", op), ("n3", op)]


def test_a_forced_flush_logs_everything_staged():
    m = _master()
    m.submit(1, MUTATIONS)
    m.flush(0)
    m.submit(2, MUTATIONS)
    assert _batches(m.flush(1)) == []
    m.flush(2, force=True)
    assert m.log.last_seq == 2


def test_under_none_clients_are_answered_at_once_and_the_stream_batches_behind():
    m = _master(policy=AckPolicy.NONE)
    assert _completed(m.submit(1, MUTATIONS)) == [1]
    m.flush(0)
    for op in (2, 3):
        assert _completed(m.submit(op, MUTATIONS)) == [op]
        assert _batches(m.flush(op)) == []
    assert _batches(m.on_frame("n2", Ack(1, 1), 4)) == [("n2", 2), ("n3", 2)]


def test_no_hold_while_the_master_sends_a_state_transfer():
    m = _master()
    m.sending_transfer = True   # the core sets it while a TransferSender runs
    for op in (1, 2):
        m.submit(op, MUTATIONS)
        assert _batches(m.flush(op)) == [("n2", op), ("n3", op)]


def _flush_ats(actions) -> list[int]:
    return [a.at_ms for a in actions if type(a) is FlushAt]


def test_after_an_ack_the_next_batch_gathers_as_many_operations_as_it_completed():
    # Two groups of clients: 1 and 2 in flight, 3 staged behind them. The ack answers 1 and 2;
    # the next batch waits for one of their clients to come back and carries 3 and 4 together.
    m = _master(gather_ms=2)
    for op in (1, 2):
        m.submit(op, MUTATIONS)
    assert _batches(m.flush(0)) == [("n2", 1), ("n3", 1)]
    m.submit(3, MUTATIONS)
    assert _batches(m.flush(1)) == []                       # held behind batch 1
    out = m.on_frame("n2", Ack(1, 1), 10)
    assert _completed(out) == [1, 2]
    assert _batches(out) == [] and _flush_ats(out) == [12], "3 alone waits; the gather's end is asked for"
    m.submit(4, MUTATIONS)
    assert _batches(m.flush(10)) == [("n2", 2), ("n3", 2)]  # as many staged as the ack completed
    assert _completed(m.on_frame("n2", Ack(1, 2), 11)) == [3, 4]


def test_a_gather_ends_when_its_time_is_up_even_if_nobody_comes_back():
    m = _master(gather_ms=2)
    for op in (1, 2, 3):
        m.submit(op, MUTATIONS)
    m.flush(0)
    out = m.on_frame("n3", Ack(1, 1), 10)
    assert _completed(out) == [1, 2, 3] and _flush_ats(out) == [], "nothing staged: no end to ask for"
    m.submit(4, MUTATIONS)
    out = m.flush(10)
    assert _batches(out) == [] and _flush_ats(out) == [12]
    assert m.flush(11) == [], "held, and its end asked for once"
    assert _batches(m.flush(12)) == [("n2", 2), ("n3", 2)]      # the flush FlushAt asked for
    # the next gather ends at a tick as well
    for op in (5, 6):
        m.submit(op, MUTATIONS)
    out = m.on_frame("n3", Ack(1, 2), 20)                        # completes 4: waits for one more
    assert _batches(out) == [("n2", 3), ("n3", 3)]               # 5 and 6 are two: cut at once
    out = m.on_frame("n3", Ack(1, 3), 30)
    assert _completed(out) == [5, 6]
    m.submit(7, MUTATIONS)
    assert _batches(m.flush(31)) == []
    assert _batches(m.on_tick(32)) == [("n2", 4), ("n3", 4)]


def test_a_lone_client_never_waits_for_a_gather():
    m = _master(gather_ms=5)
    for op in range(1, 4):
        m.submit(op, MUTATIONS)
        out = m.flush(100 * op)
        assert _batches(out) == [("n2", op), ("n3", op)] and _flush_ats(out) == []
        assert _completed(m.on_frame("n2", Ack(1, op), 100 * op + 1)) == [op]


def test_no_gather_under_none_while_sending_a_transfer_or_with_gather_ms_zero():
    m = _master(policy=AckPolicy.NONE, gather_ms=5)
    for op in (1, 2):
        m.submit(op, MUTATIONS)
    m.flush(0)
    m.submit(3, MUTATIONS)
    assert _batches(m.on_frame("n2", Ack(1, 1), 1)) == [("n2", 2), ("n3", 2)], "an ack completes nothing"
    m = _master(gather_ms=5)
    for op in (1, 2):
        m.submit(op, MUTATIONS)
    m.flush(0)
    m.on_frame("n2", Ack(1, 1), 1)
    m.sending_transfer = True
    m.submit(3, MUTATIONS)
    assert _batches(m.flush(1)) == [("n2", 2), ("n3", 2)]
    m = _master(gather_ms=0)
    for op in (1, 2):
        m.submit(op, MUTATIONS)
    m.flush(0)
    m.submit(3, MUTATIONS)
    assert _batches(m.on_frame("n2", Ack(1, 1), 1)) == [("n2", 2), ("n3", 2)]


def test_a_masters_own_fsync_that_completes_operations_gathers_too():
    # With a journal the master's copy counts once its fsync is done: when that comes after
    # the replicas' acks, it is the completion that answers the clients, and gathers.
    m = _master(gather_ms=2)
    m.local_durable = 0
    for op in (1, 2):
        m.submit(op, MUTATIONS)
    m.flush(0)
    assert _completed(m.on_frame("n2", Ack(1, 1), 5)) == [], "not on the master's disk yet"
    out = m.durable(1, 6)
    assert _completed(out) == [1, 2]
    m.submit(3, MUTATIONS)
    out = m.flush(6)
    assert _batches(out) == [] and _flush_ats(out) == [8], "3 waits for one more"
    m.submit(4, MUTATIONS)
    assert _batches(m.flush(7)) == [("n2", 2), ("n3", 2)]
