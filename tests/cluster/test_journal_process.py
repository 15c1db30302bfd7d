"""Journaled cluster members as real processes: kill -9 of every node under load loses nothing
acknowledged, and a node restarted alone rejoins from its journal without a state transfer.

The checker (cluster.checker) judges the recorded histories exactly as for the other process
tests: under `majority` nothing acknowledged may be lost, no delete undone, FIFO order kept, and
every member ends with the master's digest. With `fsync = always`, `majority` means "on disk on
a majority", so a whole-cluster kill must not change that verdict (DESIGN.md, invariant 7).
"""

from __future__ import annotations

import time

import pytest

from elasticmq_py.testing.cluster import Cluster
from tests.cluster.test_replication import LOADED, THREE, _finish, _recorders, _setup_queues, _urls
from tests.cluster.workload import Nemesis

pytestmark = pytest.mark.slow


def _events(c: Cluster, node: str, kind: str) -> list[dict]:
    return [e for e in c.history(node) if e["event"] == kind]


def test_killing_every_node_under_load_loses_nothing_acknowledged(make_cluster):
    c = make_cluster(THREE, fsync="always", timing=LOADED)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 20)
    _setup_queues(c, master)
    nemesis = Nemesis(c.tmp / "nemesis.jsonl")
    recorders = [r.start() for r in _recorders(c, 3, _urls(c))]
    time.sleep(4)
    acked_before = sum(r.ok_counts.get("send", 0) for r in recorders)
    for n in THREE:                        # as close to a power cut as processes get
        c.kill(n)
    for n in THREE:
        nemesis.note(n, "kill", "every node, under load", ts=c.killed_at(n))
    time.sleep(1)
    c.start_all(parallel=True)
    for n in THREE:
        nemesis.note(n, "restart", "from its data-dir")
    new = c.wait_for("a master after the restart", c.stable_master(members=set(THREE)), 30)
    time.sleep(3)                          # the clients go on against the restarted cluster
    nemesis.close()
    assert acked_before > 20, "too little was acknowledged before the kill to mean anything"
    for n in THREE:
        (first, second) = _events(c, n, "started")
        assert second.get("restarted") is True
    _finish(c, recorders, list(THREE), new)


def test_a_member_restarted_alone_rejoins_from_its_journal_without_a_transfer(make_cluster):
    c = make_cluster(THREE, fsync="always", timing=LOADED)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 20)
    _setup_queues(c, master)
    replica = next(n for n in THREE if n != master)
    nemesis = Nemesis(c.tmp / "nemesis.jsonl")
    recorders = [r.start() for r in _recorders(c, 2, _urls(c, [master]))]
    time.sleep(2)
    c.kill(replica)
    nemesis.note(replica, "kill", ts=c.killed_at(replica))
    time.sleep(3)                          # the others take writes meanwhile
    c.start(replica)
    nemesis.note(replica, "restart", "from its data-dir")
    c.wait_for(f"{replica} in the view", c.stable_master(members=set(THREE)), 20)
    c.wait_for(f"{replica} level with the master",
               lambda: (c.replication(master)["replicas"].get(replica) or {}).get("lag_batches") == 0, 20)
    st = c.replication(replica)
    assert st["amnesiac"] is False, "its journal kept what it acknowledged: not amnesiac"
    assert st["last_transfer"] is None, f"it caught up from its journal and the log, not a transfer: {st}"
    journal = c.status(replica)["journal"]
    assert journal["recovery"]["entries"] + (journal["recovery"]["messages"] or 0) > 0, journal
    nemesis.close()
    _finish(c, recorders, list(THREE), master)
