"""Queue attributes: what CreateQueue and SetQueueAttributes accept (storage/queue_config.py) and
what GetQueueAttributes returns (storage/queue_actions.py).

The ``sqs`` harness (tests/storage/queue_env.py) checks each command's result, the state later
commands see, the mutations emitted, and that a rejected command leaves no trace.
"""

from __future__ import annotations

import json

import pytest

from storage.commands import (
    CreateQueue, GetQueueAttributes, ListQueueTags, Namespace, SendMessage, SetQueueAttributes, Tick,
)
from storage.mutations import QueueCreated, QueueUpdated
from tests.storage.queue_env import (
    INVALID_ATTRIBUTE_NAME, INVALID_ATTRIBUTE_VALUE, INVALID_PARAMETER_VALUE, MISSING_PARAMETER, NONEXISTENT,
    NS, START_MS, fifo, kinds,
)


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
