"""The mutating cluster admin routes, served on the SQS endpoint's port (cluster/node.py's routes):

    POST   /cluster/step-down        hand over mastership (409 if this node is not the master);
                                     body {"to": "NAME"}, and {"group": N} for one replication group
    POST   /cluster/members          body {"name", "raft", "stream"}: add a member (run on the master)
    DELETE /cluster/members/NAME     remove a member (run on the master)

Read-only routes (GET /cluster, /health, /metrics and the dashboard, /ui) are open, like the
SQS API. These three change the cluster, so a caller must both come from an allowed address
(``admin-from`` in [cluster] or ``from`` in [admin]; loopback only by default, 403 otherwise) and
present the admin secret (the cluster secret unless [admin] sets one) in the ``X-Cluster-Secret``
header (401 otherwise). The secret travels in clear text: expose the admin routes beyond
loopback only on a trusted network or behind TLS.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
from typing import Any, Iterable

from cluster.config import ConfigError as ClusterConfigError
from cluster.config import NodeSpec

from elasticmq_py.protocol.wire import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Cluster-Secret"
_JSON = (("Content-Type", "application/json"),)


def _reply(status: int, payload: Any) -> HttpResponse:
    return HttpResponse(status, _JSON, json.dumps(payload).encode())


class AllowFrom:
    """``admin-from``: whether a peer address may call the admin routes or act in the console."""

    def __init__(self, allow_from: Iterable[str]) -> None:
        self._nets = tuple(ipaddress.ip_network(a, strict=False) for a in allow_from)

    def __call__(self, peer: str | None) -> bool:
        if peer is None:
            return False
        try:
            addr = ipaddress.ip_address(peer.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return any(addr.version == n.version and addr in n for n in self._nets)


class ClusterAdmin:
    def __init__(self, backend: Any, secret: str, allow_from: Iterable[str]) -> None:
        self.backend = backend          # a ClusterBackend: step_down / add_member / remove_member
        self._secret = secret.encode()
        self.allowed_peer = AllowFrom(allow_from)

    async def handle(self, req: HttpRequest) -> HttpResponse:
        if not self.allowed_peer(req.peer):
            log.warning("admin %s %s refused: %s is not in admin-from", req.method, req.path, req.peer)
            return _reply(403, {"error": f"admin calls are not accepted from {req.peer}"})
        given = req.headers.get(SECRET_HEADER.lower(), "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.warning("admin %s %s from %s refused: %s", req.method, req.path, req.peer,
                        "wrong cluster secret" if given else "no cluster secret")
            return _reply(401, {"error": f"the cluster secret is required in the {SECRET_HEADER} header"})
        try:
            status, payload = await self._route(req)
        except asyncio.TimeoutError:
            status, payload = 409, {"error": "timed out (is this node the master, and is a majority reachable?)"}
        except Exception as e:  # an admin call must never take the node down
            log.exception("admin %s %s failed", req.method, req.path)
            status, payload = 500, {"error": str(e)}
        log.info("admin %s %s from %s: %d", req.method, req.path, req.peer, status)
        return _reply(status, payload)

    async def _route(self, req: HttpRequest) -> tuple[int, Any]:
        method, path = req.method, req.path
        if path == "/cluster/step-down":
            if method != "POST":
                return 405, {"error": "use POST"}
            try:
                body = json.loads(req.body or b"{}")
                to, group = body.get("to"), body.get("group")
            except (ValueError, AttributeError):
                return 400, {"error": 'the body is JSON: {}, {"to": "NAME"}, {"group": N, "to": "NAME"}'}
            if to is not None and not isinstance(to, str):
                return 400, {"error": '"to" names a member'}
            if group is not None:
                groups = len(self.backend.status().groups) or 1
                if type(group) is not int or not 0 <= group < groups:
                    return 400, {"error": f'"group" is a group of this cluster: 0 to {groups - 1}'}
                if groups > 1:
                    return await self._step_down_group(group, to)
            if await self.backend.step_down(to=to):
                return 200, {"stepped_down": True, **({"to": to} if to else {})}
            master = self.backend.status().master
            return 409, {"error": "not the master, or no follower to hand over to" if to is None else
                         f"not the master, or {to} is no other member connected and caught up", "master": master}
        if path == "/cluster/members":
            if method != "POST":
                return 405, {"error": "use POST"}
            try:
                spec = NodeSpec.from_dict(json.loads(req.body or b"{}"))
            except (ClusterConfigError, ValueError, TypeError) as e:
                return 400, {"error": str(e)}
            try:
                await self.backend.add_member(spec)
            except RuntimeError as e:
                return 409, {"error": str(e)}
            return 200, {"added": spec.name}
        if path.startswith("/cluster/members/"):
            if method != "DELETE":
                return 405, {"error": "use DELETE"}
            name = path.rsplit("/", 1)[1]
            try:
                await self.backend.remove_member(name)
            except RuntimeError as e:
                return 409, {"error": str(e)}
            return 200, {"removed": name}
        return 404, {"error": f"no route {method} {path}"}


    async def _step_down_group(self, group: int, to: str | None) -> tuple[int, Any]:
        """A step-down of one replication group: its master hands it over (to ``to``, or to a
        caught-up replica) and answers once a view moved it. (With one group, group 0 is the
        whole cluster's step-down.)"""
        if await self.backend.step_down(to=to, group=group):
            return 200, {"stepped_down": True, "group": group, "to": self.backend.status().groups[group].master}
        master = self.backend.status().groups[group].master
        return 409, {"error": f"not the master of group {group}, or no replica caught up to hand it over to"
                     if to is None else f"not the master of group {group}, or {to} is no other member "
                     "connected and caught up", "master": master}


def not_a_cluster(req: HttpRequest) -> HttpResponse:
    return _reply(404, {"error": "this server is a single node: it has no [cluster] configuration"})
