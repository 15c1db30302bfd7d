"""The effect of every toxic, measured on real sockets through proxies configured only with the
toxiproxy-python client."""

from __future__ import annotations

import socket
import time

import pytest

from tests.toxiproxy.upstreams import (
    Sink, Upstream, connect, read_until_closed, recv_exactly, roundtrip, source, wait_until,
)


@pytest.fixture
def make_upstream():
    made = []

    def make(handler):
        up = Upstream(handler)
        made.append(up)
        return up

    yield make
    for up in made:
        up.close()


@pytest.fixture
def proxy_to(toxiproxy, name):
    count = iter(range(100))

    def make(upstream):
        return toxiproxy.create(upstream=upstream.address, name=f"{name}_{next(count)}",
                                listen="127.0.0.1:0")

    return make


# --------------------------------------------------------------------------- latency

@pytest.mark.parametrize("stream", ["downstream", "upstream"])
def test_latency(echo_proxy, stream):
    with connect(echo_proxy.listen) as s:
        assert roundtrip(s) < 0.1
        echo_proxy.add_toxic(type="latency", stream=stream, attributes={"latency": 200})
        took = [roundtrip(s) for _ in range(2)]
        assert all(0.195 <= t < 0.4 for t in took), took


def test_latency_jitter(echo_proxy):
    echo_proxy.add_toxic(type="latency", attributes={"latency": 150, "jitter": 75})
    with connect(echo_proxy.listen) as s:
        took = [roundtrip(s) for _ in range(5)]
    assert all(0.07 <= t < 0.35 for t in took), took


def test_latency_chunks_are_not_serialised(echo_proxy):
    """Several writes in flight are each delayed by the latency, not one after the other."""
    echo_proxy.add_toxic(type="latency", attributes={"latency": 300})
    with connect(echo_proxy.listen) as s:
        t = time.monotonic()
        for i in range(5):
            s.sendall(b"%d" % i)
            time.sleep(0.02)
        got = recv_exactly(s, 5)
        took = time.monotonic() - t
    assert got == b"01234"
    assert 0.3 <= took < 0.65, took


def test_toxics_apply_to_live_connections_and_updates(echo_proxy, api):
    with connect(echo_proxy.listen) as s:
        assert roundtrip(s) < 0.1
        echo_proxy.add_toxic(type="latency", attributes={"latency": 150})
        assert 0.14 <= roundtrip(s) < 0.35
        api.post(f"/proxies/{echo_proxy.name}/toxics/latency_downstream",
                 json={"attributes": {"latency": 400}})
        assert 0.39 <= roundtrip(s) < 0.65
        echo_proxy.destroy_toxic("latency_downstream")
        assert roundtrip(s) < 0.1


# --------------------------------------------------------------------------- bandwidth

def test_bandwidth_downstream(make_upstream, proxy_to):
    payload = bytes(range(256)) * 300  # 76800 bytes
    p = proxy_to(make_upstream(source(payload, close=False)))
    p.add_toxic(type="bandwidth", attributes={"rate": 100})  # 100 KB/s
    with connect(p.listen) as s:
        t = time.monotonic()
        got = recv_exactly(s, len(payload))
        took = time.monotonic() - t
    assert got == payload
    assert 0.55 <= took < 1.3, took  # ~0.77 s at 100 KB/s


def test_bandwidth_upstream(make_upstream, proxy_to):
    sink = Sink()
    p = proxy_to(make_upstream(sink))
    p.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": 200})
    with connect(p.listen) as s:
        t = time.monotonic()
        s.sendall(b"x" * 160_000)
        assert wait_until(lambda: sink.total >= 160_000, timeout=5)
        took = sink.last - t
    assert 0.55 <= took < 1.4, took  # ~0.8 s at 200 KB/s


# --------------------------------------------------------------------------- timeout

def test_timeout_zero_holds_until_removed(echo_proxy):
    echo_proxy.add_toxic(type="timeout", attributes={"timeout": 0})
    with connect(echo_proxy.listen) as s:
        s.sendall(b"held")
        s.settimeout(0.5)
        with pytest.raises(socket.timeout):
            s.recv(10)  # no data, and not closed either
        s.settimeout(3)
        t = time.monotonic()
        echo_proxy.destroy_toxic("timeout_downstream")
        # Removing the toxic closes the connection it was holding (its data was dropped).
        data, how = read_until_closed(s)
        assert how in ("eof", "reset") and time.monotonic() - t < 1.0


def test_timeout_closes_after_timeout(echo_proxy):
    echo_proxy.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 300})
    t = time.monotonic()
    with connect(echo_proxy.listen) as s:
        s.sendall(b"dropped")
        data, how = read_until_closed(s)
        took = time.monotonic() - t
    assert data == b"" and how in ("eof", "reset")
    assert 0.28 <= took < 0.8, took


# --------------------------------------------------------------------------- reset_peer

def test_reset_peer(echo_proxy):
    echo_proxy.add_toxic(type="reset_peer", stream="upstream", attributes={"timeout": 0})
    with connect(echo_proxy.listen) as s:
        s.sendall(b"boom")
        with pytest.raises(ConnectionResetError):
            s.recv(10)


def test_reset_peer_after_timeout(echo_proxy):
    echo_proxy.add_toxic(type="reset_peer", attributes={"timeout": 300})
    with connect(echo_proxy.listen) as s:
        t = time.monotonic()
        s.sendall(b"ping")
        data, how = read_until_closed(s)
        took = time.monotonic() - t
    assert how == "reset" and data == b""
    assert 0.28 <= took < 0.8, took


# --------------------------------------------------------------------------- slicer

def test_slicer_splits_writes(make_upstream, proxy_to):
    payload = b"abcdefghij" * 20  # 200 bytes in one write
    p = proxy_to(make_upstream(source(payload, close=False)))
    p.add_toxic(type="slicer", attributes={"average_size": 10, "size_variation": 4,
                                           "delay": 15_000})
    with connect(p.listen) as s:
        pieces = []
        t = time.monotonic()
        while sum(map(len, pieces)) < len(payload):
            pieces.append(s.recv(1000))
            assert pieces[-1]
        took = time.monotonic() - t
    assert b"".join(pieces) == payload
    assert len(pieces) >= 8, [len(x) for x in pieces]
    assert max(map(len, pieces)) <= 40, [len(x) for x in pieces]
    assert took >= 0.1, took  # >= ~13 gaps of 15 ms


# --------------------------------------------------------------------------- limit_data

def test_limit_data(make_upstream, proxy_to):
    p = proxy_to(make_upstream(source(b"z" * 1000, close=False)))
    p.add_toxic(type="limit_data", attributes={"bytes": 100})
    with connect(p.listen) as s:
        data, how = read_until_closed(s)
    assert data == b"z" * 100 and how in ("eof", "reset")


def test_limit_data_upstream(make_upstream, proxy_to):
    sink = Sink()
    p = proxy_to(make_upstream(sink))
    p.add_toxic(type="limit_data", stream="upstream", attributes={"bytes": 6})
    with connect(p.listen) as s:
        s.sendall(b"abc")
        assert wait_until(lambda: sink.total == 3, timeout=2)
        s.sendall(b"defghi")
        data, how = read_until_closed(s)
    assert data == b"" and how in ("eof", "reset")
    assert wait_until(lambda: sink.total == 6, timeout=2)
    time.sleep(0.1)
    assert sink.total == 6


# --------------------------------------------------------------------------- slow_close

def test_slow_close(make_upstream, proxy_to):
    p = proxy_to(make_upstream(source(b"bye")))
    with connect(p.listen) as s:
        t = time.monotonic()
        data, how = read_until_closed(s)
        assert (data, how) == (b"bye", "eof") and time.monotonic() - t < 0.2
    p.add_toxic(type="slow_close", attributes={"delay": 400})
    with connect(p.listen) as s:
        t = time.monotonic()
        assert recv_exactly(s, 3) == b"bye"
        assert time.monotonic() - t < 0.2  # data is not delayed
        data, how = read_until_closed(s)
        took = time.monotonic() - t
    assert (data, how) == (b"", "eof")
    assert 0.38 <= took < 0.9, took


# --------------------------------------------------------------------------- toxicity

def test_toxicity_zero_and_one(echo_proxy, api):
    echo_proxy.add_toxic(type="latency", toxicity=0.0, attributes={"latency": 400})
    for _ in range(3):
        with connect(echo_proxy.listen) as s:
            assert roundtrip(s) < 0.2
    api.post(f"/proxies/{echo_proxy.name}/toxics/latency_downstream", json={"toxicity": 1.0})
    for _ in range(2):
        with connect(echo_proxy.listen) as s:
            assert roundtrip(s) >= 0.39


def test_toxicity_is_per_connection(echo_proxy):
    """With toxicity 0.5, some new connections get the toxic and others do not; each connection
    keeps its draw."""
    echo_proxy.add_toxic(type="latency", toxicity=0.5, attributes={"latency": 80})
    slow = 0
    for _ in range(14):
        with connect(echo_proxy.listen) as s:
            first = roundtrip(s)
            second = roundtrip(s)
        assert (first >= 0.075) == (second >= 0.075), (first, second)
        slow += first >= 0.075
    assert 1 <= slow <= 13, slow  # P(failure) = 2 * 0.5**14
