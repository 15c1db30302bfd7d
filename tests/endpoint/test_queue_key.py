"""``queue_key_of``: the queue a request names, read without the full parse, never disagreeing
with it. Every SQS action in both protocols (botocore's own serializers), the forms older SDKs
and raw clients send, and what would fool a text search. The conformance corpus's requests are
checked the same way when each corpus module's server stops (tests/conformance/conftest.py)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import botocore.serialize
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.commands import QueueKey
from storage.keys import parse_arn, task_handle

from elasticmq_py.endpoint import EndpointConfig
from elasticmq_py.protocol.queue_key import QUEUE_URL_ACTIONS, SOURCE_ACTIONS, queue_key_of
from elasticmq_py.protocol.wire import HttpRequest

from tests.endpoint.queue_keys import ERROR, disagreements, full_parse, parser
from tests.endpoint.samples import SAMPLES

REGION, ACCOUNT = "us-east-1", "000000000000"
Q1 = QueueKey(REGION, ACCOUNT, "q1")
URL = "http://localhost:9324/000000000000/q1"
ARN_Q1 = "arn:aws:sqs:us-east-1:000000000000:q1"


def _auth(region: str = REGION) -> str:
    return (f"AWS4-HMAC-SHA256 Credential=AKID/20240101/{region}/sqs/aws4_request, "
            f"SignedHeaders=host, Signature=0")


def json_req(action: str, body: bytes | dict, method: str = "POST", **headers: str) -> HttpRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return HttpRequest(method, "/", b"", {"x-amz-target": f"AmazonSQS.{action}", "authorization": _auth(),
                                          "content-type": "application/x-amz-json-1.0", "host": "localhost:9324",
                                          **headers}, raw)


def query_req(form: dict | bytes, path: str = "/", method: str = "POST", query: bytes = b"",
              **headers: str) -> HttpRequest:
    raw = form if isinstance(form, bytes) else urlencode(form).encode()
    return HttpRequest(method, path, query, {"authorization": _auth(), "host": "localhost:9324",
                                             "content-type": "application/x-www-form-urlencoded", **headers}, raw)


def key(req: HttpRequest, account: str | None = ACCOUNT) -> QueueKey | None:
    return queue_key_of(req, REGION, account)


def agrees(*reqs: HttpRequest) -> None:
    wrong, _ = disagreements(list(reqs))
    assert not wrong, wrong


@pytest.mark.parametrize("action", sorted(SAMPLES))
def test_every_action_in_both_protocols(action, json_model, query_model):
    j = botocore.serialize.create_serializer("json").serialize_to_request(
        SAMPLES[action], json_model.operation_model(action))
    q = botocore.serialize.create_serializer("query").serialize_to_request(
        SAMPLES[action], query_model.operation_model(action))
    reqs = [json_req(action, j["body"]), query_req(q["body"])]
    agrees(*reqs)
    for req in reqs:
        expected = QueueKey(REGION, ACCOUNT, SAMPLES[action]["QueueUrl"].rsplit("/", 1)[1]) \
            if action in QUEUE_URL_ACTIONS else parse_arn(SAMPLES[action].get("SourceArn"))
        assert key(req) == expected


def test_the_actions_that_name_no_single_queue():
    # a name still to be placed, a name and owner to look up, or none
    assert {a for a in SAMPLES if a not in QUEUE_URL_ACTIONS | SOURCE_ACTIONS} == {
        "CreateQueue", "GetQueueUrl", "ListQueues"}
    # a QueueUrl that the action's input has no member for names nothing
    for action in ("ListQueues", "CreateQueue", "GetQueueUrl"):
        req = json_req(action, {"QueueUrl": URL, "QueueName": "q1"})
        assert key(req) is None
        agrees(req)
        req = query_req({"Action": action, "QueueUrl": URL, "QueueName": "q1"})
        assert key(req) is None
        agrees(req)


def test_a_move_task_action_names_its_source_queue():
    # by its ARN, or through the task's handle, which names it (storage/keys.py): the region and
    # account are the ARN's, whatever the request's scope or the signer's
    assert SOURCE_ACTIONS == {"StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask"}
    arn = "arn:aws:sqs:eu-west-3:111122223333:dlq"
    dlq = QueueKey("eu-west-3", "111122223333", "dlq")
    handle = task_handle("8a3b7c2e-1f0d-4e5a-9b6c-7d8e9f0a1b2c", arn)
    reqs = {
        "start": (json_req("StartMessageMoveTask", {"SourceArn": arn, "DestinationArn": ARN_Q1}), dlq),
        "list": (json_req("ListMessageMoveTasks", {"SourceArn": arn, "MaxResults": 2}), dlq),
        "cancel": (json_req("CancelMessageMoveTask", {"TaskHandle": handle}), dlq),
        "query start": (query_req({"Action": "StartMessageMoveTask", "SourceArn": arn}), dlq),
        "query list": (query_req(b"", method="GET", query=urlencode({"Action": "ListMessageMoveTasks",
                                                                     "SourceArn": arn}).encode()), dlq),
        "query cancel": (query_req({"Action": "CancelMessageMoveTask", "TaskHandle": handle}), dlq),
        "repeated": (json_req("ListMessageMoveTasks", b'{"SourceArn": "x", "SourceArn": "' + arn.encode() + b'"}'),
                     dlq),
        "escaped name": (json_req("StartMessageMoveTask", b'{"Source\\u0041rn": "' + arn.encode() + b'"}'), dlq),
        "destination only": (json_req("StartMessageMoveTask", {"DestinationArn": arn}), None),
        "not an arn": (json_req("StartMessageMoveTask", {"SourceArn": "dlq"}), None),
        "not a string": (json_req("ListMessageMoveTasks", {"SourceArn": 5}), None),
        "not a handle": (json_req("CancelMessageMoveTask", {"TaskHandle": "foobared"}), None),
        "a handle of no arn": (json_req("CancelMessageMoveTask", {"TaskHandle": task_handle("t", "dlq")}), None),
        "a handle without its id": (query_req({"Action": "CancelMessageMoveTask",
                                               "TaskHandle": task_handle(None, arn)}), dlq),
        "empty": (query_req({"Action": "ListMessageMoveTasks", "SourceArn": ""}), None),
        "an arn where a url goes": (json_req("SendMessage", {"SourceArn": arn, "QueueUrl": URL, "MessageBody": "m"}),
                                    Q1),
        "get": (json_req("ListMessageMoveTasks", {"SourceArn": arn}, method="GET"), None),
    }
    for name, (req, expected) in reqs.items():
        assert key(req) == expected, name
        assert key(req, account=None) == expected, name
    agrees(*(req for req, _ in reqs.values()))


def test_the_region_is_the_signing_scope_or_the_endpoints():
    req = json_req("SendMessage", {"QueueUrl": URL, "MessageBody": "m"}, authorization=_auth("eu-west-3"))
    assert key(req) == QueueKey("eu-west-3", ACCOUNT, "q1")
    unsigned = HttpRequest("POST", "/", b"", {"x-amz-target": "AmazonSQS.SendMessage"},
                           json.dumps({"QueueUrl": URL, "MessageBody": "m"}).encode())
    assert key(unsigned) == Q1
    # a presigned Query request carries its scope in the URL
    presigned = HttpRequest("GET", "/", urlencode({
        "Action": "SendMessage", "QueueUrl": URL, "MessageBody": "m",
        "X-Amz-Credential": "AKID/20240101/ap-south-2/sqs/aws4_request"}).encode(), {}, b"")
    assert key(presigned) == QueueKey("ap-south-2", ACCOUNT, "q1")
    agrees(req, unsigned, presigned)


def test_query_forms_of_older_sdks_and_raw_clients():
    reqs = {
        # posted to the queue URL itself, no QueueUrl field
        "path": (query_req({"Action": "SendMessage", "MessageBody": "m"}, path="/000000000000/q1"), Q1),
        "queue path": (query_req({"Action": "SendMessage", "MessageBody": "m"}, path="/queue/q1"), Q1),
        # the field wins over the path, as in query_proto.parse
        "both": (query_req({"Action": "SendMessage", "QueueUrl": URL.replace("q1", "q2"), "MessageBody": "m"},
                           path="/000000000000/q1"), QueueKey(REGION, ACCOUNT, "q2")),
        # GET: the form in the URL
        "get": (query_req(b"", method="GET",
                          query=urlencode({"Action": "PurgeQueue", "QueueUrl": URL}).encode()), Q1),
        # a POST's URL query and body are one form, the body last
        "merged": (query_req({"QueueUrl": URL, "MessageBody": "m"},
                             query=b"Action=SendMessage&QueueUrl=other"), Q1),
        # a percent-encoded field name is the same field
        "encoded name": (query_req(b"Action=SendMessage&Queue%55rl=" + URL.encode() + b"&MessageBody=m"), Q1),
        # the last of a repeated field
        "repeated": (query_req(b"Action=SendMessage&QueueUrl=x&QueueUrl=" + URL.encode() + b"&MessageBody=m"), Q1),
        "bare name": (query_req({"Action": "SendMessage", "QueueUrl": "q1", "MessageBody": "m"}), Q1),
        "other account": (query_req({"Action": "SendMessage", "MessageBody": "m",
                                     "QueueUrl": "http://h/111122223333/q1"}), QueueKey(REGION, "111122223333", "q1")),
        "non-ascii body": (query_req({"Action": "SendMessage", "QueueUrl": URL, "MessageBody": "h\u00e9"}), Q1),
        "no action": (query_req({"QueueUrl": URL}), None),
        "unknown action": (query_req({"Action": "Nope", "QueueUrl": URL}), None),
        "admin path": (HttpRequest("GET", "/health", b"", {}, b""), None),
        "not a queue url": (query_req({"Action": "SendMessage", "QueueUrl": "a b", "MessageBody": "m"}), None),
        "no queue in the url": (query_req({"Action": "SendMessage", "QueueUrl": "http://h/", "MessageBody": "m"}),
                                None),
        "empty": (query_req({"Action": "SendMessage", "QueueUrl": "", "MessageBody": "m"}), None),
        "delete method": (query_req({"Action": "SendMessage", "QueueUrl": URL}, method="DELETE"), None),
    }
    for name, (req, expected) in reqs.items():
        assert key(req) == expected, name
    agrees(*(req for req, _ in reqs.values()))


def test_json_bodies_that_would_fool_a_text_search():
    reqs = {
        "escaped name": (json_req("SendMessage", b'{"Queue\\u0055rl": "' + URL.encode() + b'", "MessageBody": "m"}'), Q1),
        "in a body": (json_req("SendMessage", {"MessageBody": '"QueueUrl": "http://h/1/x"', "QueueUrl": URL}), Q1),
        "nested": (json_req("SetQueueAttributes", {"Attributes": {"QueueUrl": "http://h/1/x"}, "QueueUrl": URL}), Q1),
        "repeated": (json_req("SendMessage", b'{"QueueUrl": "x", "QueueUrl": "' + URL.encode() + b'", "MessageBody": "m"}'),
                     Q1),
        "not a string": (json_req("SendMessage", {"QueueUrl": 1, "MessageBody": "m"}), None),
        "null": (json_req("SendMessage", {"QueueUrl": None, "MessageBody": "m"}), None),
        "missing": (json_req("SendMessage", {"MessageBody": "m"}), None),
        "not an object": (json_req("SendMessage", b"[1]"), None),
        "not json": (json_req("SendMessage", b"QueueUrl=x"), None),
        "get": (json_req("SendMessage", {"QueueUrl": URL, "MessageBody": "m"}, method="GET"), None),
        "unknown target": (json_req("Nope", {"QueueUrl": URL}), None),
    }
    for name, (req, expected) in reqs.items():
        assert key(req) == expected, name
    agrees(*(req for req, _ in reqs.values()))


def test_an_account_the_signer_decides_is_not_guessed():
    # with signatures verified, a URL naming no account means the signer's: left to the full parse
    for url in ("q1", "http://localhost:9324/queue/q1"):
        assert key(query_req({"Action": "SendMessage", "QueueUrl": url, "MessageBody": "m"}), account=None) is None
    assert key(query_req({"Action": "SendMessage", "QueueUrl": URL, "MessageBody": "m"}), account=None) == Q1


def test_the_full_parse_helper_sees_errors_and_commands():
    endpoint = parser()
    assert full_parse(endpoint, json_req("SendMessage", {"QueueUrl": URL, "MessageBody": "m"})) == Q1
    assert full_parse(endpoint, json_req("ListQueues", {})) is None
    assert full_parse(endpoint, json_req("SendMessage", {"QueueUrl": URL})) == ERROR   # no MessageBody


_FIELDS = st.sampled_from(["Action", "QueueUrl", "Queue%55rl", "MessageBody", "X-Amz-Credential", "Version",
                           "SourceArn", "TaskHandle"])
_VALUES = st.sampled_from(["SendMessage", "PurgeQueue", "ListQueues", "CreateQueue", URL, "q1", "", "a b",
                           "http://h/111122223333/q%31", "/queue/q1", "AKID/20240101/eu-north-1/sqs/aws4_request",
                           "m", "%ZZ", "http://[::1", "StartMessageMoveTask", "CancelMessageMoveTask", ARN_Q1,
                           task_handle("t", ARN_Q1), task_handle("t", "q1")])


@given(st.lists(st.tuples(_FIELDS, _VALUES), max_size=6), st.sampled_from(["/", "/000000000000/q1", "/queue/q2", "/a/b/c"]),
       st.sampled_from(["POST", "GET"]))
@settings(max_examples=300, deadline=None)
def test_random_query_forms_agree(fields, path, method):
    raw = "&".join(f"{k}={v}" for k, v in fields).encode()
    agrees(query_req(raw, path=path, method=method) if method == "POST" else query_req(b"", path=path, method=method,
                                                                                       query=raw))


@given(st.dictionaries(st.sampled_from(["QueueUrl", "MessageBody", "Attributes", "QueueName", "SourceArn",
                                        "TaskHandle"]),
                       st.one_of(_VALUES, st.integers(), st.none(), st.just({"QueueUrl": URL}))),
       st.sampled_from(["SendMessage", "GetQueueAttributes", "CreateQueue", "ListQueues", "DeleteQueue",
                        "StartMessageMoveTask", "ListMessageMoveTasks", "CancelMessageMoveTask"]))
@settings(max_examples=300, deadline=None)
def test_random_json_bodies_agree(body, action):
    agrees(json_req(action, body))


def test_the_endpoint_defaults_are_what_it_is_given():
    config = EndpointConfig(account_id="123456789012", region="sa-east-1")
    req = HttpRequest("POST", "/", b"", {"x-amz-target": "AmazonSQS.PurgeQueue"}, b'{"QueueUrl": "q1"}')
    assert queue_key_of(req, config.region, config.account_id) == QueueKey("sa-east-1", "123456789012", "q1")
    wrong, keyed = disagreements([req], config)
    assert not wrong and keyed == 1
