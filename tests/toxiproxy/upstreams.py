"""Small threaded TCP servers that play the upstream of a proxy in the tests, and client helpers
(blocking sockets, bounded timeouts)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from typing import Callable


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


class Upstream:
    """A TCP server on 127.0.0.1 with an OS-chosen port running ``handler(conn)`` per client."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        outer = self

        class H(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.settimeout(10)
                try:
                    handler(self.request)
                except OSError:
                    pass

        self.server = _Server(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        self.address = f"127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        del outer

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def echo(conn: socket.socket) -> None:
    while True:
        data = conn.recv(65536)
        if not data:
            return
        conn.sendall(data)


def source(payload: bytes, close: bool = True, linger: float = 0.0) -> Callable[[socket.socket], None]:
    """Sends ``payload`` on connect, then closes (after ``linger`` seconds) or waits for EOF."""

    def handler(conn: socket.socket) -> None:
        conn.sendall(payload)
        if linger:
            time.sleep(linger)
        if not close:
            while conn.recv(65536):
                pass

    return handler


class Sink:
    """Reads and discards; counts bytes and remembers when the last one came."""

    def __init__(self, read_size: int = 65536, pause: float = 0.0) -> None:
        self.total = 0
        self.last = 0.0
        self.lock = threading.Lock()
        self.read_size = read_size
        self.pause = pause

    def __call__(self, conn: socket.socket) -> None:
        while True:
            data = conn.recv(self.read_size)
            if not data:
                return
            with self.lock:
                self.total += len(data)
                self.last = time.monotonic()
            if self.pause:
                time.sleep(self.pause)


def host_port(listen: str) -> tuple[str, int]:
    host, port = listen.rsplit(":", 1)
    host = host.strip("[]")
    if host in ("", "::", "0.0.0.0"):
        host = "127.0.0.1"
    return host, int(port)


def connect(listen: str, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(host_port(listen), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def roundtrip(s: socket.socket, payload: bytes = b"ping") -> float:
    """Send ``payload`` through an echo upstream; seconds until it is all back."""
    t = time.monotonic()
    s.sendall(payload)
    got = recv_exactly(s, len(payload))
    assert got == payload, got
    return time.monotonic() - t


def read_until_closed(s: socket.socket) -> tuple[bytes, str]:
    """Reads until EOF or reset: -> (data, "eof" | "reset" | "timeout")."""
    buf = bytearray()
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            return bytes(buf), "reset"
        except socket.timeout:
            return bytes(buf), "timeout"
        if not chunk:
            return bytes(buf), "eof"
        buf += chunk


def wait_until(pred: Callable[[], bool], timeout: float = 5.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()
