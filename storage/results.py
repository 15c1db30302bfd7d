"""What each command returns, typed. Actions that return nothing in SQS return ``None``."""

from __future__ import annotations

from typing import Mapping

from storage.commands import MessageAttributeValue, QueueKey
from storage.records import Record


class CreateQueueResult(Record):
    queue: QueueKey


class GetQueueUrlResult(Record):
    queue: QueueKey


class ListQueuesResult(Record):
    queues: tuple[QueueKey, ...]
    next_token: str | None = None


class GetQueueAttributesResult(Record):
    attributes: Mapping[str, str]


class ListQueueTagsResult(Record):
    tags: Mapping[str, str]


class ListDeadLetterSourceQueuesResult(Record):
    queues: tuple[QueueKey, ...]
    next_token: str | None = None


class SendMessageResult(Record):
    message_id: str
    md5_of_body: str
    md5_of_message_attributes: str | None = None
    md5_of_message_system_attributes: str | None = None
    sequence_number: str | None = None


class BatchResultError(Record):
    id: str
    code: str
    message: str
    sender_fault: bool = True


class SendMessageBatchResultEntry(Record):
    id: str
    message_id: str
    md5_of_body: str
    md5_of_message_attributes: str | None = None
    md5_of_message_system_attributes: str | None = None
    sequence_number: str | None = None


class SendMessageBatchResult(Record):
    successful: tuple[SendMessageBatchResultEntry, ...]
    failed: tuple[BatchResultError, ...]


class ReceivedMessage(Record):
    message_id: str
    receipt_handle: str
    md5_of_body: str
    body: str
    attributes: Mapping[str, str]
    md5_of_message_attributes: str | None
    message_attributes: Mapping[str, MessageAttributeValue]


class ReceiveMessageResult(Record):
    messages: tuple[ReceivedMessage, ...]


class DeleteMessageBatchResult(Record):
    successful: tuple[str, ...]
    failed: tuple[BatchResultError, ...]


class ChangeMessageVisibilityBatchResult(Record):
    successful: tuple[str, ...]
    failed: tuple[BatchResultError, ...]


class StartMessageMoveTaskResult(Record):
    task_handle: str


class CancelMessageMoveTaskResult(Record):
    approximate_number_of_messages_moved: int


class MessageMoveTaskInfo(Record):
    task_handle: str | None    # only for a running task, as SQS
    status: str                # RUNNING | COMPLETED | CANCELLING | CANCELLED | FAILED
    source_arn: str
    destination_arn: str | None
    max_messages_per_second: int | None
    approximate_number_of_messages_moved: int
    approximate_number_of_messages_to_move: int | None
    failure_reason: str | None
    started_timestamp: int


class ListMessageMoveTasksResult(Record):
    results: tuple[MessageMoveTaskInfo, ...]


class TickResult(Record):
    effects: int  # mutations produced; lets the runtime tick again at once when it hit the cap


class MoveRefusal(Record):
    move_id: str
    reason: str   # storage.outbox's REFUSED_*


class AdoptMovedResult(Record):
    accepted: tuple[str, ...]      # adopted now or before
    refused: tuple[MoveRefusal, ...]
