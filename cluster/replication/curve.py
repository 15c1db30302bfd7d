"""CurveZMQ on the stream's links: each member's keypair, derived from the cluster secret, and
what a failed handshake means.

Each node's ROUTER is a CURVE server with the node's own keypair; each DEALER is a CURVE client
with the node's own keypair and the peer's public key as the server key. ZeroMQ then encrypts
every frame of the link (Curve25519 key agreement, XSalsa20-Poly1305 per message, fresh
short-term keys per connection). CURVE gives the stream confidentiality; the per-frame HMAC of
cluster/replication/wire.py still authenticates the sender's name, and no ZAP handler is set,
so libzmq accepts any client that completes the handshake with the right server key.

Keys. A member's 32-byte Curve25519 secret key is HKDF-SHA256 of the cluster secret with an info
string naming the member (``derive_key`` of wire.py, the same extract-then-expand as the MAC key,
another info), and its public key is ``zmq.curve_public`` of it. So every member computes every
member's public key from the configuration alone, and nothing new is distributed. A key derived
from the secret is as strong as the trust model already in place: whoever holds the cluster
secret can already forge any member's frames (the MAC key) and join Raft (its password), so
being able to compute the members' CURVE keys grants them nothing more; whoever lacks the secret
cannot compute any of those keys (HKDF is a PRF keyed by the secret), so cannot complete a
handshake nor read a recorded link. CURVE's short-term keys, fresh per connection, also keep a
recorded link unreadable to someone who learns the secret later.

A member with ``encrypt-links`` on and one with it off cannot talk: ZMTP refuses the mechanism
mismatch at the handshake, before any frame. ``handshake_failure`` turns libzmq's monitor event
into the sentence the transport logs (it counts them as ``handshake_failed``).
"""

from __future__ import annotations

from dataclasses import dataclass

import zmq
import zmq.utils.z85

from cluster.replication.wire import derive_key

_INFO = b"elasticmq-py stream curve25519 secret key v1 member="

# What the transport's DEALER monitors listen for: every way a handshake can fail.
HANDSHAKE_EVENTS = int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                       | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


@dataclass(frozen=True, slots=True)
class CurveKeys:
    public: bytes   # z85, 40 bytes
    secret: bytes   # z85, 40 bytes


def member_keys(secret: str | bytes, member: str) -> CurveKeys:
    """The CURVE keypair of ``member`` in a cluster whose secret is ``secret``."""
    z = zmq.utils.z85.encode(derive_key(secret, _INFO + member.encode("utf-8")))
    return CurveKeys(zmq.curve_public(z), z)


class LinkCrypto:
    """How one node's stream sockets are set up: CURVE with its keys, or nothing when off."""

    def __init__(self, secret: str | bytes, self_name: str, enabled: bool) -> None:
        self.enabled = enabled
        self._secret = secret
        self._own = member_keys(secret, self_name) if enabled else None

    def server(self, sock: zmq.Socket) -> None:
        if self._own is not None:
            sock.setsockopt(zmq.CURVE_SERVER, 1)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, self._own.public)
            sock.setsockopt(zmq.CURVE_SECRETKEY, self._own.secret)

    def client(self, sock: zmq.Socket, peer: str) -> None:
        if self._own is not None:
            sock.setsockopt(zmq.CURVE_SERVERKEY, member_keys(self._secret, peer).public)
            sock.setsockopt(zmq.CURVE_PUBLICKEY, self._own.public)
            sock.setsockopt(zmq.CURVE_SECRETKEY, self._own.secret)


def handshake_failure(event: int, value: int, peer: str, encrypted: bool) -> str:
    """What to tell the operator about a failed handshake with ``peer``, from a monitor event.
    ZMTP names a mechanism mismatch; otherwise the cause is a guess (the end that is dropped
    mid-handshake learns no detail), from what this node's own setting makes likely."""
    mine, theirs = ("true", "false") if encrypted else ("false", "true")
    agree = "every member must have the same [cluster] encrypt-links, and until they do nothing is exchanged"
    if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return f"this node has encrypt-links = {mine} and {peer} has {theirs}: {agree}"
    if encrypted:
        return (f"the CURVE handshake with {peer} failed: {peer} has encrypt-links = false or another "
                f"cluster secret; every member must have the same secret and the same [cluster] encrypt-links")
    return f"the handshake with {peer} failed: {peer} likely has encrypt-links = true, this node false: {agree}"
