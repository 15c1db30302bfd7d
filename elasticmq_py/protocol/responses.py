"""Storage results to output trees keyed by the model's member names: one function per result.

Both renderers consume these trees: JSON dumps them, Query encodes them as XML by the model.
Blobs stay ``bytes`` here; each renderer base64-encodes them.
"""

from __future__ import annotations

from typing import Any

from storage import results as r
from storage.commands import MessageAttributeValue

from elasticmq_py.protocol.addressing import queue_url
from elasticmq_py.protocol.wire import RequestContext

Out = dict[str, Any]


def _mav(v: MessageAttributeValue) -> Out:
    out: Out = {"DataType": v.data_type}
    if v.string_value is not None:
        out["StringValue"] = v.string_value
    if v.binary_value is not None:
        out["BinaryValue"] = v.binary_value
    if v.string_list_values:
        out["StringListValues"] = list(v.string_list_values)
    if v.binary_list_values:
        out["BinaryListValues"] = list(v.binary_list_values)
    return out


def _errors(failed) -> list[Out]:
    out = []
    for e in failed:
        d: Out = {"Id": e.id, "SenderFault": e.sender_fault, "Code": e.code}
        if e.message:
            d["Message"] = e.message
        out.append(d)
    return out


def _put(d: Out, key: str, value) -> None:
    if value is not None:
        d[key] = value


def _send_entry(e, ctx: RequestContext | None = None) -> Out:
    d: Out = {"MessageId": e.message_id, "MD5OfMessageBody": e.md5_of_body}
    # _put, inline (a batch renders ten of these)
    if e.md5_of_message_attributes is not None:
        d["MD5OfMessageAttributes"] = e.md5_of_message_attributes
    if e.md5_of_message_system_attributes is not None:
        d["MD5OfMessageSystemAttributes"] = e.md5_of_message_system_attributes
    if e.sequence_number is not None:
        d["SequenceNumber"] = e.sequence_number
    return d


def _send_batch_entry(e) -> Out:
    return {"Id": e.id, **_send_entry(e)}


def _message(m: r.ReceivedMessage) -> Out:
    d: Out = {"MessageId": m.message_id, "ReceiptHandle": m.receipt_handle,
              "MD5OfBody": m.md5_of_body, "Body": m.body}
    if m.attributes:
        d["Attributes"] = dict(m.attributes)
    if m.message_attributes:
        d["MD5OfMessageAttributes"] = m.md5_of_message_attributes
        d["MessageAttributes"] = {k: _mav(v) for k, v in m.message_attributes.items()}
    return d


def _move_task(t: r.MessageMoveTaskInfo) -> Out:
    d: Out = {"Status": t.status, "SourceArn": t.source_arn,
              "ApproximateNumberOfMessagesMoved": t.approximate_number_of_messages_moved,
              "StartedTimestamp": t.started_timestamp}
    _put(d, "TaskHandle", t.task_handle)
    _put(d, "DestinationArn", t.destination_arn)
    _put(d, "MaxNumberOfMessagesPerSecond", t.max_messages_per_second)
    _put(d, "ApproximateNumberOfMessagesToMove", t.approximate_number_of_messages_to_move)
    _put(d, "FailureReason", t.failure_reason)
    return d


def _batch(successful: list[Out], failed) -> Out:
    """A batch's answer, an empty list left out, as AWS leaves it out (LocalStack's AWS-recorded
    test_send_message_batch_with_oversized_contents_with_updated_maximum_message_size has no
    "Failed" in either protocol)."""
    out: Out = {}
    if successful:
        out["Successful"] = successful
    if failed:
        out["Failed"] = _errors(failed)
    return out


def _send_batch(result: r.SendMessageBatchResult, ctx: RequestContext) -> Out:
    return _batch([_send_batch_entry(e) for e in result.successful], result.failed)


def _receive(result: r.ReceiveMessageResult, ctx: RequestContext) -> Out:
    ms = result.messages
    return {"Messages": [_message(m) for m in ms]} if ms else {}


def _ids_batch(result, ctx: RequestContext) -> Out:
    return _batch([{"Id": i} for i in result.successful], result.failed)


# The hot results by exact type, ahead of the match below (which tries its cases in turn)
_FAST = {
    r.SendMessageResult: _send_entry,
    r.SendMessageBatchResult: _send_batch,
    r.ReceiveMessageResult: _receive,
    r.DeleteMessageBatchResult: _ids_batch,
    r.ChangeMessageVisibilityBatchResult: _ids_batch,
}


def to_output(result: object, ctx: RequestContext) -> Out | None:
    """The output tree for a result; ``None`` for actions whose response has no body."""
    if result is None:
        return None
    fast = _FAST.get(type(result))
    if fast is not None:
        return fast(result, ctx)
    return _by_match(result, ctx)


def _by_match(result: object, ctx: RequestContext) -> Out | None:
    """The rest of ``to_output`` (apart, so that ``ctx``, which its comprehensions capture, is
    a cell only here and not on the hot results' path)."""
    match result:
        case None:
            return None
        case r.CreateQueueResult(queue=q) | r.GetQueueUrlResult(queue=q):
            return {"QueueUrl": queue_url(ctx.base_url, q)}
        case r.ListQueuesResult(queues=qs, next_token=tok):
            d: Out = {}
            if qs:
                d["QueueUrls"] = [queue_url(ctx.base_url, q) for q in qs]
            _put(d, "NextToken", tok)
            return d
        case r.ListDeadLetterSourceQueuesResult(queues=qs, next_token=tok):
            d = {"queueUrls": [queue_url(ctx.base_url, q) for q in qs]}
            _put(d, "NextToken", tok)
            return d
        case r.GetQueueAttributesResult(attributes=a):
            return {"Attributes": dict(a)} if a else {}
        case r.ListQueueTagsResult(tags=t):
            return {"Tags": dict(t)} if t else {}
        case r.StartMessageMoveTaskResult(task_handle=h):
            return {"TaskHandle": h}
        case r.CancelMessageMoveTaskResult(approximate_number_of_messages_moved=n):
            return {"ApproximateNumberOfMessagesMoved": n}
        case r.ListMessageMoveTasksResult(results=ts):
            return {"Results": [_move_task(t) for t in ts]}
    raise TypeError(f"no output mapping for {type(result).__name__}")
