"""Eavesdropping on the stream's links of a real 3-node cluster: every directed stream link goes
through a proxy that records its bytes, and message bodies (forwarded by a replica and sent to
the master) must never appear in them while encrypt-links is on. With it off they do, which is
what shows the recording would catch them."""

from __future__ import annotations

import pytest

from elasticmq_py.testing.cluster import Cluster

pytestmark = pytest.mark.slow

NAMES = ["n1", "n2", "n3"]


@pytest.mark.parametrize("encrypt", [True, False], ids=["encrypted", "clear"])
def test_bodies_never_cross_a_stream_link_in_clear_text(make_cluster, encrypt):
    c: Cluster = make_cluster(NAMES, proxied=True, encrypt_links=encrypt)
    for link in c.proxies.values():
        link.stream.record()
    c.start_all(parallel=True)
    master = c.wait_for("an active master with everyone", c.stable_master(members=set(NAMES)), 15)
    replica = next(n for n in NAMES if n != master)
    url = c.sqs(master).create_queue(QueueName="secrets")["QueueUrl"]
    markers = [f"the-marker-{via}-{i}" for via in ("forwarded", "direct") for i in range(3)]
    for body in markers[:3]:
        c.sqs(replica).send_message(QueueUrl=url, MessageBody=body)   # forwarded to the master
    for body in markers[3:]:
        c.sqs(master).send_message(QueueUrl=url, MessageBody=body)
    c.wait_for("every member has the messages", lambda: c.converged(NAMES), 5)
    seen = {m for m in markers for link in c.proxies.values() if m.encode() in link.stream.recorded}
    carried = sum(len(link.stream.recorded) for link in c.proxies.values())
    assert carried > 0, "the stream links carried traffic through the recording proxies"
    if encrypt:
        assert not seen, f"bodies crossed a stream link in clear text: {sorted(seen)}"
    else:
        assert seen == set(markers), "without encryption the recording sees every body"
