"""Results rendered in both protocols read back identically through botocore's own parsers."""

import json

import botocore.parsers
import pytest

from storage import results as r
from storage.commands import MessageAttributeValue, Namespace, QueueKey
from storage import errors as se

from elasticmq_py.protocol import json_proto, query_proto, responses
from elasticmq_py.protocol import errors as perr
from elasticmq_py.protocol.model import XML_NAMESPACE, sqs_model
from elasticmq_py.protocol.wire import RequestContext

MODEL = sqs_model()
CTX = RequestContext(Namespace("us-east-1", "000000000000"), "http://example:9324")
Q1 = QueueKey("us-east-1", "000000000000", "q1")
Q2 = QueueKey("us-east-1", "000000000000", "q2")
ERR = r.BatchResultError("b", "InvalidParameterValue", "bad & <worse>", True)
MSG = r.ReceivedMessage(
    message_id="m1", receipt_handle="rh1", md5_of_body="abc", body="line1\r\nline2 <&>\t\"q\" \u00e9\U0001F600",
    attributes={"SenderId": "000000000000", "SentTimestamp": "1700000000000"},
    md5_of_message_attributes="def",
    message_attributes={"s": MessageAttributeValue("String", string_value="v"),
                        "b": MessageAttributeValue("Binary", binary_value=b"\x00\xff")},
)

RESULTS = {
    "CreateQueue": r.CreateQueueResult(Q1),
    "GetQueueUrl": r.GetQueueUrlResult(Q1),
    "ListQueues": r.ListQueuesResult((Q1, Q2), "next"),
    "ListDeadLetterSourceQueues": r.ListDeadLetterSourceQueuesResult((Q2,), None),
    "GetQueueAttributes": r.GetQueueAttributesResult({"VisibilityTimeout": "30", "QueueArn": Q1.arn}),
    "ListQueueTags": r.ListQueueTagsResult({"a": "1", "b & c": "<2>"}),
    "SendMessage": r.SendMessageResult("m1", "md5b", "md5a", None, "18"),
    "SendMessageBatch": r.SendMessageBatchResult(
        (r.SendMessageBatchResultEntry("a", "m1", "md5b", "md5a", None, "1"),), (ERR,)),
    "ReceiveMessage": r.ReceiveMessageResult((MSG,)),
    "DeleteMessageBatch": r.DeleteMessageBatchResult(("a",), (ERR,)),
    "ChangeMessageVisibilityBatch": r.ChangeMessageVisibilityBatchResult(("a", "c"), ()),
    "StartMessageMoveTask": r.StartMessageMoveTaskResult("th"),
    "CancelMessageMoveTask": r.CancelMessageMoveTaskResult(7),
    "ListMessageMoveTasks": r.ListMessageMoveTasksResult((
        r.MessageMoveTaskInfo("th", "RUNNING", Q1.arn, None, 10, 3, 9, None, 1700000000000),
        r.MessageMoveTaskInfo(None, "FAILED", Q1.arn, Q2.arn, None, 0, None, "boom", 1700000000001),
    )),
}
EMPTY = ["DeleteQueue", "SetQueueAttributes", "PurgeQueue", "TagQueue", "UntagQueue", "AddPermission",
         "RemovePermission", "DeleteMessage", "ChangeMessageVisibility"]


def read_json(action, status, headers, body, json_model):
    parser = botocore.parsers.create_parser("json")
    out = parser.parse({"body": body, "headers": dict(headers), "status_code": status},
                       json_model.operation_model(action).output_shape)
    out.pop("ResponseMetadata", None)
    return out


def read_query(action, status, headers, body, query_model):
    parser = botocore.parsers.create_parser("query")
    out = parser.parse({"body": body, "headers": dict(headers), "status_code": status},
                       query_model.operation_model(action).output_shape)
    meta = out.pop("ResponseMetadata", {})
    return out, meta


@pytest.mark.parametrize("action", sorted(RESULTS))
def test_both_protocols_read_back_the_same(action, json_model, query_model):
    output = responses.to_output(RESULTS[action], CTX)
    j = read_json(action, *json_proto.render(output, "req-1"), json_model)
    q, meta = read_query(action, *query_proto.render(action, output, "req-1", MODEL), query_model)
    # XML cannot tell an empty list from an absent one
    assert {k: v for k, v in j.items() if v != []} == q
    assert meta.get("RequestId") == "req-1"
    assert j  # every one of these has content


def test_values(json_model):
    out = lambda a: read_json(a, *json_proto.render(responses.to_output(RESULTS[a], CTX), "x"), json_model)
    assert out("CreateQueue") == {"QueueUrl": "http://example:9324/000000000000/q1"}
    assert out("ListQueues")["QueueUrls"] == ["http://example:9324/000000000000/q1",
                                              "http://example:9324/000000000000/q2"]
    m = out("ReceiveMessage")["Messages"][0]
    assert m["Body"] == MSG.body
    assert m["MessageAttributes"]["b"] == {"DataType": "Binary", "BinaryValue": b"\x00\xff"}
    assert out("SendMessageBatch")["Failed"] == [
        {"Id": "b", "SenderFault": True, "Code": "InvalidParameterValue", "Message": "bad & <worse>"}]
    assert out("ListMessageMoveTasks")["Results"][1] == {
        "Status": "FAILED", "SourceArn": Q1.arn, "DestinationArn": Q2.arn,
        "ApproximateNumberOfMessagesMoved": 0, "FailureReason": "boom", "StartedTimestamp": 1700000000001}


def test_body_with_carriage_return_survives_xml(query_model):
    output = responses.to_output(RESULTS["ReceiveMessage"], CTX)
    status, headers, body = query_proto.render("ReceiveMessage", output, "r", MODEL)
    assert b"&#xD;" in body
    q, _ = read_query("ReceiveMessage", status, headers, body, query_model)
    assert q["Messages"][0]["Body"] == MSG.body


@pytest.mark.parametrize("action", EMPTY)
def test_empty_responses(action, json_model, query_model):
    assert responses.to_output(None, CTX) is None
    status, headers, body = json_proto.render(None, "r")
    assert (status, body) == (200, b"{}")
    status, headers, body = query_proto.render(action, None, "r", MODEL)
    assert body.decode() == (f'<?xml version="1.0"?><{action}Response xmlns="{XML_NAMESPACE}">'
                             f"<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>"
                             f"</{action}Response>")


def test_receive_nothing_renders_no_messages(json_model, query_model):
    output = responses.to_output(r.ReceiveMessageResult(()), CTX)
    assert read_json("ReceiveMessage", *json_proto.render(output, "r"), json_model) == {}
    q, _ = read_query("ReceiveMessage", *query_proto.render("ReceiveMessage", output, "r", MODEL), query_model)
    assert q == {}


# --- errors -------------------------------------------------------------------------------------

ERRORS = [
    (se.queue_does_not_exist(), 400, "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"),
    (se.PURGE_QUEUE_IN_PROGRESS("purging"), 403, "AWS.SimpleQueueService.PurgeQueueInProgress",
     "PurgeQueueInProgress"),
    (se.OVER_LIMIT("too many"), 403, "OverLimit", "OverLimit"),
    (se.missing_parameter("QueueUrl"), 400, "MissingParameter", "MissingRequiredParameterException"),
    (se.SERVICE_UNAVAILABLE("not master"), 503, "ServiceUnavailable", "ServiceUnavailable"),
    (perr.serialization("bad json"), 400, "SerializationException", "SerializationException"),
]


@pytest.mark.parametrize("err,status,code,shape", ERRORS)
def test_json_error_shape(err, status, code, shape, json_model):
    st, headers, body = json_proto.render_error(err, "rid")
    assert st == status
    doc = json.loads(body)
    assert doc == {"__type": f"com.amazonaws.sqs#{shape}", "message": err.message}
    h = dict(headers)
    fault = "Sender" if err.sender_fault else "Receiver"
    assert h["X-Amzn-Query-Error"] == f"{code};{fault}"
    assert h["Content-Type"] == "application/x-amz-json-1.0"
    parsed = botocore.parsers.create_parser("json").parse(
        {"body": body, "headers": {k.lower(): v for k, v in headers}, "status_code": st},
        json_model.operation_model("SendMessage").output_shape)
    assert parsed["Error"]["Code"] == code
    assert parsed["Error"]["Message"] == err.message


@pytest.mark.parametrize("err,status,code,shape", ERRORS)
def test_query_error_shape(err, status, code, shape, query_model):
    st, headers, body = query_proto.render_error(err, "rid", XML_NAMESPACE)
    assert st == status
    fault = "Sender" if err.sender_fault else "Receiver"
    # the Query protocol words a missing queue its own way (LocalStack's AWS-validated test_non_existent_queue)
    message = ("The specified queue does not exist for this wsdl version." if code.endswith("NonExistentQueue")
               else err.message)
    assert body.decode() == (
        f'<?xml version="1.0"?><ErrorResponse xmlns="{XML_NAMESPACE}"><Error><Type>{fault}</Type>'
        f"<Code>{code}</Code><Message>{message}</Message><Detail/></Error>"
        f"<RequestId>rid</RequestId></ErrorResponse>")
    parsed = botocore.parsers.create_parser("query").parse(
        {"body": body, "headers": dict(headers), "status_code": st},
        query_model.operation_model("SendMessage").output_shape)
    assert parsed["Error"]["Code"] == code
    assert parsed["Error"]["Type"] == fault


def test_batch_answers_leave_out_an_empty_list(json_model):
    # LocalStack's AWS-recorded test_send_message_batch_with_oversized_contents_with_updated_maximum_message_size:
    # no "Failed" when nothing failed.
    ok = responses.to_output(r.SendMessageBatchResult((r.SendMessageBatchResultEntry("a", "m1", "md5"),), ()), CTX)
    assert set(ok) == {"Successful"}
    bad = responses.to_output(r.DeleteMessageBatchResult((), (ERR,)), CTX)
    assert set(bad) == {"Failed"}
    assert json.loads(json_proto.render(ok, "r")[2]) == {"Successful": [{"Id": "a", "MessageId": "m1",
                                                                         "MD5OfMessageBody": "md5"}]}


def test_query_answers_in_json_when_asked():
    # LocalStack's AWS-validated test_get_list_queues_with_query_auth, test_marker_serialization_json_protocol
    # and test_get_queue_attributes_json_format.
    def doc(action):
        status, headers, body = query_proto.render(action, responses.to_output(RESULTS[action], CTX), "rid",
                                                   MODEL, as_json=True)
        assert status == 200 and dict(headers)["Content-Type"] == "application/json"
        return json.loads(body)[f"{action}Response"]
    listed = doc("ListQueues")
    assert listed["ListQueuesResult"]["queueUrls"] == ["http://example:9324/000000000000/q1",
                                                       "http://example:9324/000000000000/q2"]
    assert listed["ResponseMetadata"] == {"RequestId": "rid"}
    assert doc("ReceiveMessage")["ReceiveMessageResult"]["messages"][0]["Body"] == MSG.body
    assert doc("GetQueueAttributes")["GetQueueAttributesResult"]["Attributes"] == [
        {"Name": "VisibilityTimeout", "Value": "30"}, {"Name": "QueueArn", "Value": Q1.arn}]
    status, _, body = query_proto.render("DeleteQueue", None, "rid", MODEL, as_json=True)
    assert json.loads(body) == {"DeleteQueueResponse": {"ResponseMetadata": {"RequestId": "rid"}}}
    status, headers, body = query_proto.render_error(se.INVALID_ACTION("The action X is not valid for this endpoint."),
                                                     "rid", XML_NAMESPACE, as_json=True)
    assert status == 400 and json.loads(body)["Error"] == {
        "Type": "Sender", "Code": "InvalidAction", "Message": "The action X is not valid for this endpoint."}


def test_unknown_operation_is_a_bare_xml_element_in_every_case():
    # LocalStack's AWS-validated test_get_without_query_returns_unknown_operation and
    # test_get_without_query_json_format_returns_returns_xml.
    for as_json in (False, True):
        status, _, body = query_proto.render_error(perr.UNKNOWN_OPERATION(""), "rid", XML_NAMESPACE, as_json)
        assert (status, body) == (404, b"<UnknownOperationException/>")
