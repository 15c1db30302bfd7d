"""storage.codec: lossless round trips, a stable tag table, and nothing but CodecError on bad input."""

from __future__ import annotations

import inspect
import types
import typing

import msgpack
import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import storage.codec as codec
from storage import commands, errors, mutations, results
from storage.codec import CodecError, FORMAT_VERSION, TAGS, decode, decode_many, encode, encode_many
from tests.storage.codec_values import (
    ANY_MUTATION, ANY_REGISTERED, EACH, FAST, FUZZ, MANY, ONE, REGISTERED, TAG_VALUES, WIRE_VALUES, for_class,
    frame, is_value_type, message_record, same,
)


# --- the registry -----------------------------------------------------------------------------

def test_registry_covers_every_storage_value_type():
    registered = set(TAGS.values())
    missing = [
        f"{mod.__name__}.{name}"
        for mod in (commands, results, mutations, errors)
        for name, obj in vars(mod).items()
        if inspect.isclass(obj) and is_value_type(obj) and obj.__module__ == mod.__name__
        and obj not in registered
    ]
    assert not missing, f"add these to storage.codec.TAGS (new tags, never reuse one): {missing}"
    assert errors.SqsError in registered


def test_tags_are_small_unique_and_not_retired():
    assert all(type(t) is int and 0 < t < 2**16 for t in TAGS)
    assert len(set(TAGS.values())) == len(TAGS)
    assert not (codec.RETIRED_TAGS & TAGS.keys())
    for tag, cls in TAGS.items():
        assert codec.tag_of(cls) == tag


# Released tags. Entries may be added here, never changed or removed (retire instead).
PINNED = {
    1: "QueueKey", 2: "Namespace", 3: "MessageAttributeValue", 4: "ErrorKind", 5: "SqsError",
    16: "MessageRecord", 17: "MoveTaskRecord", 18: "DedupEntry", 19: "AttemptEntry",
    20: "QueueCreated", 21: "QueueUpdated", 22: "QueueDeleted", 23: "TombstoneCleared",
    24: "QueuePurged", 25: "MessageAdded", 26: "MessageChanged", 27: "MessageDeleted",
    28: "AttemptRecorded", 29: "Pruned", 30: "MoveTaskUpdated", 31: "QueueRestored",
    32: "StorageRestored", 33: "MessageRestored", 34: "MessagesRestored",
    36: "OutboxEntry", 37: "MessageOutboxed", 38: "OutboxAccepted", 39: "OutboxReturned", 40: "OutboxCleared",
    41: "MoveAdopted", 42: "MovesForgotten", 43: "OutboxRestored",
    48: "CreateQueue", 49: "DeleteQueue", 50: "GetQueueUrl", 51: "ListQueues",
    52: "GetQueueAttributes", 53: "SetQueueAttributes", 54: "PurgeQueue", 55: "TagQueue",
    56: "UntagQueue", 57: "ListQueueTags", 58: "AddPermission", 59: "RemovePermission",
    60: "ListDeadLetterSourceQueues", 61: "SendMessage", 62: "SendMessageBatchEntry",
    63: "SendMessageBatch", 64: "ReceiveMessage", 65: "DeleteMessage",
    66: "DeleteMessageBatchEntry", 67: "DeleteMessageBatch", 68: "ChangeMessageVisibility",
    69: "ChangeMessageVisibilityBatchEntry", 70: "ChangeMessageVisibilityBatch",
    71: "StartMessageMoveTask", 72: "CancelMessageMoveTask", 73: "ListMessageMoveTasks", 74: "Tick",
    75: "MovedMessage", 76: "MoveItem", 77: "AdoptMoved", 78: "AcceptOutbox", 79: "ReturnOutbox",
    80: "ClearOutbox", 81: "ForgetMove",
    96: "CreateQueueResult", 97: "GetQueueUrlResult", 98: "ListQueuesResult",
    99: "GetQueueAttributesResult", 100: "ListQueueTagsResult",
    101: "ListDeadLetterSourceQueuesResult", 102: "SendMessageResult", 103: "BatchResultError",
    104: "SendMessageBatchResultEntry", 105: "SendMessageBatchResult", 106: "ReceivedMessage",
    107: "ReceiveMessageResult", 108: "DeleteMessageBatchResult",
    109: "ChangeMessageVisibilityBatchResult", 110: "StartMessageMoveTaskResult",
    111: "CancelMessageMoveTaskResult", 112: "MessageMoveTaskInfo",
    113: "ListMessageMoveTasksResult", 114: "TickResult", 115: "MoveRefusal", 116: "AdoptMovedResult",
}


def test_released_tags_never_change():
    for tag, name in PINNED.items():
        if tag in codec.RETIRED_TAGS:
            assert tag not in TAGS
        else:
            assert TAGS[tag].__name__ == name, f"tag {tag} was {name}, is now {TAGS[tag].__name__}"


def test_golden_bytes():
    """The wire form itself is pinned: a change here breaks mixed-version clusters."""
    key = commands.QueueKey("us-east-1", "000000000000", "q")
    assert encode(key) == ONE + b"\x94\x01\xa9us-east-1\xac000000000000\xa1q"
    assert encode(commands.Tick(7)) == ONE + b"\x92\x4a\x07"
    assert encode(None) == ONE + b"\xc0"
    assert encode_many([None, commands.Tick(7)]) == MANY + b"\x92\xc0\x92\x4a\x07"
    # objects are [tag, fields in declaration order...], nested objects likewise
    rec = message_record(attributes={"a": commands.MessageAttributeValue("String", "v")})
    value = msgpack.unpackb(encode(mutations.MessageAdded(7, rec))[2:])
    assert value[:2] == [25, 7]
    assert value[2][:4] == [16, rec.message_id, rec.serial, rec.body]
    assert value[2][4] == {"a": [3, "String", "v", None, None, None]}


# --- round trips ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", REGISTERED, ids=lambda c: c.__name__)
@EACH
@given(data=st.data())
def test_round_trip_every_registered_type(cls, data):
    obj = data.draw(for_class(cls))
    back = decode(encode(obj))
    assert same(obj, back)
    if not isinstance(obj, errors.SqsError):
        assert back == obj


@FAST
@given(st.lists(ANY_MUTATION, max_size=10))
def test_round_trip_many(objs):
    back = decode_many(encode_many(objs))
    assert back == objs
    assert all(map(same, objs, back))


@FAST
@given(st.lists(st.one_of(st.none(), ANY_REGISTERED), max_size=8))
def test_round_trip_many_any_type_from_an_iterator(objs):
    back = decode_many(encode_many(iter(objs)))
    assert len(back) == len(objs) and all(map(same, objs, back))


def test_exact_types_come_back():
    mav = commands.MessageAttributeValue("Binary.x", None, b"\x00\xff", ("a",), (b"b",))
    rec = message_record(attributes={"k": mav}, system_attributes=types.MappingProxyType({"AWSTraceHeader": mav}))
    back = decode(encode(mutations.MessageAdded(1, rec)))
    assert type(back.message.attributes) is dict and type(back.message.system_attributes) is dict
    got = back.message.attributes["k"]
    assert type(got.binary_value) is bytes and type(got.string_list_values) is tuple
    assert type(got.binary_list_values[0]) is bytes
    key = commands.QueueKey("r", "a", "n")
    restored = mutations.StorageRestored(5, ((key, 1), (key, 2)))
    back = decode(encode(restored))
    assert back == restored and type(back.tombstones[0]) is tuple and type(back.tombstones[0][0]) is commands.QueueKey
    att = mutations.AttemptEntry("a", 1, (("m", "r"),))
    assert type(decode(encode(att)).receipts[0]) is tuple


def test_none_and_errors():
    assert decode(encode(None)) is None
    err = errors.queue_does_not_exist()
    back = decode(encode(err))
    assert type(back) is errors.SqsError and back.kind is errors.QUEUE_DOES_NOT_EXIST
    assert back.message == err.message and back.code == err.code and back.status == err.status
    custom = errors.ErrorKind("Custom", "Custom.Code", 418, False)("teapot")
    back = decode(encode(custom))
    assert back.kind == custom.kind and back.message == "teapot" and back.sender_fault is False

    class Special(errors.SqsError):
        pass

    back = decode(encode(Special(errors.OVER_LIMIT, "x")))
    assert type(back) is errors.SqsError and back.kind is errors.OVER_LIMIT


def test_bytes_like_input_and_expect():
    msg = mutations.MessageDeleted(1, "m")
    data = encode(msg)
    assert decode(bytearray(data)) == msg
    assert decode(memoryview(data)) == msg
    assert decode(data, expect=mutations.MessageDeleted) == msg
    with pytest.raises(CodecError):
        decode(data, expect=commands.SendMessage)
    with pytest.raises(CodecError):
        decode_many(encode_many([msg, commands.Tick()]), expect=typing.get_args(mutations.Mutation))
    big = mutations.MessageAdded(1, message_record(body="y" * 200_000))
    assert decode(memoryview(encode(big))) == big
    assert decode(encode(big)) == big


# --- evolution: trailing defaults may be omitted, extra fields are refused ------------------------

NS = [2, "us-east-1", "000000000000"]
KEY = [1, "us-east-1", "000000000000", "q"]


def test_omitted_trailing_fields_take_their_defaults():
    assert decode(frame([48, NS, "q"])) == commands.CreateQueue(commands.Namespace(), "q")
    assert decode(frame([48, NS, "q", {"a": "b"}])) == commands.CreateQueue(commands.Namespace(), "q", {"a": "b"})
    assert decode(frame([74])) == commands.Tick()
    assert decode(frame([64, KEY])) == commands.ReceiveMessage(commands.QueueKey("us-east-1", "000000000000", "q"))
    assert decode(frame([2])) == commands.Namespace()
    # MessageAdded.dedup was appended with a default: frames from before it still decode
    rec = message_record()
    old = msgpack.unpackb(encode(mutations.MessageAdded(7, rec))[2:])
    assert decode(frame(old[:3])) == mutations.MessageAdded(7, rec)
    # so was QueueRestored.dedup_by_group: a snapshot from before it decodes with None (scope
    # from the attributes), and the field round-trips
    key = commands.QueueKey("us-east-1", "000000000000", "q.fifo")
    restored = mutations.QueueRestored(3, key, 1, 2, 3, {"FifoQueue": "true"}, {}, 4, 5, 0, -1, (), (), (), 9, True)
    fields = msgpack.unpackb(encode(restored)[2:])
    assert decode(frame(fields[:-1])) == msgspec.structs.replace(restored, dedup_by_group=None)
    assert decode(frame(fields)) == restored


@pytest.mark.parametrize("value", [
    [48, NS],                                  # CreateQueue.name has no default
    [48, NS, "q", {}, {}, "extra"],            # more fields than the class has
    [27, 1],                                   # MessageDeleted without message_id
    [27, 1, "m", None],                        # ... with one field too many
    [25, 1],                                   # MessageAdded without its record
])
def test_wrong_arity_is_refused(value):
    with pytest.raises(CodecError):
        decode(frame(value))


@pytest.mark.parametrize("value", [
    [27, "1", "m"],                # str where an int belongs
    [27, True, "m"],               # bool where an int belongs
    [27, 1.0, "m"],                # float where an int belongs
    [27, 1, 5],                    # int where a str belongs
    [27, 1, b"m"],                 # bytes where a str belongs
    [27, None, "m"],               # None where an int belongs
    [103, "i", "c", "m", 1],       # int where a bool belongs
    [999, 1, "m"],                 # unknown tag
    ["27", 1, "m"],                # tag of the wrong type
    [27.0, 1, "m"],
    [],                            # no tag at all
    "MessageDeleted",              # not an object
    {"qid": 1},
    [25, 1, [17, "t", 1, "s", "a", None, None, 0, 0, 0, None]],   # nested: a MoveTaskRecord
    [25, 1, "record"],                                            # nested: not an object
    [25, 1, []],
    [20, 1, KEY, 0, {"a": 1}, {}],             # map of str to str with an int value
    [20, 1, KEY, 0, {"a": "b"}, []],           # list where a map belongs
    [20, 1, KEY, 0, {"a": "b"}, None],         # None where a map belongs
    [20, 1, KEY, 0, {b"a": "b"}, {}],          # bytes key
    [19, "a", 1, [["m", "r", "x"]]],           # receipts: a 3-tuple in a tuple of pairs
    [19, "a", 1, [["m"]]],
    [19, "a", 1, [["m", 1]]],
    [19, "a", 1, ["mr"]],
    [19, "a", 1, "mr"],
    [32, 1, [[KEY, "1"]]],                     # tombstone with a str time
    [32, 1, [[[2, "r", "a"], 1]]],             # tombstone with a Namespace for a QueueKey
    [56, KEY, ["a", 1]],                       # tuple[str, ...] with an int inside
    [3, "String", None, None, ["a"], [1]],     # tuple[bytes, ...] with an int inside
    [61, KEY, "b", None, {"k": [3, "String"]}, {"k": "v"}],   # str where a MAV belongs
    [61, KEY, "b", None, {"k": [1, "a", "b", "c"]}],         # a QueueKey where a MAV belongs
    [5, [4, "S", "Q", 400, True], 7],          # SqsError message not a str
    [5, "kind", "m"],
])
def test_wrong_types_are_refused(value):
    with pytest.raises(CodecError):
        decode(frame(value))


# --- envelope ---------------------------------------------------------------------------------

def test_unknown_version_is_refused():
    data = encode(mutations.MessageDeleted(1, "m"))
    for version in (0, FORMAT_VERSION + 1, 255):
        with pytest.raises(CodecError, match="version"):
            decode(bytes([version]) + data[1:])
        with pytest.raises(CodecError, match="version"):
            decode_many(bytes([version]) + encode_many([])[1:])


def test_frame_kinds_do_not_mix():
    one = encode(mutations.MessageDeleted(1, "m"))
    many = encode_many([mutations.MessageDeleted(1, "m")])
    with pytest.raises(CodecError):
        decode(many)
    with pytest.raises(CodecError):
        decode_many(one)
    with pytest.raises(CodecError):
        decode_many(frame([27, 1, "m"], many=True))   # the body must be an array of objects
    with pytest.raises(CodecError):
        decode_many(frame({"a": 1}, many=True))
    with pytest.raises(CodecError):
        decode(bytes([FORMAT_VERSION, 7]) + one[2:])


@pytest.mark.parametrize("data", [
    b"", b"\x01", ONE, ONE + b"\x93\x1b\x01",               # too short, truncated
    ONE + b"\x93\x1b\x01\xa1m\x00",                          # trailing garbage
    ONE + b"\xc1",                                           # the reserved byte
    ONE + b"\xdd\xff\xff\xff\xff",                           # array32 of 4G items
    ONE + b"\xdf\xff\xff\xff\xff",                           # map32 of 4G pairs
    ONE + b"\xdb\xff\xff\xff\xff" + b"a" * 10,               # str32 of 4 GiB
    ONE + b"\xc6\xff\xff\xff\xff",                           # bin32 of 4 GiB
    ONE + b"\xc9\xff\xff\xff\xff\x05",                       # ext32 of 4 GiB
    ONE + b"\x91" * 100_000 + b"\xc0",                       # nesting depth bomb
    ONE + b"\x81" * 50_000 + b"\xc0",                        # nested maps, keys unhashable
    ONE + b"\x82\x90\x01\x02\x03",                           # a map with a list key
    ONE + b"\x93\x1b\x01\xa2\xff\xfe",                       # invalid UTF-8
    ONE + b"\xd6\xff\x00\x00\x00\x00",                       # a msgpack timestamp
    ONE + b"\xd4\x05\x00",                                   # an ext type
    ONE + b"\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00",           # a float
])
def test_malformed_frames_raise_codec_error(data):
    with pytest.raises(CodecError):
        decode(data)
    with pytest.raises(CodecError):
        decode_many(MANY + data[2:])


@pytest.mark.parametrize("data", ["text", None, 1, [1, 2], object()])
def test_non_bytes_input_is_refused(data):
    with pytest.raises(CodecError):
        decode(data)
    with pytest.raises(CodecError):
        decode_many(data)


def test_codec_error_is_a_value_error():
    assert issubclass(CodecError, ValueError)


# --- encoding failures --------------------------------------------------------------------------

@pytest.mark.parametrize("obj", [
    object(), "text", 1, b"x", [mutations.MessageDeleted(1, "m")], {"a": 1}, ValueError("x"),
    commands.Tick(2**64),                                         # beyond 64 bits
    mutations.MessageDeleted(1, "\ud800"),                        # not valid Unicode
    mutations.MessageDeleted(1, object()),                        # not a wire type
    mutations.MessageAdded(1, object()),
])
def test_unencodable_raises_codec_error(obj):
    with pytest.raises(CodecError):
        encode(obj)
    with pytest.raises(CodecError):
        encode_many([mutations.MessageDeleted(1, "ok"), obj])


def test_packer_is_usable_after_a_failure():
    with pytest.raises(CodecError):
        encode(commands.Tick(2**64))
    assert decode(encode(commands.Tick(1))) == commands.Tick(1)


# --- fuzz ---------------------------------------------------------------------------------------

def _decodes_or_codec_error(data: bytes) -> None:
    for fn in (decode, decode_many):
        try:
            out = fn(data)
        except CodecError:
            continue
        items = out if fn is decode_many else [out]
        for item in items:
            assert item is None or type(item) in TAGS.values()


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_random_bytes(data):
    _decodes_or_codec_error(data)
    _decodes_or_codec_error(ONE + data)
    _decodes_or_codec_error(MANY + data)


@st.composite
def mutated_encoding(draw):
    objs = draw(st.lists(ANY_REGISTERED, min_size=1, max_size=3))
    data = bytearray(encode(objs[0]) if draw(st.booleans()) else encode_many(objs))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[i] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[i:]
        elif op == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=4))
        else:
            del data[i:i + draw(st.integers(1, 4))]
    return bytes(data)


@FUZZ
@given(mutated_encoding())
def test_fuzz_mutated_valid_encodings(data):
    _decodes_or_codec_error(data)


@FUZZ
@given(st.builds(lambda tag, rest: [tag, *rest], TAG_VALUES, st.lists(WIRE_VALUES, max_size=12)))
def test_fuzz_object_shaped_values(value):
    try:
        packed = msgpack.packb(value, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        assume(False)
    _decodes_or_codec_error(ONE + packed)
    _decodes_or_codec_error(MANY + msgpack.packb([value, value], use_bin_type=True))


@FAST
@given(ANY_REGISTERED, st.data())
def test_fuzz_one_field_replaced(obj, data):
    """A valid object with one field swapped for a random value: decodes or CodecError."""
    value = msgpack.unpackb(encode(obj)[2:], raw=False)
    if type(value) is list and len(value) > 1:
        i = data.draw(st.integers(1, len(value) - 1))
        value[i] = data.draw(WIRE_VALUES)
    try:
        packed = msgpack.packb(value, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        assume(False)
    _decodes_or_codec_error(ONE + packed)
