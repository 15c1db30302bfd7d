"""How each mutation changes the state: the one code path of master and replicas alike.

A mixin of ``Storage`` (storage/engine.py), whose ``apply`` dispatches here. Every applier is
idempotent: it checks the entity's version (or serial, or existence) and ignores a mutation
already applied, one superseded, or one for something that is gone, so a replayed stream or a
stream overlapping a state transfer leaves the same state.
"""

from __future__ import annotations

from storage.keys import key_names
from storage.model import Queue, message
from storage.mutations import (
    AttemptRecorded, MessageAdded, MessageChanged, MessageDeleted, MessageRestored, MessagesRestored,
    MoveTaskUpdated, Pruned, QueueCreated, QueueDeleted, QueuePurged, QueueRestored, QueueUpdated,
    StorageRestored, TombstoneCleared,
)


class Appliers:
    """One ``_apply_<mutation>`` per mutation type."""

    def _apply_queue_created(self, m: QueueCreated) -> None:
        if m.qid < self._next_qid or key_names(m.key) in self._by_key:
            return  # applied before (and maybe deleted since)
        q = Queue(m.qid, m.key, m.created_ms, m.attributes, m.tags)
        self._queues[m.qid] = q
        self._by_key[key_names(m.key)] = q
        self._next_qid = m.qid + 1
        self._tombstones.pop(m.key, None)

    def _apply_queue_updated(self, m: QueueUpdated) -> None:
        q = self._queues.get(m.qid)
        if q is not None and m.version > q.version:
            q.set_config(m.version, m.modified_ms, m.attributes, m.tags)

    def _apply_queue_deleted(self, m: QueueDeleted) -> None:
        q = self._queues.pop(m.qid, None)
        if q is not None:
            del self._by_key[key_names(q.key)]
        if key_names(m.key) not in self._by_key and self._tombstones.get(m.key, -1) < m.deleted_ms:
            self._tombstones[m.key] = m.deleted_ms
        self._next_qid = max(self._next_qid, m.qid + 1)

    def _apply_tombstone_cleared(self, m: TombstoneCleared) -> None:
        if self._tombstones.get(m.key) == m.deleted_ms:
            del self._tombstones[m.key]

    def _apply_queue_purged(self, m: QueuePurged) -> None:
        q = self._queues.get(m.qid)
        if q is None:
            return
        q.last_purge_ms = max(q.last_purge_ms, m.purged_ms)
        if m.below_serial > q.purged_below:
            q.purged_below = m.below_serial
            q.clear_messages(m.below_serial)
            q.next_serial = max(q.next_serial, m.below_serial)
            # A purge forgets the FIFO deduplication ids too (LocalStack's AWS-validated
            # test_purge_queue_clears_fifo_deduplication_cache). Every entry here came from a
            # send below ``below_serial``: a later send has a later serial, so this purge, once
            # applied, is never applied again over it.
            q.dedup.clear()

    def _apply_message_added(self, m: MessageAdded) -> None:
        q = self._queues.get(m.qid)
        if q is not None and m.message.serial >= q.next_serial:
            q.add(m.message, m.dedup, self._now)

    def _apply_message_restored(self, m: MessageRestored) -> None:
        # the one-message record of an older sender (snapshots send MessagesRestored groups)
        self._apply_messages_restored(MessagesRestored(m.qid, (m.message,)))

    def _apply_messages_restored(self, m: MessagesRestored) -> None:
        q = self._queues.get(m.qid)
        if q is None:
            return
        messages, insert, now = q.messages, q.insert, self._now
        purged_below, next_sequence = q.purged_below, q.next_sequence
        for rec in m.messages:
            if rec.message_id in messages or rec.serial < purged_below:
                continue
            insert(message(rec), now)
            seq = rec.sequence_number
            if seq is not None and seq >= next_sequence:
                next_sequence = seq + 1
        q.next_sequence = next_sequence

    def _apply_message_changed(self, m: MessageChanged) -> None:
        q = self._queues.get(m.qid)
        msg = q.messages.get(m.message_id) if q is not None else None
        if msg is not None and m.version > msg.version:
            q.change(msg, m.version, m.receipt, m.visible_ms, m.receive_count,  # type: ignore[union-attr]
                     m.first_receive_ms, m.last_receive_ms)

    def _apply_message_deleted(self, m: MessageDeleted) -> None:
        q = self._queues.get(m.qid)
        msg = q.messages.get(m.message_id) if q is not None else None
        if msg is not None:
            q.remove(msg)  # type: ignore[union-attr]

    def _apply_attempt_recorded(self, m: AttemptRecorded) -> None:
        q = self._queues.get(m.qid)
        if q is None:
            return
        seen = q.attempts.get(m.attempt.attempt_id)
        if (seen is not None and seen.expires_ms >= m.attempt.expires_ms) or m.attempt.expires_ms <= q.pruned_before:
            return  # replayed: superseded, or already pruned (must not come back out of order)
        q.attempts.pop(m.attempt.attempt_id, None)
        q.attempts[m.attempt.attempt_id] = m.attempt

    def _apply_pruned(self, m: Pruned) -> None:
        q = self._queues.get(m.qid)
        if q is None:
            return
        q.pruned_before = max(q.pruned_before, m.before_ms)
        for window in (q.dedup, q.attempts):
            while window:
                first = next(iter(window.values()))
                if first.expires_ms > m.before_ms:
                    break
                window.popitem(last=False)

    def _apply_move_task_updated(self, m: MoveTaskUpdated) -> None:
        q = self._queues.get(m.qid)
        if q is not None:
            q.add_task(m.task)

    def _apply_queue_restored(self, m: QueueRestored) -> None:
        if m.qid in self._queues:
            return
        q = Queue(m.qid, m.key, m.created_ms, m.attributes, m.tags)
        q.version = m.version
        q.modified_ms = m.modified_ms
        q.next_serial = m.next_serial
        q.next_sequence = m.next_sequence
        q.purged_below = m.purged_below
        q.last_purge_ms = m.last_purge_ms
        q.pruned_before = m.pruned_before
        if m.dedup_by_group is not None:
            q.dedup_by_group = m.dedup_by_group
        for d in m.dedup:
            q.dedup[d.key] = d
        for a in m.attempts:
            q.attempts[a.attempt_id] = a
        for t in m.move_tasks:
            q.add_task(t)
        self._queues[m.qid] = q
        self._by_key[key_names(m.key)] = q
        self._next_qid = max(self._next_qid, m.qid + 1)

    def _apply_storage_restored(self, m: StorageRestored) -> None:
        self._next_qid = max(self._next_qid, m.next_qid)
        for key, deleted in m.tombstones:
            if key_names(key) not in self._by_key and self._tombstones.get(key, -1) < deleted:
                self._tombstones[key] = deleted
