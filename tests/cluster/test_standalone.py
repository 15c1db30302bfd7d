"""cluster/standalone.py: a journaled single node answers once its journal holds the change."""

from __future__ import annotations

from storage import IdSource, ManualClock, Storage
from storage.codec import decode_many
from storage.commands import CreateQueue, GetQueueUrl, Namespace, ReceiveMessage, SendMessage

from cluster.compaction import Snapshot
from cluster.errors import NotServing, NotStored
from cluster.node_core import Answer, FlushDue, Persist
from cluster.replication.log import ReplicationLog
from cluster.standalone import StandaloneCore

NS = Namespace("us-east-1", "000000000000")


def core(min_bytes: int = 64 << 20) -> StandaloneCore:
    clock = ManualClock(1_000_000)
    return StandaloneCore(Storage(clock, IdSource(1)), ReplicationLog(1 << 20, journaled=True),
                          snapshot_min_bytes=min_bytes)


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
    assert not answers(c.persisted(persist.token - 1))
    done = answers(c.persisted(persist.token))
    assert [a.token for a in done] == ["a", "b"] and all(a.error is None for a in done)


def test_a_read_waits_for_the_writes_before_it_but_not_otherwise():
    c = core()
    c.execute("a", CreateQueue(NS, "q"), 0)
    (persist,) = c.flush(0)
    assert not answers(c.execute("r", GetQueueUrl(NS, "q"), 0)), "the queue is not durable yet"
    (ans,) = answers(c.persisted(persist.token))[1:]
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
                c.persisted(a.token)
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
