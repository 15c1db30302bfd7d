"""What the node core (cluster/node_core.py) says to its runtimes: the gating verdict for a client
request (``Route``) and the actions its events return (``Action``).

The runtimes carry the actions out and do nothing else with them: cluster/replicated.py on the
event loop, ZeroMQ and pysyncobj's thread; cluster/standalone.py for a single journaled node;
sim/node.py on the simulated network, disk and clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import msgspec

from cluster.compaction import Snapshot
from cluster.membership import Record
from cluster.replication.core import StorageReplaced
from cluster.replication.log import Entry
from cluster.replication.messages import Rejected, Send


# -- what gating says ---------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Local:
    """This node is the active master: it answers itself."""


@dataclass(frozen=True, slots=True)
class ForwardTo:
    master: str


@dataclass(frozen=True, slots=True)
class Refuse:
    reason: str


Route = Union[Local, ForwardTo, Refuse]
LOCAL = Local()


# -- actions for the runtimes -------------------------------------------------------------------

class Answer(msgspec.Struct, frozen=True):
    """The outcome of the client operation ``token``: its result, or the error to tell.

    A Struct rather than a dataclass like its siblings: one is made per client operation, and a
    frozen dataclass's ``__init__`` is a Python call setting each field through
    ``object.__setattr__``; a Struct is built in C."""

    token: Any
    result: Any
    error: BaseException | None
    changed: bool = False     # it changed the state (parked long polls may find something)


@dataclass(frozen=True, slots=True)
class ForwardAnswered:
    token: Any
    payload: Any


@dataclass(frozen=True, slots=True)
class ForwardFailed:
    token: Any
    reason: str
    sent: bool                # it reached the master, which may have executed it


@dataclass(frozen=True, slots=True)
class ServeForwarded:
    """Another member hands us a client request: answer with ``ForwardReply(request_id, ...)``."""

    sender: str
    request_id: int
    payload: Any
    group: int = 0     # the group the forwarder routed it to


@dataclass(frozen=True, slots=True)
class ToRaft:
    """For the Raft thread: a ``ProposeView``, ``ProposePlacement``, ``MayStand``, ``FenceDone`` or
    ``TransferLeadership``."""

    action: Any


@dataclass(frozen=True, slots=True)
class ProposePlacement:
    """The Raft leader proposes a placement of the queue ``key`` among ``groups`` groups
    (cluster/directory.py): a member's ``Place`` frame, or a CreateQueue it serves itself."""

    key: tuple[str, str, str]
    groups: int


@dataclass(frozen=True, slots=True)
class Placed:
    """The queue a waiting CreateQueue (``token``, given to ``NodeCore.place``) names is placed
    in ``group``: run it there."""

    token: Any
    group: int


@dataclass(frozen=True, slots=True)
class PlaceFailed:
    """No placement of the queue a waiting CreateQueue (``token``) names was committed in time:
    its client gets a retryable refusal; nothing was executed."""

    token: Any


@dataclass(frozen=True, slots=True)
class MayStand:
    allowed: bool
    why: str = ""


@dataclass(frozen=True, slots=True)
class FenceDone:
    term: int


@dataclass(frozen=True, slots=True)
class TransferLeadership:
    """Hand Raft leadership to ``to``, or to the most caught-up follower (an operator's step-down)."""

    to: str | None = None


@dataclass(frozen=True, slots=True)
class ServingChanged:
    on: bool


@dataclass(frozen=True, slots=True)
class ThrottleChanged:
    on: bool


@dataclass(frozen=True, slots=True)
class MessagesArrived:
    """Messages arrived in a queue of this node's storage with no client's operation to say so
    (moved in from another group, or returned to their source): parked receives check again."""


@dataclass(frozen=True, slots=True)
class Warn:
    """Something for the operator's log (the runtime rate-limits it)."""

    text: str


@dataclass(frozen=True, slots=True)
class Persist:
    """Journal these log entries (in order, after every earlier Persist); say ``persisted(token)``
    once they are as durable as the journal's fsync policy promises."""

    token: int
    entries: tuple[Entry, ...]
    group: int = 0     # the replication group whose log they are


@dataclass(frozen=True, slots=True)
class PersistReset:
    """A state transfer replaced the state: the journal starts a new history from this snapshot
    (the chunks' records) at (seq, epoch); say ``persisted(token)`` once it is durable."""

    token: int
    seq: int
    epoch: int
    blobs: tuple[bytes, ...]
    group: int = 0


@dataclass(frozen=True, slots=True)
class ForgetDropped:
    """The node, amnesiac because `journal truncate` dropped entries it may have acknowledged,
    was brought up to date and its journal holds that durably: remove the truncate's marker
    (``Journal.forget_dropped``), so that the next restart is not amnesiac."""


@dataclass(frozen=True, slots=True)
class FlushDue:
    """Call ``flush`` at the end of this turn of the loop, or (``at``, this core's clock in
    seconds) at that time."""

    at: float | None = None


Action = Union[Send, Answer, ForwardAnswered, ForwardFailed, ServeForwarded, ToRaft, ServingChanged,
               ThrottleChanged, MessagesArrived, FlushDue, Warn, StorageReplaced, Record, Rejected, Persist, PersistReset, Snapshot,
               ForgetDropped]
