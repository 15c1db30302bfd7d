"""Client operations as plain typed values: one record (storage/records.py) per SQS action.

The endpoint parses a request (JSON or Query) into one of these, the storage executes it. Field
names are the SQS parameter names in snake_case; a parameter the client left out is ``None`` so
that validation can tell "absent" from "empty", as SQS does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from msgspec import field

from storage.records import Record

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "000000000000"


@dataclass(frozen=True, slots=True, order=True)
class QueueKey:
    """Where a queue lives: each (region, account) pair is a separate namespace."""

    region: str
    account: str
    name: str

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}:{self.name}"

    @property
    def is_fifo(self) -> bool:
        return self.name.endswith(".fifo")


# ``caller`` (on every command that names a queue): the account of the request's verified
# credentials, whose access to another account's queue storage/access.py checks; None when the
# endpoint authenticates nobody (any account's queues are reachable).


class Namespace(Record):
    region: str = DEFAULT_REGION
    account: str = DEFAULT_ACCOUNT

    def key(self, name: str) -> QueueKey:
        return QueueKey(self.region, self.account, name)


class MessageAttributeValue(Record, array_like=True, tag=3, forbid_unknown_fields=True):
    data_type: str
    string_value: str | None = None
    binary_value: bytes | None = None
    # SQS reserves the list forms and rejects them; they are kept so that validation can say so.
    string_list_values: tuple[str, ...] | None = None
    binary_list_values: tuple[bytes, ...] | None = None


Attributes = Mapping[str, str]
MessageAttributes = Mapping[str, MessageAttributeValue]


# --- queues -------------------------------------------------------------------------------

class CreateQueue(Record):
    ns: Namespace
    name: str | None
    attributes: Attributes = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


class DeleteQueue(Record):
    queue: QueueKey
    caller: str | None = None


class GetQueueUrl(Record):
    ns: Namespace
    name: str | None
    owner_account: str | None = None
    caller: str | None = None


class ListQueues(Record):
    ns: Namespace
    prefix: str | None = None
    max_results: int | None = None
    next_token: str | None = None


class GetQueueAttributes(Record):
    queue: QueueKey
    attribute_names: tuple[str, ...] | None = None
    caller: str | None = None


class SetQueueAttributes(Record):
    queue: QueueKey
    attributes: Attributes | None
    caller: str | None = None


class PurgeQueue(Record):
    queue: QueueKey
    caller: str | None = None


class TagQueue(Record):
    queue: QueueKey
    tags: Mapping[str, str] | None
    caller: str | None = None


class UntagQueue(Record):
    queue: QueueKey
    tag_keys: tuple[str, ...] | None
    caller: str | None = None


class ListQueueTags(Record):
    queue: QueueKey
    caller: str | None = None


class AddPermission(Record):
    queue: QueueKey
    label: str | None
    account_ids: tuple[str, ...] | None
    actions: tuple[str, ...] | None
    caller: str | None = None


class RemovePermission(Record):
    queue: QueueKey
    label: str | None
    caller: str | None = None


class ListDeadLetterSourceQueues(Record):
    queue: QueueKey
    max_results: int | None = None
    next_token: str | None = None
    caller: str | None = None


# --- messages -----------------------------------------------------------------------------

class SendMessage(Record):
    queue: QueueKey
    body: str | None
    delay_seconds: int | None = None
    message_attributes: MessageAttributes | None = None
    system_attributes: MessageAttributes | None = None
    deduplication_id: str | None = None
    group_id: str | None = None
    sender_id: str | None = None  # the caller's identity, reported as SenderId
    caller: str | None = None


class SendMessageBatchEntry(Record):
    id: str | None
    body: str | None
    delay_seconds: int | None = None
    message_attributes: MessageAttributes | None = None
    system_attributes: MessageAttributes | None = None
    deduplication_id: str | None = None
    group_id: str | None = None


class SendMessageBatch(Record):
    queue: QueueKey
    entries: tuple[SendMessageBatchEntry, ...]
    sender_id: str | None = None
    caller: str | None = None


class ReceiveMessage(Record):
    queue: QueueKey
    max_number_of_messages: int | None = None
    visibility_timeout: int | None = None
    wait_time_seconds: int | None = None  # validated here; the waiting itself is the endpoint's job
    attribute_names: tuple[str, ...] = ()           # legacy AttributeNames
    system_attribute_names: tuple[str, ...] = ()    # MessageSystemAttributeNames
    message_attribute_names: tuple[str, ...] = ()
    receive_request_attempt_id: str | None = None
    caller: str | None = None


class DeleteMessage(Record):
    queue: QueueKey
    receipt_handle: str | None
    caller: str | None = None


class DeleteMessageBatchEntry(Record):
    id: str | None
    receipt_handle: str | None


class DeleteMessageBatch(Record):
    queue: QueueKey
    entries: tuple[DeleteMessageBatchEntry, ...]
    caller: str | None = None


class ChangeMessageVisibility(Record):
    queue: QueueKey
    receipt_handle: str | None
    visibility_timeout: int | None
    caller: str | None = None


class ChangeMessageVisibilityBatchEntry(Record):
    id: str | None
    receipt_handle: str | None
    visibility_timeout: int | None


class ChangeMessageVisibilityBatch(Record):
    queue: QueueKey
    entries: tuple[ChangeMessageVisibilityBatchEntry, ...]
    caller: str | None = None


# --- message move tasks (DLQ redrive) -------------------------------------------------------

class StartMessageMoveTask(Record):
    ns: Namespace
    source_arn: str | None
    destination_arn: str | None = None
    max_messages_per_second: int | None = None
    caller: str | None = None


class CancelMessageMoveTask(Record):
    ns: Namespace
    task_handle: str | None
    caller: str | None = None


class ListMessageMoveTasks(Record):
    ns: Namespace
    source_arn: str | None
    max_results: int | None = None
    caller: str | None = None


# --- time ---------------------------------------------------------------------------------

class Tick(Record):
    """Let time act: expire messages past retention, forget old dedup ids and deleted-queue
    tombstones, advance message move tasks. The master issues it periodically; because its
    effects are mutations, replicas never need a clock of their own."""

    max_effects: int = 10_000


# --- internal commands: moves between replication groups (storage/outbox.py) -----------------
#
# Never built from an SQS request: the move driver of a group's master issues them. A message
# moved to a queue of another group leaves its source into the source group's outbox, is adopted
# by the destination group, and is forgotten by both once the source knows it was adopted.

class MovedMessage(Record):
    """A message on its way to a queue of another group: what the destination needs to adopt it
    as a move within one group would have added it (see ``Redrive._arrival``)."""

    message_id: str
    body: str
    attributes: MessageAttributes
    system_attributes: MessageAttributes
    md5_of_body: str
    md5_of_attributes: str | None
    md5_of_system_attributes: str | None
    sent_ms: int
    sender_id: str
    group_id: str | None
    deduplication_id: str | None
    dlq_source_arn: str | None    # the source queue's ARN for a dead-letter move; None for a task's redrive
    receive_count: int            # as in the source queue
    first_receive_ms: int
    source_fifo: bool             # a destination of the other type refuses it


class MoveItem(Record):
    move_id: str
    dst_arn: str
    message: MovedMessage


class AdoptMoved(Record):
    """Destination group: add each message to its queue, once per ``move_id`` (an id adopted
    before is answered accepted again and changes nothing)."""

    items: tuple[MoveItem, ...]


class AcceptOutbox(Record):
    """Source group: the destination holds these moves (PENDING -> ACCEPTED)."""

    move_ids: tuple[str, ...]


class ReturnOutbox(Record):
    """Source group: the destination refused this move (``reason``: one of storage.outbox's
    REFUSED_*); the message goes back to its source queue."""

    move_id: str
    reason: str


class ClearOutbox(Record):
    """Source group: the destination forgot these accepted moves; drop them."""

    move_ids: tuple[str, ...]


class ForgetMove(Record):
    """Destination group: the source will never offer these moves again."""

    move_ids: tuple[str, ...]


Command = (
    CreateQueue | DeleteQueue | GetQueueUrl | ListQueues | GetQueueAttributes | SetQueueAttributes
    | PurgeQueue | TagQueue | UntagQueue | ListQueueTags | AddPermission | RemovePermission
    | ListDeadLetterSourceQueues | SendMessage | SendMessageBatch | ReceiveMessage | DeleteMessage
    | DeleteMessageBatch | ChangeMessageVisibility | ChangeMessageVisibilityBatch
    | StartMessageMoveTask | CancelMessageMoveTask | ListMessageMoveTasks | Tick
)

# Commands that never change state; a replica may answer them from its own copy if it wants to.
READ_ONLY = (GetQueueUrl, ListQueues, GetQueueAttributes, ListQueueTags, ListDeadLetterSourceQueues,
             ListMessageMoveTasks)
