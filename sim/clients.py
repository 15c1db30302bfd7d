"""Simulated SQS clients: each one issues operations one at a time and records every attempt as
a ``client_op`` line (cluster/HISTORY.md), with the outcome a real client would conclude. What
the operations are is the run's workload (sim/workload.py: ours, or a user's).

* ok: the node answered success (it executed the operation and its ack policy was met);
* failed: the node answered that it did not execute it (ServiceUnavailable from a node that is
  not the serving master, throttling, or an SQS error such as an expired receipt handle);
* unknown: no answer within ``TIMEOUT_US`` (the node crashed or is cut off), or the node said the
  outcome is unknown (the view changed or it lost its quorum while the operation waited).

A client follows the master hint in a ServiceUnavailable answer, moves on to the next node after
a timeout, and retries a send with the same token (and, on FIFO queues, the same deduplication
id) after a failure or an unknown outcome, as a careful real client does. Receipts from ok
receives are kept for later deletes and visibility changes; some are used after their window
ended (stale handles are part of SQS).

The drain client runs after the workload and the faults: it receives (visibility timeout 30 s)
and deletes until every queue is empty, so that every message still stored is seen once more.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from storage.commands import (
    ChangeMessageVisibility, CreateQueue, DeleteMessage, ListQueues, QueueKey, ReceiveMessage, SendMessage,
    SendMessageBatch, SendMessageBatchEntry,
)

from cluster.checker.schema import ClientOp, NodeEvent, ReceivedMessage

from sim.workload import KINDS, NS, QUEUE_VISIBILITY_S, Workload

if TYPE_CHECKING:
    from sim.world import World

TIMEOUT_US = 2_000_000          # a client gives up on an answer after 2 s
DRAIN_VISIBILITY_S = 30
CONSUME = 0.8                   # share of received messages a client deletes right away


def queue_key(name: str) -> QueueKey:
    return NS.key(name)


@dataclass
class Request:
    """One attempt in flight; ``fields`` become the ClientOp line."""
    client: "Client"
    node: str
    command: Any
    kind: str
    fields: dict[str, Any]
    sent_us: int
    done: bool = False
    logical: tuple[str, dict[str, Any], int] | None = None   # (kind, params, attempt) for retries


@dataclass
class Held:
    queue: str
    receipt: str
    message_id: str
    token: str
    until_us: int


@dataclass
class Client:
    world: "World"
    name: str
    rng: random.Random
    workload: Workload | None       # None: the setup and drain clients, which choose their own
    think_us: float
    phase: str | None = None
    target: int = 0
    ops: int = 0
    tokens: int = 0
    held: list[Held] = field(default_factory=list)
    todo: list[tuple[str, dict[str, Any]]] = field(default_factory=list)   # deletes of what it consumed
    idle: bool = False
    recorded: bool = True    # False for the setup client: its operations are not checked ops

    def start(self, delay_us: int) -> None:
        self.target = self.rng.randrange(len(self.world.names))
        self.world.at(self.world.now + delay_us, self._next, None)

    # --- choosing the next operation -------------------------------------------------------------

    def _draw(self) -> tuple[str, dict[str, Any]]:
        now = self.world.now
        self.held = [h for h in self.held if now - h.until_us < 5_000_000]
        kind, params = self.workload.draw(self)
        if kind not in KINDS or not isinstance(params, dict):
            raise ValueError(f"the workload drew {kind!r}, {params!r}: the kinds are {', '.join(KINDS)} "
                             "with a dict of parameters (sim/workload.py)")
        if kind == "send":
            params = {**params, "token": self._token()}
        elif kind == "send_batch":
            params = {**params, "tokens": [self._token() for _ in range(params["count"])]}
        return kind, params

    def _token(self) -> str:
        self.tokens += 1
        return f"{self.name}-t{self.tokens}"

    def _next(self, logical: tuple[str, dict[str, Any], int] | None) -> None:
        w = self.world
        if logical is None:
            if w.stopping:
                self.idle = True
                w.client_idle()
                return
            kind, params = self.todo.pop(0) if self.todo else self._draw()
            logical = (kind, params, 1)
        self._issue(*logical)

    # --- issuing ------------------------------------------------------------------------------------

    def _issue(self, kind: str, params: dict[str, Any], attempt: int) -> None:
        w = self.world
        self.ops += 1
        q = params.get("queue") or params["held"].queue
        f: dict[str, Any] = {"op_id": f"{self.name}-{self.ops}", "op": kind, "queue": q}
        key = queue_key(q)
        if kind == "send":
            token = params["token"]
            group = params.get("group")
            cmd = SendMessage(key, token, group_id=group, deduplication_id=token if group else None)
            f.update(token=token, body=token, group=group, dedup=token if group else None)
        elif kind == "send_batch":
            group = params.get("group")
            cmd = SendMessageBatch(key, tuple(
                SendMessageBatchEntry(f"e{i}", t, group_id=group, deduplication_id=t if group else None)
                for i, t in enumerate(params["tokens"])))
            f.update(group=group)
        elif kind == "receive":
            vt = params["vt"]
            cmd = ReceiveMessage(key, max_number_of_messages=params["max"], visibility_timeout=vt,
                                 system_attribute_names=("All",))
            f.update(visibility_timeout=float(vt if vt is not None else QUEUE_VISIBILITY_S),
                     max_messages=params["max"])
        elif kind == "delete":
            h: Held = params["held"]
            cmd = DeleteMessage(key, h.receipt)
            f.update(receipt=h.receipt, token=h.token, message_id=h.message_id)
        elif kind == "change_visibility":
            h = params["held"]
            cmd = ChangeMessageVisibility(key, h.receipt, params["vt"])
            f.update(receipt=h.receipt, token=h.token, message_id=h.message_id,
                     visibility_timeout=float(params["vt"]))
        elif kind == "create_queue":
            cmd = CreateQueue(NS, q, {"VisibilityTimeout": str(QUEUE_VISIBILITY_S)})
        elif kind == "list_queues":
            cmd = ListQueues(NS, q)
        else:
            cmd = params["command"]     # setup: CreateQueue
        node = w.names[self.target]
        req = Request(self, node, cmd, kind, f, w.now, logical=(kind, params, attempt))
        w.send_request(req)

    # --- outcomes ---------------------------------------------------------------------------------------

    def done(self, req: Request, outcome: str, result: Any, error: str | None, hint: str | None) -> None:
        w = self.world
        kind, params, attempt = req.logical  # type: ignore[misc]
        f = req.fields
        if outcome == "ok":
            if kind == "send":
                f["message_id"] = result.message_id
                if result.sequence_number is not None:
                    f["seq"] = str(result.sequence_number)
            elif kind == "receive":
                vt = params["vt"] if params["vt"] is not None else QUEUE_VISIBILITY_S
                msgs = []
                for m in result.messages:
                    a = m.attributes
                    rc = a.get("ApproximateReceiveCount")
                    msgs.append(ReceivedMessage(m.message_id, m.body, m.receipt_handle, a.get("MessageGroupId"),
                                                a.get("SequenceNumber"), None if rc is None else int(rc)))
                    h = Held(params["queue"], m.receipt_handle, m.message_id, m.body, w.now + vt * 1_000_000)
                    if self.phase == "drain":
                        self.held.append(h)
                    elif self.rng.random() < CONSUME:
                        # a consumer deletes what it processed; the rest it lets expire, deletes
                        # late, or holds on to with visibility changes
                        self.todo.append(("delete", {"held": h}))
                    else:
                        self.held.append(h)
                f["messages"] = tuple(msgs)
            elif kind == "change_visibility":
                h = params["held"]
                h.until_us = w.now + params["vt"] * 1_000_000
                if params["vt"]:
                    self.held.append(h)
            elif kind == "list_queues":
                f["listed"] = tuple(sorted(k.name for k in result.queues))
        if self.recorded and kind == "send_batch":
            self._record_batch(req, outcome, result, error)
        elif self.recorded:
            w.record(ClientOp(ts=req.sent_us / 1e6, node=req.node, client=self.name, outcome=outcome,
                              completed=w.now_s, error=error, phase=self.phase, **f))
        retry = None
        if outcome != "ok":
            if error is not None and (error.startswith("ServiceUnavailable") or error.startswith("Throttling")):
                names = w.names
                if hint is not None and hint in names and names.index(hint) != self.target:
                    self.target = names.index(hint)
                else:
                    self.target = (self.target + 1) % len(names)
                if attempt < 8:
                    retry = (kind, params, attempt + 1)
            elif outcome == "unknown":
                self.target = (self.target + 1) % len(w.names)
                if kind in ("send", "send_batch", "setup") and attempt < 4:
                    retry = (kind, params, attempt + 1)
        if retry is not None:
            w.at(w.now + self.rng.randint(10_000, 100_000), self._next, retry)
        else:
            self.after_op(kind, params, outcome)

    def _record_batch(self, req: Request, outcome: str, result: Any, error: str | None) -> None:
        """A batch send as the checker sees sends: one `send` per entry, each with its outcome."""
        w = self.world
        f = req.fields
        _, params, _ = req.logical  # type: ignore[misc]
        ok = {e.id: e for e in result.successful} if outcome == "ok" else {}
        failed = {e.id: e for e in result.failed} if outcome == "ok" else {}
        for i, token in enumerate(params["tokens"]):
            eid = f"e{i}"
            entry: dict[str, Any] = {"token": token, "body": token, "group": f.get("group"),
                                     "dedup": token if f.get("group") else None}
            if eid in ok:
                o, err = "ok", None
                entry["message_id"] = ok[eid].message_id
                if ok[eid].sequence_number is not None:
                    entry["seq"] = str(ok[eid].sequence_number)
            elif eid in failed:
                o, err = "failed", failed[eid].code
            else:
                o, err = outcome, error
            w.record(ClientOp(ts=req.sent_us / 1e6, node=req.node, client=self.name, op_id=f"{f['op_id']}.{i}",
                              op="send", queue=f["queue"], outcome=o, completed=w.now_s, error=err,
                              phase=self.phase, **entry))

    def after_op(self, kind: str, params: dict[str, Any], outcome: str) -> None:
        w = self.world
        w.at(w.now + int(self.rng.expovariate(1.0 / self.think_us)) + 1, self._next, None)


class SetupClient(Client):
    """Creates the queues through the cluster (so that their creation is in the replication log
    like everything else), retrying until the cluster answers; then starts the workload."""

    def __init__(self, world: "World", rng: random.Random, commands: list[Any]) -> None:
        super().__init__(world, "setup", rng, None, 1.0, phase="setup", recorded=False)
        self.commands = list(commands)

    def _next(self, logical: tuple[str, dict[str, Any], int] | None) -> None:
        if logical is None:
            if not self.commands:
                self.world.setup_done()
                return
            logical = ("setup", {"command": self.commands[0], "queue": self.commands[0].name}, 1)
        self._issue(*logical)

    def done(self, req: Request, outcome: str, result: Any, error: str | None, hint: str | None) -> None:
        w = self.world
        if outcome == "ok":
            created = self.commands.pop(0)
            policy = created.attributes.get("RedrivePolicy") if type(created) is CreateQueue else None
            if policy:
                # the checker judges a dead-letter queue with its source (cluster/checker/moves.py)
                dlq = json.loads(policy)["deadLetterTargetArn"].rsplit(":", 1)[1]
                w.record(NodeEvent(w.now_s, w.names[self.target], "redrive", {"queue": created.name,
                                                                             "dead_letter": dlq}))
            w.at(w.now, self._next, None)
            return
        if hint is not None and hint in w.names:
            self.target = w.names.index(hint)
        else:
            self.target = (self.target + 1) % len(w.names)
        w.at(w.now + 50_000, self._next, None)


class DrainClient(Client):
    """Receives and deletes until the cluster holds no message (the world tells it when)."""

    def __init__(self, world: "World", rng: random.Random, queues: list[str]) -> None:
        super().__init__(world, "drain", rng, None, 1.0, phase="drain")
        self.queues = queues
        self.queue_i = 0
        self.empty_rounds = 0

    def _next(self, logical: tuple[str, dict[str, Any], int] | None) -> None:
        w = self.world
        if logical is None:
            if self.held:
                logical = ("delete", {"held": self.held.pop(0)}, 1)
            else:
                if w.drained(self.empty_rounds):
                    self.idle = True
                    w.drain_done()
                    return
                q = self.queues[self.queue_i % len(self.queues)]
                self.queue_i += 1
                logical = ("receive", {"queue": q, "max": 10, "vt": DRAIN_VISIBILITY_S}, 1)
        self._issue(*logical)

    def after_op(self, kind: str, params: dict[str, Any], outcome: str) -> None:
        w = self.world
        if kind == "receive":
            if outcome == "ok" and not self.held:
                self.empty_rounds += 1
            elif outcome == "ok":
                self.empty_rounds = 0
                w.drain_progress_us = w.now
        w.at(w.now + (1 if self.held or kind != "receive" else 200_000), self._next, None)
