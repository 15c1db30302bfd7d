"""Recovery of a journal directory, over ``Disk`` reads only: which snapshot and entries the
node replays, which files are garbage, which torn tail to cut, and where damage stops it.

Recovery takes the newest snapshot (its history is the current one) and replays the entries of that
history after its at_seq. Files of older histories, older snapshots and ``.tmp`` files are
garbage. A torn tail of the last segment is cut; anything else wrong is ``JournalDamaged``, with
the ``Repair`` that ``journal truncate`` would make.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cluster.journal.disk import Disk
from cluster.journal.format import (
    DROPPED_MARKER, HEADER_SIZE, TEMP_SUFFIX, Damaged, FormatError, JournalEntry, Scan, SegmentHeader,
    SnapshotContents, Torn, UnsupportedVersion, decode_entry, decode_header, decode_snapshot, parse_segment_name,
    parse_snapshot_name, scan, snapshot_name,
)


class JournalDamaged(RuntimeError):
    """The journal cannot be recovered as it is: ``file`` is bad from ``offset`` on."""

    def __init__(self, where: str, file: str, offset: int, why: str):
        self.where = where
        self.file = file
        self.offset = offset
        self.why = why
        super().__init__(
            f"journal damaged: {where}/{file} at offset {offset}: {why}. "
            f"Run `elasticmq-py journal check {where}` to see it, and `elasticmq-py journal truncate "
            f"{where}` to drop everything from the damage on; the node then fetches what it lacks "
            f"from its peers")


class UnsupportedJournal(JournalDamaged):
    """A journal file of another format version: truncating would not help, a matching build will."""


# -- what is on disk ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SnapshotPosition:
    counter: int
    history: int
    at_seq: int
    at_epoch: int
    end_seq: int


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    offset: int
    kind: str               # torn | damaged | unsupported
    why: str


@dataclass(frozen=True, slots=True)
class Cut:
    """Drop the end of ``file`` from ``offset`` (``remove``: the whole file goes)."""

    file: str
    offset: int
    dropped_bytes: int
    remove: bool

    def describe(self) -> str:
        if self.remove:
            return f"removed {self.file} ({self.dropped_bytes} bytes, no complete record)"
        return f"truncated {self.file} at offset {self.offset} ({self.dropped_bytes} bytes dropped)"


@dataclass(frozen=True, slots=True)
class Repair:
    """What dropping everything from the damage on means: ``everything`` when the damage leaves
    no usable snapshot base (the journal is emptied, and the node fetches all from its peers)."""

    cut: Cut | None
    remove: tuple[str, ...]
    from_seq: int | None
    everything: bool


@dataclass(frozen=True, slots=True)
class FileInfo:
    name: str
    kind: str               # segment | snapshot | temporary | marker | other
    size: int
    history: int | None
    seq: int | None         # a segment's first_seq, a snapshot's at_seq


@dataclass(frozen=True, slots=True)
class Survey:
    """A read-only look at a journal directory: what recovery would use, remove and cut."""

    files: tuple[FileInfo, ...]
    history: int
    snapshot: SnapshotPosition | None
    blobs: tuple[bytes, ...]
    entries: tuple[JournalEntry, ...]        # seq > the snapshot's at_seq
    first_seq: int | None                    # of the entries kept on disk, snapshot or not
    last_seq: int
    last_epoch: int
    segments: tuple[str, ...]                # kept segments of the current history, in order
    garbage: tuple[str, ...]
    tail_cut: Cut | None
    damage: Problem | None                   # recovery stops here: nothing after it was read
    repair: Repair | None
    next_counter: int
    # (segment, where its data ends) for segments with reserved zero space after their data:
    # Journal.open cuts it, so that appends go right after the data
    reserved: tuple[tuple[str, int], ...] = ()
    # `journal truncate` dropped entries that were durable (DROPPED_MARKER): what the node
    # acknowledged may be gone, as after a lost data-dir
    entries_dropped: bool = False

    @property
    def bytes_kept(self) -> int:
        return bytes_kept(self.files, self.garbage, self.reserved, self.tail_cut)


@dataclass(frozen=True, slots=True)
class Recovery:
    history: int
    snapshot: SnapshotPosition | None
    blobs: tuple[bytes, ...]                 # load these first,
    entries: tuple[JournalEntry, ...]        # then replay these (seq > snapshot.at_seq), in order
    last_seq: int
    last_epoch: int
    bytes_on_disk: int
    truncated: str | None                    # the torn tail cut (by Journal.open), if any
    duration_s: float
    entries_dropped: bool                    # `journal truncate` dropped durable entries (Survey)


def bytes_kept(files: tuple[FileInfo, ...], garbage: tuple[str, ...], reserved: tuple[tuple[str, int], ...],
               tail_cut: Cut | None) -> int:
    """The bytes of ``files`` that recovery keeps: not the garbage, the reserved zeros or a torn tail."""
    gone = set(garbage)
    total = sum(f.size for f in files if f.name not in gone)
    ends = dict(reserved)
    unused = sum(f.size - ends[f.name] for f in files if f.name in ends)
    return total - unused - (tail_cut.dropped_bytes if tail_cut else 0)


class _Stop(Exception):
    def __init__(self, problem: Problem, repair: Repair | None):
        self.problem = problem
        self.repair = repair


def file_kind(name: str) -> str:
    if name.endswith(TEMP_SUFFIX):
        return "temporary"
    if parse_segment_name(name):
        return "segment"
    if parse_snapshot_name(name) is not None:
        return "snapshot"
    if name == DROPPED_MARKER:
        return "marker"
    return "other"


def survey(disk: Disk) -> Survey:
    """Read the journal in ``disk`` and say what recovery would do, and where it must stop.
    Reads only."""
    names = disk.list()
    infos: list[FileInfo] = []
    segments: dict[int, list[tuple[int, str]]] = {}
    snapshots: list[tuple[int, str]] = []
    counters = [0]
    for name in names:
        kind = file_kind(name)
        history = seq = None
        if kind == "segment":
            history, seq = parse_segment_name(name)   # type: ignore[misc]
            segments.setdefault(history, []).append((seq, name))
        elif kind == "snapshot":
            counters.append(parse_snapshot_name(name))  # type: ignore[arg-type]
            snapshots.append((counters[-1], name))
        elif kind == "temporary" and parse_snapshot_name(name) is not None:
            counters.append(parse_snapshot_name(name))  # type: ignore[arg-type]
        infos.append(FileInfo(name, kind, disk.size(name), history, seq))
    state = _Reader(disk, segments, snapshots)
    damage = repair = None
    try:
        state.read()
    except _Stop as stop:
        damage, repair = stop.problem, stop.repair
    # a snapshot's at_seq in the listing helps an operator
    if state.snapshot is not None:
        infos = [FileInfo(f.name, f.kind, f.size, state.snapshot.history, state.snapshot.at_seq)
                 if f.name == snapshot_name(state.snapshot.counter) else f for f in infos]
    garbage = [n for n in names if n.endswith(TEMP_SUFFIX)] + state.garbage
    return Survey(tuple(infos), state.history, state.snapshot, state.blobs, tuple(state.entries),
                  state.first_seq, state.last_seq, state.last_epoch, tuple(state.kept), tuple(garbage),
                  state.tail_cut, damage, repair, max(counters) + 1, tuple(state.reserved), DROPPED_MARKER in names)


class SegmentEnds:
    """How a reader of segments notes the end of each one's records: the zeros reserved after
    the data, a torn tail of the last segment, or damage."""

    reserved: list[tuple[str, int]]
    tail_cut: Cut | None

    def segment_end(self, name: str, data: bytes, s: Scan, last: bool) -> tuple[Cut, str] | None:
        """Note where segment ``name``'s data ends (its scan ``s``); damage, as the cut that
        drops it and why, is returned."""
        p = s.problem
        if p is None:
            if s.end < len(data):
                self.reserved.append((name, s.end))
            return None
        cut = Cut(name, p.offset, len(data) - p.offset, False)
        if isinstance(p, Torn) and last:
            self.tail_cut = cut
            return None
        return cut, p.why if isinstance(p, Damaged) else f"{p.why}, in a segment that is not the last"


class _Reader(SegmentEnds):
    """survey()'s steps; ``_Stop`` ends them at the first damage."""

    def __init__(self, disk: Disk, segments: dict[int, list[tuple[int, str]]], snapshots: list[tuple[int, str]]):
        self.disk = disk
        self.all_segments = segments
        self.snapshots = sorted(snapshots)
        self.history = 0
        self.snapshot: SnapshotPosition | None = None
        self.blobs: tuple[bytes, ...] = ()
        self.entries: list[JournalEntry] = []
        self.first_seq: int | None = None
        self.last_seq = 0
        self.last_epoch = 0
        self.reserved: list[tuple[str, int]] = []
        self.kept: list[str] = []
        self.garbage: list[str] = []
        self.tail_cut: Cut | None = None

    def everything(self) -> Repair:
        journal_files = [n for n in self.disk.list()
                         if file_kind(n) in ("segment", "snapshot", "temporary")]
        return Repair(None, tuple(journal_files), None, True)

    def stop(self, file: str, offset: int, why: str, *, kind: str = "damaged", repair: Repair | None = None) -> _Stop:
        return _Stop(Problem(file, offset, kind, why), repair)

    def read(self) -> None:
        self.read_snapshot()
        self.read_segments()

    def read_snapshot(self) -> None:
        if not self.snapshots:
            return
        # The newest snapshot must be whole: it was fsynced before its rename, so a bad one means
        # the disk lost synced data. Falling back to an older one could bring back a history a
        # reset replaced, whose divergent tail must never be replayed.
        counter, name = self.snapshots[-1]
        self.garbage += [n for _, n in self.snapshots[:-1]]
        data = self.disk.read(name)
        try:
            contents: SnapshotContents = decode_snapshot(data)
        except UnsupportedVersion as e:
            raise self.stop(name, 0, str(e), kind="unsupported") from None
        except FormatError as e:
            raise self.stop(name, 0, f"snapshot header: {e}", repair=self.everything()) from None
        h = contents.header
        if contents.problem is not None or contents.end_seq is None:
            p = contents.problem
            raise self.stop(name, p.offset if p else len(data),
                            f"incomplete snapshot: {p.why if p else 'no end record'}", repair=self.everything())
        if h.counter != counter:
            raise self.stop(name, 0, f"header names counter {h.counter}", repair=self.everything())
        if contents.end_seq < h.at_seq:
            raise self.stop(name, 0, f"end_seq {contents.end_seq} before at_seq {h.at_seq}", repair=self.everything())
        self.snapshot = SnapshotPosition(counter, h.history, h.at_seq, h.at_epoch, contents.end_seq)
        self.blobs = contents.blobs
        self.history = h.history
        self.last_seq, self.last_epoch = h.at_seq, h.at_epoch

    def read_segments(self) -> None:
        at_seq = self.snapshot.at_seq if self.snapshot else 0
        for history, segs in sorted(self.all_segments.items()):
            if history < self.history:
                self.garbage += [n for _, n in segs]
            elif history > self.history:
                raise self.stop(min(segs)[1], 0, f"segments of history {history}, but no snapshot starts it "
                                f"(the current history is {self.history})", repair=self.everything())
        current = sorted(self.all_segments.get(self.history, []))
        kept: list[tuple[int, str]] = []
        for i, (first, name) in enumerate(current):
            # compaction removes a segment once the snapshot covers all its entries; one left
            # behind by a crash is garbage
            if i + 1 < len(current) and current[i + 1][0] <= at_seq + 1:
                self.garbage.append(name)
            else:
                kept.append((first, name))
        expected = at_seq + 1
        if kept and kept[0][0] > expected:
            raise self.stop(kept[0][1], 0, f"entries {expected}..{kept[0][0] - 1} are missing: no segment "
                            f"holds the entries right after the snapshot's position {at_seq}",
                            repair=self.drop_from(None, [n for _, n in kept], expected))
        if kept:
            expected = kept[0][0]
            self.first_seq = expected
        for i, (first, name) in enumerate(kept):
            later = [n for _, n in kept[i + 1:]]
            if first != expected:
                raise self.stop(name, 0, f"seq gap: expected a segment starting at {expected}, found {first}",
                                repair=self.drop_from(None, [name] + later, expected))
            expected = self.read_segment(name, first, expected, last=not later, later=later)
            if self.tail_cut is None or not self.tail_cut.remove:
                self.kept.append(name)
        self.last_seq = max(at_seq, expected - 1)
        if self.snapshot and self.last_seq < self.snapshot.end_seq:
            where = self.kept[-1] if self.kept else snapshot_name(self.snapshot.counter)
            raise self.stop(where, self.disk.size(where) if self.kept else 0,
                            f"the snapshot needs the entries up to {self.snapshot.end_seq}, "
                            f"but the journal ends at {self.last_seq}", repair=self.everything())

    def drop_from(self, cut: Cut | None, remove: list[str], from_seq: int) -> Repair:
        # dropping entries the snapshot depends on (up to its end_seq) leaves no usable base
        if self.snapshot and from_seq <= self.snapshot.end_seq:
            return self.everything()
        return Repair(cut, tuple(remove), from_seq, False)

    def read_segment(self, name: str, first: int, expected: int, *, last: bool, later: list[str]) -> int:
        """Read one segment's entries; returns the seq expected next."""
        data = self.disk.read(name)
        at_seq = self.snapshot.at_seq if self.snapshot else 0
        try:
            header = decode_header(data)
        except UnsupportedVersion as e:
            raise self.stop(name, 0, str(e), kind="unsupported") from None
        except FormatError as e:
            body = scan(data, HEADER_SIZE) if len(data) > HEADER_SIZE else None
            if last and (body is None or not body.records):
                # a segment is created with its header and first entries in one go: a bad
                # header with no record after it is that creation, torn
                self.tail_cut = Cut(name, 0, len(data), True)
                return expected
            raise self.stop(name, 0, f"segment header: {e}",
                            repair=self.drop_from(None, [name] + later, expected)) from None
        if header != SegmentHeader(self.history, first):
            raise self.stop(name, 0, f"header says {header}, the name history {self.history} and first seq {first}",
                            repair=self.drop_from(None, [name] + later, expected))
        s = scan(data, HEADER_SIZE)
        for rec in s.records:
            try:
                entry = decode_entry(rec.payload)
            except FormatError as e:
                raise self.stop(name, rec.offset, str(e), repair=self.drop_from(
                    Cut(name, rec.offset, len(data) - rec.offset, False), later, expected)) from None
            if entry.seq != expected:
                raise self.stop(name, rec.offset, f"entry seq {entry.seq}, expected {expected}", repair=self.drop_from(
                    Cut(name, rec.offset, len(data) - rec.offset, False), later, expected))
            expected += 1
            self.last_seq = max(self.last_seq, entry.seq)     # progressive: a report of damage shows how far it read
            if entry.seq > at_seq:
                self.entries.append(entry)
                self.last_epoch = entry.written_epoch
        damage = self.segment_end(name, data, s, last)
        if damage is not None:
            cut, why = damage
            raise self.stop(name, cut.offset, why, repair=self.drop_from(cut, later, expected))
        return expected


def recover(disk: Disk) -> Recovery:
    """What the journal in ``disk`` holds: snapshot blobs, then entries to replay. Reads only:
    ``truncated`` names the torn tail that ``Journal.open`` cuts. Raises JournalDamaged."""
    started = time.monotonic()
    sv = survey(disk)
    raise_damage(disk, sv)
    return recovery_of(sv, time.monotonic() - started)


def raise_damage(disk: Disk, sv: Survey) -> None:
    if sv.damage is not None:
        cls = UnsupportedJournal if sv.damage.kind == "unsupported" else JournalDamaged
        raise cls(disk.where, sv.damage.file, sv.damage.offset, sv.damage.why)


def recovery_of(sv: Survey, duration_s: float) -> Recovery:
    return Recovery(sv.history, sv.snapshot, sv.blobs, sv.entries, sv.last_seq, sv.last_epoch, sv.bytes_kept,
                    sv.tail_cut.describe() if sv.tail_cut else None, duration_s, sv.entries_dropped)
