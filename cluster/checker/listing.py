"""Read-your-writes for ListQueues: a list that succeeded names every queue of its prefix whose
CreateQueue was acknowledged before the list was invoked.

With replication groups a ListQueues reads the other groups' queues from its node's replicas,
after a barrier per group (cluster/read_barrier.py); a list that misses an acknowledged create is
what a missing or broken barrier looks like. The workloads that record `create_queue` lines
never delete a queue, so no acknowledged create may be missing from a later list.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from cluster.checker.schema import CREATE_QUEUE, LIST_QUEUES, OK, History


@dataclass(frozen=True, slots=True)
class StaleList:
    """The ok list ``op_id`` (invoked at ``at``) missed ``queue``, created by ``created_op_id``,
    acknowledged at ``created_at``."""
    queue: str
    op_id: str
    client: str
    at: float
    created_op_id: str
    created_at: float


def stale_lists(history: History, tolerance: float = 0.0) -> list[StaleList]:
    creates = sorted((op.completed, op.queue, op.op_id) for op in history.ops
                     if op.op == CREATE_QUEUE and op.outcome == OK and op.completed is not None)
    done = [c[0] for c in creates]
    out = []
    for op in history.ops:
        if op.op != LIST_QUEUES or op.outcome != OK:
            continue
        listed = set(op.listed)
        for created_at, queue, created_op in creates[:bisect.bisect_left(done, op.ts - tolerance)]:
            if queue.startswith(op.queue) and queue not in listed:
                out.append(StaleList(queue, op.op_id, op.client, op.ts, created_op, created_at))
    return out
