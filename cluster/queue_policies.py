"""Per-queue ack policies, as the group core (cluster/group_core.py) reads them: a queue tagged
``elasticmq-py:ack-policy`` is replicated under that policy, every other queue under the
cluster's. A command that changes tags (or creates or deletes a queue) empties the table; each
queue's next command reads its tags again.
"""

from __future__ import annotations

from typing import Any

from storage import Storage
from storage.commands import Command, CreateQueue, DeleteQueue, ListQueueTags, QueueKey, TagQueue, UntagQueue
from storage.errors import SqsError

from cluster.node_actions import Warn
from cluster.replication.messages import AckPolicy

POLICY_TAG = "elasticmq-py:ack-policy"
TAG_CHANGES = (CreateQueue, DeleteQueue, TagQueue, UntagQueue)


class QueuePolicies(dict):
    """Each queue's ack policy (its tag, or the default), and the last one looked up."""

    __slots__ = ("default", "last_key", "last")

    def __init__(self, default: AckPolicy) -> None:
        super().__init__()
        self.default = default
        self.last_key: QueueKey | None = None
        self.last: Any = None

    def clear(self) -> None:
        super().clear()
        self.last_key = self.last = None

    def of(self, command: Command, storage: Storage, out: list[Any]) -> AckPolicy:
        """The policy ``command`` is replicated under; a tag that names no policy is warned of
        (a ``Warn`` in ``out``) and the default used."""
        key = getattr(command, "queue", None)
        if key is None:
            return self.default
        if key is self.last_key:
            # The endpoint reuses one QueueKey per queue URL: no hash (a Python call) per operation
            return self.last
        p = self.get(key)
        if p is None:
            p = self.default
            try:
                tags, _ = storage.execute(ListQueueTags(key))
            except SqsError:
                tags = None   # no such queue: the command fails the same way; the default is moot
            value = tags.tags.get(POLICY_TAG) if tags is not None else None
            if value is not None:
                try:
                    p = AckPolicy(value.strip().lower())
                except ValueError:
                    out.append(Warn(f"queue {key.name}: tag {POLICY_TAG}={value!r} is not an ack policy; "
                                    f"using {p.value}"))
            self[key] = p
        self.last_key, self.last = key, p
        return p
