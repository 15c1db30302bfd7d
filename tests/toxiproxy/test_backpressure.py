"""A fast sender behind a slow toxic is held back by TCP back-pressure: the server's memory does
not grow with what the sender would like to send."""

from __future__ import annotations

import os
import select
import time

import pytest

from tests.toxiproxy.upstreams import Sink, Upstream, connect, wait_until


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
def test_fast_sender_through_bandwidth_limit_is_backpressured(toxiproxy, toxiproxy_server, name):
    sink = Sink()
    up = Upstream(sink)
    try:
        p = toxiproxy.create(upstream=up.address, name=name, listen="127.0.0.1:0")
        p.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 100})  # 100 KB/s
        socks = [connect(p.listen) for _ in range(3)]
        for s in socks:
            s.setblocking(False)
        before = _rss(toxiproxy_server.pid)
        chunk = b"x" * 65536
        sent = 0
        peak = before
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            _, writable, _ = select.select([], socks, [], 0.05)
            for s in writable:
                try:
                    sent += s.send(chunk)
                except BlockingIOError:
                    pass
            peak = max(peak, _rss(toxiproxy_server.pid))
        # Loopback would take gigabytes in 1.5 s; only the socket buffers and the proxy's bounded
        # per-connection buffers may fill.
        assert sent < 64 * 2**20, sent
        assert peak - before < 40 * 2**20, (before, peak)
        # ... and the toxic really is the bottleneck: about 3 x 100 KB/s reached the upstream.
        assert wait_until(lambda: sink.total > 100_000, timeout=2)
        assert sink.total < 2_000_000, sink.total
        for s in socks:
            s.close()
    finally:
        up.close()
