"""The harness of the queue-level storage tests: test_queue_actions, test_queue_attributes,
test_permissions and the queue half of test_redrive (their ``sqs`` fixture is in conftest.py).

Each test drives a master ``Storage`` with a manual clock and checks three things: the result,
the state as later commands see it, and the mutations emitted. Every mutation is also applied to
a replica, so a test can check that the replica converged (``assert_converged``). A rejected
command must leave no trace: ``Sqs.fail`` checks the error's code, shape and status and that the
master's digest did not move.

Where SQS behaviour is asserted that is not obvious, the comment names the source (AWS API
reference, AWS developer guide, or an error captured from the real service).
"""

from __future__ import annotations

import json

import pytest

from storage import IdSource, ManualClock, STRICT, SqsError, Storage
from storage.commands import (
    CreateQueue, GetQueueAttributes, ListQueueTags, ListQueues, Namespace, QueueKey, ReceiveMessage,
    SendMessage,
)
from storage.results import CreateQueueResult, GetQueueAttributesResult, ListQueueTagsResult, ListQueuesResult


START_MS = 1_700_000_000_500          # not on a whole second: timestamps must floor to seconds
NS = Namespace("us-east-1", "000000000000")
OTHER_REGION = Namespace("eu-west-1", "000000000000")
OTHER_ACCOUNT = Namespace("us-east-1", "111111111111")

NONEXISTENT = "AWS.SimpleQueueService.NonExistentQueue"
INVALID_PARAMETER_VALUE = "InvalidParameterValue"
INVALID_ATTRIBUTE_NAME = "InvalidAttributeName"
INVALID_ATTRIBUTE_VALUE = "InvalidAttributeValue"
MISSING_PARAMETER = "MissingParameter"
QUEUE_ALREADY_EXISTS = "QueueAlreadyExists"
QUEUE_DELETED_RECENTLY = "AWS.SimpleQueueService.QueueDeletedRecently"
PURGE_IN_PROGRESS = "AWS.SimpleQueueService.PurgeQueueInProgress"
OVER_LIMIT = "OverLimit"

# The error kinds as botocore's SQS model names them (shape, legacy Query code, HTTP status).
SHAPES = {
    NONEXISTENT: ("QueueDoesNotExist", 400),
    QUEUE_ALREADY_EXISTS: ("QueueNameExists", 400),
    QUEUE_DELETED_RECENTLY: ("QueueDeletedRecently", 400),
    PURGE_IN_PROGRESS: ("PurgeQueueInProgress", 403),
    OVER_LIMIT: ("OverLimit", 403),
    INVALID_ATTRIBUTE_NAME: ("InvalidAttributeName", 400),
    INVALID_ATTRIBUTE_VALUE: ("InvalidAttributeValue", 400),
}


class Sqs:
    """A master storage, a replica fed with every emitted mutation, and helpers."""

    def __init__(self, limits=STRICT):
        self.clock = ManualClock(START_MS)
        self.master = Storage(self.clock, IdSource(1234), limits)
        self.replica = Storage(self.clock, IdSource(9999), limits)
        self.emitted: list = []
        self.last: list = []

    def run(self, command):
        result, mutations = self.master.execute(command)
        for m in mutations:
            self.replica.apply(m)
        self.emitted.extend(mutations)
        self.last = list(mutations)
        return result

    def fail(self, command, code: str, status: int | None = None) -> SqsError:
        """Run a command that must be rejected with ``code``, leaving the state untouched."""
        before = self.master.digest()
        with pytest.raises(SqsError) as info:
            self.master.execute(command)
        err = info.value
        assert err.code == code, f"expected {code}, got {err.code}: {err.message}"
        if code in SHAPES:
            shape, default_status = SHAPES[code]
            assert err.kind.shape == shape
            assert err.status == (status or default_status)
        elif status is not None:
            assert err.status == status
        assert err.sender_fault
        assert not getattr(err, "mutations", ()), "a rejected command emitted mutations"
        assert self.master.digest() == before, "a rejected command changed the state"
        return err

    # --- shortcuts ------------------------------------------------------------------------

    def create(self, name: str, attributes=None, tags=None, ns: Namespace = NS) -> QueueKey:
        result = self.run(CreateQueue(ns, name, dict(attributes or {}), dict(tags or {})))
        assert isinstance(result, CreateQueueResult)
        return result.queue

    def attrs(self, key: QueueKey, *names: str) -> dict[str, str]:
        result = self.run(GetQueueAttributes(key, names or ("All",)))
        assert isinstance(result, GetQueueAttributesResult)
        assert self.last == []
        return dict(result.attributes)

    def counts(self, key: QueueKey) -> tuple[int, int, int]:
        a = self.attrs(key, "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                       "ApproximateNumberOfMessagesDelayed")
        return (int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"]),
                int(a["ApproximateNumberOfMessagesDelayed"]))

    def send(self, key: QueueKey, body: str = "hello", **kw) -> str:
        return self.run(SendMessage(key, body, **kw)).message_id

    def receive(self, key: QueueKey, n: int = 10, **kw):
        return self.run(ReceiveMessage(key, max_number_of_messages=n, **kw)).messages

    def list_names(self, ns: Namespace = NS, prefix: str | None = None) -> list[str]:
        result = self.run(ListQueues(ns, prefix))
        assert isinstance(result, ListQueuesResult)
        assert result.next_token is None
        return [k.name for k in result.queues]

    def tags(self, key: QueueKey) -> dict[str, str]:
        result = self.run(ListQueueTags(key))
        assert isinstance(result, ListQueueTagsResult)
        return dict(result.tags)

    def assert_converged(self) -> None:
        assert self.replica.digest() == self.master.digest()


def walk(sqs, make) -> list[list[str]]:
    """The names on each page of a ListQueues walk: ``make(token)`` is the command for the page
    after ``token`` (None first), run by ``sqs.run`` until a page has no NextToken."""
    pages, token = [], None
    for _ in range(100):
        result = sqs.run(make(token))
        pages.append([k.name for k in result.queues])
        token = result.next_token
        if token is None:
            return pages
    raise AssertionError("pagination did not end")


def kinds(mutations) -> list[type]:
    return [type(m) for m in mutations]


def redrive(target: QueueKey, count=3) -> str:
    return json.dumps({"deadLetterTargetArn": target.arn, "maxReceiveCount": count})


def fifo(extra=None) -> dict[str, str]:
    return {"FifoQueue": "true", **(extra or {})}
