"""A pytest plugin (entry point ``pytest11``): what people use moto for, against a real server.

    def test_orders(sqs_endpoint):
        sqs = sqs_endpoint.client()               # a boto3 client (boto3 must be installed)
        url = sqs.create_queue(QueueName="orders")["QueueUrl"]

One server per test session (in a thread of the test process, on a free port); every test gets
a fresh namespace: its own region name, which the server keeps separate from every other.
Options: ``--elasticmq-limits=relaxed``, ``--elasticmq-account-id=...``.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from elasticmq_py.server import Server

# The server is imported only when a test asks for it: pytest loads this plugin in every run in
# an environment where elasticmq-py is installed, and must not pay for (or fail on) it otherwise.

_counter = itertools.count()


def pytest_addoption(parser):
    group = parser.getgroup("elasticmq-py")
    group.addoption("--elasticmq-limits", default="strict", choices=["strict", "relaxed"],
                    help="SQS limits profile of the sqs_endpoint server")
    group.addoption("--elasticmq-account-id", default="000000000000",
                    help="account id of the sqs_endpoint server")


@dataclass(frozen=True)
class SqsEndpoint:
    url: str                # endpoint_url for any SQS client
    region: str             # this test's namespace: use it as the client's region
    account_id: str
    server: "Server"

    def client(self, **kwargs):
        import boto3
        kw = dict(endpoint_url=self.url, region_name=self.region,
                  aws_access_key_id="test", aws_secret_access_key="test")
        kw.update(kwargs)
        return boto3.client("sqs", **kw)

    def queue_url(self, name: str) -> str:
        return f"{self.url}/{self.account_id}/{name}"


@pytest.fixture(scope="session")
def elasticmq_server(request):
    from elasticmq_py.config import Config
    from elasticmq_py.server import Server

    config = Config(host="127.0.0.1", port=0, limits=request.config.getoption("--elasticmq-limits"),
                    account_id=request.config.getoption("--elasticmq-account-id"))
    with Server(config=config) as server:
        yield server


@pytest.fixture
def sqs_endpoint(elasticmq_server) -> SqsEndpoint:
    region = f"test-{os.getpid()}-{next(_counter)}"
    return SqsEndpoint(elasticmq_server.endpoint_url, region, elasticmq_server.config.account_id,
                       elasticmq_server)
