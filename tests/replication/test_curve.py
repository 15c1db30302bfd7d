"""The stream's CURVE keys (cluster/replication/curve.py): derived from the cluster secret, one
keypair per member, that every member can compute."""

from __future__ import annotations

import zmq

from cluster.replication.curve import member_keys
from cluster.replication.wire import derive_key


def test_keys_are_deterministic():
    assert member_keys("s3cret", "n1") == member_keys("s3cret", "n1")
    assert member_keys(b"s3cret", "n1") == member_keys("s3cret", "n1")


def test_keys_differ_per_member_and_per_secret():
    keys = {member_keys(secret, name) for secret in ("one", "two") for name in ("n1", "n2", "n3")}
    assert len(keys) == 6
    assert len({k.public for k in keys}) == 6 and len({k.secret for k in keys}) == 6


def test_the_public_key_is_the_secret_keys_and_both_are_z85_curve25519():
    k = member_keys("s3cret", "n2")
    assert len(k.public) == 40 and len(k.secret) == 40
    assert zmq.curve_public(k.secret) == k.public
    assert zmq.utils.z85.decode(k.secret) != derive_key("s3cret"), "not the MAC key"


def test_a_curve_pair_with_derived_keys_talks():
    server, client = member_keys("s3cret", "n1"), member_keys("s3cret", "n2")
    ctx = zmq.Context()
    r, d = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        r.curve_server, r.curve_secretkey = 1, server.secret
        port = r.bind_to_random_port("tcp://127.0.0.1")
        # the client knows the server's public key from the secret alone
        d.curve_serverkey = member_keys("s3cret", "n1").public
        d.curve_publickey, d.curve_secretkey = client.public, client.secret
        d.connect(f"tcp://127.0.0.1:{port}")
        d.send(b"hello")
        assert r.poll(5000), "the frame arrived"
        assert r.recv_multipart()[1] == b"hello"
    finally:
        r.close(0)
        d.close(0)
        ctx.term()
