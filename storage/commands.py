"""Client operations as plain typed values: one frozen dataclass per SQS action.

The endpoint parses a request (JSON or Query) into one of these, the storage executes it. Field
names are the SQS parameter names in snake_case; a parameter the client left out is ``None`` so
that validation can tell "absent" from "empty", as SQS does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from storage.records import record

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


@record
class Namespace:
    region: str = DEFAULT_REGION
    account: str = DEFAULT_ACCOUNT

    def key(self, name: str) -> QueueKey:
        return QueueKey(self.region, self.account, name)


@record
class MessageAttributeValue:
    data_type: str
    string_value: str | None = None
    binary_value: bytes | None = None
    # SQS reserves the list forms and rejects them; they are kept so that validation can say so.
    string_list_values: tuple[str, ...] | None = None
    binary_list_values: tuple[bytes, ...] | None = None


Attributes = Mapping[str, str]
MessageAttributes = Mapping[str, MessageAttributeValue]


# --- queues -------------------------------------------------------------------------------

@record
class CreateQueue:
    ns: Namespace
    name: str | None
    attributes: Attributes = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


@record
class DeleteQueue:
    queue: QueueKey


@record
class GetQueueUrl:
    ns: Namespace
    name: str | None
    owner_account: str | None = None


@record
class ListQueues:
    ns: Namespace
    prefix: str | None = None
    max_results: int | None = None
    next_token: str | None = None


@record
class GetQueueAttributes:
    queue: QueueKey
    attribute_names: tuple[str, ...] | None = None


@record
class SetQueueAttributes:
    queue: QueueKey
    attributes: Attributes | None


@record
class PurgeQueue:
    queue: QueueKey


@record
class TagQueue:
    queue: QueueKey
    tags: Mapping[str, str] | None


@record
class UntagQueue:
    queue: QueueKey
    tag_keys: tuple[str, ...] | None


@record
class ListQueueTags:
    queue: QueueKey


@record
class AddPermission:
    queue: QueueKey
    label: str | None
    account_ids: tuple[str, ...] | None
    actions: tuple[str, ...] | None


@record
class RemovePermission:
    queue: QueueKey
    label: str | None


@record
class ListDeadLetterSourceQueues:
    queue: QueueKey
    max_results: int | None = None
    next_token: str | None = None


# --- messages -----------------------------------------------------------------------------

@record
class SendMessage:
    queue: QueueKey
    body: str | None
    delay_seconds: int | None = None
    message_attributes: MessageAttributes | None = None
    system_attributes: MessageAttributes | None = None
    deduplication_id: str | None = None
    group_id: str | None = None
    sender_id: str | None = None  # the caller's identity, reported as SenderId


@record
class SendMessageBatchEntry:
    id: str | None
    body: str | None
    delay_seconds: int | None = None
    message_attributes: MessageAttributes | None = None
    system_attributes: MessageAttributes | None = None
    deduplication_id: str | None = None
    group_id: str | None = None


@record
class SendMessageBatch:
    queue: QueueKey
    entries: tuple[SendMessageBatchEntry, ...]
    sender_id: str | None = None


@record
class ReceiveMessage:
    queue: QueueKey
    max_number_of_messages: int | None = None
    visibility_timeout: int | None = None
    wait_time_seconds: int | None = None  # validated here; the waiting itself is the endpoint's job
    attribute_names: tuple[str, ...] = ()           # legacy AttributeNames
    system_attribute_names: tuple[str, ...] = ()    # MessageSystemAttributeNames
    message_attribute_names: tuple[str, ...] = ()
    receive_request_attempt_id: str | None = None


@record
class DeleteMessage:
    queue: QueueKey
    receipt_handle: str | None


@record
class DeleteMessageBatchEntry:
    id: str | None
    receipt_handle: str | None


@record
class DeleteMessageBatch:
    queue: QueueKey
    entries: tuple[DeleteMessageBatchEntry, ...]


@record
class ChangeMessageVisibility:
    queue: QueueKey
    receipt_handle: str | None
    visibility_timeout: int | None


@record
class ChangeMessageVisibilityBatchEntry:
    id: str | None
    receipt_handle: str | None
    visibility_timeout: int | None


@record
class ChangeMessageVisibilityBatch:
    queue: QueueKey
    entries: tuple[ChangeMessageVisibilityBatchEntry, ...]


# --- message move tasks (DLQ redrive) -------------------------------------------------------

@record
class StartMessageMoveTask:
    ns: Namespace
    source_arn: str | None
    destination_arn: str | None = None
    max_messages_per_second: int | None = None


@record
class CancelMessageMoveTask:
    ns: Namespace
    task_handle: str | None


@record
class ListMessageMoveTasks:
    ns: Namespace
    source_arn: str | None
    max_results: int | None = None


# --- time ---------------------------------------------------------------------------------

@record
class Tick:
    """Let time act: expire messages past retention, forget old dedup ids and deleted-queue
    tombstones, advance message move tasks. The master issues it periodically; because its
    effects are mutations, replicas never need a clock of their own."""

    max_effects: int = 10_000


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
