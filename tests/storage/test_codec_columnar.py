"""The column form of snapshot groups (storage/codec/columnar.py): its bytes, its round trips, and
the malformed groups it refuses."""

from __future__ import annotations

import msgpack
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import storage.codec as codec
from storage import commands, mutations
from storage.codec import CodecError, TAGS, decode, decode_many, encode, encode_many
from tests.storage.codec_values import EACH, INTS, field_names, for_class, frame, message_record, same


# --- the columnar layout of snapshot groups -----------------------------------------------------

def _group(*records: mutations.MessageRecord, qid: int = 7) -> mutations.MessagesRestored:
    return mutations.MessagesRestored(qid, tuple(records))


def test_columnar_tags_are_their_own():
    assert dict(codec.COLUMNAR_TAGS) == {35: mutations.MessagesRestored}
    assert not codec.COLUMNAR_TAGS.keys() & (TAGS.keys() | codec.RETIRED_TAGS)
    assert codec.tag_of(mutations.MessagesRestored) == 34     # its row tag, still decoded


def test_columnar_golden_bytes():
    """A group goes column by column; a column whose values are all equal goes as one value."""
    a, b = message_record(), message_record(message_id="m-2", serial=43, sent_ms=1_700_000_000_001)
    value = msgpack.unpackb(encode(_group(a, b))[2:])
    assert value[:3] == [35, 7, 2]
    columns = dict(zip(field_names(mutations.MessageRecord), value[3:]))
    assert columns["message_id"] == [a.message_id, "m-2"]
    assert columns["serial"] == [42, 43]
    assert columns["sent_ms"] == [1_700_000_000_000, 1_700_000_000_001]
    assert columns["body"] == ["x" * 100]
    assert columns["attributes"] == [{}]
    assert columns["receipt"] == [None]
    assert len(value) == 3 + len(columns) == 3 + 20
    # one record: every column is one value, which is also n values
    assert msgpack.unpackb(encode(_group(a))[2:])[3] == [a.message_id]
    assert msgpack.unpackb(encode(_group())[2:]) == [35, 7, 0] + [[]] * 20


def test_columnar_round_trip_keeps_types_and_values():
    attr = {"a": commands.MessageAttributeValue("String", "v")}
    records = [message_record(message_id=f"m-{i}", serial=i, attributes=attr if i % 2 else {},
                       receipt="r" if i == 3 else None, sequence_number=i if i > 2 else None)
               for i in range(6)]
    for group in (_group(*records), _group(*records[:1]), _group(), _group(*[records[0]] * 3)):
        for back in (decode(encode(group)), decode_many(encode_many([group, group]))[1]):
            assert back == group and same(group, back)


@EACH
@given(st.data())
def test_columnar_round_trip_of_groups_with_shared_fields(data):
    """Groups whose records agree on random subsets of fields, so columns fold and do not."""
    base = data.draw(for_class(mutations.MessageRecord))
    names = list(field_names(mutations.MessageRecord))
    records = []
    for _ in range(data.draw(st.integers(0, 5))):
        changed = data.draw(st.lists(st.sampled_from(names), max_size=4, unique=True))
        other = data.draw(for_class(mutations.MessageRecord))
        records.append(msgspec.structs.replace(base, **{n: getattr(other, n) for n in changed}))
    group = mutations.MessagesRestored(data.draw(INTS), tuple(records))
    back = decode(encode(group))
    assert back == group and same(group, back)


def test_row_form_of_a_group_still_decodes():
    """An older sender's MessagesRestored, [34, qid, [[16, fields...], ...]]."""
    a, b = message_record(), message_record(message_id="m-2", serial=43)
    row = [34, 7, [msgpack.unpackb(encode(r)[2:]) for r in (a, b)]]
    assert row[2][0][0] == 16
    assert decode(frame(row)) == _group(a, b)


def _columns(n: int, records=None) -> list:
    """The columnar value of a group, for tampering with."""
    return msgpack.unpackb(encode(_group(*(records or [message_record(message_id=f"m-{i}", serial=i)
                                                       for i in range(n)])))[2:])


@pytest.mark.parametrize("tamper", [
    lambda v: v[:-1],                          # a column short
    lambda v: v + [[0]],                       # a column too many
    lambda v: v[:2] + [-1] + v[3:],            # negative count
    lambda v: v[:2] + [True] + v[3:],          # bool count
    lambda v: v[:2] + ["3"] + v[3:],           # str count
    lambda v: v[:2] + [4] + v[3:],             # count disagrees with the full columns
    lambda v: v[:3] + [[1, 2, 3]] + v[4:],     # ids that are ints
    lambda v: v[:4] + [["1", "2", "3"]] + v[5:],   # serials that are strs
    lambda v: v[:4] + [[1, True, 3]] + v[5:],  # a bool among the serials
    lambda v: v[:4] + [[1, 2]] + v[5:],        # a column of neither n nor one value
    lambda v: v[:4] + [[]] + v[5:],            # an empty column for three elements
    lambda v: v[:4] + [7] + v[5:],             # a column that is not an array
    lambda v: v[:6] + [[{"a": [3, 5]}]] + v[7:],   # a malformed nested attribute
    lambda v: ["7"] + v[1:],                   # qid of the wrong type... as the tag
    lambda v: v[:1] + ["7"] + v[2:],           # qid of the wrong type
])
def test_malformed_columnar_groups_are_refused(tamper):
    value = _columns(3)
    assert decode(frame(value)) is not None     # the untampered value decodes
    with pytest.raises(CodecError):
        decode(frame(tamper(value)))


def test_a_huge_count_needs_a_full_column():
    """All columns one value and a big n would build n records from a few bytes."""
    value = _columns(1)
    value[2] = 100_000
    with pytest.raises(CodecError, match="no full column"):
        decode(frame(value))
