"""cluster/journal/format.py: records, headers, names, and torn vs damaged."""

import struct

import pytest

from cluster.journal import format as fmt
from cluster.journal.format import (
    HEADER_SIZE, Damaged, FormatError, JournalEntry, SegmentHeader, SnapshotHeader, Torn, UnsupportedVersion,
)


def entries(n: int, start: int = 1) -> list[JournalEntry]:
    return [JournalEntry(seq, 3, f"mutations {seq}".encode() * (seq % 5 + 1)) for seq in range(start, start + n)]


def encoded(es: list[JournalEntry]) -> bytes:
    return b"".join(fmt.encode_entry(e) for e in es)


def test_entries_roundtrip_with_offsets():
    es = entries(20)
    data = b"prefix" + encoded(es)
    s = fmt.scan(data, 6)
    assert s.problem is None and s.end == len(data)
    assert [fmt.decode_entry(r.payload) for r in s.records] == es
    assert s.records[0].offset == 6
    assert s.records[1].offset == 6 + len(fmt.encode_entry(es[0]))


def test_empty_data_scans_clean():
    assert fmt.scan(b"") == fmt.Scan((), 0, None)


def test_headers_roundtrip():
    seg = SegmentHeader(history=7, first_seq=123456789)
    snap = SnapshotHeader(history=2, at_seq=99, at_epoch=4, counter=12)
    assert len(fmt.encode_segment_header(seg)) == HEADER_SIZE == len(fmt.encode_snapshot_header(snap))
    assert fmt.decode_header(fmt.encode_segment_header(seg)) == seg
    assert fmt.decode_header(fmt.encode_snapshot_header(snap) + b"more") == snap


def test_names_roundtrip():
    assert fmt.segment_name(3, 17) == "h00000003-00000000000000000017.seg"
    assert fmt.parse_segment_name(fmt.segment_name(3, 17)) == (3, 17)
    assert fmt.snapshot_name(5) == "snap-00000005.snap"
    assert fmt.parse_snapshot_name("snap-00000005.snap") == 5
    assert fmt.parse_snapshot_name("snap-00000005.snap.tmp") == 5
    assert fmt.parse_segment_name("LOCK") is None and fmt.parse_snapshot_name("h1.seg") is None


def test_crc_flip_in_the_last_record_is_a_torn_tail():
    es = entries(5)
    data = bytearray(encoded(es))
    data[-1] ^= 0x01
    s = fmt.scan(bytes(data))
    assert [fmt.decode_entry(r.payload) for r in s.records] == es[:4]
    assert isinstance(s.problem, Torn) and "CRC" in s.problem.why
    assert s.end == s.problem.offset == len(encoded(es[:4]))


def test_damage_followed_by_valid_records_is_damaged():
    es = entries(6)
    data = bytearray(encoded(es))
    third = len(encoded(es[:2]))
    data[third + 12] ^= 0xFF            # a payload byte of the third record
    s = fmt.scan(bytes(data))
    assert len(s.records) == 2
    assert isinstance(s.problem, Damaged) and s.problem.offset == third
    assert s.problem.next_valid == len(encoded(es[:3]))
    assert "valid record follows" in s.problem.why


def test_a_corrupt_length_in_the_middle_still_finds_the_records_after_it():
    es = entries(6)
    data = bytearray(encoded(es))
    third = len(encoded(es[:2]))
    struct.pack_into("<I", data, third, 0x00FFFFFF)     # a length running far past the end
    s = fmt.scan(bytes(data))
    assert isinstance(s.problem, Damaged) and s.problem.offset == third
    assert s.problem.next_valid == len(encoded(es[:3]))


def test_partial_record_header_at_eof_is_torn():
    es = entries(3)
    data = encoded(es) + fmt.encode_entry(JournalEntry(4, 3, b"x" * 40))[:5]
    s = fmt.scan(data)
    assert len(s.records) == 3 and isinstance(s.problem, Torn) and "incomplete record header" in s.problem.why


def test_partial_payload_at_eof_is_torn():
    es = entries(3)
    data = encoded(es) + fmt.encode_entry(JournalEntry(4, 3, b"x" * 40))[:30]
    s = fmt.scan(data)
    assert len(s.records) == 3 and isinstance(s.problem, Torn) and "past the end" in s.problem.why


def test_absurd_length_is_bad():
    data = encoded(entries(2))
    bad = struct.pack("<II", (1 << 30) + 1, 0) + b"x" * 64
    s = fmt.scan(data + bad)
    assert isinstance(s.problem, Torn) and "limit" in s.problem.why and s.end == len(data)
    with pytest.raises(ValueError):
        fmt.encode_record(b"")


def test_zeros_to_the_end_end_the_data_cleanly_as_space_reserved_ahead():
    data = encoded(entries(2))
    s = fmt.scan(data + bytes(4096))
    assert len(s.records) == 2 and s.problem is None and s.end == len(data)


def test_zeros_before_a_torn_write_are_torn_not_reserved_space():
    data = encoded(entries(2))
    s = fmt.scan(data + bytes(64) + b"\x07garbage")
    assert len(s.records) == 2 and isinstance(s.problem, Torn) and "length 0" in s.problem.why
    assert s.end == len(data)


def test_garbage_tail_is_torn_and_scanned_quickly():
    import random
    import time
    data = encoded(entries(3)) + random.Random(1).randbytes(2 << 20)
    started = time.monotonic()
    s = fmt.scan(data)
    assert isinstance(s.problem, Torn) and len(s.records) == 3
    assert time.monotonic() - started < 5


def test_bad_magic_version_crc_and_short_headers():
    good = fmt.encode_segment_header(SegmentHeader(1, 1))
    with pytest.raises(FormatError, match="bad magic"):
        fmt.decode_header(b"NOPE" + good[4:])
    newer = bytearray(good)
    struct.pack_into("<H", newer, 4, fmt.VERSION + 1)
    with pytest.raises(UnsupportedVersion, match=f"version {fmt.VERSION + 1}"):
        fmt.decode_header(bytes(newer))
    flipped = bytearray(good)
    flipped[10] ^= 1
    with pytest.raises(FormatError, match="CRC"):
        fmt.decode_header(bytes(flipped))
    with pytest.raises(FormatError, match="expected 44"):
        fmt.decode_header(good[:20])


def test_snapshot_complete_and_truncated():
    header = SnapshotHeader(1, 10, 2, 3)
    body = fmt.encode_snapshot_header(header) + fmt.encode_blob(b"one") + fmt.encode_blob(b"two")
    whole = body + fmt.encode_snapshot_end(2, 12)
    c = fmt.decode_snapshot(whole)
    assert c.complete and c.header == header and c.blobs == (b"one", b"two") and c.end_seq == 12
    cut = fmt.decode_snapshot(whole[:-3])
    assert not cut.complete and cut.end_seq is None and isinstance(cut.problem, Torn)
    assert not fmt.decode_snapshot(body).complete
    miscount = fmt.decode_snapshot(body + fmt.encode_snapshot_end(5, 12))
    assert not miscount.complete and isinstance(miscount.problem, Damaged)
