"""The managed cycle collector of served nodes (elasticmq_py/gcpolicy.py).

The decisions are tested on the sans-I/O core; the collector itself in a child process (the
policy changes process-wide state, which a pytest worker must not keep); the wiring through a
real ``elasticmq-py serve``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

from elasticmq_py.config import Config, ConfigError
from elasticmq_py.gcpolicy import CollectYoung, GcCore, GcSettings, Reclaim
from tests.endpoint.conftest import ServerProcess


def test_core_collects_young_until_a_reclaim_is_due():
    core = GcCore(GcSettings(reclaim_every=60.0, reclaim_below=1000), now=0.0)
    counted = []

    def frozen() -> int:
        counted.append(1)
        return 10

    assert core.turn(1.0, frozen) == CollectYoung()
    assert core.turn(59.9, frozen) == CollectYoung()
    assert counted == []            # counting walks every frozen object: only when due
    assert core.turn(60.0, frozen) == Reclaim()
    # the next one is due a whole period after the last check
    assert core.turn(61.0, frozen) == CollectYoung()
    assert core.turn(120.0, frozen) == Reclaim()
    assert len(counted) == 2 and core.skipped == 0


def test_core_skips_reclaims_while_too_much_is_frozen_checking_once_a_period():
    core = GcCore(GcSettings(reclaim_every=10.0, reclaim_below=1000), now=0.0)
    sizes = iter([5000, 1000])
    assert core.turn(10.0, lambda: next(sizes)) == CollectYoung()
    assert core.skipped == 1 and core.frozen == 5000
    # not counted again before another period has passed
    assert core.turn(11.0, lambda: 1 / 0) == CollectYoung()
    assert core.turn(20.0, lambda: next(sizes)) == Reclaim()
    assert core.skipped == 1


# Run in a child: a big acyclic "store", the policy installed on a loop, allocation churn.
_CHILD = textwrap.dedent('''
    import asyncio, gc, json, sys, weakref
    from elasticmq_py.gcpolicy import GcPolicy, GcSettings

    class Node:
        pass

    full = []                      # generation-2 collections the interpreter started by itself
    ours = [False]
    def cb(phase, info):
        if phase == "start" and info["generation"] == 2 and not ours[0]:
            full.append(1)
    gc.callbacks.append(cb)

    async def main():
        store = [{"id": i, "body": "x" * 10, "attrs": [i]} for i in range(300_000)]  # tracked, acyclic
        now = [0.0]
        policy = GcPolicy(GcSettings(interval=3600, reclaim_every=60.0, reclaim_below=10**9),
                          clock=lambda: now[0])
        policy.install()
        frozen_at_install = policy.stats.frozen
        full.clear()   # install's own collection, and the interpreter's while the store was built

        def turn():
            ours[0] = True
            try:
                policy.run_turn()
            finally:
                ours[0] = False

        # the store grows by half (without the policy that alone starts full collections) amid
        # short-lived churn, as a busy event loop makes
        for k in range(20):
            store.extend({"id": i, "attrs": [i]} for i in range(7_500))
            junk = [[j] for j in range(20_000)]
            del junk
        automatic_full = len(full)

        # a cycle dropped before a turn is collected by that turn
        a = Node(); a.me = a; young = weakref.ref(a); del a
        turn()
        young_collected = young() is None

        # a cycle that lived through a turn is frozen: the next young turn leaves it...
        b = Node(); b.me = b; old = weakref.ref(b)
        turn(); del b
        turn()
        frozen_cycle_kept = old() is not None
        # ...and a reclaim (everything unfrozen, collected in full) takes it
        now[0] = 60.0    # a reclaim is due now
        turn()
        reclaimed = old() is None
        stats = policy.stats
        policy.uninstall()
        print(json.dumps({"frozen_at_install": frozen_at_install, "automatic_full": automatic_full,
                          "young_collected": young_collected, "frozen_cycle_kept": frozen_cycle_kept,
                          "reclaimed": reclaimed, "reclaims": stats.reclaims, "turns": stats.turns,
                          "threshold_after_uninstall": gc.get_threshold(), "frozen_after": gc.get_freeze_count(),
                          "store": len(store)}))

    asyncio.run(main())
''')


def test_the_collector_under_the_policy_in_a_child_process():
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["frozen_at_install"] >= 300_000          # the store was frozen at install...
    assert r["automatic_full"] == 0                   # ...and no automatic full collection walked it
    assert r["young_collected"] is True
    assert r["frozen_cycle_kept"] is True             # the price, paid until a reclaim
    assert r["reclaimed"] is True and r["reclaims"] == 1
    assert r["turns"] == 4
    assert r["threshold_after_uninstall"][2] < 1000   # the interpreter's defaults are back
    assert r["frozen_after"] == 0


def test_config_gc_key():
    assert Config().gc == "managed"
    assert Config.from_dict({"gc": "default"}).gc == "default"
    with pytest.raises(ConfigError, match="gc"):
        Config.from_dict({"gc": "off"})
    with pytest.raises(ConfigError, match="gc"):
        Config.from_dict({"gc": 1})


def _gc_metrics(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
            if line.startswith("elasticmq_gc_")}


@pytest.mark.parametrize("mode", ["managed", "default"])
def test_serve_runs_the_policy_unless_told_not_to(mode):
    srv = ServerProcess("--gc", mode)
    try:
        deadline = time.time() + 15
        while True:
            m = _gc_metrics(srv.port)
            if mode == "default" or m.get("elasticmq_gc_turns_total", 0) >= 2 or time.time() > deadline:
                break
            time.sleep(0.3)
    finally:
        err = srv.stop()
    assert "Traceback" not in err, err
    if mode == "managed":
        assert m["elasticmq_gc_turns_total"] >= 2
        assert m["elasticmq_gc_frozen_objects"] > 0
    else:
        assert m == {}


def test_a_closed_connection_is_freed_by_reference_counting():
    """What the policy relies on: a connection's objects form no cycle once it is closed, so a
    long-lived (hence frozen) connection is still freed when it closes. (The parser holding
    its protocol as callbacks was such a cycle: 3,000 connections held open past a turn kept
    ~6 MB alive on a node storing 300k messages.)"""
    import asyncio
    import gc

    from storage import ManualClock
    from storage.commands import CreateQueue, Namespace

    from elasticmq_py.backend import LocalBackend
    from elasticmq_py.endpoint import Endpoint
    from elasticmq_py.httpserver import HttpProtocol
    from tests.endpoint.test_fuzz import FakeTransport

    loop = asyncio.new_event_loop()
    backend = LocalBackend(ManualClock())
    backend._loop = loop
    backend.execute_now(CreateQueue(Namespace(), "q1"))
    endpoint = Endpoint(backend)
    request = (b"POST / HTTP/1.1\r\nHost: h\r\nX-Amz-Target: AmazonSQS.ListQueues\r\n"
               b"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 2\r\n\r\n{}")

    def live() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is HttpProtocol)

    gc.collect()
    gc.disable()
    try:
        before = live()
        for _ in range(200):
            t = FakeTransport()
            p = HttpProtocol(endpoint, max_body=4096)
            p.connection_made(t)
            p.data_received(request)
            assert t.out.startswith(b"HTTP/1.1 200")
            p.connection_lost(None)
            del p, t
        assert live() == before
    finally:
        gc.enable()
        loop.close()
