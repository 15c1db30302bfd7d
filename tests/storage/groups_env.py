"""The harness of the cross-group move tests (test_outbox, test_outbox_replication): two
replication groups as two ``Storage`` objects on one clock, joined by ``StoragesCatalogue``,
each with a replica fed every mutation it emits, and a synchronous stand-in for the move driver
(cluster/) that takes each step of storage/outbox.py's protocol when a test says so.
"""

from __future__ import annotations

import json

from storage import IdSource, ManualClock, Storage
from storage.catalogue import StoragesCatalogue
from storage.commands import (
    AcceptOutbox, AdoptMoved, ClearOutbox, CreateQueue, ForgetMove, GetQueueAttributes, Namespace, QueueKey,
    ReceiveMessage, ReturnOutbox, SendMessage, SetQueueAttributes, StartMessageMoveTask,
)
from storage.keys import key_names
from storage.model import Queue
from storage.mutations import MoveTaskUpdated
from storage.results import AdoptMovedResult
from tests.storage.workload import assert_indexes_consistent

START_MS = 1_700_000_000_000
NS = Namespace()
COUNT_NAMES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
               "ApproximateNumberOfMessagesDelayed")


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
        """A mutation as the master emitted it."""
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
        policy = json.dumps({"deadLetterTargetArn": dlq.arn, "maxReceiveCount": max_receive_count})
        self.run(SetQueueAttributes(src, {"RedrivePolicy": policy}))

    def start_task(self, src: QueueKey, destination: QueueKey | None) -> str:
        self.run(StartMessageMoveTask(NS, src.arn, destination.arn if destination else None))
        (started,) = self.mutations
        assert type(started) is MoveTaskUpdated
        return started.task.task_id

    def check_replica(self) -> None:
        assert self.replica.digest() == self.storage.digest(), "a replica applying the emitted mutations diverged"
        assert_indexes_consistent(self.storage)
        assert_indexes_consistent(self.replica)


class World:
    """Groups A and B on one clock, joined by a catalogue."""

    def __init__(self) -> None:
        self.clock = ManualClock(START_MS)
        self.a = Group(self.clock, 11)
        self.b = Group(self.clock, 22)
        self.storages = [self.a.storage, self.b.storage]   # what the catalogues read
        StoragesCatalogue.join(self.storages)

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


def fail_over(world: World, group: Group, lost: int = 0) -> None:
    """The group's master fails and a member holding every batch but the last ``lost`` takes
    over (a batch it lacks was never acknowledged under ``majority``); it draws ids of its own."""
    kept = group.batches[:len(group.batches) - lost]
    new = Storage(group.storage.clock, IdSource(len(kept) + 1000))
    for batch in kept:
        new.apply_many(batch)
    world.storages[world.storages.index(group.storage)] = new
    StoragesCatalogue.join(world.storages)
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
