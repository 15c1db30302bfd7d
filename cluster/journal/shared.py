"""``SharedJournal``: one journal for every replication group of a node (format 2, shared_format.py).

A node with G >= 2 groups appends every group's entries, tagged with the group and the group's
history, into one sequence of segments ``shared-<number>.seg``; one ``sync`` makes what every
group appended durable with one fsync (a roll syncs the segment it closes, as format 1 does).
Each group keeps its own position (history, last_seq, durable_seq), its own snapshots
``g<group>-snap-<counter>.snap`` and its own resets: a state transfer of group g writes g's
snapshot in g's next history and leaves the shared segments alone; g's older entries in them are
never replayed again (shared_recovery.py).

Compaction: a segment is removed once every entry in it is covered by its group's snapshot (seq
<= at_seq) or belongs to an older history of its group. The journal keeps ``segment -> {group:
(history, highest seq)}`` in memory (recovery rebuilds it), so this is decided without reading
a file. The segment appended to is never removed. A group whose snapshots lag keeps the segments
holding its entries, and the other groups' entries in them with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from cluster.journal.disk import Disk
from cluster.journal.format import TEMP_SUFFIX, JournalEntry, SnapshotHeader
from cluster.journal.journal import (
    DEFAULT_SEGMENT_BYTES, JournalFiles, SnapshotAborted, SnapshotStats, SnapshotWriter, check_end, prepare,
)
from cluster.journal.recovery import SnapshotPosition
from cluster.journal.shared_format import (
    MAX_GROUPS, GroupEntry, SharedSegmentHeader, encode_group_entry, encode_segment_header, encode_snapshot_header,
    parse_segment_name, parse_snapshot_name, segment_name, snapshot_name,
)
from cluster.journal.shared_recovery import (
    Coverage, JournalFormatMismatch, SharedRecovery, SharedSurvey, raise_damage, recovery_of, require_format, survey,
)


@dataclass(frozen=True, slots=True)
class GroupPosition:
    group: int
    history: int
    last_seq: int
    durable_seq: int
    snapshot_at_seq: int | None


@dataclass(frozen=True, slots=True)
class SharedJournalStats:
    groups: tuple[GroupPosition, ...]
    bytes_on_disk: int
    segments: int
    fsyncs: int
    fsync_total_s: float
    fsync_last_s: float | None
    last_snapshot: SnapshotStats | None      # of any group


class SharedJournal(JournalFiles):
    """The journal of a node's ``groups`` groups in one directory. Build it with
    ``SharedJournal.open(disk, groups)``. Each group's methods mirror ``Journal``'s, with the
    group first; ``sync`` is one for all."""

    def __init__(self, disk: Disk, sv: SharedSurvey, groups: int, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES):
        names = disk.list()
        super().__init__(disk, {n: disk.size(n) for n in names if _journal_file(n)}, segment_bytes=segment_bytes,
                         next_counter=sv.next_counter, entries_dropped=sv.entries_dropped)
        recs = sv.recoveries
        self._groups = groups
        self._history = [r.history for r in recs]
        self._last_seq = [r.last_seq for r in recs]
        self._last_epoch = [r.last_epoch for r in recs]
        self._durable_seq = list(self._last_seq)
        self._snapshot: list[SnapshotPosition | None] = [r.snapshot for r in recs]
        self._next_number = sv.next_number
        self._segments: list[str] = list(sv.segments)
        self._coverage: dict[str, Coverage] = {name: dict(cover) for name, cover in sv.coverage}
        self._active: dict[int, SnapshotWriter] = {}

    @classmethod
    def open(cls, disk: Disk, groups: int, *,
             segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> tuple[SharedJournal, SharedRecovery]:
        """Recover the shared journal in ``disk`` for a node of ``groups`` groups: remove garbage,
        cut a torn tail, and make what is kept durable. Raises JournalFormatMismatch (a journal
        of format 1, or of another G) and JournalDamaged; on any error the disk is closed."""
        if not 2 <= groups <= MAX_GROUPS:
            raise ValueError(f"a shared journal holds 2 to {MAX_GROUPS} groups, not {groups}")
        started = time.monotonic()
        try:
            require_format(disk, groups)
            sv = survey(disk, groups)
            if sv.written_groups not in (None, groups) or sv.groups > groups:
                raise JournalFormatMismatch(
                    f"the journal in {disk.where} was written by a node with [cluster] groups = "
                    f"{sv.groups}; this node has groups = {groups}. Changing groups is not "
                    f"supported: start the node with the groups it had, or give it a new data-dir (it then "
                    f"fetches its state from its peers)")
            raise_damage(disk, sv)
            prepare(disk, sv.garbage, sv.tail_cut, sv.reserved, sv.segments)
            journal = cls(disk, sv, groups, segment_bytes=segment_bytes)
        except BaseException:
            disk.close()
            raise
        return journal, recovery_of(sv, time.monotonic() - started)

    # -- position, per group --

    @property
    def groups(self) -> int:
        return self._groups

    def history(self, group: int) -> int:
        return self._history[group]

    def last_seq(self, group: int) -> int:
        return self._last_seq[group]

    def last_epoch(self, group: int) -> int:
        return self._last_epoch[group]

    def durable_seq(self, group: int) -> int:
        return self._durable_seq[group]

    @property
    def unsynced(self) -> bool:
        """Some group appended entries that no sync has made durable yet."""
        return self._last_seq != self._durable_seq

    # -- appending --

    def append(self, group: int, entries: Iterable[JournalEntry]) -> None:
        """Write ``entries`` of ``group`` after its last one (not fsynced: see ``sync``)."""
        self.append_groups(((group, entries),))

    def append_groups(self, batch: Iterable[tuple[int, Iterable[JournalEntry]]]) -> None:
        """Write each group's entries after its last one, all in one write where a segment
        allows. Each seq must be its group's previous one plus one: anything else is a bug
        upstream, refused before anything is written."""
        self._check()
        items = [(g, list(es)) for g, es in batch]
        last = {}
        for g, es in items:
            if not 0 <= g < self._groups:
                raise ValueError(f"journal append: group {g}, the journal has groups 0..{self._groups - 1}")
            seq = last.get(g, self._last_seq[g])
            for e in es:
                if e.seq != seq + 1:
                    raise ValueError(f"journal append: group {g}: entry seq {e.seq} does not follow {seq}")
                seq = e.seq
            last[g] = seq
        if not any(es for _, es in items):
            return
        try:
            pending = bytearray()
            current = self._segments[-1] if self._segments else None
            for g, es in items:
                history = self._history[g]
                for e in es:
                    if current is None or self._sizes[current] + len(pending) >= self._segment_bytes:
                        if current is not None and pending:
                            self._write(current, bytes(pending))
                            pending.clear()
                        current = self._roll()
                    pending += encode_group_entry(GroupEntry(g, history, e.seq, e.written_epoch, e.mutations))
                    self._coverage[current][g] = (history, e.seq)
                if es:
                    self._last_seq[g] = es[-1].seq
                    self._last_epoch[g] = es[-1].written_epoch
            self._write(current, bytes(pending))    # type: ignore[arg-type]
        except BaseException as exc:
            self._guard(exc)
            raise

    def _roll(self) -> str:
        number = self._next_number
        self._next_number += 1
        name = segment_name(number)
        self._new_segment(self._segments[-1] if self._segments else None, name,
                          encode_segment_header(SharedSegmentHeader(number, self._groups)))
        self._segments.append(name)
        self._coverage[name] = {}
        return name

    def sync(self) -> tuple[int, ...]:
        """fsync what every group appended, with one fsync (and the directory's, after a roll);
        returns each group's seq now durable."""
        self._check()
        if self._flush(self._segments[-1] if self._segments else None):
            self._durable_seq = list(self._last_seq)
        return tuple(self._durable_seq)

    # -- snapshots, per group --

    def reset(self, group: int, at_seq: int, at_epoch: int, blobs: Iterable[bytes]) -> None:
        """Start ``group``'s next history at (at_seq, at_epoch) holding ``blobs``: its state was
        replaced wholesale, and none of its older entries is ever replayed again. The other
        groups' entries are untouched, and stay as durable as they were. Durable on return; the
        group's next append is at_seq + 1."""
        self._check()
        active = self._active.get(group)
        if active is not None:
            active.abort()
        try:
            history = self._history[group] + 1
            writer = self._begin(group, history, at_seq, at_epoch)
            for blob in blobs:
                writer.add(blob)
            self._complete(writer, at_seq)
            self._history[group] = history
            self._last_seq[group] = self._durable_seq[group] = at_seq
            self._last_epoch[group] = at_epoch
            self._compact()
        except BaseException as exc:
            self._guard(exc)
            raise

    def begin_snapshot(self, group: int, at_seq: int, at_epoch: int) -> SnapshotWriter:
        """Start a snapshot of ``group``'s state at its position (at_seq, at_epoch), fuzzy as
        ``Journal.begin_snapshot``'s. One at a time per group; groups may snapshot at once."""
        self._check()
        if group in self._active:
            raise RuntimeError(f"a snapshot of group {group} is already in progress")
        snap = self._snapshot[group]
        if snap is not None and snap.history == self._history[group] and at_seq < snap.at_seq:
            raise ValueError(f"group {group}: snapshot at {at_seq} is older than the current one at {snap.at_seq}")
        try:
            writer = self._active[group] = self._begin(group, self._history[group], at_seq, at_epoch)
        except BaseException as exc:
            self._guard(exc)
            raise
        return writer

    def _begin(self, group: int, history: int, at_seq: int, at_epoch: int) -> SnapshotWriter:
        counter = self._next_counter
        self._next_counter += 1
        header = SnapshotHeader(history, at_seq, at_epoch, counter)
        return self._begin_file(SnapshotWriter(self, header, snapshot_name(group, counter),
                                               encode_snapshot_header(group, header), group))

    def _finish(self, writer: SnapshotWriter, end_seq: int) -> SnapshotStats:
        self._check()
        if writer.done or writer is not self._active.get(writer.group):
            raise SnapshotAborted("the snapshot was aborted (or a reset started a new history)")
        check_end(writer, end_seq, self._durable_seq[writer.group])
        try:
            stats = self._complete(writer, end_seq)
            del self._active[writer.group]
            self._compact()
        except BaseException as exc:
            self._guard(exc)
            raise
        return stats

    def _complete(self, writer: SnapshotWriter, end_seq: int) -> SnapshotStats:
        g = writer.group
        old = self._snapshot[g]
        stats = self._seal(writer, end_seq)
        h = writer.header
        self._snapshot[g] = SnapshotPosition(h.counter, h.history, h.at_seq, h.at_epoch, end_seq)
        if old is not None:
            self._remove(snapshot_name(g, old.counter))
        return stats

    def _compact(self) -> None:
        """Remove the segments (not the current one) whose every entry is covered."""
        for name in self._segments[:-1]:
            if all(self._covered(g, history, seq) for g, (history, seq) in self._coverage[name].items()):
                self._segments.remove(name)
                del self._coverage[name]
                self._remove(name)

    def _covered(self, group: int, history: int, seq: int) -> bool:
        if history < self._history[group]:
            return True
        snap = self._snapshot[group]
        return snap is not None and snap.history == history and seq <= snap.at_seq

    def _drop_active(self, writer: SnapshotWriter) -> None:
        if self._active.get(writer.group) is writer:
            del self._active[writer.group]

    # -- the rest --

    def stats(self) -> SharedJournalStats:
        """Safe to call from another thread than the one writing (plain reads of counters)."""
        positions = tuple(
            GroupPosition(g, self._history[g], self._last_seq[g], self._durable_seq[g],
                          None if self._snapshot[g] is None else self._snapshot[g].at_seq)   # type: ignore[union-attr]
            for g in range(self._groups))
        return SharedJournalStats(positions, self._bytes, len(self._segments), self._fsyncs, self._fsync_total_s,
                                  self._fsync_last_s, self._last_snapshot)

    def close(self) -> None:
        """Sync what was appended (unless an I/O error stopped the journal), then release the
        directory."""
        self._close_files(list(self._active.values()), self._segments[-1] if self._segments else None)


def _journal_file(name: str) -> bool:
    if name.endswith(TEMP_SUFFIX):
        return False
    return parse_segment_name(name) is not None or parse_snapshot_name(name) is not None

