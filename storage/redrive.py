"""Dead-letter queues: the RedrivePolicy check across queues, the move into a dead-letter
queue, ListDeadLetterSourceQueues, and message move tasks (the redrive back out).

A mixin of ``Storage`` (storage/engine.py). A move is a ``MessageDeleted`` from one queue and a
``MessageAdded`` to the other, or, to a queue of another replication group, a step through the
outbox (storage/outbox.py); a task's progress is a ``MoveTaskUpdated``, advanced by ``Tick``.

With several replication groups (storage/catalogue.py), the checks and lists here read every
group's queues: a RedrivePolicy's target, a move task's destination, whether a task's source is
a dead-letter queue, and ListDeadLetterSourceQueues' sources may be in another group. A queue a
command acts on (a move task's source, the queue whose sources are listed) is this group's, as
is every queue a move writes to: a move to another group's queue leaves through the outbox.
"""

from __future__ import annotations

from typing import Any

import msgspec

from storage import validation as v
from storage.access import access_denied
from storage.commands import (
    CancelMessageMoveTask, ListDeadLetterSourceQueues, ListMessageMoveTasks, MovedMessage, QueueKey,
    StartMessageMoveTask,
)
from storage.errors import INVALID_PARAMETER_VALUE, RESOURCE_NOT_FOUND, SqsError, invalid_parameter, missing_parameter
from storage.fifo import next_sequence
from storage.keys import parse_task_handle, task_handle
from storage.model import Message, Queue
from storage.mutations import MessageAdded, MessageDeleted, MessageRecord, MoveTaskRecord, MoveTaskUpdated
from storage.queue_config import parse_redrive_policy
from storage.results import (
    CancelMessageMoveTaskResult, ListDeadLetterSourceQueuesResult, ListMessageMoveTasksResult, MessageMoveTaskInfo,
    StartMessageMoveTaskResult,
)

TASK_STATUS_RUNNING = "RUNNING"
SAME_TYPE = "Source and destination queues must be of the same type"
_DEFAULT_MOVE_BATCH = 500  # messages per tick per task when no rate was asked for


def destination_missing(arn: str) -> str:
    """A move task's FailureReason when its destination is gone."""
    return f"Destination queue {arn} does not exist."


def invalid_value_rp(value: str, reason: str) -> SqsError:
    return INVALID_PARAMETER_VALUE(f"Value {value} for parameter RedrivePolicy is invalid. Reason: {reason}")


def _task_with(task: MoveTaskRecord, **changes: Any) -> MoveTaskRecord:
    return msgspec.structs.replace(task, version=task.version + 1, **changes)


class Redrive:
    """The dead-letter side of queues: redrive policies, moves, move tasks."""

    def _check_redrive(self, key: QueueKey, fifo: bool, attrs: dict[str, str]) -> None:
        value = attrs.get("RedrivePolicy")
        if not value:
            return
        policy = parse_redrive_policy(value)
        target = self._find_by_arn(policy.dlq_arn)
        if target is None:
            raise invalid_value_rp(value, "Dead letter target does not exist.")
        if (target.key.region, target.key.account) != (key.region, key.account):
            raise invalid_value_rp(value, "Dead-letter queue must be in the same account and region as the source.")
        if target.fifo != fifo:
            raise invalid_value_rp(value, "Dead-letter queue must be same type of queue as the source.")
        allow = target.config.redrive_allow
        if allow is not None and not allow.allows(key.arn):
            raise invalid_value_rp(value, f"Queue {target.arn} does not allow {key.arn} to use it as a "
                                          "dead-letter queue (RedriveAllowPolicy).")

    def _list_dead_letter_source_queues(self, c: ListDeadLetterSourceQueues, now: int,
                                        out: list) -> ListDeadLetterSourceQueuesResult:
        target = self._queue(c.queue)
        names = [q.key.name for q in self._every_queue()
                 if q.config.redrive is not None and q.config.redrive.dlq_arn == target.arn
                 and (q.key.region, q.key.account) == (target.key.region, target.key.account)]
        page, token = self._page(names, c.max_results, c.next_token)
        return ListDeadLetterSourceQueuesResult(
            tuple(QueueKey(target.key.region, target.key.account, n) for n in page), token)

    def _move(self, src: Queue, msg: Message, dst: Queue, now: int, out: list,
              dlq_source: str | None, task_id: str | None = None) -> int:
        """Move a message to another queue, visible at once, with the same id and content;
        return the number of mutations emitted.

        Into a dead-letter queue (``dlq_source`` set) it keeps its receive count and first
        receive time, so that a receive from the DLQ shows the count one higher than the
        source's last: LocalStack's AWS-validated test_dead_letter_queue_message_attributes
        (maxReceiveCount 1, the DLQ copy shows ApproximateReceiveCount 2). A move task's
        redrive starts it afresh: a count carried back to the source would send it straight
        back to the DLQ."""
        if not self._holds(dst):   # another group's queue: through the outbox (storage/outbox.py)
            self._outbox_move(src, msg, dst.arn, out, dlq_source, task_id)
            return 1
        rec = msg.rec
        self._emit(out, MessageDeleted(src.qid, rec.message_id))
        moved = self._arrival(dst, rec, dlq_source, msg.receive_count, msg.first_receive_ms, now)
        self._emit(out, MessageAdded(dst.qid, moved, None))
        return 2

    def _arrival(self, dst: Queue, rec: MessageRecord | MovedMessage, dlq_source: str | None, count: int,
                 first: int, now: int) -> MessageRecord:
        """The record of a message moved into ``dst`` now, from ``rec`` (its record in the
        source queue, or what another group sent of it) and its receive count and first receive."""
        seq = next_sequence(dst, now) if dst.fifo else None
        sent = now if dst.fifo else rec.sent_ms  # FIFO DLQs reset the enqueue time, standard ones keep it
        count, first = (count, first) if dlq_source else (0, 0)
        return MessageRecord(
            rec.message_id, dst.next_serial, rec.body, rec.attributes, rec.system_attributes, rec.md5_of_body,
            rec.md5_of_attributes, rec.md5_of_system_attributes, sent, rec.sender_id, rec.group_id,
            rec.deduplication_id, seq, dlq_source, 1, None, now, count, first, 0)

    def _start_message_move_task(self, c: StartMessageMoveTask, now: int, out: list) -> StartMessageMoveTaskResult:
        if not c.source_arn:
            raise missing_parameter("SourceArn")
        src = self._queue_by_arn(c.source_arn)
        if src is None:
            raise RESOURCE_NOT_FOUND("The resource that you specified for the SourceArn parameter doesn't exist.")
        if not any(q.config.redrive is not None and q.config.redrive.dlq_arn == src.arn
                   for q in self._every_queue()):
            # Move-task wordings and codes: LocalStack's AWS-recorded test_sqs_move_task.snapshot.json.
            raise INVALID_PARAMETER_VALUE("Source queue must be configured as a Dead Letter Queue.")
        if c.destination_arn:
            dst = self._find_by_arn(c.destination_arn)
            if dst is None:
                raise RESOURCE_NOT_FOUND(
                    "The resource that you specified for the DestinationArn parameter doesn't exist.")
            if dst is src:
                raise invalid_parameter("DestinationArn", c.destination_arn,
                                        "Source and destination queues must be different")
            if dst.fifo != src.fifo:
                raise invalid_parameter("DestinationArn", c.destination_arn, SAME_TYPE)
        if c.max_messages_per_second is not None:
            v.check_int_range("MaxNumberOfMessagesPerSecond", c.max_messages_per_second, 1, 500,
                              "MaxNumberOfMessagesPerSecond must be between 1 and 500")
        if any(t.status == TASK_STATUS_RUNNING for t in src.move_tasks):
            raise INVALID_PARAMETER_VALUE("There is already a task running. Only one active task is allowed "
                                          "for a source queue arn at a given time.")
        task = MoveTaskRecord(self.ids.uuid(), 1, TASK_STATUS_RUNNING, src.arn, c.destination_arn or None,
                              c.max_messages_per_second, 0, len(src.messages), now, None)
        self._emit(out, MoveTaskUpdated(src.qid, task))
        return StartMessageMoveTaskResult(task_handle(task.task_id, task.source_arn))

    def _task_from_handle(self, handle: str | None) -> tuple[Queue, MoveTaskRecord]:
        if not handle:
            raise missing_parameter("TaskHandle")
        named = parse_task_handle(handle)
        if named is None:
            raise INVALID_PARAMETER_VALUE("Value for parameter TaskHandle is invalid.")
        task_id, source_arn = named
        src = self._queue_by_arn(source_arn)
        if src is None:
            raise RESOURCE_NOT_FOUND("The resource that you specified for the SourceArn parameter doesn't exist.")
        task = next((t for t in src.move_tasks if t.task_id == task_id), None)
        if task is None:
            raise RESOURCE_NOT_FOUND("Task does not exist.")
        return src, task

    def _cancel_message_move_task(self, c: CancelMessageMoveTask, now: int, out: list) -> CancelMessageMoveTaskResult:
        src, task = self._task_from_handle(c.task_handle)
        # The handle names the task's source queue, which access.py cannot see from the command:
        # cancelling is its owner's alone (OWNER_ONLY_ACTIONS), whatever its Policy grants.
        if c.caller is not None and src.key.account != c.caller:
            raise access_denied(c.caller, "CancelMessageMoveTask", src.arn)
        if task.status != TASK_STATUS_RUNNING:
            raise RESOURCE_NOT_FOUND("Task does not exist.")
        self._emit(out, MoveTaskUpdated(src.qid, _task_with(task, status="CANCELLED")))
        return CancelMessageMoveTaskResult(task.moved)

    def _list_message_move_tasks(self, c: ListMessageMoveTasks, now: int, out: list) -> ListMessageMoveTasksResult:
        if not c.source_arn:
            raise missing_parameter("SourceArn")
        src = self._queue_by_arn(c.source_arn)
        if src is None:
            raise RESOURCE_NOT_FOUND("The resource that you specified for the SourceArn parameter doesn't exist.")
        n = 1 if c.max_results is None else c.max_results
        v.check_int_range("MaxResults", n, 1, 10, "MaxResults must be between 1 and 10")
        tasks = list(reversed(src.move_tasks))[:n]
        return ListMessageMoveTasksResult(tuple(
            MessageMoveTaskInfo(task_handle(t.task_id, t.source_arn) if t.status == TASK_STATUS_RUNNING else None, t.status,
                                t.source_arn, t.destination_arn, t.max_per_second, t.moved, t.to_move,
                                t.failure_reason, t.started_ms)
            for t in tasks))

    def _advance_task(self, q: Queue, task: MoveTaskRecord, now: int, budget: int, out: list) -> int:
        """Move what the task's rate allows now; return the number of mutations emitted."""
        allowed = budget
        if task.max_per_second:
            allowed = min(allowed, task.max_per_second * (now - task.started_ms) // 1000 - task.moved)
        allowed = min(allowed, task.to_move - task.moved, _DEFAULT_MOVE_BATCH)
        emitted = 0
        moved = 0
        failure = None
        q.promote(now)
        take = q.take_ready()
        while moved < allowed:
            msg = take()
            if msg is None:
                break
            dest_arn = task.destination_arn or msg.rec.dlq_source_arn
            dst = self._find_by_arn(dest_arn)
            if dst is None or dst is q:
                q.requeue(msg)
                failure = (destination_missing(dest_arn) if dest_arn else
                           f"Message {msg.rec.message_id} has no source queue to return to.")
                break
            emitted += self._move(q, msg, dst, now, out, dlq_source=None, task_id=task.task_id)
            moved += 1
        total = task.moved + moved
        status = task.status
        if failure:
            status = "FAILED"
        elif total >= task.to_move or not q.messages:
            status = "COMPLETED"
        if moved or status != task.status:
            self._emit(out, MoveTaskUpdated(q.qid, _task_with(task, moved=total, status=status,
                                                              failure_reason=failure)))
            emitted += 1
        return emitted

    def _task_lost_one(self, qid: int, task_id: str, failure: str, out: list) -> None:
        """A message that the task moved to another group came back (its destination refused
        it): the task counts it unmoved and fails, unless cancelled; the first failure stands."""
        q = self._queues.get(qid)
        task = next((t for t in q.move_tasks if t.task_id == task_id), None) if q is not None else None
        if task is None:
            return
        failed = {} if task.status == "CANCELLED" else {"status": "FAILED",
                                                        "failure_reason": task.failure_reason or failure}
        self._emit(out, MoveTaskUpdated(qid, _task_with(task, moved=max(0, task.moved - 1), **failed)))
