"""Regenerate ``sqs-2012-11-05.json`` from the installed botocore (a maintainer's tool, not run
at serve time).

Why vendored: the server's parsing must not change behind our back when a user upgrades
botocore, and the server should not need botocore at all. Why annotated: since SQS moved to
the JSON protocol, botocore's model no longer carries the Query protocol's element names
(``Attribute.1.Name``, ``SendMessageBatchRequestEntry.1.Id``...). They are re-added below from
the last Query-protocol model (botocore 1.29), so one model drives both protocols.

    python -m elasticmq_py.protocol._vendor_model
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

# (shape, member or None for the list/map itself, trait, value); "member"/"key"/"value" name
# the list member / map key / map value reference of a list or map shape.
QUERY_TRAITS: list[tuple[str, str, str, object]] = [
    ("AWSAccountIdList", "member", "locationName", "AWSAccountId"),
    ("ActionNameList", "member", "locationName", "ActionName"),
    ("AttributeNameList", "member", "locationName", "AttributeName"),
    ("BatchResultErrorEntryList", "member", "locationName", "BatchResultErrorEntry"),
    ("BinaryList", "member", "locationName", "BinaryListValue"),
    ("ChangeMessageVisibilityBatchRequestEntryList", "member", "locationName",
     "ChangeMessageVisibilityBatchRequestEntry"),
    ("ChangeMessageVisibilityBatchResultEntryList", "member", "locationName",
     "ChangeMessageVisibilityBatchResultEntry"),
    ("CreateQueueRequest", "Attributes", "locationName", "Attribute"),
    ("CreateQueueRequest", "tags", "locationName", "Tag"),
    ("DeleteMessageBatchRequestEntryList", "member", "locationName", "DeleteMessageBatchRequestEntry"),
    ("DeleteMessageBatchResultEntryList", "member", "locationName", "DeleteMessageBatchResultEntry"),
    ("GetQueueAttributesResult", "Attributes", "locationName", "Attribute"),
    ("ListMessageMoveTasksResultEntryList", "member", "locationName", "ListMessageMoveTasksResultEntry"),
    ("ListQueueTagsResult", "Tags", "locationName", "Tag"),
    ("Message", "Attributes", "locationName", "Attribute"),
    ("Message", "MessageAttributes", "locationName", "MessageAttribute"),
    ("MessageAttributeNameList", "member", "locationName", "MessageAttributeName"),
    ("MessageAttributeValue", "StringListValues", "locationName", "StringListValue"),
    ("MessageAttributeValue", "BinaryListValues", "locationName", "BinaryListValue"),
    ("MessageBodyAttributeMap", "key", "locationName", "Name"),
    ("MessageBodyAttributeMap", "value", "locationName", "Value"),
    ("MessageBodySystemAttributeMap", "key", "locationName", "Name"),
    ("MessageBodySystemAttributeMap", "value", "locationName", "Value"),
    ("MessageList", "member", "locationName", "Message"),
    ("MessageSystemAttributeList", "member", "locationName", "MessageSystemAttributeName"),
    ("MessageSystemAttributeMap", "key", "locationName", "Name"),
    ("MessageSystemAttributeMap", "value", "locationName", "Value"),
    ("MessageSystemAttributeValue", "StringListValues", "locationName", "StringListValue"),
    ("MessageSystemAttributeValue", "BinaryListValues", "locationName", "BinaryListValue"),
    ("QueueAttributeMap", "key", "locationName", "Name"),
    ("QueueAttributeMap", "value", "locationName", "Value"),
    ("QueueUrlList", "member", "locationName", "QueueUrl"),
    ("SendMessageBatchRequestEntry", "MessageAttributes", "locationName", "MessageAttribute"),
    ("SendMessageBatchRequestEntry", "MessageSystemAttributes", "locationName", "MessageSystemAttribute"),
    ("SendMessageBatchRequestEntryList", "member", "locationName", "SendMessageBatchRequestEntry"),
    ("SendMessageBatchResultEntryList", "member", "locationName", "SendMessageBatchResultEntry"),
    ("SendMessageRequest", "MessageAttributes", "locationName", "MessageAttribute"),
    ("SendMessageRequest", "MessageSystemAttributes", "locationName", "MessageSystemAttribute"),
    ("SetQueueAttributesRequest", "Attributes", "locationName", "Attribute"),
    ("StringList", "member", "locationName", "StringListValue"),
    ("TagKeyList", "member", "locationName", "TagKey"),
    ("TagQueueRequest", "Tags", "locationName", "Tag"),   # 1.29 had it on the TagMap shape itself
    ("TagMap", "key", "locationName", "Key"),
    ("TagMap", "value", "locationName", "Value"),
]

XML_NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"


def _strip(obj):
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in ("documentation", "examples")}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def build() -> dict:
    import botocore

    src = Path(botocore.__file__).parent / "data/sqs/2012-11-05/service-2.json.gz"
    model = _strip(json.load(gzip.open(src)))
    model["metadata"]["xmlNamespace"] = XML_NAMESPACE
    model["metadata"]["botocoreVersion"] = botocore.__version__
    for op in model["operations"].values():
        if "output" in op:
            op["output"]["resultWrapper"] = op["name"] + "Result"
    for shape, member, trait, value in QUERY_TRAITS:
        s = model["shapes"][shape]
        ref = s[member] if member in ("member", "key", "value") else s["members"][member]
        ref[trait] = value
    return model


if __name__ == "__main__":
    out = Path(__file__).with_name("sqs-2012-11-05.json")
    out.write_text(json.dumps(build(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
