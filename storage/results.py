"""What each command returns, typed. Actions that return nothing in SQS return ``None``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from storage.commands import MessageAttributeValue, QueueKey


@dataclass(frozen=True, slots=True)
class CreateQueueResult:
    queue: QueueKey


@dataclass(frozen=True, slots=True)
class GetQueueUrlResult:
    queue: QueueKey


@dataclass(frozen=True, slots=True)
class ListQueuesResult:
    queues: tuple[QueueKey, ...]
    next_token: str | None = None


@dataclass(frozen=True, slots=True)
class GetQueueAttributesResult:
    attributes: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ListQueueTagsResult:
    tags: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class ListDeadLetterSourceQueuesResult:
    queues: tuple[QueueKey, ...]
    next_token: str | None = None


@dataclass(frozen=True, slots=True)
class SendMessageResult:
    message_id: str
    md5_of_body: str
    md5_of_message_attributes: str | None = None
    md5_of_message_system_attributes: str | None = None
    sequence_number: str | None = None


@dataclass(frozen=True, slots=True)
class BatchResultError:
    id: str
    code: str
    message: str
    sender_fault: bool = True


@dataclass(frozen=True, slots=True)
class SendMessageBatchResultEntry:
    id: str
    message_id: str
    md5_of_body: str
    md5_of_message_attributes: str | None = None
    md5_of_message_system_attributes: str | None = None
    sequence_number: str | None = None


@dataclass(frozen=True, slots=True)
class SendMessageBatchResult:
    successful: tuple[SendMessageBatchResultEntry, ...]
    failed: tuple[BatchResultError, ...]


@dataclass(frozen=True, slots=True)
class ReceivedMessage:
    message_id: str
    receipt_handle: str
    md5_of_body: str
    body: str
    attributes: Mapping[str, str]
    md5_of_message_attributes: str | None
    message_attributes: Mapping[str, MessageAttributeValue]


@dataclass(frozen=True, slots=True)
class ReceiveMessageResult:
    messages: tuple[ReceivedMessage, ...]


@dataclass(frozen=True, slots=True)
class DeleteMessageBatchResult:
    successful: tuple[str, ...]
    failed: tuple[BatchResultError, ...]


@dataclass(frozen=True, slots=True)
class ChangeMessageVisibilityBatchResult:
    successful: tuple[str, ...]
    failed: tuple[BatchResultError, ...]


@dataclass(frozen=True, slots=True)
class StartMessageMoveTaskResult:
    task_handle: str


@dataclass(frozen=True, slots=True)
class CancelMessageMoveTaskResult:
    approximate_number_of_messages_moved: int


@dataclass(frozen=True, slots=True)
class MessageMoveTaskInfo:
    task_handle: str | None    # only for a running task, as SQS
    status: str                # RUNNING | COMPLETED | CANCELLING | CANCELLED | FAILED
    source_arn: str
    destination_arn: str | None
    max_messages_per_second: int | None
    approximate_number_of_messages_moved: int
    approximate_number_of_messages_to_move: int | None
    failure_reason: str | None
    started_timestamp: int


@dataclass(frozen=True, slots=True)
class ListMessageMoveTasksResult:
    results: tuple[MessageMoveTaskInfo, ...]


@dataclass(frozen=True, slots=True)
class TickResult:
    effects: int  # mutations produced; lets the runtime tick again at once when it hit the cap
