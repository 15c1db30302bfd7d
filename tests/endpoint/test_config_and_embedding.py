"""Configuration (TOML), the CLI, the embedded Server with its in-process API, and the pytest
plugin's fixture."""

import asyncio
import json
import socket
import time
import re
import subprocess
import sys
import textwrap

import boto3
import pytest

from storage.commands import (GetQueueAttributes, GetQueueUrl, ListQueueTags, Namespace, ReceiveMessage,
                              SendMessage)
from storage.errors import SqsError
from storage.results import GetQueueUrlResult

from elasticmq_py import Config, Server
from elasticmq_py.config import ConfigError, DeadLetterQueue, Tls

from tests.endpoint.conftest import ROOT, ServerProcess

TOML = textwrap.dedent("""
    port = 0
    account-id = "123456789012"
    region = "eu-central-1"
    limits = "relaxed"

    [queues.orders]
    attributes = { VisibilityTimeout = 45, DelaySeconds = 0 }
    tags = { team = "payments" }
    dead-letter-queue = { name = "orders-dlq", max-receive-count = 3 }

    [queues."orders-dlq"]
    attributes = { MessageRetentionPeriod = 1209600 }

    [queues."jobs.fifo"]
    region = "us-west-2"
    attributes = { ContentBasedDeduplication = true }
    dead-letter-queue = { name = "jobs-dlq.fifo", max-receive-count = 5 }
""")


def test_toml_parsing(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(TOML)
    cfg = Config.from_toml(p)
    assert (cfg.port, cfg.account_id, cfg.region, cfg.limits) == (0, "123456789012", "eu-central-1", "relaxed")
    assert [q.name for q in cfg.queues] == ["orders-dlq", "orders", "jobs.fifo"]  # DLQ first
    orders = cfg.queues[1]
    assert orders.attributes == {"VisibilityTimeout": "45", "DelaySeconds": "0"}
    assert orders.dead_letter_queue == DeadLetterQueue("orders-dlq", 3)
    assert cfg.max_body_bytes() > 64 * 1024 * 1024


@pytest.mark.parametrize("text,msg", [
    ("prot = 1", "unknown key(s) prot"),
    ("port = 'x'", "port has the wrong type"),
    ("limits = 'loose'", "unknown limits profile"),
    ("[queues.a]\nattrs = {}", "unknown key(s) attrs"),
    ("[queues.a]\ndead-letter-queue = { name = 'b' }", "needs name and max-receive-count"),
    ("[queues.a]\ndead-letter-queue = { name = 'b', max-receive-count = 1 }\n"
     "[queues.b]\ndead-letter-queue = { name = 'a', max-receive-count = 1 }", "cycle"),
    ("port = ", "Invalid value"),
    ("[tls]\ncert-file = 'server.pem'", "tls: needs both cert-file and key-file"),
    ("[tls]\ncert-file = 'a'\nkey-file = 'b'\nca-file = 'c'", "tls: unknown key(s) ca-file"),
    ("[tls]\ncert-file = 1\nkey-file = 'b'", "cert-file has the wrong type"),
])
def test_toml_errors(tmp_path, text, msg):
    p = tmp_path / "c.toml"
    p.write_text(text)
    with pytest.raises((ConfigError, ValueError), match=re.escape(msg)):
        Config.from_toml(p)


def test_tls_paths_are_relative_to_the_config_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[tls]\ncert-file = 'certs/server.pem'\nkey-file = '/etc/keys/server.key'\n")
    cfg = Config.from_toml(p)
    assert cfg.tls == Tls(str(tmp_path / "certs/server.pem"), "/etc/keys/server.key")
    assert cfg.scheme == "https" and Config().tls is None and Config().scheme == "http"


def test_embedded_server_without_http_creates_configured_queues(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(TOML)
    with Server(config=Config.from_toml(p), listen=False) as s:
        ns = Namespace("eu-central-1", "123456789012")
        orders = s.execute(GetQueueUrl(ns, "orders")).queue
        attrs = s.execute(GetQueueAttributes(orders, ("All",))).attributes
        assert attrs["VisibilityTimeout"] == "45"
        assert json.loads(attrs["RedrivePolicy"]) == {
            "deadLetterTargetArn": "arn:aws:sqs:eu-central-1:123456789012:orders-dlq", "maxReceiveCount": 3}
        assert s.execute(ListQueueTags(orders)).tags == {"team": "payments"}
        jobs = s.execute(GetQueueUrl(Namespace("us-west-2", "123456789012"), "jobs.fifo")).queue
        assert s.execute(GetQueueAttributes(jobs, ("FifoQueue",))).attributes == {"FifoQueue": "true"}
        # the DLQ named only as a target was created, FIFO like its name
        dlq = s.execute(GetQueueUrl(Namespace("us-west-2", "123456789012"), "jobs-dlq.fifo"))
        assert isinstance(dlq, GetQueueUrlResult)
        s.execute(SendMessage(orders, "hi"))
        assert s.execute(ReceiveMessage(orders)).messages[0].body == "hi"
        with pytest.raises(SqsError) as e:
            s.execute(GetQueueUrl(ns, "nope"))
        assert e.value.code == "AWS.SimpleQueueService.NonExistentQueue"


def test_bad_queue_config_fails_start():
    cfg = Config.from_dict({"queues": {"bad name!": {}}})
    with pytest.raises(ConfigError, match="bad name!"):
        Server(config=cfg, listen=False).start()


def test_server_context_manager_and_endpoint_url():
    with Server(port=0) as s:
        assert s.endpoint_url.startswith("http://127.0.0.1:")
        c = boto3.client("sqs", endpoint_url=s.endpoint_url, region_name="us-east-1",
                         aws_access_key_id="a", aws_secret_access_key="b")
        assert c.create_queue(QueueName="cm")["QueueUrl"] == s.endpoint_url + "/000000000000/cm"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2)


def test_server_inside_a_running_loop():
    async def main():
        async with Server(port=0) as s:
            assert s.port > 0
            r, w = await asyncio.open_connection("127.0.0.1", s.port)
            w.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await r.readline()).startswith(b"HTTP/1.1 200")
            w.close()
    asyncio.run(main())


def test_cli_help_is_complete():
    out = subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for flag in ("--config", "--host", "--port", "--account-id", "--region", "--limits"):
        assert flag in out
    out = subprocess.run([sys.executable, "-m", "elasticmq_py", "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "serve" in out


def test_cli_config_file_and_flag_overrides(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(TOML)
    srv = ServerProcess("--config", str(p), "--account-id", "999999999999")
    try:
        c = boto3.client("sqs", endpoint_url=srv.url, region_name="eu-central-1",
                         aws_access_key_id="a", aws_secret_access_key="b")
        assert c.get_queue_url(QueueName="orders")["QueueUrl"] == f"{srv.url}/999999999999/orders"
    finally:
        assert "Traceback" not in srv.stop()


def test_cli_bad_config_exits_cleanly(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("prot = 1")
    r = subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--config", str(p)], cwd=ROOT,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown key(s) prot" in r.stderr and "Traceback" not in r.stderr


def test_pytest_plugin_fixture(sqs_endpoint):
    sqs = sqs_endpoint.client()
    url = sqs.create_queue(QueueName="plugin")["QueueUrl"]
    assert url == sqs_endpoint.queue_url("plugin")
    sqs.send_message(QueueUrl=url, MessageBody="x")
    assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "x"


def test_pytest_loads_the_plugin_without_the_server():
    # pytest imports the plugin in every run where the package is installed; the server, storage
    # and the cluster load only once a test asks for the fixture
    probe = ("import sys, elasticmq_py.pytest_plugin; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('storage', 'cluster', 'elasticmq_py')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['elasticmq_py', 'elasticmq_py.pytest_plugin']"
    names = "import elasticmq_py as e; print(e.Server.__module__, e.Config.__module__, e.LocalBackend.__module__)"
    out = subprocess.run([sys.executable, "-c", names], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["elasticmq_py.server", "elasticmq_py.config", "elasticmq_py.backend"]


def test_pytest_plugin_namespaces_are_fresh(sqs_endpoint):
    assert "QueueUrls" not in sqs_endpoint.client().list_queues()


def test_stop_closes_open_connections_and_long_polls():
    s = Server(port=0).start()
    c = boto3.client("sqs", endpoint_url=s.endpoint_url, region_name="us-east-1",
                     aws_access_key_id="a", aws_secret_access_key="b")
    url = c.create_queue(QueueName="lp")["QueueUrl"]
    body = json.dumps({"QueueUrl": url, "WaitTimeSeconds": 20}).encode()
    sock = socket.create_connection(("127.0.0.1", s.port), timeout=5)
    sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: AmazonSQS.ReceiveMessage\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    time.sleep(0.2)
    started = time.monotonic()
    s.stop()
    assert sock.recv(100) == b""  # closed by the server, not after the 20 s wait
    assert time.monotonic() - started < 3
    sock.close()


def test_an_embedded_server_is_in_memory_unless_its_config_has_a_data_dir(tmp_path):
    from cluster.config import Durability

    ns = Namespace("us-east-1", "000000000000")
    with Server(listen=False) as plain:
        assert plain.backend.status().journal is None, "in memory by default"
    cfg = Config(durability=Durability(str(tmp_path / "data"), "always"))
    with Server(config=cfg, listen=False) as s:
        from storage.commands import CreateQueue
        s.execute(CreateQueue(ns, "kept"))
        s.execute(SendMessage(ns.key("kept"), "survives"))
        assert s.backend.status().journal.fsync == "always"
    with Server(config=cfg, listen=False) as again:
        got = again.execute(ReceiveMessage(ns.key("kept"))).messages
        assert [m.body for m in got] == ["survives"]


def test_data_dir_settings_are_checked(tmp_path):
    with pytest.raises((ConfigError, ValueError), match="fsync 'sometimes' must be one of always, interval, never"):
        Config.from_dict({"storage": {"data-dir": "d", "fsync": "sometimes"}})
    with pytest.raises((ConfigError, ValueError), match="unknown key"):
        Config.from_dict({"storage": {"data-dir": "d", "fsnyc": "always"}})
    p = tmp_path / "c.toml"
    p.write_text('[storage]\ndata-dir = "data"\nfsync = "interval"\nfsync-interval-ms = 50\n')
    d = Config.from_toml(p).durability
    assert d.data_dir == str(tmp_path / "data"), "relative to the file"
    assert (d.fsync, d.fsync_interval_ms, d.snapshot_min_mb) == ("interval", 50, 64)
    assert d.gather_ms == 2, "a single node's group commit gathers by default"
    p.write_text('[storage]\ndata-dir = "data"\ngather-ms = 0\n')
    assert Config.from_toml(p).durability.gather_ms == 0
    with pytest.raises((ConfigError, ValueError), match="gather-ms must be a non-negative integer"):
        Config.from_dict({"storage": {"data-dir": "d", "gather-ms": -1}})


def test_data_dir_flags_keep_the_files_other_storage_settings(tmp_path):
    from elasticmq_py.cli import _with_storage
    cfg = Config.from_dict({"storage": {"data-dir": "d", "gather-ms": 5, "snapshot-min-mb": 8}})
    d = _with_storage(cfg, str(tmp_path / "e"), "never").durability
    assert (d.data_dir, d.fsync, d.gather_ms, d.snapshot_min_mb) == (str(tmp_path / "e"), "never", 5, 8)
    d = _with_storage(Config(), str(tmp_path / "f"), None).durability
    assert (d.fsync, d.gather_ms) == ("always", 2)
