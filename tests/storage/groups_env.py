"""The harness of the cross-group move tests (test_outbox, test_outbox_replication): two
replication groups as two ``Storage`` objects on one clock, each with a replica fed every
mutation it emits, joined by a catalogue, and a synchronous stand-in for the move driver.

The dead-letter target check and the move-task start checks across groups are the catalogue's
(storage/catalogue.py) and tested with it; here a source's RedrivePolicy naming another group's
queue, and a task moving to one, are set by the mutation those commands emit.
"""

from __future__ import annotations

import json

from storage import IdSource, ManualClock, Storage
from storage.commands import (
    AcceptOutbox, AdoptMoved, ClearOutbox, CreateQueue, ForgetMove, GetQueueAttributes, Namespace, QueueKey,
    ReceiveMessage, ReturnOutbox, SendMessage,
)
from storage.keys import key_names, parse_arn
from storage.model import Queue
from storage.mutations import MoveTaskRecord, MoveTaskUpdated, QueueUpdated
from storage.results import AdoptMovedResult
from tests.storage.workload import assert_indexes_consistent

START_MS = 1_700_000_000_000
NS = Namespace()
COUNT_NAMES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesDelayed")


class Catalogue:
    """The other groups' queues, found in their storages (a node hands each group one)."""

    def __init__(self, groups: list[Group], own: Group):
        self.others = [g for g in groups if g is not own]

    def queue_by_arn(self, arn: str) -> Queue | None:
        key = parse_arn(arn)
        for g in self.others:
            q = g.storage._by_key.get(key_names(key)) if key else None
            if q is not None:
                return q
        return None

    def queues(self):
        return [q for g in self.others for q in g.storage._queues.values()]


class Group:
    """One group's master storage, its replica, and the batches it emitted."""

    def __init__(self, clock: ManualClock, seed: int):
        self.storage = Storage(clock, IdSource(seed))
        self.replica = Storage(ManualClock(0), IdSource(seed + 1))
        self.batches: list[list] = []
        self.mutations: list = []

    def run(self, command):
        result, mutations = self.storage.execute(command)
        self.emitted(mutations)
        return result

    def emitted(self, mutations: list) -> None:
        for m in mutations:
            self.replica.apply(m)
        self.batches.append(list(mutations))
        self.mutations = list(mutations)

    def apply(self, mutation) -> None:
        """A mutation as the master emitted it (see the module's docstring)."""
        self.storage.apply(mutation)
        self.emitted([mutation])

    def queue(self, key: QueueKey) -> Queue:
        return self.storage._by_key[key_names(key)]

    def create(self, name: str, **attributes) -> QueueKey:
        attrs = {k: str(v) for k, v in attributes.items()}
        if name.endswith(".fifo"):
            attrs.setdefault("FifoQueue", "true")
        return self.run(CreateQueue(NS, name, attrs)).queue

    def send(self, key: QueueKey, body: str, **kw) -> str:
        return self.run(SendMessage(key, body, **kw)).message_id

    def receive(self, key: QueueKey, n: int = 10, **kw):
        return self.run(ReceiveMessage(key, max_number_of_messages=n, **kw)).messages

    def counts(self, key: QueueKey) -> tuple[int, ...]:
        attrs = self.storage.execute(GetQueueAttributes(key, COUNT_NAMES))[0].attributes
        return tuple(int(attrs[n]) for n in COUNT_NAMES)

    def redrive_to(self, src: QueueKey, dlq: QueueKey, max_receive_count: int = 1) -> None:
        q = self.queue(src)
        policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": max_receive_count})
        self.apply(QueueUpdated(q.qid, q.version + 1, self.storage.clock.now_ms(),
                                {**q.attributes, "RedrivePolicy": policy}, q.tags))

    def start_task(self, src: QueueKey, destination: QueueKey | None) -> str:
        q = self.queue(src)
        task = MoveTaskRecord(self.storage.ids.uuid(), 1, "RUNNING", q.arn, destination.arn if destination else None,
                              None, 0, len(q.messages), self.storage.clock.now_ms(), None)
        self.apply(MoveTaskUpdated(q.qid, task))
        return task.task_id

    def check_replica(self) -> None:
        assert self.replica.digest() == self.storage.digest(), "a replica applying the emitted mutations diverged"
        assert_indexes_consistent(self.storage)
        assert_indexes_consistent(self.replica)


class World:
    """Groups A and B on one clock, each with a catalogue of the other."""

    def __init__(self) -> None:
        self.clock = ManualClock(START_MS)
        self.a = Group(self.clock, 11)
        self.b = Group(self.clock, 22)
        groups = [self.a, self.b]
        for g in groups:
            g.storage.catalogue = Catalogue(groups, g)

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    def offer(self, src: Group, dst: Group) -> AdoptMovedResult:
        """Steps 1-2: the source's pending moves offered to the destination, which adopts them."""
        return dst.run(AdoptMoved(tuple(src.storage.outbox_pending())))

    def answer(self, src: Group, result: AdoptMovedResult) -> None:
        """Step 4: the destination's answers, executed on the source."""
        src.run(AcceptOutbox(result.accepted))
        for r in result.refused:
            src.run(ReturnOutbox(r.move_id, r.reason))

    def forget(self, src: Group, dst: Group) -> None:
        """Steps 5-7: the accepted moves forgotten by the destination, then cleared at the source."""
        ids = tuple(i for i, _ in src.storage.outbox_accepted())
        dst.run(ForgetMove(ids))
        src.run(ClearOutbox(ids))

    def settle(self, src: Group, dst: Group) -> AdoptMovedResult:
        result = self.offer(src, dst)
        self.answer(src, result)
        self.forget(src, dst)
        return result


def fail_over(group: Group, lost: int = 0) -> None:
    """The group's master fails and a member holding every batch but the last ``lost`` takes
    over (a batch it lacks was never acknowledged under ``majority``); it draws ids of its own."""
    kept = group.batches[:len(group.batches) - lost]
    new = Storage(group.storage.clock, IdSource(len(kept) + 1000))
    new.catalogue = group.storage.catalogue
    for batch in kept:
        new.apply_many(batch)
    group.storage, group.batches = new, kept
    group.replica = Storage(ManualClock(0), IdSource(len(kept) + 2000))
    group.replica.restore(new.snapshot())


def holdings(world: World) -> list[str]:
    """Every message id held in a queue or a source's outbox, across both groups, sorted."""
    ids = []
    for g in (world.a, world.b):
        ids += [mid for q in g.storage._queues.values() for mid in q.messages]
        ids += [e.message.message_id for e in g.storage._outbox.values() if not e.accepted]
    return sorted(ids)
