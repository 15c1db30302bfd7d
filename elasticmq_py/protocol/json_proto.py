"""AWS JSON 1.0, as current SDKs speak it to SQS (``awsQueryCompatible``)."""

from __future__ import annotations

import json
from functools import cache

import msgspec

from storage.errors import INVALID_ACTION, SqsError

from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol import json_types
from elasticmq_py.protocol.model import ServiceModel
from elasticmq_py.protocol.params import from_json

CONTENT_TYPE = "application/x-amz-json-1.0"
_ERROR_PREFIX = "com.amazonaws.sqs#"


def action_of(target: str, model: ServiceModel) -> str:
    action = _targets(model).get(target)
    if action is not None:
        return action
    prefix, _, action = target.partition(".")
    if prefix != model.target_prefix or action not in model.operations:
        raise INVALID_ACTION(f"The action {action or target} is not valid for this endpoint.")
    return action


@cache
def _targets(model: ServiceModel) -> dict[str, str]:
    """X-Amz-Target -> action, for every valid target."""
    return {f"{model.target_prefix}.{action}": action for action in model.operations}


_decode = json.JSONDecoder().decode


def _loads(body: bytes) -> object:
    """``json.loads(body)``, without its per-call encoding detection in the common case: a body
    that starts with ``{`` followed by a non-NUL byte is what json.detect_encoding calls UTF-8
    (no BOM, not UTF-16/32), and json.loads would decode it exactly so."""
    if body[:1] == b"{" and body[1:2] != b"\x00":
        return _decode(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


@cache
def _decoders(model: ServiceModel) -> dict:
    return json_types.decoders(model)


def parse(action: str, body: bytes, model: ServiceModel) -> dict:
    """The parameter tree of a JSON request body for ``action`` (already checked by action_of)."""
    fast = _decoders(model).get(action)
    if fast is not None:
        try:
            return fast.decode(body)
        except Exception:
            pass   # refused by the fast path: the reference reading gives the error, or the tree
    return parse_reference(action, body, model)


def parse_reference(action: str, body: bytes, model: ServiceModel) -> dict:
    """``parse`` by ``json`` and the model walk alone: the errors clients get, and the judge of
    the msgspec fast path."""
    if not body.strip():
        obj: object = {}
    else:
        try:
            obj = _loads(body)  # bytes: decoded as UTF-8 (lone surrogates are refused by params)
        except (ValueError, RecursionError):
            raise perr.serialization("The request body is not valid JSON.") from None
    if not isinstance(obj, dict):
        raise perr.serialization("The request body must be a JSON object.")
    return from_json(model.operations[action].input, obj)


# msgspec writes exactly what json.dumps(output, ensure_ascii=False, separators=(",", ":"))
# wrote, encoded as UTF-8, blobs as standard base64 (tests/endpoint/test_json_types.py
# compares the two over every code point), in a tenth of the instructions.
_encode = msgspec.json.Encoder().encode


def render(output: dict | None, request_id: str) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    body = b"{}" if output is None else _encode(output)
    return 200, (("Content-Type", CONTENT_TYPE), ("x-amzn-RequestId", request_id)), body


def render_error(err: SqsError, request_id: str) -> tuple[int, tuple[tuple[str, str], ...], bytes]:
    kind = err.kind
    body = json.dumps({"__type": _ERROR_PREFIX + kind.shape, "message": err.message},
                      ensure_ascii=False).encode("utf-8")
    fault = "Sender" if kind.sender_fault else "Receiver"
    headers = (
        ("Content-Type", CONTENT_TYPE),
        ("x-amzn-RequestId", request_id),
        ("X-Amzn-Query-Error", f"{kind.query_code};{fault}"),
    )
    return kind.status, headers, body
