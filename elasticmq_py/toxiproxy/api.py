"""The Toxiproxy HTTP API (the routes, JSON shapes, status codes and error bodies of the Go
server's ``api.go``) on a small asyncio HTTP/1.1 server.

Routes::

    GET    /version                          {"version": "..."}
    POST   /reset                            204: enable every proxy, remove every toxic
    GET    /proxies                          {name: proxy, ...}
    POST   /proxies                          201 proxy | 400 | 409 proxy already exists
    POST   /populate                         201 {"proxies": [...]} (create or replace a list)
    GET    /proxies/{proxy}                  proxy | 404 proxy not found
    POST   /proxies/{proxy}  (or PATCH)      update listen / upstream / enabled -> proxy
    DELETE /proxies/{proxy}                  204
    GET    /proxies/{proxy}/toxics           [toxic, ...]
    POST   /proxies/{proxy}/toxics           200 toxic | 400 | 404 | 409 toxic already exists
    GET    /proxies/{proxy}/toxics/{toxic}   toxic | 404 toxic not found
    POST   /proxies/{proxy}/toxics/{toxic}   (or PATCH) update attributes / toxicity -> toxic
    DELETE /proxies/{proxy}/toxics/{toxic}   204

A proxy is ``{"name", "listen", "upstream", "enabled", "toxics": [...]}``; a toxic is
``{"attributes": {...}, "name", "type", "stream", "toxicity"}``; an error is
``{"error": "...", "status": N}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any
from urllib.parse import unquote, urlsplit

from elasticmq_py.toxiproxy.proxy import (
    DEFAULT_BUFFER_SIZE, AddressError, Proxy, ToxicSpec, split_hostport,
)
from elasticmq_py.toxiproxy.toxics import (
    STREAMS, TOXIC_ATTRIBUTES, BadAttribute, json_kind, parse_attributes,
)

log = logging.getLogger("elasticmq_py.toxiproxy")

# The Toxiproxy API version this server implements (reported by GET /version).
API_VERSION = "2.12.0"
SERVER_NAME = "elasticmq-py builtin toxiproxy"

MAX_BODY = 1 << 20
MAX_HEADERS = 100


class ApiError(Exception):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def _bad_body(detail: str) -> ApiError:
    return ApiError(f"bad request body: {detail}", 400)


PROXY_NOT_FOUND = ("proxy not found", 404)
PROXY_EXISTS = ("proxy already exists", 409)
TOXIC_NOT_FOUND = ("toxic not found", 404)
TOXIC_EXISTS = ("toxic already exists", 409)
INVALID_STREAM = ("stream was invalid, can be either upstream or downstream", 400)
INVALID_TOXIC_TYPE = ("invalid toxic type", 400)


def _err(pair: tuple[str, int]) -> ApiError:
    return ApiError(*pair)


def _decode(body: bytes) -> Any:
    if not body.strip():
        raise _bad_body("EOF")
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise _bad_body(f"invalid JSON: {e}") from None


def _want_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad_body(f"json: cannot unmarshal {json_kind(value)} into Go value of type {what}")
    return value


def _want(d: dict[str, Any], key: str, typ: type, default: Any) -> Any:
    if key not in d or d[key] is None:
        return default
    v = d[key]
    ok = isinstance(v, typ) and not (typ in (int, float) and isinstance(v, bool))
    if typ is float and isinstance(v, int) and not isinstance(v, bool):
        ok, v = True, float(v)
    if not ok:
        go_type = {str: "string", bool: "bool", float: "float32", int: "int64"}[typ]
        raise _bad_body(f"json: cannot unmarshal {json_kind(v)} into Go struct field .{key} "
                        f"of type {go_type}")
    return v


class ToxiproxyApp:
    """The proxy collection and the route handlers; all on one event loop."""

    def __init__(self, *, seed: int | None = None, buffer_size: int = DEFAULT_BUFFER_SIZE,
                 default_listen_host: str = "127.0.0.1") -> None:
        self.proxies: dict[str, Proxy] = {}
        self.rng = random.Random(seed)
        self.buffer_size = buffer_size
        self.default_listen_host = default_listen_host
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ dispatch
    async def handle(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.strip("/").split("/")] if path.strip("/") else []
        async with self._lock:
            try:
                return await self._route(method, parts, body)
            except ApiError as e:
                return e.status, {"error": e.message, "status": e.status}
            except Exception as e:  # noqa: BLE001 - Go answers 500 with the error text
                log.exception("toxiproxy API %s %s failed", method, path)
                return 500, {"error": str(e), "status": 500}

    async def _route(self, method: str, parts: list[str], body: bytes) -> tuple[int, Any]:
        n = len(parts)
        routes: dict[str, Any]
        if parts == ["version"]:
            routes = {"GET": self.version}
            args: tuple = ()
        elif parts == ["reset"]:
            routes, args = {"POST": self.reset}, ()
        elif parts == ["populate"]:
            routes, args = {"POST": self.populate}, (body,)
        elif parts == ["proxies"]:
            routes, args = {"GET": self.proxy_index, "POST": self.proxy_create}, (body,)
        elif n == 2 and parts[0] == "proxies":
            routes = {"GET": self.proxy_show, "POST": self.proxy_update, "PATCH": self.proxy_update,
                      "DELETE": self.proxy_delete}
            args = (parts[1], body)
        elif n == 3 and parts[0] == "proxies" and parts[2] == "toxics":
            routes = {"GET": self.toxic_index, "POST": self.toxic_create}
            args = (parts[1], body)
        elif n == 4 and parts[0] == "proxies" and parts[2] == "toxics":
            routes = {"GET": self.toxic_show, "POST": self.toxic_update, "PATCH": self.toxic_update,
                      "DELETE": self.toxic_delete}
            args = (parts[1], parts[3], body)
        else:
            return 404, b"404 page not found\n"
        handler = routes.get(method)
        if handler is None:
            return 405, b""
        return await handler(*args)

    # ------------------------------------------------------------------ helpers
    def _get(self, name: str) -> Proxy:
        proxy = self.proxies.get(name)
        if proxy is None:
            raise _err(PROXY_NOT_FOUND)
        return proxy

    def _new_proxy(self, name: str, listen: str, upstream: str) -> Proxy:
        loop = asyncio.get_running_loop()
        if not listen:
            listen = f"{self.default_listen_host}:0"
        return Proxy(name, listen, upstream, loop=loop, rng=self.rng, buffer_size=self.buffer_size)

    @staticmethod
    def _proxy_fields(d: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
        return {"name": _want(d, "name", str, base.get("name", "")),
                "listen": _want(d, "listen", str, base.get("listen", "")),
                "upstream": _want(d, "upstream", str, base.get("upstream", "")),
                "enabled": _want(d, "enabled", bool, base.get("enabled", True))}

    @staticmethod
    def _validate_addresses(listen: str, upstream: str) -> None:
        for addr in (listen, upstream):
            if addr:
                try:
                    split_hostport(addr)
                except AddressError as e:
                    raise ApiError(str(e), 400) from None

    async def _start(self, proxy: Proxy) -> None:
        try:
            await proxy.start()
        except OSError as e:
            raise ApiError(f"listen tcp {proxy.listen}: {e.strerror or e}", 500) from None

    # ------------------------------------------------------------------ handlers
    async def version(self) -> tuple[int, Any]:
        return 200, {"version": API_VERSION, "server": SERVER_NAME}

    async def reset(self) -> tuple[int, Any]:
        for proxy in list(self.proxies.values()):
            if not proxy.enabled:
                await self._start(proxy)
            proxy.reset_toxics()
        return 204, None

    async def proxy_index(self, body: bytes) -> tuple[int, Any]:
        return 200, {name: p.to_json() for name, p in self.proxies.items()}

    async def proxy_create(self, body: bytes) -> tuple[int, Any]:
        fields = self._proxy_fields(_want_object(_decode(body), "toxiproxy.Proxy"), {})
        if not fields["name"]:
            raise ApiError("missing required field: name", 400)
        if not fields["upstream"]:
            raise ApiError("missing required field: upstream", 400)
        self._validate_addresses(fields["listen"], fields["upstream"])
        if fields["name"] in self.proxies:
            raise _err(PROXY_EXISTS)
        proxy = self._new_proxy(fields["name"], fields["listen"], fields["upstream"])
        if fields["enabled"]:
            await self._start(proxy)
        self.proxies[proxy.name] = proxy
        return 201, proxy.to_json()

    async def populate(self, body: bytes) -> tuple[int, Any]:
        raw = _decode(body)
        if isinstance(raw, dict) and isinstance(raw.get("proxies"), list):
            raw = raw["proxies"]  # the pre-2.0 shape
        if not isinstance(raw, list):
            raise _bad_body(f"json: cannot unmarshal {json_kind(raw)} into Go value of type "
                            "[]struct { toxiproxy.Proxy; Enabled *bool }")
        wanted = []
        names: set[str] = set()
        for i, item in enumerate(raw, 1):
            fields = self._proxy_fields(_want_object(item, "toxiproxy.Proxy"), {})
            if not fields["name"]:
                raise ApiError(f"missing required field: name at proxy {i}", 400)
            if not fields["upstream"]:
                raise ApiError(f"missing required field: upstream at proxy {i}", 400)
            if fields["name"] in names:
                raise ApiError(f'duplicate proxy name "{fields["name"]}"', 400)
            names.add(fields["name"])
            self._validate_addresses(fields["listen"], fields["upstream"])
            wanted.append(fields)
        result = []
        for fields in wanted:
            existing = self.proxies.get(fields["name"])
            listen = fields["listen"] or f"{self.default_listen_host}:0"
            if existing is not None and existing.upstream == fields["upstream"] and (
                    existing.listen == listen):
                result.append(existing)  # as Go: an unchanged proxy is kept as it is
                continue
            if existing is not None:
                existing.stop()
                del self.proxies[existing.name]
            proxy = self._new_proxy(fields["name"], listen, fields["upstream"])
            if fields["enabled"]:
                try:
                    await self._start(proxy)
                except ApiError as e:
                    return e.status, {"error": e.message, "status": e.status,
                                      "proxies": [p.to_json() for p in result]}
            self.proxies[proxy.name] = proxy
            result.append(proxy)
        return 201, {"proxies": [p.to_json() for p in result]}

    async def proxy_show(self, name: str, body: bytes) -> tuple[int, Any]:
        return 200, self._get(name).to_json()

    async def proxy_update(self, name: str, body: bytes) -> tuple[int, Any]:
        proxy = self._get(name)
        base = {"name": proxy.name, "listen": proxy.listen, "upstream": proxy.upstream,
                "enabled": proxy.enabled}
        fields = self._proxy_fields(_want_object(_decode(body), "toxiproxy.Proxy"), base)
        self._validate_addresses(fields["listen"], fields["upstream"])
        if fields["listen"] != proxy.listen or fields["upstream"] != proxy.upstream:
            was_enabled = proxy.enabled
            proxy.stop()
            proxy.listen = fields["listen"] or f"{self.default_listen_host}:0"
            proxy.upstream = fields["upstream"]
            if was_enabled and fields["enabled"]:
                await self._start(proxy)
        if fields["enabled"] != proxy.enabled:
            if fields["enabled"]:
                await self._start(proxy)
            else:
                proxy.stop()
        return 200, proxy.to_json()

    async def proxy_delete(self, name: str, body: bytes) -> tuple[int, Any]:
        proxy = self._get(name)
        proxy.stop()
        del self.proxies[name]
        return 204, None

    async def toxic_index(self, name: str, body: bytes) -> tuple[int, Any]:
        return 200, self._get(name).toxics_json()

    async def toxic_create(self, name: str, body: bytes) -> tuple[int, Any]:
        proxy = self._get(name)
        d = _want_object(_decode(body), "toxics.ToxicWrapper")
        stream = _want(d, "stream", str, "downstream")
        if stream not in STREAMS:
            raise _err(INVALID_STREAM)
        toxic_type = _want(d, "type", str, "")
        toxic_name = _want(d, "name", str, "") or f"{toxic_type}_{stream}"
        toxicity = _want(d, "toxicity", float, 1.0)
        if toxic_type not in TOXIC_ATTRIBUTES:
            raise _err(INVALID_TOXIC_TYPE)
        if toxic_name in proxy.toxics:
            raise _err(TOXIC_EXISTS)
        try:
            attrs = parse_attributes(toxic_type, d.get("attributes"))
        except BadAttribute as e:
            raise _bad_body(str(e)) from None
        spec = ToxicSpec(toxic_name, toxic_type, stream, toxicity, attrs)
        proxy.add_toxic(spec)
        return 200, spec.to_json()

    async def toxic_show(self, name: str, toxic: str, body: bytes) -> tuple[int, Any]:
        spec = self._get(name).toxics.get(toxic)
        if spec is None:
            raise _err(TOXIC_NOT_FOUND)
        return 200, spec.to_json()

    async def toxic_update(self, name: str, toxic: str, body: bytes) -> tuple[int, Any]:
        proxy = self._get(name)
        spec = proxy.toxics.get(toxic)
        if spec is None:
            raise _err(TOXIC_NOT_FOUND)
        d = _want_object(_decode(body), "toxics.ToxicWrapper")
        toxicity = _want(d, "toxicity", float, spec.toxicity)
        try:
            attrs = parse_attributes(spec.type, d.get("attributes"), base=spec.attributes)
        except BadAttribute as e:
            raise _bad_body(str(e)) from None
        new = ToxicSpec(spec.name, spec.type, spec.stream, toxicity, attrs)
        proxy.update_toxic(new)
        return 200, new.to_json()

    async def toxic_delete(self, name: str, toxic: str, body: bytes) -> tuple[int, Any]:
        proxy = self._get(name)
        if toxic not in proxy.toxics:
            raise _err(TOXIC_NOT_FOUND)
        proxy.remove_toxic(toxic)
        return 204, None

    # ------------------------------------------------------------------ lifecycle
    async def populate_from_file(self, path: str) -> int:
        with open(path, "rb") as f:
            status, result = await self.handle("POST", "/populate", f.read())
        if status >= 300:
            raise ApiError(result.get("error", "populate failed"), status)
        return len(result["proxies"])

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.stop()


# ---------------------------------------------------------------------- HTTP/1.1


_REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 409: "Conflict", 413: "Payload Too Large",
            500: "Internal Server Error"}


class _BadRequest(Exception):
    pass


async def _read_request(reader: asyncio.StreamReader) -> tuple[str, str, str, dict[str, str], bytes] | None:
    line = await reader.readline()
    if not line:
        return None
    while line in (b"\r\n", b"\n"):  # tolerate stray CRLF between requests
        line = await reader.readline()
        if not line:
            return None
    try:
        method, target, version = line.decode("latin-1").rstrip("\r\n").split(" ")
    except ValueError:
        raise _BadRequest("malformed request line") from None
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS + 1):
        h = await reader.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        name, sep, value = h.decode("latin-1").partition(":")
        if not sep:
            raise _BadRequest("malformed header")
        headers[name.strip().lower()] = value.strip()
    else:
        raise _BadRequest("too many headers")
    body = b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        total = 0
        while True:
            size_line = await reader.readline()
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise _BadRequest("bad chunk size") from None
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            total += size
            if total > MAX_BODY:
                raise _BadRequest("body too large")
            parts.append(await reader.readexactly(size))
            await reader.readline()
        body = b"".join(parts)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise _BadRequest("bad content-length") from None
        if length < 0 or length > MAX_BODY:
            raise _BadRequest("bad content-length")
        body = await reader.readexactly(length)
    return method, target, version, headers, body


def _response(status: int, payload: Any, keep_alive: bool) -> bytes:
    if payload is None:
        body = b""
        ctype = None
    elif isinstance(payload, bytes):
        body = payload
        ctype = "text/plain; charset=utf-8"
    else:
        body = (json.dumps(payload) + ("\n" if status >= 400 else "")).encode()
        ctype = "application/json"
    head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}"]
    if ctype and status != 204:
        head.append(f"Content-Type: {ctype}")
    if status != 204:
        head.append(f"Content-Length: {len(body)}")
    head.append("Connection: keep-alive" if keep_alive else "Connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + (body if status != 204 else b"")


class ApiServer:
    """Serves a :class:`ToxiproxyApp` over HTTP on one asyncio loop."""

    def __init__(self, app: ToxiproxyApp, host: str = "127.0.0.1", port: int = 8474) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host or None, self.port,
                                                  reuse_address=True, limit=1 << 16)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("toxiproxy API listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in list(self._clients):
            w.close()
        self.app.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            while True:
                try:
                    req = await _read_request(reader)
                except _BadRequest as e:
                    writer.write(_response(400, f"400 Bad Request: {e}\n".encode(), False))
                    await writer.drain()
                    return
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
                    return
                if req is None:
                    return
                method, target, version, headers, body = req
                keep_alive = (version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
                              ) or headers.get("connection", "").lower() == "keep-alive"
                if headers.get("user-agent", "").startswith("Mozilla/"):
                    # As the Go server: browsers are refused, so a web page cannot drive the API.
                    status, payload = 403, b"User agent not allowed\n"
                else:
                    status, payload = await self.app.handle(method, urlsplit(target).path, body)
                writer.write(_response(status, payload, keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, OSError, asyncio.CancelledError):
            return  # the peer went away, or the server is stopping
        finally:
            self._clients.discard(writer)
            writer.close()
