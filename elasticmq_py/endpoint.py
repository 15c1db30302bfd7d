"""One request in, one response out, independent of the HTTP stack.

``Endpoint.handle`` returns an ``HttpResponse`` (almost always on a single node: the local backend
answers at once), a ``Reply`` (a backend that answers by callback: the cluster's master, once
replicas acknowledged), or an awaitable of one (a long poll, or a backend that only offers
futures). The glue only makes a task in the last case, which keeps the common paths free of it.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Awaitable

from storage.commands import Command, GetQueueAttributes, Namespace, ReceiveMessage
from storage.errors import INTERNAL_ERROR, SERVICE_UNAVAILABLE, SqsError
from storage.results import ReceiveMessageResult

from elasticmq_py import metrics as metrics_mod
from elasticmq_py.admin import ClusterAdmin, not_a_cluster
from elasticmq_py.backend import Backend, LocalBackend
from elasticmq_py.forwarding import ForwardError, Forwarder
from elasticmq_py.protocol import json_proto, query_proto, requests, responses
from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol.addressing import base_url, region_from_headers
from elasticmq_py.protocol.model import sqs_model
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse, RequestContext
from elasticmq_py.reply import Reply

log = logging.getLogger(__name__)
_perf_counter = time.perf_counter

JSON, QUERY = "json", "query"
QUERY_JSON = "query-json"   # a Query request answered in JSON (it sent Accept: application/json)
_INTERNAL_MESSAGE = "We encountered an internal error. Please try again."


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    account_id: str = "000000000000"
    region: str = "us-east-1"
    fallback_host: str = "localhost:9324"   # for queue URLs when a request has no Host header


class Endpoint:
    def __init__(self, backend: Backend, config: EndpointConfig = EndpointConfig(),
                 admin: ClusterAdmin | None = None, forwarder: "Forwarder | None" = None):
        self.backend = backend
        self.config = config
        self.admin = admin
        self.forwarder = forwarder      # a cluster member's: hands SQS requests to the master
        if forwarder is not None:
            forwarder.endpoint = self
        self.model = sqs_model()
        self.metrics = metrics_mod.Metrics(backend.queue_stats, backend.waiting_receives,
                                           cluster=backend.cluster_status if admin is not None else None)
        # The local backend answers synchronously: its execute() wraps execute_now() in a
        # finished future, which the common path can skip. Any other backend (or one whose
        # execute was replaced) goes through execute() and its future.
        local = (getattr(type(backend), "execute", None) is LocalBackend.execute
                 and "execute" not in getattr(backend, "__dict__", {}))
        self._execute_now = backend.execute_now if local else None
        # A backend that can answer by callback (the cluster member) is answered through a Reply.
        self._execute_then = None if local else getattr(backend, "execute_then", None)
        self._namespaces: dict[str, Namespace] = {}      # region -> Namespace (a frozen dataclass)

    # -- entry points ------------------------------------------------------------------------

    def handle(self, req: HttpRequest) -> HttpResponse | Reply | Awaitable[HttpResponse]:
        if req.method == "GET" and req.path in _ADMIN:
            return _ADMIN[req.path](self, req)
        if req.path.startswith("/cluster/"):  # no SQS path looks like this (/ACCOUNT/QUEUE)
            return self.admin.handle(req) if self.admin is not None else not_a_cluster(req)
        if self.forwarder is not None:
            try:
                master = self.forwarder.target()
            except ForwardError as e:
                return self.reject(req.headers, SERVICE_UNAVAILABLE(f"{e}. The request was not executed; retry."))
            if master is not None:
                return self.forwarder.forward(master, req, lambda msg: self.reject(
                    req.headers, SERVICE_UNAVAILABLE(msg)))
        return self._sqs(req)

    def handle_forwarded(self, req: HttpRequest) -> HttpResponse | Reply | Awaitable[HttpResponse]:
        """A request another member forwarded to us (the master): never forwarded again."""
        return self._sqs(req)

    def reject(self, headers: dict[str, str], err: SqsError) -> HttpResponse:
        """A response for a request the glue refused before reading it (too large, bad HTTP),
        in the protocol the client appears to speak."""
        proto = JSON if "x-amz-target" in headers else QUERY
        return self._error(_Call(proto, "unknown", _request_id(), time.perf_counter()), err)

    # -- admin ------------------------------------------------------------------------------

    def _health(self, req: HttpRequest) -> HttpResponse:
        ok = self.backend.can_serve_writes()
        body = json.dumps({"status": "ok" if ok else "unavailable"}).encode()
        return HttpResponse(200 if ok else 503, (("Content-Type", "application/json"),), body)

    def _metrics(self, req: HttpRequest) -> HttpResponse:
        return HttpResponse(200, (("Content-Type", metrics_mod.CONTENT_TYPE),), self.metrics.render())

    def _cluster(self, req: HttpRequest) -> HttpResponse:
        st = self.backend.cluster_status()
        if b"digest=1" in req.query and hasattr(self.backend, "digest"):
            # O(state): only on request (tests and operators comparing members after a heal)
            st.setdefault("replication", {})["digest"] = self.backend.digest()
        body = json.dumps(st, indent=1).encode()
        return HttpResponse(200, (("Content-Type", "application/json"),), body)

    # -- SQS --------------------------------------------------------------------------------

    def _sqs(self, req: HttpRequest):
        call = _Call(JSON if "x-amz-target" in req.headers else QUERY, "unknown", _request_id(),
                     _perf_counter())
        try:
            command, ctx = self._parse(req, call)
            execute_now = self._execute_now
            if execute_now is not None:
                result = execute_now(command)
                if not (isinstance(command, ReceiveMessage) and self._should_wait(command, result)):
                    return self._ok(call, result, ctx)
                return self._guarded_wait(call, command, None, ctx, result)
            execute_then = self._execute_then
            if execute_then is not None:
                reply = Reply()
                execute_then(command, lambda result, err: self._answer(reply, call, command, ctx, result, err))
                # answered at once (a refusal, say): no callback needed
                return reply.response if reply.response is not None else reply
            pending = self.backend.execute(command)
            if pending.done():
                result = pending.result()
                if not (isinstance(command, ReceiveMessage) and self._should_wait(command, result)):
                    return self._ok(call, result, ctx)
            return self._guarded_wait(call, command, pending, ctx)
        except SqsError as e:
            return self._error(call, e)
        except Exception:
            return self._internal_error(call)

    def _parse(self, req: HttpRequest, call: "_Call") -> tuple[Command, RequestContext]:
        headers = req.headers
        if call.proto == JSON:
            if req.method != "POST":
                raise perr.METHOD_NOT_ALLOWED("The JSON protocol requires POST.")
            call.action = json_proto.action_of(headers["x-amz-target"], self.model)
            params = json_proto.parse(call.action, req.body, self.model)
            form = None
        else:
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
            form = query_proto.parse_form(req.query, body)
            call.action = query_proto.action_of(form, self.model, req.path)
            params = query_proto.parse(call.action, form, self.model, req.path)
        region = region_from_headers(headers, form, self.config.region)
        ns = self._namespaces.get(region)
        if ns is None:
            if len(self._namespaces) >= 256:   # regions come from clients: keep the cache bounded
                self._namespaces.clear()
            ns = self._namespaces[region] = Namespace(region, self.config.account_id)
        ctx = RequestContext(ns, base_url(headers, self.config.fallback_host), call.request_id,
                             headers.get("x-amzn-trace-id"))
        return requests.to_command(call.action, params, ctx), ctx

    def _answer(self, reply: Reply, call: "_Call", command: Command, ctx: RequestContext, result,
                err: BaseException | None) -> None:
        """The backend's callback: render the result (or the error) into ``reply``."""
        try:
            if err is not None:
                raise err
            if isinstance(command, ReceiveMessage) and self._should_wait(command, result):
                reply.follow(self._guarded_wait(call, command, None, ctx, result),
                             lambda: self._error(call, INTERNAL_ERROR(_INTERNAL_MESSAGE)))
                return
            resp = self._ok(call, result, ctx)
        except SqsError as e:
            resp = self._error(call, e)
        except Exception:
            resp = self._internal_error(call)
        reply.set(resp)

    @staticmethod
    def _should_wait(command: ReceiveMessage, result: ReceiveMessageResult) -> bool:
        return not result.messages and command.wait_time_seconds != 0

    async def _wait(self, call: "_Call", command: Command, pending, ctx: RequestContext,
                    result=None) -> HttpResponse:
        """The slow path: a backend that answers later, or a receive that long-polls (``result``:
        its first, empty answer, when the backend gave it synchronously)."""
        if pending is not None:
            result = await pending
        if not isinstance(command, ReceiveMessage) or not self._should_wait(command, result):
            return self._ok(call, result, ctx)
        wait_s = command.wait_time_seconds
        if wait_s is None:  # the queue's ReceiveMessageWaitTimeSeconds is the default
            attrs = await self.backend.execute(
                GetQueueAttributes(command.queue, ("ReceiveMessageWaitTimeSeconds",)))
            wait_s = int(attrs.attributes.get("ReceiveMessageWaitTimeSeconds", "0"))
        deadline = self.backend.now_ms() + wait_s * 1000
        while not result.messages and self.backend.now_ms() < deadline:
            await self.backend.wait_for_messages(command.queue, deadline)
            result = await self.backend.execute(command)
        return self._ok(call, result, ctx)

    async def _guarded_wait(self, call: "_Call", command: Command, pending, ctx: RequestContext,
                            result=None) -> HttpResponse:
        """``_wait``, its errors answered. ``_wait``'s coroutine is made only once this one runs:
        made up front, it was never awaited when the connection closed before the Task's first
        step (the Task cancelled), and Python warned about it."""
        try:
            return await self._wait(call, command, pending, ctx, result)
        except SqsError as e:
            return self._error(call, e)
        except Exception:
            return self._internal_error(call)

    # -- rendering ----------------------------------------------------------------------------

    def _ok(self, call: "_Call", result, ctx: RequestContext) -> HttpResponse:
        output = responses.to_output(result, ctx)
        if call.proto == JSON:
            status, headers, body = json_proto.render(output, call.request_id)
        else:
            status, headers, body = query_proto.render(call.action, output, call.request_id, self.model,
                                                       call.proto == QUERY_JSON)
        self.metrics.observe(call.action, "ok", _perf_counter() - call.started)
        return HttpResponse(status, headers, body)

    def _error(self, call: "_Call", err: SqsError) -> HttpResponse:
        if call.proto == JSON:
            status, headers, body = json_proto.render_error(err, call.request_id)
        else:
            status, headers, body = query_proto.render_error(err, call.request_id, self.model.namespace,
                                                             call.proto == QUERY_JSON)
        outcome = "client_error" if err.sender_fault else "server_error"
        self.metrics.observe(call.action, outcome, _perf_counter() - call.started, err.kind.query_code)
        return HttpResponse(status, headers, body)

    def _internal_error(self, call: "_Call") -> HttpResponse:
        # a bug, in storage or here: logged with its traceback, never shown to the client
        log.exception("internal error handling %s", call.action)
        return self._error(call, INTERNAL_ERROR(_INTERNAL_MESSAGE))


@dataclass(slots=True)
class _Call:
    """One SQS request on its way through: what the response must be rendered as."""

    proto: str
    action: str          # "unknown" until parsed, so that metrics never take a client's string
    request_id: str
    started: float


_ID_PREFIX = str(uuid.uuid4())[:24]
_ID_COUNTER = itertools.count()


def _request_id() -> str:
    # UUID-shaped and unique per process start; a counter costs a tenth of uuid4()
    return f"{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFFFFFFFFFF:012x}"


_ADMIN = {
    "/health": Endpoint._health,
    "/metrics": Endpoint._metrics,
    "/cluster": Endpoint._cluster,
}
