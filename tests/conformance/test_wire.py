"""The corpus at the byte level: what no SDK sends or shows (GET requests, missing members,
content negotiation), and an unmodified botocore 1.29 (Query protocol) end to end.

Sources are named beside each check; "LocalStack ..." means a test of
github.com/localstack/localstack tests/aws/services/sqs/test_sqs.py (class TestSqsQueryApi
unless said otherwise) marked aws.validated, or its AWS-recorded snapshot.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.conformance.conftest import JSON, QUERY, json_post, make_client, query_get, query_post
from tests.endpoint.external_clients import run_with

NS = "http://queue.amazonaws.com/doc/2012-11-05/"


@pytest.fixture
def sqs(server, region, query_session):
    """A JSON client for setting things up."""
    return make_client(server, JSON, region, query_session)


def path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def xml_error(body: bytes) -> tuple[str, str, str]:
    text = body.decode()
    return tuple(re.search(f"<{tag}>(.*?)</{tag}>", text).group(1) for tag in ("Type", "Code", "Message"))


# --- Query over GET and POST -------------------------------------------------------------------

def test_get_without_an_action_is_unknown_operation(server, region, sqs):
    # LocalStack test_get_without_query_returns_unknown_operation and
    # test_get_without_query_json_format_returns_returns_xml; the bare element as the LocalStack
    # docs quote AWS ("AWS ... returns a <UnknownOperationException/>")
    path = path_of(sqs.create_queue(QueueName="q")["QueueUrl"])
    for headers in ({}, {"Accept": "application/json"}):
        status, _, body = query_get(server, region, {}, path, headers)
        assert (status, body) == (404, b"<UnknownOperationException/>")


@pytest.mark.parametrize("action", ["CreateQueue", "ListQueues"])
def test_queueless_actions_at_a_queue_url_are_invalid(server, region, sqs, action):
    # LocalStack test_get_create_queue_fails and test_get_list_queues_fails
    path = path_of(sqs.create_queue(QueueName="q")["QueueUrl"])
    status, _, body = query_get(server, region, {"Action": action, "QueueName": "other"}, path)
    assert status == 400
    assert xml_error(body) == ("Sender", "InvalidAction", f"The action {action} is not valid for this endpoint.")


def test_unknown_action(server, region, sqs):
    # LocalStack test_invalid_action_raises_exception
    path = path_of(sqs.create_queue(QueueName="q")["QueueUrl"])
    status, _, body = query_get(server, region, {"Action": "FooBar", "Version": "2012-11-05"}, path)
    assert status == 400
    assert xml_error(body) == ("Sender", "InvalidAction", "The action FooBar is not valid for this endpoint.")


def test_missing_member(server, region, sqs):
    # LocalStack test_valid_action_with_missing_parameter_raises_exception
    path = path_of(sqs.create_queue(QueueName="q")["QueueUrl"])
    status, _, body = query_get(server, region, {"Action": "SendMessage"}, path)
    assert status == 400
    assert xml_error(body) == ("Sender", "MissingParameter", "The request must contain the parameter MessageBody.")


def test_get_send_receive_and_delete_at_the_queue_url(server, region, sqs):
    # LocalStack test_get_send_and_receive_messages, test_get_queue_attributes_all,
    # test_get_queue_attributes_with_query_args, test_get_delete_queue
    path1 = path_of(q1 := sqs.create_queue(QueueName="q1")["QueueUrl"])
    path2 = path_of(sqs.create_queue(QueueName="q2")["QueueUrl"])
    assert query_get(server, region, {"Action": "SendMessage", "MessageBody": "foobar"}, path1)[0] == 200
    status, _, body = query_get(server, region, {"Action": "ReceiveMessage"}, path2)
    assert status == 200 and b"<ReceiveMessageResult/>" in body and b"foobar" not in body
    status, _, body = query_get(server, region, {"Action": "ReceiveMessage"}, path1)
    assert status == 200 and b"<Body>foobar</Body>" in body and b"<MD5OfBody>" in body
    status, _, body = query_get(server, region, {"Action": "GetQueueAttributes", "AttributeName.1": "All"}, path1)
    assert f"<Attribute><Name>QueueArn</Name><Value>arn:aws:sqs:{region}:".encode() in body
    assert b"<Attribute><Name>VisibilityTimeout</Name><Value>30" in body
    status, _, body = query_get(server, region, {"Action": "GetQueueAttributes", "AttributeName.1": "QueueArn"}, path1)
    assert b"<Name>QueueArn</Name>" in body and b"<Name>VisibilityTimeout</Name>" not in body
    # the QueueUrl member wins over the path (test_overwrite_queue_url_in_params)
    status, _, body = query_get(server, region, {"Action": "GetQueueAttributes", "QueueUrl": q1,
                                                 "AttributeName.1": "QueueArn"}, path2)
    assert b":q1</Value>" in body
    # GetQueueUrl may be sent to any queue's URL (test_get_queue_url_work_for_different_queue)
    status, _, body = query_get(server, region, {"Action": "GetQueueUrl", "QueueName": "q2"}, path1)
    assert status == 200 and f"<QueueUrl>{server.url}{path2}</QueueUrl>".encode() in body
    status, _, body = query_get(server, region, {"Action": "DeleteQueue"}, path1)
    assert status == 200 and body.startswith(f'<?xml version="1.0"?><DeleteQueueResponse xmlns="{NS}">'.encode())
    # LocalStack test_get_on_deleted_queue_fails
    status, _, body = query_get(server, region, {"Action": "GetQueueAttributes", "AttributeName.1": "QueueArn"}, path1)
    assert status == 400
    assert xml_error(body) == ("Sender", "AWS.SimpleQueueService.NonExistentQueue",
                               "The specified queue does not exist for this wsdl version.")


def test_query_answers_json_when_asked(server, region, sqs):
    # LocalStack test_get_list_queues_with_query_auth and test_marker_serialization_json_protocol;
    # the R client cloudyr/aws.sqs reads ListQueuesResult.queueUrls
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    body = '{"foo": "ba\rr", "foo2": "ba&quot;r&quot;"}'
    sqs.send_message(QueueUrl=url, MessageBody=body)
    accept = {"Accept": "application/json"}
    status, headers, raw = query_get(server, region, {"Action": "ListQueues", "Version": "2012-11-05"}, "/", accept)
    assert status == 200 and headers["content-type"] == "application/json"
    listed = json.loads(raw)["ListQueuesResponse"]
    assert listed["ListQueuesResult"]["queueUrls"] == [url] and listed["ResponseMetadata"]["RequestId"]
    status, _, raw = query_get(server, region, {"Action": "ListQueues", "Version": "2012-11-05"})
    assert status == 200 and b"<ListQueuesResponse" in raw
    status, _, raw = query_get(server, region, {"Action": "ReceiveMessage", "QueueUrl": url, "Version": "2012-11-05",
                                                "VisibilityTimeout": "0"}, "/", accept)
    assert json.loads(raw)["ReceiveMessageResponse"]["ReceiveMessageResult"]["messages"][0]["Body"] == body
    # test_get_queue_attributes_json_format and test_get_list_queues_fails_json_format (aws.validated)
    status, _, raw = query_get(server, region, {"Action": "GetQueueAttributes", "AttributeName.1": "All"},
                               path_of(url), accept)
    attributes = json.loads(raw)["GetQueueAttributesResponse"]["GetQueueAttributesResult"]["Attributes"]
    assert {"Name": "QueueArn", "Value": f"arn:aws:sqs:{region}:000000000000:q"} in attributes
    status, _, raw = query_get(server, region, {"Action": "ListQueues"}, path_of(url), accept)
    assert status == 400
    error = json.loads(raw)["Error"]
    assert (error["Code"], error["Message"]) == ("InvalidAction", "The action ListQueues is not valid for this endpoint.")


def test_tag_queue_takes_flattened_tags(server, region, sqs):
    # botocore 1.29's Query model: TagQueue's Tags is the flattened map "Tag" (Tag.N.Key,
    # Tag.N.Value)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    status, _, body = query_post(server, region, {"Action": "TagQueue", "QueueUrl": url, "Tag.1.Key": "team",
                                                  "Tag.1.Value": "a", "Tag.2.Key": "env", "Tag.2.Value": ""})
    assert status == 200, body
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"team": "a", "env": ""}
    status, _, body = query_post(server, region, {"Action": "ListQueueTags", "QueueUrl": url})
    assert b"<Tag><Key>team</Key><Value>a</Value></Tag>" in body


# --- JSON --------------------------------------------------------------------------------------

def test_json_at_a_queue_url(server, region, sqs):
    # LocalStack test_send_message_via_queue_url_with_json_protocol (as the PHP SDK sends it)
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    status, headers, body = json_post(server, region, "ReceiveMessage", {"QueueUrl": url}, path_of(url))
    assert (status, headers["content-type"], json.loads(body)) == (200, "application/x-amz-json-1.0", {})


def test_json_error_carries_the_query_code(server, region):
    # LocalStack snapshot test_non_existent_queue: Error.Code AWS.SimpleQueueService.NonExistentQueue,
    # QueryErrorCode (the __type) QueueDoesNotExist; botocore's awsQueryCompatible reads the former
    # from X-Amzn-Query-Error
    status, headers, body = json_post(server, region, "GetQueueUrl", {"QueueName": "missing"})
    assert status == 400
    assert json.loads(body) == {"__type": "com.amazonaws.sqs#QueueDoesNotExist",
                                "message": "The specified queue does not exist."}
    assert headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"


@pytest.mark.parametrize("protocol", [JSON, QUERY])
def test_missing_required_member(server, region, protocol):
    # botocore model: SendMessage requires MessageBody. Wording and code: LocalStack snapshot
    # test_send_empty_message (MissingParameter, "The request must contain the parameter MessageBody.")
    url = make_client(server, JSON, region).create_queue(QueueName="q")["QueueUrl"]
    if protocol == JSON:
        status, headers, body = json_post(server, region, "SendMessage", {"QueueUrl": url})
        assert (status, headers["x-amzn-query-error"]) == (400, "MissingParameter;Sender")
        assert json.loads(body)["message"] == "The request must contain the parameter MessageBody."
    else:
        status, _, body = query_post(server, region, {"Action": "SendMessage", "QueueUrl": url})
        assert status == 400
        assert xml_error(body) == ("Sender", "MissingParameter", "The request must contain the parameter MessageBody.")


# --- an unmodified botocore 1.29 ---------------------------------------------------------------

SCRIPT = r'''
import json, sys
import botocore, botocore.session
from botocore.exceptions import ClientError
endpoint, region = sys.argv[1], sys.argv[2]
c = botocore.session.get_session().create_client("sqs", endpoint_url=endpoint, region_name=region,
                                                 aws_access_key_id="x", aws_secret_access_key="x")
out = {"version": botocore.__version__, "protocol": c.meta.service_model.protocol}
url = c.create_queue(QueueName="old")["QueueUrl"]
c.tag_queue(QueueUrl=url, Tags={"team": "a"})
out["tags"] = c.list_queue_tags(QueueUrl=url)["Tags"]
fifo = c.create_queue(QueueName="old.fifo", Attributes={"FifoQueue": "true", "DelaySeconds": "1"})["QueueUrl"]
c.send_message(QueueUrl=fifo, MessageBody="m", MessageGroupId="g", MessageDeduplicationId="d", DelaySeconds=0)
out["delayed"] = c.get_queue_attributes(QueueUrl=fifo, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
out["batch"] = sorted(c.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}]))
try:
    c.get_queue_url(QueueName="missing")
except ClientError as e:
    out["error"] = e.response["Error"]
print(json.dumps(out))
'''


def test_unmodified_botocore_1_29(server, region, old_botocore, tmp_path):
    # The Query protocol as the last Query botocore speaks it
    script = tmp_path / "old_client.py"
    script.write_text(SCRIPT)
    r = run_with(old_botocore, [sys.executable, str(script), server.url, region])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["version"], out["protocol"]) == ("1.29.165", "query")
    assert out["tags"] == {"team": "a"}
    assert out["delayed"] == {"ApproximateNumberOfMessagesDelayed": "1"}
    assert out["batch"] == ["ResponseMetadata", "Successful"]
    assert out["error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert out["error"]["Message"] == "The specified queue does not exist for this wsdl version."
