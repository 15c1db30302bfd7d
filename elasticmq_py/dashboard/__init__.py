"""The dashboard: a page served by every node at ``GET /ui``, read-only unless an operator
logs in to its console (``console/``).

The pages (``static/``: the overview and a queue's page, their scripts and one style sheet; no
framework, nothing fetched from elsewhere) poll JSON routes of the node that served them, once a
second:

* ``GET /cluster``: view, master, epoch, members, links, replication and last transfer;
* ``GET /health``: whether this node serves clients, and why not;
* ``GET /ui/api/queues?offset=&limit=&filter=&sort=``: one page of the queues with their
  visible, in-flight and delayed counts and dead-letter queues, and totals over all of them
  (``queues.py``);
* ``GET /ui/api/activity``: the requests this node has answered so far, by kind (the page turns
  successive samples into rates), the last events of its history log (``history_tail.py``),
  console actions included, and the members' HTTP addresses, to link to their dashboards;
* ``GET /ui/api/queue`` and ``GET /ui/api/session``: a queue's page and the console's state
  (``console/``).

``ROUTES`` is what the endpoint's admin table includes. Every route here reads this node's own
state and changes nothing; the console's actions are POSTs under ``/ui/``, which the endpoint
hands to ``Endpoint.console``. What a route reads of the node is gathered by the ``_node_*``
functions below, so that a different node wiring needs changes only there.
"""

from __future__ import annotations

import json
import time
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import parse_qsl

from storage.commands import QueueKey

from elasticmq_py.dashboard.console.queue_view import queue_view
from elasticmq_py.dashboard.history_tail import HistoryTail
from elasticmq_py.dashboard.queues import QueueQuery, queue_page
from elasticmq_py.protocol.addressing import base_url
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse

if TYPE_CHECKING:
    from elasticmq_py.endpoint import Endpoint

_STATIC = {   # path -> (file in static/, content type)
    "/ui": ("index.html", "text/html; charset=utf-8"),
    "/ui/queue": ("queue.html", "text/html; charset=utf-8"),
    "/ui/static/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8"),
    "/ui/static/queue.js": ("queue.js", "text/javascript; charset=utf-8"),
    "/ui/static/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/ui/static/page.js": ("page.js", "text/javascript; charset=utf-8"),
    "/ui/static/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
}
# The page is small and changes with the package: read once per process.
_files: dict[str, bytes] = {}
# One reader per history file, so that each poll reads only what was appended.
_tails: dict[str, HistoryTail] = {}

# SQS actions counted together in the page's rates.
_KINDS = {"SendMessage": "send", "SendMessageBatch": "send", "ReceiveMessage": "receive",
          "DeleteMessage": "delete", "DeleteMessageBatch": "delete"}


def _json(status: int, payload: Any) -> HttpResponse:
    return HttpResponse(status, (("Content-Type", "application/json"), ("Cache-Control", "no-store")),
                        json.dumps(payload).encode())


def _static(endpoint: "Endpoint", req: HttpRequest) -> HttpResponse:
    name, ctype = _STATIC[req.path]
    body = _files.get(name)
    if body is None:
        body = _files[name] = resources.files(__package__).joinpath("static", name).read_bytes()
    return HttpResponse(200, (("Content-Type", ctype), ("Cache-Control", "no-cache")), body)


# -- what the routes read of the node ---------------------------------------------------------------

def _node_storage(endpoint: "Endpoint") -> Any:
    return getattr(endpoint.backend, "storage", None)


def _node_config(endpoint: "Endpoint") -> Any:
    """The cluster member's NodeConfig; None on a single node."""
    return getattr(endpoint.backend, "node_config", None)


# -- routes ---------------------------------------------------------------------------------------------

def _queues(endpoint: "Endpoint", req: HttpRequest) -> HttpResponse:
    try:
        q = QueueQuery.parse(dict(parse_qsl(req.query.decode("utf-8", "replace"))))
    except ValueError as e:
        return _json(400, {"error": str(e)})
    storage = _node_storage(endpoint)
    dlqs = storage.dead_letter_targets() if storage is not None else {}
    return _json(200, queue_page(endpoint.backend.queue_stats(), dlqs, q,
                                 base_url(req.headers, endpoint.config.fallback_host, endpoint.config.scheme)))


def _queue(endpoint: "Endpoint", req: HttpRequest) -> HttpResponse:
    q = dict(parse_qsl(req.query.decode("utf-8", "replace")))
    cfg = endpoint.config
    key = QueueKey(q.get("region") or cfg.region, q.get("account") or cfg.account_id, q.get("name", ""))
    storage = _node_storage(endpoint)
    view = None if storage is None else queue_view(storage, key, base_url(req.headers, cfg.fallback_host, cfg.scheme))
    if view is None:
        return _json(404, {"error": f"this node holds no queue {key.name} in {key.region}/{key.account}"})
    return _json(200, view)


def _activity(endpoint: "Endpoint", req: HttpRequest) -> HttpResponse:
    requests = {"all": 0, "errors": 0, "send": 0, "receive": 0, "delete": 0}
    for (action, outcome), n in endpoint.metrics.request_counts().items():
        requests["all"] += n
        if outcome != "ok":
            requests["errors"] += n
        kind = _KINDS.get(action)
        if kind is not None:
            requests[kind] += n
    cfg = _node_config(endpoint)
    path = endpoint.console.history_path   # the cluster member's history, or a single node's [admin] one
    events: list[dict[str, Any]] = []
    if path:
        tail = _tails.get(path)
        if tail is None:
            tail = _tails[path] = HistoryTail(path)
        events = tail.read()
    members_http = {} if cfg is None else {
        # a cluster's members serve TLS alike: the peers' links take this node's scheme
        n.name: f"{endpoint.config.scheme}://{n.http_addr}" for n in cfg.cluster.nodes if n.http_addr is not None}
    return _json(200, {"at": time.time(), "requests": requests, "history": path, "events": events,
                       "members_http": members_http})


ROUTES: dict[str, Callable[["Endpoint", HttpRequest], HttpResponse]] = {
    **{path: _static for path in _STATIC},
    "/ui/api/queues": _queues,
    "/ui/api/activity": _activity,
    "/ui/api/queue": _queue,
    "/ui/api/session": lambda endpoint, req: endpoint.console.session_info(req),
}
