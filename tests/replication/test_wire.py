"""The stream's wire format, EM1 frames and the EM2 bundles of a node with queue groups: every
frame type and bundle round-trips, the bytes are the documented ones, and nothing unauthenticated,
tampered, foreign, of another group count or malformed gets through as anything but WireError."""

from __future__ import annotations

import dataclasses
import types
import typing

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.replication import messages
from cluster.replication.messages import FRAME_TYPES, Ack, Batch
from cluster.replication.wire import (BUNDLE_MAGIC, MAC_SIZE, MAGIC, GroupsMismatch, Heartbeat, WireCodec, WireError,
                                     derive_key)

SETTINGS = settings(max_examples=150, deadline=None)
INT64 = st.integers(-(2**63), 2**63 - 1)


def _strategy(hint: typing.Any) -> st.SearchStrategy:
    """Values for a field annotation, the same generic way the codec reads them."""
    if hint is int:
        return INT64
    if hint is str:
        return st.text(max_size=20)
    if hint is bytes:
        return st.binary(max_size=200)
    if hint is bool:
        return st.booleans()
    if hint is None or hint is type(None):
        return st.none()
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_strategy(a) for a in args))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(_strategy(args[0]), max_size=5).map(tuple)
        return st.tuples(*(_strategy(a) for a in args))
    if dataclasses.is_dataclass(hint):
        return _frames_of(hint)
    raise AssertionError(f"no strategy for {hint!r}")


def _frames_of(cls: type) -> st.SearchStrategy:
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{f.name: _strategy(hints[f.name]) for f in dataclasses.fields(cls) if f.init})


ANY_FRAME = st.one_of(*(_frames_of(cls) for cls in (*FRAME_TYPES, Heartbeat)))
NAMES = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20).filter(
    lambda s: 0 < len(s.encode()) < 256)


def pair(cluster: str = "c", secret: str = "s3cret", a: str = "n1", b: str = "n2") -> tuple[WireCodec, WireCodec]:
    return WireCodec(cluster, secret, a), WireCodec(cluster, secret, b)


@st.composite
def bundles(draw: st.DrawFn, groups: int) -> tuple:
    """1..6 (group, frame) items; a Heartbeat is link-level, so it rides in group 0."""
    items = draw(st.lists(st.tuples(st.integers(0, groups - 1), ANY_FRAME), min_size=1, max_size=6))
    return tuple((0 if type(f) is Heartbeat else g, f) for g, f in items)


def group_pair(groups: int = 3, a: str = "n1", b: str = "n2") -> tuple[WireCodec, WireCodec]:
    return WireCodec("c", "s3cret", a, groups=groups), WireCodec("c", "s3cret", b, groups=groups)


@st.composite
def signed(draw: st.DrawFn) -> tuple[bytes, typing.Callable[[bytes], typing.Any]]:
    """An authentic message for n2, an EM1 frame or an EM2 bundle of G = 3, and n2's decoder of it."""
    if draw(st.booleans(), label="bundle"):
        tx, rx = group_pair()
        return tx.encode_bundle(draw(bundles(3)), "n2"), rx.decode_bundle
    tx, rx = pair()
    return tx.encode(draw(ANY_FRAME), "n2"), rx.decode


@SETTINGS
@given(ANY_FRAME, NAMES, NAMES)
def test_every_frame_type_round_trips(frame, sender, recipient):
    tx, rx = pair(a=sender, b=recipient)
    assert rx.decode(tx.encode(frame, recipient)) == (sender, frame)


def test_every_registered_type_is_covered():
    # A type appended to FRAME_TYPES must be encodable: its schema is built at codec creation.
    codec = WireCodec("c", "s", "n1")
    assert len(codec._by_tag) == len(FRAME_TYPES) + 1


@SETTINGS
@given(signed(), st.data())
def test_tampering_with_any_byte_is_rejected(message, data):
    sent, decode = message
    wire = bytearray(sent)
    i = data.draw(st.integers(0, len(wire) - 1), label="index")
    wire[i] ^= data.draw(st.integers(1, 255), label="xor")
    with pytest.raises(WireError):
        decode(bytes(wire))


@SETTINGS
@given(signed(), st.data())
def test_truncation_and_extension_are_rejected(message, data):
    wire, decode = message
    cut = data.draw(st.integers(0, len(wire) - 1), label="cut")
    with pytest.raises(WireError):
        decode(wire[:cut])
    with pytest.raises(WireError):
        decode(wire + data.draw(st.binary(min_size=1, max_size=8), label="extra"))


@SETTINGS
@given(st.binary(max_size=300))
def test_random_bytes_are_rejected(blob):
    for decode in (pair()[1].decode, group_pair()[1].decode_bundle):
        for data in (blob, MAGIC + blob, BUNDLE_MAGIC + blob):
            with pytest.raises(WireError):
                decode(data)


@SETTINGS
@given(ANY_FRAME, st.text(min_size=1, max_size=30))
def test_another_secret_is_rejected(frame, other_secret):
    rx = WireCodec("c", "s3cret", "n2")
    if other_secret == "s3cret":
        other_secret += "!"
    with pytest.raises(WireError):
        rx.decode(WireCodec("c", other_secret, "n1").encode(frame, "n2"))


def test_wrong_cluster_and_wrong_recipient_are_rejected():
    frame = Ack(3, 7)
    rx = WireCodec("orders", "s", "n2")
    with pytest.raises(WireError):
        rx.decode(WireCodec("billing", "s", "n1").encode(frame, "n2"))
    with pytest.raises(WireError):   # captured on the n1->n3 link, replayed to n2
        rx.decode(WireCodec("orders", "s", "n1").encode(frame, "n3"))
    assert rx.decode(WireCodec("orders", "s", "n1").encode(frame, "n2")) == ("n1", frame)


def test_a_member_cannot_impersonate_another_by_rewriting_the_name():
    tx, rx = pair(a="n1")
    wire = tx.encode(Ack(1, 1), "n2")
    forged = MAGIC + bytes((2,)) + b"n3" + wire[len(MAGIC) + 3:]
    with pytest.raises(WireError):
        rx.decode(forged)


def _sign(codec: WireCodec, payload: bytes, to: str = "n2") -> bytes:
    """An authentic frame around an arbitrary payload: what a buggy or other-version peer sends."""
    head = MAGIC + bytes((len(codec.self_name),)) + codec.self_name.encode() + payload
    return head + codec._mac(to, head)


@pytest.mark.parametrize("payload", [
    msgpack.packb([99, 1, 2]),                       # unknown tag
    msgpack.packb([0, 1, 2]),                        # Batch with too few fields
    msgpack.packb([0, 1, 2, 3, "not bytes"]),        # Batch with a str where bytes go
    msgpack.packb([1, True, 2]),                     # Ack with a bool where an int goes
    msgpack.packb([1, 1, 2, 3]),                     # Ack with too many fields
    msgpack.packb({"tag": 1}),                       # a map
    msgpack.packb([]),                               # no tag
    msgpack.packb(["1", 1, 1]),                      # str tag
    msgpack.packb([-1, 5]),                          # Heartbeat with a missing field
    msgpack.packb([1, 2**64 - 1, msgpack.ExtType(5, b"x")]),
    b"\xc1",                                         # never-used msgpack byte
    b"\x92\x01",                                     # truncated array
    msgpack.packb([1, 1, 1]) + b"\x00",              # trailing data
], ids=lambda p: p[:12].hex())
def test_authentic_but_malformed_payloads_raise_wire_error(payload):
    tx, rx = pair()
    with pytest.raises(WireError):
        rx.decode(_sign(tx, payload))


def test_oversized_frames_are_rejected_before_authentication():
    tx = WireCodec("c", "s", "n1")
    rx = WireCodec("c", "s", "n2", max_frame=1000)
    with pytest.raises(WireError, match="exceeds"):
        rx.decode(tx.encode(Batch(1, 1, 1, b"x" * 2000), "n2"))


def test_key_derivation_is_hkdf_sha256():
    # RFC 5869 test case 1, expanded to one block, checks the construction (not our constants).
    import hashlib
    import hmac
    ikm, salt, info = bytes.fromhex("0b" * 22), bytes.fromhex("000102030405060708090a0b0c"), bytes.fromhex(
        "f0f1f2f3f4f5f6f7f8f9")
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    okm = hmac.new(prk, info + b"\x01", hashlib.sha256).digest()
    assert okm.hex() == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
    assert derive_key("a") != derive_key("b") and len(derive_key("a")) == 32
    assert derive_key("s") != b"s".ljust(32, b"\0")


def test_the_same_frame_encodes_per_recipient():
    tx = WireCodec("c", "s", "n1")
    f = Batch(1, 1, 1, b"m")
    to2, to3 = tx.encode(f, "n2"), tx.encode(f, "n3")
    assert to2[:-MAC_SIZE] == to3[:-MAC_SIZE] and to2 != to3
    assert WireCodec("c", "s", "n3").decode(to3) == ("n1", f)


def test_unregistered_types_cannot_be_sent():
    with pytest.raises(TypeError):
        WireCodec("c", "s", "n1").encode(messages.Complete((1,)), "n2")


FORWARDING = [messages.Forward(1, b"x" * 10), messages.ForwardReply(2**40, b""),
              messages.ForwardBatch(((1, b"a"), (2**63 - 1, b""))), messages.ForwardBatch(()),
              messages.ForwardReplies(((3, b"z" * 300),))]


@pytest.mark.parametrize("frame", [Batch(3, 2**40, 2, b"\x00m" * 50), Batch(-1, 0, 0, b""), Ack(7, 2**63 - 1),
                                   Ack(0, -5), Heartbeat(2**61, True), Heartbeat(1, False), *FORWARDING])
def test_the_hot_frames_keep_the_documented_layout(frame):
    """Batch, Ack, Heartbeat and the frames of forwarded requests are packed and checked by
    their own code (cost): the bytes are the module docstring's, computed here from the generic
    schema and a fresh HMAC."""
    import hashlib
    import hmac

    from cluster.replication.wire import HEARTBEAT_TAG, _schema

    tag = HEARTBEAT_TAG if type(frame) is Heartbeat else FRAME_TYPES.index(type(frame))
    head = MAGIC + b"\x02n1" + msgpack.packb([tag, *_schema(type(frame)).to_wire(frame)], use_bin_type=True)
    mac = hmac.new(derive_key("s"), b"\x00\x01c" + b"\x00\x02n2" + head, hashlib.sha256).digest()
    assert WireCodec("c", "s", "n1").encode(frame, "n2") == head + mac
    assert WireCodec("c", "s", "n2").decode(head + mac) == ("n1", frame)


# Bytes recorded from the codec, not recomputed: a change of layout, tag, key derivation or MAC
# input for groups = 1 fails here even where encode and decode would still agree with each other.
GOLDEN_EM1 = [
    (Batch(3, 2**40, 2, b"\x00mut"),
     "454d31026e31950003cf000001000000000002c404006d75746dff8c59c63cb4368c96a9f978758418cf0fdd54e87702de083b42cf80cc9a6e"),
    (Ack(7, 12345),
     "454d31026e31930107cd303991368126d38afef6bcab08e8b7c4894a7ac22766521191474a7dea54610e41cb"),
    (Heartbeat(2**61 + 5, True),
     "454d31026e3193ffcf2000000000000005c358ce84e420e5064eb941bf9fd372e0fd38a66894f2398ecd77fcbb3482f8bd12"),
    # what a member forwards to a master of a build without the batch frames, and its answer
    (messages.Forward(5, b"req"),
     "454d31026e31930a05c4037265711d76a65e551da7ae29e723d52d36f91819758b8388d35f977bdf13430b2f3391"),
    (messages.ForwardReply(2**40, b"answer"),
     "454d31026e31930bcf0000010000000000c406616e73776572448ca3034afe1e8d68df87122659c3e48a43512c656a6ca98d63a7f2a55aa9e5"),
]


@pytest.mark.parametrize("frame,wire", GOLDEN_EM1, ids=lambda v: type(v).__name__ if not isinstance(v, str) else "")
def test_em1_frames_are_byte_for_byte_the_recorded_ones(frame, wire):
    assert WireCodec("orders", "correct horse", "n1").encode(frame, "n2").hex() == wire
    assert WireCodec("orders", "correct horse", "n2").decode(bytes.fromhex(wire)) == ("n1", frame)


# -- bundles: the EM2 layout of a node with G >= 2 groups ---------------------------------------

@SETTINGS
@given(st.integers(2, 255).flatmap(lambda g: st.tuples(st.just(g), bundles(g))), NAMES, NAMES)
def test_every_bundle_round_trips(g_items, sender, recipient):
    groups, items = g_items
    tx, rx = group_pair(groups, sender, recipient)
    assert rx.decode_bundle(tx.encode_bundle(items, recipient)) == (sender, items)
    assert rx.decode_bundle(tx.encode_bundle(list(items), recipient)) == (sender, items)


@pytest.mark.parametrize("frame", FORWARDING)
def test_forwarding_items_of_a_bundle_keep_the_generic_layout(frame):
    """Their items are packed and checked by their own code too: the same bytes as the schema's."""
    from cluster.replication.wire import _schema

    items = ((2, frame), (0, Ack(1, 2)))
    body = [[g, FRAME_TYPES.index(type(f)), *_schema(type(f)).to_wire(f)] for g, f in items]
    tx, rx = group_pair()
    wire = tx.encode_bundle(items, "n2")
    assert wire == _sign_bundle(tx, msgpack.packb(body, use_bin_type=True))
    assert rx.decode_bundle(wire) == ("n1", items)


_FORWARD, _BATCH = FRAME_TYPES.index(messages.Forward), FRAME_TYPES.index(messages.ForwardBatch)


@pytest.mark.parametrize("fields", [
    [_FORWARD, 1], [_FORWARD, 1, b"x", 2], [_FORWARD, True, b"x"], [_FORWARD, 1, "not bytes"],
    [_BATCH], [_BATCH, [[1, b"x"]], 2], [_BATCH, [[1]]], [_BATCH, [[1, b"x", 3]]], [_BATCH, [[True, b"x"]]],
    [_BATCH, [[1, "x"]]], [_BATCH, [1, b"x"]], [_BATCH, {"a": 1}], [_BATCH, [[1, b"x"], [2, None]]],
], ids=str)
def test_malformed_forwarding_frames_are_refused_as_their_schema_refuses_them(fields):
    payload = msgpack.packb(fields, use_bin_type=True)
    tx, rx = pair()
    as_read = msgpack.unpackb(payload, raw=False, use_list=False)
    with pytest.raises(WireError):
        rx._generic(as_read[0], as_read[1:])
    with pytest.raises(WireError):
        rx.decode(_sign(tx, payload))
    gtx, grx = group_pair()
    with pytest.raises(WireError):
        grx.decode_bundle(_sign_bundle(gtx, msgpack.packb([[1, *fields]], use_bin_type=True)))


def test_a_bundle_keeps_the_documented_layout():
    """Batch, Ack and Heartbeat items are packed and checked by their own code (cost): the bytes
    are the module docstring's, computed from the generic schema and a fresh HMAC, and the
    recorded ones."""
    import hashlib
    import hmac

    from cluster.replication.wire import HEARTBEAT_TAG, _schema

    items = ((0, Heartbeat(9, False)), (2, Batch(3, 2**40, 2, b"\x00mut")), (1, Ack(7, 12345)),
             (1, messages.Resend(4, 5)))
    body = [[g, HEARTBEAT_TAG if type(f) is Heartbeat else FRAME_TYPES.index(type(f)), *_schema(type(f)).to_wire(f)]
            for g, f in items]
    head = BUNDLE_MAGIC + b"\x02n1" + b"\x03" + msgpack.packb(body, use_bin_type=True)
    mac = hmac.new(derive_key("correct horse"), b"\x00\x06orders" + b"\x00\x02n2" + head, hashlib.sha256).digest()
    wire = WireCodec("orders", "correct horse", "n1", groups=3).encode_bundle(items, "n2")
    assert wire == head + mac
    assert wire.hex() == ("454d32026e3103949400ff09c296020003cf000001000000000002c404006d7574940101"
                          "07cd30399401020405c050aa1d7c2007511bbb724cb0d519b843ae45f96bd61ff77a2a58d55f473ee6")
    assert WireCodec("orders", "correct horse", "n2", groups=3).decode_bundle(wire) == ("n1", items)


@pytest.mark.parametrize("ours,theirs", [(3, 2), (2, 3), (3, 255)])
def test_a_bundle_of_another_group_count_is_refused_by_name(ours, theirs):
    tx = WireCodec("c", "s", "n1", groups=theirs)
    rx = WireCodec("c", "s", "n2", groups=ours)
    with pytest.raises(GroupsMismatch, match=f"n1 runs with groups = {theirs}, this node with {ours}"):
        rx.decode_bundle(tx.encode_bundle(((0, Ack(1, 1)),), "n2"))


def test_em1_and_em2_refuse_each_other():
    em1 = WireCodec("c", "s", "n1").encode(Ack(1, 1), "n2")
    em2 = WireCodec("c", "s", "n1", groups=3).encode_bundle(((0, Ack(1, 1)),), "n2")
    with pytest.raises(GroupsMismatch, match="n1 runs with groups = 1, this node with 3"):
        WireCodec("c", "s", "n2", groups=3).decode_bundle(em1)
    with pytest.raises(GroupsMismatch, match="n1 runs with groups = 3, this node with 1"):
        WireCodec("c", "s", "n2").decode(em2)
    # The other layout is named only when its MAC verifies: a stranger is not a misconfigured member.
    for wire, rx in ((em1, WireCodec("c", "other", "n2", groups=3)), (em2, WireCodec("c", "other", "n2")),
                     (em2, WireCodec("c", "s", "n3"))):
        with pytest.raises(WireError) as refused:
            rx.decode_bundle(wire) if rx.groups > 1 else rx.decode(wire)
        assert type(refused.value) is WireError


def test_each_codec_refuses_the_other_layouts_calls():
    one, three = WireCodec("c", "s", "n1"), WireCodec("c", "s", "n1", groups=3)
    for call in (lambda: one.encode_bundle(((0, Ack(1, 1)),), "n2"), lambda: one.decode_bundle(b"EM2"),
                 lambda: three.encode(Ack(1, 1), "n2"), lambda: three.decode(b"EM1")):
        with pytest.raises(TypeError):
            call()
    for bad in (0, 256, -1, True, 2.0):
        with pytest.raises(ValueError):
            WireCodec("c", "s", "n1", groups=bad)


@pytest.mark.parametrize("items", [
    (),                                        # nothing to send is no bundle
    ((3, Ack(1, 1)),),                         # no group 3 among 0..2
    ((-1, Ack(1, 1)),),
    ((True, Ack(1, 1)),),                      # a bool is not a group number
    ((1, Heartbeat(1, True)),),                # a heartbeat is link-level: group 0
])
def test_what_cannot_be_a_bundle_is_refused_at_the_sender(items):
    with pytest.raises(ValueError):
        WireCodec("c", "s", "n1", groups=3).encode_bundle(items, "n2")


def test_unregistered_types_cannot_be_bundled():
    with pytest.raises(TypeError):
        WireCodec("c", "s", "n1", groups=3).encode_bundle(((0, messages.Complete((1,))),), "n2")


def _sign_bundle(codec: WireCodec, payload: bytes, groups: int = 3, to: str = "n2") -> bytes:
    """An authentic bundle around an arbitrary payload: what a buggy or other-version peer sends."""
    head = BUNDLE_MAGIC + bytes((len(codec.self_name),)) + codec.self_name.encode() + bytes((groups,)) + payload
    return head + codec._mac(to, head)


@pytest.mark.parametrize("payload", [
    msgpack.packb([]),                                   # no items
    msgpack.packb([0, 1, 1, 1]),                         # an item that is not a list
    msgpack.packb([[0]]),                                # an item without a tag
    msgpack.packb([[3, 1, 1, 1]]),                       # group 3 of 0..2
    msgpack.packb([[-1, 1, 1, 1]]),
    msgpack.packb([[True, 1, 1, 1]]),                    # a bool group
    msgpack.packb([["0", 1, 1, 1]]),                     # a str group
    msgpack.packb([[0, "1", 1, 1]]),                     # a str tag
    msgpack.packb([[0, 99, 1, 1]]),                      # unknown tag
    msgpack.packb([[0, 0, 1, 2, 3]]),                    # Batch with too few fields
    msgpack.packb([[0, 0, 1, 2, 3, "not bytes"]]),       # Batch with a str where bytes go
    msgpack.packb([[0, 1, True, 2]]),                    # Ack with a bool where an int goes
    msgpack.packb([[0, 1, 1, 2, 3]]),                    # Ack with too many fields
    msgpack.packb([[1, -1, 5, True]]),                   # Heartbeat outside group 0
    msgpack.packb([[0, -1, 5]]),                         # Heartbeat with a missing field
    msgpack.packb([[0, 2, 1]]),                          # Resend (generic path) with a missing field
    msgpack.packb([[0, 1, 1, 1], [0, 1, 1]]),            # one bad item among good ones
    msgpack.packb([[0, 1, 2**64 - 1, msgpack.ExtType(5, b"x")]]),
    msgpack.packb({"items": []}),                        # a map
    msgpack.packb([[0, 1, 1, 1]]) + b"\x00",             # trailing data
    b"\xc1",                                             # never-used msgpack byte
    b"\x91\x94\x00",                                     # truncated
    b"",                                                 # no payload at all
], ids=lambda p: p[:12].hex() or "empty")
def test_authentic_but_malformed_bundles_raise_wire_error(payload):
    tx, rx = group_pair()
    with pytest.raises(WireError):
        rx.decode_bundle(_sign_bundle(tx, payload))


def test_a_bundle_without_room_for_its_fields_is_malformed():
    tx, rx = group_pair()
    for head_tail in (b"EM2\x02n1", b"EM2\x05n1\x03", b"EM2\x00\x03"):
        with pytest.raises(WireError):
            rx.decode_bundle(head_tail + tx._mac("n2", head_tail))


def test_oversized_bundles_are_rejected_before_authentication():
    tx = WireCodec("c", "s", "n1", groups=2)
    rx = WireCodec("c", "s", "n2", groups=2, max_frame=1000)
    with pytest.raises(WireError, match="exceeds"):
        rx.decode_bundle(tx.encode_bundle(((1, Batch(1, 1, 1, b"x" * 2000)),), "n2"))


MSGPACK_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 300) | INT64 | st.text(max_size=5) | st.binary(max_size=5),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=20)
ITEM_SHAPED = st.lists(st.tuples(st.integers(-1, 3), st.integers(-2, len(FRAME_TYPES) + 1),
                                 st.lists(MSGPACK_VALUES, max_size=6)).map(lambda t: [t[0], t[1], *t[2]]),
                       max_size=4)


@SETTINGS
@given(ITEM_SHAPED | MSGPACK_VALUES)
def test_an_authentic_bundle_of_any_shape_decodes_or_raises_wire_error(payload):
    tx, rx = group_pair()
    try:
        sender, items = rx.decode_bundle(_sign_bundle(tx, msgpack.packb(payload, use_bin_type=True)))
    except WireError:
        return
    assert sender == "n1" and items and all(0 <= g < 3 for g, _ in items)


def test_the_group_lease_frames_come_after_every_older_tag():
    # Appended, so no older frame's tag moves (a rolling upgrade mixes versions).
    older = FRAME_TYPES.index(messages.Place)
    assert older == 12
    assert all(FRAME_TYPES.index(t) > older
               for t in (messages.GroupBeat, messages.GroupBeatAck, messages.Released))


@pytest.mark.parametrize("frame", [messages.GroupBeat(3, 1_700_000_123_456), messages.GroupBeat(0, 0),
                                   messages.GroupBeatAck(3, 2**62), messages.GroupBeatAck(9, -1),
                                   messages.Released(4), messages.Released(2**63 - 1)])
def test_the_group_lease_frames_round_trip(frame):
    tx, rx = pair()
    assert rx.decode(tx.encode(frame, "n2")) == ("n1", frame)


def test_a_group_lease_frame_of_the_wrong_shape_is_refused():
    from cluster.replication.wire import _name_field

    tx = WireCodec("c", "s", "n1")
    tag = FRAME_TYPES.index(messages.GroupBeat)
    head = MAGIC + _name_field("n1") + msgpack.packb([tag, 3, "not a stamp"], use_bin_type=True)
    with pytest.raises(WireError, match="GroupBeat"):
        WireCodec("c", "s", "n2").decode(head + tx._mac("n2", head))


def test_the_handover_frames_come_after_every_older_tag_and_round_trip():
    older = FRAME_TYPES.index(messages.Released)
    assert FRAME_TYPES.index(messages.HandOver) > older and FRAME_TYPES.index(messages.Resign) > older
    assert (FRAME_TYPES.index(messages.HandOver), FRAME_TYPES.index(messages.Resign)) == (23, 24)
    tx, rx = group_pair()
    items = ((2, messages.HandOver(7, "n3")), (1, messages.Resign(4)), (0, messages.Resign(5, "n2")))
    assert rx.decode_bundle(tx.encode_bundle(items, "n2")) == ("n1", items)


def test_the_read_barrier_frames_come_after_every_older_tag_and_round_trip():
    assert FRAME_TYPES[-2:] == (messages.Barrier, messages.BarrierAt)
    assert FRAME_TYPES.index(messages.Barrier) > FRAME_TYPES.index(messages.Resign)
    tx, rx = group_pair()
    items = ((2, messages.Barrier(2**40 + 1)), (1, messages.BarrierAt(2**40 + 1, 7, 123_456)),
             (0, messages.BarrierAt(1, 0, 0)))
    assert rx.decode_bundle(tx.encode_bundle(items, "n2")) == ("n1", items)


def test_the_group_lease_frames_travel_in_a_bundle_with_their_group():
    items = ((1, messages.GroupBeat(3, 1_700_000_123_456)), (2, messages.GroupBeatAck(5, 99)),
             (1, messages.Released(3)))
    tx, rx = group_pair()
    assert rx.decode_bundle(tx.encode_bundle(items, "n2")) == ("n1", items)
