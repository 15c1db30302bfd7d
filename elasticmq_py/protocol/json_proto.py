"""AWS JSON 1.0, as current SDKs speak it to SQS (``awsQueryCompatible``)."""

from __future__ import annotations

import json

import msgspec

from storage.errors import INVALID_ACTION, SqsError

from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol import json_types
from elasticmq_py.protocol.model import ServiceModel
from elasticmq_py.protocol.params import from_json

CONTENT_TYPE = "application/x-amz-json-1.0"
_ERROR_PREFIX = "com.amazonaws.sqs#"


class JsonReader:
    """Reads JSON requests against one service model: the action an X-Amz-Target names, and the
    parameter tree of a body. Built once (an endpoint holds one), so that a request looks its
    target and decoder up in plain dicts: finding them by model (``functools.cache``) cost
    ~1,600 instructions a request."""

    __slots__ = ("model", "_actions", "decoders")

    def __init__(self, model: ServiceModel):
        self.model = model
        # X-Amz-Target -> action, for every valid target
        self._actions = {f"{model.target_prefix}.{action}": action for action in model.operations}
        self.decoders: dict[str, msgspec.json.Decoder] = json_types.decoders(model)

    def action_of(self, target: str) -> str:
        action = self._actions.get(target)
        if action is not None:
            return action
        model = self.model
        prefix, _, action = target.partition(".")
        if prefix != model.target_prefix or action not in model.operations:
            raise INVALID_ACTION(f"The action {action or target} is not valid for this endpoint.")
        return action

    def parse(self, action: str, body: bytes) -> dict:
        """The parameter tree of a JSON request body for ``action`` (already checked by action_of)."""
        try:
            return self.fast(action, body)
        except Exception:
            # refused by the fast path: the reference reading gives the error, or the tree
            return parse_reference(action, body, self.model)

    def fast(self, action: str, body: bytes) -> dict:
        """The msgspec reading alone; raises where it cannot stand in for the reference."""
        # msgspec skips an unknown member without checking its bytes: a body that is not UTF-8
        # throughout goes to the reference reading, which refuses it as a whole
        if not (body.isascii() or _utf8(body)):
            raise ValueError("not UTF-8 throughout")
        return self.decoders[action].decode(body)


_decode = json.JSONDecoder().decode


def _utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8", "surrogatepass")   # as the reference reads it
    except UnicodeDecodeError:
        return False
    return True


def _loads(body: bytes) -> object:
    """``json.loads(body)``, without its per-call encoding detection in the common case: a body
    that starts with ``{`` followed by a non-NUL byte is what json.detect_encoding calls UTF-8
    (no BOM, not UTF-16/32), and json.loads would decode it exactly so."""
    if body[:1] == b"{" and body[1:2] != b"\x00":
        return _decode(body.decode("utf-8", "surrogatepass"))
    return json.loads(body)


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
    # Errors of AWS's common front end (authentication, authorization) are not SQS shapes and
    # carry their own namespace (com.amazon.coral.service#...).
    shape = kind.shape if "#" in kind.shape else _ERROR_PREFIX + kind.shape
    body = json.dumps({"__type": shape, "message": err.message},
                      ensure_ascii=False).encode("utf-8")
    fault = "Sender" if kind.sender_fault else "Receiver"
    headers = (
        ("Content-Type", CONTENT_TYPE),
        ("x-amzn-RequestId", request_id),
        ("X-Amzn-Query-Error", f"{kind.query_code};{fault}"),
    )
    return kind.status, headers, body
