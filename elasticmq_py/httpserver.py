"""HTTP/1.1 on a raw asyncio protocol with httptools (llhttp), bound to ``Endpoint``.

Why not aiohttp or an ASGI server: with a trivial handler each served several times fewer
requests per second than this protocol (docs/performance.md, "The HTTP stack"). Most of a
framework's cost is a task and a request object per request; SQS requests
are small and almost always answered synchronously, so this layer answers inline and creates a
task only for a request that must wait (long polls, replicated writes).

What this layer owns: keep-alive and pipelining (responses in request order), body and header
size limits answered with SQS-shaped errors, ``Expect: 100-continue``, write back-pressure, and
cancelling a waiting request when its client disconnects.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from http import HTTPStatus
from ssl import SSLContext

import httptools

from storage.errors import SqsError, invalid_parameter

from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse
from elasticmq_py.reply import Reply

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 64 * 1024
MAX_PIPELINED = 32
# Idle keep-alive connections are closed after this long (nginx's default), so that abandoned
# clients cannot pile up file descriptors. Clients' pools reconnect transparently.
IDLE_TIMEOUT_S = 75.0
_SWEEP_INTERVAL_S = 15.0
_REASONS = {s.value: s.phrase for s in HTTPStatus}


def _status_line(status: int) -> bytes:
    return f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n".encode("ascii")


_STATUS_LINES = {s: _status_line(s) for s in _REASONS}
# Header names as clients send them -> the lower-cased str the endpoint looks up (saves a decode
# and a lower() per header); any other name is decoded as it comes.
_HEADER_NAMES = {n.encode("latin-1"): n.lower() for n in (
    "Host", "User-Agent", "Accept-Encoding", "Accept", "Content-Type", "Content-Length",
    "Connection", "X-Amz-Date", "X-Amz-Target", "X-Amz-Content-SHA256", "X-Amz-Security-Token",
    "X-Amz-User-Agent", "Authorization", "amz-sdk-invocation-id", "amz-sdk-request", "Expect",
    "Transfer-Encoding", "X-Amzn-Query-Mode", "x-amzn-query-mode")}
_HEADER_NAMES.update({k.lower(): v for k, v in list(_HEADER_NAMES.items())})
_METHODS = {m.encode(): m for m in ("GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH")}


def encode_response(resp: HttpResponse, keep_alive: bool) -> bytes:
    body = resp.body
    head = "".join([f"{k}: {v}\r\n" for k, v in resp.headers]).encode("latin-1", "replace")
    return b"".join((
        _STATUS_LINES.get(resp.status) or _status_line(resp.status),
        head,
        b"Content-Length: %d\r\n" % len(body),
        b"\r\n" if keep_alive else b"Connection: close\r\n\r\n",
        body,
    ))


class HttpProtocol(asyncio.Protocol):
    __slots__ = ("endpoint", "max_body", "transport", "parser", "_url", "_headers", "_header_bytes",
                 "_body", "_body_len", "_queue", "_task", "_closing", "_paused_writing",
                 "_rejected", "_registry", "last_active", "_peer", "_draining")

    def __init__(self, endpoint: Endpoint, max_body: int, registry: set | None = None):
        self.endpoint = endpoint
        self.max_body = max_body
        self._registry = registry
        self.last_active = time.monotonic()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self._queue: deque[tuple[HttpRequest, bool]] = deque()
        self._task: Reply | None = None   # the answer being waited for
        self._draining = False            # dispatching pipelined requests (see _replied)
        self._closing = False
        self._paused_writing = False
        self._peer: str | None = None
        self._url = b""
        self._headers: dict[str, str] = {}
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_len = 0
        self._rejected = False

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport) -> None:
        self.transport = transport
        get_info = getattr(transport, "get_extra_info", None)
        peer = get_info("peername") if get_info is not None else None
        self._peer = peer[0] if isinstance(peer, tuple) and peer else None
        if self._registry is not None:
            self._registry.add(self)

    def connection_lost(self, exc) -> None:
        if self._registry is not None:
            self._registry.discard(self)
        self._closing = True
        self._queue.clear()
        if self._task is not None and not self._task.done():
            self._task.cancel()  # a parked long poll lets go of its waiter
        # The parser holds this protocol as its callbacks object: without breaking that cycle a
        # closed connection waits for the cycle collector, which on a served node may have
        # frozen it (elasticmq_py/gcpolicy.py) and keeps it until the store is small again.
        self.parser = None  # type: ignore[assignment]  # data_received is guarded by _closing

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        self.last_active = time.monotonic()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(perr.BAD_REQUEST("Protocol upgrades are not supported."))
        except httptools.HttpParserError as e:
            if not self._rejected:
                self._fail(perr.BAD_REQUEST(f"Malformed HTTP request: {e}"))
        except _Rejected:
            pass

    def pause_writing(self) -> None:
        self._paused_writing = True
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused_writing = False
        self.transport.resume_reading()

    # -- httptools callbacks -----------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = {}
        self._header_bytes = 0
        self._body = []
        self._body_len = 0
        self._rejected = False

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._count(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        # the hottest callback (one per header): the size check and the common names inline
        n = self._header_bytes + len(name) + len(value)
        self._header_bytes = n
        if n > MAX_HEADER_BYTES:
            self._count(0)
        key = _HEADER_NAMES.get(name)
        if key is None:
            key = name.decode("latin-1").lower()
        headers = self._headers
        old = headers.get(key)
        headers[key] = value.decode("latin-1") if old is None else f"{old},{value.decode('latin-1')}"

    def on_headers_complete(self) -> None:
        headers = self._headers
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            self._reject_too_large()
        expect = headers.get("expect")
        if expect is not None and expect.lower() == "100-continue":
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body_len += len(body)
        if self._body_len > self.max_body:
            self._reject_too_large()  # chunked bodies have no Content-Length to check up front
        self._body.append(body)

    def on_message_complete(self) -> None:
        url = self._url
        if url[:1] != b"/":
            # absolute form (through a proxy) or garbage: keep the path and query only
            try:
                parsed = httptools.parse_url(url)
                path, query = parsed.path or b"/", parsed.query or b""
            except httptools.HttpParserInvalidURLError:
                path, query = b"/", b""
        else:
            path, _, query = url.partition(b"?")
        parser = self.parser
        method = parser.get_method()
        body = self._body
        req = HttpRequest(
            _METHODS.get(method) or method.decode("ascii", "replace"),
            path.decode("latin-1"),
            query,
            self._headers,
            body[0] if len(body) == 1 else b"".join(body),
            self._peer,
        )
        keep_alive = parser.should_keep_alive()
        if self._task is not None or self._queue:
            self._queue.append((req, keep_alive))
            if len(self._queue) >= MAX_PIPELINED:
                self.transport.pause_reading()
            return
        self._dispatch(req, keep_alive)

    # -- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, req: HttpRequest, keep_alive: bool) -> None:
        reply = self._task = Reply(functools.partial(self._replied, keep_alive))
        try:
            self.endpoint.handle(req, reply)
        except Exception:  # the endpoint catches everything; this is the last line of defence
            log.exception("unhandled error")
            reply.set(self.endpoint.reject(req.headers, perr.BAD_REQUEST("Internal error.")))

    def _replied(self, keep_alive: bool, resp: HttpResponse) -> None:
        self._task = None
        if self._closing:
            return
        self._write(resp, keep_alive)
        if self._queue and not self._draining:
            # Answers often come inside _dispatch itself: dispatch what was pipelined meanwhile
            # here, in a loop, rather than one level of recursion deeper per request.
            self._draining = True
            try:
                while self._queue and self._task is None and not self._closing:
                    req, ka = self._queue.popleft()
                    self._dispatch(req, ka)
            finally:
                self._draining = False
            if not self._queue and not self._closing and not self._paused_writing:
                self.transport.resume_reading()

    def is_idle(self, now: float) -> bool:
        return (self._task is None and not self._queue and not self._body
                and now - self.last_active > IDLE_TIMEOUT_S)

    def _write(self, resp: HttpResponse, keep_alive: bool) -> None:
        self.last_active = time.monotonic()
        if self._closing:
            return
        self.transport.write(encode_response(resp, keep_alive))
        if not keep_alive:
            self._closing = True
            self.transport.close()

    # -- refusals ----------------------------------------------------------------------------

    def _count(self, n: int) -> None:
        self._header_bytes += n
        if self._header_bytes > MAX_HEADER_BYTES:
            self._fail(perr.HEADERS_TOO_LARGE(
                f"The request line and headers exceed {MAX_HEADER_BYTES} bytes."))
            raise _Rejected()

    def _reject_too_large(self) -> None:
        target = self._headers.get("x-amz-target", "")
        limit = self.max_body
        if target.endswith(".SendMessageBatch"):
            from storage.errors import BATCH_REQUEST_TOO_LONG
            err = BATCH_REQUEST_TOO_LONG(f"Batch requests cannot be longer than {limit} bytes.")
        elif target.endswith(".SendMessage"):
            err = invalid_parameter("MessageBody", "(too long)", f"the request exceeds {limit} bytes")
        else:
            err = perr.REQUEST_TOO_LARGE(f"The request body exceeds {limit} bytes.")
        self._fail(err)
        raise _Rejected()

    def _fail(self, err: SqsError) -> None:
        """Answer and close: after a refusal the rest of the stream cannot be trusted."""
        if self._rejected or self._closing:
            return
        self._rejected = True
        resp = self.endpoint.reject(self._headers, err)
        self._queue.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._write(resp, keep_alive=False)


class _Rejected(Exception):
    """Raised from a parser callback to stop parsing a refused request."""


class HttpServer:
    """The listening socket and the connections it accepted, so that stopping closes both
    (and thereby cancels parked long polls) instead of leaving keep-alive connections behind."""

    def __init__(self, server: asyncio.AbstractServer, connections: set[HttpProtocol]):
        self._server = server
        self.connections = connections
        self._sweeper = asyncio.get_running_loop().call_later(_SWEEP_INTERVAL_S, self._sweep)

    def _sweep(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self.connections if c.is_idle(now)]:
            conn.transport.close()
        self._sweeper = asyncio.get_running_loop().call_later(_SWEEP_INTERVAL_S, self._sweep)

    @property
    def port(self) -> int:
        return self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self._sweeper.cancel()
        self._server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        await asyncio.sleep(0)  # let connection_lost run and cancel what was waiting
        await self._server.wait_closed()


async def serve(endpoint: Endpoint, host: str, port: int, max_body: int,
                backlog: int = 1024, ssl: SSLContext | None = None) -> HttpServer:
    """Listen; with ``ssl`` (elasticmq_py/tls.py) asyncio's TLS layer sits under the protocol,
    which then sees the decrypted stream, and a client that does not complete the handshake
    never reaches it."""
    loop = asyncio.get_running_loop()
    connections: set[HttpProtocol] = set()
    server = await loop.create_server(lambda: HttpProtocol(endpoint, max_body, connections),
                                      host, port, backlog=backlog, reuse_address=True, ssl=ssl)
    return HttpServer(server, connections)
