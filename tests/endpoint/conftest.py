import contextlib
import json
import time
from pathlib import Path

import pytest

import botocore.model
import botocore.parsers
import botocore.serialize

VENDORED = Path(__file__).parents[2] / "elasticmq_py/protocol/sqs-2012-11-05.json"


def _botocore_model(protocol: str) -> botocore.model.ServiceModel:
    m = json.loads(VENDORED.read_text())
    m["metadata"]["protocol"] = protocol
    m["metadata"]["protocols"] = [protocol]
    return botocore.model.ServiceModel(m, service_name="sqs")


@pytest.fixture(scope="session")
def query_model():
    """The vendored model as the Query protocol botocore of old saw it: lets botocore's own
    serializer/parser stand in for an older SDK."""
    return _botocore_model("query")


@pytest.fixture(scope="session")
def json_model():
    """The installed botocore's own model: exactly what boto3 sends today."""
    import botocore.session
    return botocore.session.get_session().get_service_model("sqs")


# --- a real server process -----------------------------------------------------------------------

import subprocess
import sys
import uuid

import boto3
from botocore.config import Config as BotoConfig

ROOT = Path(__file__).parents[2]


class ServerProcess:
    def __init__(self, *args: str, launcher: tuple[str, ...] = ("-m", "elasticmq_py")):
        # launcher: what runs the CLI (tests/conformance/recording_server.py wraps it)
        self.proc = subprocess.Popen(
            [sys.executable, *launcher, "serve", "--port", "0", "--print-port",
             "--log-level", "WARNING", *args],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> str:
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


@pytest.fixture(scope="session")
def server():
    s = ServerProcess()
    yield s
    err = s.stop()
    # the server logs tracebacks only for internal errors, which must never happen
    assert "Traceback" not in err, err


_boto_session = boto3.session.Session()


def make_client(server, region: str):
    return _boto_session.client(
        "sqs", endpoint_url=server.url, region_name=region, aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
        config=BotoConfig(retries={"max_attempts": 1}, read_timeout=30))


@pytest.fixture
def region():
    """A fresh namespace per test: regions are separate namespaces."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sqs(server, region):
    return make_client(server, region)


def sqs_client(url: str):
    """boto3's SQS client for a server at ``url`` (any credentials: they are not checked)."""
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x")


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium (tests/endpoint/browser.py) with a fresh profile, quit after the test."""
    from tests.endpoint.browser import start_browser

    driver = start_browser(tmp_path / "chromium-profile")
    yield driver
    driver.quit()


@contextlib.contextmanager
def local_cluster(directory: Path, nodes: int = 3, fsync: str | None = "always"):
    """Members as real processes (elasticmq_py/localcluster.py): (the cluster, its master's name)
    once every member agrees on a serving master; stopped on the way out."""
    from elasticmq_py import localcluster

    cluster = localcluster.LocalCluster(directory, localcluster.plan_ports(nodes, 0), fsync=fsync)
    cluster.start()
    try:
        deadline = time.monotonic() + 30
        master = None
        while master is None:
            assert time.monotonic() < deadline and not cluster.exited(), "the cluster did not start"
            master = cluster.ready_master(cluster.statuses())
            time.sleep(0.2)
        yield cluster, master
    finally:
        cluster.stop()
