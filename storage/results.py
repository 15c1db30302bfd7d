"""What each command returns, typed. Actions that return nothing in SQS return ``None``."""

from __future__ import annotations

from typing import Mapping

from storage.commands import MessageAttributeValue, QueueKey
from storage.records import record


@record
class CreateQueueResult:
    queue: QueueKey


@record
class GetQueueUrlResult:
    queue: QueueKey


@record
class ListQueuesResult:
    queues: tuple[QueueKey, ...]
    next_token: str | None = None


@record
class GetQueueAttributesResult:
    attributes: Mapping[str, str]


@record
class ListQueueTagsResult:
    tags: Mapping[str, str]


@record
class ListDeadLetterSourceQueuesResult:
    queues: tuple[QueueKey, ...]
    next_token: str | None = None


@record
class SendMessageResult:
    message_id: str
    md5_of_body: str
    md5_of_message_attributes: str | None = None
    md5_of_message_system_attributes: str | None = None
    sequence_number: str | None = None


@record
class BatchResultError:
    id: str
    code: str
    message: str
    sender_fault: bool = True


@record
class SendMessageBatchResultEntry:
    id: str
    message_id: str
    md5_of_body: str
    md5_of_message_attributes: str | None = None
    md5_of_message_system_attributes: str | None = None
    sequence_number: str | None = None


@record
class SendMessageBatchResult:
    successful: tuple[SendMessageBatchResultEntry, ...]
    failed: tuple[BatchResultError, ...]


@record
class ReceivedMessage:
    message_id: str
    receipt_handle: str
    md5_of_body: str
    body: str
    attributes: Mapping[str, str]
    md5_of_message_attributes: str | None
    message_attributes: Mapping[str, MessageAttributeValue]


@record
class ReceiveMessageResult:
    messages: tuple[ReceivedMessage, ...]


@record
class DeleteMessageBatchResult:
    successful: tuple[str, ...]
    failed: tuple[BatchResultError, ...]


@record
class ChangeMessageVisibilityBatchResult:
    successful: tuple[str, ...]
    failed: tuple[BatchResultError, ...]


@record
class StartMessageMoveTaskResult:
    task_handle: str


@record
class CancelMessageMoveTaskResult:
    approximate_number_of_messages_moved: int


@record
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


@record
class ListMessageMoveTasksResult:
    results: tuple[MessageMoveTaskInfo, ...]


@record
class TickResult:
    effects: int  # mutations produced; lets the runtime tick again at once when it hit the cap
