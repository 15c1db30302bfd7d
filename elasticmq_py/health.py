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

With replication groups (``[cluster] groups`` >= 2) each group has its own master, and
``from_routes`` answers from the gating of every group: ``GET /health`` is 200 on a member that
serves or forwards every group (a client's queue may be in any of them), ``role=master`` is 200
on a member that is the active master of at least one group. The body then lists each group's
``{"group", "serves", "master"}``, and a member whose views say another number of groups
(``groups_mismatch``) answers 503 whatever its routes.
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
    groups: tuple[dict[str, Any], ...] = ()    # several groups: how each is served


    @property
    def status_code(self) -> int:
        return 200 if self.ok else 503

    def to_json(self) -> dict[str, Any]:
        return {"status": "ok" if self.ok else "unavailable", "role": self.role.value, "node": self.node,
                "serves": self.serves.value, "master": self.master, "reason": self.reason,
                **({"groups": list(self.groups)} if self.groups else {})}

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


def from_routes(node: str, routes: list[Route], role: Role, masters: list[str | None],
                mismatch: str | None) -> Health:
    """Several groups: ``routes`` and ``masters`` per group; ``mismatch``: the membership's
    ``groups_mismatch``."""
    serves = [Serves.ITSELF if type(r) is Local else Serves.FORWARDING if type(r) is ForwardTo else Serves.NO
              for r in routes]
    groups = tuple({"group": g, "serves": s.value, "master": masters[g]} for g, s in enumerate(serves))
    mastered = [g for g, s in enumerate(serves) if s is Serves.ITSELF]

    def answer(ok: bool, how: Serves, reason: str) -> Health:
        return Health(ok, role, node, how, node if mastered else None, reason, groups)

    if mismatch is not None:
        return answer(False, Serves.NO, f"Node {node} disagrees with the cluster on the number of groups: {mismatch}.")
    if role is Role.MASTER:
        if mastered:
            return answer(True, Serves.ITSELF, f"Node {node} is the active master of group(s) "
                                               f"{', '.join(map(str, mastered))}.")
        return answer(False, Serves.NO, f"Node {node} is the active master of no group. "
                                        "Only an active master answers role=master with 200.")
    refused = [g for g, s in enumerate(serves) if s is Serves.NO]
    if refused:
        return answer(False, Serves.NO, " ".join(routes[g].reason for g in refused))   # type: ignore[union-attr]
    if len(mastered) == len(routes):
        return answer(True, Serves.ITSELF, f"Node {node} is the active master of every group.")
    return answer(True, Serves.FORWARDING, f"Node {node} serves group(s) {', '.join(map(str, mastered)) or 'none'} "
                                           "itself and forwards the others to their masters.")


def single_node(node: str, role: Role) -> Health:
    """A server without [cluster]: always its own active master."""
    return Health(True, role, node, Serves.ITSELF, node, f"Node {node} is a single node: it executes client calls.")
