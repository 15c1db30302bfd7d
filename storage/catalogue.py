"""Queues held by other replication groups, as one group's storage sees them.

With several replication groups every queue lives in exactly one group, and each group has its
own ``Storage``. A few commands still look across queues, and ``Storage`` asks its
``catalogue`` about any queue it does not hold itself:

- the dead-letter target check of CreateQueue and SetQueueAttributes (existence, account and
  region, queue type, the target's RedriveAllowPolicy), and StartMessageMoveTask's destination
  check: a lookup by ARN, made only when this group has no queue of that ARN;
- StartMessageMoveTask's "source is a dead-letter queue" check: the other groups' queues are
  scanned only when none of this group's names the source as its dead-letter queue;
- ListQueues and ListDeadLetterSourceQueues: every group's names, merged before paging, so a
  NextToken walks them all;
- the dead-letter move on receive and a move task's step: a destination found here, in another
  group, is reached through the outbox (storage/outbox.py).

The catalogue only reads: no command mutates two groups' storages.

A ``Storage`` with no catalogue (one group, the embedded store) holds every queue there is, and
none of these paths costs anything more than a test of ``catalogue is None``.
"""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

from storage.model import Queue

if TYPE_CHECKING:
    from storage.engine import Storage


class Catalogue(Protocol):
    def queue_by_arn(self, arn: str) -> Queue | None:
        """The queue with this ARN in another group, read-only; None if no other group has it."""

    def queues(self) -> Iterable[Queue]:
        """Every queue of every other group, read-only."""


class StoragesCatalogue:
    """The catalogue of group ``own`` in a node that holds every group's ``Storage``: the queues
    of ``storages`` other than ``storages[own]``, read in place.

    It reads the other storages' current state at each call, without copies: every group's
    storage lives on the node's one loop, so a read never sees half a command. ``storages`` is
    held, not copied, so a node that replaces a group's ``Storage`` replaces it in that list.
    What the reads see is whatever the local replicas have applied; making that include every
    acknowledged write (a barrier per foreign group) is the caller's part.
    """

    def __init__(self, storages: Sequence[Storage], own: int):
        self._storages = storages
        self._own = own

    @classmethod
    def join(cls, storages: Sequence[Storage]) -> None:
        """Give each of ``storages`` (one per group, in group order) the catalogue of the others."""
        for i, s in enumerate(storages):
            s.catalogue = cls(storages, i)

    def _others(self) -> Iterable[Storage]:
        own = self._own
        return (s for i, s in enumerate(self._storages) if i != own)

    def queue_by_arn(self, arn: str) -> Queue | None:
        for s in self._others():
            q = s._queue_by_arn(arn)
            if q is not None:
                return q
        return None

    def queues(self) -> Iterable[Queue]:
        return chain.from_iterable(s._queues.values() for s in self._others())
