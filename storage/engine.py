"""The SQS state machine: ``execute(command) -> (result, mutations)`` and idempotent ``apply``.

``execute`` validates a command completely, decides everything random or time-dependent, and
emits mutations; each mutation is applied through ``apply`` as it is emitted, the same code a
replica runs, so the master and its replicas hold the same state by construction. A handler
raises ``SqsError`` only before it has emitted anything (batches report per-entry failures
instead), so a rejected command never leaves a trace.

``Storage`` is composed of one mixin per concern, each in its own module: queue_actions (queue
administration), permissions (AddPermission, RemovePermission), sending, receiving, handles
(deletes and visibility changes by receipt handle), redrive (dead-letter queues and message
move tasks), outbox (moves to a queue of another replication group), appliers (what each
mutation does to the state) and snapshots (the whole state as records). They share this
object's state and its handler table, so a command costs the same calls as it would in one
class. FIFO's sequence numbers and retried receives are in fifo; whether a command's ``caller``
may act on another account's queue is in access.
"""

from __future__ import annotations

import heapq
import logging
from itertools import chain
from typing import Any, Callable, Iterable

from storage.access import authorize
from storage.appliers import Appliers
from storage.catalogue import Catalogue
from storage.clock import Clock
from storage.commands import (
    AcceptOutbox, AddPermission, AdoptMoved, CancelMessageMoveTask, ChangeMessageVisibility,
    ChangeMessageVisibilityBatch, ClearOutbox, CreateQueue, DeleteMessage, DeleteMessageBatch, DeleteQueue,
    ForgetMove, GetQueueAttributes, GetQueueUrl, ListDeadLetterSourceQueues, ListMessageMoveTasks, ListQueues,
    ListQueueTags, PurgeQueue, QueueKey, ReceiveMessage, RemovePermission, ReturnOutbox, SendMessage,
    SendMessageBatch, SetQueueAttributes, StartMessageMoveTask, TagQueue, Tick, UntagQueue,
)
from storage.errors import UNSUPPORTED_OPERATION, SqsError, queue_does_not_exist
from storage.handles import Handles
from storage.ids import IdSource
from storage.keys import key_names, parse_arn
from storage.limits import STRICT, Limits
from storage.model import Queue
from storage.mutations import (
    AttemptRecorded, MessageAdded, MessageChanged, MessageDeleted, MessageOutboxed, MessageRestored,
    MessagesRestored, MoveAdopted, MovesForgotten, MoveTaskUpdated, Mutation, OutboxAccepted, OutboxCleared,
    OutboxRestored, OutboxReturned, Pruned, QueueCreated, QueueDeleted, QueuePurged, QueueRestored, QueueUpdated,
    StorageRestored, TombstoneCleared,
)
from storage.outbox import Outbox
from storage.permissions import Permissions
from storage.queue_actions import QUEUE_TOMBSTONE_MS, QueueActions
from storage.receiving import Receiving
from storage.redrive import TASK_STATUS_RUNNING, Redrive
from storage.results import TickResult
from storage.sending import Sending
from storage.snapshots import Snapshots

log = logging.getLogger(__name__)
_NO_QUEUE = QueueKey("", "", "")   # what a command naming no queue (GetQueueUrl, move tasks) is checked as


class Storage(QueueActions, Permissions, Sending, Receiving, Handles, Redrive, Outbox, Appliers, Snapshots):
    """All queues of all namespaces, in memory. Not thread-safe: one owner calls it."""

    def __init__(self, clock: Clock, ids: IdSource | None = None, limits: Limits = STRICT):
        self.clock = clock
        self.ids = ids or IdSource()
        self.limits = limits
        # Queues of the other replication groups, for the commands that look across queues.
        self.catalogue: Catalogue | None = None
        self._queues: dict[int, Queue] = {}
        # Keyed by the key's strings (see key_names), straight to the queue: every queue action
        # starts with this lookup.
        self._by_key: dict[tuple[str, str, str], Queue] = {}
        self._tombstones: dict[QueueKey, int] = {}
        self._next_qid = 0
        self._now = 0  # the time of the command or mutation being applied: index placement only
        self._init_outbox()
        self._handlers: dict[type, Callable[[Any, int, list], Any]] = {
            CreateQueue: self._create_queue, DeleteQueue: self._delete_queue,
            GetQueueUrl: self._get_queue_url, ListQueues: self._list_queues,
            GetQueueAttributes: self._get_queue_attributes, SetQueueAttributes: self._set_queue_attributes,
            PurgeQueue: self._purge_queue, TagQueue: self._tag_queue, UntagQueue: self._untag_queue,
            ListQueueTags: self._list_queue_tags, AddPermission: self._add_permission,
            RemovePermission: self._remove_permission,
            ListDeadLetterSourceQueues: self._list_dead_letter_source_queues,
            SendMessage: self._send_message, SendMessageBatch: self._send_message_batch,
            ReceiveMessage: self._receive_message, DeleteMessage: self._delete_message,
            DeleteMessageBatch: self._delete_message_batch,
            ChangeMessageVisibility: self._change_message_visibility,
            ChangeMessageVisibilityBatch: self._change_message_visibility_batch,
            StartMessageMoveTask: self._start_message_move_task,
            CancelMessageMoveTask: self._cancel_message_move_task,
            ListMessageMoveTasks: self._list_message_move_tasks, Tick: self._tick,
            AdoptMoved: self._adopt_moved, AcceptOutbox: self._accept_outbox, ReturnOutbox: self._return_outbox,
            ClearOutbox: self._clear_outbox, ForgetMove: self._forget_move,
        }
        self._appliers: dict[type, Callable[[Any], None]] = {
            QueueCreated: self._apply_queue_created, QueueUpdated: self._apply_queue_updated,
            QueueDeleted: self._apply_queue_deleted, TombstoneCleared: self._apply_tombstone_cleared,
            QueuePurged: self._apply_queue_purged, MessageAdded: self._apply_message_added,
            MessageChanged: self._apply_message_changed, MessageDeleted: self._apply_message_deleted,
            AttemptRecorded: self._apply_attempt_recorded, Pruned: self._apply_pruned,
            MoveTaskUpdated: self._apply_move_task_updated, QueueRestored: self._apply_queue_restored,
            MessageRestored: self._apply_message_restored, StorageRestored: self._apply_storage_restored,
            MessagesRestored: self._apply_messages_restored,
            MessageOutboxed: self._apply_message_outboxed, OutboxAccepted: self._apply_outbox_accepted,
            OutboxReturned: self._apply_outbox_returned, OutboxCleared: self._apply_outbox_cleared,
            MoveAdopted: self._apply_move_adopted, MovesForgotten: self._apply_moves_forgotten,
            OutboxRestored: self._apply_outbox_restored,
        }

    # --- the state machine interface ---------------------------------------------------------

    def execute(self, command: Any) -> tuple[Any, list[Mutation]]:
        handler = self._handlers.get(type(command))
        if handler is None:
            raise UNSUPPORTED_OPERATION(f"{type(command).__name__} is not an SQS action.")
        caller = getattr(command, "caller", None)
        # an authenticated request on a queue not its own account's: may it? (access.py)
        if caller is not None and getattr(command, "queue", _NO_QUEUE).account != caller:
            authorize(command, caller, self._by_key)
        out: list[Mutation] = []
        now = self._now = self.clock.now_ms()
        try:
            result = handler(command, now, out)
        except SqsError as err:
            if out:  # a handler broke its contract; keep replicas in step all the same
                log.error("%s raised %r after emitting %d mutations", type(command).__name__, err, len(out))
                err.applied = tuple(out)
            raise
        return result, out

    def apply(self, mutation: Mutation) -> None:
        applier = self._appliers.get(type(mutation))
        if applier is None:
            raise TypeError(f"not a storage mutation: {type(mutation).__name__}")
        self._now = self.clock.now_ms()
        applier(mutation)

    def apply_many(self, mutations: Iterable[Mutation]) -> None:
        """``apply`` each, in order, with one clock reading for them all: a replicated batch or
        a snapshot chunk of thousands of records is applied in one go, and ``now`` only picks
        a message's starting index, never logical state."""
        appliers = self._appliers
        self._now = now = self.clock.now_ms()
        queues = self._queues
        if type(mutations) is not list:
            mutations = list(mutations)
        i, n = 0, len(mutations)
        while i < n:
            m = mutations[i]
            t = type(m)
            if t is MessageAdded:
                # = _apply_message_added for a run of them (most of a journal's replay and of
                # a stream): the queue takes the whole run
                q = queues.get(m.qid)
                if q is not None:
                    i = q.add_run(mutations, i, now)
                    continue
            elif t is MessageChanged or t is MessageDeleted:
                # the same for receives, visibility changes and deletes: = _apply_message_changed
                # and _apply_message_deleted, a run at a time
                q = queues.get(m.qid)
                if q is not None:
                    i = q.change_run(mutations, i) if t is MessageChanged else q.remove_run(mutations, i)
                else:
                    i += 1
                continue
            else:
                applier = appliers.get(t)
                if applier is None:
                    raise TypeError(f"not a storage mutation: {type(m).__name__}")
                applier(m)
            i += 1

    def _emit(self, out: list, mutation: Mutation) -> None:
        self._appliers[type(mutation)](mutation)
        out.append(mutation)

    # --- queries for runtimes ----------------------------------------------------------------

    def key_of(self, qid: int) -> QueueKey | None:
        q = self._queues.get(qid)
        return q.key if q else None

    def next_wakeup_ms(self, key: QueueKey) -> int | None:
        q = self._by_key.get(key_names(key))
        return q.next_wakeup_ms() if q is not None else None

    def queue_stats(self) -> dict[QueueKey, tuple[int, int, int]]:
        now = self.clock.now_ms()
        return {q.key: q.stats(now) for q in self._queues.values()}

    def dead_letter_targets(self) -> dict[QueueKey, QueueKey]:
        """Each queue that has a redrive policy -> its dead-letter queue (which may not exist)."""
        out = {}
        for q in self._queues.values():
            target = parse_arn(q.config.redrive.dlq_arn) if q.config.redrive is not None else None
            if target is not None:
                out[q.key] = target
        return out

    def queue_count(self) -> int:
        return len(self._queues)

    def message_count(self) -> int:
        return sum(len(q.messages) for q in self._queues.values())

    # --- helpers -----------------------------------------------------------------------------

    def _queue(self, key: QueueKey) -> Queue:
        try:
            q = self._by_key.get((key.region, key.account, key.name))  # = key_names(key), inlined
        except AttributeError:  # not a QueueKey at all
            q = None
        if q is None:
            raise queue_does_not_exist()
        return q

    def _queue_by_arn(self, arn: str | None) -> Queue | None:
        """This group's queue with this ARN: what a move (on receive, by a task) may write to."""
        key = parse_arn(arn)
        return self._by_key.get(key_names(key)) if key else None

    def _find_by_arn(self, arn: str | None) -> Queue | None:
        """The queue with this ARN in this group or, read-only through the catalogue, another:
        what a check of a named queue reads. The catalogue is asked only on a local miss."""
        q = self._queue_by_arn(arn)
        if q is None and self.catalogue is not None and arn:
            q = self.catalogue.queue_by_arn(arn)
        return q

    def _every_queue(self) -> Iterable[Queue]:
        """This group's queues, then every other group's: the catalogue's are reached only when
        a caller iterates past the local ones."""
        if self.catalogue is None:
            return self._queues.values()
        return chain(self._queues.values(), self.catalogue.queues())

    # --- time ----------------------------------------------------------------------------------

    def _tick(self, c: Tick, now: int, out: list) -> TickResult:
        budget = c.max_effects
        for q in list(self._queues.values()):
            if budget <= 0:
                break
            expiry = q.expiry
            retention = q.config.retention_ms
            while expiry and budget > 0 and expiry[0][0] + retention <= now:
                _, serial, mid = heapq.heappop(expiry)
                msg = q.messages.get(mid)
                if msg is None or msg.rec.serial != serial:
                    continue
                self._emit(out, MessageDeleted(q.qid, mid))
                budget -= 1
            if (q.dedup and next(iter(q.dedup.values())).expires_ms <= now) or \
                    (q.attempts and next(iter(q.attempts.values())).expires_ms <= now):
                self._emit(out, Pruned(q.qid, now))
                budget -= 1
            for task in list(q.move_tasks):
                if task.status == TASK_STATUS_RUNNING and budget > 0:
                    budget -= self._advance_task(q, task, now, budget, out)
        for key, deleted in sorted(self._tombstones.items()):
            if now - deleted >= QUEUE_TOMBSTONE_MS:
                self._emit(out, TombstoneCleared(key, deleted))
        return TickResult(len(out))
