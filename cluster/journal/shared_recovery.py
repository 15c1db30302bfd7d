"""Recovery of a shared journal directory (format 2, shared_format.py), over ``Disk`` reads only.

Each group recovers alone: its newest snapshot (complete, or the group is damaged: falling back
to an older one could bring back a history a reset replaced), then its entries of that
snapshot's history with seq > at_seq, consecutive. Its entries of older histories are skipped;
an entry of a newer history (no snapshot starts it) or a gap is damage *of that group*: the
other groups still recover everything, and ``journal truncate`` restarts only the damaged group,
empty, in a history of its own. Damage to the bytes of a shared segment (a bad record with valid
ones after it, a bad header, a torn record in a segment that is not the last) cannot be put on
one group: recovery stops there, as format 1's does. A torn tail of the last segment is cut.

A segment that is not the last, whose every entry is covered by its group's snapshot or belongs
to an older history, is garbage (compaction removes such segments; a crash can leave one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cluster.journal import format as fmt
from cluster.journal.disk import Disk
from cluster.journal.format import (
    DROPPED_MARKER, HEADER_SIZE, TEMP_SUFFIX, FormatError, JournalEntry, UnsupportedVersion, scan,
)
from cluster.journal.recovery import (
    Cut, FileInfo, JournalDamaged, Problem, SegmentEnds, SnapshotPosition, UnsupportedJournal, bytes_kept,
)
from cluster.journal.shared_format import (
    SEGMENT_TAGS, GroupEntry, decode_group_entry, decode_segment_header, decode_snapshot, parse_segment_name,
    parse_snapshot_name,
)

# segment -> {group: (the newest history of the group's entries in it, their highest seq in that history)}
Coverage = dict[int, tuple[int, int]]


class JournalFormatMismatch(RuntimeError):
    """The data-dir's journal was written with another ``[cluster] groups`` than this node's."""


def journal_format(names: list[str]) -> int | None:
    """1 (a node journal of groups = 1), 2 (a shared journal) or None (no journal files)."""
    shared = any(parse_segment_name(n) is not None or parse_snapshot_name(n) is not None for n in names)
    single = any(fmt.parse_segment_name(n) is not None or fmt.parse_snapshot_name(n) is not None for n in names)
    if shared:
        return 2
    return 1 if single else None


def require_format(disk: Disk, groups: int) -> None:
    """Refuse (``JournalFormatMismatch``) a journal of the other format than ``groups`` needs:
    format 1 for groups = 1, the shared journal for groups >= 2. Changing G is not supported, and
    reading one format as the other would start the node empty beside files it ignores."""
    found = journal_format(disk.list())
    if found is None or found == (1 if groups == 1 else 2):
        return
    if found == 1:
        raise JournalFormatMismatch(
            f"the journal in {disk.where} was written by a node with [cluster] groups = 1 (format 1); this node "
            f"has groups = {groups}. Changing groups is not supported: start the node with groups = 1, or give it "
            f"a new data-dir (it then fetches its state from its peers)")
    raise JournalFormatMismatch(
        f"the journal in {disk.where} is a shared journal (format 2), written by a node with [cluster] groups "
        f">= 2; this node has groups = 1. Changing groups is not supported: start the node with the groups it "
        f"had, or give it a new data-dir (it then fetches its state from its peers)")


@dataclass(frozen=True, slots=True)
class GroupRecovery:
    """One group's part of a shared journal: load ``blobs``, then replay ``entries``. Its fields
    ``snapshot``, ``blobs`` and ``entries`` are those of format 1's ``Recovery``, so
    ``journaling.rebuild`` rebuilds a group from it."""

    group: int
    history: int
    snapshot: SnapshotPosition | None
    blobs: tuple[bytes, ...]
    entries: tuple[JournalEntry, ...]        # this history, seq > the snapshot's at_seq, in order
    first_seq: int | None                    # of this history's entries on disk, snapshot or not
    last_seq: int
    last_epoch: int
    damage: Problem | None                   # recovery of this group stops here
    max_history: int                         # the highest history of the group in any file


@dataclass(frozen=True, slots=True)
class SharedRepair:
    """What dropping the damage means: cut ``cut``, remove ``remove``, and restart each group of
    ``reset_groups`` empty in a new history (its entries and snapshot are all dropped)."""

    cut: Cut | None
    remove: tuple[str, ...]
    reset_groups: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SharedSurvey:
    """A read-only look at a shared journal directory."""

    files: tuple[FileInfo, ...]
    groups: int                              # the segments' headers', else the most the files or the caller show
    written_groups: int | None               # what the first readable segment header says
    recoveries: tuple[GroupRecovery, ...]    # one per group, 0..groups-1
    segments: tuple[str, ...]                # kept, in order
    coverage: tuple[tuple[str, Coverage], ...]    # of the kept segments read
    garbage: tuple[str, ...]
    tail_cut: Cut | None
    damage: Problem | None                   # damage to the shared files: nothing after it was read
    repair: SharedRepair | None              # for ``damage`` and every group's damage
    next_counter: int
    next_number: int
    reserved: tuple[tuple[str, int], ...] = ()
    entries_dropped: bool = False

    @property
    def problem(self) -> Problem | None:
        """The damage that stops the node from starting: the shared files', else a group's."""
        if self.damage is not None:
            return self.damage
        return next((r.damage for r in self.recoveries if r.damage is not None), None)

    @property
    def bytes_kept(self) -> int:
        return bytes_kept(self.files, self.garbage, self.reserved, self.tail_cut)


@dataclass(frozen=True, slots=True)
class SharedRecovery:
    groups: tuple[GroupRecovery, ...]
    bytes_on_disk: int
    truncated: str | None                    # the torn tail cut (by SharedJournal.open), if any
    duration_s: float
    entries_dropped: bool


@dataclass
class _Group:
    """A group's recovery while it is read."""

    history: int = 0
    at_seq: int = 0
    snapshot: SnapshotPosition | None = None
    blobs: tuple[bytes, ...] = ()
    entries: list[JournalEntry] = field(default_factory=list)
    first_seq: int | None = None
    last_seq: int = 0
    last_epoch: int = 0
    damage: Problem | None = None
    max_history: int = 0

    def covers(self, history: int, seq: int) -> bool:
        """Whether an entry (or every entry up to ``seq``) of ``history`` needs no replay."""
        return self.damage is None and (history < self.history or seq <= self.at_seq)


class _Stop(Exception):
    def __init__(self, problem: Problem, cut: Cut | None, remove: list[str]):
        self.problem = problem
        self.cut = cut
        self.remove = remove


def survey(disk: Disk, groups: int | None = None) -> SharedSurvey:
    """Read the shared journal in ``disk`` and say what recovery would do, with a recovery for
    each of ``groups`` groups at least (None: as many as the files show). Reads only."""
    names = disk.list()
    reader = _Reader(disk, groups or 0)
    infos: list[FileInfo] = []
    for name in names:
        number = parse_segment_name(name)
        snap = parse_snapshot_name(name)
        if number is not None:
            reader.segments.append((number, name))
            kind = "segment"
        elif snap is not None:
            reader.counters.append(snap[1])
            kind = "temporary" if name.endswith(TEMP_SUFFIX) else "snapshot"
            if kind == "snapshot":
                reader.snapshots.setdefault(snap[0], []).append((snap[1], name))
        else:
            kind = "marker" if name == DROPPED_MARKER else "temporary" if name.endswith(TEMP_SUFFIX) else "other"
        infos.append(FileInfo(name, kind, disk.size(name), None, None))
    reader.read()
    infos = [reader.described(f) for f in infos]
    garbage = [n for n in names if n.endswith(TEMP_SUFFIX)] + reader.garbage()
    return SharedSurvey(
        tuple(infos), reader.groups, reader.written_groups, reader.recoveries(), tuple(reader.kept),
        tuple((n, c) for n, c in reader.coverage if n in reader.kept), tuple(garbage), reader.tail_cut, reader.damage,
        reader.repair(),
        max(reader.counters, default=0) + 1, max((n for n, _ in reader.segments), default=0) + 1,
        tuple(reader.reserved), DROPPED_MARKER in names)


class _Reader(SegmentEnds):
    """survey()'s steps."""

    def __init__(self, disk: Disk, groups: int):
        self.disk = disk
        self.segments: list[tuple[int, str]] = []
        self.snapshots: dict[int, list[tuple[int, str]]] = {}
        self.counters: list[int] = []
        self.state: dict[int, _Group] = {}
        self.old_snapshots: list[str] = []
        self.kept: list[str] = []
        self.coverage: list[tuple[str, Coverage]] = []
        self.reserved: list[tuple[str, int]] = []
        self.tail_cut: Cut | None = None
        self.damage: Problem | None = None
        self.stop_cut: Cut | None = None
        self.stop_remove: list[str] = []
        self.written_groups: int | None = None
        self.groups = groups

    def group(self, g: int) -> _Group:
        st = self.state.get(g)
        if st is None:
            st = self.state[g] = _Group()
        return st

    def fail(self, g: int, file: str, offset: int, why: str, kind: str = "damaged") -> None:
        st = self.group(g)
        if st.damage is None:
            st.damage = Problem(file, offset, kind, f"group {g}: {why}")

    def read(self) -> None:
        for g, snaps in sorted(self.snapshots.items()):
            snaps.sort()
            self.old_snapshots += [n for _, n in snaps[:-1]]
            self.read_snapshot(g, *snaps[-1])
        self.segments.sort()
        try:
            self.read_segments()
        except _Stop as stop:
            self.damage, self.stop_cut, self.stop_remove = stop.problem, stop.cut, stop.remove
        if self.written_groups is not None:
            self.groups = self.written_groups
        else:
            self.groups = max([self.groups, *(g + 1 for g in self.state)])
        for g, st in sorted(self.state.items()):
            if g >= self.groups and self.damage is None:
                self.damage = Problem(_snapshot_file(self.snapshots[g]), 0, "damaged",
                                      f"a snapshot of group {g} in a journal of {self.groups} groups")
                self.stop_remove = [n for _, n in self.snapshots[g]]
            snap = st.snapshot
            if snap is not None and st.damage is None and st.last_seq < snap.end_seq:
                self.fail(g, _snapshot_file(self.snapshots[g]), 0, f"the snapshot needs the entries up to "
                          f"{snap.end_seq}, but the journal ends at {st.last_seq}")

    def read_snapshot(self, g: int, counter: int, name: str) -> None:
        data = self.disk.read(name)
        try:
            group, contents = decode_snapshot(data)
        except UnsupportedVersion as e:
            self.fail(g, name, 0, str(e), kind="unsupported")
            return
        except FormatError as e:
            self.fail(g, name, 0, f"snapshot header: {e}")
            return
        h = contents.header
        st = self.group(g)
        st.max_history = max(st.max_history, h.history)
        if contents.problem is not None or contents.end_seq is None:
            p = contents.problem
            self.fail(g, name, p.offset if p else len(data), f"incomplete snapshot: {p.why if p else 'no end record'}")
        elif group != g or h.counter != counter:
            self.fail(g, name, 0, f"header names group {group} and counter {h.counter}")
        elif contents.end_seq < h.at_seq:
            self.fail(g, name, 0, f"end_seq {contents.end_seq} before at_seq {h.at_seq}")
        else:
            st.snapshot = SnapshotPosition(counter, h.history, h.at_seq, h.at_epoch, contents.end_seq)
            st.blobs = contents.blobs
            st.history, st.at_seq = h.history, h.at_seq
            st.last_seq, st.last_epoch = h.at_seq, h.at_epoch

    def read_segments(self) -> None:
        for i, (number, name) in enumerate(self.segments):
            later = [n for _, n in self.segments[i + 1:]]
            self.read_segment(name, number, last=not later, later=later)

    def read_segment(self, name: str, number: int, *, last: bool, later: list[str]) -> None:
        data = self.disk.read(name)
        try:
            header = decode_segment_header(data)
        except UnsupportedVersion as e:
            raise _Stop(Problem(name, 0, "unsupported", str(e)), None, []) from None
        except FormatError as e:
            body = scan(data, HEADER_SIZE, SEGMENT_TAGS) if len(data) > HEADER_SIZE else None
            if last and (body is None or not body.records):
                # a segment is created with its header and first entries in one go: a bad
                # header with no record after it is that creation, torn
                self.tail_cut = Cut(name, 0, len(data), True)
                return
            raise _Stop(Problem(name, 0, "damaged", f"segment header: {e}"), None, [name] + later) from None
        if header.number != number or (self.written_groups is not None and header.groups != self.written_groups):
            why = (f"header says number {header.number} and groups {header.groups}, the name {number} and the "
                   f"journal's groups {self.written_groups}")
            raise _Stop(Problem(name, 0, "damaged", why), None, [name] + later)
        self.written_groups = header.groups
        s = scan(data, HEADER_SIZE, SEGMENT_TAGS)
        cover: Coverage = {}
        self.coverage.append((name, cover))
        self.kept.append(name)
        for rec in s.records:
            cut = Cut(name, rec.offset, len(data) - rec.offset, False)
            try:
                e = decode_group_entry(rec.payload)
            except FormatError as err:
                raise _Stop(Problem(name, rec.offset, "damaged", str(err)), cut, later) from None
            if e.group >= header.groups:
                raise _Stop(Problem(name, rec.offset, "damaged", f"an entry of group {e.group} in a journal of "
                                    f"{header.groups} groups"), cut, later)
            self.entry(name, rec.offset, e)
            history, seq = cover.get(e.group, (-1, 0))
            cover[e.group] = (e.history, e.seq if e.history > history else max(seq, e.seq))
        damage = self.segment_end(name, data, s, last)
        if damage is not None:
            cut, why = damage
            raise _Stop(Problem(name, cut.offset, "damaged", why), cut, later)

    def entry(self, file: str, offset: int, e: GroupEntry) -> None:
        st = self.group(e.group)
        st.max_history = max(st.max_history, e.history)
        if st.damage is not None or e.history < st.history:
            return
        if e.history > st.history:
            self.fail(e.group, file, offset, f"entries of history {e.history}, but no snapshot starts it (the "
                      f"group's history is {st.history})")
            return
        if st.first_seq is None:
            st.first_seq = e.seq
        if e.seq <= st.at_seq and not st.entries:
            return      # covered by the snapshot (compaction keeps a segment for other groups' entries)
        expected = st.entries[-1].seq + 1 if st.entries else st.at_seq + 1
        if e.seq != expected:
            missing = f" (entries {expected}..{e.seq - 1} are missing)" if e.seq > expected else ""
            self.fail(e.group, file, offset, f"entry seq {e.seq}, expected {expected}{missing}")
            return
        st.entries.append(e.entry())
        st.last_seq, st.last_epoch = e.seq, e.written_epoch

    def garbage(self) -> list[str]:
        """Older snapshots, and segments (not the last) whose every entry is covered."""
        out = list(self.old_snapshots)
        last = self.kept[-1] if self.kept else None
        for name, cover in self.coverage:
            if name != last and all(self.group(g).covers(h, seq) for g, (h, seq) in cover.items()):
                out.append(name)
                self.kept.remove(name)
        return out

    def recoveries(self) -> tuple[GroupRecovery, ...]:
        out = []
        for g in range(self.groups):
            st = self.group(g)
            out.append(GroupRecovery(g, st.history, st.snapshot, st.blobs, tuple(st.entries), st.first_seq,
                                     max(st.last_seq, st.at_seq), st.last_epoch, st.damage, st.max_history))
        return tuple(out)

    def repair(self) -> SharedRepair | None:
        resets = tuple(g for g, st in sorted(self.state.items())
                       if st.damage is not None and st.damage.kind != "unsupported")
        if self.damage is None and not resets:
            return None
        if self.damage is not None and self.damage.kind == "unsupported":
            return None
        return SharedRepair(self.stop_cut, tuple(self.stop_remove), resets)

    def described(self, f: FileInfo) -> FileInfo:
        """A kept snapshot's history and at_seq, for the operator's listing."""
        snap = parse_snapshot_name(f.name)
        if f.kind != "snapshot" or snap is None:
            return f
        st = self.state.get(snap[0])
        if st is None or st.snapshot is None or st.snapshot.counter != snap[1]:
            return f
        return FileInfo(f.name, f.kind, f.size, st.snapshot.history, st.snapshot.at_seq)


def _snapshot_file(snaps: list[tuple[int, str]]) -> str:
    return max(snaps)[1]


def raise_damage(disk: Disk, sv: SharedSurvey) -> None:
    p = sv.problem
    if p is not None:
        cls = UnsupportedJournal if p.kind == "unsupported" else JournalDamaged
        raise cls(disk.where, p.file, p.offset, p.why)


def recovery_of(sv: SharedSurvey, duration_s: float) -> SharedRecovery:
    return SharedRecovery(sv.recoveries, sv.bytes_kept, sv.tail_cut.describe() if sv.tail_cut else None,
                          duration_s, sv.entries_dropped)


def recover(disk: Disk) -> SharedRecovery:
    """What the shared journal in ``disk`` holds, per group. Reads only: ``truncated`` names the
    torn tail that ``SharedJournal.open`` cuts. Raises JournalDamaged."""
    started = time.monotonic()
    sv = survey(disk)
    raise_damage(disk, sv)
    return recovery_of(sv, time.monotonic() - started)
