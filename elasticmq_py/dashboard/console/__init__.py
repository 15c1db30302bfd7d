"""The operator's console: the dashboard's actions, for an operator who holds the admin secret.

What it adds to the read-only dashboard (elasticmq_py/dashboard/):

* ``GET /ui/queue?region=&account=&name=`` (static/queue.html) and ``GET /ui/api/queue``: one
  queue's page (queue_view.py). Read-only and open, like the rest of the dashboard.
* ``GET /ui/api/session``: whether this node's console can act at all (it has an admin secret),
  whether this browser is logged in, and if so the CSRF token its page sends with each action.
* ``POST /ui/api/login`` (``{"secret": ...}``) and ``POST /ui/api/logout``.
* ``POST /ui/api/actions/ACTION`` (``{"queue": {"region", "account", "name"}, "params": {...}}``):
  send a test message, peek, purge, delete the queue, start and cancel a dead-letter redrive.

The design, and why:

* **An action is an SQS request** (actions.py): the form's fields become the action's SQS
  parameters and go through the JSON protocol's reading and builders into the storage command a
  client's request becomes, then run where a client's would (the node core's route: here on
  the master; forwarded to the master from a replica, over the authenticated stream link; a
  retryable 503 where the node refuses clients). So an action validates, fails and replicates
  exactly as SQS does, on any member, and its answer is SQS's answer. It does not pass through
  the SQS endpoint's HTTP handling: client authentication there (SigV4) is for clients, and the
  operator proved who they are with the admin secret instead.
* **The admin secret** is the one the admin routes take (elasticmq_py/admin.py): on a cluster
  member the cluster secret unless ``[admin] secret`` (or ``secret-file``) sets another; a single
  node has one only from ``[admin]``. Without one nobody can log in and the page says that the
  console is read-only. Logging in posts the secret once (compared with ``hmac.compare_digest``;
  five failures from one address within a minute refuse that address's logins for the rest of
  it, with 429). This node then keeps a random session id -> (expiry, CSRF token) in memory
  (sessions.py) and sets it as an ``HttpOnly; SameSite=Strict; Path=/ui`` cookie, ``Secure``
  where the port serves TLS.
* **Every action and logout** needs, in this order: a peer address in ``admin-from`` (403; the
  admin routes' rule, ``admin.AllowFrom``), a request from this origin (403), a live session
  (401), and the session's CSRF token in ``X-CSRF-Token`` (403); guard.py says why each.
  A login needs the first two.
* **Audit**: every action, refused or done, and every login are written to this node's history
  log as a ``console`` event (cluster/HISTORY.md): who (the peer address), what, which queue,
  the outcome, and the member that executed it when that was another. A cluster member writes
  to its ``[cluster] history``, a single node to ``[admin] history``; the dashboard's event
  list shows them. The master also writes its ``op`` line for the SQS action it executed.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from storage.commands import Namespace, QueueKey

from cluster.history import HistoryWriter

from elasticmq_py.admin import AllowFrom
from elasticmq_py.dashboard.console import actions, guard
from elasticmq_py.dashboard.console.sessions import Session, Sessions
from elasticmq_py.protocol.addressing import base_url
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse
from elasticmq_py.reply import Reply

if TYPE_CHECKING:
    from elasticmq_py.endpoint import Endpoint

log = logging.getLogger(__name__)

READ_ONLY = ("this node has no admin secret, so its console is read-only: set [admin] secret "
             "(a cluster member uses its cluster secret)")


def _json(status: int, payload: Any, *headers: tuple[str, str]) -> HttpResponse:
    return HttpResponse(status, (("Content-Type", "application/json"), ("Cache-Control", "no-store"), *headers),
                        json.dumps(payload).encode())


def _refused(status: int, message: str, *headers: tuple[str, str]) -> HttpResponse:
    return _json(status, {"ok": False, "error": {"code": "Refused", "message": message}}, *headers)


class Console:
    def __init__(self, secret: str | None, allow_from: Iterable[str], secure: bool,
                 history: HistoryWriter | None = None, owns_history: bool = False,
                 now: Callable[[], float] = time.time) -> None:
        self.sessions = Sessions(secret, now)
        self.allowed_peer = AllowFrom(allow_from)
        self.secure = secure                  # the port serves TLS: the cookie is Secure
        self.history = history                # where the audit goes (None: nowhere)
        self._owns_history = owns_history     # a single node's [admin] history: closed by us

    @property
    def history_path(self) -> str | None:
        return None if self.history is None else str(self.history.path)

    def close(self) -> None:
        if self._owns_history and self.history is not None:
            self.history.close()

    # -- the read routes (GET, open) -------------------------------------------------------------

    def session_info(self, req: HttpRequest) -> HttpResponse:
        sid = guard.session_id(req.headers)
        session = self.sessions.get(sid)
        writable = self.sessions.writable
        return _json(200, {"writable": writable, "read_only_reason": None if writable else READ_ONLY,
                           "allowed": self.allowed_peer(req.peer), "peer": req.peer,
                           "logged_in": session is not None,
                           "csrf": session.csrf if session is not None else None,
                           "expires": session.expires if session is not None else None})

    # -- the acting routes (POST) ------------------------------------------------------------------

    def handle(self, endpoint: "Endpoint", req: HttpRequest, reply: Reply) -> None:
        path = req.path
        if req.method != "POST":
            reply.set(_json(405 if path.startswith("/ui/api/") else 404, {"error": f"no route {req.method} {path}"}))
        elif path == "/ui/api/login":
            reply.set(self._login(req))
        elif path == "/ui/api/logout":
            reply.set(self._logout(req))
        elif path.startswith("/ui/api/actions/"):
            self._act(endpoint, req, reply, path[len("/ui/api/actions/"):])
        else:
            reply.set(_json(404, {"error": f"no route {req.method} {path}"}))

    def _login(self, req: HttpRequest) -> HttpResponse:
        refused = self._refusal(req, session=False)
        if refused is None and self.sessions.throttled(req.peer):
            refused = 429, "too many failed logins from this address: wait a minute"
        if refused is not None:
            self._audit(req.peer, "login", None, "refused", error=refused[1])
            return _refused(*refused)
        try:
            given = json.loads(req.body or b"{}").get("secret")
        except (ValueError, AttributeError):
            given = None
        if not isinstance(given, str):
            return _refused(400, 'the body is JSON: {"secret": "..."}')
        opened = self.sessions.login(given, req.peer)
        if opened is None:
            self._audit(req.peer, "login", None, "refused", error="wrong secret")
            return _refused(401, "wrong secret")
        sid, session = opened
        self._audit(req.peer, "login", None, "ok")
        return _json(200, {"ok": True, "csrf": session.csrf, "expires": session.expires},
                     ("Set-Cookie", guard.set_cookie(sid, int(self.sessions.ttl_s), self.secure)))

    def _logout(self, req: HttpRequest) -> HttpResponse:
        refused = self._refusal(req)
        if refused is not None:
            return _refused(*refused)
        sid = guard.session_id(req.headers)
        self.sessions.logout(sid or "")
        self._audit(req.peer, "logout", None, "ok")
        return _json(200, {"ok": True}, ("Set-Cookie", guard.clear_cookie(self.secure)))

    def _act(self, endpoint: "Endpoint", req: HttpRequest, reply: Reply, action: str) -> None:
        if action not in actions.ACTIONS:
            reply.set(_json(404, {"error": f"no console action {action}; there are {', '.join(actions.ACTIONS)}"}))
            return
        try:
            doc = json.loads(req.body or b"{}")
            q, form = doc["queue"], doc.get("params") or {}
            key = QueueKey(q["region"], q["account"], q["name"])
            if not isinstance(form, dict) or not all(isinstance(x, str) for x in (key.region, key.account, key.name)):
                raise TypeError
        except (ValueError, KeyError, TypeError, AttributeError):
            key = None
        refused = self._refusal(req)
        if refused is not None:
            self._audit(req.peer, action, key, "refused", error=refused[1])
            reply.set(_refused(*refused))
            return
        if key is None:
            reply.set(_refused(400, 'the body is JSON: {"queue": {"region", "account", "name"}, "params": {...}}'))
            return
        cfg = endpoint.config
        body = json.dumps(actions.sqs_params(action, key, base_url(req.headers, cfg.fallback_host, cfg.scheme),
                                             form)).encode()

        def done(resp: HttpResponse, via: str | None) -> None:
            payload = _sqs_answer(resp)
            payload["via"] = via
            err = payload.get("error")
            self._audit(req.peer, action, key, "ok" if err is None else "failed", via=via,
                        **({"error": err["code"]} if err else {}))
            reply.set(_json(resp.status, payload))
        actions.execute(endpoint, action, body, Namespace(key.region, key.account), req.headers.get("host"), done)

    def _refusal(self, req: HttpRequest, session: bool = True) -> tuple[int, str] | None:
        """(status, why) when ``req`` may not act; see the module docstring for the order."""
        if not self.sessions.writable:
            return 403, READ_ONLY
        if not self.allowed_peer(req.peer):
            return 403, f"the console does not accept actions from {req.peer} (admin-from)"
        foreign = guard.foreign_origin(req.headers)
        if foreign is not None:
            return 403, f"a request from another site: {foreign}"
        if not session:
            return None
        found: Session | None = self.sessions.get(guard.session_id(req.headers))
        if found is None:
            return 401, "log in first (no session, or it expired)"
        given = req.headers.get(guard.CSRF_HEADER, "")
        if not given or not hmac.compare_digest(given.encode(), found.csrf.encode()):
            return 403, f"the session's CSRF token is missing or wrong ({guard.CSRF_HEADER})"
        return None

    def _audit(self, peer: str | None, action: str, key: QueueKey | None, outcome: str, **fields: Any) -> None:
        log.info("console %s on %s from %s: %s %s", action, key.name if key else "-", peer, outcome, fields or "")
        if self.history is not None:
            queue = {} if key is None else {"queue": key.name, "region": key.region, "account": key.account}
            self.history.write("console", time.time(), peer=peer, action=action, **queue, outcome=outcome,
                               **{k: v for k, v in fields.items() if v is not None})


def _sqs_answer(resp: HttpResponse) -> dict[str, Any]:
    """SQS's JSON answer as the page's: ``{"ok", "output"}`` or ``{"ok", "error": {code, message}}``."""
    try:
        body = json.loads(resp.body or b"{}")
    except ValueError:
        body = {"message": resp.body.decode("utf-8", "replace")}
    if resp.status == 200:
        return {"ok": True, "output": body}
    code = str(body.get("__type", "")).rpartition("#")[2] or f"HTTP{resp.status}"
    return {"ok": False, "error": {"code": code, "message": body.get("message", "")}}
