"""The in-memory state of one queue, and the indexes that keep every call independent of depth.

Logical state (what ``digest()`` covers and what mutations change) is the queue's configuration,
counters, dedup/attempt windows, move tasks and each message's fields. Everything else here is
an index derived from it and rebuilt on restore:

* ``pending``: a heap of (visible_ms, serial, id, version) for messages that are delayed or in
  flight. Entries are never removed in place; one whose version no longer matches the message is
  stale and skipped when it surfaces (lazy invalidation keeps every change O(log n)).
* standard queues: the visible messages as (serial, id, version), oldest first, in two parts
  whose merge is the order: ``fresh``, a deque of entries appended in increasing serial order
  (sends, which arrive in that order, go there at O(1) each way), and ``ready``, a heap of the
  others (messages visible again after a delay or a visibility timeout). A heap alone cost a
  sift through log2(depth) levels of tuple comparisons per receive.
* FIFO queues: ``groups`` (each a deque of message ids in send order) and ``ready_groups``, a
  heap of (head's visible_ms, head serial, group id) of groups whose head may be visible. A
  group is receivable when its head (oldest message) is visible; a receive takes its visible run
  from the head and stops at the first message still in flight. Groups are served in order of
  the time their head became visible, ties by serial. These are SQS's recorded answers
  (LocalStack's AWS-validated FIFO tests: test_fifo_group_visibility_extends_with_change_message_visibility,
  test_fifo_receive_message_with_zero_visibility_timeout, test_fifo_message_group_visibility_after_delete).
* ``expiry``: a heap of (sent_ms, serial, id), so retention is enforced oldest first.
* ``by_receipt``: each message that has a receipt handle, by that handle, so that a delete or a
  visibility change finds its message without decoding the handle (which cost more than the
  rest of a delete).

Logical state never depends on a clock during apply. Index placement may: a message that is
already visible by the applying storage's clock starts on the ready side, anything else waits in
``pending`` until ``promote(now)`` moves it, just before a read. Receive order does not depend
on placement (ready entries are ordered by serial), so a replica answers as its master would.
The indexes are compacted when stale entries outnumber live ones (looked at once every
``COMPACT_CHECK_EVERY`` changes), so a replica that only applies never grows without bound.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from functools import partial
from itertools import islice
from typing import Callable, Iterator, Mapping

import msgspec

from storage.commands import QueueKey
from storage.mutations import (AttemptEntry, DedupEntry, MessageAdded, MessageChanged, MessageDeleted, MessageRecord,
                               MoveTaskRecord)
from storage.queue_config import QueueConfig

READY, PENDING = 0, 1
MAX_TASK_HISTORY = 10
# Changes and removals between two looks at whether the indexes need compacting: the look costs
# several times a change, and the indexes grow by at most one entry per change meanwhile.
COMPACT_CHECK_EVERY = 256
_heappush = heapq.heappush


class Message(msgspec.Struct, gc=False, eq=False):
    """A stored message: its record, and its mutable part as of now. Build it with
    ``message(rec)``. A msgspec Struct rather than a slotted class: built in C (a journal's
    replay and every send make one; 450 ns by ``__init__``, 150 this way) and, holding only
    a record, strings and ints, which no cycle can run through, not tracked by the cycle
    collector (16 bytes less per message, and one object less for each collection to walk).
    Compared and hashed by identity (``eq=False``), as a plain object is."""

    rec: MessageRecord
    version: int
    receipt: str | None
    visible_ms: int
    receive_count: int
    first_receive_ms: int
    last_receive_ms: int
    where: int = PENDING

    def record(self) -> MessageRecord:
        r = self.rec
        if r.version == self.version:
            return r
        return MessageRecord(
            r.message_id, r.serial, r.body, r.attributes, r.system_attributes, r.md5_of_body,
            r.md5_of_attributes, r.md5_of_system_attributes, r.sent_ms, r.sender_id, r.group_id,
            r.deduplication_id, r.sequence_number, r.dlq_source_arn, self.version, self.receipt,
            self.visible_ms, self.receive_count, self.first_receive_ms, self.last_receive_ms)


def message(rec: MessageRecord) -> Message:
    return Message(rec, rec.version, rec.receipt, rec.visible_ms, rec.receive_count, rec.first_receive_ms,
                   rec.last_receive_ms)


class Group:
    __slots__ = ("ids",)

    def __init__(self) -> None:
        self.ids: deque[str] = deque()


class Queue:
    def __init__(self, qid: int, key: QueueKey, created_ms: int, attributes: Mapping[str, str],
                 tags: Mapping[str, str]):
        self.qid = qid
        self.key = key
        self.arn = key.arn
        self.created_ms = created_ms
        self.version = 0
        self.modified_ms = created_ms
        self.attributes: dict[str, str] = dict(attributes)
        self.tags: dict[str, str] = dict(tags)
        self.config = QueueConfig.parse(self.attributes)
        self.fifo = self.config.fifo
        # Deduplication keeps the scope the queue was created with: AWS's recorded answers show
        # a later SetQueueAttributes changing DeduplicationScope (either way) leave it as it was
        # (LocalStack's AWS-validated test_fifo_change_to_high_throughput_after_creation and
        # test_fifo_change_to_regular_throughput_after_creation).
        self.dedup_by_group = self.attributes.get("DeduplicationScope") == "messageGroup"
        self.next_serial = 0
        self.next_sequence = 1
        self.purged_below = 0
        self.last_purge_ms = -1
        self.pruned_before = 0
        self.dedup: OrderedDict[str, DedupEntry] = OrderedDict()
        self.attempts: OrderedDict[str, AttemptEntry] = OrderedDict()
        self.move_tasks: list[MoveTaskRecord] = []   # oldest first
        self.messages: dict[str, Message] = {}
        # indexes
        self.pending: list[tuple[int, int, str, int]] = []
        self.fresh: deque[tuple[int, str, int]] = deque()
        self.ready: list[tuple[int, str, int]] = []
        self.expiry: list[tuple[int, int, str]] = []
        self.groups: dict[str, Group] = {}
        self.ready_groups: list[tuple[int, int, str]] = []
        self.by_receipt: dict[str, Message] = {}
        self.n_ready = 0
        self.n_inflight = 0
        self.n_delayed = 0
        self.until_compact_check = COMPACT_CHECK_EVERY

    # --- configuration -------------------------------------------------------------------

    def set_config(self, version: int, modified_ms: int, attributes: Mapping[str, str],
                   tags: Mapping[str, str]) -> None:
        self.version = version
        self.modified_ms = modified_ms
        self.attributes = dict(attributes)
        self.tags = dict(tags)
        self.config = QueueConfig.parse(self.attributes)

    # --- messages --------------------------------------------------------------------------

    def add(self, rec: MessageRecord, dedup: DedupEntry | None, now: int) -> None:
        """Apply a MessageAdded whose serial is new here: the message, and what its send decided
        for the queue (the next FIFO sequence number, the dedup entry)."""
        if not self.fifo and rec.receipt is None and rec.visible_ms <= now:
            # ``insert`` inlined for what nearly every add is (a send to a standard queue,
            # visible at once; a journal replays a million of them): the same steps, without
            # the calls and the branches that cannot apply
            mid = rec.message_id
            serial = rec.serial
            msg = message(rec)
            msg.where = READY
            self.messages[mid] = msg
            if serial >= self.next_serial:
                self.next_serial = serial + 1
            _heappush(self.expiry, (rec.sent_ms, serial, mid))
            self.n_ready += 1
            fresh = self.fresh
            if not fresh or fresh[-1][0] < serial:
                fresh.append((serial, mid, msg.version))
            else:
                _heappush(self.ready, (serial, mid, msg.version))   # = _make_ready, standard queue
        else:
            self.insert(message(rec), now)
        seq = rec.sequence_number
        if seq is not None and seq >= self.next_sequence:
            self.next_sequence = seq + 1
        if dedup is not None and dedup.expires_ms > self.pruned_before:
            self.dedup.pop(dedup.key, None)
            self.dedup[dedup.key] = dedup

    def add_run(self, mutations: list, i: int, now: int) -> int:
        """Apply the MessageAdded records of this queue from ``mutations[i]`` on, as ``add`` each
        whose serial is new here; returns the index of the first record that is something
        else. A journal's replay and a replica's stream are runs of sends to one queue: one call
        per run, the queue's state in locals, and the common send (standard queue, visible at
        once, after the newest) stored right here."""
        n = len(mutations)
        qid = self.qid
        fast = not self.fifo
        messages, expiry, fresh = self.messages, self.expiry, self.fresh
        while i < n:
            m = mutations[i]
            if type(m) is not MessageAdded or m.qid != qid:
                break
            i += 1
            rec = m.message
            serial = rec.serial
            if serial < self.next_serial:
                continue
            if (fast and rec.receipt is None and rec.visible_ms <= now and m.dedup is None
                    and rec.sequence_number is None and (not fresh or fresh[-1][0] < serial)):
                mid = rec.message_id
                messages[mid] = Message(rec, rec.version, None, rec.visible_ms, rec.receive_count,
                                        rec.first_receive_ms, rec.last_receive_ms, READY)
                self.next_serial = serial + 1
                _heappush(expiry, (rec.sent_ms, serial, mid))
                self.n_ready += 1
                fresh.append((serial, mid, rec.version))
            else:
                self.add(rec, m.dedup, now)
        return i

    def insert(self, msg: Message, now: int) -> None:
        """Add a message; ``now`` only decides which index it starts in (never logical state)."""
        rec = msg.rec
        mid = rec.message_id
        serial = rec.serial
        self.messages[mid] = msg
        if msg.receipt is not None:
            self.by_receipt[msg.receipt] = msg
        if serial >= self.next_serial:
            self.next_serial = serial + 1
        fifo = self.fifo
        if fifo:
            gid = rec.group_id or ""
            group = self.groups.get(gid)
            if group is None:
                group = self.groups[gid] = Group()
            ids = group.ids
            if not ids or self.messages.get(ids[-1]) is None or self.messages[ids[-1]].rec.serial < serial:
                ids.append(mid)
            else:
                self._insert_in_order(group, mid)
        _heappush(self.expiry, (rec.sent_ms, serial, mid))
        if msg.visible_ms <= now:
            # Already visible: straight to the ready side, so that a burst of sends is not
            # promoted one by one (O(n log n) in a single receive) later.
            msg.where = READY
            self.n_ready += 1
            fresh = self.fresh
            if not fifo and (not fresh or fresh[-1][0] < serial):
                fresh.append((serial, mid, msg.version))  # = _make_ready, for a send
            else:
                self._make_ready(msg)
            return
        msg.where = PENDING
        if msg.receive_count > 0:
            self.n_inflight += 1
        else:
            self.n_delayed += 1
        _heappush(self.pending, (msg.visible_ms, serial, mid, msg.version))

    def _insert_in_order(self, group: Group, mid: str) -> None:
        """Restores may arrive out of serial order; keep the group in send order. (Out of
        ``insert``: its lambda would make ``self`` a cell there, made and freed per insert.)"""
        messages = self.messages
        ordered = sorted([*group.ids, mid], key=lambda i: messages[i].rec.serial if i in messages else -1)
        group.ids = deque(i for i in ordered if i in messages)

    def change(self, msg: Message, version: int, receipt: str | None, visible_ms: int,
               receive_count: int, first_receive_ms: int, last_receive_ms: int) -> None:
        self._leave(msg)
        if receipt != msg.receipt:
            if msg.receipt is not None:
                del self.by_receipt[msg.receipt]
            if receipt is not None:
                self.by_receipt[receipt] = msg
            msg.receipt = receipt
        msg.version = version
        msg.visible_ms = visible_ms
        msg.receive_count = receive_count
        msg.first_receive_ms = first_receive_ms
        msg.last_receive_ms = last_receive_ms
        msg.where = PENDING
        if receive_count > 0:
            self.n_inflight += 1
        else:
            self.n_delayed += 1
        heapq.heappush(self.pending, (visible_ms, msg.rec.serial, msg.rec.message_id, version))
        self.until_compact_check -= 1
        if self.until_compact_check <= 0:
            self._maybe_compact()

    def change_run(self, mutations: list, i: int) -> int:
        """Apply the MessageChanged records of this queue from ``mutations[i]`` on, as ``change``
        each that is newer than the message held here; returns the index of the first record
        that is something else. A replica's stream under receives is runs of them (ten per
        receive of ten): one call per run, ``change`` inlined."""
        n = len(mutations)
        qid = self.qid
        messages, by_receipt, pending = self.messages, self.by_receipt, self.pending
        while i < n:
            m = mutations[i]
            if type(m) is not MessageChanged or m.qid != qid:
                break
            i += 1
            msg = messages.get(m.message_id)
            version = m.version
            if msg is None or version <= msg.version:
                continue
            if msg.where == READY:          # = _leave
                self.n_ready -= 1
            elif msg.receive_count > 0:
                self.n_inflight -= 1
            else:
                self.n_delayed -= 1
            receipt = m.receipt
            old = msg.receipt
            if receipt != old:
                if old is not None:
                    del by_receipt[old]
                if receipt is not None:
                    by_receipt[receipt] = msg
                msg.receipt = receipt
            msg.version = version
            msg.visible_ms = visible_ms = m.visible_ms
            msg.receive_count = count = m.receive_count
            msg.first_receive_ms = m.first_receive_ms
            msg.last_receive_ms = m.last_receive_ms
            msg.where = PENDING
            if count > 0:
                self.n_inflight += 1
            else:
                self.n_delayed += 1
            rec = msg.rec
            _heappush(pending, (visible_ms, rec.serial, rec.message_id, version))
            self.until_compact_check -= 1
            if self.until_compact_check <= 0:
                self._maybe_compact()
                pending = self.pending      # compaction may have rebuilt it
        return i

    def remove_run(self, mutations: list, i: int) -> int:
        """Apply the MessageDeleted records of this queue from ``mutations[i]`` on, as ``remove``
        each whose message is held here; returns the index of the first record that is something
        else (as ``change_run``: a replica's stream under deletes)."""
        n = len(mutations)
        qid = self.qid
        fifo = self.fifo
        messages, by_receipt = self.messages, self.by_receipt
        while i < n:
            m = mutations[i]
            if type(m) is not MessageDeleted or m.qid != qid:
                break
            i += 1
            mid = m.message_id
            msg = messages.get(mid)
            if msg is None:
                continue
            if fifo:
                self.remove(msg)
                continue
            if msg.where == READY:          # = remove, for a standard queue
                self.n_ready -= 1
            elif msg.receive_count > 0:
                self.n_inflight -= 1
            else:
                self.n_delayed -= 1
            del messages[mid]
            if msg.receipt is not None:
                del by_receipt[msg.receipt]
            self.until_compact_check -= 1
            if self.until_compact_check <= 0:
                self._maybe_compact()
        return i

    def remove(self, msg: Message) -> None:
        self._leave(msg)
        rec = msg.rec
        del self.messages[rec.message_id]
        if msg.receipt is not None:
            del self.by_receipt[msg.receipt]
        if self.fifo:
            gid = rec.group_id or ""
            group = self.groups[gid]
            ids = group.ids
            was_head = ids[0] == rec.message_id
            messages = self.messages
            while ids and ids[0] not in messages:
                ids.popleft()
            if not ids:
                del self.groups[gid]
            elif was_head:
                self._offer_group(gid, group)
        self.until_compact_check -= 1
        if self.until_compact_check <= 0:
            self._maybe_compact()

    def _leave(self, msg: Message) -> None:
        """Take a message out of the counters."""
        if msg.where == READY:
            self.n_ready -= 1
        elif msg.receive_count > 0:
            self.n_inflight -= 1
        else:
            self.n_delayed -= 1

    def clear_messages(self, below_serial: int) -> None:
        if below_serial >= self.next_serial:
            self.messages.clear()
            self.pending.clear()
            self.fresh.clear()
            self.ready.clear()
            self.expiry.clear()
            self.groups.clear()
            self.ready_groups.clear()
            self.by_receipt.clear()
            self.n_ready = self.n_inflight = self.n_delayed = 0
            return
        for msg in [m for m in self.messages.values() if m.rec.serial < below_serial]:
            self.remove(msg)

    # --- time ------------------------------------------------------------------------------

    def promote(self, now: int) -> None:
        """Move every pending message whose time has come to the ready side."""
        pending = self.pending
        messages = self.messages
        while pending and pending[0][0] <= now:
            _, serial, mid, version = heapq.heappop(pending)
            msg = messages.get(mid)
            if msg is None or msg.version != version or msg.where != PENDING:
                continue
            self._leave(msg)
            msg.where = READY
            self.n_ready += 1
            self._make_ready(msg)

    def _make_ready(self, msg: Message) -> None:
        if self.fifo:
            gid = msg.rec.group_id or ""
            group = self.groups[gid]
            if group.ids[0] == msg.rec.message_id:  # only a visible head makes a group receivable
                self._offer_group(gid, group)
        else:
            rec = msg.rec
            fresh = self.fresh
            if not fresh or fresh[-1][0] < rec.serial:
                fresh.append((rec.serial, rec.message_id, msg.version))
            else:
                heapq.heappush(self.ready, (rec.serial, rec.message_id, msg.version))

    def requeue(self, msg: Message) -> None:
        """Put back a message that ``take_ready`` handed out but the caller did not use."""
        if msg.where == READY:
            self._make_ready(msg)

    def next_wakeup_ms(self) -> int | None:
        """When the earliest pending message becomes visible (may be a stale entry: callers
        only use it to decide when to look again)."""
        return self.pending[0][0] if self.pending else None

    def _offer_group(self, gid: str, group: Group) -> None:
        head = self.messages[group.ids[0]]
        if head.where == READY:
            heapq.heappush(self.ready_groups, (head.visible_ms, head.rec.serial, gid))

    # --- reads -----------------------------------------------------------------------------

    def take_ready(self) -> Callable[[], Message | None]:
        """A function that returns the next visible message in the order a receive hands them
        out, or None when there is none (promote first).

        Standard: oldest first. FIFO: groups in order of the time their head became visible,
        each group's visible run from its head, in order; a group whose head is in flight (or
        delayed) is skipped. The
        caller must change or remove each message it gets before asking for the next one.
        A function rather than a generator: a receive of one message from a standard queue paid
        more for creating, resuming and closing a generator than for the work it did.
        """
        if not self.fifo:
            return self._next_ready
        return partial(next, self._fifo_ready(), None)

    def _next_ready(self) -> Message | None:
        fresh = self.fresh
        ready = self.ready
        messages = self.messages
        while True:
            # The smaller head of the two: equal serials are two versions of one message, of
            # which at most one is current, so either may go first.
            if fresh and (not ready or fresh[0][0] < ready[0][0]):
                serial, mid, version = fresh.popleft()
            elif ready:
                serial, mid, version = heapq.heappop(ready)
            else:
                return None
            msg = messages.get(mid)
            if msg is not None and msg.version == version and msg.where == READY:
                return msg

    def _fifo_ready(self) -> Iterator[Message]:
        messages = self.messages
        ready_groups = self.ready_groups
        while ready_groups:
            visible_ms, serial, gid = heapq.heappop(ready_groups)
            group = self.groups.get(gid)
            if group is None:
                continue
            ids = group.ids
            while ids and ids[0] not in messages:
                ids.popleft()
            if not ids:
                continue
            head = messages[ids[0]]
            # A stale offer: the group's head changed, left the ready side, or became visible
            # again at another time (which made a fresh offer of its own).
            if head.rec.serial != serial or head.where != READY or head.visible_ms != visible_ms:
                continue
            # Walk the group's visible run in order. Not over a copy of the group: that cost
            # O(group size) per receive, i.e. O(depth) for a queue with one group. The consumer
            # changes (receives) or removes each message we yield; a removal may pop ids off
            # the group's head (and nothing else happens to the deque during a receive), which
            # ends the deque's iterator: then walk on from the same position, shifted back by
            # what was popped.
            i = 0  # the position of the next id ``walk`` gives
            walk = iter(ids)
            while True:
                mid = next(walk, None)
                if mid is None:
                    break
                msg = messages.get(mid)
                if msg is None:  # deleted out of order, still in the deque: skip
                    i += 1
                    continue
                if msg.where != READY:
                    break
                before = len(ids)
                yield msg
                if gid not in self.groups:
                    break
                popped = before - len(ids)
                # A removal pops the removed head and any ids deleted out of order right behind
                # it, possibly more than the walk had passed: then it goes on from the new head.
                i = max(0, i + 1 - popped)
                if popped:
                    walk = islice(ids, i, None)

    def stats(self, now: int) -> tuple[int, int, int]:
        self.promote(now)
        return self.n_ready, self.n_inflight, self.n_delayed

    # --- maintenance -----------------------------------------------------------------------

    def _maybe_compact(self) -> None:
        self.until_compact_check = COMPACT_CHECK_EVERY
        limit = 2 * len(self.messages) + 1024
        if (len(self.pending) > limit or len(self.ready) + len(self.fresh) > limit or len(self.expiry) > limit
                or len(self.ready_groups) > 2 * len(self.groups) + 1024):
            self._compact(limit)

    def _compact(self, limit: int) -> None:
        if len(self.pending) > limit:
            self.pending = [(m.visible_ms, m.rec.serial, m.rec.message_id, m.version)
                            for m in self.messages.values() if m.where == PENDING]
            heapq.heapify(self.pending)
        if len(self.ready) + len(self.fresh) > limit:
            # Sorted, the entries are a valid deque of fresh ones, and the heap starts empty.
            self.fresh = deque(sorted((m.rec.serial, m.rec.message_id, m.version)
                                      for m in self.messages.values() if m.where == READY))
            self.ready = []
        if len(self.expiry) > limit:
            self.expiry = [(m.rec.sent_ms, m.rec.serial, m.rec.message_id) for m in self.messages.values()]
            heapq.heapify(self.expiry)
        if len(self.ready_groups) > 2 * len(self.groups) + 1024:
            self.ready_groups = [(self.messages[g.ids[0]].visible_ms, self.messages[g.ids[0]].rec.serial, gid)
                                 for gid, g in self.groups.items()
                                 if g.ids and g.ids[0] in self.messages and self.messages[g.ids[0]].where == READY]
            heapq.heapify(self.ready_groups)

    def add_task(self, task: MoveTaskRecord) -> None:
        for i, t in enumerate(self.move_tasks):
            if t.task_id == task.task_id:
                if task.version > t.version:
                    self.move_tasks[i] = task
                return
        self.move_tasks.append(task)
        self.move_tasks.sort(key=lambda t: (t.started_ms, t.task_id))
        del self.move_tasks[:-MAX_TASK_HISTORY]
