"""The queue page's data: one queue's attributes, tags, redrive policy, dead-letter links and
move tasks, as this node holds them (a replica's copy on a replica, like the queue table).

Read-only: it runs SQS's read commands on this node's storage directly, and their answers take
SQS's shapes (``responses.to_output``). A read command emits no mutation; one that did would put
this node out of step with the others, so ``_read`` refuses it loudly.
"""

from __future__ import annotations

import json
from typing import Any

from storage.commands import GetQueueAttributes, ListMessageMoveTasks, ListQueueTags, Namespace, QueueKey
from storage.errors import SqsError
from storage.keys import parse_arn

from elasticmq_py.protocol import responses
from elasticmq_py.protocol.wire import RequestContext

MAX_TASKS = 10    # ListMessageMoveTasks' MaxResults at most


def _read(storage: Any, command: Any, ctx: RequestContext) -> dict[str, Any]:
    result, mutations = storage.execute(command)
    if mutations:
        raise RuntimeError(f"{type(command).__name__} changed the state it should only read")
    return responses.to_output(result, ctx) or {}


def queue_view(storage: Any, key: QueueKey, base: str) -> dict[str, Any] | None:
    """The page's data, or None when this node holds no such queue."""
    ctx = RequestContext(Namespace(key.region, key.account), base)
    try:
        attrs = _read(storage, GetQueueAttributes(key, ("All",)), ctx).get("Attributes", {})
        tags = _read(storage, ListQueueTags(key), ctx).get("Tags", {})
    except SqsError:
        return None
    stats = storage.queue_stats()
    redrive = None
    if attrs.get("RedrivePolicy"):
        policy = json.loads(attrs["RedrivePolicy"])
        dlq = parse_arn(policy.get("deadLetterTargetArn"))
        redrive = {"max_receive_count": policy.get("maxReceiveCount"),
                   "dlq": None if dlq is None else _link(stats, dlq)}
    targets = storage.dead_letter_targets()
    sources = sorted(src for src, target in targets.items() if target == key)
    tasks: list[dict[str, Any]] = []
    if sources:
        try:
            tasks = _read(storage, ListMessageMoveTasks(ctx.ns, key.arn, MAX_TASKS), ctx).get("Results", [])
        except SqsError:
            pass   # the queue was deleted between the reads
    visible, inflight, delayed = stats.get(key, (0, 0, 0))
    return {"name": key.name, "region": key.region, "account": key.account, "arn": key.arn,
            "url": f"{base}/{key.account}/{key.name}", "fifo": key.is_fifo,
            "counts": {"visible": visible, "inflight": inflight, "delayed": delayed},
            "attributes": attrs, "tags": tags, "redrive": redrive,
            "dlq_for": [_link(stats, s) for s in sources], "move_tasks": tasks}


def _link(stats: dict[QueueKey, Any], key: QueueKey) -> dict[str, Any]:
    return {"name": key.name, "region": key.region, "account": key.account, "exists": key in stats}
