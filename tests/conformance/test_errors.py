"""Every error a client can provoke through an SDK, in both protocols: status, code, exact message.

Each row makes its own queues in a fresh namespace and makes one failing call through the
``client`` fixture, which runs it once over JSON (boto3) and once over Query (botocore with
botocore 1.29's Query model). ``Code`` is what botocore reports as ``Error.Code`` in both
protocols: the Query code (JSON carries it in X-Amzn-Query-Error). Where AWS's JSON ``__type`` was
recorded too, botocore's ``QueryErrorCode`` is checked against it. Errors no SDK lets through
(a missing required member, a wrong type) are in test_wire.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import pytest

from tests.conformance import sources as src
from tests.conformance.conftest import JSON, QUERY
from tests.conformance.helpers import Env, error_of

NON_EXISTENT = "AWS.SimpleQueueService.NonExistentQueue"
NO_QUEUE = {JSON: "The specified queue does not exist.",
            QUERY: "The specified queue does not exist for this wsdl version."}
IPV = "InvalidParameterValue"
IPV_TYPE = "InvalidParameterValueException"
ALLOWED = "#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]"


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[Env], object]
    status: int
    code: str
    message: str | dict[str, str]
    source: src.Source
    json_type: str | None = None          # AWS's JSON __type, where recorded
    also: tuple[src.Source, ...] = field(default=())


def missing_queue_url(e: Env) -> str:
    return e.queue().rsplit("/", 1)[0] + "/missing"


def twice(e: Env, make: Callable[[Env], object]) -> None:
    make(e)
    make(e)


def add_permission(e: Env, url: str, label: str = "p", accounts=("111122223333",), actions=("SendMessage",)):
    e.client.add_permission(QueueUrl=url, Label=label, AWSAccountIds=list(accounts), Actions=list(actions))


def start_task(e: Env, **kw):
    src_url, dlq = e.with_dlq()
    return e.client.start_message_move_task(SourceArn=e.arn(dlq), **kw)


def task_handle(doc: dict) -> str:
    import base64
    return base64.b64encode(json.dumps(doc).encode()).decode()


CASES = [
    # --- queues --------------------------------------------------------------------------------
    Case("get-attributes-of-missing-queue",
         lambda e: e.client.get_queue_attributes(QueueUrl=missing_queue_url(e)),
         400, NON_EXISTENT, NO_QUEUE, src.snapshot("test_non_existent_queue"), "QueueDoesNotExist"),
    Case("get-url-of-missing-queue", lambda e: e.client.get_queue_url(QueueName="missing"),
         400, NON_EXISTENT, NO_QUEUE, src.snapshot("test_non_existent_queue (queue-does-not-exist-url)"),
         "QueueDoesNotExist"),
    Case("queue-url-that-names-no-queue",
         lambda e: e.client.get_queue_attributes(QueueUrl="http://whatever-incorrect-queue-address"),
         400, NON_EXISTENT, NO_QUEUE,
         src.unknown("moto's test_get_nonexistent_queue (a reimplementation, not a recording)")),
    Case("queue-url-that-is-no-address", lambda e: e.client.get_queue_attributes(QueueUrl="a b"),
         400, "InvalidAddress", "The address a b is not valid for this endpoint.",
         src.unknown("InvalidAddress is a modelled error of every queue action; its wording is ours")),
    Case("create-existing-name-other-attribute",
         lambda e: (e.queue("q", DelaySeconds="1"), e.queue("q", DelaySeconds="2")),
         400, "QueueAlreadyExists",
         "A queue already exists with the same name and a different value for attribute DelaySeconds",
         src.snapshot("test_create_queue_with_different_attributes_raises_exception"), "QueueNameExists"),
    Case("create-fifo-existing-name-other-attribute",
         lambda e: (e.fifo("q.fifo", ContentBasedDeduplication="true"),
                    e.fifo("q.fifo", ContentBasedDeduplication="false")),
         400, "QueueAlreadyExists",
         "A queue already exists with the same name and a different value for attribute ContentBasedDeduplication",
         src.snapshot("test_create_fifo_queue_with_different_attributes_raises_error"), "QueueNameExists"),
    Case("create-recently-deleted",
         lambda e: (e.client.delete_queue(QueueUrl=e.queue("gone")), e.queue("gone")),
         400, "AWS.SimpleQueueService.QueueDeletedRecently",
         "You must wait 60 seconds after deleting a queue before you can create another with the same name.",
         src.validated("test_create_queue_recently_deleted"),
         also=(src.model("QueueDeletedRecently, code and status (botocore 1.29)"),)),
    *(Case(f"create-standard-with-{name}", lambda e, n=name, v=value: e.queue("q", **{n: v}),
           400, "InvalidAttributeName", message,
           src.snapshot("test_create_standard_queue_with_fifo_attribute_raises_error"), "InvalidAttributeName")
      for name, value, message in (
          ("FifoQueue", "false", "Unknown Attribute FifoQueue."),
          ("ContentBasedDeduplication", "false", "Unknown Attribute ContentBasedDeduplication."),
          ("DeduplicationScope", "queue", "You can specify the DeduplicationScope only when FifoQueue is set to true."),
          ("FifoThroughputLimit", "perQueue",
           "You can specify the FifoThroughputLimit only when FifoQueue is set to true."))),
    Case("create-fifo-without-suffix", lambda e: e.queue("plain", FifoQueue="true"),
         400, IPV, "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                   "underscores, must end with .fifo suffix and be 1 to 80 in length.",
         src.unknown("the code is recorded (test_fifo_queue_requires_suffix), the wording is not")),
    Case("create-standard-with-fifo-suffix", lambda e: e.client.create_queue(QueueName="plain.fifo"),
         400, IPV, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
         src.unknown("the code is recorded (test_standard_queue_cannot_have_fifo_suffix), the wording is not")),
    Case("create-bad-name", lambda e: e.queue("no spaces"),
         400, IPV, "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length",
         src.unknown("the code is recorded for a .fifo standard queue (test_standard_queue_cannot_have_fifo_suffix), "
                     "the wording is not")),
    Case("create-unknown-attribute", lambda e: e.queue("q", Bogus="1"),
         400, "InvalidAttributeName", "Unknown Attribute Bogus.",
         src.unknown("recorded for GetQueueAttributes (test_get_queue_attributes_with_invalid_arg_returns_error); "
                     "CreateQueue's wording assumed the same")),
    Case("create-attribute-out-of-range", lambda e: e.queue("q", VisibilityTimeout="43201"),
         400, "InvalidAttributeValue", "Invalid value for the parameter VisibilityTimeout.",
         src.unknown("InvalidAttributeValue is CreateQueue's documented error; the wording is ours"),
         also=(src.api("CreateQueue", "Errors: InvalidAttributeValue"),)),
    Case("create-kms-and-sqs-encryption", lambda e: e.queue("q", KmsMasterKeyId="k", SqsManagedSseEnabled="true"),
         400, "InvalidAttributeName", "You can use one type of server-side encryption (SSE) at one time. "
                                      "You can either enable KMS SSE or SQS SSE.",
         src.unknown("recorded for SetQueueAttributes (test_sse_kms_and_sqs_are_mutually_exclusive); "
                     "CreateQueue assumed the same")),
    Case("create-redrive-target-that-is-no-arn",
         lambda e: e.queue("q", RedrivePolicy='{"deadLetterTargetArn": "dummy", "maxReceiveCount": 42}'),
         400, IPV, 'Value {"deadLetterTargetArn": "dummy", "maxReceiveCount": 42} for parameter RedrivePolicy is '
                   "invalid. Reason: Invalid value for deadLetterTargetArn.",
         src.snapshot("test_invalid_dead_letter_arn_rejected_before_lookup (2022 recording)")),
    Case("set-kms-and-sqs-encryption",
         lambda e: e.client.set_queue_attributes(QueueUrl=e.queue(), Attributes={
             "KmsMasterKeyId": "testKeyId", "SqsManagedSseEnabled": "true"}),
         400, "InvalidAttributeName", "You can use one type of server-side encryption (SSE) at one time. "
                                      "You can either enable KMS SSE or SQS SSE.",
         src.snapshot("test_sse_kms_and_sqs_are_mutually_exclusive")),
    Case("set-fifo-queue-on-standard",
         lambda e: e.client.set_queue_attributes(QueueUrl=e.queue(), Attributes={"FifoQueue": "true"}),
         400, "InvalidAttributeName", "Unknown Attribute FifoQueue.",
         src.snapshot("test_set_unsupported_attribute_standard"), "InvalidAttributeName"),
    Case("set-fifo-queue-false-on-fifo",
         lambda e: e.client.set_queue_attributes(QueueUrl=e.fifo(), Attributes={"FifoQueue": "false"}),
         400, "InvalidAttributeValue", "Invalid value for the parameter FifoQueue. Reason: Modifying queue type is "
                                       "not supported.",
         src.snapshot("test_set_unsupported_attribute_fifo"), "InvalidAttributeValue"),
    Case("get-unknown-attribute",
         lambda e: e.client.get_queue_attributes(QueueUrl=e.queue(), AttributeNames=["Foobar"]),
         400, "InvalidAttributeName", "Unknown Attribute Foobar.",
         src.validated("TestSqsQueryApi::test_get_queue_attributes_with_invalid_arg_returns_error")),
    Case("purge-twice-within-a-minute", lambda e: twice(e, lambda e: e.client.purge_queue(QueueUrl=e.queue("pq"))),
         403, "AWS.SimpleQueueService.PurgeQueueInProgress",
         "Only one PurgeQueue operation on pq is allowed every 60 seconds.",
         src.snapshot("test_successive_purge_calls_fail"), "PurgeQueueInProgress"),
    Case("list-queues-max-results-out-of-range", lambda e: e.client.list_queues(MaxResults=1001),
         400, IPV, "Value 1001 for parameter MaxResults is invalid. Reason: MaxResults must be an integer "
                   "between 1 and 1000.",
         src.unknown("the range is documented (ListQueues: 1 to 1000); the wording is ours")),
    Case("list-queues-bad-next-token", lambda e: e.client.list_queues(MaxResults=1, NextToken="bogus"),
         400, IPV, "Invalid NextToken value.", src.unknown("no recording of a bad token found")),
    Case("tag-key-with-aws-prefix",
         lambda e: e.client.tag_queue(QueueUrl=e.queue(), Tags={"aws:x": "1"}),
         400, IPV, "Value aws:x for parameter Tag.Key is invalid. Reason: Tag keys must not start with aws:.",
         src.unknown("the rule is documented (Amazon SQS cost allocation tags); the wording is ours")),
    # --- permissions ---------------------------------------------------------------------------
    Case("add-permission-same-label", lambda e: (add_permission(e, url := e.queue(), "crossaccountpermission"),
                                                  add_permission(e, url, "crossaccountpermission")),
         400, IPV, "Value crossaccountpermission for parameter Label is invalid. Reason: Already exists.",
         src.snapshot("test_sqs_permission_lifecycle"), IPV_TYPE),
    Case("remove-permission-unknown-label",
         lambda e: e.client.remove_permission(QueueUrl=e.queue(), Label="crossaccountpermission2"),
         400, IPV, "Value crossaccountpermission2 for parameter Label is invalid. Reason: can't find label.",
         src.snapshot("test_sqs_permission_lifecycle"), IPV_TYPE),
    Case("add-permission-arn-principal",
         lambda e: add_permission(e, e.queue(), accounts=("arn:aws:iam::111122223333:user/alice",)),
         400, IPV, "Value [arn:aws:iam::111122223333:user/alice] for parameter PrincipalId is invalid. "
                   "Reason: Unable to verify principal.",
         src.issue("github.com/aws/aws-cli/issues/7416 (AWS's answer to an ARN principal)"),
         also=(src.issue("github.com/amazon-archives/aws-sdk-core-ruby/issues/138 (the list shown in brackets)"),)),
    Case("add-permission-unknown-action",
         lambda e: add_permission(e, e.queue(), actions=("Foo",)),
         400, IPV, "Value SQS:Foo for parameter ActionName is invalid. Reason: Please refer to the appropriate WSDL "
                   "for a list of valid actions.",
         src.unknown("Eucalyptus and moto answer so; no AWS recording found")),
    Case("add-permission-owner-only-action",
         lambda e: add_permission(e, e.queue(), actions=("CreateQueue",)),
         400, IPV, "Value SQS:CreateQueue for parameter ActionName is invalid. Reason: Only the queue owner is "
                   "allowed to invoke this action.",
         src.unknown("owner-only actions are documented (SQS Developer Guide, limitations of custom policies); "
                     "the wording is moto's and Eucalyptus's")),
    Case("add-permission-too-many-actions",
         lambda e: add_permission(e, e.queue(), actions=("SendMessage", "ReceiveMessage", "DeleteMessage",
                                                         "ChangeMessageVisibility", "GetQueueAttributes",
                                                         "GetQueueUrl", "PurgeQueue", "ListDeadLetterSourceQueues")),
         403, "OverLimit", "8 Actions were found, maximum allowed is 7.",
         src.unknown("the code and 403 are the model's (OverLimit, botocore 1.29); the wording is moto's"),
         also=(src.api("AddPermission", "a policy can have at most seven actions per statement"),)),
    # --- sending -------------------------------------------------------------------------------
    Case("send-empty-body", lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody=""),
         400, "MissingParameter", "The request must contain the parameter MessageBody.",
         src.snapshot("test_send_empty_message"), "MissingRequiredParameterException"),
    Case("send-invalid-character", lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody="a\uffffb"),
         400, "InvalidMessageContents",
         f"Invalid binary character '#xFFFF' was found in the message body, the set of allowed characters is {ALLOWED}.",
         src.issue("a production rejection quoted verbatim in a public project's test (\"The exact rejection SQS "
                   "returned\")"),
         also=(src.validated("test_send_message_with_invalid_payload_characters (the code)"),)),
    Case("send-too-large", lambda e: e.client.send_message(QueueUrl=e.queue(MaximumMessageSize="1024"),
                                                           MessageBody="a" * 1018,
                                                           MessageAttributes={"k": {"DataType": "String",
                                                                                    "StringValue": "x"}}),
         400, IPV, "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.",
         src.snapshot("test_send_message_with_updated_maximum_message_size"), IPV_TYPE),
    Case("send-delay-on-fifo",
         lambda e: e.client.send_message(QueueUrl=e.fifo(ContentBasedDeduplication="true"), MessageBody="message-1",
                                         MessageGroupId="1", DelaySeconds=2),
         400, IPV, "Value 2 for parameter DelaySeconds is invalid. Reason: The request include parameter that is "
                   "not valid for this queue type.",
         src.snapshot("test_fifo_queue_send_message_with_delay_seconds_fails"), IPV_TYPE),
    Case("send-delay-out-of-range",
         lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody="m", DelaySeconds=901),
         400, IPV, "Value 901 for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.",
         src.unknown("the range is documented (SendMessage: 0 to 900); the wording is ours")),
    Case("send-fifo-without-group",
         lambda e: e.client.send_message(QueueUrl=e.fifo(), MessageBody="m", MessageDeduplicationId="d"),
         400, "MissingParameter", "The request must contain the parameter MessageGroupId.",
         src.snapshot("test_posting_to_fifo_requires_deduplicationid_group_id"), "MissingRequiredParameterException"),
    Case("send-fifo-without-dedup-id",
         lambda e: e.client.send_message(QueueUrl=e.fifo(), MessageBody="m", MessageGroupId="g"),
         400, IPV, "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
                   "provided explicitly",
         src.snapshot("test_posting_to_fifo_requires_deduplicationid_group_id"), IPV_TYPE),
    *(Case(f"send-invalid-group-id-{label}",
           lambda e, g=group: e.client.send_message(QueueUrl=e.queue(), MessageBody="message", MessageGroupId=g),
           400, IPV, f"Value {group} for parameter MessageGroupId is invalid. Reason: MessageGroupId can only include "
                     "alphanumeric and punctuation characters. 1 to 128 in length.",
           src.snapshot(f"test_send_message_to_standard_queue_with_invalid_message_group_id[{label}]"), IPV_TYPE)
      for label, group in (("empty", ""), ("too_long", "a" * 129), ("spaces", "group 123"))),
    *(Case(f"send-invalid-dedup-id-{label}",
           lambda e, d=dedup: e.client.send_message(QueueUrl=e.fifo(), MessageBody="Hello World!",
                                                    MessageGroupId="test", MessageDeduplicationId=d),
           400, IPV, f"Value {dedup} for parameter MessageDeduplicationId is invalid. Reason: MessageDeduplicationId "
                     "can only include alphanumeric and punctuation characters. 1 to 128 in length.",
           src.snapshot(f"test_message_deduplication_id_invalid[{label}]"), IPV_TYPE)
      for label, dedup in (("empty", ""), ("too_long", "a" * 129), ("spaces", "group 123"))),
    Case("send-dedup-id-on-standard",
         lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody="m", MessageDeduplicationId="d"),
         400, IPV, "Value d for parameter MessageDeduplicationId is invalid. Reason: The request include parameter "
                   "that is not valid for this queue type.",
         src.unknown("the wording AWS gives a FIFO-only DelaySeconds, assumed for a dedup id on a standard queue")),
    Case("send-empty-string-attribute",
         lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody="test", MessageAttributes={
             "ErrorDetails": {"StringValue": "", "DataType": "String"}}),
         400, IPV, "Message (user) attribute 'ErrorDetails' must contain a non-empty value of type 'String'.",
         src.snapshot("test_send_message_with_empty_string_attribute"), IPV_TYPE),
    Case("send-attribute-name-with-bad-character",
         lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody="test", MessageAttributes={
             "Invalid-§-attr": {"StringValue": "Valid", "DataType": "String"}}),
         400, IPV, "Message (user) attributes name can only contain upper and lower score characters, digits, "
                   "periods, hyphens and underscores. ",
         src.unknown("the wording is LocalStack's, not recorded"),
         also=(src.validated("test_send_message_with_invalid_string_attributes (an error)"),)),
    Case("send-attribute-value-with-bad-character",
         lambda e: e.client.send_message(QueueUrl=e.queue(), MessageBody="test", MessageAttributes={
             "attr1": {"StringValue": f"Invalid-{chr(8)},{chr(11)}", "DataType": "String"}}),
         400, IPV, f"Invalid binary character '#x8' was found in the value of message (user) attribute 'attr1', "
                   f"the set of allowed characters is {ALLOWED}.",
         src.unknown("the wording mirrors the body's"),
         also=(src.validated("test_invalid_string_attributes_cause_invalid_parameter_value_error (the code)"),)),
    # --- batches -------------------------------------------------------------------------------
    Case("send-batch-too-many-entries",
         lambda e: e.client.send_message_batch(QueueUrl=e.queue(), Entries=[
             {"Id": f"message-{i}", "MessageBody": f"messageBody-{i}"} for i in range(20)]),
         400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
         "Maximum number of entries per request are 10. You have sent 20.",
         src.snapshot("test_too_many_entries_in_batch_request"), "TooManyEntriesInBatchRequest"),
    Case("send-batch-invalid-id",
         lambda e: e.client.send_message_batch(QueueUrl=e.queue(), Entries=[{"Id": "message:1", "MessageBody": "b"}]),
         400, "AWS.SimpleQueueService.InvalidBatchEntryId",
         "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 "
         "letters long.",
         src.snapshot("test_invalid_batch_id"), "InvalidBatchEntryId"),
    Case("send-batch-empty",
         lambda e: e.client.send_message_batch(QueueUrl=e.queue(), Entries=[]),
         400, "AWS.SimpleQueueService.EmptyBatchRequest",
         "There should be at least one SendMessageBatchRequestEntry in the request.",
         src.unknown("the wording is ours"),
         also=(src.validated("test_send_message_batch_with_empty_list (the code)"),)),
    Case("send-batch-repeated-id",
         lambda e: e.client.send_message_batch(QueueUrl=e.queue(), Entries=[{"Id": "a", "MessageBody": "1"},
                                                                             {"Id": "a", "MessageBody": "2"}]),
         400, "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id a repeated.",
         src.unknown("BatchEntryIdsNotDistinct is modelled; the wording is ours")),
    Case("send-batch-too-long",
         lambda e: e.client.send_message_batch(QueueUrl=e.queue(), Entries=[
             {"Id": "1", "MessageBody": "a" * (1048576 - 8), "MessageAttributes": {
                 "k": {"DataType": "String", "StringValue": "x"}}},
             {"Id": "2", "MessageBody": "a"}]),
         400, "AWS.SimpleQueueService.BatchRequestTooLong",
         "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.",
         src.snapshot("test_send_message_batch_with_oversized_contents"), "BatchRequestTooLong"),
    Case("send-batch-fifo-entry-without-group",
         lambda e: e.client.send_message_batch(QueueUrl=e.fifo(), Entries=[
             {"Id": "a", "MessageBody": "messageBody", "MessageGroupId": "g", "MessageDeduplicationId": "d1"},
             {"Id": "b", "MessageBody": "messageBody", "MessageDeduplicationId": "d2"}]),
         400, IPV, "The request must contain the parameter MessageGroupId.",
         src.snapshot("test_send_batch_missing_message_group_id_for_fifo_queue"), IPV_TYPE),
    Case("send-batch-fifo-entry-without-dedup-id",
         lambda e: e.client.send_message_batch(QueueUrl=e.fifo(), Entries=[
             {"Id": "a", "MessageBody": "messageBody", "MessageGroupId": "g", "MessageDeduplicationId": "d1"},
             {"Id": "b", "MessageBody": "messageBody", "MessageGroupId": "g"}]),
         400, IPV, "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
                   "provided explicitly",
         src.snapshot("test_send_batch_missing_deduplication_id_for_fifo_queue"), IPV_TYPE),
    Case("delete-batch-invalid-id",
         lambda e: e.client.delete_message_batch(QueueUrl=e.queue(), Entries=[{"Id": "invalid:id",
                                                                               "ReceiptHandle": "testHandle1"}]),
         400, "AWS.SimpleQueueService.InvalidBatchEntryId",
         "A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 "
         "letters long.",
         src.snapshot("test_delete_message_batch_invalid_msg_id[invalid:id]"), "InvalidBatchEntryId"),
    Case("delete-batch-too-many-entries",
         lambda e: e.client.delete_message_batch(QueueUrl=e.queue(), Entries=[
             {"Id": str(i), "ReceiptHandle": "h"} for i in range(20)]),
         400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
         "Maximum number of entries per request are 10. You have sent 20.",
         src.snapshot("test_delete_message_batch_with_too_large_batch"), "TooManyEntriesInBatchRequest"),
    Case("change-visibility-batch-too-many-entries",
         lambda e: e.client.change_message_visibility_batch(QueueUrl=e.queue(), Entries=[
             {"Id": str(i), "ReceiptHandle": "h", "VisibilityTimeout": 123} for i in range(20)]),
         400, "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
         "Maximum number of entries per request are 10. You have sent 20.",
         src.snapshot("test_change_message_visibility_batch_with_too_large_batch"), "TooManyEntriesInBatchRequest"),
    # --- receiving, deleting, visibility -------------------------------------------------------
    Case("receive-too-many", lambda e: e.client.receive_message(QueueUrl=e.queue(), MaxNumberOfMessages=11),
         400, IPV, "Value 11 for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, "
                   "if provided.",
         src.snapshot("test_send_receive_max_number_of_messages"), IPV_TYPE),
    Case("receive-wait-too-long", lambda e: e.client.receive_message(QueueUrl=e.queue(), WaitTimeSeconds=21),
         400, IPV, "Value 21 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
         src.snapshot("test_send_receive_wait_time_seconds"), IPV_TYPE),
    Case("receive-negative-wait", lambda e: e.client.receive_message(QueueUrl=e.queue(), WaitTimeSeconds=-1),
         400, IPV, "Value -1 for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.",
         src.snapshot("test_send_receive_wait_time_seconds"), IPV_TYPE),
    Case("receive-visibility-out-of-range",
         lambda e: e.client.receive_message(QueueUrl=e.queue(), VisibilityTimeout=43201),
         400, IPV, "Value 43201 for parameter VisibilityTimeout is invalid. Reason: VisibilityTimeout must be >= 0 "
                   "and <= 43200.",
         src.unknown("the range is documented (ReceiveMessage: 0 to 43200 seconds); the wording is ours")),
    Case("delete-with-garbage-handle",
         lambda e: e.client.delete_message(QueueUrl=e.queue(), ReceiptHandle="garbage"),
         400, "ReceiptHandleIsInvalid", 'The input receipt handle "garbage" is not a valid receipt handle.',
         src.validated("test_delete_message_with_illegal_receipt_handle")),
    Case("delete-fifo-with-expired-handle",
         lambda e: e.client.delete_message(QueueUrl=(url := e.fifo(ContentBasedDeduplication="true")),
                                           ReceiptHandle=e.received(url, "foobar", 0, MessageGroupId="1")
                                           ["ReceiptHandle"]),
         400, IPV, None,   # the handle is in the message: checked by the test below
         src.snapshot("test_fifo_delete_after_visibility_timeout"), IPV_TYPE),
    Case("change-visibility-of-deleted-message",
         lambda e: e.client.change_message_visibility(
             QueueUrl=(url := e.queue()), ReceiptHandle=_deleted_handle(e, url), VisibilityTimeout=42),
         400, IPV, None,
         src.validated("test_change_visibility_on_deleted_message_raises_invalid_parameter_value")),
    # FIFO, a handle not current or a message not in flight: AWS's recordings of these (a change
    # of a message not in flight, a change by a superseded handle) are of standard queues; on FIFO
    # we keep the handles strict, as FIFO's DeleteMessage is.
    Case("fifo-change-visibility-not-in-flight",
         lambda e: e.client.change_message_visibility(
             QueueUrl=(url := e.fifo(ContentBasedDeduplication="true")),
             ReceiptHandle=e.received(url, "m", 0, MessageGroupId="1")["ReceiptHandle"], VisibilityTimeout=30),
         400, "AWS.SimpleQueueService.MessageNotInflight", "The message referred to is not in flight.",
         src.unknown("recorded for standard queues only (200 there); the code is the model's MessageNotInflight"),
         "MessageNotInflight", also=(src.model("MessageNotInflight"),)),
    Case("fifo-change-visibility-through-a-superseded-handle",
         lambda e: e.client.change_message_visibility(
             QueueUrl=(url := e.fifo(ContentBasedDeduplication="true")),
             ReceiptHandle=_superseded_handle(e, url, MessageGroupId="1"), VisibilityTimeout=0),
         400, IPV, None,   # names the handle, as change-visibility-of-deleted-message does
         src.unknown("recorded for standard queues only (it takes effect there)"), IPV_TYPE),
    Case("change-visibility-with-garbage-handle",
         lambda e: e.client.change_message_visibility(QueueUrl=e.queue(), ReceiptHandle="INVALID",
                                                      VisibilityTimeout=60),
         400, "ReceiptHandleIsInvalid", 'The input receipt handle "INVALID" is not a valid receipt handle.',
         src.unknown("the wording is recorded for DeleteMessage (test_delete_message_with_illegal_receipt_handle), "
                     "assumed the same"),
         also=(src.validated("test_invalid_receipt_handle_should_return_error_message (the code)"),)),
    Case("change-visibility-out-of-range",
         lambda e: e.client.change_message_visibility(QueueUrl=(url := e.queue()),
                                                      ReceiptHandle=e.received(url)["ReceiptHandle"],
                                                      VisibilityTimeout=43201),
         400, IPV, "Value 43201 for parameter VisibilityTimeout is invalid. Reason: VisibilityTimeout must be >= 0 "
                   "and <= 43200.",
         src.unknown("the range is documented (ChangeMessageVisibility: 0 to 43200); the wording is ours")),
    # --- message move tasks --------------------------------------------------------------------
    Case("move-task-source-not-a-dlq",
         lambda e: e.client.start_message_move_task(SourceArn=e.arn(e.queue("source")),
                                                    DestinationArn=e.arn(e.queue("destination"))),
         400, IPV, "Source queue must be configured as a Dead Letter Queue.",
         src.move_task("test_source_needs_redrive_policy")),
    Case("move-task-destination-missing",
         lambda e: start_task(e, DestinationArn=e.arn(e.queue("destination")) + "doesntexist"),
         404, "ResourceNotFoundException",
         "The resource that you specified for the DestinationArn parameter doesn't exist.",
         src.move_task("test_destination_needs_to_exist")),
    Case("move-task-second-one-on-a-source",
         lambda e: (e.client.start_message_move_task(SourceArn=(dlq := e.arn(e.with_dlq()[1])),
                                                     MaxNumberOfMessagesPerSecond=1),
                    e.client.start_message_move_task(SourceArn=dlq)),
         400, IPV, "There is already a task running. Only one active task is allowed for a source queue arn at a "
                   "given time.",
         src.move_task("test_start_multiple_move_tasks")),
    Case("move-task-rate-out-of-range", lambda e: start_task(e, MaxNumberOfMessagesPerSecond=501),
         400, IPV, "Value 501 for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: "
                   "MaxNumberOfMessagesPerSecond must be between 1 and 500.",
         src.unknown("the range is documented (StartMessageMoveTask: at most 500); the wording is ours")),
    Case("cancel-with-bad-task-handle", lambda e: e.client.cancel_message_move_task(TaskHandle="foobared"),
         400, IPV, "Value for parameter TaskHandle is invalid.", src.move_task("test_cancel_with_invalid_task_handle")),
    Case("cancel-with-handle-of-missing-source",
         lambda e: e.client.cancel_message_move_task(TaskHandle=task_handle({
             "taskId": "10f57157-fc38-4da9-a113-4de7e12d05dd",
             "sourceArn": "arn:aws:sqs:us-east-1:878966065785:test-queue-doesnt-exist-123456"})),
         404, "ResourceNotFoundException", "The resource that you specified for the SourceArn parameter doesn't exist.",
         src.move_task("test_cancel_with_invalid_source_arn_in_task_handle")),
    Case("cancel-with-handle-of-missing-task",
         lambda e: e.client.cancel_message_move_task(TaskHandle=task_handle({
             "taskId": "10f57157-fc38-4da9-a113-4de7e12d05aa", "sourceArn": e.arn(e.queue())})),
         404, "ResourceNotFoundException", "Task does not exist.",
         src.move_task("test_cancel_with_invalid_task_id_in_task_handle")),
    Case("list-move-tasks-max-results-out-of-range",
         lambda e: e.client.list_message_move_tasks(SourceArn=e.arn(e.queue()), MaxResults=11),
         400, IPV, "Value 11 for parameter MaxResults is invalid. Reason: MaxResults must be between 1 and 10.",
         src.unknown("the range is documented (ListMessageMoveTasks: 1 to 10); the wording is ours")),
]


def _deleted_handle(e: Env, url: str) -> str:
    handle = e.received(url, "foo")["ReceiptHandle"]
    e.client.delete_message(QueueUrl=url, ReceiptHandle=handle)
    return handle


def _superseded_handle(e: Env, url: str, **send) -> str:
    first = e.received(url, "m", 0, **send)["ReceiptHandle"]
    (again,) = e.client.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"]
    assert again["ReceiptHandle"] != first
    return first


def test_case_ids_are_unique_and_every_case_has_a_source():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
    assert all(c.source.ref and c.source.kind in src.KINDS for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_error(case: Case, client, protocol):
    e = Env(client, protocol)
    err = error_of(lambda: case.call(e))
    assert (err["Status"], err["Code"], err["Type"]) == (case.status, case.code, "Sender")
    if case.message is not None:
        expected = case.message[protocol] if isinstance(case.message, dict) else case.message
        assert err["Message"] == expected
    if protocol == JSON and case.json_type is not None:
        assert err["QueryErrorCode"] == case.json_type


def test_messages_that_quote_the_receipt_handle(client, protocol):
    """The rows above whose message names the handle they were given."""
    e = Env(client, protocol)
    url = e.fifo(ContentBasedDeduplication="true")
    handle = e.received(url, "foobar", 0, MessageGroupId="1")["ReceiptHandle"]
    err = error_of(lambda: e.client.delete_message(QueueUrl=url, ReceiptHandle=handle))
    # LocalStack snapshot, test_fifo_delete_after_visibility_timeout
    assert err["Message"] == f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
    url = e.queue()
    handle = _deleted_handle(e, url)
    err = error_of(lambda: e.client.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=42))
    # LocalStack, test_change_visibility_on_deleted_message_raises_invalid_parameter_value (aws.validated)
    assert err["Message"] == (f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not "
                              "exist or is not available for visibility timeout change.")
    url = e.fifo("superseded.fifo", ContentBasedDeduplication="true")
    handle = _superseded_handle(e, url, MessageGroupId="1")
    err = error_of(lambda: e.client.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0))
    # ours (fifo-change-visibility-through-a-superseded-handle): the deleted message's words
    assert err["Message"] == (f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not "
                              "exist or is not available for visibility timeout change.")
