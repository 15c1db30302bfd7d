"""The shared journal's bytes (format 2): one journal for all the replication groups of a node.

A node with ``[cluster] groups`` >= 2 keeps one journal whatever G is, so that one fsync per loop
turn makes every group's entries durable (G journals would flush the disk cache G times a turn).
Headers and records are format 1's (format.py), with version 2 in the header::

    kind 3, shared segment: number, groups, 0, 0        name shared-<number>.seg
    kind 2, group snapshot: history, at_seq, at_epoch, counter, and the group in the spare byte
                                                        name g<group>-snap-<counter>.snap

A segment holds group entries, each in one record::

    4 group entry: group u8 | history u32 | seq u64 | written_epoch u64 | mutations (opaque)

A group snapshot holds format 1's blob and end records. Each group has its own histories: a
state transfer of group g starts g's next history with a snapshot, and g's entries of older
histories, still in the shared segments beside other groups' entries, are never replayed again.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from cluster.journal.format import (
    KIND_SNAPSHOT, TEMP_SUFFIX, FormatError, JournalEntry, SnapshotContents, SnapshotHeader, encode_header,
    encode_record, snapshot_contents, unpack_header,
)

VERSION = 2
KIND_SHARED_SEGMENT = 3
TAG_GROUP_ENTRY = 4
SEGMENT_TAGS = bytes((TAG_GROUP_ENTRY,))
MAX_GROUPS = 256            # the group is one byte, in entries and in a snapshot's header

_GROUP_ENTRY = struct.Struct("<BBIQQ")
_SEGMENT_NAME = re.compile(r"shared-(\d{8})\.seg")
_SNAPSHOT_NAME = re.compile(r"g(\d{3})-snap-(\d{8})\.snap")


@dataclass(frozen=True, slots=True)
class GroupEntry:
    group: int
    history: int            # the group's history the entry belongs to
    seq: int
    written_epoch: int
    mutations: bytes

    def entry(self) -> JournalEntry:
        return JournalEntry(self.seq, self.written_epoch, self.mutations)


@dataclass(frozen=True, slots=True)
class SharedSegmentHeader:
    number: int
    groups: int             # the node's G when the segment was written


# -- names ----------------------------------------------------------------------------------------

def segment_name(number: int) -> str:
    return f"shared-{number:08d}.seg"


def parse_segment_name(name: str) -> int | None:
    """The number of a shared segment's file name, or None for any other name."""
    m = _SEGMENT_NAME.fullmatch(name)
    return int(m[1]) if m else None


def snapshot_name(group: int, counter: int) -> str:
    return f"g{group:03d}-snap-{counter:08d}.snap"


def parse_snapshot_name(name: str) -> tuple[int, int] | None:
    """(group, counter) of a group snapshot's file name (also of its temporary name), or None."""
    if name.endswith(TEMP_SUFFIX):
        name = name[:-len(TEMP_SUFFIX)]
    m = _SNAPSHOT_NAME.fullmatch(name)
    return (int(m[1]), int(m[2])) if m else None


# -- headers --------------------------------------------------------------------------------------

def encode_segment_header(h: SharedSegmentHeader) -> bytes:
    return encode_header(KIND_SHARED_SEGMENT, h.number, h.groups, 0, 0, version=VERSION)


def decode_segment_header(data: bytes) -> SharedSegmentHeader:
    kind, _, number, groups, _, _ = unpack_header(data, VERSION)
    if kind != KIND_SHARED_SEGMENT:
        raise FormatError(f"file kind {kind} where a shared segment's header (kind {KIND_SHARED_SEGMENT}) belongs")
    return SharedSegmentHeader(number, groups)


def encode_snapshot_header(group: int, h: SnapshotHeader) -> bytes:
    return encode_header(KIND_SNAPSHOT, h.history, h.at_seq, h.at_epoch, h.counter, version=VERSION, spare=group)


def decode_snapshot(data: bytes) -> tuple[int, SnapshotContents]:
    """(group, contents) of a group snapshot file; FormatError when its header is bad."""
    kind, group, history, at_seq, at_epoch, counter = unpack_header(data, VERSION)
    if kind != KIND_SNAPSHOT:
        raise FormatError(f"file kind {kind} where a snapshot's header (kind {KIND_SNAPSHOT}) belongs")
    return group, snapshot_contents(SnapshotHeader(history, at_seq, at_epoch, counter), data)


# -- records --------------------------------------------------------------------------------------

def encode_group_entry(e: GroupEntry) -> bytes:
    return encode_record(_GROUP_ENTRY.pack(TAG_GROUP_ENTRY, e.group, e.history, e.seq, e.written_epoch)
                         + e.mutations)


def decode_group_entry(payload: bytes) -> GroupEntry:
    if len(payload) < _GROUP_ENTRY.size or payload[0] != TAG_GROUP_ENTRY:
        raise FormatError(f"not a group entry record (tag {payload[0] if payload else None}, {len(payload)} bytes)")
    _, group, history, seq, epoch = _GROUP_ENTRY.unpack_from(payload)
    return GroupEntry(group, history, seq, epoch, payload[_GROUP_ENTRY.size:])

