"""The sans-I/O toxic chain: pure functions of chunks and time, no sockets."""

from __future__ import annotations

import random

import pytest

from elasticmq_py.toxiproxy.toxics import (
    CLOSE, RESET, Chain, Data, make_stage, parse_attributes, BadAttribute,
)


def chain_of(*toxics, now=0.0, seed=1):
    rng = random.Random(seed)
    c = Chain()
    for i, (t, attrs) in enumerate(toxics):
        c.add(f"t{i}", make_stage(t, parse_attributes(t, attrs), 1.0, now, rng))
    return c


def run(chain, until, step=None, start=0.0):
    """Pull at ``start`` and then at each deadline the chain asks for, as the runtime does:
    -> [(time rounded to the ms, event)]."""
    out = []
    t = start
    while t <= until + 1e-9:
        evs, deadline = chain.pull(t)
        out += [(round(t, 3), ev) for ev in evs]
        if deadline is None:
            break
        assert deadline > t
        t = deadline
    return out


def test_no_toxics_passes_through():
    c = Chain()
    c.push(Data(b"a", 0.0), 0.0)
    c.push(CLOSE, 0.0)
    evs, deadline = c.pull(0.0)
    assert [e.data if isinstance(e, Data) else e for e in evs] == [b"a", CLOSE]
    assert c.finished and deadline is None


def test_latency_delays_each_chunk_from_its_arrival():
    c = chain_of(("latency", {"latency": 100}))
    c.push(Data(b"a", 0.0), 0.0)
    c.push(Data(b"b", 0.05), 0.05)
    evs, deadline = c.pull(0.05)
    assert evs == [] and deadline == pytest.approx(0.1)
    out = run(c, 0.2, start=0.05)
    assert [(t, e.data) for t, e in out] == [(0.1, b"a"), (0.15, b"b")]


def test_latencies_add_up_in_a_chain():
    c = chain_of(("latency", {"latency": 100}), ("latency", {"latency": 50}))
    c.push(Data(b"a", 0.0), 0.0)
    out = run(c, 0.3)
    assert [t for t, _ in out] == [0.15]


def test_bandwidth_paces_bytes():
    c = chain_of(("bandwidth", {"rate": 10}))  # 10_000 B/s, 1000 B per 100 ms slice
    c.push(Data(b"x" * 3000, 0.0), 0.0)
    out = run(c, 0.5, step=0.01)
    assert [(t, len(e.data)) for t, e in out] == [(0.1, 1000), (0.2, 1000), (0.3, 1000)]


def test_bandwidth_zero_holds_everything():
    c = chain_of(("bandwidth", {"rate": 0}))
    c.push(Data(b"x", 0.0), 0.0)
    c.push(CLOSE, 0.0)
    assert run(c, 1.0, step=0.1) == []
    assert c.held > 0


def test_timeout_drops_data_and_closes():
    c = chain_of(("timeout", {"timeout": 100}))
    c.push(Data(b"x", 0.05), 0.05)  # restarts the timer, as in Go
    out = run(c, 0.3)
    assert out == [(0.15, CLOSE)]


def test_timeout_zero_holds_and_closes_when_removed():
    c = chain_of(("timeout", {"timeout": 0}))
    c.push(Data(b"x", 0.0), 0.0)
    assert run(c, 1.0, step=0.1) == []
    c.remove("t0", 1.0)
    assert c.pull(1.0)[0] == [CLOSE]


def test_reset_peer_after_first_data():
    c = chain_of(("reset_peer", {"timeout": 50}))
    assert run(c, 0.1) == []  # nothing until data arrives
    c.push(Data(b"x", 0.1), 0.1)
    out = run(c, 0.3, start=0.1)
    assert out == [(0.15, RESET)]


def test_slicer_splits_and_spaces_slices():
    c = chain_of(("slicer", {"average_size": 10, "size_variation": 3, "delay": 1000}))
    c.push(Data(bytes(100), 0.0), 0.0)
    out = run(c, 0.05)
    sizes = [len(e.data) for _, e in out]
    assert sum(sizes) == 100 and len(sizes) >= 7 and max(sizes) <= 13 + 3
    times = [t for t, _ in out]
    assert all(b - a >= 0.001 - 1e-9 for a, b in zip(times, times[1:]))


def test_limit_data_counts_across_updates():
    rng = random.Random(1)
    c = Chain()
    c.add("l", make_stage("limit_data", {"bytes": 10}, 1.0, 0.0, rng))
    c.push(Data(b"12345", 0.0), 0.0)
    assert [e.data for e in c.pull(0.0)[0]] == [b"12345"]
    c.replace("l", make_stage("limit_data", {"bytes": 8}, 1.0, 0.0, rng), 0.0)
    c.push(Data(b"6789", 0.0), 0.0)
    evs = c.pull(0.0)[0]
    assert [e.data if isinstance(e, Data) else e for e in evs] == [b"678", CLOSE]


def test_slow_close_delays_only_the_close():
    c = chain_of(("slow_close", {"delay": 200}))
    c.push(Data(b"a", 0.0), 0.0)
    c.push(CLOSE, 0.0)
    out = run(c, 0.5, step=0.01)
    assert [(t, e.data if isinstance(e, Data) else e) for t, e in out] == [(0.0, b"a"), (0.2, CLOSE)]


def test_removing_a_toxic_flushes_what_it_held():
    c = chain_of(("latency", {"latency": 1000}))
    c.push(Data(b"a", 0.0), 0.0)
    c.push(Data(b"b", 0.0), 0.0)
    assert c.pull(0.1)[0] == []
    c.remove("t0", 0.1)
    assert [e.data for e in c.pull(0.1)[0]] == [b"a", b"b"]


def test_toxicity_zero_is_a_passthrough():
    rng = random.Random(1)
    c = Chain()
    c.add("l", make_stage("latency", {"latency": 1000, "jitter": 0}, 0.0, 0.0, rng))
    c.push(Data(b"a", 0.0), 0.0)
    assert [e.data for e in c.pull(0.0)[0]] == [b"a"]


def test_attributes_are_typed_like_go():
    assert parse_attributes("latency", {"latency": 5, "unknown": "x"}) == {"latency": 5, "jitter": 0}
    assert parse_attributes("latency", {"jitter": 2.0}, base={"latency": 5, "jitter": 0}) == {
        "latency": 5, "jitter": 2}
    for bad in ({"latency": "5"}, {"latency": 1.5}, {"latency": True}, [1]):
        with pytest.raises(BadAttribute):
            parse_attributes("latency", bad)


def test_slicer_tiny_slices_of_a_big_chunk_are_bounded_per_pull():
    c = chain_of(("slicer", {"average_size": 1, "size_variation": 0, "delay": 0}))
    c.push(Data(bytes(range(256)) * 200, 0.0), 0.0)
    got = []
    pulls = 0
    while not got or sum(map(len, got)) < 51_200:
        evs, deadline = c.pull(0.0)
        assert len(evs) <= 1024
        got += [e.data for e in evs]
        pulls += 1
    assert b"".join(got) == bytes(range(256)) * 200
    assert c.held == 0 and pulls >= 50


def test_held_bytes_are_accounted_while_cutting():
    c = chain_of(("bandwidth", {"rate": 1}))  # 100-byte slices every 100 ms
    c.push(Data(b"x" * 1000, 0.0), 0.0)
    before = c.held
    c.pull(0.1)
    assert c.held == before - 100
    c.remove("t0", 0.1)
    assert [len(e.data) for e in c.pull(0.1)[0]] == [900]
    assert c.held == 0
