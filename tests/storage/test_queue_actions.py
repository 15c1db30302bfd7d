"""Unit tests of the queue-level SQS actions, against the storage state machine.

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

from storage import RELAXED, STRICT, IdSource, ManualClock, SqsError, Storage
from storage import errors
from storage.commands import (
    AddPermission, CreateQueue, DeleteQueue, GetQueueAttributes, GetQueueUrl,
    ListDeadLetterSourceQueues, ListQueues, ListQueueTags, Namespace, PurgeQueue, QueueKey,
    ReceiveMessage, RemovePermission, SendMessage, SetQueueAttributes, TagQueue, Tick, UntagQueue,
)
from storage.mutations import (
    QueueCreated, QueueDeleted, QueuePurged, QueueUpdated, TombstoneCleared,
)
from storage.results import (
    CreateQueueResult, GetQueueAttributesResult, GetQueueUrlResult, ListDeadLetterSourceQueuesResult,
    ListQueuesResult, ListQueueTagsResult,
)

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


@pytest.fixture
def sqs() -> Sqs:
    return Sqs()


def kinds(mutations) -> list[type]:
    return [type(m) for m in mutations]


def redrive(target: QueueKey, count=3) -> str:
    return json.dumps({"deadLetterTargetArn": target.arn, "maxReceiveCount": count})


def fifo(extra=None) -> dict[str, str]:
    return {"FifoQueue": "true", **(extra or {})}


# =============================================================================================
# CreateQueue: names
# =============================================================================================

@pytest.mark.parametrize("name", [
    "q", "a" * 80, "My_Queue-1", "UPPER", "0123456789", "-_-",
])
def test_create_standard_queue_accepts_valid_names(sqs, name):
    key = sqs.create(name)
    assert key == QueueKey(NS.region, NS.account, name)
    assert kinds(sqs.last) == [QueueCreated]
    created = sqs.last[0]
    assert created.key == key and created.created_ms == START_MS
    assert sqs.list_names() == [name]
    sqs.assert_converged()


@pytest.mark.parametrize("name", [
    "a" * 81,            # one past the 80-character limit
    "has space",
    "dot.in.name",
    "slash/name",
    "bang!",
    "ünicode",
    "tab\tname",
    "star*",
])
def test_create_standard_queue_rejects_invalid_names(sqs, name):
    sqs.fail(CreateQueue(NS, name), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


def test_create_queue_without_name_is_missing_parameter(sqs):
    sqs.fail(CreateQueue(NS, None), MISSING_PARAMETER)


@pytest.mark.parametrize("name", ["f.fifo", "a" * 75 + ".fifo", "Orders_v2-eu.fifo"])
def test_create_fifo_queue_accepts_valid_names(sqs, name):
    assert len(name) <= 80
    key = sqs.create(name, fifo())
    assert key.is_fifo
    assert sqs.attrs(key, "FifoQueue") == {"FifoQueue": "true"}
    assert kinds(sqs.last) == []
    sqs.assert_converged()


@pytest.mark.parametrize("name", [
    "a" * 76 + ".fifo",   # 81 characters: the .fifo suffix counts toward the 80
    "nofifosuffix",       # FifoQueue=true needs the suffix
    ".fifo",              # nothing before the suffix
    "bad name.fifo",
    "two.dots.fifo",
    "x.FIFO",             # the suffix is lower case
])
def test_create_fifo_queue_rejects_invalid_names(sqs, name):
    sqs.fail(CreateQueue(NS, name, fifo()), INVALID_PARAMETER_VALUE)


def test_fifo_suffix_without_fifo_attribute_is_rejected(sqs):
    # A standard queue cannot be named *.fifo: AWS requires FifoQueue=true for such a name.
    sqs.fail(CreateQueue(NS, "orders.fifo"), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


def test_fifo_queue_false_on_standard_queue_is_unknown_attribute(sqs):
    # Captured from AWS (aws/aws-sdk-php#1331): "InvalidAttributeName (client): Unknown Attribute
    # FifoQueue." for CreateQueue(bar_queue, FifoQueue=false).
    sqs.fail(CreateQueue(NS, "bar_queue", {"FifoQueue": "false"}), INVALID_ATTRIBUTE_NAME)


def test_queue_names_are_case_sensitive(sqs):
    lower = sqs.create("orders")
    upper = sqs.create("Orders")
    assert lower != upper
    assert kinds(sqs.last) == [QueueCreated]
    assert sorted(sqs.list_names()) == ["Orders", "orders"]


# =============================================================================================
# CreateQueue: idempotence and conflicts
# =============================================================================================

def test_create_is_idempotent_with_same_attributes(sqs):
    attrs = {"VisibilityTimeout": "45", "DelaySeconds": "5"}
    key = sqs.create("jobs", attrs)
    created_at = sqs.attrs(key, "CreatedTimestamp")
    sqs.clock.advance(5_000)
    digest = sqs.master.digest()
    again = sqs.create("jobs", attrs)
    assert again == key
    assert sqs.last == []
    assert sqs.master.digest() == digest
    assert sqs.attrs(key, "CreatedTimestamp") == created_at
    sqs.assert_converged()


def test_create_is_idempotent_without_attributes(sqs):
    key = sqs.create("plain")
    assert sqs.create("plain") == key
    assert sqs.last == []


def test_create_is_idempotent_for_fifo_queue(sqs):
    key = sqs.create("o.fifo", fifo({"ContentBasedDeduplication": "true"}))
    assert sqs.create("o.fifo", fifo({"ContentBasedDeduplication": "true"})) == key
    assert sqs.last == []


def test_create_keeps_existing_messages_when_idempotent(sqs):
    key = sqs.create("keep")
    sqs.send(key, "one")
    sqs.create("keep")
    assert sqs.counts(key) == (1, 0, 0)


@pytest.mark.parametrize("first,second", [
    ({"VisibilityTimeout": "30"}, {"VisibilityTimeout": "60"}),
    ({"VisibilityTimeout": "60"}, {"VisibilityTimeout": "30"}),     # 30 is the default, still differs
    ({}, {"DelaySeconds": "10"}),
    ({"MessageRetentionPeriod": "600"}, {"MessageRetentionPeriod": "601"}),
])
def test_create_with_different_attribute_is_queue_already_exists(sqs, first, second):
    key = sqs.create("dup", first)
    before = sqs.attrs(key)
    sqs.fail(CreateQueue(NS, "dup", second), QUEUE_ALREADY_EXISTS)
    assert sqs.attrs(key) == before


def test_same_name_in_other_namespace_is_a_different_queue(sqs):
    a = sqs.create("shared", {"VisibilityTimeout": "10"})
    b = sqs.create("shared", {"VisibilityTimeout": "20"}, ns=OTHER_REGION)
    c = sqs.create("shared", {"VisibilityTimeout": "30"}, ns=OTHER_ACCOUNT)
    assert len({a, b, c}) == 3
    assert sqs.attrs(b, "VisibilityTimeout") == {"VisibilityTimeout": "20"}
    assert sqs.attrs(b, "QueueArn")["QueueArn"] == "arn:aws:sqs:eu-west-1:000000000000:shared"
    assert sqs.attrs(c, "QueueArn")["QueueArn"] == "arn:aws:sqs:us-east-1:111111111111:shared"


# =============================================================================================
# CreateQueue: attributes
# =============================================================================================

@pytest.mark.parametrize("name", ["Bogus", "visibilitytimeout", "MaxMessageSize", ""])
def test_create_with_unknown_attribute_is_invalid_attribute_name(sqs, name):
    sqs.fail(CreateQueue(NS, "q", {name: "1"}), INVALID_ATTRIBUTE_NAME)
    assert sqs.list_names() == []


@pytest.mark.parametrize("attribute,value", [
    ("ContentBasedDeduplication", "true"),
    ("DeduplicationScope", "messageGroup"),
    ("FifoThroughputLimit", "perMessageGroupId"),
])
def test_fifo_only_attributes_on_standard_queue_are_unknown(sqs, attribute, value):
    err = sqs.fail(CreateQueue(NS, "std", {attribute: value}), INVALID_ATTRIBUTE_NAME)
    # LocalStack's AWS-validated test_create_standard_queue_with_fifo_attribute_raises_error.
    if attribute == "ContentBasedDeduplication":
        assert err.message == "Unknown Attribute ContentBasedDeduplication."
    else:
        assert err.message == f"You can specify the {attribute} only when FifoQueue is set to true."
    assert sqs.list_names() == []


@pytest.mark.parametrize("attributes", [
    {"KmsMasterKeyId": "k", "SqsManagedSseEnabled": "true"},
])
def test_kms_and_sqs_managed_encryption_together_are_refused(sqs, attributes):
    # LocalStack's AWS-validated test_sse_kms_and_sqs_are_mutually_exclusive (SetQueueAttributes).
    message = ("You can use one type of server-side encryption (SSE) at one time. You can either "
               "enable KMS SSE or SQS SSE.")
    key = sqs.create("q")
    assert sqs.fail(SetQueueAttributes(key, attributes), INVALID_ATTRIBUTE_NAME).message == message
    assert sqs.fail(CreateQueue(NS, "other", attributes), INVALID_ATTRIBUTE_NAME).message == message


@pytest.mark.parametrize("attribute,value", [
    ("ContentBasedDeduplication", "true"),
    ("DeduplicationScope", "messageGroup"),
    ("FifoThroughputLimit", "perMessageGroupId"),
])
def test_fifo_only_attributes_on_fifo_queue_are_stored(sqs, attribute, value):
    extra = {"DeduplicationScope": "messageGroup"} if attribute == "FifoThroughputLimit" else {}
    key = sqs.create("f.fifo", fifo({attribute: value, **extra}))
    assert sqs.attrs(key, attribute) == {attribute: value}


RANGES = [
    ("DelaySeconds", 0, 900),
    ("MaximumMessageSize", 1024, 1_048_576),
    ("MessageRetentionPeriod", 60, 1_209_600),
    ("ReceiveMessageWaitTimeSeconds", 0, 20),
    ("VisibilityTimeout", 0, 43_200),
    ("KmsDataKeyReusePeriodSeconds", 60, 86_400),
]


def with_kms_key(attribute: str, value: str) -> dict[str, str]:
    """``{attribute: value}``, with a KMS key when the attribute only shows with one."""
    key = {"KmsMasterKeyId": "alias/k"} if attribute == "KmsDataKeyReusePeriodSeconds" else {}
    return {attribute: value, **key}


@pytest.mark.parametrize("attribute,lo,hi", RANGES)
def test_create_accepts_attribute_range_edges(sqs, attribute, lo, hi):
    low = sqs.create("low", with_kms_key(attribute, str(lo)))
    high = sqs.create("high", with_kms_key(attribute, str(hi)))
    assert sqs.attrs(low, attribute) == {attribute: str(lo)}
    assert sqs.attrs(high, attribute) == {attribute: str(hi)}


@pytest.mark.parametrize("attribute,value", [
    *((a, str(lo - 1)) for a, lo, _ in RANGES),
    *((a, str(hi + 1)) for a, _, hi in RANGES),
    *((a, "abc") for a, _, _ in RANGES),
    *((a, "") for a, _, _ in RANGES),
    ("DelaySeconds", "1.5"),
])
def test_create_rejects_attribute_out_of_range(sqs, attribute, value):
    err = sqs.fail(CreateQueue(NS, "q", {attribute: value}), INVALID_ATTRIBUTE_VALUE)
    assert attribute in err.message
    assert sqs.list_names() == []


@pytest.mark.parametrize("attribute,value,fifo_queue", [
    ("SqsManagedSseEnabled", "yes", False),
    ("Policy", "not json", False),
    ("Policy", "[1, 2]", False),
    ("ContentBasedDeduplication", "maybe", True),
    ("DeduplicationScope", "group", True),
    ("FifoThroughputLimit", "perGroup", True),
])
def test_create_rejects_bad_enumerated_or_json_values(sqs, attribute, value, fifo_queue):
    name, attrs = ("f.fifo", fifo({attribute: value})) if fifo_queue else ("s", {attribute: value})
    sqs.fail(CreateQueue(NS, name, attrs), INVALID_ATTRIBUTE_VALUE)


def test_per_message_group_throughput_requires_message_group_dedup_scope(sqs):
    # AWS API reference, CreateQueue: "The perMessageGroupId value is allowed only when the value
    # for DeduplicationScope is messageGroup."
    sqs.fail(CreateQueue(NS, "f.fifo", fifo({"FifoThroughputLimit": "perMessageGroupId"})),
             INVALID_ATTRIBUTE_VALUE)
    sqs.fail(CreateQueue(NS, "g.fifo", fifo({"FifoThroughputLimit": "perMessageGroupId",
                                             "DeduplicationScope": "queue"})), INVALID_ATTRIBUTE_VALUE)


def test_set_per_message_group_throughput_requires_message_group_dedup_scope(sqs):
    key = sqs.create("f.fifo", fifo())
    sqs.fail(SetQueueAttributes(key, {"FifoThroughputLimit": "perMessageGroupId"}), INVALID_ATTRIBUTE_VALUE)
    sqs.run(SetQueueAttributes(key, {"FifoThroughputLimit": "perMessageGroupId",
                                     "DeduplicationScope": "messageGroup"}))
    assert sqs.attrs(key, "FifoThroughputLimit", "DeduplicationScope") == {
        "FifoThroughputLimit": "perMessageGroupId", "DeduplicationScope": "messageGroup"}


STANDARD_DEFAULTS = {
    "DelaySeconds": "0",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": "30",
    "ApproximateNumberOfMessages": "0",
    "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0",
    "CreatedTimestamp": str(START_MS // 1000),
    "LastModifiedTimestamp": str(START_MS // 1000),
}
FIFO_DEFAULTS = {
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}


def test_get_attributes_all_returns_standard_defaults(sqs):
    key = sqs.create("defaults")
    got = sqs.attrs(key)
    assert set(got) == set(STANDARD_DEFAULTS) | {"QueueArn", "SqsManagedSseEnabled"}
    assert {k: got[k] for k in STANDARD_DEFAULTS} == STANDARD_DEFAULTS
    assert got["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:defaults"


def test_get_attributes_all_returns_fifo_defaults(sqs):
    key = sqs.create("defaults.fifo", fifo())
    got = sqs.attrs(key)
    assert set(got) == set(STANDARD_DEFAULTS) | set(FIFO_DEFAULTS) | {"QueueArn", "SqsManagedSseEnabled"}
    assert {k: got[k] for k in FIFO_DEFAULTS} == FIFO_DEFAULTS
    assert {k: got[k] for k in STANDARD_DEFAULTS} == STANDARD_DEFAULTS
    assert got["QueueArn"] == "arn:aws:sqs:us-east-1:000000000000:defaults.fifo"


def test_default_server_side_encryption_is_sqs_managed(sqs):
    # Since October 2022 every queue created through the HTTPS/SigV4 endpoints (which all SDKs
    # use) gets SSE-SQS by default, so GetQueueAttributes(All) reports SqsManagedSseEnabled=true.
    # Source: AWS Compute Blog, "Announcing server-side encryption with Amazon SQS-managed
    # encryption keys (SSE-SQS) by default".
    key = sqs.create("encrypted")
    assert sqs.attrs(key, "SqsManagedSseEnabled") == {"SqsManagedSseEnabled": "true"}


def test_explicit_attributes_are_echoed(sqs):
    policy = json.dumps({"Version": "2012-10-17", "Statement": []})
    key = sqs.create("custom", {"VisibilityTimeout": "120", "DelaySeconds": "7", "Policy": policy,
                                "MaximumMessageSize": "2048", "ReceiveMessageWaitTimeSeconds": "20"})
    got = sqs.attrs(key)
    assert got["VisibilityTimeout"] == "120"
    assert got["DelaySeconds"] == "7"
    assert got["MaximumMessageSize"] == "2048"
    assert got["ReceiveMessageWaitTimeSeconds"] == "20"
    assert json.loads(got["Policy"]) == json.loads(policy)


def test_create_carries_everything_in_the_mutation(sqs):
    key = sqs.create("m", {"VisibilityTimeout": "9"}, {"team": "core"})
    (created,) = sqs.last
    assert isinstance(created, QueueCreated)
    assert created.key == key
    assert created.created_ms == START_MS
    assert created.attributes["VisibilityTimeout"] == "9"
    assert created.attributes["MessageRetentionPeriod"] == "345600"  # defaults decided on the master
    assert dict(created.tags) == {"team": "core"}
    sqs.assert_converged()
    assert dict(sqs.replica.execute(ListQueueTags(key))[0].tags) == {"team": "core"}


# =============================================================================================
# CreateQueue / SetQueueAttributes: RedrivePolicy and RedriveAllowPolicy
# =============================================================================================
# Errors in a RedrivePolicy's content are InvalidParameterValue on AWS, e.g. captured from AWS:
#   "Value {...} for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain
#    mandatory attribute: maxReceiveCount. (Service: AmazonSQS; Status Code: 400; Error Code:
#    InvalidParameterValue" (rubyonjets/jets#101; also ansible-collections/community.aws#2321)
#   "api error InvalidParameterValue: Value {...} for parameter RedrivePolicy is invalid. Reason:
#    Dead-letter queue must be same type of queue as the source.." (Terraform against AWS)
# while a value that is not JSON at all is InvalidAttributeValue:
#   "InvalidAttributeValue: Invalid value for the parameter RedrivePolicy. Reason: Redrive policy
#    is not a valid JSON map." (Terraform against AWS, with a RequestID)

def test_create_with_redrive_policy(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq, 5)})
    policy = json.loads(sqs.attrs(src, "RedrivePolicy")["RedrivePolicy"])
    assert policy["deadLetterTargetArn"] == dlq.arn
    assert int(policy["maxReceiveCount"]) == 5


@pytest.mark.parametrize("count", [1, 1000, "1", "1000"], ids=repr)
def test_redrive_max_receive_count_edges_accepted(sqs, count):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq, count)})
    assert int(json.loads(sqs.attrs(src, "RedrivePolicy")["RedrivePolicy"])["maxReceiveCount"]) == int(count)


@pytest.mark.parametrize("value", ["not json", "{", "[]", "42", '"a string"'])
def test_redrive_policy_not_a_json_map_is_invalid_attribute_value(sqs, value):
    sqs.create("dlq")
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": value}), INVALID_ATTRIBUTE_VALUE)
    assert "Redrive policy is not a valid JSON map." in err.message


@pytest.mark.parametrize("count", [0, 1001, -1, "0", "1001", "abc"], ids=repr)
def test_redrive_max_receive_count_out_of_range(sqs, count):
    dlq = sqs.create("dlq")
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq, count)}), INVALID_PARAMETER_VALUE)
    assert f"Invalid value for maxReceiveCount: {count}, valid values are from 1 to 1000 both inclusive." \
        in err.message
    assert "src" not in sqs.list_names()


@pytest.mark.parametrize("missing", ["maxReceiveCount", "deadLetterTargetArn"])
def test_redrive_policy_missing_field(sqs, missing):
    dlq = sqs.create("dlq")
    doc = {"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 3}
    del doc[missing]
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": json.dumps(doc)}), INVALID_PARAMETER_VALUE)
    assert f"Redrive policy does not contain mandatory attribute: {missing}." in err.message


def test_redrive_target_that_is_no_arn_is_refused_before_any_lookup(sqs):
    # LocalStack's AWS-recorded test_invalid_dead_letter_arn_rejected_before_lookup (2022 recording).
    value = json.dumps({"deadLetterTargetArn": "dummy", "maxReceiveCount": 42})
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": value}), INVALID_PARAMETER_VALUE)
    assert err.message == (f"Value {value} for parameter RedrivePolicy is invalid. "
                           "Reason: Invalid value for deadLetterTargetArn.")


def test_redrive_target_must_exist(sqs):
    ghost = NS.key("ghost")
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(ghost)}), INVALID_PARAMETER_VALUE)
    assert "Dead letter target does not exist." in err.message
    assert sqs.list_names() == []


def test_redrive_target_deleted_queue_does_not_exist(sqs):
    dlq = sqs.create("dlq")
    sqs.run(DeleteQueue(dlq))
    sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)


def test_redrive_target_in_another_account_is_rejected(sqs):
    # AWS developer guide: the dead-letter queue "must also be created using the same AWS account
    # and region as the source queue" (awsdocs, "Using Dead Letter Queues in Amazon SQS").
    foreign = sqs.create("dlq", ns=OTHER_ACCOUNT)
    sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(foreign)}), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


@pytest.mark.parametrize("source_fifo", [False, True])
def test_redrive_target_must_be_same_queue_type(sqs, source_fifo):
    if source_fifo:
        dlq = sqs.create("dlq")
        cmd = CreateQueue(NS, "src.fifo", fifo({"RedrivePolicy": redrive(dlq)}))
    else:
        dlq = sqs.create("dlq.fifo", fifo())
        cmd = CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)})
    err = sqs.fail(cmd, INVALID_PARAMETER_VALUE)
    assert "Dead-letter queue must be same type of queue as the source." in err.message


def test_fifo_source_with_fifo_dead_letter_queue(sqs):
    dlq = sqs.create("dlq.fifo", fifo())
    src = sqs.create("src.fifo", fifo({"RedrivePolicy": redrive(dlq)}))
    assert json.loads(sqs.attrs(src, "RedrivePolicy")["RedrivePolicy"])["deadLetterTargetArn"] == dlq.arn


def test_redrive_allow_policy_deny_all_rejects_every_source(sqs):
    dlq = sqs.create("dlq", {"RedriveAllowPolicy": json.dumps({"redrivePermission": "denyAll"})})
    sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)
    plain = sqs.create("src")
    sqs.fail(SetQueueAttributes(plain, {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)
    assert "RedrivePolicy" not in sqs.attrs(plain)


def test_redrive_allow_policy_by_queue_admits_only_listed_sources(sqs):
    allowed = NS.key("allowed")
    dlq = sqs.create("dlq", {"RedriveAllowPolicy": json.dumps(
        {"redrivePermission": "byQueue", "sourceQueueArns": [allowed.arn]})})
    assert sqs.create("allowed", {"RedrivePolicy": redrive(dlq)}) == allowed
    sqs.fail(CreateQueue(NS, "intruder", {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)
    assert sorted(sqs.list_names()) == ["allowed", "dlq"]


def test_redrive_allow_policy_allow_all_admits_any_source(sqs):
    dlq = sqs.create("dlq", {"RedriveAllowPolicy": json.dumps({"redrivePermission": "allowAll"})})
    sqs.create("a", {"RedrivePolicy": redrive(dlq)})
    sqs.create("b", {"RedrivePolicy": redrive(dlq)})
    assert [k.name for k in sqs.run(ListDeadLetterSourceQueues(dlq)).queues] == ["a", "b"]


# =============================================================================================
# CreateQueue: tags
# =============================================================================================

def test_create_with_tags(sqs):
    key = sqs.create("tagged", tags={"env": "prod", "team": "core", "empty": ""})
    assert sqs.tags(key) == {"env": "prod", "team": "core", "empty": ""}


def test_create_without_tags_has_none(sqs):
    assert sqs.tags(sqs.create("untagged")) == {}


@pytest.mark.parametrize("tags", [
    {f"k{i}": "v" for i in range(51)},
    {"": "v"},
    {"k" * 129: "v"},
    {"aws:reserved": "v"},
    {"k": "v" * 257},
])
def test_create_with_bad_tags_is_rejected(sqs, tags):
    sqs.fail(CreateQueue(NS, "q", {}, tags), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


def test_create_with_tag_limits_at_the_edge(sqs):
    tags = {f"k{i}": "v" for i in range(48)}
    tags["k" * 128] = "v" * 256
    tags["x"] = ""
    assert len(tags) == 50
    key = sqs.create("edge", tags=tags)
    assert sqs.tags(key) == tags


# =============================================================================================
# DeleteQueue and QueueDeletedRecently
# =============================================================================================

def test_delete_queue(sqs):
    key = sqs.create("doomed")
    keep = sqs.create("kept")
    sqs.send(key, "bye")
    assert sqs.run(DeleteQueue(key)) is None
    assert kinds(sqs.last) == [QueueDeleted]
    assert sqs.last[0].key == key and sqs.last[0].deleted_ms == START_MS
    assert sqs.list_names() == ["kept"]
    sqs.fail(GetQueueUrl(NS, "doomed"), NONEXISTENT)
    sqs.fail(GetQueueAttributes(key, ("All",)), NONEXISTENT)
    sqs.fail(SendMessage(key, "x"), NONEXISTENT)
    sqs.fail(ReceiveMessage(key), NONEXISTENT)
    assert sqs.counts(keep) == (0, 0, 0)
    sqs.assert_converged()


def test_delete_nonexistent_queue(sqs):
    sqs.fail(DeleteQueue(NS.key("never")), NONEXISTENT)


def test_delete_twice(sqs):
    key = sqs.create("once")
    sqs.run(DeleteQueue(key))
    sqs.fail(DeleteQueue(key), NONEXISTENT)


def test_recreate_within_60_seconds_is_queue_deleted_recently(sqs):
    key = sqs.create("phoenix")
    sqs.run(DeleteQueue(key))
    sqs.clock.advance(59_999)
    err = sqs.fail(CreateQueue(NS, "phoenix"), QUEUE_DELETED_RECENTLY)
    # LocalStack's AWS-validated test_create_queue_recently_deleted.
    assert err.message == ("You must wait 60 seconds after deleting a queue before you can create "
                           "another with the same name.")
    sqs.fail(GetQueueUrl(NS, "phoenix"), NONEXISTENT)
    assert sqs.list_names() == []


def test_recreate_after_tick_past_60_seconds(sqs):
    key = sqs.create("phoenix", {"VisibilityTimeout": "99"}, {"old": "tag"})
    sqs.send(key, "old message")
    sqs.run(DeleteQueue(key))
    sqs.clock.advance(30_000)
    sqs.run(Tick())
    assert TombstoneCleared not in kinds(sqs.last)
    sqs.clock.advance(30_000)
    sqs.run(Tick())
    assert kinds(sqs.last) == [TombstoneCleared]
    assert sqs.last[0].key == key
    again = sqs.create("phoenix")
    assert again == key
    assert kinds(sqs.last) == [QueueCreated]
    # a fresh queue: no old messages, attributes, tags or timestamps
    attrs = sqs.attrs(again)
    assert attrs["VisibilityTimeout"] == "30"
    assert attrs["CreatedTimestamp"] == str((START_MS + 60_000) // 1000)
    assert sqs.counts(again) == (0, 0, 0)
    assert sqs.receive(again) == ()
    assert sqs.tags(again) == {}
    sqs.assert_converged()


def test_deleted_recently_is_per_namespace(sqs):
    sqs.run(DeleteQueue(sqs.create("name")))
    sqs.fail(CreateQueue(NS, "name"), QUEUE_DELETED_RECENTLY)
    assert sqs.create("name", ns=OTHER_ACCOUNT) == OTHER_ACCOUNT.key("name")
    assert sqs.create("name", ns=OTHER_REGION) == OTHER_REGION.key("name")


# =============================================================================================
# GetQueueUrl
# =============================================================================================

def test_get_queue_url(sqs):
    key = sqs.create("findme")
    result = sqs.run(GetQueueUrl(NS, "findme"))
    assert isinstance(result, GetQueueUrlResult)
    assert result.queue == key
    assert sqs.last == []


def test_get_queue_url_missing_name(sqs):
    sqs.fail(GetQueueUrl(NS, None), MISSING_PARAMETER)


def test_get_queue_url_nonexistent(sqs):
    sqs.create("other")
    sqs.fail(GetQueueUrl(NS, "nope"), NONEXISTENT)
    sqs.fail(GetQueueUrl(NS, "OTHER"), NONEXISTENT)   # names are case-sensitive


def test_get_queue_url_with_owner_account(sqs):
    foreign = sqs.create("theirs", ns=OTHER_ACCOUNT)
    assert sqs.run(GetQueueUrl(NS, "theirs", owner_account=OTHER_ACCOUNT.account)).queue == foreign
    sqs.fail(GetQueueUrl(NS, "theirs"), NONEXISTENT)
    sqs.fail(GetQueueUrl(NS, "theirs", owner_account="222222222222"), NONEXISTENT)


def test_get_queue_url_is_per_region(sqs):
    sqs.create("regional", ns=OTHER_REGION)
    sqs.fail(GetQueueUrl(NS, "regional"), NONEXISTENT)
    assert sqs.run(GetQueueUrl(OTHER_REGION, "regional")).queue == OTHER_REGION.key("regional")


# =============================================================================================
# ListQueues
# =============================================================================================

def test_list_queues_empty(sqs):
    assert sqs.list_names() == []


def test_list_queues_with_prefix(sqs):
    for name in ("orders-eu", "orders-us", "order", "payments", "Orders-caps"):
        sqs.create(name)
    assert sorted(sqs.list_names(prefix="orders")) == ["orders-eu", "orders-us"]
    assert sorted(sqs.list_names(prefix="order")) == ["order", "orders-eu", "orders-us"]
    assert sqs.list_names(prefix="zzz") == []
    assert len(sqs.list_names()) == 5
    assert sqs.last == []


@pytest.mark.parametrize("max_results", [0, -1, 1001])
def test_list_queues_max_results_out_of_range(sqs, max_results):
    sqs.create("q")
    sqs.fail(ListQueues(NS, max_results=max_results), INVALID_PARAMETER_VALUE)


@pytest.mark.parametrize("max_results", [1, 1000])
def test_list_queues_max_results_edges(sqs, max_results):
    sqs.create("a")
    sqs.create("b")
    result = sqs.run(ListQueues(NS, max_results=max_results))
    assert len(result.queues) == min(2, max_results)
    assert (result.next_token is None) == (max_results >= 2)


def walk(sqs: Sqs, make) -> list[list[str]]:
    pages, token = [], None
    for _ in range(100):
        result = sqs.run(make(token))
        pages.append([k.name for k in result.queues])
        token = result.next_token
        if token is None:
            return pages
    raise AssertionError("pagination did not end")


@pytest.mark.parametrize("page_size", [1, 3, 4, 7, 12, 13])
def test_list_queues_pagination_walks_every_queue_once(sqs, page_size):
    names = [f"q{i:02d}" for i in range(12)]
    for name in reversed(names):
        sqs.create(name)
    sqs.create("other-prefix")
    pages = walk(sqs, lambda token: ListQueues(NS, "q", page_size, token))
    seen = [n for page in pages for n in page]
    assert sorted(seen) == names
    assert len(seen) == len(set(seen))
    assert all(0 < len(page) <= page_size for page in pages)
    assert len(pages) == max(1, -(-len(names) // page_size))


def test_list_queues_pagination_survives_deletes_between_pages(sqs):
    names = [f"q{i}" for i in range(9)]
    for name in names:
        sqs.create(name)
    first = sqs.run(ListQueues(NS, max_results=3))
    listed = [k.name for k in first.queues]
    sqs.run(DeleteQueue(first.queues[0]))      # an already-listed queue goes away
    rest = walk(sqs, lambda token: ListQueues(NS, None, 3, token or first.next_token))
    seen = listed + [n for page in rest for n in page]
    assert sorted(seen) == names
    assert len(seen) == len(set(seen))


def test_list_queues_without_max_results_returns_at_most_1000(sqs):
    # AWS API reference, ListQueues: "returns a list of your queues ... The maximum number of
    # queues that can be returned is 1,000."
    for i in range(1001):
        sqs.create(f"q{i:04d}")
    result = sqs.run(ListQueues(NS))
    assert len(result.queues) == 1000
    assert result.next_token is None


@pytest.mark.parametrize("token", ["garbage", "!!!", "djE=x"])
def test_list_queues_invalid_next_token(sqs, token):
    sqs.create("q")
    sqs.fail(ListQueues(NS, max_results=1, next_token=token), INVALID_PARAMETER_VALUE)


def test_list_queues_namespaces_are_separate(sqs):
    sqs.create("home")
    sqs.create("abroad", ns=OTHER_REGION)
    sqs.create("theirs", ns=OTHER_ACCOUNT)
    assert sqs.list_names(NS) == ["home"]
    assert sqs.list_names(OTHER_REGION) == ["abroad"]
    assert sqs.list_names(OTHER_ACCOUNT) == ["theirs"]
    assert sqs.list_names(Namespace("ap-south-1", "000000000000")) == []
    result = sqs.run(ListQueues(OTHER_REGION))
    assert result.queues == (OTHER_REGION.key("abroad"),)


# =============================================================================================
# GetQueueAttributes
# =============================================================================================

def test_get_specific_attributes(sqs):
    key = sqs.create("q", {"VisibilityTimeout": "12"})
    assert sqs.attrs(key, "VisibilityTimeout", "QueueArn") == {
        "VisibilityTimeout": "12", "QueueArn": key.arn}
    assert sqs.attrs(key, "DelaySeconds") == {"DelaySeconds": "0"}


def test_get_no_attribute_names_returns_nothing(sqs):
    key = sqs.create("q")
    assert dict(sqs.run(GetQueueAttributes(key, None)).attributes) == {}
    assert dict(sqs.run(GetQueueAttributes(key, ())).attributes) == {}


def test_get_unset_optional_attribute_is_absent(sqs):
    key = sqs.create("q")
    assert sqs.attrs(key, "Policy", "RedrivePolicy") == {}


@pytest.mark.parametrize("names", [("Bogus",), ("VisibilityTimeout", "Nope"), ("all",)])
def test_get_unknown_attribute_name(sqs, names):
    key = sqs.create("q")
    sqs.fail(GetQueueAttributes(key, names), INVALID_ATTRIBUTE_NAME)


def test_get_attributes_of_nonexistent_queue(sqs):
    sqs.fail(GetQueueAttributes(NS.key("ghost"), ("All",)), NONEXISTENT)


def test_approximate_counts_follow_sends_receives_and_delays(sqs):
    key = sqs.create("counts", {"VisibilityTimeout": "10"})
    sqs.send(key, "a")
    sqs.send(key, "b")
    sqs.send(key, "later", delay_seconds=5)
    assert sqs.counts(key) == (2, 0, 1)
    (msg,) = sqs.receive(key, 1)
    assert sqs.counts(key) == (1, 1, 1)
    sqs.clock.advance(5_000)                   # the delayed message becomes visible
    assert sqs.counts(key) == (2, 1, 0)
    sqs.clock.advance(5_000)                   # the received one's visibility timeout ends
    assert sqs.counts(key) == (3, 0, 0)
    assert len(sqs.receive(key, 10)) == 3
    assert sqs.counts(key) == (0, 3, 0)


def test_approximate_delayed_from_queue_delay(sqs):
    key = sqs.create("slow", {"DelaySeconds": "30"})
    sqs.send(key, "x")
    sqs.send(key, "now", delay_seconds=0)      # a per-message delay overrides the queue's
    assert sqs.counts(key) == (1, 0, 1)
    sqs.clock.advance(30_000)
    assert sqs.counts(key) == (2, 0, 0)


def test_created_and_modified_timestamps_are_in_seconds(sqs):
    key = sqs.create("ts")
    got = sqs.attrs(key, "CreatedTimestamp", "LastModifiedTimestamp")
    assert got == {"CreatedTimestamp": "1700000000", "LastModifiedTimestamp": "1700000000"}


def test_queue_arn(sqs):
    key = sqs.create("arn-me", ns=Namespace("ap-southeast-2", "123456789012"))
    assert sqs.attrs(key, "QueueArn") == {"QueueArn": "arn:aws:sqs:ap-southeast-2:123456789012:arn-me"}


def test_get_attributes_emits_nothing_and_works_on_replica(sqs):
    key = sqs.create("r", {"DelaySeconds": "3"})
    master = sqs.attrs(key)
    assert sqs.last == []
    replica = dict(sqs.replica.execute(GetQueueAttributes(key, ("All",)))[0].attributes)
    assert replica == master


# =============================================================================================
# SetQueueAttributes
# =============================================================================================

def test_set_attributes_changes_and_emits_update(sqs):
    key = sqs.create("q")
    sqs.run(SetQueueAttributes(key, {"VisibilityTimeout": "5", "DelaySeconds": "2"}))
    assert kinds(sqs.last) == [QueueUpdated]
    got = sqs.attrs(key)
    assert got["VisibilityTimeout"] == "5" and got["DelaySeconds"] == "2"
    assert got["MessageRetentionPeriod"] == "345600"   # untouched attributes stay
    sqs.assert_converged()


def test_set_visibility_timeout_affects_later_receives(sqs):
    key = sqs.create("vt")
    sqs.send(key, "first")
    (held,) = sqs.receive(key)                         # under the old 30 s timeout
    sqs.run(SetQueueAttributes(key, {"VisibilityTimeout": "5"}))
    sqs.send(key, "second")
    (msg,) = sqs.receive(key)
    assert msg.body == "second"
    sqs.clock.advance(4_999)
    assert sqs.receive(key) == ()
    sqs.clock.advance(1)
    assert [m.body for m in sqs.receive(key)] == ["second"]
    sqs.clock.advance(24_999)                           # t = 29.999 s
    assert [m.body for m in sqs.receive(key)] == ["second"]   # "first" keeps its 30 s timeout
    sqs.clock.advance(1)                                # t = 30 s
    assert [m.body for m in sqs.receive(key)] == ["first"]


def test_set_delay_seconds_affects_later_sends(sqs):
    key = sqs.create("delay")
    sqs.run(SetQueueAttributes(key, {"DelaySeconds": "10"}))
    sqs.send(key)
    assert sqs.receive(key) == ()
    sqs.clock.advance(10_000)
    assert len(sqs.receive(key)) == 1


def test_set_maximum_message_size_affects_later_sends(sqs):
    key = sqs.create("small")
    sqs.send(key, "x" * 2000)
    sqs.run(SetQueueAttributes(key, {"MaximumMessageSize": "1024"}))
    sqs.fail(SendMessage(key, "x" * 1025), INVALID_PARAMETER_VALUE)
    sqs.send(key, "x" * 1024)
    assert sqs.counts(key) == (2, 0, 0)


def test_set_retention_expires_messages(sqs):
    key = sqs.create("short")
    sqs.run(SetQueueAttributes(key, {"MessageRetentionPeriod": "60"}))
    sqs.send(key)
    sqs.clock.advance(59_999)
    sqs.run(Tick())
    assert sqs.counts(key) == (1, 0, 0)
    sqs.clock.advance(1)
    sqs.run(Tick())
    assert sqs.counts(key) == (0, 0, 0)
    sqs.assert_converged()


def test_set_content_based_deduplication_on_fifo(sqs):
    key = sqs.create("d.fifo", fifo())
    sqs.fail(SendMessage(key, "x", group_id="g"), INVALID_PARAMETER_VALUE)
    sqs.run(SetQueueAttributes(key, {"ContentBasedDeduplication": "true"}))
    first = sqs.send(key, "x", group_id="g")
    assert sqs.send(key, "x", group_id="g") == first      # deduplicated by content
    assert sqs.counts(key) == (1, 0, 0)


@pytest.mark.parametrize("attributes", [None, {}])
def test_set_without_attributes_is_missing_parameter(sqs, attributes):
    key = sqs.create("q")
    sqs.fail(SetQueueAttributes(key, attributes), MISSING_PARAMETER)


@pytest.mark.parametrize("value", ["true", "false"])
def test_set_fifo_queue_on_a_standard_queue_is_unknown(sqs, value):
    # LocalStack's AWS-validated test_set_unsupported_attribute_standard.
    std = sqs.create("std")
    err = sqs.fail(SetQueueAttributes(std, {"FifoQueue": value}), INVALID_ATTRIBUTE_NAME)
    assert err.message == "Unknown Attribute FifoQueue."


def test_set_fifo_queue_on_a_fifo_queue_cannot_change_its_type(sqs):
    # LocalStack's AWS-validated test_set_unsupported_attribute_fifo: "true" is answered 200.
    fq = sqs.create("f.fifo", fifo())
    sqs.run(SetQueueAttributes(fq, {"FifoQueue": "true"}))
    err = sqs.fail(SetQueueAttributes(fq, {"FifoQueue": "false"}), INVALID_ATTRIBUTE_VALUE)
    assert err.message == "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported."
    assert sqs.attrs(fq, "FifoQueue") == {"FifoQueue": "true"}


def test_set_fifo_only_attribute_on_standard_queue(sqs):
    key = sqs.create("std")
    sqs.fail(SetQueueAttributes(key, {"ContentBasedDeduplication": "true"}), INVALID_ATTRIBUTE_NAME)


def test_set_unknown_attribute(sqs):
    key = sqs.create("q")
    sqs.fail(SetQueueAttributes(key, {"Bogus": "1"}), INVALID_ATTRIBUTE_NAME)


@pytest.mark.parametrize("attribute,value", [
    *((a, str(lo - 1)) for a, lo, _ in RANGES),
    *((a, str(hi + 1)) for a, _, hi in RANGES),
])
def test_set_attribute_out_of_range(sqs, attribute, value):
    key = sqs.create("q")
    sqs.fail(SetQueueAttributes(key, {attribute: value}), INVALID_ATTRIBUTE_VALUE)


@pytest.mark.parametrize("attribute,lo,hi", RANGES)
def test_set_attribute_range_edges(sqs, attribute, lo, hi):
    key = sqs.create("q")
    for value in (lo, hi):
        sqs.run(SetQueueAttributes(key, with_kms_key(attribute, str(value))))
        assert sqs.attrs(key, attribute) == {attribute: str(value)}


def test_kms_reuse_period_listed_only_with_a_kms_key(sqs):
    # LocalStack's AWS-validated test_set_queue_attributes_default_values: with the key removed,
    # GetQueueAttributes All lists neither the key nor the reuse period.
    key = sqs.create("q")
    sqs.run(SetQueueAttributes(key, {"KmsMasterKeyId": "testKeyId", "KmsDataKeyReusePeriodSeconds": "6000"}))
    assert sqs.attrs(key, "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled") == {
        "KmsMasterKeyId": "testKeyId", "KmsDataKeyReusePeriodSeconds": "6000", "SqsManagedSseEnabled": "false"}
    sqs.run(SetQueueAttributes(key, {"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"}))
    listed = sqs.attrs(key, "All")
    assert "KmsMasterKeyId" not in listed and "KmsDataKeyReusePeriodSeconds" not in listed
    assert listed["SqsManagedSseEnabled"] == "false"


def test_set_is_all_or_nothing(sqs):
    key = sqs.create("q")
    sqs.fail(SetQueueAttributes(key, {"VisibilityTimeout": "60", "DelaySeconds": "901"}),
             INVALID_ATTRIBUTE_VALUE)
    assert sqs.attrs(key, "VisibilityTimeout", "DelaySeconds") == {
        "VisibilityTimeout": "30", "DelaySeconds": "0"}


def test_set_on_nonexistent_queue(sqs):
    sqs.fail(SetQueueAttributes(NS.key("ghost"), {"VisibilityTimeout": "5"}), NONEXISTENT)


def test_set_redrive_policy_then_remove_it_with_empty_string(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src")
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 2)}))
    assert kinds(sqs.last) == [QueueUpdated]
    assert [k.name for k in sqs.run(ListDeadLetterSourceQueues(dlq)).queues] == ["src"]
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": ""}))
    assert kinds(sqs.last) == [QueueUpdated]
    assert "RedrivePolicy" not in sqs.attrs(src)
    assert sqs.run(ListDeadLetterSourceQueues(dlq)).queues == ()
    # and no redrive happens any more: the message keeps coming back to the source
    sqs.run(SetQueueAttributes(src, {"VisibilityTimeout": "1"}))
    sqs.send(src)
    for _ in range(4):
        assert len(sqs.receive(src)) == 1
        sqs.clock.advance(1_000)
    assert sqs.counts(dlq) == (0, 0, 0)
    sqs.assert_converged()


def test_set_redrive_policy_is_validated(sqs):
    src = sqs.create("src")
    sqs.fail(SetQueueAttributes(src, {"RedrivePolicy": redrive(NS.key("ghost"))}), INVALID_PARAMETER_VALUE)
    dlq = sqs.create("dlq")
    sqs.fail(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 0)}), INVALID_PARAMETER_VALUE)
    sqs.fail(SetQueueAttributes(src, {"RedrivePolicy": "{oops"}), INVALID_ATTRIBUTE_VALUE)
    assert "RedrivePolicy" not in sqs.attrs(src)


def test_set_redrive_policy_moves_messages_to_dlq(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"VisibilityTimeout": "1"})
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 2)}))
    sqs.send(src, "poison")
    for _ in range(2):
        assert len(sqs.receive(src)) == 1
        sqs.clock.advance(1_000)
    assert sqs.receive(src) == ()
    assert [m.body for m in sqs.receive(dlq)] == ["poison"]


def test_set_moves_last_modified_timestamp(sqs):
    key = sqs.create("q")
    sqs.clock.advance(5_000)
    sqs.run(SetQueueAttributes(key, {"VisibilityTimeout": "40"}))
    (update,) = sqs.last
    assert update.modified_ms == START_MS + 5_000
    got = sqs.attrs(key, "CreatedTimestamp", "LastModifiedTimestamp")
    assert got["CreatedTimestamp"] == str(START_MS // 1000)
    assert got["LastModifiedTimestamp"] == str((START_MS + 5_000) // 1000)


def test_set_removes_policy_with_empty_string(sqs):
    key = sqs.create("q", {"Policy": json.dumps({"Version": "2012-10-17", "Statement": []})})
    sqs.run(SetQueueAttributes(key, {"Policy": ""}))
    assert "Policy" not in sqs.attrs(key)


# =============================================================================================
# PurgeQueue
# =============================================================================================

def test_purge_removes_every_message(sqs):
    key = sqs.create("p")
    for i in range(5):
        sqs.send(key, f"m{i}")
    sqs.send(key, "delayed", delay_seconds=60)
    sqs.receive(key, 2)
    assert sqs.counts(key) == (3, 2, 1)
    assert sqs.run(PurgeQueue(key)) is None
    assert kinds(sqs.last) == [QueuePurged]
    assert sqs.counts(key) == (0, 0, 0)
    sqs.clock.advance(120_000)                 # nothing comes back: not the delayed, not the in-flight
    assert sqs.receive(key) == ()
    assert sqs.counts(key) == (0, 0, 0)
    sqs.assert_converged()


def test_second_purge_within_60_seconds_is_in_progress(sqs):
    key = sqs.create("p")
    sqs.run(PurgeQueue(key))
    sqs.clock.advance(59_999)
    err = sqs.fail(PurgeQueue(key), PURGE_IN_PROGRESS, status=403)
    assert err.status == 403


def test_purge_again_after_60_seconds(sqs):
    key = sqs.create("p")
    sqs.run(PurgeQueue(key))
    sqs.send(key, "after first purge")
    sqs.clock.advance(60_000)
    sqs.run(PurgeQueue(key))
    assert kinds(sqs.last) == [QueuePurged]
    assert sqs.counts(key) == (0, 0, 0)


def test_messages_sent_after_a_purge_survive(sqs):
    key = sqs.create("p")
    sqs.send(key, "before")
    sqs.run(PurgeQueue(key))
    sqs.send(key, "after")
    sqs.clock.advance(10_000)
    sqs.fail(PurgeQueue(key), PURGE_IN_PROGRESS, status=403)   # a rejected purge deletes nothing
    assert [m.body for m in sqs.receive(key)] == ["after"]
    sqs.assert_converged()


def test_purge_is_per_queue(sqs):
    a = sqs.create("a")
    b = sqs.create("b")
    sqs.send(a)
    sqs.send(b)
    sqs.run(PurgeQueue(a))
    sqs.run(PurgeQueue(b))                     # b's own 60 s window, unaffected by a's purge
    sqs.send(b, "kept")
    assert sqs.counts(a) == (0, 0, 0)
    assert sqs.counts(b) == (1, 0, 0)


def test_purge_nonexistent_queue(sqs):
    sqs.fail(PurgeQueue(NS.key("ghost")), NONEXISTENT)


def test_purge_fifo_queue(sqs):
    key = sqs.create("p.fifo", fifo({"ContentBasedDeduplication": "true"}))
    sqs.send(key, "a", group_id="g")
    sqs.send(key, "b", group_id="g")
    sqs.receive(key, 1)
    sqs.run(PurgeQueue(key))
    assert sqs.counts(key) == (0, 0, 0)
    sqs.send(key, "c", group_id="g")
    assert [m.body for m in sqs.receive(key)] == ["c"]   # the group is not left blocked


# =============================================================================================
# TagQueue / UntagQueue / ListQueueTags
# =============================================================================================

def test_tag_untag_and_list(sqs):
    key = sqs.create("t", tags={"a": "1"})
    sqs.run(TagQueue(key, {"b": "2", "a": "overwritten"}))
    assert kinds(sqs.last) == [QueueUpdated]
    assert sqs.tags(key) == {"a": "overwritten", "b": "2"}
    sqs.run(UntagQueue(key, ("a", "not-there")))
    assert kinds(sqs.last) == [QueueUpdated]
    assert sqs.tags(key) == {"b": "2"}
    sqs.run(ListQueueTags(key))
    assert sqs.last == []
    sqs.assert_converged()


def test_untag_unknown_keys_changes_nothing(sqs):
    key = sqs.create("t", tags={"keep": "me"})
    digest = sqs.master.digest()
    sqs.run(UntagQueue(key, ("nope",)))
    assert sqs.master.digest() == digest
    assert sqs.tags(key) == {"keep": "me"}


def test_tags_do_not_change_attributes(sqs):
    key = sqs.create("t", {"VisibilityTimeout": "77"})
    before = sqs.attrs(key, "VisibilityTimeout", "DelaySeconds")
    sqs.run(TagQueue(key, {"x": "y"}))
    assert sqs.attrs(key, "VisibilityTimeout", "DelaySeconds") == before


def test_tag_up_to_50_tags(sqs):
    key = sqs.create("t", tags={f"k{i}": "v" for i in range(40)})
    sqs.run(TagQueue(key, {f"n{i}": "v" for i in range(10)}))
    assert len(sqs.tags(key)) == 50
    sqs.run(TagQueue(key, {"k0": "replaced"}))            # overwriting does not add a tag
    assert len(sqs.tags(key)) == 50


def test_tag_beyond_50_tags_is_rejected(sqs):
    key = sqs.create("t", tags={f"k{i}": "v" for i in range(40)})
    before = sqs.tags(key)
    sqs.fail(TagQueue(key, {f"n{i}": "v" for i in range(11)}), INVALID_PARAMETER_VALUE)
    assert sqs.tags(key) == before


@pytest.mark.parametrize("tags", [
    {"": "v"},
    {"k" * 129: "v"},
    {"k": "v" * 257},
    {"aws:owner": "me"},
    {"ok": "v", "aws:bad": "v"},
])
def test_tag_with_bad_key_or_value(sqs, tags):
    key = sqs.create("t")
    sqs.fail(TagQueue(key, tags), INVALID_PARAMETER_VALUE)
    assert sqs.tags(key) == {}


def test_tag_key_and_value_edges(sqs):
    key = sqs.create("t")
    sqs.run(TagQueue(key, {"k" * 128: "v" * 256, "z": ""}))
    assert sqs.tags(key) == {"k" * 128: "v" * 256, "z": ""}


@pytest.mark.parametrize("tags", [None, {}])
def test_tag_without_tags_is_missing_parameter(sqs, tags):
    key = sqs.create("t")
    sqs.fail(TagQueue(key, tags), MISSING_PARAMETER)


def test_untag_without_keys_is_missing_parameter(sqs):
    key = sqs.create("t", tags={"a": "1"})
    sqs.fail(UntagQueue(key, None), MISSING_PARAMETER)
    assert sqs.tags(key) == {"a": "1"}


@pytest.mark.parametrize("command", [
    TagQueue(NS.key("ghost"), {"a": "1"}),
    UntagQueue(NS.key("ghost"), ("a",)),
    ListQueueTags(NS.key("ghost")),
])
def test_tag_actions_on_nonexistent_queue(sqs, command):
    sqs.fail(command, NONEXISTENT)


# =============================================================================================
# AddPermission / RemovePermission
# =============================================================================================

def policy_of(sqs: Sqs, key: QueueKey) -> dict | None:
    raw = sqs.attrs(key, "Policy").get("Policy")
    return json.loads(raw) if raw else None


def test_add_permission_writes_the_policy(sqs):
    key = sqs.create("shared")
    assert sqs.run(AddPermission(key, "AliceSend", ("111122223333",), ("SendMessage",))) is None
    assert kinds(sqs.last) == [QueueUpdated]
    policy = policy_of(sqs, key)
    assert policy["Version"] == "2008-10-17"   # LocalStack's AWS-validated test_sqs_permission_lifecycle
    assert policy["Id"] == f"{key.arn}/SQSDefaultPolicy"
    assert policy["Statement"] == [{
        "Sid": "AliceSend",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
        "Action": "SQS:SendMessage",
        "Resource": key.arn,
    }]
    sqs.assert_converged()


def test_add_permission_with_several_accounts_and_actions(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "one", ("111122223333",), ("SendMessage",)))
    sqs.run(AddPermission(key, "two", ("111111111111", "222222222222"), ("ReceiveMessage", "DeleteMessage")))
    statements = policy_of(sqs, key)["Statement"]
    assert [s["Sid"] for s in statements] == ["one", "two"]
    two = statements[1]
    assert sorted(two["Principal"]["AWS"]) == ["arn:aws:iam::111111111111:root", "arn:aws:iam::222222222222:root"]
    assert sorted(two["Action"]) == ["SQS:DeleteMessage", "SQS:ReceiveMessage"]


def test_add_permission_wildcard_action(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "all", ("111122223333",), ("*",)))
    assert policy_of(sqs, key)["Statement"][0]["Action"] == "SQS:*"


def test_add_permission_duplicate_label(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "dup", ("111122223333",), ("SendMessage",)))
    before = policy_of(sqs, key)
    err = sqs.fail(AddPermission(key, "dup", ("444455556666",), ("ReceiveMessage",)), INVALID_PARAMETER_VALUE)
    # LocalStack's AWS-validated test_sqs_permission_lifecycle.
    assert err.message == "Value dup for parameter Label is invalid. Reason: Already exists."
    assert policy_of(sqs, key) == before


@pytest.mark.parametrize("label", ["has space", "a" * 81, "semi;colon", "dot.label"])
def test_add_permission_bad_label(sqs, label):
    key = sqs.create("shared")
    sqs.fail(AddPermission(key, label, ("111122223333",), ("SendMessage",)), INVALID_PARAMETER_VALUE)
    assert policy_of(sqs, key) is None


def test_add_permission_label_edges(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "a" * 80, ("111122223333",), ("SendMessage",)))
    sqs.run(AddPermission(key, "x-Y_9", ("111122223333",), ("SendMessage",)))
    assert [s["Sid"] for s in policy_of(sqs, key)["Statement"]] == ["a" * 80, "x-Y_9"]


def test_add_permission_too_many_actions_is_over_limit(sqs):
    key = sqs.create("shared")
    actions = ("SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
               "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListDeadLetterSourceQueues")
    sqs.fail(AddPermission(key, "many", ("111122223333",), actions), OVER_LIMIT, status=403)
    sqs.run(AddPermission(key, "seven", ("111122223333",), actions[:7]))
    assert len(policy_of(sqs, key)["Statement"][0]["Action"]) == 7


@pytest.mark.parametrize("action,reason", [
    ("Explode", "Please refer to the appropriate WSDL for a list of valid actions."),
    ("sendmessage", "Please refer to the appropriate WSDL for a list of valid actions."),
    ("SQS:SendMessage", "Please refer to the appropriate WSDL for a list of valid actions."),
    ("CreateQueue", "Only the queue owner is allowed to invoke this action."),
    ("ListQueueTags", "Only the queue owner is allowed to invoke this action."),
])
def test_add_permission_invalid_action(sqs, action, reason):
    # The value carries the SQS: prefix; the reasons are other reimplementations' (moto,
    # Eucalyptus), AWS's unrecorded: see README, "Semantics worth knowing".
    key = sqs.create("shared")
    err = sqs.fail(AddPermission(key, "bad", ("111122223333",), ("SendMessage", action)), INVALID_PARAMETER_VALUE)
    assert err.message == f"Value SQS:{action} for parameter ActionName is invalid. Reason: {reason}"


@pytest.mark.parametrize("accounts,shown", [
    (("arn:aws:iam::111122223333:user/alice",), "[arn:aws:iam::111122223333:user/alice]"),
    (("*",), "[*]"),
    (("alice", "bob"), "[alice, bob]"),
])
def test_add_permission_needs_an_account_principal(sqs, accounts, shown):
    # aws-cli issue #7416 (an ARN: "Reason: Unable to verify principal."), aws-sdk-core-ruby issue
    # #138 (the list in brackets: "Value [*] ...").
    key = sqs.create("shared")
    err = sqs.fail(AddPermission(key, "p", accounts, ("SendMessage",)), INVALID_PARAMETER_VALUE)
    assert err.message == f"Value {shown} for parameter PrincipalId is invalid. Reason: Unable to verify principal."
    assert policy_of(sqs, key) is None


def test_add_permission_keeps_only_the_account_principals(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "p", ("arn:aws:iam::111122223333:user/alice", "444455556666"), ("SendMessage",)))
    assert policy_of(sqs, key)["Statement"][0]["Principal"] == {"AWS": "arn:aws:iam::444455556666:root"}


@pytest.mark.parametrize("label,accounts,actions", [
    (None, ("111122223333",), ("SendMessage",)),
    ("l", None, ("SendMessage",)),
    ("l", (), ("SendMessage",)),
    ("l", ("111122223333",), None),
    ("l", ("111122223333",), ()),
])
def test_add_permission_missing_parameters(sqs, label, accounts, actions):
    key = sqs.create("shared")
    sqs.fail(AddPermission(key, label, accounts, actions), MISSING_PARAMETER)


def test_remove_permission(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "one", ("111122223333",), ("SendMessage",)))
    sqs.run(AddPermission(key, "two", ("111122223333",), ("ReceiveMessage",)))
    assert sqs.run(RemovePermission(key, "one")) is None
    assert kinds(sqs.last) == [QueueUpdated]
    assert [s["Sid"] for s in policy_of(sqs, key)["Statement"]] == ["two"]
    sqs.run(RemovePermission(key, "two"))
    # the last statement gone, so is the policy (LocalStack's AWS-validated test_sqs_permission_lifecycle)
    assert policy_of(sqs, key) is None
    sqs.assert_converged()


def test_remove_unknown_label(sqs):
    key = sqs.create("shared")
    err = sqs.fail(RemovePermission(key, "never"), INVALID_PARAMETER_VALUE)
    # LocalStack's AWS-validated test_sqs_permission_lifecycle.
    assert err.message == "Value never for parameter Label is invalid. Reason: can't find label."
    sqs.run(AddPermission(key, "one", ("111122223333",), ("SendMessage",)))
    sqs.fail(RemovePermission(key, "two"), INVALID_PARAMETER_VALUE)
    assert [s["Sid"] for s in policy_of(sqs, key)["Statement"]] == ["one"]


def test_remove_permission_missing_label(sqs):
    key = sqs.create("shared")
    sqs.fail(RemovePermission(key, None), MISSING_PARAMETER)


def test_add_permission_keeps_an_existing_policy(sqs):
    existing = {"Version": "2012-10-17", "Id": "custom", "Statement": [
        {"Sid": "pre", "Effect": "Deny", "Principal": "*", "Action": "SQS:*", "Resource": "*"}]}
    key = sqs.create("shared", {"Policy": json.dumps(existing)})
    sqs.run(AddPermission(key, "added", ("111122223333",), ("SendMessage",)))
    policy = policy_of(sqs, key)
    assert policy["Id"] == "custom"
    assert [s["Sid"] for s in policy["Statement"]] == ["pre", "added"]
    sqs.fail(AddPermission(key, "pre", ("111122223333",), ("SendMessage",)), INVALID_PARAMETER_VALUE)


@pytest.mark.parametrize("command", [
    AddPermission(NS.key("ghost"), "l", ("111122223333",), ("SendMessage",)),
    RemovePermission(NS.key("ghost"), "l"),
])
def test_permissions_on_nonexistent_queue(sqs, command):
    sqs.fail(command, NONEXISTENT)


# =============================================================================================
# ListDeadLetterSourceQueues
# =============================================================================================

def test_list_dead_letter_source_queues(sqs):
    dlq = sqs.create("dlq")
    other_dlq = sqs.create("other-dlq")
    for name in ("src-b", "src-a", "src-c"):
        sqs.create(name, {"RedrivePolicy": redrive(dlq)})
    sqs.create("elsewhere", {"RedrivePolicy": redrive(other_dlq)})
    sqs.create("plain")
    result = sqs.run(ListDeadLetterSourceQueues(dlq))
    assert isinstance(result, ListDeadLetterSourceQueuesResult)
    assert sorted(k.name for k in result.queues) == ["src-a", "src-b", "src-c"]
    assert all(k.region == NS.region and k.account == NS.account for k in result.queues)
    assert result.next_token is None
    assert sqs.last == []
    assert [k.name for k in sqs.run(ListDeadLetterSourceQueues(other_dlq)).queues] == ["elsewhere"]
    assert sqs.run(ListDeadLetterSourceQueues(NS.key("plain"))).queues == ()


@pytest.mark.parametrize("page_size", [1, 2, 5, 6])
def test_list_dead_letter_source_queues_pagination(sqs, page_size):
    dlq = sqs.create("dlq")
    names = [f"src{i}" for i in range(5)]
    for name in names:
        sqs.create(name, {"RedrivePolicy": redrive(dlq)})
    pages, token = [], None
    for _ in range(20):
        result = sqs.run(ListDeadLetterSourceQueues(dlq, page_size, token))
        pages.append([k.name for k in result.queues])
        token = result.next_token
        if token is None:
            break
    seen = [n for page in pages for n in page]
    assert sorted(seen) == names
    assert len(seen) == len(set(seen))
    assert all(len(p) <= page_size for p in pages)
    assert len(pages) == -(-len(names) // page_size)


@pytest.mark.parametrize("max_results", [0, 1001])
def test_list_dead_letter_source_queues_max_results_out_of_range(sqs, max_results):
    dlq = sqs.create("dlq")
    sqs.fail(ListDeadLetterSourceQueues(dlq, max_results), INVALID_PARAMETER_VALUE)


def test_list_dead_letter_source_queues_invalid_token(sqs):
    dlq = sqs.create("dlq")
    sqs.create("src", {"RedrivePolicy": redrive(dlq)})
    sqs.fail(ListDeadLetterSourceQueues(dlq, 1, "not-a-token"), INVALID_PARAMETER_VALUE)


def test_list_dead_letter_source_queues_of_nonexistent_queue(sqs):
    sqs.fail(ListDeadLetterSourceQueues(NS.key("ghost")), NONEXISTENT)


def test_deleted_source_leaves_the_list(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq)})
    sqs.run(DeleteQueue(src))
    assert sqs.run(ListDeadLetterSourceQueues(dlq)).queues == ()


# =============================================================================================
# Limits profiles
# =============================================================================================

def test_relaxed_limits_allow_longer_queue_names():
    long_name = "n" * 120
    strict = Sqs(STRICT)
    strict.fail(CreateQueue(NS, long_name), INVALID_PARAMETER_VALUE)
    relaxed = Sqs(RELAXED)
    key = relaxed.create(long_name)
    assert relaxed.list_names() == [long_name]
    fifo_name = "f" * 100 + ".fifo"
    strict.fail(CreateQueue(NS, fifo_name, fifo()), INVALID_PARAMETER_VALUE)
    assert relaxed.create(fifo_name, fifo()).is_fifo
    assert relaxed.attrs(key, "QueueArn")["QueueArn"].endswith(":" + long_name)


def test_relaxed_limits_keep_the_name_alphabet():
    relaxed = Sqs(RELAXED)
    relaxed.fail(CreateQueue(NS, "no spaces"), INVALID_PARAMETER_VALUE)
    relaxed.fail(CreateQueue(NS, "n" * (RELAXED.max_queue_name_length + 1)), INVALID_PARAMETER_VALUE)
    relaxed.fail(CreateQueue(NS, "x.fifo"), INVALID_PARAMETER_VALUE)


# =============================================================================================
# Replication of queue-level changes
# =============================================================================================

def test_replica_follows_every_queue_level_change(sqs):
    dlq = sqs.create("dlq", tags={"a": "1"})
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq)})
    sqs.create("gone")
    sqs.run(DeleteQueue(NS.key("gone")))
    sqs.run(SetQueueAttributes(src, {"VisibilityTimeout": "3"}))
    sqs.run(TagQueue(src, {"x": "y"}))
    sqs.run(UntagQueue(dlq, ("a",)))
    sqs.run(AddPermission(src, "p", ("111122223333",), ("SendMessage",)))
    sqs.send(src)
    sqs.run(PurgeQueue(src))
    sqs.clock.advance(61_000)
    sqs.run(Tick())
    sqs.assert_converged()
    assert {type(m) for m in sqs.emitted} >= {
        QueueCreated, QueueDeleted, QueueUpdated, QueuePurged, TombstoneCleared}
    for key in (dlq, src):
        assert dict(sqs.replica.execute(GetQueueAttributes(key, ("All",)))[0].attributes) == sqs.attrs(key)
        assert dict(sqs.replica.execute(ListQueueTags(key))[0].tags) == sqs.tags(key)
    # applying everything a second time changes nothing
    digest = sqs.replica.digest()
    for m in sqs.emitted:
        sqs.replica.apply(m)
    assert sqs.replica.digest() == digest


def test_error_kinds_match_botocore_model():
    assert errors.QUEUE_NAME_EXISTS.query_code == QUEUE_ALREADY_EXISTS
    assert errors.PURGE_QUEUE_IN_PROGRESS.status == 403
    assert errors.OVER_LIMIT.status == 403
    assert errors.QUEUE_DOES_NOT_EXIST.query_code == NONEXISTENT
