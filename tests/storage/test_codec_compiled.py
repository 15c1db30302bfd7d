"""The compiled path (storage/codec/compiled.py) against the general one: the same bytes, the same
objects, the same refusals."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from storage import mutations
from storage.codec import CodecError, compiled, decode_many, encode_many, frames
from tests.storage.codec_values import FAST, FUZZ, MANY, WIRE_VALUES, for_class, message_record, same


# --- the compiled path (msgspec) against the general one --------------------------------------------

COMPILED_MUTATION = st.sampled_from(compiled._COMPILED).flatmap(for_class)


@FAST
@given(st.lists(COMPILED_MUTATION, min_size=1, max_size=6))
def test_compiled_path_writes_the_general_bytes_and_reads_the_general_objects(objs):
    data = encode_many(objs)
    assert data == frames._encode_many_general(objs)
    back, general = decode_many(data), frames._decode_many_general(data, None)
    assert back == general == objs
    assert all(map(same, objs, back)) and all(map(same, general, back))
    for a, b in zip(back, general):
        if type(a) is mutations.MessageAdded:
            # empty attribute maps are the shared one both ways, never a fresh dict per message
            assert (a.message.attributes is mutations.NO_ATTRIBUTES) == (b.message.attributes is mutations.NO_ATTRIBUTES)
            assert (a.message.system_attributes is mutations.NO_ATTRIBUTES) == \
                (b.message.system_attributes is mutations.NO_ATTRIBUTES)


def test_compiled_path_shares_the_empty_maps_and_checks_expect():
    objs = [mutations.MessageAdded(3, message_record()), mutations.MessageDeleted(3, "m")]
    back = decode_many(encode_many(objs), expect=(mutations.MessageAdded, mutations.MessageDeleted))
    assert back == objs
    assert back[0].message.attributes is mutations.NO_ATTRIBUTES
    assert back[0].message.system_attributes is mutations.NO_ATTRIBUTES
    with pytest.raises(CodecError):
        decode_many(encode_many(objs), expect=mutations.MessageAdded)


def _general_or_error(data: bytes):
    try:
        return frames._decode_many_general(data, None)
    except CodecError as e:
        return e


@FUZZ
@given(st.lists(COMPILED_MUTATION, min_size=1, max_size=3), st.data())
def test_compiled_path_accepts_exactly_what_the_general_one_does(objs, data):
    """A frame of compiled classes with one value swapped for a random one, or bytes changed:
    both ways decode it to equal objects, or both refuse it (the compiled path leaves the
    refusal, and its message, to the general one)."""
    value = msgpack.unpackb(encode_many(objs)[2:], raw=False)
    i = data.draw(st.integers(0, len(value) - 1))
    item = value[i]
    path = data.draw(st.integers(1, len(item) - 1))
    inner = item[path]
    if type(inner) is list and len(inner) > 1 and data.draw(st.booleans()):
        inner[data.draw(st.integers(1, len(inner) - 1))] = data.draw(WIRE_VALUES)
    else:
        item[path] = data.draw(WIRE_VALUES)
    if data.draw(st.booleans()):
        item.append(data.draw(WIRE_VALUES))
    try:
        frame = MANY + msgpack.packb(value, use_bin_type=True)
    except (OverflowError, ValueError, TypeError):
        assume(False)
    expected = _general_or_error(frame)
    try:
        got = decode_many(frame)
    except CodecError as e:
        assert isinstance(expected, CodecError) and str(e) == str(expected)
        return
    assert not isinstance(expected, CodecError), f"compiled path accepted what the general refuses: {expected}"
    assert got == expected and all(map(same, expected, got))
