"""cluster/node_core.py with a journal: the durability rules, driven directly.

A node with a journal hands every change of its log to the journal (Persist, PersistReset) and
learns what is durable through ``persisted``. Only then does a replica ack, a master count its
own copy, and a finished transfer's last chunk get acked; a failed journal answers "not stored"
and stops the node serving. The journal itself is played by the test: it says "durable" when
the test decides, as an fsync would.
"""

from __future__ import annotations

from typing import Any

from storage import Storage
from storage.codec import decode_many
from storage.commands import CreateQueue, SendMessage

from cluster.compaction import Snapshot
from cluster.errors import NotServing, NotStored
from cluster.node_actions import FlushDue, ForgetDropped, MayStand, Persist, PersistReset, TransferLeadership
from cluster.node_core import restarts_amnesiac
from cluster.replication.master import Limits
from cluster.replication.messages import Ack, AckPolicy, Batch, Send

from tests.cluster.test_node_core import NS, Cores


def unpersisted(c: Cores, name: str) -> list[Any]:
    return [a for a in c.out[name] if type(a) in (Persist, PersistReset)]


def fsync(c: Cores, name: str) -> None:
    """The node's journal reports everything it was handed as durable."""
    writes = unpersisted(c, name)
    if writes:
        c.out[name] = [a for a in c.out[name] if a not in writes]
        c.handle(name, c.cores[name].persisted(writes[-1].token, c.now))
        c.run()


def fsync_all(c: Cores) -> None:
    for _ in range(3):
        for n in c.cores:
            fsync(c, n)


def test_a_replica_acks_a_batch_only_once_its_journal_holds_it():
    c = Cores(journal=True)
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    rep = c.cores["n2"]
    seq = c.cores["n1"].groups[0].replication.log.last_seq
    assert rep.groups[0].replication.log.last_seq == seq, "applied at once"
    persists = [a for a in unpersisted(c, "n2") if type(a) is Persist]
    assert persists and persists[-1].entries[-1].seq == seq, "and handed to its journal"
    assert c.cores["n1"].groups[0].replication.master_core.replicas["n2"].acked < seq, "but not acked before the fsync"
    fsync(c, "n2")
    assert c.cores["n1"].groups[0].replication.master_core.replicas["n2"].acked == seq


def test_majority_means_on_disk_on_a_majority_the_master_counting_only_once_durable():
    c = Cores(journal=True)
    c.serving("n1")
    fsync_all(c)
    tok = object()
    c.execute("n1", CreateQueue(NS, "q"), tok)
    assert c.answers("n1", tok) == [], "no copy on any disk yet"
    fsync(c, "n2")
    fsync(c, "n3")
    (ans,) = c.answers("n1", tok)
    assert ans.error is None, "two replicas on disk are a majority without the master's own copy"
    tok2 = object()
    c.execute("n1", SendMessage(NS.key("q"), "m"), tok2)
    fsync(c, "n2")
    assert c.answers("n1", tok2) == [], "one replica on disk and the master's copy only in memory: no"
    fsync(c, "n1")
    (ans,) = c.answers("n1", tok2)
    assert ans.error is None, "the master's own fsync makes the majority"


def test_a_lone_node_answers_only_after_its_fsync():
    c = Cores(names=("n1",), journal=True)
    c.serving("n1")
    fsync(c, "n1")
    tok = object()
    c.execute("n1", CreateQueue(NS, "q"), tok)
    assert c.answers("n1", tok) == [], "in memory only: no answer yet"
    fsync(c, "n1")
    (ans,) = c.answers("n1", tok)
    assert ans.error is None


def test_policy_none_answers_before_any_disk():
    c = Cores(names=("n1",), journal=True, policy=AckPolicy.NONE)
    c.serving("n1")
    tok = object()
    c.execute("n1", CreateQueue(NS, "q"), tok)
    (ans,) = c.answers("n1", tok)
    assert ans.error is None, "none promises nothing: it answers at once"


def test_planted_ack_before_fsync_acks_what_is_only_in_memory():
    c = Cores(journal=True, bugs=frozenset({"ack-before-fsync"}))
    c.serving("n1")
    tok = object()
    c.execute("n1", CreateQueue(NS, "q"), tok)
    (ans,) = c.answers("n1", tok)
    assert ans.error is None, "answered although no journal holds it"


def test_a_transfer_is_acked_to_its_end_only_once_the_journal_holds_the_new_state():
    c = Cores(journal=True, log_limit_bytes=2_000, chunk_records=1)
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    c.down.add("n3")
    for i in range(60):                   # more than the log holds: n3 will need a transfer
        c.execute("n1", SendMessage(NS.key("q"), f"m{i}"))
        fsync(c, "n1")
        fsync(c, "n2")
    c.down.discard("n3")
    reset = None
    for _ in range(200):
        c.tick(0.05, leading="n1")
        fsync(c, "n1")
        fsync(c, "n2")
        resets = [a for a in c.out["n3"] if type(a) is PersistReset]
        if resets:
            reset = resets[-1]
            break
    assert reset is not None, "the finished transfer starts a new journal history"
    for _ in range(10):
        c.tick(0.05, leading="n1")
        fsync(c, "n1")
        fsync(c, "n2")
    n3 = c.cores["n3"]
    assert n3.groups[0].storage.digest() == c.cores["n1"].groups[0].storage.digest()
    mc = c.cores["n1"].groups[0].replication
    assert "n3" in mc.senders, "the master still waits for the last chunk's ack"
    # the reset's records are the snapshot: restoring them gives the transferred state
    restored = Storage(c.clock)
    for blob in reset.blobs:
        restored.apply_many(decode_many(blob))
    log = n3.groups[0].replication.log
    for seq in range(reset.seq + 1, log.last_seq + 1):     # and what the stream brought since
        restored.apply_many(decode_many(log.get(seq).mutations))
    assert restored.digest() == n3.groups[0].storage.digest()
    fsync(c, "n3")
    for _ in range(10):
        c.tick(0.05, leading="n1")
        fsync_all(c)
    assert "n3" not in mc.senders, "acked once its journal holds the snapshot"
    assert mc.master_core.replicas["n3"].acked == mc.log.last_seq


def test_a_failed_journal_answers_not_stored_and_stops_serving_and_standing():
    c = Cores(journal=True)
    c.serving("n1")
    fsync_all(c)
    tok = object()
    c.execute("n1", CreateQueue(NS, "q"), tok)
    n1 = c.cores["n1"]
    c.handle("n1", n1.journal_failed("No space left on device", c.now))
    (ans,) = c.answers("n1", tok)
    assert isinstance(ans.error, NotStored) and "No space left" in str(ans.error)
    assert not n1.serving(c.now)
    assert c.to_raft["n1"][-1] == TransferLeadership() or any(
        type(a) is TransferLeadership for a in c.to_raft["n1"]), "a leader hands leadership on"
    assert MayStand(False, "its journal failed") in c.to_raft["n1"]
    later = object()
    c.execute("n1", SendMessage(NS.key("q"), "m"), later)
    (ans2,) = c.answers("n1", later)
    assert isinstance(ans2.error, NotServing) and "journal failed" in str(ans2.error)


def test_compaction_snapshots_the_state_fuzzily_while_writes_go_on():
    c = Cores(names=("n1",), journal=True, snapshot_min_bytes=2_000)
    c.serving("n1")
    fsync(c, "n1")
    c.execute("n1", CreateQueue(NS, "q"))
    for i in range(100):
        c.execute("n1", SendMessage(NS.key("q"), f"m{i}" * 20))
        fsync(c, "n1")
    snaps: list[Snapshot] = []
    for i in range(20):
        c.execute("n1", SendMessage(NS.key("q"), f"late{i}"))
        c.tick(0.05, leading="n1")
        fsync(c, "n1")
        snaps += [a for a in c.out["n1"] if type(a) is Snapshot]
        c.out["n1"] = [a for a in c.out["n1"] if type(a) is not Snapshot]
    assert snaps, "the journal grew past the threshold: a snapshot was taken"
    snap = snaps[0]
    assert snap.at_seq <= snap.end_seq
    # recovery = the snapshot plus every entry after at_seq: the master's state exactly
    log = c.cores["n1"].groups[0].replication.log
    restored = Storage(c.clock)
    for blob in snap.blobs:
        restored.apply_many(decode_many(blob))
    for seq in range(snap.at_seq + 1, log.last_seq + 1):
        restored.apply_many(decode_many(log.get(seq).mutations))
    assert restored.digest() == c.cores["n1"].groups[0].storage.digest()


def test_compaction_reads_nothing_the_log_lacks_even_while_the_batching_hold_keeps_operations():
    """A master holds executed operations back while its newest batch is in flight (the batching
    hold). A compaction read must not see them unlogged: recovery replays the snapshot and the
    entries up to its end, and an operation no entry carries would survive a crash that lost it
    everywhere else."""
    c = Cores(journal=True, snapshot_min_bytes=500)
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    for i in range(20):
        c.execute("n1", SendMessage(NS.key("q"), f"m{i}" * 5))
        fsync_all(c)
    master = c.cores["n1"]
    c.execute("n1", SendMessage(NS.key("q"), "in flight"))   # its replicas ack once their journals hold it
    c.execute("n1", SendMessage(NS.key("q"), "held"))        # so this one waits behind it
    held = master.groups[0].replication.master_core.status(int(c.now * 1000))["staged_ops"]
    assert held == 1, "the batching hold keeps the second send out of the log"
    c.tick(0.001, rounds=2)          # within the hold: compaction begins, then reads a step
    (snap,) = [a for a in c.out["n1"] if type(a) is Snapshot]
    log = master.groups[0].replication.log
    assert snap.end_seq == log.last_seq
    restored = Storage(c.clock)
    for blob in snap.blobs:
        restored.apply_many(decode_many(blob))
    replayed = Storage(c.clock)
    for e in log.since(1, snap.end_seq):
        replayed.apply_many(decode_many(e.mutations))
        if e.seq > snap.at_seq:
            restored.apply_many(decode_many(e.mutations))
    assert log.get(1) is not None and restored.digest() == replayed.digest()
    assert restored.digest() == master.groups[0].storage.digest()


def test_a_replica_whose_journal_reports_part_of_what_it_holds_acks_the_rest_at_the_next_report():
    # hold_ms=0: the master sends the second batch before the first is acked, as it does under
    # load once a batch has waited hold_ms for a replica's fsync
    c = Cores(journal=True, limits=Limits(hold_ms=0))
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    first = c.cores["n1"].groups[0].replication.log.last_seq
    c.execute("n1", SendMessage(NS.key("q"), "m"))
    second = c.cores["n1"].groups[0].replication.log.last_seq
    assert second > first
    p1, p2 = [a for a in unpersisted(c, "n2") if type(a) is Persist][-2:]
    assert p1.entries[-1].seq == first and p2.entries[-1].seq == second, "two writes, the second behind the first"
    c.out["n2"] = [a for a in c.out["n2"] if a not in (p1, p2)]
    acked = lambda: c.cores["n1"].groups[0].replication.master_core.replicas["n2"].acked
    c.handle("n2", c.cores["n2"].persisted(p1.token, c.now))
    c.run()
    assert acked() == first, "the part on disk is acked at once"
    c.handle("n2", c.cores["n2"].persisted(p2.token, c.now))
    c.run()
    assert acked() == second, "and the rest once the journal reports it, not at the master's resend"


def _batch_to(c: Cores, sender: str, to: str) -> Any:
    """Take the next frame queued from ``sender`` to ``to`` off the harness's queue, undelivered."""
    for i, (s, t, frame) in enumerate(c.queue):
        if (s, t) == (sender, to) and type(frame) is Batch:
            del c.queue[i]
            return frame
    raise AssertionError(f"no batch queued from {sender} to {to}")


def _journaled_with_queue() -> tuple[Cores, Any]:
    """n1 serving with journals everywhere, queue "q" on disk; the master sends each batch at
    once (hold_ms=0), as under load. Returns the harness and replica n2's core."""
    c = Cores(journal=True, limits=Limits(hold_ms=0))
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    fsync_all(c)
    return c, c.cores["n2"]


def _send_held_back(c: Cores, body: str) -> Any:
    """A send through n1; its batch to n2 is taken off the queue, undelivered."""
    c.handle("n1", c.cores["n1"].execute(object(), SendMessage(NS.key("q"), body), c.now))
    return _batch_to(c, "n1", "n2")


def _acks_sent(actions: list[Any], to: str) -> list[int]:
    return [a.frame.seq for a in actions if type(a) is Send and a.to == to and type(a.frame) is Ack]


def test_a_journal_report_in_the_turn_of_a_newer_ack_still_acks_what_it_made_durable():
    # The report arrives while a newer batch's ack waits for the end of the turn. That flush
    # holds the newer ack again (the journal lacks it), and must still send the part the report
    # made durable: held back with it, it waited for the next fsync (sim/waste.py judges this).
    c, n2 = _journaled_with_queue()
    first = _send_held_back(c, "a")
    assert _acks_sent(c.handle("n2", n2.frame("n1", first, c.now)), "n1") == [], "held: not on disk yet"
    second = _send_held_back(c, "b")
    turn = n2.frame("n1", second, c.now)            # its ack waits for this turn's flush
    assert any(type(a) is FlushDue for a in turn) and _acks_sent(turn, "n1") == []
    p1 = [a for a in unpersisted(c, "n2") if type(a) is Persist and a.entries[-1].seq == first.seq][-1]
    assert _acks_sent(n2.persisted(p1.token, c.now), "n1") == []
    assert _acks_sent(n2.flush(c.now), "n1") == [first.seq], "the durable part goes in this turn"
    assert n2.groups[0].held_ack("n1").seq == second.seq, "the rest stays held for the journal"


def test_two_journal_reports_in_one_turn_ack_up_to_the_later():
    # Two reports before the turn ends: the second makes more durable than the first, whose
    # ack already waits for the flush; the flush sends the later one.
    c, n2 = _journaled_with_queue()
    for body in ("a", "b"):
        c.handle("n2", n2.frame("n1", _send_held_back(c, body), c.now))
    p1, p2 = [a for a in unpersisted(c, "n2") if type(a) is Persist][-2:]
    assert n2.groups[0].held_ack("n1").seq == p2.entries[-1].seq
    turn = n2.persisted(p1.token, c.now) + n2.persisted(p2.token, c.now)
    assert any(type(a) is FlushDue for a in turn)
    assert _acks_sent(n2.flush(c.now), "n1") == [p2.entries[-1].seq]
    assert n2.groups[0].held_ack("n1") is None


def test_a_newer_batch_in_the_turn_of_a_journal_report_does_not_displace_what_the_report_made_durable():
    # The report's part waits for the flush; a new batch's ack, which the journal lacks, takes
    # its place. The flush holds the newer ack and still sends the part.
    c, n2 = _journaled_with_queue()
    first = _send_held_back(c, "a")
    c.handle("n2", n2.frame("n1", first, c.now))
    p1 = [a for a in unpersisted(c, "n2") if type(a) is Persist and a.entries[-1].seq == first.seq][-1]
    turn = n2.persisted(p1.token, c.now)             # its part waits for this turn's flush
    assert any(type(a) is FlushDue for a in turn) and _acks_sent(turn, "n1") == []
    second = _send_held_back(c, "b")
    assert _acks_sent(n2.frame("n1", second, c.now), "n1") == []
    assert _acks_sent(n2.flush(c.now), "n1") == [first.seq], "the durable part goes in this turn"
    assert n2.groups[0].held_ack("n1").seq == second.seq


def test_who_restarts_amnesiac():
    assert not restarts_amnesiac(False, None), "a first start has acknowledged nothing"
    assert restarts_amnesiac(True, None), "no journal: a restart forgets everything"
    assert not restarts_amnesiac(True, "always", journal_existed=True)
    assert restarts_amnesiac(True, "always", journal_existed=False), "a lost data-dir"
    assert restarts_amnesiac(True, "interval", journal_existed=True), "a power cut may have taken acked entries"
    assert restarts_amnesiac(True, "always", journal_existed=True, entries_dropped=True), \
        "`journal truncate` dropped fsynced, maybe acknowledged, entries"


def test_a_member_whose_truncated_journal_is_whole_again_has_the_marker_removed_once_durable():
    c = Cores(journal=True)
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    for i in range(5):
        c.execute("n1", SendMessage(NS.key("q"), f"m{i}"))
    fsync_all(c)
    c.restart_amnesiac("n2", entries_dropped=True)
    n2 = c.cores["n2"]
    for _ in range(40):
        c.tick(0.05, leading="n1")
        fsync(c, "n1")
        fsync(c, "n3")
        if not n2.groups[0].replication.amnesiac:
            break
    assert not n2.groups[0].replication.amnesiac, "a serving master brought it up to date"
    assert n2.groups[0].storage.digest() == c.cores["n1"].groups[0].storage.digest()
    assert not [a for a in c.out["n2"] if type(a) is ForgetDropped], "not before its journal holds that"
    fsync(c, "n2")
    assert [a for a in c.out["n2"] if type(a) is ForgetDropped] == [ForgetDropped()]
    c.execute("n1", SendMessage(NS.key("q"), "later"))
    fsync_all(c)
    c.tick(0.05, rounds=5, leading="n1")
    assert len([a for a in c.out["n2"] if type(a) is ForgetDropped]) == 1, "once"


def test_amnesia_without_the_marker_clears_without_forgetting_anything():
    c = Cores(journal=True)
    c.serving("n1")
    fsync_all(c)
    c.execute("n1", CreateQueue(NS, "q"))
    fsync_all(c)
    c.restart_amnesiac("n2")
    for _ in range(40):
        c.tick(0.05, leading="n1")
        fsync_all(c)
    assert not c.cores["n2"].groups[0].replication.amnesiac
    assert not [a for a in c.out["n2"] if type(a) is ForgetDropped]
