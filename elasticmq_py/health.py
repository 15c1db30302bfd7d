"""What ``GET /health`` answers: can this node serve a client, and is it the active master.

A load balancer in front of a cluster wants one of two questions answered:

* ``GET /health`` (role ``any``): will a client sent to this node be served? Yes on the active
  master, and on any other member that forwards to a master it can reach and hears from. 200,
  else 503 with the reason.
* ``GET /health?role=master``: is this node the active master? 200 there only, 503 elsewhere
  (for a pool that should send traffic to the master alone, e.g. with ``forward = false``).

Whether a member serves a client itself, forwards it or refuses it is the node core's gating
decision (``NodeCore.route``, cluster/node_core.py); ``from_route`` only says it the way a load
balancer reads it.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

from cluster.node_actions import ForwardTo, Local, Route


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


def from_route(node: str, route: Route, role: Role, master: str | None, why_not: str) -> Health:
    """``route``: the core's gating now; ``why_not``: its account of why this node is not the
    active master (for ``role=master`` on a member that forwards)."""
    def answer(ok: bool, serves: Serves, reason: str) -> Health:
        return Health(ok, role, node, serves, master, reason)

    t = type(route)
    if t is Local:
        return answer(True, Serves.ITSELF, f"Node {node} is the active master: it executes client calls.")
    if role is Role.MASTER:
        return answer(False, Serves.NO, f"{why_not} Only the active master answers role=master with 200.")
    if t is ForwardTo:
        return answer(True, Serves.FORWARDING, f"Node {node} forwards client calls to the active master "
                                               f"{route.master}.")
    return answer(False, Serves.NO, route.reason)


def single_node(node: str, role: Role) -> Health:
    """A server without [cluster]: always its own active master."""
    return Health(True, role, node, Serves.ITSELF, node, f"Node {node} is a single node: it executes client calls.")
