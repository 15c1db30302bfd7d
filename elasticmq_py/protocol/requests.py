"""Parameter trees (see ``params``) to storage commands: one explicit function per action.

This is the only place that knows how an SQS request's members map onto command fields, so the
two protocols cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Callable

from storage import commands as c

from elasticmq_py.protocol.addressing import key_from_queue_url
from elasticmq_py.protocol.wire import RequestContext

P = dict[str, Any]


def _queue(p: P, ctx: RequestContext) -> c.QueueKey:
    # QueueUrl is required by the model, so params has checked that it is there
    return key_from_queue_url(p["QueueUrl"], ctx.ns)


def _tuple(v) -> tuple | None:
    return tuple(v) if v is not None else None


def _mav(v: P) -> c.MessageAttributeValue:
    return c.MessageAttributeValue(
        data_type=v["DataType"],
        string_value=v.get("StringValue"),
        binary_value=v.get("BinaryValue"),
        string_list_values=_tuple(v.get("StringListValues")),
        binary_list_values=_tuple(v.get("BinaryListValues")),
    )


def _mavs(m: P | None) -> dict[str, c.MessageAttributeValue] | None:
    return None if m is None else {k: _mav(v) for k, v in m.items()}


def create_queue(p, ctx):
    return c.CreateQueue(ctx.ns, p.get("QueueName"), p.get("Attributes") or {}, p.get("tags") or {})


def delete_queue(p, ctx):
    return c.DeleteQueue(_queue(p, ctx), caller=ctx.caller)


def get_queue_url(p, ctx):
    return c.GetQueueUrl(ctx.ns, p.get("QueueName"), p.get("QueueOwnerAWSAccountId"), caller=ctx.caller)


def list_queues(p, ctx):
    return c.ListQueues(ctx.ns, p.get("QueueNamePrefix"), p.get("MaxResults"), p.get("NextToken"))


def get_queue_attributes(p, ctx):
    return c.GetQueueAttributes(_queue(p, ctx), _tuple(p.get("AttributeNames")), caller=ctx.caller)


def set_queue_attributes(p, ctx):
    return c.SetQueueAttributes(_queue(p, ctx), p.get("Attributes"), caller=ctx.caller)


def purge_queue(p, ctx):
    return c.PurgeQueue(_queue(p, ctx), caller=ctx.caller)


def tag_queue(p, ctx):
    return c.TagQueue(_queue(p, ctx), p.get("Tags"), caller=ctx.caller)


def untag_queue(p, ctx):
    return c.UntagQueue(_queue(p, ctx), _tuple(p.get("TagKeys")), caller=ctx.caller)


def list_queue_tags(p, ctx):
    return c.ListQueueTags(_queue(p, ctx), caller=ctx.caller)


def add_permission(p, ctx):
    return c.AddPermission(_queue(p, ctx), p.get("Label"), _tuple(p.get("AWSAccountIds")),
                           _tuple(p.get("Actions")), caller=ctx.caller)


def remove_permission(p, ctx):
    return c.RemovePermission(_queue(p, ctx), p.get("Label"), caller=ctx.caller)


def list_dead_letter_source_queues(p, ctx):
    return c.ListDeadLetterSourceQueues(_queue(p, ctx), p.get("MaxResults"), p.get("NextToken"), caller=ctx.caller)


def send_message(p, ctx):
    system = None if (sa := p.get("MessageSystemAttributes")) is None else _mavs(sa)
    if ctx.trace_header:
        system = _with_trace_header(system, ctx.trace_header)
    return c.SendMessage(
        key_from_queue_url(p["QueueUrl"], ctx.ns), p.get("MessageBody"), p.get("DelaySeconds"),
        None if (ma := p.get("MessageAttributes")) is None else _mavs(ma),
        system, p.get("MessageDeduplicationId"), p.get("MessageGroupId"), caller=ctx.caller,
    )


def _with_trace_header(system: dict[str, c.MessageAttributeValue] | None,
                       header: str) -> dict[str, c.MessageAttributeValue]:
    """A SendMessage's X-Amzn-Trace-Id header becomes its AWSTraceHeader system attribute
    (LocalStack's AWS-validated test_aws_trace_header_propagation); one given as a system
    attribute wins."""
    if system and "AWSTraceHeader" in system:
        return system
    return {**(system or {}), "AWSTraceHeader": c.MessageAttributeValue("String", string_value=header)}


def send_message_batch(p, ctx):
    entry = c.SendMessageBatchEntry
    entries = tuple([
        entry(
            e.get("Id"), e.get("MessageBody"), e.get("DelaySeconds"),
            None if (ma := e.get("MessageAttributes")) is None else _mavs(ma),
            None if (sa := e.get("MessageSystemAttributes")) is None else _mavs(sa),
            e.get("MessageDeduplicationId"), e.get("MessageGroupId"),
        )
        for e in p.get("Entries") or ()
    ])
    return c.SendMessageBatch(_queue(p, ctx), entries, caller=ctx.caller)


def receive_message(p, ctx):
    return c.ReceiveMessage(
        _queue(p, ctx), p.get("MaxNumberOfMessages"), p.get("VisibilityTimeout"),
        p.get("WaitTimeSeconds"), tuple(p.get("AttributeNames") or ()),
        tuple(p.get("MessageSystemAttributeNames") or ()),
        tuple(p.get("MessageAttributeNames") or ()), p.get("ReceiveRequestAttemptId"), caller=ctx.caller,
    )


def delete_message(p, ctx):
    return c.DeleteMessage(_queue(p, ctx), p.get("ReceiptHandle"), caller=ctx.caller)


def delete_message_batch(p, ctx):
    entries = tuple(c.DeleteMessageBatchEntry(e.get("Id"), e.get("ReceiptHandle"))
                    for e in p.get("Entries") or ())
    return c.DeleteMessageBatch(_queue(p, ctx), entries, caller=ctx.caller)


def change_message_visibility(p, ctx):
    return c.ChangeMessageVisibility(_queue(p, ctx), p.get("ReceiptHandle"),
                                     p.get("VisibilityTimeout"), caller=ctx.caller)


def change_message_visibility_batch(p, ctx):
    entries = tuple(
        c.ChangeMessageVisibilityBatchEntry(e.get("Id"), e.get("ReceiptHandle"), e.get("VisibilityTimeout"))
        for e in p.get("Entries") or ()
    )
    return c.ChangeMessageVisibilityBatch(_queue(p, ctx), entries, caller=ctx.caller)


def start_message_move_task(p, ctx):
    return c.StartMessageMoveTask(ctx.ns, p.get("SourceArn"), p.get("DestinationArn"),
                                  p.get("MaxNumberOfMessagesPerSecond"), caller=ctx.caller)


def cancel_message_move_task(p, ctx):
    return c.CancelMessageMoveTask(ctx.ns, p.get("TaskHandle"), caller=ctx.caller)


def list_message_move_tasks(p, ctx):
    return c.ListMessageMoveTasks(ctx.ns, p.get("SourceArn"), p.get("MaxResults"), caller=ctx.caller)


BUILDERS: dict[str, Callable[[P, RequestContext], c.Command]] = {
    "CreateQueue": create_queue,
    "DeleteQueue": delete_queue,
    "GetQueueUrl": get_queue_url,
    "ListQueues": list_queues,
    "GetQueueAttributes": get_queue_attributes,
    "SetQueueAttributes": set_queue_attributes,
    "PurgeQueue": purge_queue,
    "TagQueue": tag_queue,
    "UntagQueue": untag_queue,
    "ListQueueTags": list_queue_tags,
    "AddPermission": add_permission,
    "RemovePermission": remove_permission,
    "ListDeadLetterSourceQueues": list_dead_letter_source_queues,
    "SendMessage": send_message,
    "SendMessageBatch": send_message_batch,
    "ReceiveMessage": receive_message,
    "DeleteMessage": delete_message,
    "DeleteMessageBatch": delete_message_batch,
    "ChangeMessageVisibility": change_message_visibility,
    "ChangeMessageVisibilityBatch": change_message_visibility_batch,
    "StartMessageMoveTask": start_message_move_task,
    "CancelMessageMoveTask": cancel_message_move_task,
    "ListMessageMoveTasks": list_message_move_tasks,
}


def to_command(action: str, params: P, ctx: RequestContext) -> c.Command:
    return BUILDERS[action](params, ctx)
