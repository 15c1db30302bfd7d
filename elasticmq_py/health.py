"""What ``GET /health`` answers: can this node serve a client, and is it the active master.

A load balancer in front of a cluster wants one of two questions answered:

* ``GET /health`` (role ``any``): will a client sent to this node be served? Yes on the active
  master, and on any other member that forwards to a master it can reach and hears from. 200,
  else 503 with the reason.
* ``GET /health?role=master``: is this node the active master? 200 there only, 503 elsewhere
  (for a pool that should send traffic to the master alone, e.g. with ``forward = false``).

The decision is ``judge``, a pure function of a node's ``NodeFacts``; each backend gathers the
facts from its own state (``LocalBackend.health``, ``ClusterBackend.health``).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any


class Role(enum.Enum):
    ANY = "any"          # serves clients, by itself or by forwarding
    MASTER = "master"    # is the active master

    @classmethod
    def parse(cls, value: str | None) -> "Role":
        """``None`` (no ``role`` parameter) is ANY; an unknown value raises ValueError."""
        if value is None or value == "":
            return cls.ANY
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown role {value!r}: use role=master, role=any or no role") from None


class Serves(enum.Enum):
    ITSELF = "itself"          # executes client calls here (the active master, or a single node)
    FORWARDING = "forwarding"  # hands them to the active master and relays its answer
    NO = "no"


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What a member knows of itself that decides its health."""

    node: str
    serving: bool              # the active master, synchronised: executes client calls
    why_not: str               # the node's own account of why it does not serve, when it does not
    forward: bool              # [cluster.replication] forward
    master: str | None         # the master of the view this node has installed
    master_linked: bool        # its mutation-stream link to that master is up
    master_heard: bool         # Raft: it heard from that master, as leader, within an election timeout


@dataclass(frozen=True, slots=True)
class Health:
    ok: bool
    role: Role
    node: str
    serves: Serves
    master: str | None
    reason: str

    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503

    def to_json(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "unavailable", "role": self.role.value, "node": self.node,
                "serves": self.serves.value, "master": self.master, "reason": self.reason}

    def body(self) -> bytes:
        return json.dumps(self.to_json()).encode()


def judge(f: NodeFacts, role: Role) -> Health:
    def answer(ok: bool, serves: Serves, reason: str) -> Health:
        return Health(ok, role, f.node, serves, f.master, reason)

    if f.serving:
        return answer(True, Serves.ITSELF, f"Node {f.node} is the active master: it executes client calls.")
    if role is Role.MASTER:
        return answer(False, Serves.NO, f"{f.why_not} Only the active master answers role=master with 200.")
    if not f.forward:
        return answer(False, Serves.NO, f"{f.why_not} Forwarding is off (forward = false): this node answers "
                                        "SQS calls with 503.")
    if f.master is None or f.master == f.node:
        return answer(False, Serves.NO, f.why_not)
    if not f.master_linked:
        return answer(False, Serves.NO, f"Node {f.node} cannot reach the master {f.master} "
                                        "(its mutation-stream link is down), so it cannot forward.")
    if not f.master_heard:
        return answer(False, Serves.NO, f"Node {f.node} has not heard from the master {f.master} within an "
                                        "election timeout: the master may have lost its majority.")
    return answer(True, Serves.FORWARDING, f"Node {f.node} forwards client calls to the active master {f.master}.")


def single_node(node: str, role: Role) -> Health:
    """A server without [cluster]: always its own active master."""
    return Health(True, role, node, Serves.ITSELF, node, f"Node {node} is a single node: it executes client calls.")
