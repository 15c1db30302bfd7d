"""The journal's bytes: file names, headers and records. Sans-I/O: bytes in, records out.

Every file opens with a fixed 44-byte header (little endian)::

    magic "EMQJ" | version u16 | kind u8 | 0 u8 | four u64 fields | crc32 u32 of the 40 bytes before

    kind 1, segment:  history, first_seq, 0, 0
    kind 2, snapshot: history, at_seq, at_epoch, counter

then records, each ``length u32 | crc32 u32 of the payload | payload``. Zero bytes where the next
record would start, and nothing but zero bytes to the end of the file, end the data cleanly: a
segment is preallocated with zeros (journal.py), and a record never starts with a zero length.
A payload starts with a one-byte tag:

    1 entry:         seq u64 | written_epoch u64 | mutations (opaque, to the end)
    2 snapshot blob: the blob (opaque, to the end)
    3 snapshot end:  blob count u64 | end_seq u64       (last record of a complete snapshot)

The version is read before the CRC, so a file from a later format says so instead of looking
corrupt. Format 2, the shared journal of a node with groups >= 2, is shared_format.py.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass

MAGIC = b"EMQJ"
VERSION = 1
HEADER_SIZE = 44
MAX_RECORD = 1 << 30
# How far past a bad record scan() looks for a valid one, to tell damage in the middle from a
# torn tail. A torn tail is what was written after the last fsync, and a batch is kilobytes, so
# real records written after a damaged one start well inside this window; looking further would
# make recovery of a big garbage tail cost seconds for no better answer.
RESYNC_WINDOW = 4 << 20
# The most payload bytes the resync search may checksum: garbage can hold many plausible
# lengths, and each candidate costs a CRC over its length.
RESYNC_CRC_BUDGET = 64 << 20

KIND_SEGMENT = 1
KIND_SNAPSHOT = 2
TAG_ENTRY = 1
TAG_BLOB = 2
TAG_END = 3

SEGMENT_SUFFIX = ".seg"
SNAPSHOT_SUFFIX = ".snap"
TEMP_SUFFIX = ".tmp"
# Written by `journal truncate` when it drops entries that were durable (so may have been
# acknowledged), not merely a torn tail: the node restarts amnesiac until a serving master has
# brought it up to date, and the node core has this file removed then.
DROPPED_MARKER = "entries-dropped"

_HEADER = struct.Struct("<4sHBBQQQQ")
_CRC = struct.Struct("<I")
_RECORD = struct.Struct("<II")
_ENTRY = struct.Struct("<BQQ")
_END = struct.Struct("<BQQ")
# the tags a record of format 1 can start with, and a pattern that finds them (scan's resync)
TAGS = bytes((TAG_ENTRY, TAG_BLOB, TAG_END))
_TAG_PATTERNS: dict[bytes, re.Pattern[bytes]] = {}
_SEGMENT_NAME = re.compile(r"h(\d{8})-(\d{20})\.seg")
_SNAPSHOT_NAME = re.compile(r"snap-(\d{8})\.snap")


class FormatError(ValueError):
    """Bytes that are not a journal file or record of this format."""


class UnsupportedVersion(FormatError):
    """A journal file written by another format version: this build will not guess at it."""


@dataclass(frozen=True, slots=True)
class JournalEntry:
    seq: int
    written_epoch: int
    mutations: bytes        # storage.codec.encode_many output; never decoded here


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    history: int
    first_seq: int


@dataclass(frozen=True, slots=True)
class SnapshotHeader:
    history: int
    at_seq: int
    at_epoch: int
    counter: int


@dataclass(frozen=True, slots=True)
class Record:
    offset: int             # of the record's length field
    payload: bytes


@dataclass(frozen=True, slots=True)
class Torn:
    """The data ends in a bad record with nothing valid after it: an interrupted write."""

    offset: int
    why: str


@dataclass(frozen=True, slots=True)
class Damaged:
    """A bad record with a valid one after it: the middle of the data is corrupt."""

    offset: int
    why: str
    next_valid: int         # offset of the first valid record found after the bad one


@dataclass(frozen=True, slots=True)
class Scan:
    records: tuple[Record, ...]
    end: int                # where the valid records end: the bad record, or the end of data
    problem: Torn | Damaged | None


@dataclass(frozen=True, slots=True)
class SnapshotContents:
    header: SnapshotHeader
    blobs: tuple[bytes, ...]
    end_seq: int | None     # None: no end record, the snapshot is incomplete
    problem: Torn | Damaged | None   # also set (as Damaged) for a bad or misplaced end record

    @property
    def complete(self) -> bool:
        return self.end_seq is not None and self.problem is None


# -- names ----------------------------------------------------------------------------------------

def segment_name(history: int, first_seq: int) -> str:
    return f"h{history:08d}-{first_seq:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> tuple[int, int] | None:
    """(history, first_seq) of a segment's file name, or None for any other name."""
    m = _SEGMENT_NAME.fullmatch(name)
    return (int(m[1]), int(m[2])) if m else None


def snapshot_name(counter: int) -> str:
    return f"snap-{counter:08d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> int | None:
    """The counter of a snapshot's file name (also of its temporary name), or None."""
    if name.endswith(TEMP_SUFFIX):
        name = name[:-len(TEMP_SUFFIX)]
    m = _SNAPSHOT_NAME.fullmatch(name)
    return int(m[1]) if m else None


# -- headers --------------------------------------------------------------------------------------

def encode_header(kind: int, a: int, b: int, c: int, d: int, *, version: int = VERSION, spare: int = 0) -> bytes:
    body = _HEADER.pack(MAGIC, version, kind, spare, a, b, c, d)
    return body + _CRC.pack(zlib.crc32(body))


def encode_segment_header(h: SegmentHeader) -> bytes:
    return encode_header(KIND_SEGMENT, h.history, h.first_seq, 0, 0)


def encode_snapshot_header(h: SnapshotHeader) -> bytes:
    return encode_header(KIND_SNAPSHOT, h.history, h.at_seq, h.at_epoch, h.counter)


def unpack_header(data: bytes, version: int = VERSION) -> tuple[int, int, int, int, int, int]:
    """(kind, spare byte, the four fields) of the header at the start of ``data``, a header of
    format ``version``; FormatError (UnsupportedVersion for another version) says what is wrong."""
    if len(data) < HEADER_SIZE:
        raise FormatError(f"header is {len(data)} bytes, expected {HEADER_SIZE}")
    magic, found, kind, spare, a, b, c, d = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise FormatError(f"bad magic {magic!r} (expected {MAGIC!r}): not a journal file")
    if found != version:
        raise UnsupportedVersion(f"format version {found}; this build reads version {version} only")
    (crc,) = _CRC.unpack_from(data, _HEADER.size)
    if zlib.crc32(memoryview(data)[:_HEADER.size]) != crc:
        raise FormatError("header CRC mismatch")
    return kind, spare, a, b, c, d


def decode_header(data: bytes) -> SegmentHeader | SnapshotHeader:
    """The header at the start of ``data``; FormatError (UnsupportedVersion for another
    version) says what is wrong with it."""
    kind, _, a, b, c, d = unpack_header(data)
    if kind == KIND_SEGMENT:
        return SegmentHeader(a, b)
    if kind == KIND_SNAPSHOT:
        return SnapshotHeader(a, b, c, d)
    raise FormatError(f"unknown file kind {kind}")


# -- records --------------------------------------------------------------------------------------

def encode_record(payload: bytes) -> bytes:
    if not 0 < len(payload) <= MAX_RECORD:
        raise ValueError(f"record payload of {len(payload)} bytes (1 to {MAX_RECORD} allowed)")
    return _RECORD.pack(len(payload), zlib.crc32(payload)) + payload


def encode_entry(entry: JournalEntry) -> bytes:
    return encode_record(_ENTRY.pack(TAG_ENTRY, entry.seq, entry.written_epoch) + entry.mutations)


def decode_entry(payload: bytes) -> JournalEntry:
    if len(payload) < _ENTRY.size or payload[0] != TAG_ENTRY:
        raise FormatError(f"not an entry record (tag {payload[0] if payload else None}, {len(payload)} bytes)")
    _, seq, epoch = _ENTRY.unpack_from(payload)
    return JournalEntry(seq, epoch, payload[_ENTRY.size:])


def encode_blob(blob: bytes) -> bytes:
    return encode_record(bytes((TAG_BLOB,)) + blob)


def encode_snapshot_end(blob_count: int, end_seq: int) -> bytes:
    return encode_record(_END.pack(TAG_END, blob_count, end_seq))


def _bad(view: memoryview, off: int) -> str | None:
    """Why the record at ``off`` is not valid, or None when it is."""
    n = len(view)
    if n - off < _RECORD.size:
        return f"incomplete record header ({n - off} of {_RECORD.size} bytes) at end of data"
    length, crc = _RECORD.unpack_from(view, off)
    # a zero length is refused because a run of zero bytes (what some file systems show for
    # blocks allocated but never written) would otherwise read as valid empty records: crc32(b"") == 0
    if length == 0:
        return "record length 0"
    if length > MAX_RECORD:
        return f"record length {length} exceeds the {MAX_RECORD}-byte limit"
    if length > n - off - _RECORD.size:
        return f"record of {length} bytes runs past the end of data ({n - off - _RECORD.size} bytes left)"
    start = off + _RECORD.size
    if zlib.crc32(view[start:start + length]) != crc:
        return "record CRC mismatch"
    return None


def _tag_pattern(tags: bytes) -> re.Pattern[bytes]:
    pattern = _TAG_PATTERNS.get(tags)
    if pattern is None:
        pattern = _TAG_PATTERNS[tags] = re.compile(b"[" + b"".join(b"\\x%02x" % t for t in tags) + b"]")
    return pattern


def _resync(view: memoryview, bad: int, tags: bytes) -> int | None:
    """The offset of a valid record after the bad one at ``bad``, if the bounded search finds one
    (a valid record starts with one of ``tags``)."""
    n = len(view)
    candidates: list[int] = []
    if n - bad >= _RECORD.size:
        # a flipped payload bit leaves the length intact: the next record is where it says
        length = _RECORD.unpack_from(view, bad)[0]
        if 0 < length <= MAX_RECORD:
            candidates.append(bad + _RECORD.size + length)
    budget = RESYNC_CRC_BUDGET
    limit = min(n, bad + RESYNC_WINDOW)

    def valid(p: int) -> bool:
        nonlocal budget
        if p <= bad or n - p < _RECORD.size + 1 or view[p + _RECORD.size] not in tags:
            return False
        length, crc = _RECORD.unpack_from(view, p)
        if not 0 < length <= min(MAX_RECORD, n - p - _RECORD.size) or length > budget:
            return False
        budget -= length
        start = p + _RECORD.size
        return zlib.crc32(view[start:start + length]) == crc

    for p in candidates:
        if valid(p):
            return p
    # every payload starts with a tag byte, so only offsets 8 bytes before one are candidates:
    # a regular-expression scan finds those at C speed, and zero-filled tails have none
    for m in _tag_pattern(tags).finditer(view, bad + 1 + _RECORD.size, limit + _RECORD.size):
        if budget <= 0:
            break
        if valid(m.start() - _RECORD.size):
            return m.start() - _RECORD.size
    return None


def scan(data: bytes, start: int = 0, tags: bytes = TAGS) -> Scan:
    """The valid records of ``data`` from ``start``, and what stopped the scan if not the end.
    ``tags``: the tags a record of this kind of file can start with.

    A bad record (short, absurd length, CRC mismatch) followed by a valid one is ``Damaged``;
    otherwise it is the torn tail of an interrupted write, ``Torn``. The search for a later valid
    record is bounded (RESYNC_WINDOW), so damage followed only by far-away records reads as torn.
    Zero bytes from a record's start to the end are no problem: the data ends there (``end``),
    in space reserved ahead of the writes.
    """
    view = memoryview(data)
    records: list[Record] = []
    off = start
    n = len(view)
    while off < n:
        why = _bad(view, off)
        if why is not None:
            if data.count(0, off) == n - off:
                return Scan(tuple(records), off, None)
            nxt = _resync(view, off, tags)
            if nxt is None:
                return Scan(tuple(records), off, Torn(off, why))
            return Scan(tuple(records), off, Damaged(off, f"{why}; a valid record follows at offset {nxt}", nxt))
        length = _RECORD.unpack_from(view, off)[0]
        begin = off + _RECORD.size
        records.append(Record(off, bytes(view[begin:begin + length])))
        off = begin + length
    return Scan(tuple(records), off, None)


def decode_snapshot(data: bytes) -> SnapshotContents:
    """A snapshot file's header, blobs and end record. FormatError when the header is bad or
    is not a snapshot's."""
    header = decode_header(data)
    if not isinstance(header, SnapshotHeader):
        raise FormatError("a segment header where a snapshot header belongs")
    return snapshot_contents(header, data)


def snapshot_contents(header: SnapshotHeader, data: bytes) -> SnapshotContents:
    """The blobs and end record of a snapshot file whose header (already decoded) is ``header``."""
    s = scan(data, HEADER_SIZE)
    blobs: list[bytes] = []
    for i, rec in enumerate(s.records):
        tag = rec.payload[0]
        if tag == TAG_BLOB:
            blobs.append(rec.payload[1:])
            continue
        if tag == TAG_END and len(rec.payload) == _END.size:
            _, count, end_seq = _END.unpack(rec.payload)
            if count != len(blobs):
                return SnapshotContents(header, tuple(blobs), None, Damaged(
                    rec.offset, f"end record counts {count} blobs, the file holds {len(blobs)}", rec.offset))
            if i != len(s.records) - 1 or s.problem is not None:
                return SnapshotContents(header, tuple(blobs), None, Damaged(
                    rec.offset, "data after the end record", rec.offset))
            return SnapshotContents(header, tuple(blobs), end_seq, None)
        return SnapshotContents(header, tuple(blobs), None, Damaged(
            rec.offset, f"unexpected record tag {tag} in a snapshot", rec.offset))
    return SnapshotContents(header, tuple(blobs), None, s.problem or Torn(s.end, "no end record"))
