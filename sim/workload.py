"""What the simulated clients do: the workload interface, our own workload, and loading a user's.

A *workload factory* is a callable ``factory(scenario) -> Workload``, called once per simulated
run (in the Spark executor that runs the seed). A ``Workload`` has two methods:

* ``queues() -> list[CreateQueue]``: the queues a setup client creates through the cluster
  before any client starts; the drain empties them after the faults.
* ``draw(client) -> (kind, params)``: a client's next operation, one of

  ====================  =====================================================================
  ``"send"``            ``{"queue": name}``, plus ``"group": id`` on a FIFO queue (the client
                        adds the token that identifies the message, and on FIFO queues uses it
                        as the deduplication id)
  ``"send_batch"``      ``{"queue": name, "count": 1..10}``, plus ``"group"`` on a FIFO queue:
                        one SendMessageBatch of that many messages, each with its own token
  ``"receive"``         ``{"queue": name, "max": 1..10, "vt": seconds or None}`` (None: the
                        queue's visibility timeout)
  ``"delete"``          ``{"held": h}``: ``h`` one of ``client.held``, removed from it
  ``"change_visibility"`` ``{"held": h, "vt": seconds}``
  ``"create_queue"``    ``{"queue": name}``: a CreateQueue of a new standard queue
  ``"list_queues"``     ``{"queue": prefix}``: a ListQueues of the names with that prefix
  ====================  =====================================================================

  ``client`` is the ``sim.clients.Client`` asking: draw randomness only from ``client.rng``
  (seeded from the run's seed, so a seed replays), read ``client.held`` (the receipts it keeps:
  queue, receipt, message_id, token, until_us), ``client.name`` and ``client.world.now`` (µs).

``standard`` (``sim.workload:standard``) is the simulator's own workload. A user's factory
(``sim run --workload module:function``) reaches the executors as sim/shipped.py describes.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from cluster.queue_policies import POLICY_TAG
from storage.commands import CreateQueue, Namespace

if TYPE_CHECKING:
    from sim.clients import Client
    from sim.scenario import Scenario

NS = Namespace()
STD = "sim-std"
FIFO = "sim-ordered.fifo"
QUEUE_VISIBILITY_S = 5          # the queues' default VisibilityTimeout
KINDS = ("send", "send_batch", "receive", "delete", "change_visibility", "create_queue", "list_queues")
# With replication groups, this share of a client's operations creates a queue or lists them
# (half each): the queues created meanwhile land in every group, and a list reads them all.
QUEUE_OPS = 0.02
NEW_PREFIX = "sim-new-"
# With replication groups: a queue whose dead-letter queue is in another group (placement
# alternates, so the dead-letter queue, created first, lands in another group than its source)
REDRIVEN = "sim-redriven"
DEAD = "sim-dead"
MAX_RECEIVES = 1                # the source's maxReceiveCount: a message received again moves


class Workload(Protocol):
    def queues(self) -> Sequence[CreateQueue]: ...

    def draw(self, client: "Client") -> tuple[str, dict[str, Any]]: ...


class StandardWorkload:
    """Standard and FIFO sends over several message groups, receives, deletes and visibility
    changes, in the scenario's mix (sim/scenario.py draws it from the seed)."""

    def __init__(self, scenario: "Scenario") -> None:
        self.mix = scenario.mix
        self.groups = scenario.fifo_groups
        self.std_tags = {POLICY_TAG: scenario.queue_policy} if scenario.queue_policy else {}
        # With replication groups, a standard queue more for each group past the second: queues
        # are placed in the least-loaded group as they are created, so every group holds one.
        self.std = (STD,) + tuple(f"{STD}-{g}" for g in range(2, scenario.groups))
        # ... and a dead-letter pair across groups: clients send to and receive from the source,
        # and receive from the dead-letter queue (which nobody sends to: what it holds was moved)
        self.moves = scenario.groups > 1
        self.sent_to = self.std + ((REDRIVEN,) if self.moves else ())
        self.received_from = self.sent_to + ((DEAD,) if self.moves else ())
        # ... and the queue operations draw from a stream of their own per client, so that the
        # other operations are drawn as without them
        self.queue_ops: dict[str, random.Random] | None = {} if scenario.groups > 1 else None
        self.seed = scenario.seed
        self.created = 0
        self.list_next: set[str] = set()

    def queues(self) -> list[CreateQueue]:
        vt = {"VisibilityTimeout": str(QUEUE_VISIBILITY_S)}
        out = [CreateQueue(NS, STD, vt, self.std_tags), CreateQueue(NS, FIFO, {"FifoQueue": "true", **vt})] + \
            [CreateQueue(NS, q, vt, self.std_tags) for q in self.std[1:]]
        if self.moves:
            policy = json.dumps({"deadLetterTargetArn": NS.key(DEAD).arn, "maxReceiveCount": MAX_RECEIVES})
            out += [CreateQueue(NS, DEAD, vt, self.std_tags),
                    CreateQueue(NS, REDRIVEN, {**vt, "RedrivePolicy": policy}, self.std_tags)]
        return out

    def _std(self, client: "Client", pool: tuple[str, ...]) -> str:
        # one group: no draw, as a run without groups always drew
        return STD if len(pool) == 1 else client.rng.choice(pool)

    def draw(self, client: "Client") -> tuple[str, dict[str, Any]]:
        if self.queue_ops is not None:
            qrng = self.queue_ops.get(client.name)
            if qrng is None:
                qrng = self.queue_ops[client.name] = random.Random(f"queue-ops:{self.seed}:{client.name}")
            if client.name in self.list_next or qrng.random() < QUEUE_OPS:
                # a create is followed by a list: read-your-writes, the list read on another group's master
                if client.name in self.list_next or qrng.random() < 0.5:
                    self.list_next.discard(client.name)
                    return "list_queues", {"queue": NEW_PREFIX}
                self.created += 1
                self.list_next.add(client.name)
                return "create_queue", {"queue": f"{NEW_PREFIX}{self.created}"}
        rng = client.rng
        kinds = sorted(self.mix)
        kind = rng.choices(kinds, [self.mix[k] for k in kinds])[0]
        if kind in ("delete", "change_visibility") and not client.held:
            kind = "receive" if rng.random() < 0.5 else "receive_fifo"
        if kind == "send":
            return "send", {"queue": self._std(client, self.sent_to)}
        if kind == "send_fifo":
            return "send", {"queue": FIFO, "group": f"g{rng.randrange(self.groups)}"}
        if kind == "send_batch":
            if rng.random() < 0.5:
                return "send_batch", {"queue": self._std(client, self.sent_to), "count": rng.randint(1, 10)}
            return "send_batch", {"queue": FIFO, "count": rng.randint(1, 10), "group": f"g{rng.randrange(self.groups)}"}
        if kind in ("receive", "receive_fifo"):
            return "receive", {"queue": FIFO if kind == "receive_fifo" else self._std(client, self.received_from),
                               "max": rng.choice((1, 1, 2, 5, 10)), "vt": rng.choice((None, None, 1, 2, 10))}
        held = client.held
        h = held.pop(0) if rng.random() < 0.7 else held.pop(rng.randrange(len(held)))
        if kind == "delete":
            return "delete", {"held": h}
        return "change_visibility", {"held": h, "vt": rng.choice((0, 1, 3, 10))}


def standard(scenario: "Scenario") -> StandardWorkload:
    return StandardWorkload(scenario)


def workload_for(scenario: "Scenario", factory: Callable[["Scenario"], Workload] | None) -> Workload:
    """The run's workload: the user's factory's, or ours; checked for the interface."""
    w = (factory or standard)(scenario)
    for method in ("queues", "draw"):
        if not callable(getattr(w, method, None)):
            raise TypeError(f"the workload factory returned {type(w).__name__}, which has no {method}() method "
                            "(sim/workload.py describes the interface)")
    return w
