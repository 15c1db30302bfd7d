"""The console's actions, run as the SQS requests they are, where SQS requests run.

An action is an SQS action on one queue (``ACTIONS``), with the parameters SQS takes. The page's
form becomes those parameters (``sqs_params``), which go through the JSON protocol's own reading
(``json_proto.parse_reference``) and the same builders (``protocol/requests.py``) into the
storage command a client's request becomes: the validation, the errors and the effects are
SQS's, because they are the same code. The answer is SQS's JSON answer (``HttpResponse``), an
error included, wherever it was made.

Where: the node core's ``route()``, as for a client request. On the active master the command
runs on this node's backend (and is replicated like any other); on another member it is handed to
the master (``Backend.forward``) as a request to ``EXECUTE_PATH`` over the authenticated stream
link, and the master runs it here (``serve_forwarded``, never forwarded again); a node that
refuses clients refuses it with SQS's retryable 503. The forwarded request is the SQS action
and its JSON body, not the console's HTTP request: the session and CSRF checks were made by the
member the operator is logged in to, and the master trusts what a member sends on a link that
only the cluster secret opens, as it trusts forwarded client requests. With replication groups
the master is the action's queue's group master (``_group``), as for a client request.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from storage.commands import Namespace, QueueKey
from storage.errors import INTERNAL_ERROR, SERVICE_UNAVAILABLE, SqsError
from storage.keys import command_key

from cluster.node_actions import LOCAL, ForwardTo

from elasticmq_py.protocol import json_proto, requests, responses
from elasticmq_py.protocol.addressing import base_url
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse, RequestContext

log = logging.getLogger(__name__)

EXECUTE_PATH = "/ui/api/execute"       # only ever forwarded between members (see the docstring)
NS_HEADER = "x-elasticmq-namespace"    # "REGION/ACCOUNT" of the queue acted on
# What an operator does during an incident. ReceiveMessage is the peek (see sqs_params).
ACTIONS = ("SendMessage", "ReceiveMessage", "PurgeQueue", "DeleteQueue", "StartMessageMoveTask",
           "CancelMessageMoveTask")

Answered = Callable[[HttpResponse], None]


def sqs_params(action: str, queue: QueueKey, base: str, form: dict[str, Any]) -> dict[str, Any]:
    """The SQS request's parameters for ``action`` on ``queue``, from the page's ``form``.

    The queue is named by the console (a URL, or for a redrive the dead-letter queue's ARN as
    ``SourceArn``), never by the form. A ReceiveMessage is a peek: VisibilityTimeout 0 leaves
    every message visible to consumers, WaitTimeSeconds 0 never parks the page, and every
    attribute is asked for. AWS's own console polls so ("When messages are retrieved via the
    Amazon SQS console, they are immediately made visible again for re-retrieval": SQS Developer
    Guide, "Receiving and deleting a message in Amazon SQS"). It is still a receive: each peek
    counts in a message's ApproximateReceiveCount ("the number of times a message has been
    received across all queues but not deleted": the ReceiveMessage API reference), and a
    redrive policy's maxReceiveCount applies to it."""
    p = dict(form)
    if action == "StartMessageMoveTask":
        p["SourceArn"] = queue.arn
    elif action != "CancelMessageMoveTask":
        p["QueueUrl"] = f"{base}/{queue.account}/{queue.name}"
    if action == "ReceiveMessage":
        p.update(VisibilityTimeout=0, WaitTimeSeconds=0, AttributeNames=["All"], MessageAttributeNames=["All"])
    return p


def execute(endpoint: Any, action: str, body: bytes, ns: Namespace, host: str | None,
            done: Callable[[HttpResponse, str | None], None]) -> None:
    """Run ``action`` (its JSON body) in ``ns`` where SQS would run it; ``done(answer, master)``,
    ``master`` naming the member it was forwarded to (None: this node answered)."""
    backend = endpoint.backend
    group = _group(endpoint, action, body, ns)
    route = backend.route() if group is None else backend.route(group)
    if route is LOCAL:
        execute_here(endpoint, action, body, ns, host, lambda resp: done(resp, None))
    elif type(route) is ForwardTo:
        headers = {"x-amz-target": f"AmazonSQS.{action}", NS_HEADER: f"{ns.region}/{ns.account}"}
        if host:
            headers["host"] = host
        backend.forward(HttpRequest("POST", EXECUTE_PATH, b"", headers, body),
                        lambda resp, err: done(resp if err is None else error(err), route.master),
                        *(() if group is None else (group,)))
    else:
        done(error(SERVICE_UNAVAILABLE(f"{route.reason} The request was not executed; retry.")), None)


def serve_forwarded(endpoint: Any, req: HttpRequest, respond: Answered, group: int | None = None) -> None:
    """The master's side of ``execute``: a member forwarded an action to it (``group``: the
    group it was routed to, with replication groups)."""
    route = endpoint.backend.route() if group is None else endpoint.backend.route(group)
    if route is not LOCAL:
        reason = getattr(route, "reason", "This node is not the active master any more.")
        respond(error(SERVICE_UNAVAILABLE(f"{reason} The request was not executed; retry.")))
        return
    action = req.headers.get("x-amz-target", "").partition(".")[2]
    region, _, account = req.headers.get(NS_HEADER, "").partition("/")
    if action not in ACTIONS or not region or not account:
        log.warning("console: refused a forwarded action %r in %r", action, req.headers.get(NS_HEADER))
        respond(HttpResponse(400, (), b"not a console action"))
        return
    execute_here(endpoint, action, req.body, Namespace(region, account), req.headers.get("host"), respond)


def _group(endpoint: Any, action: str, body: bytes, ns: Namespace) -> int | None:
    """With replication groups, the group that runs the action, as for a client request: its
    queue's (a redrive's: its source queue's), by the node core's rule (``request_group``);
    None with one group."""
    backend = endpoint.backend
    if getattr(backend, "groups", 1) == 1:
        return None
    try:
        command = requests.BUILDERS[action](json_proto.parse_reference(action, body, endpoint.model),
                                            RequestContext(ns, ""))
    except SqsError:
        return 0          # the parse on the master answers the error
    return backend.request_group(command_key(command))


def execute_here(endpoint: Any, action: str, body: bytes, ns: Namespace, host: str | None,
                 done: Answered) -> None:
    """Read, build and execute on this node's backend, as the endpoint does a JSON request."""
    ctx = RequestContext(ns, base_url({"host": host} if host else {}, endpoint.config.fallback_host,
                                      endpoint.config.scheme))
    try:
        params = json_proto.parse_reference(action, body, endpoint.model)
        command = requests.BUILDERS[action](params, ctx)
    except SqsError as e:
        done(error(e))
        return

    def answered(result: Any, err: BaseException | None) -> None:
        if err is None:
            try:
                done(HttpResponse(*json_proto.render(responses.to_output(result, ctx), _request_id())))
                return
            except Exception as e:  # a bug in rendering: an internal error, as the endpoint's
                err = e
        done(error(err))
    endpoint.backend.execute(command, answered)


def error(err: BaseException) -> HttpResponse:
    """SQS's JSON error answer for ``err``; a bug is logged and answered InternalError."""
    if not isinstance(err, SqsError):
        log.error("console action failed", exc_info=err)
        err = INTERNAL_ERROR("We encountered an internal error. Please try again.")
    return HttpResponse(*json_proto.render_error(err, _request_id()))


def _request_id() -> str:
    # the endpoint's, so that console answers carry ids of the same shape; imported here because
    # the endpoint imports this module
    from elasticmq_py.endpoint import request_id
    return request_id()
