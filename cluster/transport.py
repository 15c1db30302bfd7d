"""A pysyncobj transport where nodes are names and every directed link has its own dial address.

pysyncobj's TCPTransport makes a node's address its identity and uses one TCP connection per
pair of nodes, so a proxy cannot sit on one direction of one link. Here:

* Each node dials each peer itself, at the address configured for that directed link
  (ClusterConfig.dial_raft), and sends its Raft messages to that peer only over that outgoing
  connection. What it receives on connections it accepted comes from the peer that dialled. So
  the link n1->n2 is exactly the TCP connection n1 dials to n2: cut it, and n1's messages stop
  reaching n2 while n2's still reach n1.
* A dialler says who it is by name, inside the encrypted session; a name that is not a member,
  or a different cluster name, is refused and logged.
* Every frame is a Fernet token made with the cluster secret (pysyncobj's `password`): it is
  authenticated before it is decrypted, and only then unpickled (by pysyncobj's TcpConnection).
  A frame that fails authentication closes the connection and is logged here (pysyncobj itself
  drops such connections silently). Each session starts with pysyncobj's random-key exchange,
  so frames cannot be replayed from one connection into another.
* Idle connections carry keepalive frames both ways, so a dead or paused peer is noticed after
  Timing.connection_timeout on each link, independently of Raft traffic.
* Nothing here decides anything about Raft: every message that arrives on an established link
  goes to ``on_message`` (cluster/runtime.py, which asks the election core whether and when Raft
  sees it, and hands it over with ``deliver``), and every outgoing one passes ``outgoing`` (where
  AppendEntries get their lease stamp).

Everything in this module runs on pysyncobj's tick thread.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

from cryptography.fernet import InvalidToken
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.node import Node
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.transport import Transport, TransportNotReadyError

from cluster.config import Address, NodeConfig

log = logging.getLogger("cluster.transport")

PROTOCOL = 1
_KEY_LEN = 32
_AUTH_LOG_INTERVAL = 5.0


class NamedNode(Node):
    """A Raft member identified by name. `raft_addr` ("host:port") is where it listens; it is
    kept on the node so that a member added at runtime can be dialled (it travels in the
    authenticated Raft log with pysyncobj's membership command)."""

    def __init__(self, name: str, raft_addr: str | None = None, stream_addr: str | None = None) -> None:
        # stream_addr travels with it too: the replication layer of every member must learn
        # where to stream to a member added at runtime
        super().__init__(name, raft_addr=raft_addr, stream_addr=stream_addr)

    @property
    def name(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return f"NamedNode({self.id!r})"


class _Auth:
    """Wraps the Fernet encryptor of one connection so a failed authentication is logged."""

    def __init__(self, fernet: Any, on_reject: Callable[[], None]) -> None:
        self._f = fernet
        self._on_reject = on_reject

    def encrypt_at_time(self, data: bytes, current_time: int) -> bytes:
        return self._f.encrypt_at_time(data, current_time)

    def extract_timestamp(self, token: bytes) -> int:
        try:
            return self._f.extract_timestamp(token)
        except InvalidToken:
            self._on_reject()
            raise

    def decrypt(self, token: bytes) -> bytes:
        try:
            return self._f.decrypt(token)
        except InvalidToken:
            self._on_reject()
            raise


@dataclass
class _Conn:
    conn: TcpConnection
    outgoing: bool
    peer: str | None          # name; for accepted connections, known after the hello
    addr: str                 # what we dialled, or where the accepted connection came from
    state: str                # key -> hello -> up
    since: float
    last_tx: float
    last_rx: float


@dataclass
class _Link:
    node: NamedNode
    dial: Address
    out: _Conn | None = None
    last_attempt: float = float("-inf")
    up_since: float | None = None
    down_since: float = 0.0
    connects: int = 0
    last_error: str = ""


class ClusterTransport(Transport):
    """Construct through functools.partial(ClusterTransport, config=..., hooks=...) and pass as
    SyncObj's transportClass; pysyncobj supplies (syncObj, selfNode, otherNodes)."""

    def __init__(self, syncObj: Any, selfNode: NamedNode, otherNodes: Any, *,
                 config: NodeConfig, on_message: Callable[[NamedNode, dict], None],
                 outgoing: Callable[[dict], dict] = lambda m: m,
                 on_member: Callable[[str, NamedNode], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._on_member = on_member     # ("added" | "removed", node), on pysyncobj's thread
        super().__init__(syncObj, selfNode, otherNodes)
        self._so = syncObj
        self._self = selfNode
        self._config = config
        self._timing = config.timing
        self._clock = clock
        self._on_message = on_message
        self._outgoing = outgoing
        self._links: dict[str, _Link] = {}
        self._incoming: dict[int, _Conn] = {}     # id(conn) -> state, for accepted connections
        self._in_by_peer: dict[str, _Conn] = {}
        self._sock: socket.socket | None = None
        self._ready = False
        self.bind_error: str | None = None
        self.bound_addr: Address | None = None
        self.auth_failures = 0
        self.refused_hellos = 0
        self._last_auth_log: dict[str, float] = {}
        if syncObj.encryptor is None:
            raise ValueError("ClusterTransport requires SyncObjConf.password (the cluster secret)")
        for node in otherNodes:
            self.addNode(node)
        syncObj.addOnTickCallback(self._on_tick)

    # -- readiness (bind) ------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        return self._ready

    def tryGetReady(self) -> None:
        if self._ready:
            return
        addr = self._config.bind_addr
        try:
            family = socket.AF_INET6 if ":" in addr.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((addr.host, addr.port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError as e:
            self.bind_error = f"cannot listen on {addr}: {e.strerror or e}"
            log.error("%s", self.bind_error)
            raise TransportNotReadyError(self.bind_error) from None
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.bound_addr = Address(host, port)
        self._so._poller.subscribe(sock.fileno(), self._on_accept, POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)
        self._ready = True

    def waitReady(self) -> None:
        if not self._ready:
            raise TransportNotReadyError(self.bind_error or "not bound")

    # -- membership of the network ---------------------------------------------------------------

    def addNode(self, node: Node) -> None:
        if not isinstance(node, NamedNode):
            node = NamedNode(node.id, getattr(node, "raft_addr", None))
        if node.id == self._self.id or node.id in self._links:
            return
        if self._on_member is not None and getattr(self, "_ready", False):
            self._on_member("added", node)
        default = Address.parse(node.raft_addr) if getattr(node, "raft_addr", None) else None
        try:
            dial = self._config.cluster.dial_raft(self._self.id, node.id, default)
        except KeyError:
            log.error("no address known for new member %s; it will not be dialled", node.id)
            dial = Address("0.0.0.0", 0)
        self._links[node.id] = _Link(node, dial, down_since=self._clock())

    def dropNode(self, node: Node) -> None:
        if self._on_member is not None and node.id in self._links:
            self._on_member("removed", node)
        link = self._links.pop(node.id, None)
        if link is not None and link.out is not None:
            c, link.out = link.out, None
            c.conn.disconnect()
        inc = self._in_by_peer.pop(node.id, None)
        if inc is not None:
            inc.conn.disconnect()

    # -- sending ---------------------------------------------------------------------------------

    def send(self, node: Node, message: Any) -> bool:
        link = self._links.get(node.id)
        if link is None or link.out is None or link.out.state != "up":
            return False
        if isinstance(message, dict):
            message = self._outgoing(message)
        return self._tx(link.out, message)

    def deliver(self, node: Node, message: Any) -> None:
        """Hand a received message to Raft."""
        self._onMessageReceived(node, message)

    def _tx(self, c: _Conn, message: Any) -> bool:
        c.conn.send(message)
        c.last_tx = self._clock()
        return c.conn.state != CONNECTION_STATE.DISCONNECTED

    # -- the tick: reconnects and keepalives -------------------------------------------------------

    def _on_tick(self) -> None:
        now = self._clock()
        t = self._timing
        for name, link in list(self._links.items()):
            c = link.out
            if c is None:
                if now - link.last_attempt >= t.reconnect:
                    self._dial(link, now)
            elif c.state == "up" and now - c.last_tx >= t.keepalive:
                self._tx(c, {"type": "_ka"})
            elif c.state != "up" and now - c.since > t.connection_timeout:
                link.last_error = "handshake timed out"
                c.conn.disconnect()
        for c in list(self._incoming.values()):
            if c.state == "up" and now - c.last_tx >= t.keepalive:
                self._tx(c, {"type": "_ka"})
            elif c.state != "up" and now - c.since > t.connection_timeout:
                c.conn.disconnect()

    # -- outgoing connections ------------------------------------------------------------------------

    def _dial(self, link: _Link, now: float) -> None:
        link.last_attempt = now
        if link.dial.port == 0:
            return
        ip = globalDnsResolver().resolve(link.dial.host)
        if ip is None:
            link.last_error = f"cannot resolve {link.dial.host}"
            return
        conf = self._so.conf
        conn = TcpConnection(poller=self._so._poller, timeout=conf.connectionTimeout,
                             sendBufferSize=conf.sendBufferSize, recvBufferSize=conf.recvBufferSize,
                             keepalive=conf.tcp_keepalive)
        c = _Conn(conn, True, link.node.id, str(link.dial), "connecting", now, now, now)
        conn.encryptor = _Auth(self._so.encryptor, lambda: self._auth_failed(f"link to {link.node.id} via {link.dial}"))
        conn.setOnConnectedCallback(lambda: self._out_connected(link, c))
        conn.setOnMessageReceivedCallback(lambda m: self._out_message(link, c, m))
        conn.setOnDisconnectedCallback(lambda: self._out_disconnected(link, c))
        link.out = c
        link.connects += 1
        try:
            ok = conn.connect(ip, link.dial.port)
        except OSError as e:
            ok = False
            link.last_error = str(e)
        if not ok:
            if link.out is c:
                link.out = None
            conn.disconnect()

    def _out_connected(self, link: _Link, c: _Conn) -> None:
        c.state = "key"
        c.last_rx = self._clock()
        c.conn.recvRandKey = os.urandom(_KEY_LEN)
        self._tx(c, c.conn.recvRandKey)

    def _out_message(self, link: _Link, c: _Conn, message: Any) -> None:
        c.last_rx = self._clock()
        if c.state == "key":
            if not isinstance(message, bytes) or len(message) != _KEY_LEN:
                link.last_error = "bad session key from peer"
                c.conn.disconnect()
                return
            c.conn.sendRandKey = message
            c.state = "hello"
            self._tx(c, {"type": "_hello", "name": self._self.id, "cluster": self._config.cluster.name,
                         "protocol": PROTOCOL})
        elif c.state == "hello":
            if isinstance(message, dict) and message.get("type") == "_welcome":
                if message.get("name") != link.node.id:
                    # We reached somebody, but not the member we meant to: a misrouted link.
                    link.last_error = f"dialled {link.node.id} at {link.dial} but reached {message.get('name')!r}"
                    log.warning("%s; closing the link", link.last_error)
                    c.conn.disconnect()
                    return
                c.state = "up"
                link.up_since = self._clock()
                link.last_error = ""
                log.info("link %s->%s up (via %s)", self._self.id, link.node.id, link.dial)
                self._onNodeConnected(link.node)
            else:
                reason = message.get("reason") if isinstance(message, dict) else repr(message)[:80]
                link.last_error = f"refused by peer: {reason}"
                log.warning("link %s->%s refused by peer: %s", self._self.id, link.node.id, reason)
                c.conn.disconnect()
        # Once up, only keepalives arrive on an outgoing connection: the peer sends its Raft
        # messages over the connection *it* dialled, which is what makes links directed.

    def _out_disconnected(self, link: _Link, c: _Conn) -> None:
        if link.out is not c:
            return
        link.out = None
        was_up = c.state == "up"
        link.up_since = None
        link.down_since = self._clock()
        if was_up:
            log.info("link %s->%s down", self._self.id, link.node.id)
            self._onNodeDisconnected(link.node)

    # -- accepted connections --------------------------------------------------------------------------

    def _on_accept(self, descr: int, event: int) -> None:
        if self._sock is None:
            return
        if event & POLL_EVENT_TYPE.ERROR:
            log.error("listening socket error; raft is no longer accepting connections")
            return
        while True:
            try:
                sock, addr = self._sock.accept()
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    log.warning("accept failed: %s", e)
                return
            conf = self._so.conf
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, conf.sendBufferSize)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, conf.recvBufferSize)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
            now = self._clock()
            conn = TcpConnection(poller=self._so._poller, socket=sock, timeout=conf.connectionTimeout,
                                 sendBufferSize=conf.sendBufferSize, recvBufferSize=conf.recvBufferSize,
                                 keepalive=conf.tcp_keepalive)
            where = f"{addr[0]}:{addr[1]}"
            c = _Conn(conn, False, None, where, "key", now, now, now)
            conn.encryptor = _Auth(self._so.encryptor, lambda w=where: self._auth_failed(f"connection from {w}"))
            conn.setOnMessageReceivedCallback(lambda m, c=c: self._in_message(c, m))
            conn.setOnDisconnectedCallback(lambda c=c: self._in_disconnected(c))
            self._incoming[id(conn)] = c

    def _in_message(self, c: _Conn, message: Any) -> None:
        now = self._clock()
        c.last_rx = now
        if c.state == "key":
            if not isinstance(message, bytes) or len(message) != _KEY_LEN:
                self._refuse(c, "bad session key")
                return
            c.conn.sendRandKey = message
            c.conn.recvRandKey = os.urandom(_KEY_LEN)
            self._tx(c, c.conn.recvRandKey)
            c.state = "hello"
            return
        if c.state == "hello":
            self._in_hello(c, message)
            return
        self._deliver(c, message, now)

    def _in_hello(self, c: _Conn, message: Any) -> None:
        if not isinstance(message, dict) or message.get("type") != "_hello":
            self._refuse(c, "expected a hello")
            return
        name, cluster = message.get("name"), message.get("cluster")
        if cluster != self._config.cluster.name:
            self._refuse(c, f"cluster {cluster!r} is not {self._config.cluster.name!r}")
            return
        if name not in self._links:
            self._refuse(c, f"{name!r} is not a member")
            return
        old = self._in_by_peer.get(name)
        c.peer, c.state = name, "up"
        self._in_by_peer[name] = c
        if old is not None and old is not c:
            old.conn.disconnect()  # the peer redialled; its previous connection is dead to it
        self._tx(c, {"type": "_welcome", "name": self._self.id, "protocol": PROTOCOL})

    def _refuse(self, c: _Conn, reason: str) -> None:
        self.refused_hellos += 1
        now = self._clock()
        if now - self._last_auth_log.get(reason, float("-inf")) >= _AUTH_LOG_INTERVAL:
            self._last_auth_log[reason] = now
            log.warning("refused raft connection from %s: %s [%d refused so far]", c.addr, reason,
                        self.refused_hellos)
        try:
            self._tx(c, {"type": "_refused", "reason": reason})
        finally:
            c.conn.disconnect()

    def _in_disconnected(self, c: _Conn) -> None:
        self._incoming.pop(id(c.conn), None)
        if c.peer is not None and self._in_by_peer.get(c.peer) is c:
            del self._in_by_peer[c.peer]

    def _deliver(self, c: _Conn, message: Any, now: float) -> None:
        link = self._links.get(c.peer or "")
        if link is None or not isinstance(message, dict) or message.get("type") == "_ka":
            return
        self._on_message(link.node, message)

    # -- diagnostics -------------------------------------------------------------------------------------

    def _auth_failed(self, where: str) -> None:
        self.auth_failures += 1
        now = self._clock()
        key = where.rsplit(":", 1)[0]
        if now - self._last_auth_log.get(key, float("-inf")) >= _AUTH_LOG_INTERVAL:
            self._last_auth_log[key] = now
            log.warning("refused %s: frame failed authentication (wrong cluster secret?) "
                        "[%d refused so far]", where, self.auth_failures)

    def link_status(self) -> dict[str, dict[str, Any]]:
        """Per peer, the state of both directions of its link (a snapshot of plain values)."""
        now = self._clock()
        out: dict[str, dict[str, Any]] = {}
        for name, link in list(self._links.items()):
            c = link.out
            inc = self._in_by_peer.get(name)
            state = "down" if c is None else c.state
            out[name] = {
                "dial": str(link.dial),
                "out": "up" if state == "up" else ("connecting" if c is not None else "down"),
                "out_for_s": round(now - (link.up_since if link.up_since is not None else link.down_since), 3),
                "in": inc is not None,
                "last_rx_s_ago": round(now - inc.last_rx, 3) if inc is not None else None,
                "connects": link.connects,
                "last_error": link.last_error or None,
            }
        return out

    def destroy(self) -> None:
        self.setOnMessageReceivedCallback(None)
        self.setOnNodeConnectedCallback(None)
        self.setOnNodeDisconnectedCallback(None)
        for link in list(self._links.values()):
            if link.out is not None:
                c, link.out = link.out, None
                c.conn.disconnect()
        for c in list(self._incoming.values()):
            c.conn.disconnect()
        self._incoming.clear()
        self._in_by_peer.clear()
        if self._sock is not None:
            try:
                self._so._poller.unsubscribe(self._sock.fileno())
            except Exception:
                pass
            self._sock.close()
            self._sock = None
