"""The msgspec fast path of the JSON protocol against the reference reading it stands in for.

Decoding: whatever body the fast path accepts, ``json`` + ``params.from_json`` accept too and
build the same tree, value for value and type for type (a body it refuses goes to the
reference reading, so only acceptance can go wrong). Encoding: msgspec writes the bytes
``json.dumps(ensure_ascii=False, separators=(",", ":"))`` wrote, for every code point.
"""

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.errors import SqsError

from elasticmq_py.protocol import json_proto
from elasticmq_py.protocol.model import sqs_model

from tests.endpoint.samples import SAMPLES

MODEL = sqs_model()
ACTIONS = sorted(MODEL.operations)
READER = json_proto.JsonReader(MODEL)
FAST = READER.decoders


def _wire(obj):
    """A boto3-form sample as it travels in JSON (blobs as base64 text)."""
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode()
    if isinstance(obj, dict):
        return {k: _wire(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_wire(v) for v in obj]
    return obj


def _typed(obj):
    """A tree with each value's type beside it, so that True and 1 do not compare equal."""
    if isinstance(obj, dict):
        return {k: _typed(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_typed(v) for v in obj]
    return (type(obj).__name__, obj)


def _agree(action: str, body: bytes) -> None:
    try:
        fast = READER.fast(action, body)
    except Exception:
        return   # refused: parse() reads it with the reference alone
    try:
        ref = json_proto.parse_reference(action, body, MODEL)
    except SqsError as e:
        pytest.fail(f"fast path accepted what the reference refuses ({e.code}: {e.message}): {body!r}")
    assert _typed(fast) == _typed(ref), body


def test_every_action_has_a_fast_decoder():
    assert set(FAST) == set(ACTIONS)


@pytest.mark.parametrize("action", ACTIONS)
def test_samples_decode_to_the_reference_tree(action):
    body = json.dumps(_wire(SAMPLES[action])).encode()
    assert FAST[action].decode(body) == json_proto.parse_reference(action, body, MODEL)


# Bodies that differ from the samples where readers are known to disagree: nulls, floats for
# integers, booleans, out-of-range numbers, escapes and surrogates, base64 edge cases, unknown and
# duplicate members, whitespace and trailing bytes.
_odd_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**64, 2**64), st.floats(allow_nan=False),
    st.sampled_from([2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**63 - 1, 2**63, 0, -0.0, 1.0]),
    st.text(max_size=12),
    st.text(alphabet="AQIDR+/=_- \n", max_size=10),
)
_values = st.recursive(_odd_scalars, lambda c: st.one_of(st.lists(c, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), c, max_size=3)),
                       max_leaves=8)
_raw_snippets = st.sampled_from([
    b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"\\u0000", b"\x7f", b"\xed\xa0\x80", b"\xc3\xa9", b"\xff",
    b"\x01", b" ", b"\t", b"\n", b"NaN", b"1e2", b"-0", b"01", b"\xef\xbb\xbf", b"\\/", b"\\b", b'"',
])


def _members(action):
    shape = MODEL.operations[action].input
    out = set(shape.members)
    for m in shape.members.values():
        for sub in (m.member, m.value):
            if sub is not None and sub.type == "structure":
                out |= set(sub.members)
    return sorted(out)


@st.composite
def _mutated_body(draw):
    action = draw(st.sampled_from(ACTIONS))
    obj = _wire(SAMPLES[action])
    members = _members(action)
    for _ in range(draw(st.integers(1, 3))):
        target = obj
        # sometimes into a nested structure (a batch entry, an attribute value)
        nested = [v for v in obj.values() if isinstance(v, (dict, list)) and v]
        if nested and draw(st.booleans()):
            inner = draw(st.sampled_from(nested))
            target = inner[0] if isinstance(inner, list) else inner[draw(st.sampled_from(sorted(inner)))]
            if not isinstance(target, dict):
                continue
        key = draw(st.sampled_from(members + ["Unknown", ""]))
        choice = draw(st.integers(0, 2))
        if choice == 0:
            target[key] = draw(_values)
        elif choice == 1:
            target.pop(key, None)
        else:
            target[key] = None
    body = json.dumps(obj, ensure_ascii=draw(st.booleans())).encode()
    if draw(st.booleans()):
        # a byte-level change: a snippet spliced in somewhere (often inside a string)
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(_raw_snippets) + body[at:]
    if draw(st.booleans()):
        # a member repeated: the last one wins in both readers
        k = draw(st.sampled_from(members))
        body = body[:1] + json.dumps(k).encode() + b":" + json.dumps(draw(_values)).encode() + b"," + body[1:]
    return action, body


@settings(max_examples=2000, deadline=None)
@given(_mutated_body())
def test_fast_path_accepts_only_what_the_reference_reads_the_same(case):
    _agree(*case)


@pytest.mark.parametrize("body", [
    b'{"QueueUrl":"u","MessageBody":"\\ud800"}', b'{"QueueUrl":"u","MessageBody":"\xed\xa0\x80"}',
    b'\xef\xbb\xbf{"QueueUrl":"u","MessageBody":"b"}', b'{"QueueUrl":"u","MessageBody":"b","DelaySeconds":1.0}',
    b'{"QueueUrl":"u","MessageBody":"b","DelaySeconds":2147483648}', b'{"QueueUrl":"u","MessageBody":null}',
    b'{"QueueUrl":"u","MessageBody":"b","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"AQ"}}}',
    b'{"QueueUrl":"u","MessageBody":"b","MessageAttributes":{"a":{"DataType":"Binary","BinaryValue":"AR=="}}}',
    b'{"QueueUrl":"u","MessageBody":"b","Unknown":' + b"[" * 3000 + b"]" * 3000 + b"}",
    b'  {"QueueUrl":"u","MessageBody":"b"}\n', b'{"QueueUrl":"u","MessageBody":"b"}x', b"", b"[]",
    # not UTF-8, inside a member msgspec would skip unread (found by the property test above)
    b'{"QueueUrl":"u","MessageBody":"b","": {"\xc2\\ud83d\\ude00\x80": null}}',
])
def test_known_disagreements_fall_back(body):
    _agree("SendMessage", body)


def test_a_body_that_is_not_utf8_anywhere_is_refused_as_the_reference_refuses_it():
    body = b'{"QueueName": "q1", "": {"\xc2\x80\xc2": null}}'
    with pytest.raises(SqsError) as ref:
        json_proto.parse_reference("GetQueueUrl", body, MODEL)
    with pytest.raises(SqsError) as got:
        READER.parse("GetQueueUrl", body)
    assert (got.value.code, got.value.message) == (ref.value.code, ref.value.message)


def test_encoding_is_the_json_modules_for_every_code_point():
    ref = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    for start in range(0, 0x110000, 0x800):
        chars = "".join(chr(c) for c in range(start, start + 0x800) if not 0xD800 <= c <= 0xDFFF)
        doc = {"k": chars, "s": [chars[:7]]}
        assert json_proto._encode(doc) == ref.encode(doc).encode("utf-8")


def test_encoding_of_the_output_values():
    doc = {"A": 1, "B": True, "C": [0, -2**63, 2**64], "D": {"x": b"\x00\xff", "y": False}, "E": "",
           "F": [], "G": {}}
    expected = json.dumps({**doc, "D": {"x": "AP8=", "y": False}}, ensure_ascii=False, separators=(",", ":"))
    assert json_proto._encode(doc) == expected.encode("utf-8")
