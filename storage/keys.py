"""How the engine finds a queue: by its key's strings, by its ARN, or by the move task handle
that names it; and which queue a command names, which is the queue whose replication group
runs it (``command_key``)."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from storage.commands import (
    CancelMessageMoveTask, Command, CreateQueue, GetQueueUrl, ListMessageMoveTasks, QueueKey, StartMessageMoveTask,
)

_ARN_RE = re.compile(r"arn:aws:sqs:([^:]+):([^:]+):([^:]+)")


def key_names(key: QueueKey) -> tuple[str, str, str]:
    """A queue key as a dict key. A tuple of strings hashes and compares in C; QueueKey's
    dataclass-generated __hash__ and __eq__ are Python calls, several times the cost, and each
    request brings a new QueueKey object, so a lookup by it pays for both."""
    return (key.region, key.account, key.name)


def parse_arn(arn: str | None) -> QueueKey | None:
    m = _ARN_RE.fullmatch(arn or "")
    return QueueKey(*m.groups()) if m else None


def task_handle(task_id: str, source_arn: str) -> str:
    """A move task's TaskHandle: a base64-encoded JSON document of its id and its source queue's
    ARN. AWS documents the handle only as "an identifier associated with a message movement
    task" (API reference, StartMessageMoveTask and CancelMessageMoveTask). This is the form
    LocalStack gives it (localstack/localstack, localstack-core/localstack/services/sqs/utils.py,
    ``encode_move_task_handle``), and real AWS reads handles of this form so: LocalStack's
    AWS-validated test_cancel_with_invalid_source_arn_in_task_handle and
    test_cancel_with_invalid_task_id_in_task_handle (tests/aws/services/sqs/test_sqs_move_task.py)
    send such handles, and AWS answers that the source queue their ``sourceArn`` names does not
    exist, and that the task their ``taskId`` names does not (tests/conformance/test_errors.py
    holds both answers)."""
    doc = json.dumps({"taskId": task_id, "sourceArn": source_arn}, separators=(",", ":"))
    return base64.b64encode(doc.encode()).decode()


def parse_task_handle(handle: str) -> tuple[Any, str] | None:
    """The (task id, source queue ARN) a TaskHandle names, or None where it is no handle. The id
    is whatever the document holds: only a task with that id matches it."""
    try:
        doc = json.loads(base64.b64decode(handle.encode(), validate=True))
        task_id, source_arn = doc["taskId"], doc["sourceArn"]
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    return (task_id, source_arn) if isinstance(source_arn, str) else None


def command_key(command: Command) -> QueueKey | None:
    """The queue a parsed command names, or ``None`` (ListQueues; a move task command whose ARN
    or handle names no queue): with queue groups, the queue whose group runs it. A move task
    command names its source queue, by its ARN or through its TaskHandle, and runs where that
    queue lives."""
    q = getattr(command, "queue", None)
    if q is not None:
        return q
    t = type(command)
    if t is CreateQueue and command.name is not None:
        return command.ns.key(command.name)
    if t is GetQueueUrl and command.name is not None:
        return QueueKey(command.ns.region, command.owner_account or command.ns.account, command.name)
    if t is StartMessageMoveTask or t is ListMessageMoveTasks:
        return parse_arn(command.source_arn)
    if t is CancelMessageMoveTask and command.task_handle:
        named = parse_task_handle(command.task_handle)
        return parse_arn(named[1]) if named is not None else None
    return None
