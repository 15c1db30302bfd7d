"""elasticmq_py/forwarding.py: forwarded requests and answers as bytes. Its fast forms (one packer,
tuples decoded as they come) are checked against the plain reading written out here: the same
bytes out, the same values or the same refusal in."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticmq_py.forwarding import ForwardError, decode_request, decode_response, encode_request, encode_response
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse


def plain_encode_request(req: HttpRequest) -> bytes:
    return msgpack.packb([req.method, req.path, req.query, list(req.headers.items()), req.body], use_bin_type=True)


def plain_encode_response(resp: HttpResponse) -> bytes:
    return msgpack.packb([resp.status, [list(h) for h in resp.headers], resp.body], use_bin_type=True)


def plain_decode_request(data: bytes) -> HttpRequest:
    try:
        method, path, query, headers, body = msgpack.unpackb(data, raw=False, use_list=True)
        if not (isinstance(method, str) and isinstance(path, str) and isinstance(query, bytes)
                and isinstance(body, bytes) and isinstance(headers, list)
                and all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
                        for h in headers)):
            raise ForwardError("malformed forwarded request")
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ForwardError(f"undecodable forwarded request: {e}") from None
    return HttpRequest(method, path, query, dict(headers), body)


def plain_decode_response(data: bytes) -> HttpResponse:
    try:
        status, headers, body = msgpack.unpackb(data, raw=False, use_list=True)
        if not (isinstance(status, int) and isinstance(body, bytes) and isinstance(headers, list)
                and all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
                        for h in headers)):
            raise ForwardError("malformed forwarded response")
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ForwardError(f"undecodable forwarded response: {e}") from None
    return HttpResponse(status, tuple((k, v) for k, v in headers), body)


def outcome(decode, data: bytes):
    """The value decoded, or the refusal's message."""
    try:
        return decode(data)
    except ForwardError as e:
        return f"ForwardError: {e}"


_TEXT = st.text(max_size=8)
_HEADERS = st.dictionaries(_TEXT, _TEXT, max_size=4)


@given(st.sampled_from(["GET", "POST"]), _TEXT, st.binary(max_size=16), _HEADERS, st.binary(max_size=64))
@settings(max_examples=200, deadline=None)
def test_requests_round_trip_in_the_same_bytes(method, path, query, headers, body):
    req = HttpRequest(method, path, query, headers, body)
    data = encode_request(req)
    assert data == plain_encode_request(req)
    assert decode_request(data) == req


@given(st.integers(100, 599), st.lists(st.tuples(_TEXT, _TEXT), max_size=4), st.binary(max_size=64))
@settings(max_examples=200, deadline=None)
def test_responses_round_trip_in_the_same_bytes(status, headers, body):
    resp = HttpResponse(status, tuple(headers), body)
    data = encode_response(resp)
    assert data == plain_encode_response(resp)
    assert decode_response(data) == resp


_ANY = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | _TEXT | st.binary(max_size=4),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=2),
                    max_leaves=12)


@given(_ANY)
@settings(max_examples=500, deadline=None)
def test_whatever_arrives_is_read_or_refused_as_the_plain_reading_does(value):
    data = msgpack.packb(value, use_bin_type=True)
    assert outcome(decode_request, data) == outcome(plain_decode_request, data)
    assert outcome(decode_response, data) == outcome(plain_decode_response, data)


@pytest.mark.parametrize("data", [
    b"", b"\xc1", msgpack.packb(["GET", "/", b"", [["a", "b", "c"]], b""]),
    msgpack.packb(["GET", "/", b"", [("a", 1)], b""]), msgpack.packb([200, [["a", "b"]], "not bytes"]),
    msgpack.packb([True, [], b""]), msgpack.packb({"a": 1}), msgpack.packb([1, 2, 3, 4, 5, 6]),
    b"\x93\x81\x91\x01\x02\x90\xc4\x00",   # [{[1]: 2}, [], b""]: an array as a map key
])
def test_refusals(data):
    assert outcome(decode_request, data) == outcome(plain_decode_request, data)
    assert outcome(decode_response, data) == outcome(plain_decode_response, data)
