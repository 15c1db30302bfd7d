"""Queues held by other replication groups, as one group's storage sees them.

With several replication groups every queue lives in exactly one group, and each group has its
own ``Storage``. A few commands still look across queues: the dead-letter target check of
CreateQueue and SetQueueAttributes, ListQueues, ListDeadLetterSourceQueues, the source and
destination checks of StartMessageMoveTask, and the dead-letter move on receive. ``Storage``
asks its ``catalogue`` about any queue it does not hold itself. The catalogue only reads: no
command mutates two groups' storages (a move to another group goes through an outbox).

A ``Storage`` with no catalogue (one group, the embedded store) holds every queue there is.
"""

from __future__ import annotations

from typing import Iterable, Protocol

from storage.model import Queue


class Catalogue(Protocol):
    def queue_by_arn(self, arn: str) -> Queue | None:
        """The queue with this ARN in another group, read-only; None if no other group has it."""

    def queues(self) -> Iterable[Queue]:
        """Every queue of every other group, read-only."""
