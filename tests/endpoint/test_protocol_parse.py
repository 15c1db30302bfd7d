"""Both protocols parse every action into the same typed command.

botocore's own serializers produce the requests: its JSON serializer is what boto3 sends today,
and its Query serializer over the vendored model is what older SDKs send.
"""

import dataclasses
from urllib.parse import urlencode

import botocore.serialize
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import commands as c
from storage.clock import ManualClock
from storage.commands import MessageAttributeValue, Namespace, QueueKey
from storage.errors import SqsError

from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint, EndpointConfig
from elasticmq_py.protocol import addressing, json_proto, query_proto, requests
from elasticmq_py.protocol.model import sqs_model
from elasticmq_py.protocol.wire import RequestContext

from tests.endpoint.samples import ARN, SAMPLES

MODEL = sqs_model()
JSON = json_proto.JsonReader(MODEL)
CTX = RequestContext(Namespace("eu-west-1", "000000000000"), "http://localhost:9324")
Q1 = QueueKey("eu-west-1", "000000000000", "q1")


def via_json(action, params, json_model):
    req = botocore.serialize.create_serializer("json").serialize_to_request(
        params, json_model.operation_model(action))
    assert req["headers"]["X-Amz-Target"] == f"AmazonSQS.{action}"
    assert JSON.action_of(req["headers"]["X-Amz-Target"]) == action
    tree = JSON.parse(action, req["body"])
    return requests.to_command(action, tree, CTX)


def via_query(action, params, query_model):
    req = botocore.serialize.create_serializer("query").serialize_to_request(
        params, query_model.operation_model(action))
    form = query_proto.parse_form(urlencode(req["body"]).encode())
    assert query_proto.action_of(form, MODEL) == action
    return requests.to_command(action, query_proto.parse(action, form, MODEL), CTX)


def test_every_action_has_a_sample_and_a_builder():
    assert set(SAMPLES) == set(MODEL.operations) == set(requests.BUILDERS)
    assert len(SAMPLES) == 23


@pytest.mark.parametrize("action", sorted(SAMPLES))
def test_json_and_query_agree(action, json_model, query_model):
    a = via_json(action, SAMPLES[action], json_model)
    b = via_query(action, SAMPLES[action], query_model)
    if action == "ReceiveMessage":
        # given AttributeNames too, Query drops MessageSystemAttributeNames, as AWS answers
        # (LocalStack's AWS-validated test_message_system_attribute_names_with_attribute_names)
        assert a.system_attribute_names and not b.system_attribute_names
        a = msgspec.structs.replace(a, system_attribute_names=())
    assert a == b
    assert type(a).__name__ == action


def test_send_message_fields(json_model):
    cmd = via_json("SendMessage", SAMPLES["SendMessage"], json_model)
    assert cmd == c.SendMessage(
        queue=QueueKey("eu-west-1", "000000000000", "q1.fifo"),
        body="hello & <world>",
        delay_seconds=0,
        message_attributes={
            "s": MessageAttributeValue("String", string_value="v\u00e9\r\n"),
            "n": MessageAttributeValue("Number", string_value="1.5"),
            "b": MessageAttributeValue("Binary", binary_value=b"\x00\x01\xff"),
        },
        system_attributes={"AWSTraceHeader": MessageAttributeValue("String", string_value="Root=1")},
        deduplication_id="d1",
        group_id="g1",
    )


def test_batch_and_receive_fields(query_model):
    cmd = via_query("SendMessageBatch", SAMPLES["SendMessageBatch"], query_model)
    assert cmd.queue == Q1
    assert [e.id for e in cmd.entries] == ["a", "b"]
    assert cmd.entries[0].delay_seconds == 2 and cmd.entries[1].delay_seconds is None
    assert cmd.entries[0].message_attributes["b"].binary_value == b"\x00\x01\xff"
    assert cmd.entries[1].message_attributes is None
    r = via_query("ReceiveMessage", SAMPLES["ReceiveMessage"], query_model)
    assert r == c.ReceiveMessage(Q1, 10, 30, 0, ("All",), (), ("All",), "att")


def test_queue_level_fields(json_model):
    assert via_json("CreateQueue", SAMPLES["CreateQueue"], json_model) == c.CreateQueue(
        Namespace("eu-west-1", "000000000000"), "q1",
        {"VisibilityTimeout": "30", "DelaySeconds": "1"}, {"team": "a", "env": "b"})
    assert via_json("ListMessageMoveTasks", SAMPLES["ListMessageMoveTasks"], json_model) == \
        c.ListMessageMoveTasks(Namespace("eu-west-1", "000000000000"), ARN, 10)
    assert via_json("UntagQueue", SAMPLES["UntagQueue"], json_model) == c.UntagQueue(Q1, ("k1", "k2"))


@pytest.mark.parametrize("url,expected", [
    ("http://localhost:9324/000000000000/q1", Q1),
    ("https://sqs.eu-west-1.amazonaws.com/123456789012/q1", QueueKey("eu-west-1", "123456789012", "q1")),
    ("http://elasticmq:9324/queue/q1", Q1),
    ("/000000000000/q1", Q1),
    ("q1", Q1),
])
def test_queue_url_forms(url, expected):
    tree = JSON.parse("PurgeQueue", b'{"QueueUrl": "%s"}' % url.encode())
    assert requests.to_command("PurgeQueue", tree, CTX) == c.PurgeQueue(expected)


@pytest.mark.parametrize("url,code", [
    ("a b", "InvalidAddress"),
    ("a/b/c", "InvalidAddress"),
    ("http://[::1/q", "InvalidAddress"),
    # a URL that names no queue: a queue that does not exist (as moto's tests have it)
    ("http://whatever-incorrect-queue-address", "AWS.SimpleQueueService.NonExistentQueue"),
    ("http://localhost:9324/", "AWS.SimpleQueueService.NonExistentQueue"),
    ("http://h/a/b/c", "AWS.SimpleQueueService.NonExistentQueue"),
    ("http://h/%%%/q", "AWS.SimpleQueueService.NonExistentQueue"),
])
def test_bad_queue_urls(url, code):
    tree = JSON.parse("PurgeQueue", ('{"QueueUrl": "%s"}' % url).encode())
    with pytest.raises(SqsError) as e:
        requests.to_command("PurgeQueue", tree, CTX)
    assert e.value.code == code


def test_query_queue_from_path():
    form = query_proto.parse_form(b"Action=PurgeQueue")
    for path in ("/000000000000/q1", "/queue/q1"):
        tree = query_proto.parse("PurgeQueue", form, MODEL, path)
        assert requests.to_command("PurgeQueue", tree, CTX) == c.PurgeQueue(Q1)
    with pytest.raises(SqsError) as e:
        query_proto.parse("PurgeQueue", form, MODEL, "/")
    assert e.value.code == "MissingParameter"


def test_query_get_and_empty_list():
    form = query_proto.parse_form(b"Action=ReceiveMessage&QueueUrl=q1&MessageAttributeNames=")
    cmd = requests.to_command("ReceiveMessage", query_proto.parse("ReceiveMessage", form, MODEL), CTX)
    assert cmd.message_attribute_names == ()


# --- errors while parsing -------------------------------------------------------------------------

def json_error(action, body: bytes) -> SqsError:
    with pytest.raises(SqsError) as e:
        JSON.parse(action, body)
    return e.value


def query_error(body: bytes) -> SqsError:
    with pytest.raises(SqsError) as e:
        form = query_proto.parse_form(body)
        action = query_proto.action_of(form, MODEL)
        query_proto.parse(action, form, MODEL)
    return e.value


@pytest.mark.parametrize("body", [b"{", b"[]", b"\"x\"", b"\xff\xfe", b"{\"a\":" * 5000, b"nul"])
def test_malformed_json(body):
    assert json_error("SendMessage", body).kind.shape == "SerializationException"


@pytest.mark.parametrize("body,param", [
    (b'{"QueueUrl": 5, "MessageBody": "x"}', "QueueUrl"),
    (b'{"QueueUrl": "q", "MessageBody": "x", "DelaySeconds": "5"}', "DelaySeconds"),
    (b'{"QueueUrl": "q", "MessageBody": "x", "DelaySeconds": 1.5}', "DelaySeconds"),
    (b'{"QueueUrl": "q", "MessageBody": "x", "DelaySeconds": true}', "DelaySeconds"),
    (b'{"QueueUrl": "q", "MessageBody": "x", "DelaySeconds": 99999999999}', "DelaySeconds"),
    (b'{"QueueUrl": "q", "MessageBody": "x", "MessageAttributes": []}', "MessageAttributes"),
    (b'{"QueueUrl": "q", "MessageBody": "x", "MessageAttributes": {"a": {"DataType": "Binary", '
     b'"BinaryValue": "!!"}}}', "MessageAttributes.a.BinaryValue"),
])
def test_json_wrong_types(body, param):
    err = json_error("SendMessage", body)
    assert err.code == "InvalidParameterValue"
    assert f"parameter {param} " in err.message


def test_json_missing_required():
    err = json_error("SendMessage", b'{"QueueUrl": "q"}')
    assert err.code == "MissingParameter" and "MessageBody" in err.message
    err = json_error("SendMessageBatch", b'{"QueueUrl": "q", "Entries": [{"Id": "a"}]}')
    assert err.code == "MissingParameter" and "MessageBody" in err.message
    # null means absent
    assert json_error("SendMessage", b'{"QueueUrl": "q", "MessageBody": null}').code == "MissingParameter"


def test_json_unknown_members_ignored():
    tree = JSON.parse("PurgeQueue", b'{"QueueUrl": "q", "Bogus": [1, {"x": 2}]}')
    assert tree == {"QueueUrl": "q"}


def test_lone_surrogates_refused():
    err = json_error("SendMessage", b'{"QueueUrl": "q", "MessageBody": "a\\ud800b"}')
    assert err.code == "InvalidMessageContents"
    err = json_error("PurgeQueue", b'{"QueueUrl": "q\\udfff"}')
    assert err.code == "InvalidParameterValue"
    assert query_error(b"Action=SendMessage&QueueUrl=q&MessageBody=%ff%fe").code == "InvalidMessageContents"
    assert query_error(b"Action=GetQueueUrl&QueueName=%c3").code == "InvalidParameterValue"


def test_unknown_actions():
    with pytest.raises(SqsError) as e:
        JSON.action_of("AmazonSQS.Frobnicate")
    assert e.value.code == "InvalidAction" and e.value.status == 400
    with pytest.raises(SqsError) as e:
        JSON.action_of("DynamoDB_20120810.SendMessage")
    assert e.value.code == "InvalidAction"
    assert query_error(b"Action=Frobnicate").code == "InvalidAction"
    assert query_error(b"QueueUrl=q").code == "UnknownOperationException"


@pytest.mark.parametrize("body,code", [
    (b"Action=SendMessage&QueueUrl=q&MessageBody=x&DelaySeconds=abc", "InvalidParameterValue"),
    (b"Action=SendMessage&QueueUrl=q&MessageBody=x&DelaySeconds=1e3", "InvalidParameterValue"),
    (b"Action=SendMessage&QueueUrl=q", "MissingParameter"),
    (b"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Value.DataType=String",
     "MissingParameter"),
    (b"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Name=a", "MissingParameter"),
    (b"Action=SendMessage&QueueUrl=q&MessageBody=x&MessageAttribute.1.Name=a"
     b"&MessageAttribute.1.Value.DataType=Binary&MessageAttribute.1.Value.BinaryValue=%%%", "InvalidParameterValue"),
    (b"Action=SendMessageBatch&QueueUrl=q&SendMessageBatchRequestEntry.1.Id=a", "MissingParameter"),
    (b"Action=SendMessage&" + b"&".join(b"k%d=v" % i for i in range(20_000)), "MalformedQueryString"),
])
def test_query_bad_input(body, code):
    assert query_error(body).code == code


def test_query_message_attribute_order_and_gaps():
    body = (b"Action=SendMessage&QueueUrl=q&MessageBody=x"
            b"&MessageAttribute.3.Name=c&MessageAttribute.3.Value.DataType=String&MessageAttribute.3.Value.StringValue=3"
            b"&MessageAttribute.1.Name=a&MessageAttribute.1.Value.DataType=String&MessageAttribute.1.Value.StringValue=1")
    form = query_proto.parse_form(body)
    cmd = requests.to_command("SendMessage", query_proto.parse("SendMessage", form, MODEL), CTX)
    assert list(cmd.message_attributes) == ["a", "c"]


def test_query_tag_queue_reads_the_flattened_tags():
    # TagQueue in Query is Tag.N.Key / Tag.N.Value (AWS API reference, TagQueue; botocore 1.29's
    # Query model names the TagMap "Tag").
    form = query_proto.parse_form(b"Action=TagQueue&QueueUrl=q1&Tag.1.Key=team&Tag.1.Value=a&Tag.2.Key=env&Tag.2.Value=")
    tree = query_proto.parse("TagQueue", form, MODEL)
    assert requests.to_command("TagQueue", tree, CTX) == c.TagQueue(Q1, {"team": "a", "env": ""})


@pytest.mark.parametrize("action,path,code", [
    ("CreateQueue", "/000000000000/q1", "InvalidAction"),
    ("ListQueues", "/queue/q1", "InvalidAction"),
])
def test_query_queueless_actions_at_a_queue_url(action, path, code):
    # LocalStack's AWS-validated test_get_create_queue_fails / test_get_list_queues_fails.
    form = query_proto.parse_form(f"Action={action}&QueueName=x".encode())
    with pytest.raises(SqsError) as e:
        query_proto.action_of(form, MODEL, path)
    assert (e.value.code, e.value.message) == (code, f"The action {action} is not valid for this endpoint.")
    assert query_proto.action_of(form, MODEL, "/") == action


def test_trace_header_becomes_the_aws_trace_header_system_attribute():
    # LocalStack's AWS-validated test_aws_trace_header_propagation: X-Amzn-Trace-Id on SendMessage.
    header = "Root=1-3152b799-8954dae64eda91bc9a23a7e8;Parent=7fa8c0f79203be72;Sampled=1"
    ctx = dataclasses.replace(CTX, trace_header=header)
    tree = JSON.parse("SendMessage", b'{"QueueUrl": "q1", "MessageBody": "x"}')
    cmd = requests.to_command("SendMessage", tree, ctx)
    assert cmd.system_attributes == {"AWSTraceHeader": MessageAttributeValue("String", string_value=header)}
    # one sent as a system attribute wins
    tree = JSON.parse("SendMessage", b'{"QueueUrl": "q1", "MessageBody": "x", "MessageSystemAttributes": '
                                     b'{"AWSTraceHeader": {"DataType": "String", "StringValue": "Root=mine"}}}')
    cmd = requests.to_command("SendMessage", tree, ctx)
    assert cmd.system_attributes["AWSTraceHeader"].string_value == "Root=mine"
    assert requests.to_command("SendMessage", tree, CTX).system_attributes["AWSTraceHeader"].string_value == "Root=mine"


_AUTH_PIECES = st.sampled_from([
    "AWS4-HMAC-SHA256 ", "Credential=", "AKID", "/", "20240101", "2024010", "us-east-1", "eu-west-2",
    "sqs", "aws4_request", ",", ", ", " ", "SignedHeaders=host", "Signature=00", "x" * 70, "-", "\t",
    # whole scopes, and scopes broken where the pattern is strict
    "Credential=AKID/20240101/us-east-1/", "Credential=AKID/20240101/eu-west-2/sqs",
    "Credential=AK,ID/20240101/us-east-1/", "Credential=AKID/2024010/ap-south-1/",
    "Credential= AKID/20240101/us-west-2/", "Credential=/20240101/sa-east-1/",
])


@given(st.lists(_AUTH_PIECES, max_size=14).map("".join))
@settings(max_examples=500, deadline=None)
def test_region_is_the_credential_scopes(auth):
    # the cached reading answers what a plain search of the header answers, header after header
    m = addressing._SCOPE.search(auth)
    expected = m.group(1) if m else "default"
    assert addressing.region_from_headers({"authorization": auth}, None, "default") == expected
    assert addressing.region_from_headers({"authorization": auth}, None, "default") == expected


@given(st.lists(st.tuples(st.lists(_AUTH_PIECES, max_size=10).map("".join),
                          st.sampled_from([None, "localhost:9324", "sqs.local:4566"]),
                          st.sampled_from([None, "AKID/20240101/ap-east-1/sqs/aws4_request", "AKID/x"]),
                          st.sampled_from([None, "Root=1-5759e988-bd862e3fe1be46a994272793"])),
                min_size=1, max_size=8))
@settings(max_examples=300, deadline=None)
def test_the_endpoint_context_is_what_the_headers_say(requests_seen):
    # The endpoint keeps contexts per credential scope (the Authorization header up to its
    # first ","): request after request, hit or miss, it answers what the headers alone say.
    endpoint = Endpoint(LocalBackend(ManualClock()), EndpointConfig(account_id="123456789012", region="default"))
    for auth, host, presigned, trace in requests_seen:
        headers = {k: v for k, v in (("authorization", auth), ("host", host), ("x-amzn-trace-id", trace))
                   if v is not None}
        form = {"X-Amz-Credential": presigned} if presigned is not None else None
        region = addressing.region_from_headers(headers, form, "default")
        expected = RequestContext(Namespace(region, "123456789012"),
                                  addressing.base_url(headers, EndpointConfig().fallback_host), trace)
        assert endpoint._context(headers, form) == expected
