"""Post-execution effects: what the master decided, in a form any replica can apply.

Every value that is random or depends on time (ids, receipt handles, timestamps, sequence
numbers, versions) is decided once by ``Storage.execute`` and carried here; ``Storage.apply``
only copies. Applying is idempotent, exactly: each queue incarnation has an id (``qid``) that is
never reused, each message a per-queue ``serial`` handed out in increasing order, and every
later change to an entity carries that entity's next ``version``. A mutation whose version or
serial the replica has already passed is a no-op, and so is one for an entity it never had.

The snapshot is written as a stream of these records too (``StorageRestored``,
``QueueRestored`` and ``MessagesRestored``), so one codec carries both the replication stream and state transfer.
"""

from __future__ import annotations

from typing import Mapping

from storage.commands import MessageAttributeValue, QueueKey
from storage.records import Record


class _NoAttributes(dict):
    """Read-only and empty: see ``NO_ATTRIBUTES``."""

    __slots__ = ()

    def _read_only(self, *args: object, **kwargs: object) -> None:
        raise TypeError("NO_ATTRIBUTES is shared by every message without attributes: never change it")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        return (dict, ())   # a copy is a plain empty dict


# The attributes (or system attributes) of every message that has none, shared: two fresh empty
# dicts per message were 128 of the ~900 bytes a stored message cost. A dict, so that it renders,
# encodes and compares as one; read-only, so that sharing it can never leak a change.
NO_ATTRIBUTES: Mapping[str, MessageAttributeValue] = _NoAttributes()


class MessageRecord(Record, array_like=True, tag=16, forbid_unknown_fields=True):
    message_id: str
    serial: int
    body: str
    attributes: Mapping[str, MessageAttributeValue]
    system_attributes: Mapping[str, MessageAttributeValue]
    md5_of_body: str
    md5_of_attributes: str | None
    md5_of_system_attributes: str | None
    sent_ms: int
    sender_id: str
    group_id: str | None
    deduplication_id: str | None
    sequence_number: int | None
    dlq_source_arn: str | None
    # the mutable part, as of this record
    version: int
    receipt: str | None
    visible_ms: int
    receive_count: int
    first_receive_ms: int
    last_receive_ms: int


class MoveTaskRecord(Record):
    task_id: str
    version: int
    status: str
    source_arn: str
    destination_arn: str | None
    max_per_second: int | None
    moved: int
    to_move: int
    started_ms: int
    failure_reason: str | None


class DedupEntry(Record, array_like=True, tag=18, forbid_unknown_fields=True):
    key: str               # deduplication id, prefixed by the group under messageGroup scope
    message_id: str
    sequence_number: int | None
    expires_ms: int


class AttemptEntry(Record):
    """A FIFO ReceiveRequestAttemptId and what it handed out, for retried receives."""

    attempt_id: str
    expires_ms: int
    receipts: tuple[tuple[str, str], ...]   # (message_id, receipt handle)


# --- queue lifecycle ----------------------------------------------------------------------------

class QueueCreated(Record):
    qid: int
    key: QueueKey
    created_ms: int
    attributes: Mapping[str, str]
    tags: Mapping[str, str]


class QueueUpdated(Record):
    """Attributes or tags changed: carries the whole new configuration, applied by version."""

    qid: int
    version: int
    modified_ms: int
    attributes: Mapping[str, str]
    tags: Mapping[str, str]


class QueueDeleted(Record):
    """Carries the key too: the tombstone must be recorded even by a replica whose snapshot
    never saw the queue (it was created and deleted while the snapshot was being taken)."""

    qid: int
    key: QueueKey
    deleted_ms: int


class TombstoneCleared(Record):
    """The 60 s in which a deleted queue's name cannot be reused are over."""

    key: QueueKey
    deleted_ms: int


class QueuePurged(Record):
    qid: int
    below_serial: int   # every message with a smaller serial is gone
    purged_ms: int


# --- messages --------------------------------------------------------------------------------

class MessageAdded(Record, array_like=True, tag=25, forbid_unknown_fields=True):
    """A send (with its dedup entry on FIFO queues) or a move into this queue.

    Applies only when ``message.serial`` is at or past the queue's next serial: a smaller one was
    added before, and may have been deleted since, so it must not come back."""

    qid: int
    message: MessageRecord
    dedup: DedupEntry | None = None


class MessageChanged(Record, array_like=True, tag=26, forbid_unknown_fields=True):
    """A receive or a visibility change: the message's new mutable state."""

    qid: int
    message_id: str
    version: int
    receipt: str | None
    visible_ms: int
    receive_count: int
    first_receive_ms: int
    last_receive_ms: int


class MessageDeleted(Record, array_like=True, tag=27, forbid_unknown_fields=True):
    qid: int
    message_id: str


class AttemptRecorded(Record):
    qid: int
    attempt: AttemptEntry


class Pruned(Record):
    """Forget dedup ids and receive attempts that expired at or before ``before_ms``."""

    qid: int
    before_ms: int


class MoveTaskUpdated(Record):
    qid: int               # the source queue, which owns its move tasks
    task: MoveTaskRecord


# --- moves between replication groups (storage/outbox.py) ------------------------------------
#
# The outbox (source group) and ``moves_in`` (destination group) take their entries in the order
# of a counter decided on the master (``seq``), and an entry whose ``seq`` is below the counter
# is one applied before, maybe since cleared: a replayed MessageOutboxed or MoveAdopted never
# brings a finished move back, as a replayed MessageAdded never brings back a deleted message.

class OutboxEntry(Record):
    """A message that left queue ``qid`` for ``dst_arn`` in another group."""

    move_id: str
    seq: int
    qid: int
    dst_arn: str
    message: MessageRecord       # as it left its queue: what a return restores
    dlq_source_arn: str | None   # the move's: the source queue's ARN for a dead-letter move
    task_id: str | None          # the move task that moved it, if one did
    accepted: bool = False       # the destination holds it (PENDING until then)


class MessageOutboxed(Record):
    """The message leaves its queue for the outbox (instead of a MessageDeleted + MessageAdded
    within one group). Removes the message only at the serial and version it left with: one
    returned has a later version, one moved back in later a later serial."""

    qid: int
    move_id: str
    dst_arn: str
    message: MessageRecord
    dlq_source_arn: str | None
    task_id: str | None
    seq: int


class OutboxAccepted(Record):
    move_ids: tuple[str, ...]


class OutboxReturned(Record):
    """The move's entry leaves the outbox and ``message`` goes back into queue ``qid``, unless
    the entry is gone already (applied before), the queue is, or a purge passed the message."""

    move_id: str
    qid: int
    message: MessageRecord


class OutboxCleared(Record):
    move_ids: tuple[str, ...]


class MoveAdopted(Record):
    """Destination group: ``move_id`` was adopted (its MessageAdded precedes this)."""

    move_id: str
    seq: int


class MovesForgotten(Record):
    move_ids: tuple[str, ...]


# --- snapshot-only records -------------------------------------------------------------------

class QueueRestored(Record):
    """A queue's whole state except its messages (those follow as MessageAdded records)."""

    qid: int
    key: QueueKey
    created_ms: int
    version: int
    modified_ms: int
    attributes: Mapping[str, str]
    tags: Mapping[str, str]
    next_serial: int
    next_sequence: int
    purged_below: int
    last_purge_ms: int
    dedup: tuple[DedupEntry, ...]
    attempts: tuple[AttemptEntry, ...]
    move_tasks: tuple[MoveTaskRecord, ...]
    pruned_before: int = 0     # the latest Pruned watermark: older window entries never come back
    # The deduplication scope the queue was created with (see Queue.dedup_by_group); None from
    # a sender that predates it, which leaves the scope its attributes give.
    dedup_by_group: bool | None = None


class MessageRestored(Record):
    """A message as a snapshot saw it: restored whatever its serial, unless already present."""

    qid: int
    message: MessageRecord


class MessagesRestored(Record):
    """Messages of one queue as a snapshot saw them, each restored like a ``MessageRestored``.

    A snapshot sends its messages in these groups rather than one record each: a state transfer
    of a million messages spent a sixth of its time on both ends wrapping, tagging, dispatching
    and unwrapping one record per message."""

    qid: int
    messages: tuple[MessageRecord, ...]


class StorageRestored(Record):
    """Storage-wide counters and the tombstones of recently deleted queues."""

    next_qid: int
    tombstones: tuple[tuple[QueueKey, int], ...]


class OutboxRestored(Record):
    """The outbox and ``moves_in`` with their counters, read at one instant; a snapshot has it
    only once either counter has moved (a storage of a single group never has one)."""

    outbox_next: int
    outbox: tuple[OutboxEntry, ...]
    moves_in_next: int
    moves_in: tuple[tuple[str, int], ...]   # (move_id, seq)


Mutation = (
    QueueCreated | QueueUpdated | QueueDeleted | TombstoneCleared | QueuePurged | MessageAdded
    | MessageChanged | MessageDeleted | AttemptRecorded | Pruned | MoveTaskUpdated
    | QueueRestored | MessageRestored | StorageRestored | MessagesRestored
    | MessageOutboxed | OutboxAccepted | OutboxReturned | OutboxCleared | MoveAdopted | MovesForgotten
    | OutboxRestored
)
