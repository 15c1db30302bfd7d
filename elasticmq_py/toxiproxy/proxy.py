"""The asyncio glue: a proxy's listener, its connections, and one link per direction that feeds
a :class:`~elasticmq_py.toxiproxy.toxics.Chain` from one socket and drains it into the other.

Memory is bounded per connection: a link stops reading its source (``pause_reading``) while its
chain holds more than ``buffer_size`` bytes, and stops draining its chain while the destination
transport's write buffer is above its high-water mark (``pause_writing``), so a fast sender
behind a slow toxic is slowed by TCP back-pressure rather than queued in memory.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

from elasticmq_py.toxiproxy.toxics import (
    CLOSE, DOWNSTREAM, RESET, UPSTREAM, Chain, Data, TOXIC_ATTRIBUTES, make_stage,
)

log = logging.getLogger("elasticmq_py.toxiproxy")

DEFAULT_BUFFER_SIZE = 1 << 20  # bytes a chain may hold per direction before reading pauses
UPSTREAM_CONNECT_TIMEOUT = 30.0


class AddressError(ValueError):
    pass


def split_hostport(addr: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``:port`` -> (host, port); host "" means every
    interface."""
    if not isinstance(addr, str) or ":" not in addr:
        raise AddressError(f"address {addr}: missing port in address")
    if addr.startswith("["):
        end = addr.find("]")
        if end < 0 or addr[end + 1:end + 2] != ":":
            raise AddressError(f"address {addr}: missing port in address")
        host, port_s = addr[1:end], addr[end + 2:]
    else:
        host, port_s = addr.rsplit(":", 1)
        if ":" in host:
            raise AddressError(f"address {addr}: too many colons in address")
    try:
        port = int(port_s)
    except ValueError:
        raise AddressError(f"address {addr}: invalid port") from None
    if not 0 <= port <= 65535:
        raise AddressError(f"address {addr}: invalid port")
    return host, port


def join_hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class ToxicSpec:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        attrs = dict(TOXIC_ATTRIBUTES[self.type])
        attrs.update(self.attributes)
        return {"attributes": attrs, "name": self.name, "type": self.type,
                "stream": self.stream, "toxicity": self.toxicity}


class _Side(asyncio.Protocol):
    """The protocol of one socket of a connection; everything is delegated to the Connection."""

    def __init__(self, conn: "Connection", side: str) -> None:
        self.conn = conn
        self.side = side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.conn.transport_made(self.side, transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.conn.data_received(self.side, data)

    def eof_received(self) -> bool:
        self.conn.eof_received(self.side)
        return True  # keep the write half open until the other direction is done

    def pause_writing(self) -> None:
        self.conn.set_blocked(self.side, True)

    def resume_writing(self) -> None:
        self.conn.set_blocked(self.side, False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.connection_lost(self.side)


class Link:
    """One direction: reads ``src`` side, writes ``dst`` side through a chain."""

    def __init__(self, conn: "Connection", direction: str, chain: Chain) -> None:
        self.conn = conn
        self.direction = direction
        self.chain = chain
        self.src = "client" if direction == UPSTREAM else "upstream"
        self.dst = "upstream" if direction == UPSTREAM else "client"
        self.src_paused = False
        self.source_ended = False
        self.done = False
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at: float | None = None

    def feed(self, ev: Any) -> None:
        if self.done:
            return
        if ev is CLOSE:
            if self.source_ended:
                return
            self.source_ended = True
        self.chain.push(ev, self.conn.loop.time())
        self.pump()

    def pump(self) -> None:
        if self.done:
            return
        conn = self.conn
        if conn.blocked[self.dst]:
            self._flow_control()
            return  # resume_writing pumps again
        now = conn.loop.time()
        events, deadline = self.chain.pull(now)
        dst = conn.transports.get(self.dst)
        for ev in events:
            if isinstance(ev, Data):
                if dst is not None and not dst.is_closing():
                    dst.write(ev.data)
            elif ev is CLOSE:
                self._cancel_timer()
                conn.link_finished(self)
                return
            elif ev is RESET:
                self._cancel_timer()
                conn.reset()
                return
        self._flow_control()
        self._schedule(deadline)

    def _flow_control(self) -> None:
        src = self.conn.transports.get(self.src)
        if src is None or src.is_closing() or self.source_ended:
            return
        held = self.chain.held
        limit = self.conn.proxy.buffer_size
        if not self.src_paused and held > limit:
            src.pause_reading()
            self.src_paused = True
        elif self.src_paused and held <= limit // 2:
            src.resume_reading()
            self.src_paused = False

    def _schedule(self, deadline: float | None) -> None:
        if deadline is None:
            self._cancel_timer()
            return
        if self.timer is not None and self.timer_at == deadline:
            return
        self._cancel_timer()
        self.timer_at = deadline
        self.timer = self.conn.loop.call_at(deadline, self._fire)

    def _fire(self) -> None:
        self.timer = None
        self.timer_at = None
        self.pump()

    def _cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = None
        self.timer_at = None

    def stop(self) -> None:
        self.done = True
        self._cancel_timer()


class Connection:
    """A client connection and its upstream connection."""

    def __init__(self, proxy: "Proxy") -> None:
        self.proxy = proxy
        self.loop = proxy.loop
        self.transports: dict[str, asyncio.Transport] = {}
        self.blocked = {"client": False, "upstream": False}
        self.links: dict[str, Link] = {}
        self.closed = False
        self.connect_task: asyncio.Task | None = None
        self.pending_eof: set[str] = set()

    # -- lifecycle
    def transport_made(self, side: str, transport: asyncio.Transport) -> None:
        if self.closed:
            transport.abort()
            return
        self.transports[side] = transport
        if side == "client":
            transport.pause_reading()  # until upstream is connected
            self.proxy.connections.add(self)
            self.connect_task = self.loop.create_task(self._connect_upstream())
        else:
            self._start_links()

    async def _connect_upstream(self) -> None:
        try:
            host, port = split_hostport(self.proxy.upstream)
            await asyncio.wait_for(
                self.loop.create_connection(lambda: _Side(self, "upstream"), host or None, port),
                UPSTREAM_CONNECT_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure: drop the client, as Go does
            log.info("proxy %s: unable to open connection to upstream %s: %s",
                     self.proxy.name, self.proxy.upstream, e)
            self.abort()

    def _start_links(self) -> None:
        now = self.loop.time()
        rng = self.proxy.rng
        for direction in (UPSTREAM, DOWNSTREAM):
            chain = Chain()
            for spec in self.proxy.toxics.values():
                if spec.stream == direction:
                    chain.add(spec.name, make_stage(spec.type, spec.attributes, spec.toxicity, now, rng))
            self.links[direction] = Link(self, direction, chain)
        client = self.transports.get("client")
        if client is not None and not client.is_closing():
            client.resume_reading()
        for side in list(self.pending_eof):
            self._link_from(side).feed(CLOSE)
        for link in list(self.links.values()):
            link.pump()

    def _link_from(self, side: str) -> Link:
        return self.links[UPSTREAM if side == "client" else DOWNSTREAM]

    # -- protocol callbacks
    def data_received(self, side: str, data: bytes) -> None:
        if self.links:
            self._link_from(side).feed(Data(data, self.loop.time()))

    def eof_received(self, side: str) -> None:
        if self.links:
            self._link_from(side).feed(CLOSE)
        else:
            self.pending_eof.add(side)

    def set_blocked(self, side: str, blocked: bool) -> None:
        self.blocked[side] = blocked
        if not blocked and self.links:
            self.links[UPSTREAM if side == "upstream" else DOWNSTREAM].pump()

    def connection_lost(self, side: str) -> None:
        self.transports.pop(side, None)
        self.blocked[side] = False
        if self.closed:
            return
        if not self.links:
            self.abort()
            return
        # Reading from it has ended; what the other direction still has for it is discarded.
        self._link_from(side).feed(CLOSE)
        self.links[UPSTREAM if side == "upstream" else DOWNSTREAM].pump()
        self._maybe_done()

    def link_finished(self, link: Link) -> None:
        """A direction's stream ended (its CLOSE left the chain): like the Go server, close its
        destination socket, which ends the other direction's source too."""
        link.stop()
        dst = self.transports.get(link.dst)
        if dst is not None and not dst.is_closing():
            dst.close()
        other = self.links[DOWNSTREAM if link.direction == UPSTREAM else UPSTREAM]
        other.feed(CLOSE)
        self._maybe_done()

    def _maybe_done(self) -> None:
        if all(l.done for l in self.links.values()):
            self.closed = True
            for t in self.transports.values():
                if not t.is_closing():
                    t.close()
            self.proxy.connections.discard(self)

    def reset(self) -> None:
        """Abortive close of both sockets: SO_LINGER 0 makes the kernel send RST."""
        for t in list(self.transports.values()):
            sock = t.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
        self.abort()

    def abort(self) -> None:
        self.closed = True
        for link in self.links.values():
            link.stop()
        if self.connect_task is not None and not self.connect_task.done():
            self.connect_task.cancel()
        for t in list(self.transports.values()):
            t.abort()
        self.proxy.connections.discard(self)

    # -- toxics changing under a live connection
    def toxic_added(self, spec: ToxicSpec) -> None:
        link = self.links.get(spec.stream)
        if link is None or link.done:
            return
        link.chain.add(spec.name, make_stage(spec.type, spec.attributes, spec.toxicity,
                                             self.loop.time(), self.proxy.rng))
        link.pump()

    def toxic_updated(self, spec: ToxicSpec) -> None:
        link = self.links.get(spec.stream)
        if link is None or link.done:
            return
        now = self.loop.time()
        link.chain.replace(spec.name, make_stage(spec.type, spec.attributes, spec.toxicity, now,
                                                 self.proxy.rng), now)
        link.pump()

    def toxic_removed(self, spec: ToxicSpec) -> None:
        link = self.links.get(spec.stream)
        if link is None or link.done:
            return
        link.chain.remove(spec.name, self.loop.time())
        link.pump()


class Proxy:
    def __init__(self, name: str, listen: str, upstream: str, *, loop: asyncio.AbstractEventLoop,
                 rng: random.Random, buffer_size: int = DEFAULT_BUFFER_SIZE) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.loop = loop
        self.rng = rng
        self.buffer_size = buffer_size
        self.toxics: dict[str, ToxicSpec] = {}
        self.connections: set[Connection] = set()
        self._server: asyncio.base_events.Server | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "listen": self.listen, "upstream": self.upstream,
                "enabled": self.enabled, "toxics": self.toxics_json()}

    def toxics_json(self) -> list[dict[str, Any]]:
        # Go lists the upstream chain first, then the downstream one, each in chain order.
        return ([t.to_json() for t in self.toxics.values() if t.stream == UPSTREAM]
                + [t.to_json() for t in self.toxics.values() if t.stream == DOWNSTREAM])

    async def start(self) -> None:
        if self.enabled:
            return
        host, port = split_hostport(self.listen)
        server = await self.loop.create_server(lambda: _Side(Connection(self), "client"),
                                               host or None, port, reuse_address=True)
        self._server = server
        sock = server.sockets[0]
        bound_host, bound_port = sock.getsockname()[:2]
        if not host:
            bound_host = "::" if len(server.sockets) > 1 or sock.family == socket.AF_INET6 else bound_host
        self.listen = join_hostport(bound_host, bound_port)
        self.enabled = True
        log.info("started proxy %s listen=%s upstream=%s", self.name, self.listen, self.upstream)

    def stop(self) -> None:
        """Close the listener and drop every live connection."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.abort()
        self.connections.clear()
        if self.enabled:
            log.info("terminated proxy %s listen=%s", self.name, self.listen)
        self.enabled = False

    # -- toxics
    def add_toxic(self, spec: ToxicSpec) -> None:
        self.toxics[spec.name] = spec
        for conn in list(self.connections):
            conn.toxic_added(spec)

    def update_toxic(self, spec: ToxicSpec) -> None:
        self.toxics[spec.name] = spec
        for conn in list(self.connections):
            conn.toxic_updated(spec)

    def remove_toxic(self, name: str) -> None:
        spec = self.toxics.pop(name)
        for conn in list(self.connections):
            conn.toxic_removed(spec)

    def reset_toxics(self) -> None:
        for name in list(self.toxics):
            self.remove_toxic(name)
