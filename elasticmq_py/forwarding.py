"""Forwarding client requests from any member to the master, over the cluster's own stream.

A member that is not the master (and has ``forward = true``) hands each SQS request, as
received (method, path, query, headers, body), to the master in a ``Forward`` frame on the
authenticated mutation-stream connection, and answers the client with the master's response.
Why not an HTTP proxy: the stream link is already open, authenticated with the cluster secret
and dialled through the configured per-link address (so a partition cuts forwarding exactly as
it cuts replication), and needs no further address for the master's endpoint. The master runs
a forwarded request through its endpoint like any other, except that it never forwards again:
if it is not the active master any more, the client gets the retryable 503.

The Host header travels with the request, so queue URLs in the answer name the endpoint the
client used. A request whose answer does not come back (the master died, a partition, the master
changed) gets a retryable 503 that says the outcome is unknown.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TYPE_CHECKING, Awaitable, Callable

import msgpack

from cluster.replication.messages import Forward, ForwardReply
from cluster.replication.transport import PeerEvent

from elasticmq_py.protocol.wire import HttpRequest, HttpResponse
from elasticmq_py.reply import Reply

if TYPE_CHECKING:
    from cluster.replicated import ReplicatedStorage
    from elasticmq_py.endpoint import Endpoint

log = logging.getLogger(__name__)

# A long poll waits up to 20 s on the master; beyond this margin the answer is given up on.
FORWARD_TIMEOUT_S = 30.0


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


class Forwarder:
    def __init__(self, replicated: "ReplicatedStorage", timeout: float = FORWARD_TIMEOUT_S) -> None:
        self.replicated = replicated
        self.stream = replicated.stream
        self.timeout = timeout
        self.endpoint: "Endpoint | None" = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[str, asyncio.Future]] = {}
        self.forwarded = 0
        self.served = 0
        self.failed = 0
        self.stream.handlers[Forward] = self._on_forward
        self.stream.handlers[ForwardReply] = self._on_reply
        previous = self.stream.on_peer

        def on_peer(event: PeerEvent) -> None:
            if not event.connected:
                self._fail_to(event.name, f"the connection to the master {event.name} was lost")
            if previous is not None:
                previous(event)

        self.stream.on_peer = on_peer

    # -- the forwarding member -------------------------------------------------------------------

    def target(self) -> str | None:
        """The master to forward to now, or None to answer locally (master here, or forwarding
        off). Raises ForwardError when forwarding is on but the master cannot be reached."""
        r = self.replicated
        if not r.forward or r.serving:
            return None
        master = r.master_name()
        if master is None or master == r.name:
            return None     # no master yet, or ourselves still synchronising: the local 503
        if not self.stream.transport.connected(master):
            raise ForwardError(f"node {r.name} cannot reach the master {master}")
        return master

    async def forward(self, master: str, req: HttpRequest, reject: Callable[[str], HttpResponse]) -> HttpResponse:
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[rid] = (master, fut)
        self.forwarded += 1
        try:
            if not self.stream.send(master, Forward(rid, encode_request(req))):
                self.failed += 1
                return reject(f"node {self.replicated.name} could not hand the request to the master {master}; "
                              "it was not executed")
            try:
                return await asyncio.wait_for(fut, self.timeout)
            except asyncio.TimeoutError:
                self.failed += 1
                return reject(f"the master {master} did not answer within {self.timeout:.0f} s; "
                              "the request may or may not have been executed")
            except ForwardError as e:
                self.failed += 1
                return reject(f"{e}; the request may or may not have been executed")
        finally:
            self._waiting.pop(rid, None)

    def _on_reply(self, sender: str, frame: ForwardReply) -> None:
        entry = self._waiting.get(frame.request_id)
        if entry is None or entry[0] != sender:
            # typically the answer to a request given up on when the master changed
            log.info("forwarding: a reply to %d from %s that nobody waits for", frame.request_id, sender)
            return
        fut = entry[1]
        if fut.done():
            return
        try:
            fut.set_result(decode_response(frame.payload))
        except ForwardError as e:
            log.warning("forwarding: %s from %s", e, sender)
            fut.set_exception(e)

    def _fail_to(self, master: str, reason: str) -> None:
        for target, fut in list(self._waiting.values()):
            if target == master and not fut.done():
                fut.set_exception(ForwardError(reason))

    def master_changed(self, master: str | None) -> None:
        for target, fut in list(self._waiting.values()):
            if target != master and not fut.done():
                fut.set_exception(ForwardError(f"the master changed from {target} to {master}"))

    # -- the master -------------------------------------------------------------------------------

    def _on_forward(self, sender: str, frame: Forward) -> None:
        try:
            req = decode_request(frame.payload)
        except ForwardError as e:
            log.warning("forwarding: refused a request from %s: %s", sender, e)
            return
        if self.endpoint is None:
            return
        self.served += 1
        resp = self.endpoint.handle_forwarded(req)
        if isinstance(resp, HttpResponse):
            self._reply(sender, frame.request_id, resp)
        elif type(resp) is Reply:
            rid = frame.request_id
            resp.then(lambda r: self._reply(sender, rid, r))
        else:
            asyncio.ensure_future(self._finish(sender, frame.request_id, resp))

    async def _finish(self, sender: str, rid: int, pending: Awaitable[HttpResponse]) -> None:
        try:
            resp = await pending
        except Exception:
            log.exception("forwarding: a forwarded request failed")
            return
        self._reply(sender, rid, resp)

    def _reply(self, to: str, rid: int, resp: HttpResponse) -> None:
        self.stream.send(to, ForwardReply(rid, encode_response(resp)))

    def status(self) -> dict:
        return {"forwarded": self.forwarded, "served_for_others": self.served, "failed": self.failed,
                "in_flight": len(self._waiting)}

