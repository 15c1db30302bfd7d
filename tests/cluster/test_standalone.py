"""cluster/standalone.py: a journaled single node answers once its journal holds the change."""

from __future__ import annotations

from storage import IdSource, ManualClock, Storage
from storage.codec import decode_many
from storage.commands import CreateQueue, GetQueueUrl, Namespace, ReceiveMessage, SendMessage

from cluster.compaction import Snapshot
from cluster.errors import NotServing, NotStored
from cluster.node_actions import Answer, FlushDue, Persist
from cluster.replication.log import ReplicationLog
from cluster.standalone import StandaloneCore

NS = Namespace("us-east-1", "000000000000")


def core(min_bytes: int = 64 << 20, gather_ms: int = 0) -> StandaloneCore:
    clock = ManualClock(1_000_000)
    return StandaloneCore(Storage(clock, IdSource(1)), ReplicationLog(1 << 20, journaled=True),
                          snapshot_min_bytes=min_bytes, gather_ms=gather_ms)


def answers(actions) -> list[Answer]:
    return [a for a in actions if type(a) is Answer]


def test_one_entry_per_turn_and_answers_only_once_durable():
    c = core()
    out = c.execute("a", CreateQueue(NS, "q"), 0)
    assert FlushDue() in out and not answers(out)
    out = c.execute("b", SendMessage(NS.key("q"), "m"), 0)
    assert not answers(out)
    (persist,) = c.flush(0)
    assert type(persist) is Persist and len(persist.entries) == 1, "one entry carries the whole turn"
    assert not answers(c.persisted(persist.token - 1, 0))
    done = answers(c.persisted(persist.token, 0))
    assert [a.token for a in done] == ["a", "b"] and all(a.error is None for a in done)


def test_a_read_waits_for_the_writes_before_it_but_not_otherwise():
    c = core()
    c.execute("a", CreateQueue(NS, "q"), 0)
    (persist,) = c.flush(0)
    assert not answers(c.execute("r", GetQueueUrl(NS, "q"), 0)), "the queue is not durable yet"
    (ans,) = answers(c.persisted(persist.token, 0))[1:]
    assert ans.token == "r"
    (ans,) = answers(c.execute("r2", GetQueueUrl(NS, "q"), 0))
    assert ans.error is None, "nothing pending: at once"


def test_a_failed_journal_answers_not_stored_then_refuses():
    c = core()
    c.execute("a", CreateQueue(NS, "q"), 0)
    c.flush(0)
    c.execute("b", SendMessage(NS.key("q"), "m"), 0)   # staged, not yet cut
    out = answers(c.journal_failed("No space left on device"))
    assert {a.token for a in out} == {"a", "b"}
    assert all(isinstance(a.error, NotStored) for a in out)
    (ans,) = answers(c.execute("c", GetQueueUrl(NS, "q"), 0))
    assert isinstance(ans.error, NotServing)


def test_compaction_snapshot_plus_later_entries_is_the_state():
    c = core(min_bytes=1_000)
    c.execute("a", CreateQueue(NS, "q"), 0)
    entries = []
    snaps: list[Snapshot] = []
    for i in range(300):
        c.execute(i, SendMessage(NS.key("q"), f"message {i}" * 5), 0)
        if i % 3 == 0:
            c.execute(f"r{i}", ReceiveMessage(NS.key("q"), max_number_of_messages=1), 0)
        for a in c.flush(0) + c.tick(0):
            if type(a) is Persist:
                entries += a.entries
                c.persisted(a.token, 0)
            elif type(a) is Snapshot:
                snaps.append(a)
    assert snaps
    snap = snaps[-1]
    restored = Storage(ManualClock(1_000_000))
    for blob in snap.blobs:
        restored.apply_many(decode_many(blob))
    for e in entries:
        if e.seq > snap.at_seq:
            restored.apply_many(decode_many(e.mutations))
    assert restored.digest() == c.storage.digest()


def _persist(actions) -> Persist:
    (p,) = [a for a in actions if type(a) is Persist]
    return p


def test_after_a_report_the_next_entry_gathers_as_many_operations_as_it_answered():
    c = core(gather_ms=2)
    c.execute("q", CreateQueue(NS, "q"), 0)
    answers(c.persisted(_persist(c.flush(0)).token, 0))
    for t in "abc":
        c.execute(t, SendMessage(NS.key("q"), t), 5)
    p = _persist(c.flush(5))                        # the gather of the queue's report is over
    done = answers(c.persisted(p.token, 10))
    assert [a.token for a in done] == ["a", "b", "c"]
    c.execute("a2", SendMessage(NS.key("q"), "a2"), 10)
    assert c.flush(10) == [FlushDue(0.0125)], "one of three back: wait for the others until 12 ms"
    c.execute("b2", SendMessage(NS.key("q"), "b2"), 11)
    assert c.flush(11) == [], "the gather's end is asked for once"
    c.execute("c2", SendMessage(NS.key("q"), "c2"), 11)
    p = _persist(c.flush(11))
    assert len(p.entries) == 1 and len(decode_many(p.entries[0].mutations)) == 3, "all three in one entry"


def test_a_gather_ends_at_its_time_with_what_came():
    c = core(gather_ms=2)
    c.execute("q", CreateQueue(NS, "q"), 0)
    c.execute("a", SendMessage(NS.key("q"), "a"), 0)
    answers(c.persisted(_persist(c.flush(0)).token, 10))
    c.execute("x", SendMessage(NS.key("q"), "x"), 10)
    assert c.flush(10) == [FlushDue(0.0125)]
    assert c.flush(11) == []
    p = _persist(c.flush(12))
    done = answers(c.persisted(p.token, 13))
    assert [a.token for a in done] == ["x"]


def test_one_connection_never_waits_for_a_gather():
    c = core(gather_ms=2)
    c.execute("q", CreateQueue(NS, "q"), 0)
    answers(c.persisted(_persist(c.flush(0)).token, 1))
    for i in range(5):
        c.execute(i, SendMessage(NS.key("q"), f"m{i}"), 1 + i)
        (a,) = answers(c.persisted(_persist(c.flush(1 + i)).token, 1 + i))
        assert a.token == i


def test_compaction_and_a_forced_flush_cut_what_a_gather_holds():
    c = core(min_bytes=1, gather_ms=2)
    c.execute("q", CreateQueue(NS, "q"), 0)
    c.execute("a", SendMessage(NS.key("q"), "a"), 0)
    answers(c.persisted(_persist(c.flush(0)).token, 0))
    c.execute("b", SendMessage(NS.key("q"), "b"), 0)
    assert c.flush(0) == [FlushDue(0.0025)], "held by the gather"
    assert c.compactor.due
    out = c.tick(0)
    p = _persist(out)
    for _ in range(10):
        if any(type(a) is Snapshot for a in out):
            break
        out += c.tick(0)
    (snap,) = [a for a in out if type(a) is Snapshot]
    assert snap.at_seq == p.entries[-1].seq, "the snapshot's position covers the operation it reads"
    for t in "cde":
        c.execute(t, SendMessage(NS.key("q"), t), 0)
    answers(c.persisted(p.token, 0))
    answers(c.persisted(_persist(c.flush(0)).token, 0))    # three answered: the next gathers three
    c.execute("f", SendMessage(NS.key("q"), "f"), 0)
    assert c.flush(0) == [FlushDue(0.0025)]
    assert len(decode_many(_persist(c.flush(0, force=True)).entries[0].mutations)) == 1, "a stop's flush cuts it"


def test_the_gathers_timer_ends_it_even_if_the_wall_clock_was_stepped_back_but_an_older_timer_does_not():
    c = core(gather_ms=2)
    c.execute("q", CreateQueue(NS, "q"), 0)
    c.execute("a", SendMessage(NS.key("q"), "a"), 0)
    answers(c.persisted(_persist(c.flush(0)).token, 10))     # two answered: gather two, until 12
    c.execute("x", SendMessage(NS.key("q"), "x"), 10)
    (first,) = c.flush(10)
    assert first == FlushDue(0.0125)
    c.execute("y", SendMessage(NS.key("q"), "y"), 11)
    answers(c.persisted(_persist(c.flush(11)).token, 20))    # cut by count; two answered: until 22
    c.execute("z", SendMessage(NS.key("q"), "z"), 20)
    (second,) = c.flush(20)
    assert second == FlushDue(0.0225)
    assert c.flush(21, timer_ms=first.at * 1000) == [], "the first gather's timer does not end the second"
    p = _persist(c.flush(5, timer_ms=second.at * 1000))      # the wall clock was stepped back to 5
    assert [a.token for a in answers(c.persisted(p.token, 6))] == ["z"]
