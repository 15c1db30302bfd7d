"""The cluster behind one address: a real HAProxy in front of three real members, as
docs/operations.md ("One address for the cluster: HAProxy") sets it up.

HAProxy health-checks every member with ``GET /health`` and retries only a connection that was
refused, on another member (``retries`` with ``option redispatch``): a request that reached a
member is never sent twice by the proxy. boto3 clients talk to HAProxy's address alone while the
master is killed with SIGKILL; every attempt is recorded for cluster.checker, which must find
nothing acknowledged lost, and the clients must see at most ``MAX_OUTAGE_S`` of failed requests
in a row.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from elasticmq_py.testing.cluster import Cluster, pick_ports
from tests.cluster.test_replication import LOADED, THREE, _finish, _recorders, _setup_queues
from tests.cluster.workload import Nemesis

pytestmark = pytest.mark.slow

MAX_OUTAGE_S = 2.0
INSTALL_HINT = "install it with `apt-get install -y haproxy` (.ci/run does)"


def haproxy_cfg(port: int, members: dict[str, str]) -> str:
    """docs/operations.md's haproxy.cfg, on loopback ports: ``members`` maps a name to host:port."""
    servers = "\n".join(f"    server {name} {addr} check" for name, addr in sorted(members.items()))
    return f"""\
global
    maxconn 256

defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    timeout check 1s
    retries 3
    option redispatch 1

frontend sqs
    bind 127.0.0.1:{port}
    default_backend members

backend members
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    default-server inter 1s fastinter 200ms downinter 200ms fall 2 rise 1
{servers}
"""


def _haproxy_binary() -> str:
    path = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy")
                                            if Path(p).is_file()), None)
    if path is None:
        pytest.skip("HAProxy is not installed on this machine (no `haproxy` on PATH, in /usr/sbin or in "
                    f"/usr/local/sbin): {INSTALL_HINT}")
    return path


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def haproxy(tmp_path: Path) -> Iterator:
    """Starts HAProxy in the foreground (``-db``) on a generated config; stops it at the end."""
    binary = _haproxy_binary()
    procs: list[subprocess.Popen] = []

    def start(members: dict[str, str]) -> str:
        port = pick_ports(1)[0]
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(haproxy_cfg(port, members))
        log = open(tmp_path / "haproxy.log", "ab")
        p = subprocess.Popen([binary, "-db", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        deadline = time.monotonic() + 10
        while not _accepts(port):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"HAProxy did not start (exit {p.poll()}): see {tmp_path / 'haproxy.log'}")
            time.sleep(0.05)
        return f"http://127.0.0.1:{port}"

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def longest_failed_run(histories: list[Path]) -> tuple[float, int]:
    """The clients' longest stretch of failed attempts, in seconds from the start of its first to
    the end of its last, and how many attempts it held: every client's attempts in the order they
    started, where any attempt that succeeded ends a stretch."""
    ops = sorted((json.loads(line) for h in histories for line in h.read_text().splitlines()),
                 key=lambda op: op["ts"])
    longest, count = (0.0, 0)
    start, end, n = None, 0.0, 0
    for op in ops:
        if op["outcome"] == "ok":
            start, n = None, 0
            continue
        if start is None:
            start, end = op["ts"], op["completed"]
        end, n = max(end, op["completed"]), n + 1
        if end - start > longest:
            longest, count = end - start, n
    return longest, count


def test_kill_master_behind_haproxy_loses_nothing_and_fails_over_within_2s(make_cluster, haproxy):
    c: Cluster = make_cluster(THREE, timing=LOADED)
    c.start_all(parallel=True)
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    # HAProxy checks every member from the start: wait until each one serves, so the proxy's
    # first checks find the pool whole
    c.wait_for("every member serves", lambda: all(c.health(n) == 200 for n in THREE), 10)
    _setup_queues(c, master)
    proxy = haproxy({n: c.url(n).removeprefix("http://") for n in THREE})
    recorders = [r.start() for r in _recorders(c, 3, lambda: {"haproxy": proxy})]
    time.sleep(1.5)
    c.kill(master)
    nemesis = Nemesis(c.tmp / "nemesis.jsonl")
    nemesis.note(master, "kill", ts=c.killed_at(master))
    nemesis.close()
    survivors = [n for n in THREE if n != master]
    new = c.wait_for("a new master", c.stable_master(among=survivors), 15)
    time.sleep(1)
    _finish(c, recorders, survivors, new)
    outage, attempts = longest_failed_run([r.history for r in recorders])
    assert outage <= MAX_OUTAGE_S, (f"the clients saw {attempts} failed requests in a row over {outage:.2f} s "
                                    f"(at most {MAX_OUTAGE_S} s; histories in {c.tmp})")
