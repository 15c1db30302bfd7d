"""A whole cluster restored from one member's backup, as docs/production.md ("Restoring a whole
cluster") does it: the backup is taken from a live journaled member while it takes writes,
restored (`elasticmq-py journal restore`) into every member of a new cluster with no Raft state,
and the new cluster holds every message and takes writes.

``restore`` writes the state at epoch 0: the new cluster's terms start again from 1, and a
member left at the old cluster's epochs would rank above every entry the new master writes.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.cluster.test_journal_process import ROOT
from tests.cluster.test_replication import LOADED, THREE
from tests.cluster.workload import queue_url

pytestmark = pytest.mark.slow


def _journal(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elasticmq_py", "journal", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def test_every_member_restored_from_one_backup_holds_every_message(make_cluster):
    old = make_cluster(THREE, fsync="always", timing=LOADED)
    old.start_all(parallel=True)
    master = old.wait_for("an active master", old.stable_master(members=set(THREE)), 20)
    sqs = old.sqs(master)
    url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    sent = [f"m{i:03d}" for i in range(60)]
    for body in sent:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    replica = next(n for n in THREE if n != master)
    old.wait_for(f"{replica} level with the master",
                 lambda: (old.replication(master)["replicas"].get(replica) or {}).get("lag_batches") == 0, 10)
    backup = old.tmp / "backup"
    done = _journal("backup", str(old.tmp / f"{replica}.data"), str(backup))    # while it runs
    assert done.returncode == 0, done.stdout + done.stderr
    old.close()

    new = make_cluster(THREE, fsync="always", timing=LOADED)
    for n in THREE:
        r = _journal("restore", str(backup), str(new.tmp / f"{n}.data"))
        assert r.returncode == 0, r.stdout + r.stderr
    new.start_all(parallel=True)
    master = new.wait_for("a master of the new cluster", new.stable_master(members=set(THREE)), 20)
    for n in THREE:
        assert new.status(n)["replication"].get("amnesiac") is False, "new Raft state: not a restarted member"
    sqs = new.sqs(master)
    sqs.send_message(QueueUrl=queue_url(new.url(master), "jobs"), MessageBody="after")
    got: list[str] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        msgs = sqs.receive_message(QueueUrl=queue_url(new.url(master), "jobs"), MaxNumberOfMessages=10,
                                   VisibilityTimeout=60).get("Messages", [])
        if not msgs:
            break
        got += [m["Body"] for m in msgs]
    assert sorted(got) == sorted(sent + ["after"])
    new.wait_for("members converge", lambda: new.converged(THREE), 10)
    st = new.status(master)
    # the write after the restore sits at the new master's epoch, above the restored state's 0
    assert st["replication"]["log"]["last_epoch"] == st["view"]["epoch"] >= 1, st["replication"]["log"]
