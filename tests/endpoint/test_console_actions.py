"""The console's actions as SQS requests (elasticmq_py/dashboard/console/actions.py): the
parameters a form becomes, and answers byte-for-byte SQS's own for the same request, errors
included (the endpoint's JSON protocol is the reference: the console adds no SQS behaviour)."""

from __future__ import annotations

import json

import pytest

from storage import ManualClock
from storage.commands import CreateQueue, Namespace, QueueKey

from elasticmq_py.backend import LocalBackend
from elasticmq_py.dashboard.console import actions
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.reply import Reply

NS = Namespace()
ORDERS = NS.key("orders")
DLQ = NS.key("orders-dlq")


def test_the_queue_comes_from_the_console_and_a_peek_hides_nothing():
    # A peek is what AWS's console does: "When messages are retrieved via the Amazon SQS console,
    # they are immediately made visible again for re-retrieval" (SQS Developer Guide, "Receiving
    # and deleting a message in Amazon SQS", docs.aws.amazon.com/AWSSimpleQueueService/latest/
    # SQSDeveloperGuide/step-receive-delete-message.html).
    assert actions.sqs_params("SendMessage", ORDERS, "http://h:1", {"MessageBody": "x", "QueueUrl": "other"}) == {
        "MessageBody": "x", "QueueUrl": "http://h:1/000000000000/orders"}
    assert actions.sqs_params("ReceiveMessage", ORDERS, "http://h:1", {"MaxNumberOfMessages": 5, "VisibilityTimeout": 900,
                                                                       "WaitTimeSeconds": 20}) == {
        "MaxNumberOfMessages": 5, "VisibilityTimeout": 0, "WaitTimeSeconds": 0, "AttributeNames": ["All"],
        "MessageAttributeNames": ["All"], "QueueUrl": "http://h:1/000000000000/orders"}
    assert actions.sqs_params("StartMessageMoveTask", DLQ, "http://h:1", {"SourceArn": "x"}) == {"SourceArn": DLQ.arn}
    assert actions.sqs_params("CancelMessageMoveTask", DLQ, "http://h:1", {"TaskHandle": "t"}) == {"TaskHandle": "t"}


def _endpoint() -> Endpoint:
    e = Endpoint(LocalBackend(ManualClock(1_000_000)))
    e.backend.execute_now(CreateQueue(NS, "orders-dlq", {}, {}))
    e.backend.execute_now(CreateQueue(NS, "orders", {"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": DLQ.arn, "maxReceiveCount": 1})}, {}))
    return e


CASES = [
    ("SendMessage", ORDERS, {"MessageBody": ""}),
    ("SendMessage", ORDERS, {"MessageBody": "x", "DelaySeconds": 901}),
    ("SendMessage", ORDERS, {"MessageBody": "x", "MessageAttributes": {"a": {"DataType": "Strin", "StringValue": "v"}}}),
    ("SendMessage", ORDERS, {"MessageBody": "x", "MessageAttributes": {"a": {"DataType": "Number", "StringValue": "v"}}}),
    ("SendMessage", ORDERS, {"MessageBody": 5}),
    ("SendMessage", QueueKey("us-east-1", "000000000000", "nope"), {"MessageBody": "x"}),
    ("ReceiveMessage", ORDERS, {"MaxNumberOfMessages": 11}),
    ("PurgeQueue", QueueKey("eu-west-1", "000000000000", "orders"), {}),
    ("StartMessageMoveTask", ORDERS, {}),                                        # not a DLQ
    ("StartMessageMoveTask", DLQ, {"MaxNumberOfMessagesPerSecond": 501}),
    ("StartMessageMoveTask", DLQ, {"DestinationArn": DLQ.arn}),
    ("CancelMessageMoveTask", DLQ, {"TaskHandle": "not-a-handle"}),
    ("CancelMessageMoveTask", DLQ, {}),
]


@pytest.mark.parametrize("action, key, form", CASES, ids=[f"{a}-{i}" for i, (a, _, _) in enumerate(CASES)])
def test_an_action_answers_exactly_as_sqs(action, key, form):
    console, sqs = _endpoint(), _endpoint()
    params = actions.sqs_params(action, key, "http://h:1", form)
    body = json.dumps(params).encode()
    ns = Namespace(key.region, key.account)
    got = []
    actions.execute(console, action, body, ns, "h:1", lambda resp, via: got.append((resp, via)))
    # the same request, as a client sends it to the SQS endpoint (the region from its signature)
    auth = f"AWS4-HMAC-SHA256 Credential=x/20260101/{key.region}/sqs/aws4_request, SignedHeaders=host, Signature=0"
    sqs.handle(HttpRequest("POST", "/", b"", {"x-amz-target": f"AmazonSQS.{action}", "host": "h:1",
                                             "authorization": auth}, body), Reply(got.append))
    (mine, via), theirs = got
    assert via is None and mine.status == theirs.status and mine.status >= 400
    assert json.loads(mine.body) == json.loads(theirs.body)
    assert dict(mine.headers)["X-Amzn-Query-Error"] == dict(theirs.headers)["X-Amzn-Query-Error"]


def test_a_successful_action_answers_as_sqs():
    e = _endpoint()
    got = []
    body = json.dumps(actions.sqs_params("SendMessage", ORDERS, "http://h:1", {"MessageBody": "hi"})).encode()
    actions.execute(e, "SendMessage", body, NS, "h:1", lambda resp, via: got.append(resp))
    assert got[0].status == 200 and json.loads(got[0].body)["MD5OfMessageBody"] == "49f68a5c8493ec2c0bf489821c21fc3b"
    assert e.backend.queue_stats()[ORDERS] == (1, 0, 0)
