"""boto3 (JSON protocol) against a real server process: every action and the behaviours around
them. boto3 verifies body and attribute MD5s itself on every send and receive."""

import threading
import time

import pytest
from botocore.exceptions import ClientError

from tests.endpoint.conftest import make_client


def code(exc: pytest.ExceptionInfo) -> str:
    return exc.value.response["Error"]["Code"]


def test_queue_lifecycle(sqs, server, region):
    url = sqs.create_queue(QueueName="q1", Attributes={"VisibilityTimeout": "7"}, tags={"a": "1"})["QueueUrl"]
    assert url == f"{server.url}/000000000000/q1"
    assert sqs.get_queue_url(QueueName="q1")["QueueUrl"] == url
    sqs.create_queue(QueueName="q2")
    assert sqs.list_queues()["QueueUrls"] == [url, f"{server.url}/000000000000/q2"]
    assert sqs.list_queues(QueueNamePrefix="q2")["QueueUrls"] == [f"{server.url}/000000000000/q2"]
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attrs["VisibilityTimeout"] == "7"
    assert attrs["QueueArn"] == f"arn:aws:sqs:{region}:000000000000:q1"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "3"})
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"] == \
        {"DelaySeconds": "3"}
    sqs.delete_queue(QueueUrl=url)
    with pytest.raises(ClientError) as e:
        sqs.get_queue_url(QueueName="q1")
    assert code(e) == "AWS.SimpleQueueService.NonExistentQueue"


def test_tags_and_permissions(sqs):
    url = sqs.create_queue(QueueName="t", tags={"a": "1"})["QueueUrl"]
    sqs.tag_queue(QueueUrl=url, Tags={"b": "2", "c": "3"})
    sqs.untag_queue(QueueUrl=url, TagKeys=["a"])
    assert sqs.list_queue_tags(QueueUrl=url)["Tags"] == {"b": "2", "c": "3"}
    sqs.add_permission(QueueUrl=url, Label="lbl", AWSAccountIds=["111122223333"], Actions=["SendMessage"])
    assert "lbl" in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])["Attributes"]["Policy"]
    sqs.remove_permission(QueueUrl=url, Label="lbl")


def test_send_receive_delete_with_attributes(sqs):
    url = sqs.create_queue(QueueName="m")["QueueUrl"]
    attrs = {"s": {"DataType": "String", "StringValue": "h\u00e9llo"},
             "n": {"DataType": "Number", "StringValue": "42"},
             "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\x02"}}
    body = "tab\there\r\nnew line <xml> & \"quotes\" \u00e9\U0001F600"
    sent = sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attrs)
    msgs = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"],
                               MessageSystemAttributeNames=["All"])["Messages"]
    assert len(msgs) == 1
    m = msgs[0]
    assert m["Body"] == body and m["MessageId"] == sent["MessageId"]
    assert m["MessageAttributes"] == attrs
    assert m["Attributes"]["ApproximateReceiveCount"] == "1"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_batches(sqs):
    url = sqs.create_queue(QueueName="b")["QueueUrl"]
    out = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": f"m{i}", "MessageAttributes": {"i": {"DataType": "Number", "StringValue": str(i)}}}
        for i in range(10)])
    assert len(out["Successful"]) == 10 and not out.get("Failed")
    got = []
    while len(got) < 10:
        got += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)["Messages"]
    entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
    out = sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{**e, "VisibilityTimeout": 60} for e in entries[:5]]
        + [{"Id": "bad", "ReceiptHandle": "garbage", "VisibilityTimeout": 1}])
    assert len(out["Successful"]) == 5 and [f["Id"] for f in out["Failed"]] == ["bad"]
    out = sqs.delete_message_batch(QueueUrl=url, Entries=entries)
    assert len(out["Successful"]) == 10
    with pytest.raises(ClientError) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "x"}] * 2)
    assert code(e) == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    with pytest.raises(ClientError) as e:
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)])
    assert code(e) == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"


def test_fifo_order_and_dedup(sqs):
    url = sqs.create_queue(QueueName="f.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    seqs = []
    for i in range(5):
        r = sqs.send_message(QueueUrl=url, MessageBody=f"m{i}", MessageGroupId="g", MessageDeduplicationId=f"d{i}")
        seqs.append(int(r["SequenceNumber"]))
    assert seqs == sorted(seqs)
    dup = sqs.send_message(QueueUrl=url, MessageBody="again", MessageGroupId="g", MessageDeduplicationId="d0")
    assert int(dup["SequenceNumber"]) == seqs[0]
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]]
    assert bodies == [f"m{i}" for i in range(5)]
    with pytest.raises(ClientError) as e:
        sqs.send_message(QueueUrl=url, MessageBody="x")
    assert code(e) == "MissingParameter"


def test_visibility_and_long_poll_wakeups(sqs):
    url = sqs.create_queue(QueueName="v")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    m = sqs.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]

    def release():
        time.sleep(0.3)
        make_client_same = sqs  # boto3 clients are thread-safe for calls
        make_client_same.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"],
                                                   VisibilityTimeout=0)
    t = threading.Thread(target=release)
    started = time.monotonic()
    t.start()
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10).get("Messages")
    t.join()
    assert got and got[0]["MessageId"] == m["MessageId"]
    assert time.monotonic() - started < 3


def test_long_poll_returns_on_send_and_on_delay_expiry(sqs, server, region):
    url = sqs.create_queue(QueueName="lp")["QueueUrl"]
    other = make_client(server, region)
    threading.Timer(0.3, lambda: other.send_message(QueueUrl=url, MessageBody="late")).start()
    started = time.monotonic()
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)["Messages"]
    assert got[0]["Body"] == "late" and time.monotonic() - started < 3
    sqs.send_message(QueueUrl=url, MessageBody="delayed", DelaySeconds=1)
    started = time.monotonic()
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=10)["Messages"]
    elapsed = time.monotonic() - started
    assert got[0]["Body"] == "delayed" and 0.5 < elapsed < 3


def test_long_poll_times_out_and_queue_default(sqs):
    url = sqs.create_queue(QueueName="lpd", Attributes={"ReceiveMessageWaitTimeSeconds": "1"})["QueueUrl"]
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    assert 0.9 < time.monotonic() - started < 3
    started = time.monotonic()
    assert "Messages" not in sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert time.monotonic() - started < 0.5
    with pytest.raises(ClientError) as e:
        sqs.receive_message(QueueUrl=url, WaitTimeSeconds=21)
    assert code(e) == "InvalidParameterValue"


def test_dead_letter_queue_and_redrive(sqs):
    dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    src = sqs.create_queue(QueueName="src", Attributes={
        "RedrivePolicy": f'{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"1"}}'})["QueueUrl"]
    src_arn = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq)["queueUrls"] == [src]
    sqs.send_message(QueueUrl=src, MessageBody="poison")
    m = sqs.receive_message(QueueUrl=src)["Messages"][0]
    sqs.change_message_visibility(QueueUrl=src, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
    assert "Messages" not in sqs.receive_message(QueueUrl=src)
    moved = sqs.receive_message(QueueUrl=dlq, MessageSystemAttributeNames=["All"], VisibilityTimeout=0)["Messages"]
    assert moved[0]["Body"] == "poison"
    assert moved[0]["Attributes"]["DeadLetterQueueSourceArn"] == src_arn
    handle = sqs.start_message_move_task(SourceArn=dlq_arn)["TaskHandle"]
    assert handle
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        tasks = sqs.list_message_move_tasks(SourceArn=dlq_arn)["Results"]
        if tasks and tasks[0]["Status"] == "COMPLETED":
            break
        time.sleep(0.2)
    assert tasks[0]["Status"] == "COMPLETED", tasks
    assert sqs.receive_message(QueueUrl=src)["Messages"][0]["Body"] == "poison"
    with pytest.raises(ClientError) as e:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert e.value.response["Error"]["Code"] in ("ResourceNotFoundException",
                                                 "AWS.SimpleQueueService.UnsupportedOperation")


def test_purge(sqs):
    url = sqs.create_queue(QueueName="p")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    sqs.purge_queue(QueueUrl=url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    with pytest.raises(ClientError) as e:
        sqs.purge_queue(QueueUrl=url)
    assert code(e) == "AWS.SimpleQueueService.PurgeQueueInProgress"
    assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


def test_regions_are_separate_namespaces(sqs, server, region):
    sqs.create_queue(QueueName="same")
    other = make_client(server, region + "-b")
    with pytest.raises(ClientError) as e:
        other.get_queue_url(QueueName="same")
    assert code(e) == "AWS.SimpleQueueService.NonExistentQueue"
    other.create_queue(QueueName="same", Attributes={"DelaySeconds": "5"})
    url = sqs.get_queue_url(QueueName="same")["QueueUrl"]
    assert sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["DelaySeconds"])["Attributes"] == \
        {"DelaySeconds": "0"}


@pytest.mark.parametrize("call,expected", [
    (lambda s: s.get_queue_url(QueueName="nope"), "AWS.SimpleQueueService.NonExistentQueue"),
    (lambda s: s.create_queue(QueueName="bad name!"), "InvalidParameterValue"),
    (lambda s: s.create_queue(QueueName="x", Attributes={"Bogus": "1"}), "InvalidAttributeName"),
    (lambda s: s.create_queue(QueueName="x", Attributes={"VisibilityTimeout": "-1"}), "InvalidAttributeValue"),
    (lambda s: s.send_message(QueueUrl="nope", MessageBody="x"), "AWS.SimpleQueueService.NonExistentQueue"),
    (lambda s: s.delete_message(QueueUrl=s.create_queue(QueueName="d")["QueueUrl"], ReceiptHandle="bogus"),
     "ReceiptHandleIsInvalid"),
    (lambda s: s.send_message(QueueUrl=s.create_queue(QueueName="e")["QueueUrl"], MessageBody="\x00"),
     "InvalidMessageContents"),
    (lambda s: s.receive_message(QueueUrl=s.create_queue(QueueName="r")["QueueUrl"], MaxNumberOfMessages=11),
     "InvalidParameterValue"),
    (lambda s: s.send_message_batch(QueueUrl=s.create_queue(QueueName="eb")["QueueUrl"], Entries=[]),
     "AWS.SimpleQueueService.EmptyBatchRequest"),
])
def test_documented_errors(sqs, call, expected):
    with pytest.raises(ClientError) as e:
        call(sqs)
    assert code(e) == expected
