"""Group commit under load (Limits.hold_ms): a batch waits for the one before it.

MasterReplicator alone, its frames inspected: while the newest batch is in flight (sent, acked by
no replica) and younger than ``hold_ms``, a flush cuts nothing; the first ack, a flush after
``hold_ms`` or a tick cuts everything staged meanwhile into one batch; a lone client never waits;
a forced flush (a view change) always cuts.
"""

from __future__ import annotations

from storage import IdSource, ManualClock, Storage
from storage.commands import CreateQueue, Namespace

from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits, MasterReplicator
from cluster.replication.messages import Ack, AckPolicy, Batch, Complete, Send, SyncStatus

NAMES = ("n1", "n2", "n3")
# real mutations (the batch is encoded): one CreateQueue's
MUTATIONS = Storage(ManualClock(0), IdSource(1)).execute(CreateQueue(Namespace("us-east-1", "000000000000"), "q"))[1]


def _master(policy: AckPolicy = AckPolicy.MAJORITY, hold_ms: int = 10) -> MasterReplicator:
    m = MasterReplicator("n1", 1, NAMES, ReplicationLog(1 << 20), policy=policy, limits=Limits(hold_ms=hold_ms))
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
