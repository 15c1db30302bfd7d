"""Reads across replication groups, sans-I/O: a barrier per foreign group before the read.

With several groups a few commands read queues that other groups hold (storage/catalogue.py):
ListQueues, ListDeadLetterSourceQueues, the RedrivePolicy target check of CreateQueue and
SetQueueAttributes, and StartMessageMoveTask's source and destination checks. The master of the
command's group runs them against its own storage and its local replicas of the other groups.
A replica may lag its master, so such a command first waits here:

1. The node sends ``Barrier(nonce)`` to the master of each other group it does not serve itself.
2. A master answers ``BarrierAt(nonce, epoch, seq)`` only while it serves the group: where its log
   ends, once it has cut what it executed into the log (so an operation it answered under ack
   policy ``none`` is counted too).
3. The command runs once, for each such group, the local replica has applied that seq in that
   epoch or a newer one, or this node serves the group by then.
4. An unanswered ask is sent again every heartbeat, to whichever master the group has then. A
   group that has not answered within ``election_max`` fails the command with the retryable
   refusal: a member cut off from a group's active master cannot tell what it acknowledged.

So the read sees every write acknowledged anywhere before it began: read-your-writes across
groups. It may also see entries a replica applied before they were committed, which a failover
of their group can undo: the same window as ack policy ``none``. Nothing else waits: sends,
receives and deletes name one queue and never come here, and one group has no other group.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from storage.commands import (
    Command, CreateQueue, ListDeadLetterSourceQueues, ListQueues, SetQueueAttributes, StartMessageMoveTask,
)

from cluster.errors import NotServing
from cluster.node_actions import Action, Answer
from cluster.replication.messages import Barrier, BarrierAt, Send

if TYPE_CHECKING:
    from cluster.node_core import NodeCore

_READS_ACROSS = frozenset((ListQueues, ListDeadLetterSourceQueues, StartMessageMoveTask))
_REDRIVE_SET = frozenset((CreateQueue, SetQueueAttributes))


def reads_across_groups(command: Command) -> bool:
    """Whether ``command`` reads other groups' queues (and waits for their barriers first)."""
    t = type(command)
    if t in _READS_ACROSS:
        return True
    if t not in _REDRIVE_SET:
        return False
    attributes = command.attributes   # type: ignore[attr-defined]
    return bool(attributes) and "RedrivePolicy" in attributes


@dataclass(slots=True)
class _Read:
    token: Any
    command: Command
    group: int                   # the group whose master runs it (this node)
    deadline: float
    # per foreign group: (epoch, seq) its master answered, None while unanswered
    at: dict[int, tuple[int, int] | None]
    asked: dict[int, float] = field(default_factory=dict)   # per foreign group: when last asked


class ReadBarriers:
    """The reads across groups one node is waiting to run, and its answers to other nodes' asks."""

    def __init__(self, node: NodeCore) -> None:
        self.node = node
        self.reads: dict[int, _Read] = {}
        self._nonces = itertools.count(1)

    def start(self, token: Any, command: Command, group: int, now: float, out: list[Action]) -> bool:
        """Hold ``command`` (to run in ``group``) until every other group's barrier is passed.
        False, with nothing done, when this node serves every other group itself."""
        node = self.node
        foreign = [i for i, g in enumerate(node.groups) if i != group and not g.serving_now(now)]
        if not foreign:
            return False
        nonce = next(self._nonces)
        read = self.reads[nonce] = _Read(token, command, group, now + node.timing.election_max,
                                         dict.fromkeys(foreign))
        self._ask(nonce, read, now, out)
        return True

    def answer(self, sender: str, frame: Barrier, group: int, now: float, out: list[Action]) -> None:
        """Another member asks where this group's log ends: answered only while serving it."""
        g = self.node.groups[group]
        if not g.serving_now(now):
            return
        g.cut_staged(now, out)
        epoch = g.mastery.epoch   # type: ignore[union-attr]
        out.append(Send(sender, BarrierAt(frame.nonce, epoch, g.replication.log.last_seq), group))

    def answered(self, frame: BarrierAt, group: int, now: float, out: list[Action]) -> None:
        read = self.reads.get(frame.nonce)
        if read is not None and read.at.get(group, ()) is None:
            read.at[group] = (frame.epoch, frame.seq)
            self.settle(now, out)

    def settle(self, now: float, out: list[Action]) -> None:
        """Run every read whose barriers this node's replicas have passed."""
        for nonce in [n for n, r in self.reads.items() if all(self._passed(g, at, now) for g, at in r.at.items())]:
            read = self.reads.pop(nonce)
            self.node.run_in_group(read.token, read.command, now, read.group, out)

    def tick(self, now: float, out: list[Action]) -> None:
        """Ask again where no answer came; refuse the reads that waited out ``election_max``."""
        self.settle(now, out)
        for nonce, read in list(self.reads.items()):
            if now >= read.deadline:
                del self.reads[nonce]
                late = [g for g, at in read.at.items() if not self._passed(g, at, now)]
                out.append(Answer(read.token, None, NotServing(
                    f"Node {self.node.name} cannot read group {late[0]}: no answer from its master within "
                    "election-max, so what it acknowledged is unknown here.")))
            else:
                self._ask(nonce, read, now, out)

    def stop(self, reason: str, out: list[Action]) -> None:
        """The node stops: nothing ran for the waiting reads, so their clients may retry."""
        for read in self.reads.values():
            out.append(Answer(read.token, None, NotServing(reason)))
        self.reads.clear()

    # -- internals ---------------------------------------------------------------------------------

    def _ask(self, nonce: int, read: _Read, now: float, out: list[Action]) -> None:
        node = self.node
        again = node.timing.heartbeat
        for g, at in read.at.items():
            if at is not None or now - read.asked.get(g, float("-inf")) < again:
                continue
            master = node.groups[g].mastery.master   # type: ignore[union-attr]
            if master is not None and master != node.name and node.liveness.connected(master):
                read.asked[g] = now
                out.append(Send(master, Barrier(nonce), g))

    def _passed(self, group: int, at: tuple[int, int] | None, now: float) -> bool:
        g = self.node.groups[group]
        if g.serving_now(now):
            return True
        if at is None:
            return False
        epoch, seq = at
        rc = g.replication
        return rc.following()[1] >= epoch and rc.log.last_seq >= seq
