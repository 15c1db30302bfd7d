"""A cluster whose members verify SigV4 ([auth] mode = "sigv4" on each): a client that signs to a
replica is served through the master, which verifies the forwarded request as it arrived
(signature, Host and all), and a bad signature is refused in the client's protocol."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from elasticmq_py.auth.credentials import Auth, Credential

pytestmark = pytest.mark.slow

THREE = ["n1", "n2", "n3"]
KEY = Credential("AKIDCLUSTER", "cluster-client-secret", "111111111111")


def test_a_client_signing_to_a_replica_is_verified_by_the_master(make_cluster):
    c = make_cluster(THREE, auth=Auth("sigv4", (KEY,)))
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    replica = next(n for n in THREE if n != master)
    via = c.sqs(replica, KEY.access_key_id, KEY.secret_access_key, retries={"max_attempts": 1})
    url = via.create_queue(QueueName="signed")["QueueUrl"]
    assert url == f"{c.url(replica)}/111111111111/signed"
    via.send_message(QueueUrl=url, MessageBody="through " + replica)
    got = via.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert [m["Body"] for m in got] == ["through " + replica]

    for key, secret, code in ((KEY.access_key_id, "wrong", "SignatureDoesNotMatch"),
                              ("AKIDNOBODY", KEY.secret_access_key, "InvalidClientTokenId")):
        bad = c.sqs(replica, key, secret, retries={"max_attempts": 1})
        with pytest.raises(ClientError) as e:
            bad.send_message(QueueUrl=url, MessageBody="never")
        assert (e.value.response["Error"]["Code"], e.value.response["ResponseMetadata"]["HTTPStatusCode"]) == \
            (code, 403)
    assert via.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                                                  "ApproximateNumberOfMessagesNotVisible"]
                                    )["Attributes"] == {"ApproximateNumberOfMessages": "0",
                                                        "ApproximateNumberOfMessagesNotVisible": "1"}
