"""The AWS Query protocol: form-encoded requests, XML responses (what older SDKs speak), or JSON
ones for a client that asks for them with ``Accept: application/json``."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qsl, unquote_to_bytes

from storage.errors import INVALID_ACTION, QUEUE_DOES_NOT_EXIST, SqsError

from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol.model import ServiceModel, Shape
from elasticmq_py.protocol.params import from_query

CONTENT_TYPE = "text/xml"
JSON_CONTENT_TYPE = "application/json"
MAX_FORM_FIELDS = 10_000
# Actions that address no queue, refused when sent to a queue's URL (LocalStack's AWS-validated
# test_get_create_queue_fails and test_get_list_queues_fails).
_QUEUELESS = frozenset(("CreateQueue", "ListQueues"))
# What the Query protocol says where the JSON protocol says "The specified queue does not exist."
# (LocalStack's AWS-validated test_non_existent_queue and test_get_on_deleted_queue_fails).
_NO_QUEUE_MESSAGE = "The specified queue does not exist for this wsdl version."


def parse_form(*parts: bytes) -> dict[str, str]:
    """Merge the URL query and the body (later parts win). Invalid UTF-8 becomes lone
    surrogates, which ``params`` turns into the SQS error for the field they are in."""
    out: dict[str, str] = {}
    for raw in parts:
        if not raw:
            continue
        if raw.isascii():
            _parse_ascii(raw, out)
            continue
        text = raw.decode("utf-8", "surrogateescape")
        try:
            pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8",
                              errors="surrogateescape", max_num_fields=MAX_FORM_FIELDS)
        except ValueError:
            raise perr.MALFORMED_QUERY_STRING("The request has too many parameters.") from None
        for k, v in pairs:
            out[k] = v
    return out


def _unquote(b: bytes) -> str:
    if b"+" in b:
        b = b.replace(b"+", b" ")
    if b"%" in b:
        b = unquote_to_bytes(b)
    return b.decode("utf-8", "surrogateescape")


# Field names and short values repeat from request to request (Action=SendMessage, Version,
# QueueUrl=...): their decoded forms are kept, in a dict that is emptied when it fills up.
_UNQUOTED: dict[bytes, str] = {}
_UNQUOTED_MAX = 4096
_CACHED_VALUE_MAX = 256


def _unquote_cached(b: bytes) -> str:
    s = _UNQUOTED.get(b)
    if s is None:
        s = _unquote(b)
        if len(_UNQUOTED) >= _UNQUOTED_MAX:
            _UNQUOTED.clear()
        _UNQUOTED[b] = s
    return s


def _parse_ascii(raw: bytes, out: dict[str, str]) -> None:
    """parse_qsl(raw.decode(), keep_blank_values=True, encoding="utf-8", errors="surrogateescape",
    max_num_fields=MAX_FORM_FIELDS) into ``out``, for an ASCII form (what every SDK sends), on
    bytes. For ASCII input the two agree exactly: parse_qsl's unquote turns each ASCII run into
    bytes and decodes them with the given codec, here the whole field at once."""
    if raw.count(b"&") + 1 > MAX_FORM_FIELDS:
        raise perr.MALFORMED_QUERY_STRING("The request has too many parameters.")
    for field in raw.split(b"&"):
        if not field:
            continue
        name, eq, value = field.partition(b"=")
        key = _unquote_cached(name)
        if not (eq and value):
            out[key] = ""    # "name" without "=" is a blank value (keep_blank_values)
        elif len(value) > _CACHED_VALUE_MAX or key.endswith("MessageBody"):
            out[key] = _unquote(value)   # message bodies rarely repeat: not worth keeping
        else:
            out[key] = _unquote_cached(value)


def is_queue_path(path: str) -> bool:
    return path.strip("/").count("/") == 1


def action_of(form: dict[str, str], model: ServiceModel, path: str = "/") -> str:
    action = form.get("Action")
    if action is None:
        raise perr.UNKNOWN_OPERATION("")
    if action not in model.operations or (action in _QUEUELESS and is_queue_path(path)):
        raise INVALID_ACTION(f"The action {action[:128]} is not valid for this endpoint.")
    return action


def parse(action: str, form: dict[str, str], model: ServiceModel, path: str = "/") -> dict:
    shape = model.operations[action].input
    if "QueueUrl" in shape.members and "QueueUrl" not in form and is_queue_path(path):
        # older SDKs address queue actions by posting to the queue URL itself
        form = {**form, "QueueUrl": path}
    tree = from_query(shape, form)
    if action == "ReceiveMessage" and "AttributeNames" in tree:
        # Given both, the Query protocol answers AttributeNames alone (where JSON answers
        # MessageSystemAttributeNames): LocalStack's AWS-validated
        # test_message_system_attribute_names_with_attribute_names.
        tree.pop("MessageSystemAttributeNames", None)
    return tree


# --- XML output --------------------------------------------------------------------------------

def _esc(s: str) -> str:
    # \r must survive an XML parser's newline normalisation, so it is a character reference;
    # so are the other whitespace controls SQS allows in bodies.
    if s.isalnum():
        return s
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("\r", "&#xD;"))


def _scalar(shape: Shape, v) -> str:
    if shape.type == "blob":
        return base64.b64encode(v).decode("ascii")
    if shape.type == "boolean":
        return "true" if v else "false"
    if shape.type in ("integer", "long"):
        return str(int(v))
    return _esc(v)


def _encode(shape: Shape, name: str, v, out: list[str]) -> None:
    t = shape.type
    if t == "structure":
        out.append(f"<{name}>")
        _members(shape, v, out)
        out.append(f"</{name}>")
    elif t == "list":
        m = shape.member
        if shape.flattened:
            ename = m.location_name or name
            for item in v:
                _encode(m, ename, item, out)
        else:
            out.append(f"<{name}>")
            ename = m.location_name or "member"
            for item in v:
                _encode(m, ename, item, out)
            out.append(f"</{name}>")
    elif t == "map":
        kname = shape.key.location_name or "key"
        vname = shape.value.location_name or "value"
        ename = name if shape.flattened else "entry"
        if not shape.flattened:
            out.append(f"<{name}>")
        for k, item in v.items():
            out.append(f"<{ename}><{kname}>{_esc(k)}</{kname}>")
            _encode(shape.value, vname, item, out)
            out.append(f"</{ename}>")
        if not shape.flattened:
            out.append(f"</{name}>")
    else:
        out.append(f"<{name}>{_scalar(shape, v)}</{name}>")


_MEMBERS: dict[Shape, tuple[tuple[str, Shape, str], ...]] = {}


def _members(shape: Shape, v: dict, out: list[str]) -> None:
    plan = _MEMBERS.get(shape)
    if plan is None:
        plan = _MEMBERS[shape] = tuple((mname, m, m.location_name or mname)
                                       for mname, m in shape.members.items())
    for mname, m, ename in plan:
        if mname in v:
            if m.type == "string":   # the hot case inline, as _encode would do it
                out.append(f"<{ename}>{_esc(v[mname])}</{ename}>")
            else:
                _encode(m, ename, v[mname], out)


def render(action: str, output: dict | None, request_id: str, model: ServiceModel,
           as_json: bool = False) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    op = model.operations[action]
    if as_json:
        return _render_json(action, op, output, request_id)
    out = [f'<?xml version="1.0"?><{action}Response xmlns="{model.namespace}">']
    if op.output is not None and op.result_wrapper:
        if output:
            out.append(f"<{op.result_wrapper}>")
            _members(op.output, output, out)
            out.append(f"</{op.result_wrapper}>")
        else:   # <ReceiveMessageResult/>, as AWS answers an empty receive (LocalStack's
            # AWS-validated test_get_send_and_receive_messages)
            out.append(f"<{op.result_wrapper}/>")
    out.append(f"<ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata>"
               f"</{action}Response>")
    return 200, (("Content-Type", CONTENT_TYPE), ("x-amzn-RequestId", request_id)), \
        "".join(out).encode("utf-8")


def render_error(err: SqsError, request_id: str, namespace: str,
                 as_json: bool = False) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    kind = err.kind
    if kind == perr.UNKNOWN_OPERATION:   # XML whatever the client accepts, as AWS answers it
        return kind.status, (("Content-Type", CONTENT_TYPE), ("x-amzn-RequestId", request_id)), \
            b"<UnknownOperationException/>"
    fault = "Sender" if kind.sender_fault else "Receiver"
    message = _NO_QUEUE_MESSAGE if kind == QUEUE_DOES_NOT_EXIST else err.message
    if as_json:
        doc = {"Error": {"Type": fault, "Code": kind.query_code, "Message": message}, "RequestId": request_id}
        return kind.status, (("Content-Type", JSON_CONTENT_TYPE), ("x-amzn-RequestId", request_id)), \
            json.dumps(doc, ensure_ascii=False).encode("utf-8")
    body = (f'<?xml version="1.0"?><ErrorResponse xmlns="{namespace}"><Error><Type>{fault}</Type>'
            f"<Code>{_esc(kind.query_code)}</Code><Message>{_esc(message)}</Message><Detail/>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>")
    return kind.status, (("Content-Type", CONTENT_TYPE), ("x-amzn-RequestId", request_id)), \
        body.encode("utf-8")


# --- JSON output, for Query requests that accept it ---------------------------------------------
#
# AWS answers a Query request with Accept: application/json in JSON: {"<Action>Response":
# {"<Action>Result": {...}, "ResponseMetadata": {"RequestId": ...}}}. Recorded shapes are few
# (LocalStack's AWS-validated test_get_list_queues_with_query_auth, test_marker_serialization_json_protocol
# and test_get_queue_attributes_json_format; the R package cloudyr/aws.sqs reads queueUrls):
# lists under lower-camel names ("messages", "queueUrls"), maps as lists of {"Name", "Value"}
# ("Attributes"). Every other member follows the same rules: docs/semantics.md.

def _json_value(shape: Shape, v):
    t = shape.type
    if t == "structure":
        return {(name[0].lower() + name[1:] if m.type == "list" else name): _json_value(m, v[name])
                for name, m in shape.members.items() if name in v}
    if t == "list":
        return [_json_value(shape.member, item) for item in v]
    if t == "map":
        kname = shape.key.location_name or "Name"
        vname = shape.value.location_name or "Value"
        return [{kname: k, vname: _json_value(shape.value, item)} for k, item in v.items()]
    if t == "blob":
        return base64.b64encode(v).decode("ascii")
    return v


def _render_json(action: str, op, output: dict | None,
                 request_id: str) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    response: dict = {}
    if op.output is not None and op.result_wrapper:
        response[op.result_wrapper] = _json_value(op.output, output or {})
    response["ResponseMetadata"] = {"RequestId": request_id}
    body = json.dumps({f"{action}Response": response}, ensure_ascii=False).encode("utf-8")
    return 200, (("Content-Type", JSON_CONTENT_TYPE), ("x-amzn-RequestId", request_id)), body
