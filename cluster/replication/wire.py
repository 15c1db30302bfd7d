"""The mutation stream's wire format, sans-I/O: a frame <-> authenticated bytes.

Layout of one ZeroMQ message::

    b"EM1"                       magic + version: a peer of another format is refused cleanly
    u8 len | sender name         who sent it (UTF-8, 1..255 bytes)
    payload                      msgpack of [tag, field, field, ...]
    mac                          32 bytes, HMAC-SHA256

``mac = HMAC-SHA256(stream_key, u16 len | cluster | u16 len | recipient | everything before mac)``.

* The sender's name is inside the authenticated part, so nobody without the secret can change
  it in transit. Every member holds the same key, so the MAC does not tell members apart: whoever
  holds the secret is trusted as any member, as with pysyncobj's password. The ZeroMQ routing
  identity is never trusted (the transport only checks it agrees).
* The cluster name and the recipient's name are authenticated but not sent: a frame of another
  cluster with the same secret, or a frame captured on one link and replayed to another member,
  fails the MAC like any forgery. Replays on the *same* link are not detected here: every frame
  of the stream is idempotent (batches are deduplicated by seq, acks are cumulative) and epochs
  fence stale traffic, so a replay can at worst repeat what already happened.
* ``stream_key`` is derived from the cluster secret with HKDF-SHA256 (RFC 5869, written out
  below on hmac/hashlib) with a fixed salt and an info string naming this use, so the secret is
  never used directly and pysyncobj's use of the same secret (its password) gets an unrelated key.
* The MAC is checked (``hmac.compare_digest``) before a single byte of the payload is parsed;
  msgpack never sees unauthenticated input, and nothing is ever unpickled.

Cost. A batch and its acks cross the wire for every group commit, so those two frames (and the
heartbeat, and the frames of forwarded requests) are packed and checked by code written for them
(``_FAST``) rather than by the generic schema walk, and each MAC starts from a copy of an HMAC
already keyed and fed the authenticated prefix of its link (one per recipient): 2-3.5 µs per
batch or ack frame instead of 5-6 (this machine, noisy). The bytes are the same either way.

Tags are positions in ``messages.FRAME_TYPES`` (append-only there), so new frame types need no
change here: a frame is any frozen dataclass whose fields are int / str / bytes / bool / None,
tuples of those (``tuple[int, ...]`` or fixed ``tuple[str, int]``), unions of those, or nested
dataclasses of the same kind. Each decoded field is checked against its annotation, so a frame
that authenticated but has the wrong shape (a peer running another version) raises WireError too.
The transport's liveness ``Heartbeat`` uses the reserved tag -1 and is kept out of FRAME_TYPES:
it is the transport's business, not the protocol cores'.

Bundles (``groups`` >= 2). A node whose queues are split into G replication groups sends each
peer one message per turn carrying every group's frames, so the MAC, the ZeroMQ send and the
receiver's wake-up are paid once per turn, not once per group::

    b"EM2"                       a bundle: only a codec of G >= 2 reads it
    u8 len | sender name         as in EM1
    u8 groups                    the sender's G: a peer configured with another G is refused
    payload                      msgpack of [[group, tag, field, ...], ...], at least one item
    mac                          as in EM1, over everything before it (the G byte included)

Link-level frames (the Heartbeat) travel as items of group 0. A G >= 2 codec neither sends nor
accepts EM1 and a G = 1 codec neither sends nor accepts EM2, so each side of a G mismatch
refuses the other's traffic cleanly (``GroupsMismatch``, once the MAC has verified, so only a
holder of the secret is reported as a misconfigured member). G = 1 is today's EM1, byte for
byte, on the same code: ``encode``/``decode`` there, ``encode_bundle``/``decode_bundle`` at
G >= 2, each refusing to be called at the other G (TypeError: the caller's bug).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import struct
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import msgpack

from cluster.replication import messages

MAGIC = b"EM1"
BUNDLE_MAGIC = b"EM2"
MAX_GROUPS = 255
MAC_SIZE = 32
HEARTBEAT_TAG = -1
# Default bound on an accepted frame. A batch carries at most Limits.max_batch_ops operations,
# each at most an SQS message (256 KiB) plus attributes; the transport sets the same bound as
# ZMQ_MAXMSGSIZE so a larger message is dropped by libzmq before it is buffered whole.
DEFAULT_MAX_FRAME = 256 * 1024 * 1024

_SALT = b"elasticmq-py cluster secret salt v1"
_INFO = b"elasticmq-py mutation stream hmac-sha256 v1"


class WireError(ValueError):
    """Anything wrong with received bytes: malformed, unauthenticated, wrong cluster or shape."""


class AuthenticationError(WireError):
    """The MAC did not verify: another secret or cluster, another recipient, or tampering."""


class GroupsMismatch(WireError):
    """An authentic frame from a member configured with another number of groups."""


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Transport liveness, sent on an otherwise idle link.

    ``incarnation`` is random per process start, so a peer that restarted between two heartbeats
    is seen as a new connection. ``hears_you`` says whether the sender has received an
    authenticated frame from the recipient recently: a link cut in one direction only makes
    both ends see the peer as disconnected, not just the end that stopped receiving.
    """

    incarnation: int
    hears_you: bool


def derive_key(secret: str | bytes, info: bytes = _INFO) -> bytes:
    """HKDF-SHA256(secret, salt=_SALT, info), 32 bytes (RFC 5869 extract-then-expand). Each use
    of the cluster secret names itself in ``info``: the stream's MAC key is ``_INFO``'s, the
    CURVE keys (cluster/replication/curve.py) have their own."""
    ikm = secret.encode() if isinstance(secret, str) else bytes(secret)
    prk = hmac.new(_SALT, ikm, hashlib.sha256).digest()
    return hmac.new(prk, info + b"\x01", hashlib.sha256).digest()


# --- field schemas: generic over the dataclasses of FRAME_TYPES ------------------------------

Check = Callable[[Any], Any]   # validates/converts a decoded value, raises _Bad


class _Bad(Exception):
    pass


def _scalar(kind: type) -> Check:
    def check(v: Any) -> Any:
        # bool is an int subclass: an int field must not accept True, nor a bool field 1
        if type(v) is not kind:
            raise _Bad(f"expected {kind.__name__}, got {type(v).__name__}")
        return v
    return check


def _none(v: Any) -> Any:
    if v is not None:
        raise _Bad(f"expected None, got {type(v).__name__}")
    return v


def _union(options: Sequence[Check]) -> Check:
    def check(v: Any) -> Any:
        for opt in options:
            try:
                return opt(v)
            except _Bad:
                continue
        raise _Bad(f"{type(v).__name__} matches no alternative")
    return check


def _var_tuple(elem: Check) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not tuple:
            raise _Bad(f"expected a sequence, got {type(v).__name__}")
        return tuple(elem(x) for x in v)
    return check


def _fixed_tuple(elems: Sequence[Check]) -> Check:
    def check(v: Any) -> Any:
        if type(v) is not tuple or len(v) != len(elems):
            raise _Bad(f"expected a tuple of {len(elems)}")
        return tuple(c(x) for c, x in zip(elems, v))
    return check


class _Schema:
    """How one dataclass crosses the wire: its field names and a checker per field."""

    def __init__(self, cls: type) -> None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls!r} is not a dataclass")
        self.cls = cls
        hints = typing.get_type_hints(cls)
        self.names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
        self.checks = tuple(_check_for(hints[n], cls) for n in self.names)

    def to_wire(self, obj: Any) -> list:
        return [_to_wire(getattr(obj, n)) for n in self.names]

    def from_wire(self, values: Sequence[Any]) -> Any:
        if len(values) != len(self.checks):
            raise _Bad(f"{self.cls.__name__} has {len(self.checks)} fields, got {len(values)}")
        return self.cls(*(c(v) for c, v in zip(self.checks, values)))


_SCHEMAS: dict[type, _Schema] = {}


def _schema(cls: type) -> _Schema:
    s = _SCHEMAS.get(cls)
    if s is None:
        s = _SCHEMAS[cls] = _Schema(cls)
    return s


def _check_for(hint: Any, owner: type) -> Check:
    if hint in (int, str, bytes, bool):
        return _scalar(hint)
    if hint is None or hint is type(None):
        return _none
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _union([_check_for(a, owner) for a in args])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _var_tuple(_check_for(args[0], owner))
        return _fixed_tuple([_check_for(a, owner) for a in args])
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        nested = _schema(hint)

        def check(v: Any) -> Any:
            if type(v) is not tuple:
                raise _Bad(f"expected {hint.__name__} fields")
            return nested.from_wire(v)
        return check
    raise TypeError(f"{owner.__name__}: field type {hint!r} cannot cross the wire")


def _to_wire(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_to_wire(x) for x in v]
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _schema(type(v)).to_wire(v)
    return v


# --- the codec ------------------------------------------------------------------------------

class WireCodec:
    """Encodes frames sent by ``self_name`` and decodes frames addressed to it.

    One per node: the derived key, the cluster name and the node's own name are fixed.
    """

    def __init__(self, cluster: str, secret: str | bytes, self_name: str, *,
                 frame_types: Sequence[type] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                 groups: int = 1) -> None:
        if type(groups) is not int or not 1 <= groups <= MAX_GROUPS:
            raise ValueError(f"groups must be 1..{MAX_GROUPS}, got {groups!r}")
        self.groups = groups
        self.cluster = cluster
        self.self_name = self_name
        self.max_frame = max_frame
        self._key = derive_key(secret)
        self._name_field = _name_field(self_name)
        self._types = tuple(messages.FRAME_TYPES if frame_types is None else frame_types)
        self._tags = {cls: i for i, cls in enumerate(self._types)}
        self._tags[Heartbeat] = HEARTBEAT_TAG
        self._by_tag = {i: _schema(cls) for cls, i in self._tags.items()}   # schema errors fail here, at start
        self._cluster_field = _u16(cluster.encode())
        # recipient -> an HMAC already keyed and fed the authenticated prefix: each frame's MAC
        # is a copy of it, fed the frame
        self._macs: dict[str, Any] = {}
        self._own_mac = self._keyed(self_name)
        self._head = MAGIC + self._name_field
        self._pack = msgpack.Packer(use_bin_type=True).pack
        fast = {messages.Batch: _FAST_BATCH, messages.Ack: _FAST_ACK, Heartbeat: _FAST_HEARTBEAT,
                **{cls: _fast_forward(cls, 1) for cls in _FORWARD_ONE},
                **{cls: _fast_forwards(cls, 1) for cls in _FORWARD_MANY}}
        self._fast_decode = {self._tags[cls]: check for cls, check in fast.items() if cls in self._tags}
        # The same frame is sent to every replica in turn: pack it once.
        self._last_frame: Any = None
        self._last_head: bytes = b""
        self._bundle_head = BUNDLE_MAGIC + self._name_field + bytes((groups,))
        items = {messages.Batch: _ITEM_BATCH, messages.Ack: _ITEM_ACK, Heartbeat: _ITEM_HEARTBEAT,
                 **{cls: _fast_forward(cls, 2) for cls in _FORWARD_ONE},
                 **{cls: _fast_forwards(cls, 2) for cls in _FORWARD_MANY}}
        self._item_decode = {self._tags[cls]: check for cls, check in items.items() if cls in self._tags}
        if groups > 1:
            # A node of G >= 2 sends and reads bundles only. Its EM1 entry points are swapped for
            # refusals here, once, so G = 1's encode and decode test nothing more per frame.
            self.encode = self.decode = self._em1_at_groups   # type: ignore[method-assign]

    def encode(self, frame: Any, to: str) -> bytes:
        if frame is not self._last_frame:
            t = type(frame)
            tag = self._tags.get(t)
            if tag is None:
                raise TypeError(f"{t.__name__} is not a frame type")
            if t is messages.Batch:
                payload = self._pack((tag, frame.epoch, frame.seq, frame.written_epoch, frame.mutations))
            elif t is messages.Ack:
                payload = self._pack((tag, frame.epoch, frame.seq))
            elif t in _FORWARD_ONE:
                payload = self._pack((tag, frame.request_id, frame.payload))
            elif t in _FORWARD_MANY:
                payload = self._pack((tag, frame.items))
            else:
                payload = self._pack([tag, *self._by_tag[tag].to_wire(frame)])
            self._last_frame, self._last_head = frame, self._head + payload
        head = self._last_head
        m = (self._macs.get(to) or self._keyed(to)).copy()
        m.update(head)
        return head + m.digest()

    def decode(self, data: bytes) -> tuple[str, Any]:
        """(authenticated sender name, frame), or WireError and nothing else."""
        try:
            return self._decode(data)
        except WireError:
            raise
        except Exception as err:   # a bug or a msgpack corner case must not escape as anything else
            raise WireError(f"undecodable frame: {type(err).__name__}: {err}") from None

    def peek_sender(self, data: bytes) -> str | None:
        """The *claimed* sender, for logs about frames that failed authentication."""
        try:
            n = data[len(MAGIC)]
            return bytes(data[len(MAGIC) + 1:len(MAGIC) + 1 + n]).decode("utf-8", "replace")[:64]
        except (IndexError, TypeError):
            return None

    def _decode(self, data: bytes) -> tuple[str, Any]:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise WireError("not bytes")
        data = bytes(data)
        if len(data) > self.max_frame:
            raise WireError(f"frame of {len(data)} bytes exceeds {self.max_frame}")
        if len(data) < len(MAGIC) + 1 + MAC_SIZE or not data.startswith(MAGIC):
            raise self._not_ours(data, "not a stream frame (bad magic or too short)")
        head, mac = data[:-MAC_SIZE], data[-MAC_SIZE:]
        m = self._own_mac.copy()
        m.update(head)
        if not hmac.compare_digest(mac, m.digest()):
            raise AuthenticationError("authentication failed (wrong secret, wrong cluster, wrong recipient or tampered)")
        # Authenticated from here on: the bytes are what a member of this cluster sent.
        n = head[len(MAGIC)]
        start = len(MAGIC) + 1
        if n == 0 or start + n > len(head):
            raise WireError("bad sender field")
        try:
            sender = head[start:start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("sender name is not UTF-8") from None
        try:
            obj = msgpack.unpackb(head[start + n:], raw=False, use_list=False, strict_map_key=True)
        except Exception as err:
            raise WireError(f"payload is not msgpack: {err}") from None
        if type(obj) is not tuple or not obj or type(obj[0]) is not int:
            raise WireError("payload is not [tag, fields...]")
        fast = self._fast_decode.get(obj[0])
        if fast is not None:
            frame = fast(obj)
            if frame is None:
                raise WireError(f"{self._type_name(obj[0])}: fields of the wrong number or types")
            return sender, frame
        return sender, self._generic(obj[0], obj[1:])

    # -- bundles (groups >= 2) -----------------------------------------------------------------

    def encode_bundle(self, items: Sequence[tuple[int, Any]], to: str) -> bytes:
        """One EM2 message for ``to`` carrying ``items``, (group, frame) pairs, in their order."""
        if self.groups == 1:
            raise TypeError("a codec of groups = 1 sends EM1 frames (encode), not bundles")
        if not items:
            raise ValueError("a bundle carries at least one item")
        groups, tags, body = self.groups, self._tags, []
        for g, frame in items:
            if type(g) is not int or not 0 <= g < groups:
                raise ValueError(f"group {g!r} is not one of 0..{groups - 1}")
            t = type(frame)
            tag = tags.get(t)
            if tag is None:
                raise TypeError(f"{t.__name__} is not a frame type")
            if t is messages.Batch:
                body.append((g, tag, frame.epoch, frame.seq, frame.written_epoch, frame.mutations))
            elif t is messages.Ack:
                body.append((g, tag, frame.epoch, frame.seq))
            elif t is Heartbeat and g:
                raise ValueError("a Heartbeat is link-level: it travels as an item of group 0")
            elif t in _FORWARD_ONE:
                body.append((g, tag, frame.request_id, frame.payload))
            elif t in _FORWARD_MANY:
                body.append((g, tag, frame.items))
            else:
                body.append([g, tag, *self._by_tag[tag].to_wire(frame)])
        head = self._bundle_head + self._pack(body)
        m = (self._macs.get(to) or self._keyed(to)).copy()
        m.update(head)
        return head + m.digest()

    def decode_bundle(self, data: bytes) -> tuple[str, tuple[tuple[int, Any], ...]]:
        """(authenticated sender name, ((group, frame), ...)), or WireError and nothing else. One
        malformed item refuses the whole bundle: its sender runs another version or has a bug."""
        if self.groups == 1:
            raise TypeError("a codec of groups = 1 reads EM1 frames (decode), not bundles")
        try:
            return self._decode_bundle(data)
        except WireError:
            raise
        except Exception as err:   # as in decode: nothing but WireError escapes
            raise WireError(f"undecodable bundle: {type(err).__name__}: {err}") from None

    def _decode_bundle(self, data: bytes) -> tuple[str, tuple[tuple[int, Any], ...]]:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise WireError("not bytes")
        data = bytes(data)
        if len(data) > self.max_frame:
            raise WireError(f"frame of {len(data)} bytes exceeds {self.max_frame}")
        if len(data) < len(BUNDLE_MAGIC) + 2 + MAC_SIZE or not data.startswith(BUNDLE_MAGIC):
            raise self._not_ours(data, "not a bundle (bad magic or too short)")
        head, mac = data[:-MAC_SIZE], data[-MAC_SIZE:]
        m = self._own_mac.copy()
        m.update(head)
        if not hmac.compare_digest(mac, m.digest()):
            raise AuthenticationError("authentication failed (wrong secret, wrong cluster, wrong recipient or tampered)")
        # Authenticated from here on.
        sender, at = _sender(head, len(BUNDLE_MAGIC), 1)
        if head[at] != self.groups:
            raise GroupsMismatch(f"{sender} runs with groups = {head[at]}, this node with {self.groups}")
        try:
            obj = msgpack.unpackb(head[at + 1:], raw=False, use_list=False, strict_map_key=True)
        except Exception as err:
            raise WireError(f"payload is not msgpack: {err}") from None
        if type(obj) is not tuple or not obj:
            raise WireError("payload is not [[group, tag, fields...], ...]")
        groups, fast, items = self.groups, self._item_decode, []
        for v in obj:
            if type(v) is not tuple or len(v) < 2 or type(v[0]) is not int or type(v[1]) is not int:
                raise WireError("an item is not [group, tag, fields...]")
            g, tag = v[0], v[1]
            if not 0 <= g < groups:
                raise WireError(f"group {g} is not one of 0..{groups - 1}")
            check = fast.get(tag)
            if check is None:
                items.append((g, self._generic(tag, v[2:])))
                continue
            frame = check(v)
            if frame is None:
                raise WireError(f"{self._type_name(tag)} item: fields of the wrong number or types, "
                                f"or a Heartbeat outside group 0")
            items.append((g, frame))
        return sender, tuple(items)

    def _generic(self, tag: int, values: tuple) -> Any:
        """The frame of ``tag`` from its fields, checked against its schema (the frames without
        a fast path)."""
        schema = self._by_tag.get(tag)
        if schema is None:
            raise WireError(f"unknown frame tag {tag}")
        try:
            return schema.from_wire(values)
        except _Bad as err:
            raise WireError(f"{schema.cls.__name__}: {err}") from None
        except (TypeError, ValueError) as err:   # a dataclass's own __post_init__ refusing values
            raise WireError(f"{schema.cls.__name__}: {err}") from None

    def _type_name(self, tag: int) -> str:
        return self._types[tag].__name__ if tag >= 0 else "Heartbeat"

    def _not_ours(self, data: bytes, otherwise: str) -> WireError:
        """The refusal of bytes that are not this codec's layout: a GroupsMismatch naming the
        sender's G when they are an authentic frame of the other layout (EM1 at G >= 2, EM2 at
        G = 1), else ``WireError(otherwise)``."""
        other = BUNDLE_MAGIC if self.groups == 1 else MAGIC
        if not data.startswith(other) or len(data) < len(other) + 1 + MAC_SIZE:
            return WireError(otherwise)
        head = data[:-MAC_SIZE]
        m = self._own_mac.copy()
        m.update(head)
        if not hmac.compare_digest(data[-MAC_SIZE:], m.digest()):
            return WireError(otherwise)
        try:
            sender, at = _sender(head, len(other), 1 if other is BUNDLE_MAGIC else 0)
        except WireError as err:
            return err
        theirs = head[at] if other is BUNDLE_MAGIC else 1
        return GroupsMismatch(f"{sender} runs with groups = {theirs}, this node with {self.groups}")

    def _em1_at_groups(self, *_: Any) -> Any:
        raise TypeError(f"a codec of groups = {self.groups} sends and reads bundles (encode_bundle, decode_bundle)")

    def _keyed(self, recipient: str) -> Any:
        """HMAC-SHA256 keyed and fed what the MAC covers before the frame: u16 len | cluster |
        u16 len | recipient."""
        m = self._macs[recipient] = hmac.new(self._key, self._cluster_field + _u16(recipient.encode()),
                                             hashlib.sha256)
        return m

    def _mac(self, recipient: str, head: bytes) -> bytes:
        m = (self._macs.get(recipient) or self._keyed(recipient)).copy()
        m.update(head)
        return m.digest()


# --- the frames of every group commit, checked by hand: the same checks as their schemas ------

def _FAST_BATCH(v: tuple) -> Any:
    if len(v) == 5 and type(v[1]) is int and type(v[2]) is int and type(v[3]) is int and type(v[4]) is bytes:
        return messages.Batch(v[1], v[2], v[3], v[4])
    return None


def _FAST_ACK(v: tuple) -> Any:
    if len(v) == 3 and type(v[1]) is int and type(v[2]) is int:
        return messages.Ack(v[1], v[2])
    return None


def _FAST_HEARTBEAT(v: tuple) -> Any:
    if len(v) == 3 and type(v[1]) is int and type(v[2]) is bool:
        return Heartbeat(v[1], v[2])
    return None


# The same checks for the items of a bundle, whose fields come after [group, tag]. Written out
# rather than run on a slice of the item, which costs 5% of a bundle's decode per item.

def _ITEM_BATCH(v: tuple) -> Any:
    if len(v) == 6 and type(v[2]) is int and type(v[3]) is int and type(v[4]) is int and type(v[5]) is bytes:
        return messages.Batch(v[2], v[3], v[4], v[5])
    return None


def _ITEM_ACK(v: tuple) -> Any:
    if len(v) == 4 and type(v[2]) is int and type(v[3]) is int:
        return messages.Ack(v[2], v[3])
    return None


def _ITEM_HEARTBEAT(v: tuple) -> Any:
    if len(v) == 4 and v[0] == 0 and type(v[2]) is int and type(v[3]) is bool:
        return Heartbeat(v[2], v[3])
    return None


# Forwarded client requests and their answers: a forwarding member sends one frame per turn to
# the master and gets one back (cluster/forward_batches.py), so these too are on every request's path.
_FORWARD_ONE = (messages.Forward, messages.ForwardReply)          # (request_id, payload)
_FORWARD_MANY = (messages.ForwardBatch, messages.ForwardReplies)  # items: ((request_id, payload), ...)


def _fast_forward(cls: type, at: int) -> Callable[[tuple], Any]:
    """The check of a ``cls`` (fields ``request_id``, ``payload``) whose fields start at ``v[at]``:
    1 in an EM1 frame, 2 in a bundle's item."""
    n = at + 2

    def check(v: tuple) -> Any:
        if len(v) == n and type(v[at]) is int and type(v[at + 1]) is bytes:
            return cls(v[at], v[at + 1])
        return None
    return check


def _fast_forwards(cls: type, at: int) -> Callable[[tuple], Any]:
    """The check of a ``cls`` whose one field, ``items``, is ``v[at]``: pairs of an int and bytes."""
    n = at + 1

    def check(v: tuple) -> Any:
        if len(v) != n or type(v[at]) is not tuple:
            return None
        items = v[at]
        for item in items:
            if type(item) is not tuple or len(item) != 2 or type(item[0]) is not int or type(item[1]) is not bytes:
                return None
        return cls(items)
    return check


def _sender(head: bytes, at: int, after: int) -> tuple[str, int]:
    """The sender's name at ``head[at]`` (u8 len | UTF-8) and the offset past it, with at least
    ``after`` bytes left behind it."""
    n = head[at]
    start = at + 1
    if n == 0 or start + n + after > len(head):
        raise WireError("bad sender field")
    try:
        return head[start:start + n].decode("utf-8"), start + n
    except UnicodeDecodeError:
        raise WireError("sender name is not UTF-8") from None


def _name_field(name: str) -> bytes:
    raw = name.encode("utf-8")
    if not 0 < len(raw) < 256:
        raise ValueError(f"node name {name!r} must be 1..255 bytes of UTF-8")
    return bytes((len(raw),)) + raw


def _u16(raw: bytes) -> bytes:
    if len(raw) > 0xFFFF:
        raise ValueError("name too long")
    return struct.pack(">H", len(raw)) + raw
