"""Run by test_external_clients and test_tls under botocore 1.29 (Query protocol). Prints JSON results."""

import hashlib
import json
import sys

import botocore
import botocore.session

endpoint, region = sys.argv[1], sys.argv[2]
verify = sys.argv[3] if len(sys.argv) > 3 else None   # the CA file of an https:// endpoint
s = botocore.session.get_session()
assert s.get_service_model("sqs").metadata["protocol"] == "query", botocore.__version__
c = s.create_client("sqs", endpoint_url=endpoint, region_name=region, verify=verify)
out = {"botocore": botocore.__version__}
url = c.create_queue(QueueName="old", Attributes={"VisibilityTimeout": "5"}, tags={"t": "1"})["QueueUrl"]
out["url"] = url
body = "h\u00e9llo\r\n<&>"
sent = c.send_message(QueueUrl=url, MessageBody=body,
                      MessageAttributes={"b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
                                         "s": {"DataType": "String", "StringValue": "v"}})
out["md5_ok"] = sent["MD5OfMessageBody"] == hashlib.md5(body.encode()).hexdigest()
batch = c.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": f"m{i}"} for i in range(3)])
out["batch_ok"] = len(batch["Successful"])
msgs = c.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                         AttributeNames=["All"])["Messages"]
first = [m for m in msgs if m["MessageId"] == sent["MessageId"]][0]
out["body"] = first["Body"]
out["attr_b"] = list(first["MessageAttributes"]["b"]["BinaryValue"])
out["receive_count"] = first["Attributes"]["ApproximateReceiveCount"]
d = c.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                  for i, m in enumerate(msgs)] + [{"Id": "x", "ReceiptHandle": "bad"}])
out["deleted"] = len(d["Successful"])
out["failed"] = [f["Code"] for f in d["Failed"]]
out["attrs"] = c.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout", "QueueArn"])["Attributes"]
out["tags"] = c.list_queue_tags(QueueUrl=url)["Tags"]
out["queues"] = c.list_queues()["QueueUrls"]
try:
    c.get_queue_url(QueueName="missing")
except c.exceptions.QueueDoesNotExist as e:
    out["error"] = e.response["Error"]
c.delete_queue(QueueUrl=url)
print(json.dumps(out))
