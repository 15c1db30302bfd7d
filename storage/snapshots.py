"""The whole state as records: ``snapshot``/``iter_snapshot``, ``restore`` and ``digest``.

A mixin of ``Storage`` (storage/engine.py). A snapshot is a sequence of mutations
(``StorageRestored``, the outbox's ``OutboxRestored`` once there are moves between groups, then
per queue a ``QueueRestored`` and its messages in ``MessagesRestored`` groups), so restoring one
is applying it.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from storage.model import Queue
from storage.mutations import (
    MessageRecord, MessageRestored, MessagesRestored, Mutation, QueueRestored, StorageRestored,
)

# A snapshot's messages go out in groups (MessagesRestored) of at most this many, or as soon as
# their bodies reach this size: small enough that one group never makes a big frame alone.
SNAPSHOT_GROUP_MESSAGES = 64
SNAPSHOT_GROUP_BYTES = 64 * 1024


class Snapshots:
    """snapshot, iter_snapshot, restore and digest."""

    def _queue_record(self, q: Queue) -> QueueRestored:
        return QueueRestored(q.qid, q.key, q.created_ms, q.version, q.modified_ms, dict(q.attributes),
                             dict(q.tags), q.next_serial, q.next_sequence, q.purged_below, q.last_purge_ms,
                             tuple(q.dedup.values()), tuple(q.attempts.values()), tuple(q.move_tasks),
                             q.pruned_before, q.dedup_by_group)

    def _head_records(self) -> Iterator[Mutation]:
        """What is not a queue's: the storage's counters and tombstones, and the outbox.

        The outbox is read before any queue, so that in a fuzzy snapshot a message returned
        from the outbox meanwhile is in its queue's records or brought back by the replayed
        ``OutboxReturned``, whose entry the outbox record still holds."""
        yield StorageRestored(self._next_qid, tuple(sorted(self._tombstones.items())))
        outbox = self._outbox_record()
        if outbox is not None:
            yield outbox

    def iter_snapshot(self) -> Iterator[Mutation]:
        """The whole state as records, produced lazily.

        Safe to interleave with ``execute``: each record is read when it is yielded, so a
        snapshot taken while the master keeps serving is "fuzzy". Restoring it and then applying
        every mutation emitted since the snapshot began gives exactly the master's state, because
        every mutation is idempotent and versioned.
        """
        yield from self._head_records()
        for qid in sorted(self._queues):
            q = self._queues.get(qid)
            if q is None:
                continue
            # The header and the id list must be read at the same instant: a message added in
            # between would be restored while its MessageAdded (carrying its dedup entry) is
            # skipped on replay as already covered.
            header, ids = self._queue_record(q), list(q.messages)
            yield header
            group: list[MessageRecord] = []
            size = 0
            for mid in ids:
                if self._queues.get(qid) is not q:
                    group = []
                    break
                msg = q.messages.get(mid)
                if msg is not None:
                    rec = msg.record()
                    group.append(rec)
                    size += len(rec.body)
                    # Each group is read at one instant, like a single record: no yield inside.
                    if len(group) >= SNAPSHOT_GROUP_MESSAGES or size >= SNAPSHOT_GROUP_BYTES:
                        yield MessagesRestored(qid, tuple(group))
                        group, size = [], 0
            if group:
                yield MessagesRestored(qid, tuple(group))

    def snapshot(self) -> list[Mutation]:
        return list(self.iter_snapshot())

    def restore(self, records: Iterable[Mutation]) -> None:
        """Replace the whole state with a snapshot's."""
        self._queues.clear()
        self._by_key.clear()
        self._tombstones.clear()
        self._next_qid = 0
        self._init_outbox()
        for r in records:
            self.apply(r)

    def digest(self) -> str:
        """A stable hash of the logical state: equal on every member that converged."""
        from storage.digest import digest_records
        return digest_records(self._canonical_records())

    def _canonical_records(self) -> Iterator[Any]:
        yield from self._head_records()
        for qid in sorted(self._queues):
            q = self._queues[qid]
            rec = self._queue_record(q)
            yield rec
            for msg in sorted(q.messages.values(), key=lambda m: m.rec.serial):
                yield MessageRestored(qid, msg.record())
