"""Unmodified third-party clients against a real server process: botocore 1.29 (the Query
protocol, as older SDKs speak it) and the AWS CLI."""

import json
import sys

import pytest

from tests.endpoint.external_clients import AWSCLI, OLD_BOTOCORE, ensure, run_old_botocore_script, run_with

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def old_botocore():
    return ensure("botocore-1.29", OLD_BOTOCORE)


@pytest.fixture(scope="module")
def awscli():
    return ensure("awscli", AWSCLI)


def test_query_protocol_with_botocore_1_29(server, region, old_botocore):
    out = run_old_botocore_script(old_botocore, server.url, region)
    assert out["botocore"] == "1.29.165"
    assert out["url"] == f"{server.url}/000000000000/old"
    assert out["md5_ok"] and out["batch_ok"] == 3
    assert out["body"] == "h\u00e9llo\r\n<&>"
    assert out["attr_b"] == [0, 1]
    assert out["receive_count"] == "1"
    assert out["deleted"] == 4 and out["failed"] == ["ReceiptHandleIsInvalid"]
    assert out["attrs"] == {"VisibilityTimeout": "5", "QueueArn": f"arn:aws:sqs:{region}:000000000000:old"}
    assert out["tags"] == {"t": "1"}
    assert out["queues"] == [out["url"]]
    assert out["error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert out["error"]["Type"] == "Sender"


def aws(awscli, server, region, *args):
    r = run_with(awscli, [sys.executable, "-m", "awscli", "sqs", *args, "--endpoint-url", server.url,
                          "--region", region, "--output", "json"])
    return r


def test_aws_cli(server, region, awscli):
    r = aws(awscli, server, region, "create-queue", "--queue-name", "cli", "--attributes", "DelaySeconds=0")
    assert r.returncode == 0, r.stderr
    url = json.loads(r.stdout)["QueueUrl"]
    assert url == f"{server.url}/000000000000/cli"
    r = aws(awscli, server, region, "send-message", "--queue-url", url, "--message-body", "from the cli")
    assert r.returncode == 0, r.stderr
    r = aws(awscli, server, region, "receive-message", "--queue-url", url, "--attribute-names", "All")
    assert r.returncode == 0, r.stderr
    msg = json.loads(r.stdout)["Messages"][0]
    assert msg["Body"] == "from the cli"
    r = aws(awscli, server, region, "delete-message", "--queue-url", url, "--receipt-handle", msg["ReceiptHandle"])
    assert r.returncode == 0, r.stderr
    r = aws(awscli, server, region, "list-queues")
    assert json.loads(r.stdout)["QueueUrls"] == [url]
    r = aws(awscli, server, region, "get-queue-url", "--queue-name", "missing")
    assert r.returncode != 0 and "AWS.SimpleQueueService.NonExistentQueue" in r.stderr
