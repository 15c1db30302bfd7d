"""A queue page's data (elasticmq_py/dashboard/console/queue_view.py): attributes and tags in
SQS's shapes, the redrive policy and its dead-letter queue, the queues a DLQ serves and its move
tasks; reading changes nothing."""

from __future__ import annotations

import json

from storage import ManualClock, Storage
from storage.commands import CreateQueue, Namespace, QueueKey, ReceiveMessage, SendMessage, StartMessageMoveTask

from elasticmq_py.dashboard.console.queue_view import queue_view

NS = Namespace()
BASE = "http://h:1"


def _storage() -> Storage:
    s = Storage(ManualClock(1_000_000))
    s.execute(CreateQueue(NS, "orders-dlq", {}, {}))
    s.execute(CreateQueue(NS, "orders", {"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": NS.key("orders-dlq").arn, "maxReceiveCount": 2})}, {"team": "payments"}))
    s.execute(SendMessage(NS.key("orders"), "a"))
    s.execute(SendMessage(NS.key("orders"), "b", delay_seconds=60))
    s.execute(ReceiveMessage(NS.key("orders"), visibility_timeout=30))
    return s


def test_a_queue_with_a_redrive_policy():
    s = _storage()
    before = s.digest()
    v = queue_view(s, NS.key("orders"), BASE)
    assert s.digest() == before, "reading changed nothing"
    assert v["url"] == f"{BASE}/000000000000/orders" and v["arn"] == NS.key("orders").arn and not v["fifo"]
    assert v["counts"] == {"visible": 0, "inflight": 1, "delayed": 1}
    assert v["attributes"]["VisibilityTimeout"] == "30" and v["attributes"]["ApproximateNumberOfMessagesNotVisible"] == "1"
    assert v["tags"] == {"team": "payments"}
    assert v["redrive"] == {"max_receive_count": 2, "dlq": {"name": "orders-dlq", "region": "us-east-1",
                                                            "account": "000000000000", "exists": True}}
    assert v["dlq_for"] == [] and v["move_tasks"] == []


def test_a_dead_letter_queue_lists_its_sources_and_move_tasks():
    s = _storage()
    s.execute(SendMessage(NS.key("orders-dlq"), "dead"))
    s.execute(StartMessageMoveTask(NS, NS.key("orders-dlq").arn, None, 1))
    v = queue_view(s, NS.key("orders-dlq"), BASE)
    assert v["redrive"] is None
    assert v["dlq_for"] == [{"name": "orders", "region": "us-east-1", "account": "000000000000", "exists": True}]
    [task] = v["move_tasks"]
    assert task["Status"] == "RUNNING" and task["TaskHandle"] and task["ApproximateNumberOfMessagesToMove"] == 1


def test_no_such_queue():
    assert queue_view(_storage(), QueueKey("us-east-1", "000000000000", "nope"), BASE) is None
    assert queue_view(_storage(), QueueKey("eu-west-1", "000000000000", "orders"), BASE) is None
