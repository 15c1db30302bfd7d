"""A rolling upgrade as docs/production.md ("Upgrading a member at a time") runs it: three
journaled members under boto3 load, each stopped with SIGTERM and started again on its data-dir
in turn, the replicas first and the master last, after `elasticmq-py step-down`. Before and
after each member, ``status`` must show it in the view and caught up.

The checker (cluster.checker) must find nothing acknowledged lost, and the clients' longest run
of failed requests must stay under ``MAX_OUTAGE_S``. The clients use the members that are up, as
a load balancer that health-checks them does (docs/operations.md, HAProxy), so the outage is the
master's handover. Measured on a 2-core machine with the process tests' loaded timing: 0.05-0.06 s
(2-5 failed requests in a row) over five runs. The bound leaves room for a handover whose first
candidate loses its election and a second one is held (election-max is 1.6 s here).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from elasticmq_py.testing.cluster import Cluster
from tests.cluster.test_behind_haproxy import longest_failed_run
from tests.cluster.test_replication import LOADED, THREE, _finish, _recorders, _setup_queues, _urls

pytestmark = pytest.mark.slow

MAX_OUTAGE_S = 2.0


def caught_up(c: Cluster, master: str, member: str) -> bool:
    """``status`` of the master: ``member`` in the view, connected, nothing to catch up; and the
    member's own: not amnesiac (it kept what it acknowledged)."""
    st, mine = c.status(master), c.status(member)
    if st is None or mine is None or member not in st["view"]["members"]:
        return False
    replica = st["replication"]["replicas"].get(member) or {}
    return bool(replica.get("connected")) and replica.get("lag_batches") == 0 \
        and mine["replication"].get("amnesiac") is False


def restart(c: Cluster, member: str) -> None:
    """Step 3 of the page: stop it (SIGTERM), start the new build on the same configuration and
    data-dir."""
    c.stop(member)
    c.start(member)


def test_restarting_each_member_in_turn_master_last_loses_nothing(make_cluster):
    c = make_cluster(THREE, fsync="always", timing=LOADED)
    c.start_all(parallel=True)
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 20)
    _setup_queues(c, master)
    recorders = [r.start() for r in _recorders(c, 3, _urls(c))]
    time.sleep(1)
    for member in [n for n in THREE if n != master]:
        c.wait_for(f"{member} caught up before its restart", lambda: caught_up(c, master, member), 10)
        restart(c, member)
        c.wait_for(f"{member} back and caught up", lambda: caught_up(c, master, member), 20)
    step_down = subprocess.run([sys.executable, "-m", "elasticmq_py", "step-down", "--endpoint", c.url(master),
                                "--secret", c.secret], capture_output=True, text=True, timeout=30)
    assert step_down.returncode == 0, step_down.stdout + step_down.stderr
    new = c.wait_for("a new master", lambda: (m := c.stable_master(members=set(THREE))()) != master and m, 15)
    c.wait_for(f"{master} caught up before its restart", lambda: caught_up(c, new, master), 10)
    restart(c, master)
    c.wait_for(f"{master} back and caught up", lambda: caught_up(c, new, master), 20)
    assert c.wait_for("one master of three", c.stable_master(members=set(THREE)), 10) == new, \
        "no failback: the old master came back as a replica"
    _finish(c, recorders, list(THREE), new)
    outage, attempts = longest_failed_run([r.history for r in recorders])
    assert outage <= MAX_OUTAGE_S, (f"the clients saw {attempts} failed requests in a row over {outage:.2f} s "
                                    f"(at most {MAX_OUTAGE_S} s; histories in {c.tmp})")
