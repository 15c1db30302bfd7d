"""One representative request per SQS action, with every member the model allows, in the
parameter form boto3 takes (blobs as bytes)."""

URL = "http://localhost:9324/000000000000/q1"
FIFO_URL = "http://localhost:9324/000000000000/q1.fifo"
ARN = "arn:aws:sqs:us-east-1:000000000000:q1"

MAV = {
    "s": {"DataType": "String", "StringValue": "v\u00e9\r\n"},
    "n": {"DataType": "Number", "StringValue": "1.5"},
    "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
}

SAMPLES: dict[str, dict] = {
    "CreateQueue": {"QueueName": "q1", "Attributes": {"VisibilityTimeout": "30", "DelaySeconds": "1"},
                    "tags": {"team": "a", "env": "b"}},
    "DeleteQueue": {"QueueUrl": URL},
    "GetQueueUrl": {"QueueName": "q1", "QueueOwnerAWSAccountId": "000000000000"},
    "ListQueues": {"QueueNamePrefix": "q", "MaxResults": 5, "NextToken": "tok"},
    "GetQueueAttributes": {"QueueUrl": URL, "AttributeNames": ["All", "QueueArn"]},
    "SetQueueAttributes": {"QueueUrl": URL, "Attributes": {"VisibilityTimeout": "10"}},
    "PurgeQueue": {"QueueUrl": URL},
    "TagQueue": {"QueueUrl": URL, "Tags": {"k1": "v1", "k2": ""}},
    "UntagQueue": {"QueueUrl": URL, "TagKeys": ["k1", "k2"]},
    "ListQueueTags": {"QueueUrl": URL},
    "AddPermission": {"QueueUrl": URL, "Label": "l", "AWSAccountIds": ["111122223333", "444455556666"],
                      "Actions": ["SendMessage", "ReceiveMessage"]},
    "RemovePermission": {"QueueUrl": URL, "Label": "l"},
    "ListDeadLetterSourceQueues": {"QueueUrl": URL, "MaxResults": 3, "NextToken": "t"},
    "SendMessage": {"QueueUrl": FIFO_URL, "MessageBody": "hello & <world>", "DelaySeconds": 0,
                    "MessageAttributes": MAV,
                    "MessageSystemAttributes": {"AWSTraceHeader": {"DataType": "String",
                                                                   "StringValue": "Root=1"}},
                    "MessageDeduplicationId": "d1", "MessageGroupId": "g1"},
    "SendMessageBatch": {"QueueUrl": URL, "Entries": [
        {"Id": "a", "MessageBody": "one", "DelaySeconds": 2, "MessageAttributes": MAV,
         "MessageDeduplicationId": "d", "MessageGroupId": "g"},
        {"Id": "b", "MessageBody": "two"},
    ]},
    "ReceiveMessage": {"QueueUrl": URL, "AttributeNames": ["All"],
                       "MessageSystemAttributeNames": ["SenderId", "SentTimestamp"],
                       "MessageAttributeNames": ["All"], "MaxNumberOfMessages": 10,
                       "VisibilityTimeout": 30, "WaitTimeSeconds": 0, "ReceiveRequestAttemptId": "att"},
    "DeleteMessage": {"QueueUrl": URL, "ReceiptHandle": "rh"},
    "DeleteMessageBatch": {"QueueUrl": URL, "Entries": [{"Id": "a", "ReceiptHandle": "r1"},
                                                        {"Id": "b", "ReceiptHandle": "r2"}]},
    "ChangeMessageVisibility": {"QueueUrl": URL, "ReceiptHandle": "rh", "VisibilityTimeout": 60},
    "ChangeMessageVisibilityBatch": {"QueueUrl": URL, "Entries": [
        {"Id": "a", "ReceiptHandle": "r1", "VisibilityTimeout": 5}, {"Id": "b", "ReceiptHandle": "r2"}]},
    "StartMessageMoveTask": {"SourceArn": ARN, "DestinationArn": ARN + "2", "MaxNumberOfMessagesPerSecond": 50},
    "CancelMessageMoveTask": {"TaskHandle": "th"},
    "ListMessageMoveTasks": {"SourceArn": ARN, "MaxResults": 10},
}
