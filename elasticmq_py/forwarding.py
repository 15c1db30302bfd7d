"""Forwarded client requests as bytes: the HTTP request a member hands to the master, and the answer.

A member that is not the master (and has ``forward = true``) hands each SQS request, as received
(method, path, query, headers, body), to the master in a ``Forward`` frame on the authenticated
mutation-stream connection, and answers the client with the master's response. Why not an HTTP
proxy: the stream link is already open, authenticated with the cluster secret and dialled
through the configured per-link address (so a partition cuts forwarding exactly as it cuts
replication), and needs no further address for the master's endpoint. The master runs a
forwarded request through its endpoint like any other, except that it never forwards again: if
it is not the active master any more, the client gets the retryable 503.

Which requests are forwarded, to whom, and when a forward has failed are the node core's
decisions (cluster/node_core.py); this module only encodes. The Host header travels with the
request, so queue URLs in the answer name the endpoint the client used. Both directions are
msgpack of builtins, checked field by field: nothing is unpickled.
"""

from __future__ import annotations

import msgpack

from elasticmq_py.protocol.wire import HttpRequest, HttpResponse


class ForwardError(ValueError):
    pass


# One packer for every frame: msgpack.packb builds a new one per call. Tuples pack as arrays,
# as lists do, so the bytes are the same either way.
_pack = msgpack.Packer(use_bin_type=True).pack


def encode_request(req: HttpRequest) -> bytes:
    return _pack([req.method, req.path, req.query, list(req.headers.items()), req.body])


def _headers_ok(headers: object) -> bool:
    """A list of [str, str] pairs (msgpack's arrays decode as lists)."""
    if type(headers) is not list:
        return False
    for h in headers:
        if type(h) is not list or len(h) != 2 or not isinstance(h[0], str) or not isinstance(h[1], str):
            return False
    return True


def decode_request(data: bytes) -> HttpRequest:
    try:
        method, path, query, headers, body = msgpack.unpackb(data, raw=False, use_list=True)
        if not (isinstance(method, str) and isinstance(path, str) and isinstance(query, bytes)
                and isinstance(body, bytes) and _headers_ok(headers)):
            raise ForwardError("malformed forwarded request")
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ForwardError(f"undecodable forwarded request: {e}") from None
    return HttpRequest(method, path, query, dict(headers), body)


def encode_response(resp: HttpResponse) -> bytes:
    return _pack([resp.status, resp.headers, resp.body])


def decode_response(data: bytes) -> HttpResponse:
    try:
        status, headers, body = msgpack.unpackb(data, raw=False, use_list=True)
        if not (isinstance(status, int) and isinstance(body, bytes) and _headers_ok(headers)):
            raise ForwardError("malformed forwarded response")
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ForwardError(f"undecodable forwarded response: {e}") from None
    return HttpResponse(status, tuple(map(tuple, headers)), body)
