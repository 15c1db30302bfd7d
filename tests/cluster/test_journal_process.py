"""Journaled cluster members as real processes: kill -9 of every node under load loses nothing
acknowledged, and a node restarted alone rejoins from its journal without a state transfer.

The checker (cluster.checker) judges the recorded histories exactly as for the other process
tests: under `majority` nothing acknowledged may be lost, no delete undone, FIFO order kept, and
every member ends with the master's digest. With `fsync = always`, `majority` means "on disk on
a majority", so a whole-cluster kill must not change that verdict (DESIGN.md, invariant 7).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.journal import format as fmt
from cluster.journal.format import DROPPED_MARKER
from elasticmq_py.testing.cluster import Cluster
from tests.cluster.test_replication import LOADED, THREE, _finish, _recorders, _setup_queues, _urls
from tests.cluster.workload import Nemesis

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


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


def test_a_member_whose_damaged_journal_was_truncated_restarts_amnesiac_until_caught_up(make_cluster):
    """Truncating drops entries the member fsynced and may have acknowledged: it must count in
    no master-change majority until a serving master has brought it up to date, and then the
    truncate's marker goes, so that its next restart is an ordinary one."""
    c = make_cluster(THREE, fsync="always", timing=LOADED, proxied=True)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 20)
    sqs = c.sqs(master)
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    for i in range(20):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i:02d}" + "y" * 500)
    replica = next(n for n in THREE if n != master)
    c.wait_for(f"{replica} level with the master",
               lambda: (c.replication(master)["replicas"].get(replica) or {}).get("lag_batches") == 0, 10)
    c.kill(replica)
    data = c.tmp / f"{replica}.data"
    (seg,) = (data / "journal").glob("*.seg")
    raw = bytearray(seg.read_bytes())
    records = fmt.scan(bytes(raw), fmt.HEADER_SIZE).records   # (the killed node left reserved zeros after them)
    raw[records[len(records) // 2].offset + 30] ^= 0xFF        # one flipped byte, with valid records after it
    seg.write_bytes(bytes(raw))
    fix = subprocess.run([sys.executable, "-m", "elasticmq_py", "journal", "truncate", str(data), "--yes"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    marker = data / "journal" / DROPPED_MARKER
    assert marker.exists()
    c.isolate(replica)                         # no master can bring it up to date yet
    c.start(replica)
    st = c.replication(replica)
    assert st["amnesiac"] is True, st
    assert c.status(replica)["journal"]["recovery"]["entries_dropped"] is True
    c.heal_all()
    c.wait_for(f"{replica} caught up", lambda: c.replication(replica)["amnesiac"] is False, 15)
    c.wait_for("the marker removed", lambda: not marker.exists(), 5)
    c.wait_for("the master's state", lambda: c.converged([master, replica]), 5)
