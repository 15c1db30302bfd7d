"""A random SQS workload for property tests: commands drawn step by step from hypothesis data.

It drives one Storage (the master) through a mix that reaches every mutation type: sends (standard,
FIFO, delayed, batched), receives, deletes and visibility changes with real and stale receipt
handles, purges, attribute and tag changes, queue deletion and re-creation, DLQ redrives, move
tasks and the passage of time with ticks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from storage import IdSource, ManualClock, SqsError, Storage
from storage.commands import (
    ChangeMessageVisibility, ChangeMessageVisibilityBatch, ChangeMessageVisibilityBatchEntry,
    CreateQueue, DeleteMessage, DeleteMessageBatch, DeleteMessageBatchEntry, DeleteQueue,
    MessageAttributeValue, Namespace, PurgeQueue, ReceiveMessage, SendMessage, SendMessageBatch,
    SendMessageBatchEntry, SetQueueAttributes, StartMessageMoveTask, TagQueue, Tick,
)

NS = Namespace("eu-west-1", "123456789012")
DLQ = NS.key("dlq")
STD = NS.key("std")
FIFO = NS.key("ordered.fifo")
FIFO_DLQ = NS.key("ordered-dlq.fifo")
QUEUES = (STD, FIFO, DLQ, FIFO_DLQ)


def setup_commands() -> list:
    return [
        CreateQueue(NS, "dlq", {"VisibilityTimeout": "2"}),
        CreateQueue(NS, "std", {"VisibilityTimeout": "3", "MessageRetentionPeriod": "600",
                                "RedrivePolicy": f'{{"deadLetterTargetArn":"{DLQ.arn}","maxReceiveCount":"2"}}'}),
        CreateQueue(NS, "ordered-dlq.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"}),
        CreateQueue(NS, "ordered.fifo", {
            "FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "3",
            "RedrivePolicy": f'{{"deadLetterTargetArn":"{FIFO_DLQ.arn}","maxReceiveCount":3}}'}),
    ]


@dataclass
class Run:
    """A master storage plus everything it emitted, in order."""

    seed: int
    clock: ManualClock = field(default_factory=ManualClock)
    master: Storage = field(init=False)
    mutations: list = field(default_factory=list)
    handles: dict = field(default_factory=dict)   # queue key -> receipt handles seen (some stale)
    counter: int = 0

    def __post_init__(self) -> None:
        self.master = Storage(self.clock, IdSource(self.seed))
        for c in setup_commands():
            self.execute(c)

    def execute(self, command) -> object | None:
        try:
            result, muts = self.master.execute(command)
        except SqsError as err:
            # a rejected command leaves no trace (the engine's contract)
            assert not getattr(err, "mutations", ()), f"{command!r} emitted mutations and failed"
            return None
        self.mutations.extend(muts)
        for m in getattr(result, "messages", ()) or ():
            self.handles.setdefault(command.queue, []).append(m.receipt_handle)
        return result

    def body(self) -> str:
        self.counter += 1
        return f"body-{self.counter}"


def step(run: Run, data: st.DataObject) -> None:
    """Draw one operation and run it on the master."""
    kind = data.draw(st.sampled_from((
        "send", "send", "send", "send_fifo", "send_fifo", "batch", "receive", "receive", "receive_fifo",
        "receive_fifo", "delete", "delete", "change", "batch_delete", "batch_change", "time", "time",
        "tick", "purge", "set_attrs", "tag", "recreate", "move_task", "dedup_resend")), label="op")
    if kind == "send":
        q = data.draw(st.sampled_from((STD, DLQ)))
        delay = data.draw(st.one_of(st.none(), st.integers(0, 5)))
        attrs = data.draw(st.sampled_from((None, {"n": MessageAttributeValue("Number", "42")},
                                           {"b": MessageAttributeValue("Binary", binary_value=b"\x00\x01")})))
        run.execute(SendMessage(q, run.body(), delay_seconds=delay, message_attributes=attrs,
                                group_id=data.draw(st.sampled_from((None, "fair")))))
    elif kind == "send_fifo":
        group = data.draw(st.sampled_from("abc"))
        dedup = data.draw(st.one_of(st.none(), st.sampled_from(("d1", "d2", "d3"))))
        run.execute(SendMessage(FIFO, run.body(), group_id=group, deduplication_id=dedup))
    elif kind == "dedup_resend":
        run.execute(SendMessage(FIFO, "same-body", group_id="a"))
    elif kind == "batch":
        n = data.draw(st.integers(1, 4))
        entries = tuple(SendMessageBatchEntry(f"e{i}", run.body(), delay_seconds=data.draw(st.sampled_from((None, 0, 2))))
                        for i in range(n))
        run.execute(SendMessageBatch(STD, entries))
    elif kind in ("receive", "receive_fifo"):
        q = FIFO if kind == "receive_fifo" else data.draw(st.sampled_from((STD, DLQ, FIFO_DLQ)))
        attempt = data.draw(st.sampled_from((None, None, "att-1", "att-2"))) if q is FIFO else None
        run.execute(ReceiveMessage(q, max_number_of_messages=data.draw(st.integers(1, 10)),
                                   visibility_timeout=data.draw(st.one_of(st.none(), st.integers(0, 4))),
                                   system_attribute_names=("All",), message_attribute_names=("All",),
                                   receive_request_attempt_id=attempt))
    elif kind in ("delete", "change", "batch_delete", "batch_change"):
        q = data.draw(st.sampled_from(QUEUES))
        handles = run.handles.get(q)
        if not handles:
            return
        picks = data.draw(st.lists(st.sampled_from(handles), min_size=1, max_size=3))
        if kind == "delete":
            run.execute(DeleteMessage(q, picks[0]))
        elif kind == "change":
            run.execute(ChangeMessageVisibility(q, picks[0], data.draw(st.integers(0, 6))))
        elif kind == "batch_delete":
            run.execute(DeleteMessageBatch(q, tuple(DeleteMessageBatchEntry(f"d{i}", h) for i, h in enumerate(picks))))
        else:
            run.execute(ChangeMessageVisibilityBatch(q, tuple(
                ChangeMessageVisibilityBatchEntry(f"c{i}", h, data.draw(st.integers(0, 6))) for i, h in enumerate(picks))))
    elif kind == "time":
        run.clock.advance(data.draw(st.sampled_from((1, 500, 1000, 2500, 4000, 61_000, 301_000, 700_000))))
    elif kind == "tick":
        run.execute(Tick())
    elif kind == "purge":
        run.execute(PurgeQueue(data.draw(st.sampled_from(QUEUES))))
    elif kind == "set_attrs":
        run.execute(SetQueueAttributes(data.draw(st.sampled_from((STD, DLQ))),
                                       {"VisibilityTimeout": str(data.draw(st.integers(0, 5))),
                                        "DelaySeconds": str(data.draw(st.integers(0, 2)))}))
    elif kind == "tag":
        run.execute(TagQueue(data.draw(st.sampled_from(QUEUES)), {"team": data.draw(st.sampled_from(("a", "b")))}))
    elif kind == "recreate":
        # delete the DLQ's sibling "std" and bring it back (after the 60 s tombstone)
        run.execute(DeleteQueue(STD))
        run.clock.advance(data.draw(st.sampled_from((1000, 61_000))))
        run.execute(Tick())
        run.execute(setup_commands()[1])
    elif kind == "move_task":
        run.execute(StartMessageMoveTask(NS, DLQ.arn, max_messages_per_second=data.draw(st.sampled_from((None, 1, 5)))))


def assert_indexes_consistent(storage: Storage) -> None:
    """The derived indexes that the digest does not cover agree with the messages they index."""
    from storage.model import READY

    for q in storage._queues.values():
        msgs = list(q.messages.values())
        assert q.by_receipt == {m.receipt: m for m in msgs if m.receipt is not None}
        ready = sum(m.where == READY for m in msgs)
        inflight = sum(m.where != READY and m.receive_count > 0 for m in msgs)
        assert (q.n_ready, q.n_inflight, q.n_delayed) == (ready, inflight, len(msgs) - ready - inflight)
        serials = [entry[0] for entry in q.fresh]
        assert serials == sorted(serials)


def assert_same_state(actual: Storage, expected: Storage) -> None:
    """Digest equality, with the first differing records in the message when it fails."""
    assert_indexes_consistent(actual)
    assert_indexes_consistent(expected)
    if actual.digest() == expected.digest():
        return
    from storage.digest import canonical

    a = [canonical(r) for r in actual._canonical_records()]
    e = [canonical(r) for r in expected._canonical_records()]
    diffs = [(x, y) for x, y in zip(a, e) if x != y][:3]
    raise AssertionError(f"states differ ({len(a)} vs {len(e)} records); first differences "
                         f"(actual, expected): {diffs!r}")
