"""cluster/journal/shared_format.py: the shared journal's names, headers and group entries."""

import pytest

from cluster.journal import format as fmt
from cluster.journal import shared_format as sfmt
from cluster.journal.format import HEADER_SIZE, Damaged, SnapshotHeader, Torn, UnsupportedVersion
from cluster.journal.shared_format import GroupEntry, SharedSegmentHeader


def group_entries(n: int) -> list[GroupEntry]:
    return [GroupEntry(i % 3, i % 2, i + 1, 4, f"mutations {i}".encode() * (i % 4 + 1)) for i in range(n)]


def encoded(es: list[GroupEntry]) -> bytes:
    return b"".join(sfmt.encode_group_entry(e) for e in es)


def test_group_entries_roundtrip():
    es = group_entries(20) + [GroupEntry(255, 2**32 - 1, 2**64 - 1, 7, b"")]
    s = fmt.scan(encoded(es), 0, sfmt.SEGMENT_TAGS)
    assert s.problem is None and [sfmt.decode_group_entry(r.payload) for r in s.records] == es
    assert es[0].entry() == fmt.JournalEntry(1, 4, es[0].mutations)


def test_a_format_1_entry_is_not_a_group_entry():
    payload = fmt.scan(fmt.encode_entry(fmt.JournalEntry(1, 1, b"m")), 0).records[0].payload
    with pytest.raises(fmt.FormatError, match="not a group entry"):
        sfmt.decode_group_entry(payload)


def test_headers_roundtrip_with_version_2_and_the_group_in_the_spare_byte():
    seg = sfmt.encode_segment_header(SharedSegmentHeader(12, 3))
    assert len(seg) == HEADER_SIZE and sfmt.decode_segment_header(seg) == SharedSegmentHeader(12, 3)
    assert fmt.unpack_header(seg, sfmt.VERSION)[:2] == (sfmt.KIND_SHARED_SEGMENT, 0)
    header = SnapshotHeader(history=2, at_seq=40, at_epoch=5, counter=9)
    snap = sfmt.encode_snapshot_header(7, header) + fmt.encode_blob(b"state") + fmt.encode_snapshot_end(1, 44)
    group, contents = sfmt.decode_snapshot(snap)
    assert group == 7 and contents.complete and contents.header == header and contents.blobs == (b"state",)


def test_each_format_refuses_the_others_headers_by_version():
    v2 = sfmt.encode_segment_header(SharedSegmentHeader(1, 2))
    with pytest.raises(UnsupportedVersion, match="format version 2"):
        fmt.decode_header(v2)
    v1 = fmt.encode_segment_header(fmt.SegmentHeader(0, 1))
    with pytest.raises(UnsupportedVersion, match="format version 1"):
        sfmt.decode_segment_header(v1)
    with pytest.raises(fmt.FormatError, match="kind 2"):
        sfmt.decode_segment_header(sfmt.encode_snapshot_header(0, SnapshotHeader(0, 0, 0, 1)))


def test_names_roundtrip_and_stay_apart_from_format_1s():
    assert sfmt.segment_name(3) == "shared-00000003.seg" and sfmt.parse_segment_name("shared-00000003.seg") == 3
    assert sfmt.snapshot_name(2, 17) == "g002-snap-00000017.snap"
    assert sfmt.parse_snapshot_name("g002-snap-00000017.snap") == (2, 17)
    assert sfmt.parse_snapshot_name("g002-snap-00000017.snap.tmp") == (2, 17)
    for v2 in ("shared-00000003.seg", "g002-snap-00000017.snap"):
        assert fmt.parse_segment_name(v2) is None and fmt.parse_snapshot_name(v2) is None
    for v1 in (fmt.segment_name(0, 1), fmt.snapshot_name(1)):
        assert sfmt.parse_segment_name(v1) is None and sfmt.parse_snapshot_name(v1) is None


def test_damage_among_group_entries_is_damaged_and_a_torn_last_one_is_torn():
    es = group_entries(6)
    data = bytearray(encoded(es))
    third = len(encoded(es[:2]))
    data[third + 12] ^= 0xFF
    s = fmt.scan(bytes(data), 0, sfmt.SEGMENT_TAGS)
    assert isinstance(s.problem, Damaged) and s.problem.offset == third
    assert s.problem.next_valid == len(encoded(es[:3]))
    # format 1's tags never start a group entry: its resync would find nothing after the damage
    assert isinstance(fmt.scan(bytes(data), 0).problem, Torn)
    torn = fmt.scan(encoded(es)[:-5], 0, sfmt.SEGMENT_TAGS)
    assert len(torn.records) == 5 and isinstance(torn.problem, Torn)
