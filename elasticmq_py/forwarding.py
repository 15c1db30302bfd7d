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


def encode_request(req: HttpRequest) -> bytes:
    return msgpack.packb([req.method, req.path, req.query, list(req.headers.items()), req.body], use_bin_type=True)


def decode_request(data: bytes) -> HttpRequest:
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


def encode_response(resp: HttpResponse) -> bytes:
    return msgpack.packb([resp.status, [list(h) for h in resp.headers], resp.body], use_bin_type=True)


def decode_response(data: bytes) -> HttpResponse:
    try:
        status, headers, body = msgpack.unpackb(data, raw=False, use_list=True)
        if not (isinstance(status, int) and isinstance(body, bytes) and isinstance(headers, list)
                and all(isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h)
                        for h in headers)):
            raise ForwardError("malformed forwarded response")
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ForwardError(f"undecodable forwarded response: {e}") from None
    return HttpResponse(status, tuple((k, v) for k, v in headers), body)
