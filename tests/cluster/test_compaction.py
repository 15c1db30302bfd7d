"""Compaction's fuzzy snapshot (cluster/compaction.py): read a step at a time while the log moves,
it names the log position its read began at, and how much a step reads is the caller's to set
(the simulator reads its small states over many steps)."""

from __future__ import annotations

from storage import IdSource, ManualClock, Storage
from storage.commands import CreateQueue, Namespace

from cluster.compaction import Compactor
from cluster.replication.log import Entry, ReplicationLog


def _storage(queues: int) -> Storage:
    s = Storage(ManualClock(0), IdSource(1))
    for i in range(queues):
        s.execute(CreateQueue(Namespace(), f"q{i}", {}))
    return s


def test_a_read_over_many_steps_names_where_it_began_while_the_log_moved():
    storage, log = _storage(20), ReplicationLog()
    log.append(Entry(1, 1, b"x", 0))
    c = Compactor(0, step_bytes=1, blob_records=2)
    assert c.due and c.step(storage, log) is None          # begins at seq 1
    steps, seq, snap = 0, 1, None
    while snap is None:
        seq += 1
        log.append(Entry(seq, 1, b"x", 0))                  # writes go on between the steps
        snap = c.step(storage, log)
        steps += 1
    assert steps >= 10                                      # 20 queues, 2 records a blob
    assert (snap.at_seq, snap.at_epoch, snap.end_seq) == (1, 1, seq)
    assert len(snap.blobs) == steps and not c.due


def test_by_default_a_small_state_is_read_in_the_step_after_the_one_that_begins():
    storage, log = _storage(20), ReplicationLog()
    c = Compactor(0)
    assert c.step(storage, log) is None
    log.append(Entry(1, 1, b"x", 0))
    snap = c.step(storage, log)
    assert snap is not None and (snap.at_seq, snap.end_seq) == (0, 1) and len(snap.blobs) == 1
    assert c.last_bytes == len(snap.blobs[0])
