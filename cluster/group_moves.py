"""A group master's moves to and from other groups, sans-I/O: the move driver bound to a group core.

With several groups (``[cluster] groups``) a dead-letter move or a move task's step into a queue
of another group leaves its source through the source group's outbox (storage/outbox.py), and
``MoveDriver`` (cluster/moves.py) takes it to the destination group in idempotent steps. This
binds one group's driver to its group core (cluster/group_core.py) and gives the driver what its
docstring asks of the caller:

* a driver runs only while this node is the group's serving master, and a new one per epoch
  (a mastership): a lapse of the lease within an epoch keeps the driver, and with it the moves
  it refused as destination, which a re-offer must find refused again;
* each tick first cuts the staged operations into the log, so that the log's last seq covers
  every mutation executed here, then passes that seq and the seq committed under ``majority``;
* an ``Execute`` runs at once as an internal operation under ``majority`` (whatever the queue's
  or the cluster's ack policy: exactly once needs it) and is reported back before anything else
  reaches the driver;
* a step that puts a message in a queue (an adopt, a return) says so (``MessagesArrived``): no
  client's answer wakes the receives parked on it;
* a move frame goes to the driver of the group it came for (``frame``); a ``Send`` to this node
  itself (it masters the other group too) reaches that group's driver here, at once, which keeps
  the order of one sender's frames.

A driver with nothing to do and a group with an empty outbox cost nothing a tick: no cut, no
scan. With one group there is no driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.commands import AdoptMoved, ReturnOutbox
from storage.keys import key_names, parse_arn

from cluster.moves import FRAMES, Destination, Execute, MoveDriver
from cluster.node_actions import Action, MessagesArrived
from cluster.replication.messages import AckPolicy, Send

if TYPE_CHECKING:
    from cluster.group_core import GroupCore

MOVE_FRAMES = frozenset(FRAMES)
_ARRIVALS = (AdoptMoved, ReturnOutbox)   # the steps that put a message in a queue


class GroupMoves:
    def __init__(self, group: GroupCore) -> None:
        self.group = group
        self.driver: MoveDriver | None = None

    def step(self, now: float, out: list[Action]) -> None:
        """Once a tick: the driver's timers, gates and retries."""
        g = self.group
        d = self._driver(now)
        if d is None or (d.idle() and not g.storage.outbox_count()):
            return
        g.cut_staged(now, out)
        rep = g.replication
        committed = rep.master_core.committed(AckPolicy.MAJORITY)   # type: ignore[union-attr]
        self._act(d, d.tick(now, rep.log.last_seq, committed, g.storage), now, out)

    def frame(self, sender: str, frame: Any, now: float, out: list[Action]) -> None:
        """A move frame for this group: its driver's, if this node serves the group (every step
        is retried until answered, so a frame dropped here is sent again)."""
        d = self._driver(now)
        if d is not None:
            self._act(d, d.frame(sender, frame), now, out)

    def _driver(self, now: float) -> MoveDriver | None:
        g = self.group
        if g.mastery is None or not g.serving_now(now):
            return None
        epoch = g.mastery.epoch
        d = self.driver
        if d is None or d.epoch != epoch:
            d = self.driver = MoveDriver(g.index, epoch, self._master_of)
        return d

    def _master_of(self, dst_arn: str) -> Destination | None:
        """Where the moves to the queue ``dst_arn`` go: its group's master in the committed view."""
        node = self.group.node
        key = parse_arn(dst_arn)
        group = node.directory.group_of(key_names(key)) if key is not None else None
        view = node.view
        if group is None or view is None or group >= len(view.groups):
            return None
        master, epoch = view.groups[group]
        return Destination(group, master, epoch) if master is not None else None

    def _act(self, d: MoveDriver, actions: list[Any], now: float, out: list[Action]) -> None:
        g = self.group
        node = g.node
        for a in actions:
            t = type(a)
            if t is Execute:
                command = a.command
                d.executed(command, g.execute_internal(command, AckPolicy.MAJORITY, now, out))
                if type(command) in _ARRIVALS:
                    out.append(MessagesArrived())
            elif t is Send and a.to == node.name:
                node.groups[a.group].moves.frame(node.name, a.frame, now, out)
            else:
                out.append(a)
