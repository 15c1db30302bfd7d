"""`elasticmq-py journal backup` of a running node and `journal restore` into a new data-dir, as
docs/production.md ("Backups and restore") runs them: real processes, boto3 load throughout.

The backups are taken while clients write and the node compacts (a 1 MB snapshot threshold, so
the copies hold a snapshot and the entries after it; a copy racing the removal of the files a
snapshot replaced is tests/journal/test_backup.py's). The node is then killed, the last backup is
restored into a fresh data-dir, and a node started on it must hold every message acknowledged
before that backup began, each body intact, and nothing that was never sent.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tests.endpoint.test_durable_node import ROOT, Node

BODY = 1000


def _journal(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elasticmq_py", "journal", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def _body(client: int, i: int) -> str:
    head = f"c{client}-{i:06d}:"
    return head + "x" * (BODY - len(head))


class Load:
    """``clients`` threads sending numbered bodies; ``acked`` maps each body to the monotonic time
    its answer came, ``tried`` holds every body sent, answered or not."""

    def __init__(self, node: Node, url: str, clients: int = 3):
        self.acked: dict[str, float] = {}
        self.tried: set[str] = set()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(node, url, k), daemon=True) for k in range(clients)]
        for t in self._threads:
            t.start()

    def _run(self, node: Node, url: str, k: int) -> None:
        import boto3
        from botocore.config import Config as BotoConfig
        sqs = boto3.client("sqs", endpoint_url=node.url, region_name="us-east-1", aws_access_key_id="x",
                           aws_secret_access_key="x", config=BotoConfig(retries={"total_max_attempts": 1}))
        i = 0
        while not self._stop.is_set():
            body = _body(k, i)
            i += 1
            self.tried.add(body)
            try:
                sqs.send_message(QueueUrl=url, MessageBody=body)
            except Exception:  # noqa: BLE001 - the node is killed under the clients
                continue
            self.acked[body] = time.monotonic()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)


@pytest.mark.slow
def test_a_backup_taken_under_load_restores_every_message_acknowledged_before_it(tmp_path):
    data, config = tmp_path / "data", tmp_path / "node.toml"
    config.write_text(f'[storage]\ndata-dir = "{data}"\nsnapshot-min-mb = 1\n')
    node = Node(data, "--config", str(config))
    try:
        url = node.sqs.create_queue(QueueName="jobs")["QueueUrl"]
        load = Load(node, url)
        time.sleep(2)
        backups = []
        for k in range(3):                    # each copy races the clients and, likely, a compaction
            began = time.monotonic()
            done = _journal("backup", str(data), str(tmp_path / f"backup{k}"))
            assert done.returncode == 0, done.stdout + done.stderr
            backups.append((tmp_path / f"backup{k}", began, done.stdout))
            time.sleep(0.5)
        load.stop()
    finally:
        node.kill()
    backup, began, report = backups[-1]
    assert "snapshot: #" in report, f"the copy holds a compaction snapshot and the entries after it: {report}"
    before = {b for b, t in load.acked.items() if t < began}
    assert len(before) > 300, f"too little acknowledged before the backup to mean anything: {len(before)}"
    check = _journal("check", str(backup))
    assert check.returncode == 0 and "problem: none" in check.stdout, check.stdout + check.stderr
    fresh = tmp_path / "restored"
    restored = _journal("restore", str(backup), str(fresh))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    node = Node(fresh)
    try:
        got: list[str] = []
        while True:
            msgs = node.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10,
                                            VisibilityTimeout=60).get("Messages", [])
            if not msgs:
                break
            got += [m["Body"] for m in msgs]
    finally:
        node.stop()
    assert len(got) == len(set(got)), "no message twice"
    missing = before - set(got)
    assert not missing, f"{len(missing)} acknowledged before the backup began are missing, e.g. {sorted(missing)[:3]}"
    assert set(got) <= load.tried, "nothing that was never sent"
    assert all(len(b) == BODY and b.endswith("x" * 100) for b in got), "every body intact"
