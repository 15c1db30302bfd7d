"""Every SQS action answered as AWS answers it, in both protocols: what the response holds, and
the behaviours AWS's recordings pin down.

Each test runs twice through the ``client`` fixture (JSON via boto3, Query via botocore with
botocore 1.29's Query model). The source of each expectation is named beside it; the LocalStack
snapshots and aws.validated tests cited were recorded against AWS in both protocols.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.conformance.helpers import Env

META = "ResponseMetadata"


@pytest.fixture
def e(client, protocol) -> Env:
    return Env(client, protocol)


def keys(response: dict) -> set[str]:
    return set(response) - {META}


def later() -> None:
    """Let the server's millisecond clock move on: FIFO groups are served in the order their
    oldest message became visible, and these tests need that order strict."""
    time.sleep(0.005)


# --- queues ------------------------------------------------------------------------------------

STANDARD_ALL = {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed",
                "ApproximateNumberOfMessagesNotVisible", "CreatedTimestamp", "DelaySeconds",
                "LastModifiedTimestamp", "MaximumMessageSize", "MessageRetentionPeriod", "QueueArn",
                "ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled", "VisibilityTimeout"}
FIFO_ALL = STANDARD_ALL | {"ContentBasedDeduplication", "DeduplicationScope", "FifoQueue", "FifoThroughputLimit"}


def test_create_get_list_and_delete_queues(e):
    url = e.queue("a-1")
    assert e.client.get_queue_url(QueueName="a-1")["QueueUrl"] == url
    e.queue("a-2")
    e.queue("b-1")
    # LocalStack test_list_queues (aws.validated): prefix filter; no QueueUrls key when none match
    assert sorted(e.client.list_queues(QueueNamePrefix="a-")["QueueUrls"]) == sorted([url, url[:-1] + "2"])
    assert keys(e.client.list_queues(QueueNamePrefix="nonexisting-queue-")) == set()
    # LocalStack snapshot test_list_queues_pagination: NextToken while more remain, none at the end
    first = e.client.list_queues(MaxResults=2)
    assert len(first["QueueUrls"]) == 2 and first["NextToken"]
    rest = e.client.list_queues(MaxResults=10, NextToken=first["NextToken"])
    assert len(rest["QueueUrls"]) == 1 and "NextToken" not in rest
    assert keys(e.client.delete_queue(QueueUrl=url)) == set()
    assert "a-1" not in str(e.client.list_queues().get("QueueUrls"))


def test_create_is_idempotent_with_the_same_or_fewer_attributes(e):
    # LocalStack test_create_queue_with_different_attributes_raises_exception (snapshot): same name,
    # no attributes or a subset, same URL; after SetQueueAttributes the new value is the one compared
    url = e.queue("q", ReceiveMessageWaitTimeSeconds="1", DelaySeconds="1")
    assert e.client.create_queue(QueueName="q")["QueueUrl"] == url
    assert e.queue("q", DelaySeconds="1") == url
    e.client.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "2"})
    assert e.queue("q", ReceiveMessageWaitTimeSeconds="1", DelaySeconds="2") == url


def test_get_queue_attributes_all(e):
    # LocalStack snapshot test_set_queue_attributes_default_values (standard: no KMS attribute at
    # all) and test_fifo_set_content_based_deduplication_strategy (FIFO)
    std = e.client.get_queue_attributes(QueueUrl=e.queue(), AttributeNames=["All"])["Attributes"]
    assert set(std) == STANDARD_ALL
    assert (std["MaximumMessageSize"], std["MessageRetentionPeriod"], std["VisibilityTimeout"],
            std["SqsManagedSseEnabled"]) == ("1048576", "345600", "30", "true")
    fifo = e.client.get_queue_attributes(QueueUrl=e.fifo(ContentBasedDeduplication="true"),
                                         AttributeNames=["All"])["Attributes"]
    assert set(fifo) == FIFO_ALL
    assert (fifo["DeduplicationScope"], fifo["FifoThroughputLimit"], fifo["FifoQueue"]) == ("queue", "perQueue", "true")
    # LocalStack test_create_queue_and_get_attributes (aws.validated): only what was asked for
    some = e.client.get_queue_attributes(QueueUrl=e.queue(), AttributeNames=["QueueArn", "VisibilityTimeout"])
    assert set(some["Attributes"]) == {"QueueArn", "VisibilityTimeout"}


def test_kms_attributes_come_and_go_with_the_key(e):
    # LocalStack snapshot test_set_queue_attributes_default_values
    url = e.queue()
    e.client.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "testKeyId",
                                                            "KmsDataKeyReusePeriodSeconds": "6000"})
    attrs = e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert set(attrs) == STANDARD_ALL | {"KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds"}
    assert attrs["SqsManagedSseEnabled"] == "false"
    e.client.set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": "", "KmsDataKeyReusePeriodSeconds": "300"})
    attrs = e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert set(attrs) == STANDARD_ALL and attrs["SqsManagedSseEnabled"] == "false"


def test_set_fifo_queue_true_on_a_fifo_queue_is_accepted(e):
    # LocalStack test_set_unsupported_attribute_fifo (aws.validated)
    url = e.fifo()
    assert keys(e.client.set_queue_attributes(QueueUrl=url, Attributes={"FifoQueue": "true"})) == set()


def test_empty_policy_and_redrive_policy_remove_them(e):
    # LocalStack test_set_empty_queue_policy and test_set_empty_redrive_policy (aws.validated)
    dlq = e.queue("dlq")
    url = e.queue("src", RedrivePolicy=json.dumps({"deadLetterTargetArn": e.arn(dlq), "maxReceiveCount": "42"}),
                  Policy=json.dumps({"Version": "2012-10-17", "Statement": []}))
    e.client.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": "", "Policy": ""})
    attrs = e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in attrs and "Policy" not in attrs


def test_purge(e):
    # LocalStack test_purge_queue (aws.validated): messages go, later sends stay
    url = e.queue()
    for i in range(3):
        e.client.send_message(QueueUrl=url, MessageBody=f"test-0-{i}")
    assert keys(e.client.purge_queue(QueueUrl=url)) == set()
    assert e.bodies(url) == []
    e.client.send_message(QueueUrl=url, MessageBody="test-1-0")
    assert e.bodies(url) == ["test-1-0"]


def test_tags(e):
    # LocalStack snapshot test_tag_untag_queue, test_untag_queue_ignores_non_existing_tag and
    # test_queue_list_nonexistent_tags (aws.validated)
    url = e.queue()
    assert keys(e.client.list_queue_tags(QueueUrl=url)) == set()
    assert keys(e.client.tag_queue(QueueUrl=url, Tags={"tag1": "value1", "tag2": "value2", "tag3": ""})) == set()
    assert e.client.list_queue_tags(QueueUrl=url)["Tags"] == {"tag1": "value1", "tag2": "value2", "tag3": ""}
    assert keys(e.client.untag_queue(QueueUrl=url, TagKeys=["tag1", "tag3", "nope"])) == set()
    assert e.client.list_queue_tags(QueueUrl=url)["Tags"] == {"tag2": "value2"}
    e.client.untag_queue(QueueUrl=url, TagKeys=["tag2"])
    assert keys(e.client.list_queue_tags(QueueUrl=url)) == set()
    # CreateQueue's tags (test_create_queue_with_tags, aws.validated)
    tagged = e.client.create_queue(QueueName="t", tags={"a": "1"})["QueueUrl"]
    assert e.client.list_queue_tags(QueueUrl=tagged)["Tags"] == {"a": "1"}


def test_permissions(e):
    # LocalStack snapshot test_sqs_permission_lifecycle
    url = e.queue()
    arn = e.arn(url)
    account = arn.split(":")[4]
    assert keys(e.client.add_permission(QueueUrl=url, Label="crossaccountpermission",
                                        AWSAccountIds=[account, "668614515564"], Actions=["ReceiveMessage"])) == set()
    policy = json.loads(e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"])
    assert list(policy) == ["Version", "Id", "Statement"]
    assert policy["Version"] == "2008-10-17" and policy["Id"].startswith(arn + "/")
    (statement,) = policy["Statement"]
    principals = statement.pop("Principal")["AWS"]   # AWS lists them in no set order
    assert sorted(principals) == sorted([f"arn:aws:iam::{account}:root", "arn:aws:iam::668614515564:root"])
    assert statement == {"Sid": "crossaccountpermission", "Effect": "Allow", "Action": "SQS:ReceiveMessage",
                         "Resource": arn}
    assert keys(e.client.remove_permission(QueueUrl=url, Label="crossaccountpermission")) == set()
    assert keys(e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])) == set()
    e.client.add_permission(QueueUrl=url, Label="one", AWSAccountIds=[account], Actions=["ReceiveMessage"])
    statement = json.loads(e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
                           ["Attributes"]["Policy"])["Statement"][0]
    assert statement["Principal"] == {"AWS": f"arn:aws:iam::{account}:root"}


def test_list_dead_letter_source_queues(e):
    # LocalStack test_dead_letter_queue_list_sources (aws.validated): the member is queueUrls
    dlq = e.queue("dlq")
    policy = json.dumps({"deadLetterTargetArn": e.arn(dlq), "maxReceiveCount": 50})
    sources = {e.queue("s1", RedrivePolicy=policy), e.queue("s2", RedrivePolicy=policy)}
    response = e.client.list_dead_letter_source_queues(QueueUrl=dlq)
    assert keys(response) == {"queueUrls"} and set(response["queueUrls"]) == sources


# --- messages ----------------------------------------------------------------------------------

def test_send_receive_delete(e):
    url = e.queue()
    sent = e.client.send_message(QueueUrl=url, MessageBody="message")
    # LocalStack test_send_receive_message and test_sequence_number (aws.validated)
    assert keys(sent) == {"MessageId", "MD5OfMessageBody"}
    assert sent["MD5OfMessageBody"] == "78e731027d8fd50ed642340b7c9a63b3"
    received = e.client.receive_message(QueueUrl=url, AttributeNames=["All"])
    (m,) = received["Messages"]
    # LocalStack snapshot test_receive_message_attribute_names_filters (all_attributes)
    assert set(m) == {"MessageId", "ReceiptHandle", "MD5OfBody", "Body", "Attributes"}
    assert set(m["Attributes"]) == {"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId",
                                    "SentTimestamp"}
    assert m["MessageId"] == sent["MessageId"] and m["Attributes"]["ApproximateReceiveCount"] == "1"
    assert keys(e.client.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])) == set()
    # LocalStack snapshot test_receive_empty_queue: an empty answer has no Messages member
    assert keys(e.client.receive_message(QueueUrl=url)) == set()
    # LocalStack test_delete_message_with_deleted_receipt_handle (aws.validated): again, no error
    e.client.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_message_attribute_filters(e):
    # LocalStack snapshot test_receive_message_message_attribute_names_filters (MD5s as AWS computed them)
    url = e.queue(VisibilityTimeout="0")
    sent = e.client.send_message(QueueUrl=url, MessageBody="msg", MessageAttributes={
        "Help.Me": {"DataType": "String", "StringValue": "Me"},
        "Hello": {"DataType": "String", "StringValue": "There"},
        "General": {"DataType": "String", "StringValue": "Kenobi"}})
    assert sent["MD5OfMessageAttributes"] == "4c360f3fdafd970e05fae2f149d997f5"

    def receive(names):
        (m,) = e.client.receive_message(QueueUrl=url, MessageAttributeNames=names)["Messages"]
        return sorted(m.get("MessageAttributes", {})), m.get("MD5OfMessageAttributes")
    everything = (["General", "Hello", "Help.Me"], "4c360f3fdafd970e05fae2f149d997f5")
    assert receive([]) == ([], None)
    assert receive(["All"]) == receive(["*"]) == receive([".*"]) == everything
    assert receive(["Foo", "Help"]) == ([], None)
    assert receive(["Hello", "General"]) == (["General", "Hello"], "fca026605781cb4126a1e9044df24232")
    assert receive(["Foo", "Hello"]) == (["Hello"], "a311262e065454b75da111d535b8dacd")
    assert receive(["Hel.*"]) == (["Hello", "Help.Me"], "83fee93c1bcd8b9a5a923ffacdc636c7")
    assert receive(["AWS."]) == ([], None)


def test_system_attribute_filters(e, protocol):
    # LocalStack snapshots test_receive_message_attribute_names_filters and
    # test_message_system_attribute_names_with_attribute_names: given both lists, JSON answers
    # MessageSystemAttributeNames and Query AttributeNames
    url = e.queue(VisibilityTimeout="0")
    e.client.send_message(QueueUrl=url, MessageBody="msg")

    def names(**kw):
        return set(e.client.receive_message(QueueUrl=url, **kw)["Messages"][0].get("Attributes", {}))
    assert names(AttributeNames=["SenderId"]) == {"SenderId"}
    assert names(AttributeNames=["SenderId", "SequenceNumber"]) == {"SenderId"}
    if protocol == "json":
        assert names(MessageSystemAttributeNames=["SenderId"]) == {"SenderId"}
        both = names(MessageSystemAttributeNames=["All"], AttributeNames=["SenderId"])
        assert both == {"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount", "SenderId", "SentTimestamp"}


def test_unicode_attribute_names(e):
    # LocalStack test_send_message_with_invalid_string_attributes (aws.validated)
    url = e.queue()
    attributes = {"attr.1øßä": {"StringValue": "Valida", "DataType": "String"}}
    e.client.send_message(QueueUrl=url, MessageBody="test", MessageAttributes=attributes)
    (m,) = e.client.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert m["MessageAttributes"] == attributes


def test_trace_header_becomes_aws_trace_header(e):
    # LocalStack snapshot test_aws_trace_header_propagation
    header = "Root=1-3152b799-8954dae64eda91bc9a23a7e8;Parent=7fa8c0f79203be72;Sampled=1"

    def add_header(request, **_):
        request.headers["X-Amzn-Trace-Id"] = header
    url = e.queue()
    e.client.meta.events.register("before-send.sqs.SendMessage", add_header)
    try:
        e.client.send_message(QueueUrl=url, MessageBody="test")
    finally:
        e.client.meta.events.unregister("before-send.sqs.SendMessage", add_header)
    (m,) = e.client.receive_message(QueueUrl=url, AttributeNames=["SentTimestamp", "AWSTraceHeader"])["Messages"]
    assert set(m["Attributes"]) == {"AWSTraceHeader", "SentTimestamp"}
    assert m["Attributes"]["AWSTraceHeader"] == header


def test_system_attribute_md5(e):
    # LocalStack test_system_attributes_have_no_effect_on_attr_md5 (aws.validated)
    url = e.queue()
    attrs = {"timestamp": {"StringValue": "1493147359900", "DataType": "Number"}}
    trace = {"AWSTraceHeader": {"StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;"
                                               "Sampled=1", "DataType": "String"}}
    plain = e.client.send_message(QueueUrl=url, MessageBody="test", MessageAttributes=attrs)
    traced = e.client.send_message(QueueUrl=url, MessageBody="test", MessageAttributes=attrs,
                                   MessageSystemAttributes=trace)
    assert plain["MD5OfMessageAttributes"] == traced["MD5OfMessageAttributes"]
    assert "MD5OfMessageSystemAttributes" not in plain
    assert traced["MD5OfMessageSystemAttributes"] == "5ae4d5d7636402d80f4eb6d213245a88"


def test_batches_leave_out_empty_lists(e):
    # LocalStack snapshot test_send_message_batch_with_oversized_contents_with_updated_maximum_message_size:
    # no Failed member when nothing failed
    url = e.queue()
    sent = e.client.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "message-0"},
                                                              {"Id": "2", "MessageBody": "message-1"}])
    assert keys(sent) == {"Successful"}
    assert [set(s) for s in sent["Successful"]] == [{"Id", "MessageId", "MD5OfMessageBody"}] * 2
    ms = e.client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    changed = e.client.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 60} for i, m in enumerate(ms)])
    assert keys(changed) == {"Successful"}
    deleted = e.client.delete_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(ms)])
    assert keys(deleted) == {"Successful"} and [d["Id"] for d in deleted["Successful"]] == ["0", "1"]


def test_batch_entry_failures(e):
    # LocalStack snapshot test_send_batch_message_size (AWS's Failed entry) and
    # test_batch_send_with_invalid_char_should_succeed (aws.validated)
    url = e.queue(MaximumMessageSize="1024")
    result = e.client.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "a4cff0d1-1961-44bd-ae53-c6d5ed71ed08", "MessageBody": "a" * 1024},
        {"Id": "35b535ed-b76a-4ebd-b749-6eb35cdb55ee", "MessageBody": "a" * 1025},
        {"Id": "9", "MessageBody": "\x01"}])
    assert [s["Id"] for s in result["Successful"]] == ["a4cff0d1-1961-44bd-ae53-c6d5ed71ed08"]
    assert result["Successful"][0]["MD5OfMessageBody"] == "c9a34cfc85d982698c6ac89f76071abd"
    too_long, bad_char = result["Failed"]
    assert too_long == {"Id": "35b535ed-b76a-4ebd-b749-6eb35cdb55ee", "SenderFault": True,
                        "Code": "InvalidParameterValue",
                        "Message": "One or more parameters cannot be validated. Reason: Message must be shorter "
                                   "than 1024 bytes."}
    assert (bad_char["Id"], bad_char["Code"]) == ("9", "InvalidMessageContents")


# --- visibility --------------------------------------------------------------------------------

def test_change_visibility_of_a_message_not_in_flight(e):
    # LocalStack snapshot test_change_message_visibility_after_visibility_timeout_expiration (200);
    # JustEat ChangeMessageVisibilityAsync_MessageNotInFlight, verified against AWS (the message
    # stays visible). Timeout 0 stands for a timeout that ran out.
    url = e.queue()
    handle = e.received(url, "test", visibility_timeout=0)["ReceiptHandle"]
    assert keys(e.client.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=30)) == set()
    assert e.bodies(url) == ["test"]


@pytest.mark.parametrize("batch", [False, True], ids=["single", "batch"])
def test_change_visibility_through_a_superseded_handle(e, batch):
    # LocalStack test_terminate_visibility_timeout_after_receive (aws.validated)
    url = e.queue()
    first = e.received(url, "test", visibility_timeout=0)["ReceiptHandle"]
    (again,) = e.client.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]
    assert again["ReceiptHandle"] != first
    if batch:
        result = e.client.change_message_visibility_batch(QueueUrl=url, Entries=[
            {"Id": "a", "ReceiptHandle": first, "VisibilityTimeout": 0}])
        assert keys(result) == {"Successful"}
    else:
        e.client.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=0)
    assert e.bodies(url) == ["test"]


def test_delete_with_an_expired_handle_deletes_from_a_standard_queue(e):
    # LocalStack test_delete_after_visibility_timeout and test_remove_message_with_old_receipt_handle
    # (aws.validated)
    url = e.queue()
    handle = e.received(url, "foobar", visibility_timeout=0)["ReceiptHandle"]
    e.client.delete_message(QueueUrl=url, ReceiptHandle=handle)
    assert e.bodies(url) == []


# --- FIFO --------------------------------------------------------------------------------------

def test_fifo_send_and_receive_attributes(e):
    # LocalStack snapshot test_fifo_message_attributes; SequenceNumber: "the large, non-consecutive
    # number" (SendMessage API reference, whose example is 18849496460467696128)
    url = e.fifo(ContentBasedDeduplication="true", VisibilityTimeout="0")
    sent = e.client.send_message(QueueUrl=url, MessageBody="message-body-1", MessageGroupId="group-1",
                                 MessageDeduplicationId="dedup-1")
    assert keys(sent) == {"MessageId", "MD5OfMessageBody", "SequenceNumber"}
    assert re.fullmatch(r"[1-9][0-9]{19}", sent["SequenceNumber"])
    (m,) = e.client.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert m["Attributes"]["SequenceNumber"] == sent["SequenceNumber"]
    assert {k: v for k, v in m["Attributes"].items() if k in ("MessageDeduplicationId", "MessageGroupId",
                                                              "ApproximateReceiveCount")} == {
        "MessageDeduplicationId": "dedup-1", "MessageGroupId": "group-1", "ApproximateReceiveCount": "1"}
    assert set(m["Attributes"]) == {"ApproximateFirstReceiveTimestamp", "ApproximateReceiveCount",
                                    "MessageDeduplicationId", "MessageGroupId", "SenderId", "SentTimestamp",
                                    "SequenceNumber"}
    later = e.client.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="group-1",
                                  MessageDeduplicationId="dedup-2")
    assert int(later["SequenceNumber"]) > int(sent["SequenceNumber"])   # test_fifo_sequence_number_increases


def test_fifo_delay_zero_is_accepted_and_the_queue_delay_applies(e):
    # LocalStack snapshot test_fifo_queue_send_message_with_zero_delay_defaults_to_queue_delay
    url = e.fifo(ContentBasedDeduplication="true", DelaySeconds="2")
    e.client.send_message(QueueUrl=url, MessageBody="message-1", MessageGroupId="1", DelaySeconds=0)
    batch = e.client.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "b", "MessageBody": "message-2", "MessageGroupId": "1", "DelaySeconds": 0}])
    assert keys(batch) == {"Successful"}
    assert e.bodies(url) == []
    counts = e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert counts["Attributes"] == {"ApproximateNumberOfMessagesDelayed": "2"}


def test_fifo_groups_queue_up_behind_those_never_received(e):
    # LocalStack test_fifo_receive_message_with_zero_visibility_timeout (aws.validated)
    url = e.fifo(ContentBasedDeduplication="true")
    for body, group in (("g1-m1", "group-1"), ("g2-m1", "group-2"), ("g2-m2", "group-2"), ("g3-m1", "group-3"),
                        ("g1-m2", "group-1")):
        e.client.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    later()
    assert e.bodies(url, 3, VisibilityTimeout=0) == ["g1-m1", "g1-m2", "g2-m1"]
    assert e.bodies(url, 10, VisibilityTimeout=0) == ["g3-m1", "g1-m1", "g1-m2", "g2-m1", "g2-m2"]


def test_fifo_head_made_visible_is_received_with_other_groups(e):
    # LocalStack test_fifo_message_group_visibility_after_terminate_visibility_timeout
    # (aws.validated)
    url = e.fifo(ContentBasedDeduplication="true")
    for body, group in (("g1-m1", "group-1"), ("g1-m2", "group-1"), ("g2-m1", "group-2")):
        e.client.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    later()
    first, _ = e.client.receive_message(QueueUrl=url, MaxNumberOfMessages=2)["Messages"]
    e.client.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    assert e.bodies(url, 3) == ["g2-m1", "g1-m1"]


@pytest.mark.parametrize("held,expected", [(0, []), (1, ["foo"]), (2, ["foo", "bar"])])
def test_fifo_a_message_in_flight_hides_the_rest_of_its_group(e, held, expected):
    # LocalStack snapshot test_fifo_group_visibility_extends_with_change_message_visibility: the
    # message kept in flight and all after it in its group stay hidden. AWS's run
    # let the others' timeouts run out; here a change to 0 makes them visible.
    url = e.fifo()
    for body in ("foo", "bar", "baz"):
        e.client.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="1", MessageDeduplicationId=body)
    ms = e.client.receive_message(QueueUrl=url, MaxNumberOfMessages=5)["Messages"]
    assert [m["Body"] for m in ms] == ["foo", "bar", "baz"]
    for i, m in enumerate(ms):
        if i != held:
            e.client.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    assert e.bodies(url, 5) == expected


def test_fifo_deduplication_and_purge(e):
    # LocalStack test_fifo_deduplication_arrives_once_after_delete (snapshot) and
    # test_purge_queue_clears_fifo_deduplication_cache (aws.validated)
    url = e.fifo()
    first = e.client.send_message(QueueUrl=url, MessageBody="message-1", MessageGroupId="g", MessageDeduplicationId="d")
    again = e.client.send_message(QueueUrl=url, MessageBody="message-1", MessageGroupId="g", MessageDeduplicationId="d")
    assert again["MessageId"] == first["MessageId"]
    e.client.purge_queue(QueueUrl=url)
    e.client.send_message(QueueUrl=url, MessageBody="message-2", MessageGroupId="g", MessageDeduplicationId="d")
    assert e.bodies(url) == ["message-2"]


@pytest.mark.parametrize("created,switched", [("queue", "messageGroup"), ("messageGroup", "queue")])
def test_fifo_deduplication_keeps_its_creation_scope(e, created, switched):
    # LocalStack snapshots test_fifo_change_to_high_throughput_after_creation and
    # test_fifo_change_to_regular_throughput_after_creation: the attribute changes, deduplication
    # does not.
    url = e.fifo(DeduplicationScope=created)
    limit = "perMessageGroupId" if switched == "messageGroup" else "perQueue"
    e.client.set_queue_attributes(QueueUrl=url, Attributes={"DeduplicationScope": switched, "FifoThroughputLimit": limit})
    attrs = e.client.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert (attrs["DeduplicationScope"], attrs["FifoThroughputLimit"]) == (switched, limit)
    e.client.send_message(QueueUrl=url, MessageBody="Test4", MessageGroupId="group4", MessageDeduplicationId="dedup_2")
    e.client.send_message(QueueUrl=url, MessageBody="Test5", MessageGroupId="group5", MessageDeduplicationId="dedup_2")
    assert e.bodies(url) == (["Test4"] if created == "queue" else ["Test4", "Test5"])


def test_fifo_message_group_scope_without_throughput_limit(e):
    # LocalStack snapshot test_sqs_fifo_message_group_scope_no_throughput_setting
    url = e.fifo(ContentBasedDeduplication="true", DeduplicationScope="messageGroup")
    e.client.send_message(QueueUrl=url, MessageBody="Test", MessageGroupId="group1")
    e.client.send_message(QueueUrl=url, MessageBody="Test", MessageGroupId="group2")
    assert e.bodies(url) == ["Test", "Test"]


def test_fifo_counts_a_blocked_group_as_visible(e):
    # LocalStack test_fifo_approximate_number_of_messages_not_visible (aws.validated)
    url = e.fifo(ContentBasedDeduplication="true")
    for i in range(6):
        e.client.send_message(QueueUrl=url, MessageBody=f"message-{i + 1}", MessageGroupId=str(i // 2 + 1))
    e.client.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    e.client.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    counts = e.client.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"])
    assert counts["Attributes"] == {"ApproximateNumberOfMessages": "4", "ApproximateNumberOfMessagesNotVisible": "2",
                                    "ApproximateNumberOfMessagesDelayed": "0"}


# --- dead-letter queues and move tasks ---------------------------------------------------------

def test_dead_lettered_message_keeps_its_receive_count(e):
    # LocalStack snapshot test_dead_letter_queue_message_attributes
    url, dlq = e.with_dlq(max_receive_count=1)
    trace = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    e.client.send_message(QueueUrl=url, MessageBody="message-1",
                          MessageAttributes={"MyAttribute": {"StringValue": "foobar", "DataType": "String"}},
                          MessageSystemAttributes={"AWSTraceHeader": {"StringValue": trace, "DataType": "String"}})
    for _ in range(2):
        e.client.receive_message(QueueUrl=url, VisibilityTimeout=0)
    (m,) = e.client.receive_message(QueueUrl=dlq, AttributeNames=["All"], MessageAttributeNames=["All"])["Messages"]
    assert m["Attributes"]["ApproximateReceiveCount"] == "2"
    assert m["Attributes"]["AWSTraceHeader"] == trace
    assert m["Attributes"]["DeadLetterQueueSourceArn"] == e.arn(url)
    assert m["MessageAttributes"] == {"MyAttribute": {"StringValue": "foobar", "DataType": "String"}}
    assert m["MD5OfMessageAttributes"] == "adb59cd4678ea5a855436b949cd07ab6"


def wait_for(condition, timeout: float = 8.0):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def dead_letters(e: Env, n: int) -> tuple[str, str]:
    url, dlq = e.with_dlq(max_receive_count=1)
    for i in range(n):
        e.client.send_message(QueueUrl=url, MessageBody=f"message-{i}")
    for _ in range(2 * n):
        e.client.receive_message(QueueUrl=url, VisibilityTimeout=0)
    return url, dlq


def test_move_task_completes(e):
    # LocalStack move-task snapshot test_basic_move_task_workflow
    url, dlq = dead_letters(e, 2)
    destination = e.queue("destination")
    started = e.client.start_message_move_task(SourceArn=e.arn(dlq), DestinationArn=e.arn(destination))
    assert keys(started) == {"TaskHandle"}
    done = wait_for(lambda: [t for t in e.client.list_message_move_tasks(SourceArn=e.arn(dlq))["Results"]
                             if t["Status"] == "COMPLETED"])
    (task,) = done
    assert set(task) == {"ApproximateNumberOfMessagesMoved", "ApproximateNumberOfMessagesToMove", "DestinationArn",
                         "SourceArn", "StartedTimestamp", "Status"}
    assert (task["ApproximateNumberOfMessagesMoved"], task["ApproximateNumberOfMessagesToMove"]) == (2, 2)
    assert sorted(e.bodies(destination)) == ["message-0", "message-1"]


def test_move_task_cancel(e):
    # LocalStack move-task snapshot test_move_task_cancel
    url, dlq = dead_letters(e, 10)
    destination = e.queue("destination")
    handle = e.client.start_message_move_task(SourceArn=e.arn(dlq), DestinationArn=e.arn(destination),
                                              MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    (running,) = e.client.list_message_move_tasks(SourceArn=e.arn(dlq))["Results"]
    assert set(running) == {"ApproximateNumberOfMessagesMoved", "ApproximateNumberOfMessagesToMove", "DestinationArn",
                            "MaxNumberOfMessagesPerSecond", "SourceArn", "StartedTimestamp", "Status", "TaskHandle"}
    assert (running["Status"], running["TaskHandle"], running["ApproximateNumberOfMessagesToMove"]) == (
        "RUNNING", handle, 10)
    cancelled = e.client.cancel_message_move_task(TaskHandle=handle)
    assert keys(cancelled) == {"ApproximateNumberOfMessagesMoved"}
    (after,) = e.client.list_message_move_tasks(SourceArn=e.arn(dlq))["Results"]
    assert after["Status"] == "CANCELLED" and "TaskHandle" not in after


def test_every_action_is_covered():
    """The actions the tests of this corpus call, against the model's list."""
    import botocore.session
    actions = set(botocore.session.get_session().get_service_model("sqs").operation_names)
    called = {
        "CreateQueue", "GetQueueUrl", "ListQueues", "DeleteQueue", "GetQueueAttributes", "SetQueueAttributes",
        "PurgeQueue", "TagQueue", "UntagQueue", "ListQueueTags", "AddPermission", "RemovePermission",
        "ListDeadLetterSourceQueues", "SendMessage", "SendMessageBatch", "ReceiveMessage", "DeleteMessage",
        "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch", "StartMessageMoveTask",
        "CancelMessageMoveTask", "ListMessageMoveTasks"}
    assert actions == called
    source = open(__file__).read()
    snake = {re.sub(r"(?<!^)(?=[A-Z])", "_", a).lower() for a in actions}
    assert all(f"client.{name}(" in source for name in snake), sorted(n for n in snake if f"client.{n}(" not in source)

