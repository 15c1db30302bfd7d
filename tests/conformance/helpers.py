"""Small helpers the corpus's cases share: queues made on demand, errors read the same way in
both protocols."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from botocore.exceptions import ClientError


@dataclass
class Env:
    """One test's client (one protocol, one fresh namespace) and shorthands over it."""

    client: object
    protocol: str

    def queue(self, name: str = "q", **attributes: str) -> str:
        if name.endswith(".fifo"):
            attributes.setdefault("FifoQueue", "true")
        return self.client.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]

    def fifo(self, name: str = "f.fifo", **attributes: str) -> str:
        return self.queue(name, **attributes)

    def arn(self, url: str) -> str:
        return self.client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def with_dlq(self, name: str = "src", max_receive_count: int = 1) -> tuple[str, str]:
        fifo = name.endswith(".fifo")
        dlq = self.queue(name.removesuffix(".fifo") + "-dlq" + (".fifo" if fifo else ""))
        policy = json.dumps({"deadLetterTargetArn": self.arn(dlq), "maxReceiveCount": max_receive_count})
        return self.queue(name, RedrivePolicy=policy), dlq

    def received(self, url: str, body: str = "m", visibility_timeout: int = 30, **send) -> dict:
        """Send one message and receive it: the received message."""
        self.client.send_message(QueueUrl=url, MessageBody=body, **send)
        (msg,) = self.client.receive_message(QueueUrl=url, VisibilityTimeout=visibility_timeout)["Messages"]
        return msg

    def bodies(self, url: str, n: int = 10, **kw) -> list[str]:
        return [m["Body"] for m in self.client.receive_message(QueueUrl=url, MaxNumberOfMessages=n,
                                                                **kw).get("Messages", [])]


def error_of(call) -> dict:
    """Run ``call``; it must fail. The error as both protocols' clients report it, plus status."""
    with pytest.raises(ClientError) as e:
        call()
    response = e.value.response
    return {**response["Error"], "Status": response["ResponseMetadata"]["HTTPStatusCode"]}
