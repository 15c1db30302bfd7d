"""The mutation stream's transport: authenticated frames over encrypted ZeroMQ/TCP links, on the
node's event loop.

Sockets. Every node binds one ROUTER on its stream address and, for each peer, connects one
DEALER to the address ``ClusterConfig.dial_stream(self, peer)`` gives for that directed link.
All traffic from A to B goes through A's DEALER to B's ROUTER, so each directed link is a TCP
connection of its own that a test or an operator can route through a proxy and cut alone; the
ROUTER is only ever read. The DEALER's routing identity is the node's name, but it is never
trusted: the name inside the authenticated frame (cluster/replication/wire.py) is the sender,
and a frame whose ZeroMQ identity disagrees with it is refused. ROUTER_HANDOVER lets a
restarted peer take over its identity from a connection libzmq has not yet noticed is dead
(the default would silently drop the newcomer's frames).

Encryption. With ``encrypt_links`` (the default) the ROUTER is a CURVE server and each DEALER a
CURVE client, keys derived from the cluster secret (cluster/replication/curve.py): no byte of a
frame crosses the network in clear. Each DEALER has a monitor socket on the loop too, so a
handshake that fails (a peer with encryption off, or another secret) is counted and logged with
its cause instead of leaving the link silently dead.

Event loop. The ROUTER is a plain socket whose notification fd (ZMQ_FD) is registered with
``loop.add_reader``; each wake-up drains it with NOBLOCK receives until EAGAIN. That fd is
edge-triggered, hence the rules kept in ``_readable``: drain until EAGAIN (a receive that says
EAGAIN, or a read of ZMQ_EVENTS that says nothing is left, has processed libzmq's pending
commands, so the next arrival signals again), and when
the per-wake-up budget stops the drain early, schedule the rest ourselves, since no new signal
will come for what is already queued. (``zmq.asyncio`` does the same with a Future and a
callback per message: under load that machinery cost ~10% of the master's CPU and more of a
replica's, measured with py-spy.) Draining many frames in one callback also lets the runtime
answer them with one cumulative ack. DEALERs are plain sockets used only with NOBLOCK sends
from the loop thread, so sending never awaits. Everything, callbacks
included, runs on the loop that called ``start()``; nothing here is thread-safe.

Bounded memory. DEALERs set ZMQ_IMMEDIATE (nothing is queued for a peer until its connection is
up) and ZMQ_SNDHWM (at most that many frames queue per peer); a send that would block is
dropped and counted. Losing frames is safe: the stream protocol repairs gaps from the master's
log. ZMQ_MAXMSGSIZE makes libzmq drop an oversized message before it is buffered.

Liveness. ZeroMQ reconnects silently and never says whether a peer is there, so liveness comes
from traffic: the node core's peer liveness (cluster/replication/liveness.py) sends heartbeats
through here and decides from every frame that arrives. This transport decides nothing.

Hostile input. Unauthenticated, malformed, foreign-cluster, unknown-sender or identity-mismatched
frames are counted by reason and logged at most once per reason per ``log_every`` seconds; they
never reach the protocol and never stop the receive loop.

Groups. With ``groups`` = 1 a message is one EM1 frame: ``send(to, frame)`` out, ``on_frame(sender,
frame)`` in. With G >= 2 a message is one EM2 bundle of (group, frame) items, the node's whole
turn for that peer: ``send_bundle(to, items)`` out, ``on_bundle(sender, items)`` in, one call per
bundle, so the runtime handles a turn's items together. Which of the two a transport speaks is
fixed when it is built, so G = 1 runs today's code with nothing tested per frame. A peer
configured with another G is refused ("groups_mismatch", logged with both counts) and the link
stays up for the members that agree. The counters (frames_in, frames_out, ...) count messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import zmq
from zmq.utils.monitor import parse_monitor_message

from cluster.config import Address, ClusterConfig, Timing
from cluster.replication.curve import HANDSHAKE_EVENTS, LinkCrypto, handshake_failure
from cluster.replication.wire import DEFAULT_MAX_FRAME, AuthenticationError, GroupsMismatch, WireCodec, WireError

log = logging.getLogger("cluster.replication.transport")

_REFUSAL_REASON = {AuthenticationError: "unauthenticated", GroupsMismatch: "groups_mismatch"}

# Plain ints: pyzmq's constants are enum flags, and ``events & zmq.POLLIN`` builds an enum in
# Python on every call.
_EVENTS, _POLLIN, _NOBLOCK = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK)


@dataclass(frozen=True, slots=True)
class TransportTiming:
    heartbeat: float = 0.2        # the core's heartbeat period: ZMTP pings go as often
    dead_after: float = 1.0       # the core's liveness bound (see _set_zmtp_heartbeat)
    reconnect: float = 0.1        # libzmq reconnect interval, backing off to reconnect_max
    reconnect_max: float = 1.0
    sndhwm: int = 1000            # frames queued per peer before sends are dropped
    max_frame: int = DEFAULT_MAX_FRAME
    log_every: float = 10.0       # rate limit of the log line per kind of refused frame
    # One wake-up of the receive side handles at most this many frames, or stops once it has run
    # this long (a snapshot chunk can take tens of ms to restore), then yields to the loop.
    rx_budget: int = 64
    rx_budget_s: float = 0.005

    @classmethod
    def from_timing(cls, t: Timing, **overrides: Any) -> "TransportTiming":
        return cls(**{"heartbeat": t.keepalive, "dead_after": t.connection_timeout, **overrides})


@dataclass
class _Peer:
    name: str
    dial: Address | None = None
    sock: zmq.Socket | None = None
    monitor: zmq.Socket | None = None  # the DEALER's handshake failures
    last_rx: float | None = None       # last authenticated frame from it
    frames_in: int = 0
    frames_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    send_dropped: int = 0


@dataclass
class _RateLimitedLog:
    every: float
    _last: dict[str, float] = field(default_factory=dict)
    _suppressed: dict[str, int] = field(default_factory=dict)

    def warn(self, key: str, now: float, msg: str, *args: Any) -> None:
        last = self._last.get(key)
        if last is not None and now - last < self.every:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        n = self._suppressed.pop(key, 0)
        log.warning(msg + (f" ({n} more like it suppressed)" if n else ""), *args)


FrameHandler = Callable[[str, Any], None]
BundleHandler = Callable[[str, "tuple[tuple[int, Any], ...]"], None]
DrainedHandler = Callable[[], None]


class StreamTransport:
    def __init__(self, config: ClusterConfig, self_name: str, *, on_frame: FrameHandler | None = None,
                 on_bundle: BundleHandler | None = None, groups: int = 1,
                 on_drained: DrainedHandler | None = None, timing: TransportTiming | None = None,
                 bind: Address | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        """``on_frame`` receives each frame when ``groups`` is 1, ``on_bundle`` each bundle's
        items when it is more."""
        deliver = on_frame if groups == 1 else on_bundle
        if deliver is None:
            raise ValueError(f"a stream of groups = {groups} delivers to {'on_frame' if groups == 1 else 'on_bundle'}")
        self.self_name = self_name
        self.groups = groups
        self.timing = timing or TransportTiming.from_timing(config.timing)
        self._config = config
        self._bind = bind or config.node(self_name).stream_addr
        if self._bind is None:
            raise ValueError(f"node {self_name} has no stream address to bind")
        self._deliver = deliver
        self._on_drained = on_drained
        self.draining = False       # frames are being handed to on_frame; on_drained follows
        self._clock = clock
        self.codec = WireCodec(config.name, config.secret, self_name, max_frame=self.timing.max_frame, groups=groups)
        if groups == 1:
            self._encode, self._decode = self.codec.encode, self.codec.decode
        else:
            self._encode, self._decode = self.codec.encode_bundle, self.codec.decode_bundle
        self.crypto = LinkCrypto(config.secret, self_name, config.encrypt_links)
        self.peers: dict[str, _Peer] = {}
        self.refused: dict[str, int] = {}
        self.bound: Address | None = None
        self._ctx: zmq.Context | None = None
        self._router: zmq.Socket | None = None
        self._router_fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rlog = _RateLimitedLog(self.timing.log_every)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> Address:
        """Bind (port 0: the OS chooses; see ``bound``) and dial every peer with a stream address."""
        self._ctx = zmq.Context()
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.ROUTER_HANDOVER, 1)
        router.setsockopt(zmq.MAXMSGSIZE, self.timing.max_frame + 1024)
        router.setsockopt(zmq.RCVHWM, max(self.timing.sndhwm, 1000))
        self._set_zmtp_heartbeat(router)
        self.crypto.server(router)
        if ":" in self._bind.host:
            router.setsockopt(zmq.IPV6, 1)
        port = "*" if self._bind.port == 0 else str(self._bind.port)
        try:
            router.bind(f"tcp://{_host(self._bind.host)}:{port}")
        except zmq.ZMQError as err:
            router.close(0)
            self._ctx.term()
            raise OSError(f"cannot bind the stream on {self._bind}: {err}") from err
        self._router = router
        endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.bound = Address.parse(endpoint.removeprefix("tcp://"))
        loop = self._loop = asyncio.get_running_loop()
        self.update_config(self._config)
        self._router_fd = router.getsockopt(zmq.FD)
        loop.add_reader(self._router_fd, self._readable)
        loop.call_soon(self._readable)   # anything that arrived before the fd was watched
        return self.bound

    async def close(self) -> None:
        if self._router_fd is not None and self._loop is not None:
            self._loop.remove_reader(self._router_fd)
            self._router_fd = None
        for p in self.peers.values():
            self._close_dealer(p)
        if self._router is not None:
            self._router.close(0)
            self._router = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def update_config(self, config: ClusterConfig) -> None:
        """Adopt new members or dial addresses (a DEALER whose address changed is redialled)."""
        self._config = config
        wanted = {n.name for n in config.nodes if n.name != self.self_name}
        for name in list(self.peers):
            if name not in wanted:
                self._close_dealer(self.peers.pop(name))
        for name in sorted(wanted):
            p = self.peers.setdefault(name, _Peer(name))
            dial = config.dial_stream(self.self_name, name)
            if dial is not None and dial.port == 0:
                dial = None          # a peer whose port is not known yet (bound later)
            if dial == p.dial and (p.sock is not None or dial is None):
                continue
            self._close_dealer(p)
            p.dial = dial
            if dial is not None and self._ctx is not None:
                self._dealer(p, dial)

    # -- sending -----------------------------------------------------------------------------------

    def send(self, to: str, frame: Any) -> bool:
        """Queue ``frame`` for ``to``; False (and counted) when it had to be dropped. With G >= 2
        this is ``send_bundle``: what it queues is a bundle of ``frame``'s (group, frame) items."""
        p = self.peers.get(to)
        if p is None or p.sock is None:
            if p is not None:
                p.send_dropped += 1
            return False
        data = self._encode(frame, to)
        try:
            p.sock.send(data, _NOBLOCK)
        except zmq.Again:
            p.send_dropped += 1
            return False
        except zmq.ZMQError as err:
            p.send_dropped += 1
            self._rlog.warn(f"send-{to}", self._clock(), "stream: send to %s failed: %s", to, err)
            return False
        p.frames_out += 1
        p.bytes_out += len(data)
        return True

    # G >= 2: one bundle per peer per turn, (group, frame) items, through the same code.
    send_bundle = send

    # -- state -------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        now = self._clock()
        return {
            "bound": str(self.bound) if self.bound else None,
            "refused": dict(self.refused),
            "peers": {p.name: {
                "dial": str(p.dial) if p.dial else None,
                "last_frame_age_s": round(now - p.last_rx, 3) if p.last_rx is not None else None,
                "frames_in": p.frames_in, "frames_out": p.frames_out,
                "bytes_in": p.bytes_in, "bytes_out": p.bytes_out, "send_dropped": p.send_dropped,
            } for p in self.peers.values()},
        }

    # -- internals ---------------------------------------------------------------------------------

    def _dealer(self, p: _Peer, dial: Address) -> None:
        assert self._ctx is not None
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.IMMEDIATE, 1)
        s.setsockopt(zmq.SNDHWM, self.timing.sndhwm)
        s.setsockopt(zmq.RECONNECT_IVL, max(1, int(self.timing.reconnect * 1000)))
        s.setsockopt(zmq.RECONNECT_IVL_MAX, max(1, int(self.timing.reconnect_max * 1000)))
        s.setsockopt(zmq.IDENTITY, self.self_name.encode())
        self._set_zmtp_heartbeat(s)
        self.crypto.client(s, p.name)
        if ":" in dial.host:
            s.setsockopt(zmq.IPV6, 1)
        p.sock = s
        if self._loop is not None:
            p.monitor = s.get_monitor_socket(HANDSHAKE_EVENTS)
            self._loop.add_reader(p.monitor.getsockopt(zmq.FD), self._handshake_events, p)
            self._loop.call_soon(self._handshake_events, p)   # edge-triggered: arm it
        s.connect(f"tcp://{_host(dial.host)}:{dial.port}")

    def _close_dealer(self, p: _Peer) -> None:
        if p.monitor is not None:
            if self._loop is not None:
                self._loop.remove_reader(p.monitor.getsockopt(zmq.FD))
            if p.sock is not None:
                p.sock.disable_monitor()
            p.monitor.close(0)
            p.monitor = None
        if p.sock is not None:
            p.sock.close(0)
            p.sock = None

    def _handshake_events(self, p: _Peer) -> None:
        """The DEALER's monitor has news: each event is a handshake with the peer that failed.
        Drained until nothing is left, as the ROUTER is (its fd is edge-triggered too)."""
        mon = p.monitor
        while mon is not None and mon.getsockopt(_EVENTS) & _POLLIN:
            try:
                ev = parse_monitor_message(mon.recv_multipart(_NOBLOCK))
            except zmq.Again:
                return
            why = handshake_failure(int(ev["event"]), int(ev["value"]), p.name, self.crypto.enabled)
            self.refused["handshake_failed"] = self.refused.get("handshake_failed", 0) + 1
            self._rlog.warn(f"handshake-{p.name}", self._clock(), "stream: link to %s refused: %s", p.name, why)

    def _set_zmtp_heartbeat(self, s: zmq.Socket) -> None:
        # ZMTP pings close half-open TCP connections, so libzmq reconnects instead of waiting on a
        # connection a cut proxy left behind; our own heartbeats still decide liveness. The pong
        # queues behind whatever data is in flight, so the timeout must exceed the time a slow
        # link needs to drain a transfer window: at dead_after it would close healthy
        # connections mid-transfer, which would then start over (tests/chaos/zmq_heartbeat_probe.py).
        s.setsockopt(zmq.HEARTBEAT_IVL, max(1, int(self.timing.heartbeat * 1000)))
        s.setsockopt(zmq.HEARTBEAT_TIMEOUT, max(1, int(5 * self.timing.dead_after * 1000)))

    def _refuse(self, reason: str, detail: str, identity: bytes | None) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1
        who = identity[:64].decode("utf-8", "replace") if identity else "?"
        self._rlog.warn(reason, self._clock(), "stream: refused a frame (%s) from zmq identity %r: %s",
                        reason, who, detail)

    def _readable(self) -> None:
        """Hand what arrived to ``on_frame`` (``on_bundle``), then call ``on_drained`` once: a node answers
        (acks, the next batch) in this turn of the loop, for every frame of the drain at once."""
        if self._router is None:
            return
        self.draining = True
        try:
            self._drain()
        finally:
            self.draining = False
            if self._on_drained is not None:
                try:
                    self._on_drained()
                except Exception:
                    log.exception("stream: handling the end of a drain failed")

    def _drain(self) -> None:
        router = self._router
        assert router is not None
        clock = self._clock
        until = clock() + self.timing.rx_budget_s
        for _ in range(self.timing.rx_budget):
            if clock() > until:
                break
            try:
                # Asking ZMQ_EVENTS processes libzmq's pending commands as an EAGAIN would (the
                # fd signals again for what arrives next), without raising zmq.Again: an
                # exception per wake-up cost a replica ~4% of its CPU (py-spy).
                if not router.getsockopt(_EVENTS) & _POLLIN:
                    return
                parts = router.recv_multipart(_NOBLOCK)
            except zmq.Again:
                return
            except zmq.ZMQError as err:
                self._refuse("recv_error", str(err), None)
                break
            try:
                self._on_message(parts)
            except Exception:   # a bug in a handler must not stop the stream
                log.exception("stream: handling a frame failed")
        # Budget spent (or an error): more may be queued, and the edge-triggered fd will not
        # say so again. Continue after the loop's other callbacks had their turn.
        if self._loop is not None:
            self._loop.call_soon(self._readable)

    def _on_message(self, parts: list[bytes]) -> None:
        if len(parts) != 2:
            self._refuse("malformed", f"{len(parts) - 1} message parts, expected 1", parts[0] if parts else None)
            return
        identity, data = parts
        try:
            sender, frame = self._decode(data)
        except WireError as err:
            reason = _REFUSAL_REASON.get(type(err), "malformed")
            self._refuse(reason, f"{err} (claims to be {self.codec.peek_sender(data)!r})", identity)
            return
        p = self.peers.get(sender)
        if p is None:
            self._refuse("unknown_sender", f"{sender!r} is not a peer of {self.self_name}", identity)
            return
        if identity != sender.encode():
            self._refuse("identity_mismatch", f"authenticated sender {sender!r}", identity)
            return
        p.last_rx = self._clock()
        p.frames_in += 1
        p.bytes_in += len(data)
        self._deliver(sender, frame)

def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
