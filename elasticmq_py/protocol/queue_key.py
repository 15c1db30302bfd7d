"""The queue a request names, found before the request is parsed.

With queue groups a member must know a request's queue to route it to that queue's group master,
and most requests are routed elsewhere: paying the full parse (every member checked against the
model, the storage command built) on the member that only forwards would double the parse of
most requests. ``queue_key_of`` reads only what names the queue:

* the action (``X-Amz-Target``, or the Query form's ``Action``): only actions whose input has a
  ``QueueUrl`` member name one queue. The others name none (ListQueues, ListMessageMoveTasks,
  CancelMessageMoveTask), a name still to be placed (CreateQueue), a name and an owner to be
  looked up (GetQueueUrl), or two queues (StartMessageMoveTask), and get ``None``;
* the queue URL: a JSON 1.0 body's top-level ``QueueUrl`` (msgspec, skipping every other member
  in C), or the Query form's ``QueueUrl`` field, or the request's path where the form has none
  (older SDKs post to the queue URL itself), exactly as ``query_proto.parse`` takes it;
* the region, as the endpoint reads it: the SigV4 scope of ``Authorization`` (or, for the Query
  protocol, a presigned ``X-Amz-Credential``), else the endpoint's own.

The URL is then resolved as the full parse resolves it (``addressing.key_from_queue_url``). A
queue URL names its account; a bare name or ElasticMQ's ``/queue/NAME`` means the account the
request acts as, which is the endpoint's (``account``) or, with signatures verified, the signer's:
give ``account=None`` there, and such a request gets ``None``.

``None`` means "parse it to know": anything malformed, ambiguous or refused is left to the full
parse, which answers the error. Where this returns a key, the full parse of the same request
yields a command on that key, or an error (tests/endpoint/test_queue_key.py checks both on the
whole conformance corpus).
"""

from __future__ import annotations

import msgspec

from storage.commands import Command, CreateQueue, GetQueueUrl, Namespace, QueueKey
from storage.errors import SqsError

from elasticmq_py.protocol import query_proto
from elasticmq_py.protocol.addressing import key_from_queue_url, region_from_headers
from elasticmq_py.protocol.model import sqs_model

# Actions whose input names one queue by its URL: those routed to that queue's group.
QUEUE_URL_ACTIONS = frozenset(a for a, op in sqs_model().operations.items() if "QueueUrl" in op.input.members)
_TARGETS = frozenset(f"{sqs_model().target_prefix}.{a}" for a in QUEUE_URL_ACTIONS)


class _Url(msgspec.Struct):
    QueueUrl: str | None = None


_decode_url = msgspec.json.Decoder(_Url).decode


def queue_key_of(req, region: str, account: str | None) -> QueueKey | None:
    """The queue ``req`` (an ``HttpRequest``) names, or ``None``: it names none, several, or
    cannot be told without the full parse. ``region`` and ``account`` are the endpoint's defaults
    (``EndpointConfig.region`` and ``account_id``; ``account=None`` where signatures are
    verified and the signer decides it)."""
    headers = req.headers
    target = headers.get("x-amz-target")
    if target is not None:
        if target not in _TARGETS or req.method != "POST":
            return None
        try:
            url = _decode_url(req.body).QueueUrl
        except msgspec.DecodeError:
            return None
        form = None
    else:
        method = req.method
        if method != "POST" and method != "GET":
            return None
        try:
            form = query_proto.parse_form(req.query, req.body if method == "POST" else b"")
        except SqsError:
            return None
        if form.get("Action") not in QUEUE_URL_ACTIONS:
            return None
        url = form.get("QueueUrl")
        if url is None and query_proto.is_queue_path(req.path):
            url = req.path
    if not url:
        return None
    try:
        key = key_from_queue_url(url, Namespace(region_from_headers(headers, form, region), account or ""))
    except SqsError:
        return None
    if not key.account:   # named no account, and the signer's is not known here
        return None
    return key


def key_of(command: Command) -> QueueKey | None:
    """The queue a parsed command names, or ``None`` (ListQueues, the move tasks): with queue
    groups, the queue whose group runs it."""
    q = getattr(command, "queue", None)
    if q is not None:
        return q
    t = type(command)
    if t is CreateQueue and command.name is not None:
        return command.ns.key(command.name)
    if t is GetQueueUrl and command.name is not None:
        return QueueKey(command.ns.region, command.owner_account or command.ns.account, command.name)
    return None

