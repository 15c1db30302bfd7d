"""The queue a request names, found before the request is parsed.

With queue groups a member must know a request's queue to route it to that queue's group master,
and most requests are routed elsewhere: paying the full parse (every member checked against the
model, the storage command built) on the member that only forwards would double the parse of
most requests. ``queue_key_of`` reads only what names the queue:

* the action (``X-Amz-Target``, or the Query form's ``Action``): an action whose input has a
  ``QueueUrl`` member names one queue by its URL; the move task actions name their source queue,
  by ARN (``SourceArn``: StartMessageMoveTask, ListMessageMoveTasks) or through the task's
  handle (``TaskHandle``: CancelMessageMoveTask, storage/keys.py ``parse_task_handle``). The
  others name none (ListQueues), a name still to be placed (CreateQueue), or a name and an owner
  to be looked up (GetQueueUrl), and get ``None``;
* the member that names the queue: a JSON 1.0 body's top-level member (msgspec, skipping every
  other member in C), or the Query form's field; for a queue URL, the request's path where the
  form has none (older SDKs post to the queue URL itself), exactly as ``query_proto.parse``
  takes it;
* the region, as the endpoint reads it: the SigV4 scope of ``Authorization`` (or, for the Query
  protocol, a presigned ``X-Amz-Credential``), else the endpoint's own.

The URL is then resolved as the full parse resolves it (``addressing.key_from_queue_url``), an
ARN as storage reads it (``parse_arn``: its region, account and name, whatever the request's). A
queue URL names its account; a bare name or ElasticMQ's ``/queue/NAME`` means the account the
request acts as, which is the endpoint's (``account``) or, with signatures verified, the signer's:
give ``account=None`` there, and such a request gets ``None``.

``None`` means "parse it to know": anything malformed, ambiguous or refused is left to the full
parse, which answers the error. Where this returns a key, the full parse of the same request
yields a command on that key (``storage.keys.command_key``), or an error
(tests/endpoint/test_queue_key.py checks both on the whole conformance corpus).
"""

from __future__ import annotations

import msgspec

from storage.commands import Namespace, QueueKey
from storage.errors import SqsError
from storage.keys import parse_arn, parse_task_handle

from elasticmq_py.protocol import query_proto
from elasticmq_py.protocol.addressing import key_from_queue_url, region_from_headers
from elasticmq_py.protocol.model import sqs_model

# Actions whose input names one queue by its URL: those routed to that queue's group.
QUEUE_URL_ACTIONS = frozenset(a for a, op in sqs_model().operations.items() if "QueueUrl" in op.input.members)
_TARGETS = frozenset(f"{sqs_model().target_prefix}.{a}" for a in QUEUE_URL_ACTIONS)


class _Url(msgspec.Struct):
    QueueUrl: str | None = None


class _SourceArn(msgspec.Struct):
    SourceArn: str | None = None


class _TaskHandle(msgspec.Struct):
    TaskHandle: str | None = None


def _source_of_handle(handle: str) -> QueueKey | None:
    named = parse_task_handle(handle)
    return parse_arn(named[1]) if named is not None else None


# The move task actions, which name their source queue: the member that names it, how a JSON
# body's member is read, and the queue it names.
_BY_SOURCE = {
    a: (member, msgspec.json.Decoder(struct).decode, of)
    for member, struct, of in (("SourceArn", _SourceArn, parse_arn), ("TaskHandle", _TaskHandle, _source_of_handle))
    for a, op in sqs_model().operations.items() if member in op.input.members}
SOURCE_ACTIONS = frozenset(_BY_SOURCE)
_SOURCE_TARGETS = {f"{sqs_model().target_prefix}.{a}": how for a, how in _BY_SOURCE.items()}

_decode_url = msgspec.json.Decoder(_Url).decode


def queue_key_of(req, region: str, account: str | None) -> QueueKey | None:
    """The queue ``req`` (an ``HttpRequest``) names, or ``None``: it names none, several, or
    cannot be told without the full parse. ``region`` and ``account`` are the endpoint's defaults
    (``EndpointConfig.region`` and ``account_id``; ``account=None`` where signatures are
    verified and the signer decides it)."""
    headers = req.headers
    target = headers.get("x-amz-target")
    if target is not None:
        if req.method != "POST":
            return None
        if target not in _TARGETS:
            return _json_source(req.body, target)
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
        action = form.get("Action")
        if action not in QUEUE_URL_ACTIONS:
            how = _BY_SOURCE.get(action)   # type: ignore[arg-type]
            if how is None:
                return None
            value = form.get(how[0])
            return how[2](value) if value else None
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


def _json_source(body: bytes, target: str) -> QueueKey | None:
    """The source queue a move task action names in JSON, or ``None``."""
    how = _SOURCE_TARGETS.get(target)
    if how is None:
        return None
    member, decode, of = how
    try:
        value = getattr(decode(body), member)
    except msgspec.DecodeError:
        return None
    return of(value) if value else None
