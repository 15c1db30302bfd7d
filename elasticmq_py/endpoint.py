"""One request in, one response out, independent of the HTTP stack.

``Endpoint.handle(request, reply)`` answers through ``reply`` (elasticmq_py/reply.py): at once on
a single node, once replicas acknowledged on the cluster's master, or from the master's answer
when the node core routes the request there. The backend is called the same way everywhere:
``execute(command, done)``. Only a receive that long-polls continues as a Task.

With replication groups (a backend with ``groups`` >= 2) a request is routed by its queue's
group: the queue is read cheaply first (protocol/queue_key.py), else after the full parse, the
node core says which group runs it (``request_group``: a move task action runs in its source
queue's group; a request naming no queue, or one no group holds, in group 0; a CreateQueue of a
new name waits for its placement), and the backend's gating of that group decides (``_grouped``).
"""

from __future__ import annotations

import itertools
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qs

import msgspec

from storage.commands import Command, CreateQueue, GetQueueAttributes, Namespace, ReceiveMessage
from storage.errors import INTERNAL_ERROR, SERVICE_UNAVAILABLE, SqsError
from storage.keys import command_key
from storage.results import ReceiveMessageResult

from cluster.node_actions import LOCAL, ForwardTo, Refuse

from elasticmq_py import dashboard
from elasticmq_py import metrics as metrics_mod
from elasticmq_py.admin import ClusterAdmin, not_a_cluster
from elasticmq_py.auth.credentials import Credential
from elasticmq_py.auth.sigv4 import Identity, Verifier
from elasticmq_py.backend import Backend, run
from elasticmq_py.dashboard.console import Console
from elasticmq_py.dashboard.console.actions import EXECUTE_PATH
from elasticmq_py.dashboard.console.actions import serve_forwarded as console_forwarded
from elasticmq_py.health import Role
from elasticmq_py.protocol import json_proto, query_proto, requests, responses
from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol.addressing import base_url, region_from_headers, region_of_scope
from elasticmq_py.protocol.model import sqs_model
from elasticmq_py.protocol.queue_key import queue_key_of
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse, RequestContext
from elasticmq_py.reply import Reply

log = logging.getLogger(__name__)
_perf_counter = time.perf_counter
_wall_clock = time.time   # SigV4's request times are wall-clock times

JSON, QUERY = "json", "query"
QUERY_JSON = "query-json"   # a Query request answered in JSON (it sent Accept: application/json)
_INTERNAL_MESSAGE = "We encountered an internal error. Please try again."
_AFTER_PARSE = -1   # _sqs's group: route by the parsed command's queue (replication groups)


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    account_id: str = "000000000000"
    region: str = "us-east-1"
    fallback_host: str = "localhost:9324"   # for queue URLs when a request has no Host header
    scheme: str = "http"                    # of queue URLs: "https" where the port serves TLS
    # [auth] mode = "sigv4": the keys requests must be signed with (None: nothing is verified,
    # every request acts as account_id)
    credentials: tuple[Credential, ...] | None = None


class Endpoint:
    def __init__(self, backend: Backend, config: EndpointConfig = EndpointConfig(),
                 admin: ClusterAdmin | None = None, console: Console | None = None):
        self.backend = backend
        self.config = config
        self.admin = admin
        # the dashboard's actions; without a console of the server's, one without a secret (read-only)
        self.console = console if console is not None else Console(None, (), config.scheme == "https")
        self.model = sqs_model()
        self._json = json_proto.JsonReader(self.model)
        journaled = getattr(backend, "journal_stats", None) is not None
        self.metrics = metrics_mod.Metrics(backend.queue_stats, backend.waiting_receives,
                                           cluster=backend.status if admin is not None else None,
                                           journal=(lambda: backend.status().journal) if journaled else None)
        # (credential scope, Host) or (None, region, Host) -> what requests from there are
        # interpreted against (see _context)
        self._contexts: dict[tuple, RequestContext] = {}
        # Signatures are verified where the request is parsed: on the node that executes it (a
        # replica forwards the raw request, signature and all, over the authenticated stream
        # link), with that node's clock. A replica that refuses (forward = false) verifies
        # first too, so a bad signature gets its own error everywhere.
        self._verifier = Verifier(config.credentials) if config.credentials is not None else None
        # replication groups: requests route by their queue's group (_grouped)
        self._by_group = getattr(backend, "groups", 1) > 1

    # -- entry points ------------------------------------------------------------------------

    def handle(self, req: HttpRequest, reply: Reply) -> None:
        # No lambda in here (they are in _cluster_admin and _forward): a variable a lambda
        # captures becomes a cell, made and freed on every call.
        path = req.path
        if path != "/":   # where JSON and most Query requests go, and no admin path
            if req.method == "GET" and path in _ADMIN:
                reply.set(_ADMIN[path](self, req))
                return
            if path.startswith("/cluster/"):  # no SQS path looks like this (/ACCOUNT/QUEUE)
                self._cluster_admin(req, reply)
                return
            if path.startswith("/ui/"):       # nor this: the console's actions, never forwarded as SQS
                self.console.handle(self, req, reply)
                return
        if self._by_group:
            self._grouped(req, reply)
            return
        route = self.backend.route()
        if route is LOCAL:
            self._sqs(req, reply)
            return
        t = type(route)
        if t is ForwardTo:
            self._forward(req, reply)
        elif t is Refuse:
            self._sqs(req, reply, refused=route.reason)
        else:
            self._sqs(req, reply)

    def handle_forwarded(self, req: HttpRequest, respond: "Callable[[HttpResponse], None]",
                         group: int | None = None) -> None:
        """A request another member forwarded to us (the master): never forwarded again. With
        several groups ``group`` is the one the forwarder routed it to, and it runs there."""
        if req.path == EXECUTE_PATH:   # a console action (see dashboard/console/actions.py)
            console_forwarded(self, req, respond, group)
            return
        self._sqs(req, Reply(respond), group=group)

    # -- replication groups -------------------------------------------------------------------

    def _grouped(self, req: HttpRequest, reply: Reply) -> None:
        """Route ``req`` by its queue's group; where the cheap read cannot tell the queue, the
        full parse does (``_sqs`` then calls ``_route_parsed``)."""
        key = queue_key_of(req, self.config.region, None if self._verifier is not None else self.config.account_id)
        if key is None:
            self._sqs(req, reply, group=_AFTER_PARSE)
            return
        group = self.backend.request_group(key)
        route = self.backend.route(group)
        if route is LOCAL:
            self._sqs(req, reply, group=group)
        elif type(route) is ForwardTo:
            self._forward(req, reply, group)
        else:
            self._sqs(req, reply, refused=route.reason)

    def _route_parsed(self, req: HttpRequest, reply: Reply, call: "_Call", command: Command) -> None:
        key = command_key(command)
        group = self.backend.request_group(key, type(command) is CreateQueue)
        if group is None:   # a new queue's name: run where Raft places it
            self.backend.place(key, lambda g: self._placed(req, reply, call, command, g))
            return
        self._placed(req, reply, call, command, group)

    def _placed(self, req: HttpRequest, reply: Reply, call: "_Call", command: Command, group: int | None) -> None:
        if group is None:
            reply.set(call.error(SERVICE_UNAVAILABLE(
                "The cluster did not place the new queue in a replication group in time (no Raft leader "
                "reachable?). The request was not executed; retry.")))
            return
        route = self.backend.route(group)
        if route is LOCAL:
            self.backend.execute(command, call.done, group)
        elif type(route) is ForwardTo:
            self._forward(req, reply, group)
        else:
            reply.set(call.error(SERVICE_UNAVAILABLE(f"{route.reason} The request was not executed; retry.")))

    def _cluster_admin(self, req: HttpRequest, reply: Reply) -> None:
        if self.admin is None:
            reply.set(not_a_cluster(req))
        else:
            reply.follow(self.admin.handle(req), lambda: self.reject(req.headers, INTERNAL_ERROR(_INTERNAL_MESSAGE)))

    def _forward(self, req: HttpRequest, reply: Reply, *group: int) -> None:
        self.backend.forward(req, lambda resp, err: reply.set(resp if err is None else self.reject(req.headers, err)),
                             *group)

    def reject(self, headers: dict[str, str], err: SqsError) -> HttpResponse:
        """A response for a request the glue refused before reading it (too large, bad HTTP),
        in the protocol the client appears to speak."""
        proto = JSON if "x-amz-target" in headers else QUERY
        return _Call(self, proto, request_id(), _perf_counter()).error(err)

    # -- admin ------------------------------------------------------------------------------

    def _health(self, req: HttpRequest) -> HttpResponse:
        try:
            role = Role.parse(parse_qs(req.query.decode("latin-1")).get("role", [None])[-1])
        except ValueError as e:
            return HttpResponse(400, (("Content-Type", "application/json"),), json.dumps({"error": str(e)}).encode())
        h = self.backend.health(role)
        return HttpResponse(h.status_code, (("Content-Type", "application/json"),), h.body())

    def _metrics(self, req: HttpRequest) -> HttpResponse:
        return HttpResponse(200, (("Content-Type", metrics_mod.CONTENT_TYPE),), self.metrics.render())

    def _cluster(self, req: HttpRequest) -> HttpResponse:
        # ?digest=1 is O(state): only on request (tests and operators comparing members after a heal)
        st = self.backend.status(digest=b"digest=1" in req.query)
        body = json.dumps(st.to_dict(), indent=1).encode()
        return HttpResponse(200, (("Content-Type", "application/json"),), body)

    # -- SQS --------------------------------------------------------------------------------

    def _sqs(self, req: HttpRequest, reply: Reply, refused: str | None = None, group: int | None = None) -> None:
        # ``group``: None with one group; with several, the group to run it in, or _AFTER_PARSE
        target = req.headers.get("x-amz-target")
        request_id = _ID_PREFIX + (next(_ID_COUNTER) & _ID_MASK).to_bytes(6, "big").hex()  # = request_id()
        started = _perf_counter()
        call = None
        action = "unknown"   # until parsed, so that metrics never take a client's string
        try:
            if target is not None:
                # JSON, inline, and its call built once parsed: a Struct's attribute stores are
                # not specialized (~320 instructions each), its constructor's arguments are.
                if req.method != "POST":
                    raise perr.METHOD_NOT_ALLOWED("The JSON protocol requires POST.")
                identity = self._verify(req) if self._verifier is not None else None
                reader = self._json
                action = reader.action_of(target)
                params = reader.parse(action, req.body)
                ctx = self._context(req.headers, None, identity)
                command = requests.BUILDERS[action](params, ctx)
                call = _Call(self, JSON, request_id, started, reply, action, command, ctx)
            else:
                call = _Call(self, QUERY, request_id, started, reply)
                command = self._parse_query(req, call)
            if refused is not None:
                raise SERVICE_UNAVAILABLE(f"{refused} The request was not executed; retry.")
            if group is None:
                self.backend.execute(command, call.done)
            elif group >= 0:
                self.backend.execute(command, call.done, group)
            else:
                self._route_parsed(req, reply, call, command)
        except SqsError as e:
            reply.set((call or _Call(self, JSON, request_id, started, reply, action)).error(e))
        except Exception:
            reply.set((call or _Call(self, JSON, request_id, started, reply, action)).internal_error())

    def _parse_query(self, req: HttpRequest, call: "_Call") -> Command:
        """The command of a Query request (a form, in the body or the URL)."""
        headers = req.headers
        if req.method not in ("POST", "GET"):
            raise perr.METHOD_NOT_ALLOWED(f"Method {req.method} is not allowed.")
        ctype = headers.get("content-type", "")
        body = req.body if req.method == "POST" else b""
        if body and ctype and not ctype.startswith("application/x-www-form-urlencoded"):
            raise perr.UNSUPPORTED_MEDIA(
                "Requests must be application/x-www-form-urlencoded (Query) or carry "
                "X-Amz-Target (JSON 1.0).")
        if "application/json" in headers.get("accept", ""):
            call.proto = QUERY_JSON
        identity = self._verify(req) if self._verifier is not None else None
        form = query_proto.parse_form(req.query, body)
        call.action = action = query_proto.action_of(form, self.model, req.path)
        params = query_proto.parse(action, form, self.model, req.path)
        call.ctx = ctx = self._context(headers, form, identity)
        call.command = command = requests.BUILDERS[action](params, ctx)
        return command

    def _verify(self, req: HttpRequest) -> Identity:
        """Who signed ``req`` ([auth] mode = "sigv4"), or the SqsError AWS answers, raised."""
        identity = self._verifier.verify(req.method, req.path, req.query, req.headers, req.body, _wall_clock())
        if type(identity) is not Identity:
            raise identity
        return identity

    def _context(self, headers: dict[str, str], form: dict[str, str] | None,
                 identity: Identity | None = None) -> RequestContext:
        """The request's context, built once per client: per (credential scope, Host) for a
        signed request, else per (region, Host[, account]). SDKs sign every request anew, but
        the Authorization header up to its first "," (algorithm, key, day, region, service)
        stays the same all day; finding the region in it and then the context cost ~4,500
        instructions a request, one lookup by it ~1,000. With verification on, the key in
        that scope is the account the context acts as (its namespace and ``caller``)."""
        auth = headers.get("authorization")
        if auth:
            comma = auth.find(",")
            key: tuple = (auth[:comma] if comma >= 0 else auth, headers.get("host"))
            ctx = self._contexts.get(key)
            if ctx is None:
                ctx = self._new_context(headers, form, key, identity)
        else:
            ctx = self._new_context(headers, form, None, identity)
        trace = headers.get("x-amzn-trace-id")
        if trace is not None:
            ctx = RequestContext(ctx.ns, ctx.base_url, trace, ctx.caller)
        return ctx

    def _new_context(self, headers: dict[str, str], form: dict[str, str] | None,
                     scope_key: tuple | None, identity: Identity | None) -> RequestContext:
        region = region_from_headers(headers, form, self.config.region)
        account = identity.account_id if identity is not None else self.config.account_id
        # Kept under the scope only where the scope alone decides the region: a region found
        # in the text up to the first "," is the one found in the whole header (the pattern
        # cannot cross a ","). Anything else (unsigned, presigned) is kept per region.
        by_scope = scope_key is not None and region_of_scope(scope_key[0]) == region
        key = scope_key if by_scope else (None, region, headers.get("host"), account)
        ctx = self._contexts.get(key)
        if ctx is None:
            if len(self._contexts) >= 256:   # both come from clients: keep the cache bounded
                self._contexts.clear()
            ctx = self._contexts[key] = RequestContext(
                Namespace(region, account), base_url(headers, self.config.fallback_host, self.config.scheme),
                caller=identity.account_id if identity is not None else None)
        return ctx

    @staticmethod
    def _should_wait(command: ReceiveMessage, result: ReceiveMessageResult) -> bool:
        return not result.messages and command.wait_time_seconds != 0

    async def _wait(self, call: "_Call", command: ReceiveMessage, result: ReceiveMessageResult) -> HttpResponse:
        """A receive that long-polls: ``result`` is its first, empty answer."""
        wait_s = command.wait_time_seconds
        if wait_s is None:  # the queue's ReceiveMessageWaitTimeSeconds is the default
            attrs = await run(self.backend, GetQueueAttributes(command.queue, ("ReceiveMessageWaitTimeSeconds",)))
            wait_s = int(attrs.attributes.get("ReceiveMessageWaitTimeSeconds", "0"))
        deadline = self.backend.now_ms() + wait_s * 1000
        while not result.messages and self.backend.now_ms() < deadline:
            await self.backend.wait_for_messages(command.queue, deadline)
            result = await run(self.backend, command)
        return call.ok(result)

    async def _guarded_wait(self, call: "_Call", command: ReceiveMessage,
                            result: ReceiveMessageResult) -> HttpResponse:
        """``_wait``, its errors answered. ``_wait``'s coroutine is made only once this one runs:
        made up front, it was never awaited when the connection closed before the Task's first
        step (the Task cancelled), and Python warned about it."""
        try:
            return await self._wait(call, command, result)
        except SqsError as e:
            return call.error(e)
        except Exception:
            return call.internal_error()


class _Call(msgspec.Struct):
    """One SQS request on its way through: what it is, and how its answer is rendered.

    A Struct because one is built per request: in C, ~1,000 instructions against ~2,300 for a
    slotted dataclass. Its bound ``done`` is the backend's callback; a ``partial`` of an
    endpoint method over the call cost ~1,700 instructions more, built and called."""

    endpoint: Endpoint
    proto: str
    request_id: str
    started: float
    reply: Reply | None = None
    action: str = "unknown"   # until parsed, so that metrics never take a client's string
    command: Command | None = None
    ctx: RequestContext | None = None

    def done(self, result: Any, err: BaseException | None) -> None:
        """The backend's callback: render the result (or the error) into the reply."""
        try:
            if err is not None:
                raise err
            command = self.command
            if type(command) is ReceiveMessage and Endpoint._should_wait(command, result):
                self._wait(command, result)
                return
            resp = self.ok(result)
        except SqsError as e:
            resp = self.error(e)
        except Exception:
            resp = self.internal_error()
        self.reply.set(resp)

    def _wait(self, command: ReceiveMessage, result: ReceiveMessageResult) -> None:
        """Answer once the long poll ends (out of ``done``: its lambda would make ``self`` a
        cell in ``done``, made and freed per request)."""
        self.reply.follow(self.endpoint._guarded_wait(self, command, result),
                          lambda: self.error(INTERNAL_ERROR(_INTERNAL_MESSAGE)))

    def ok(self, result: Any) -> HttpResponse:
        output = responses.to_output(result, self.ctx)
        if self.proto == JSON:
            resp = HttpResponse(*json_proto.render(output, self.request_id))
        else:
            resp = HttpResponse(*query_proto.render(self.action, output, self.request_id, self.endpoint.model,
                                                    self.proto == QUERY_JSON))
        self.endpoint.metrics.observe_ok(self.action, _perf_counter() - self.started)
        return resp

    def error(self, err: SqsError) -> HttpResponse:
        if self.proto == JSON:
            status, headers, body = json_proto.render_error(err, self.request_id)
        else:
            status, headers, body = query_proto.render_error(err, self.request_id, self.endpoint.model.namespace,
                                                             self.proto == QUERY_JSON)
        outcome = "client_error" if err.sender_fault else "server_error"
        self.endpoint.metrics.observe(self.action, outcome, _perf_counter() - self.started, err.kind.query_code)
        return HttpResponse(status, headers, body)

    def internal_error(self) -> HttpResponse:
        # a bug, in storage or here: logged with its traceback, never shown to the client
        log.exception("internal error handling %s", self.action)
        return self.error(INTERNAL_ERROR(_INTERNAL_MESSAGE))


_ID_PREFIX = str(uuid.uuid4())[:24]
_ID_COUNTER = itertools.count()
_ID_MASK = 0xFFFFFFFFFFFF   # 12 hex digits


def request_id() -> str:
    # UUID-shaped and unique per process start; a counter costs a tenth of uuid4()
    # (the counter's 12 hex digits as its 6 bytes in hex: cheaper than a "012x" format spec)
    return _ID_PREFIX + (next(_ID_COUNTER) & _ID_MASK).to_bytes(6, "big").hex()


_ADMIN = {
    "/health": Endpoint._health,
    "/metrics": Endpoint._metrics,
    "/cluster": Endpoint._cluster,
    **dashboard.ROUTES,
}
