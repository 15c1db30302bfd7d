"""`serve --data-dir`: a single node whose queues and messages survive a restart
(elasticmq_py/durable.py), as real processes and a boto3 client.

Kill -9 and restart keeps every acknowledged change; a second process on the same data-dir is
refused; a data-dir that cannot be used is a clear error at start; a full disk answers a
retryable 503 and keeps what was acknowledged before it.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import boto3
import pytest
from botocore.config import Config as BotoConfig
from botocore.exceptions import ClientError

ROOT = Path(__file__).parents[2]


class Node:
    def __init__(self, data_dir: Path, *extra: str, preexec=None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", "--print-port", "--log-level", "INFO",
             "--data-dir", str(data_dir), *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the node did not start: {self.proc.stderr.read()}")
        self.url = f"http://127.0.0.1:{int(line)}"
        self.sqs = boto3.client("sqs", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="x",
                                aws_secret_access_key="x", config=BotoConfig(retries={"total_max_attempts": 1}))

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            return r.read()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


def _bodies(sqs, url: str) -> list[str]:
    got = []
    while True:
        msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get("Messages", [])
        if not msgs:
            return got
        got += [m["Body"] for m in msgs]


def test_kill_9_and_restart_keeps_every_acknowledged_change(tmp_path):
    data = tmp_path / "data"
    n = Node(data)
    try:
        url = n.sqs.create_queue(QueueName="jobs", Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
        fifo = n.sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
        n.sqs.tag_queue(QueueUrl=url, Tags={"team": "payments"})
        for i in range(40):
            n.sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
            n.sqs.send_message(QueueUrl=fifo, MessageBody=f"f{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}")
        got = n.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
        for m in got[:5]:
            n.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        deleted = {m["Body"] for m in got[:5]}
        in_flight = {m["Body"] for m in got[5:]}    # received, visibility 60 s: still hidden after restart
    finally:
        n.kill()
    n = Node(data)
    try:
        assert n.sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "payments"}
        visible = set(_bodies(n.sqs, url))
        assert visible == {f"m{i}" for i in range(40)} - deleted - in_flight, "deletes and visibility kept"
        order = []
        while True:
            msgs = n.sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10).get("Messages", [])
            if not msgs:
                break
            order += [m["Body"] for m in msgs]
            for m in msgs:
                n.sqs.delete_message(QueueUrl=fifo, ReceiptHandle=m["ReceiptHandle"])
        assert order == [f"f{i}" for i in range(40)], "FIFO order holds"
        # a retried send with a deduplication id used before the restart is still deduplicated
        n.sqs.send_message(QueueUrl=fifo, MessageBody="again", MessageGroupId="g", MessageDeduplicationId="d3")
        assert not n.sqs.receive_message(QueueUrl=fifo).get("Messages")
        status = json.loads(n.get("/cluster"))
        journal = status["journal"]
        assert journal["fsync"] == "always" and journal["recovery"]["messages"] == 75, journal
        metrics = n.get("/metrics").decode()
        assert "elasticmq_journal_fsyncs_total" in metrics and "elasticmq_journal_recovered_messages 75.0" in metrics
    finally:
        n.stop()


def test_a_long_poll_is_woken_by_a_send_once_the_journal_holds_it(tmp_path):
    import threading
    import time

    n = Node(tmp_path / "data")
    try:
        url = n.sqs.create_queue(QueueName="wake")["QueueUrl"]
        waiting = boto3.client("sqs", endpoint_url=n.url, region_name="us-east-1", aws_access_key_id="x",
                               aws_secret_access_key="x", config=BotoConfig(retries={"total_max_attempts": 1},
                                                                            read_timeout=30))
        got: dict = {}

        def poll() -> None:
            started = time.monotonic()
            got["messages"] = waiting.receive_message(QueueUrl=url, WaitTimeSeconds=15).get("Messages", [])
            got["after_s"] = time.monotonic() - started

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(1.0)     # the receive is parked by now
        n.sqs.send_message(QueueUrl=url, MessageBody="wake up")
        t.join(20)
        assert [m["Body"] for m in got["messages"]] == ["wake up"]
        assert got["after_s"] < 10, got      # woken by the send, not by the 15 s deadline
    finally:
        n.stop()


def test_a_second_process_on_the_same_data_dir_is_refused(tmp_path):
    n = Node(tmp_path / "data")
    try:
        p = subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--port", "0",
                            "--data-dir", str(tmp_path / "data")], cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert p.returncode == 1
        assert f"is in use by process {n.proc.pid}" in p.stderr, p.stderr
    finally:
        n.stop()


def test_a_data_dir_that_cannot_be_used_is_a_clear_error_at_start(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", "--data-dir", str(blocker)],
                       cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert any(line.startswith(f"elasticmq-py: data-dir {blocker}:") and "Not a directory" in line
               for line in p.stderr.splitlines()), p.stderr
    assert "Traceback" not in p.stderr


def _small_disk() -> None:
    # The journal may grow to 256 KiB: beyond it write() fails with EFBIG, as on a full disk
    # (ENOSPC). SIGXFSZ ignored, so the write fails instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE semantics")
def test_a_full_disk_answers_a_retryable_503_and_keeps_what_was_acknowledged(tmp_path):
    data = tmp_path / "data"
    n = Node(data, preexec=_small_disk)
    acked: list[str] = []
    try:
        url = n.sqs.create_queue(QueueName="q")["QueueUrl"]
        errors = []
        for i in range(60):                     # 60 x 10 KiB: the disk fills a third of the way
            try:
                n.sqs.send_message(QueueUrl=url, MessageBody=f"{i:04d}" + "x" * 10_000)
                acked.append(f"{i:04d}")
            except ClientError as e:
                errors.append(e.response)
        assert acked and errors, "some sends fit, then the disk was full"
        for r in errors:
            assert r["ResponseMetadata"]["HTTPStatusCode"] == 503
            assert r["Error"]["Code"] in ("ServiceUnavailable", "AWS.SimpleQueueService.ServiceUnavailable")
        assert "journal" in errors[0]["Error"]["Message"]
        journal = json.loads(n.get("/cluster"))["journal"]
        assert journal["error"], journal
    finally:
        n.kill()
    n = Node(data)                              # room again: everything acknowledged is there
    try:
        got = sorted(b[:4] for b in _bodies(n.sqs, url))
        assert got == acked
    finally:
        n.stop()


def test_damage_in_the_middle_refuses_to_start_until_an_operator_truncates(tmp_path):
    data = tmp_path / "data"
    n = Node(data)
    try:
        url = n.sqs.create_queue(QueueName="q")["QueueUrl"]
        for i in range(30):
            n.sqs.send_message(QueueUrl=url, MessageBody=f"m{i:02d}" + "y" * 500)
    finally:
        n.stop()
    (seg,) = (data / "journal").glob("*.seg")
    raw = bytearray(seg.read_bytes())
    middle = len(raw) // 2
    raw[middle] ^= 0xFF                       # one flipped byte, with valid records after it
    seg.write_bytes(bytes(raw))
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", "--data-dir", str(data)],
                       cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1, p.stderr
    assert seg.name in p.stderr and "offset" in p.stderr, p.stderr
    assert "elasticmq-py journal check" in p.stderr and "elasticmq-py journal truncate" in p.stderr, p.stderr
    check = subprocess.run([sys.executable, "-m", "elasticmq_py", "journal", "check", str(data)],
                           cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert check.returncode == 1 and "damaged" in check.stdout, check.stdout
    fix = subprocess.run([sys.executable, "-m", "elasticmq_py", "journal", "truncate", str(data), "--yes"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    n = Node(data)
    try:
        got = sorted(b[:3] for b in _bodies(n.sqs, url))
        assert got and got == [f"m{i:02d}" for i in range(len(got))], "what came before the damage, in full"
        assert len(got) < 30
    finally:
        n.stop()


def test_records_that_pass_their_crc_but_do_not_decode_refuse_to_start(tmp_path):
    from cluster.journal.disk import OsDisk
    from cluster.journal.format import JournalEntry
    from cluster.journal.journal import Journal

    data = tmp_path / "data"
    j, _ = Journal.open(OsDisk(data / "journal"))
    j.append([JournalEntry(1, 0, b"\xc1 not a mutation")])
    j.sync()
    j.close()
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", "--data-dir", str(data)],
                       cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "the journal's records do not rebuild a state" in p.stderr, p.stderr


def test_a_gathered_entry_is_cut_at_the_gathers_end_when_the_others_do_not_come(tmp_path):
    # Two sends answered by one fsync make the next entry wait for two; when only one comes, the
    # runtime must run the flush the core asks for at the gather's end (FlushDue(at)).
    import asyncio

    from cluster.clock import SystemClock
    from cluster.config import Durability
    from elasticmq_py.durable import DurableBackend
    from storage.commands import CreateQueue, Namespace, SendMessage

    ns = Namespace("us-east-1", "000000000000")

    async def main() -> list[float]:
        backend = DurableBackend(SystemClock(), Durability(str(tmp_path / "d"), gather_ms=50))
        await backend.start()
        loop = asyncio.get_running_loop()

        def run(command) -> asyncio.Future:
            f = loop.create_future()
            backend.execute(command, lambda r, e: f.set_exception(e) if e else f.set_result(r))
            return f

        try:
            await asyncio.wait_for(run(CreateQueue(ns, "q")), 5)
            await asyncio.sleep(0.1)
            await asyncio.wait_for(asyncio.gather(run(SendMessage(ns.key("q"), "a")), run(SendMessage(ns.key("q"), "b"))), 5)
            t0 = loop.time()
            await asyncio.wait_for(run(SendMessage(ns.key("q"), "c")), 5)
            return [loop.time() - t0]
        finally:
            await backend.stop()

    (waited,) = asyncio.run(main())
    assert 0.04 <= waited < 2, f"answered after {waited:.3f} s: held by the gather, then cut at its end"
