"""The journal's logic over a ``Disk``: appends, syncs, snapshots, resets and compaction.

Synchronous and single-threaded (``writer.py`` runs it on a thread of its own). The files:

* segments ``h<history>-<first_seq>.seg``: entries of one history, seqs consecutive across them;
  a new one starts once the current one holds ``segment_bytes``;
* snapshots ``snap-<counter>.snap``: a position (history, at_seq, at_epoch), opaque blobs, and an
  end record naming end_seq; written as ``.tmp``, fsynced, renamed, and the directory fsynced.
  Once one is complete, the segments it covers and the older snapshots are removed.

Recovery (``recovery.py``) reads them back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Iterable, Sequence

from cluster.journal.disk import Disk
from cluster.journal.format import (
    DROPPED_MARKER, TEMP_SUFFIX, JournalEntry, SegmentHeader, SnapshotHeader, encode_blob, encode_entry, encode_segment_header,
    encode_snapshot_end, encode_snapshot_header, parse_segment_name, segment_name, snapshot_name,
)
from cluster.journal.recovery import (  # noqa: F401  (recover, Recovery, JournalDamaged: re-exported)
    Cut, JournalDamaged, Recovery, SnapshotPosition, Survey, UnsupportedJournal, file_kind, raise_damage, recover,
    recovery_of, survey,
)

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 << 20


class JournalFailed(RuntimeError):
    """An earlier I/O error stopped the journal (see ``__cause__``). After a failed write or
    fsync the kernel may have dropped the dirty pages and cleared the error, so a later fsync
    could succeed without the data being on disk (PostgreSQL's "fsyncgate"): nothing is claimed
    durable again until the journal is reopened, and recovery reads what really is there."""


class SnapshotAborted(RuntimeError):
    """The snapshot was aborted, or a reset started a new history before it finished."""


# -- the journal ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SnapshotStats:
    counter: int
    at_seq: int
    end_seq: int
    bytes: int
    duration_s: float
    finished_at: float      # time.time()


@dataclass(frozen=True, slots=True)
class JournalStats:
    history: int
    last_seq: int
    durable_seq: int
    bytes_on_disk: int
    segments: int
    fsyncs: int
    fsync_total_s: float
    fsync_last_s: float | None
    last_snapshot: SnapshotStats | None


class JournalFiles:
    """What a journal does with its files, whatever their layout: appends into segments created
    with their space reserved, fsyncs, snapshot files sealed by rename, removals, the
    fail-stop after an I/O error, and the figures. ``Journal`` (one group) and
    ``SharedJournal`` (shared.py, every group of a node) build on it."""

    def __init__(self, disk: Disk, sizes: dict[str, int], *, segment_bytes: int, next_counter: int,
                 entries_dropped: bool):
        self._disk = disk
        self._segment_bytes = segment_bytes
        self._next_counter = next_counter
        self._entries_dropped = entries_dropped
        self._sizes = sizes
        # a running total, because stats() may be read from another thread while _sizes changes
        self._bytes = sum(self._sizes.values())
        self._unsynced: dict[str, None] = {}     # ordered set: files written since their last sync
        self._dir_dirty = False
        self._failed: BaseException | None = None
        self._closed = False
        self._fsyncs = 0
        self._fsync_total_s = 0.0
        self._fsync_last_s: float | None = None
        self._last_snapshot: SnapshotStats | None = None

    @property
    def where(self) -> str:
        return self._disk.where

    def _check(self) -> None:
        if self._failed is not None:
            raise JournalFailed(f"the journal in {self._disk.where} stopped after an I/O error: "
                                f"{self._failed}") from self._failed
        if self._closed:
            raise JournalFailed(f"the journal in {self._disk.where} is closed")

    def _guard(self, exc: BaseException) -> None:
        if isinstance(exc, OSError):
            self._failed = exc

    def _write(self, name: str, data: bytes) -> None:
        self._disk.append(name, data)
        self._sizes[name] += len(data)
        self._bytes += len(data)
        self._unsynced[name] = None

    def _new_segment(self, prev: str | None, name: str, header: bytes) -> None:
        """Close the current segment ``prev`` and create ``name`` after it, holding ``header``."""
        # The segment before must be on disk, directory entry included, before the next one can
        # exist: otherwise a power cut could keep the new file and tear the old one's tail, a
        # torn segment that is not the last, which recovery must refuse (the simulator's power
        # cuts reach this; the mutant journal-roll-unsynced skips the sync).
        if prev is not None:
            # the space reserved past its data goes back (a truncation: durable once synced)
            self._disk.truncate(prev, self._sizes[prev])
            self._disk.sync(prev)
            self._disk.release(prev)
            self._unsynced.pop(prev, None)
            if self._dir_dirty:
                self._disk.sync_dir()
                self._dir_dirty = False
        # The segment's whole size is reserved at once: an fdatasync after an append that
        # grows a file must also commit its new size (a filesystem journal commit), one into
        # reserved space need not. On ext4 here: 0.17-0.18 ms against 0.10-0.13 ms a sync.
        self._disk.write_new(name, header, reserve=self._segment_bytes)
        self._sizes[name] = len(header)
        self._bytes += len(header)
        self._unsynced[name] = None
        self._dir_dirty = True

    def _flush(self, current: str | None) -> bool:
        """fsync every file written since its last sync (``current``, the segment appended to,
        stays open), and the directory if it changed; False when there was nothing to sync."""
        if not self._unsynced and not self._dir_dirty:
            return False
        started = time.monotonic()
        try:
            for name in list(self._unsynced):
                self._disk.sync(name)
                if name != current:
                    self._disk.release(name)
            if self._dir_dirty:
                self._disk.sync_dir()
        except BaseException as exc:
            self._guard(exc)
            raise
        self._unsynced.clear()
        self._dir_dirty = False
        took = time.monotonic() - started
        self._fsyncs += 1
        self._fsync_total_s += took
        self._fsync_last_s = took
        return True

    # -- snapshot files --

    def _begin_file(self, writer: SnapshotWriter) -> SnapshotWriter:
        """Create ``writer``'s temporary file, holding its header."""
        self._disk.write_new(writer.tmp, writer.head)
        return writer

    def _add(self, writer: SnapshotWriter, blob: bytes) -> int:
        self._check()
        if writer.done:
            raise SnapshotAborted("the snapshot was aborted or finished")
        record = encode_blob(blob)
        try:
            self._disk.append(writer.tmp, record)
        except BaseException as exc:
            self._guard(exc)
            raise
        return len(record)

    def _seal(self, writer: SnapshotWriter, end_seq: int) -> SnapshotStats:
        """Seal the snapshot file: end record, fsync, rename, fsync the directory."""
        end = encode_snapshot_end(writer.blobs, end_seq)
        self._disk.append(writer.tmp, end)
        self._disk.sync(writer.tmp)
        self._disk.rename(writer.tmp, writer.name)
        self._disk.sync_dir()
        writer.done = True      # sealed: no more adds
        h = writer.header
        size = writer.bytes + len(end)
        self._sizes[writer.name] = size
        self._bytes += size
        self._last_snapshot = SnapshotStats(h.counter, h.at_seq, end_seq, size,
                                            time.monotonic() - writer.started, time.time())
        return self._last_snapshot

    def _abort(self, writer: SnapshotWriter) -> None:
        if writer.done:
            return
        writer.done = True
        self._drop_active(writer)
        try:
            self._disk.remove(writer.tmp)
        except OSError as e:
            # only garbage is left behind, which recovery deletes
            log.warning("journal %s: cannot remove %s: %s", self._disk.where, writer.tmp, e)

    def _drop_active(self, writer: SnapshotWriter) -> None:
        """``writer`` is no longer the snapshot in progress."""
        raise NotImplementedError

    def _remove(self, name: str) -> None:
        self._disk.remove(name)
        self._bytes -= self._sizes.pop(name, 0)
        self._unsynced.pop(name, None)

    # -- the marker `journal truncate` leaves --

    def forget_dropped(self) -> None:
        """The node holds again all it may have acknowledged (its core says so only once this
        journal holds it durably): remove ``DROPPED_MARKER``, durably, so that a later restart
        is an ordinary one."""
        self._check()
        if not self._entries_dropped:
            return
        try:
            self._disk.remove(DROPPED_MARKER)
            self._disk.sync_dir()
        except BaseException as exc:
            self._guard(exc)
            raise
        self._entries_dropped = False

    def _close_files(self, active: Iterable[SnapshotWriter], current: str | None) -> None:
        """Abort the snapshots ``active``, sync what was appended (unless an I/O error stopped
        the journal), then release the directory."""
        if self._closed:
            return
        try:
            for writer in list(active):
                writer.abort()
            if self._failed is None:
                if current is not None:
                    # a clean stop leaves no reserved space behind (a crash does: recovery cuts it)
                    self._disk.truncate(current, self._sizes[current])
                    self._unsynced[current] = None
                self.sync()
        finally:
            self._closed = True
            self._disk.close()

    def sync(self) -> object:
        raise NotImplementedError


class Journal(JournalFiles):
    """A node's journal in one directory. Build it with ``Journal.open(disk)``."""

    def __init__(self, disk: Disk, sv: Survey, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES):
        super().__init__(disk, {n: disk.size(n) for n in disk.list() if file_kind(n) in ("segment", "snapshot")},
                         segment_bytes=segment_bytes, next_counter=sv.next_counter,
                         entries_dropped=sv.entries_dropped)
        self._history = sv.history
        self._last_seq = self._durable_seq = sv.last_seq
        self._last_epoch = sv.last_epoch
        self._snapshot = sv.snapshot
        self._segments: list[tuple[int, str]] = [(parse_segment_name(n)[1], n) for n in sv.segments]  # type: ignore[index]
        self._active: SnapshotWriter | None = None

    @classmethod
    def open(cls, disk: Disk, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> tuple[Journal, Recovery]:
        """Recover the journal in ``disk``: remove garbage, cut a torn tail, and make what is kept
        durable. Raises JournalDamaged; on any error the disk is closed."""
        started = time.monotonic()
        try:
            sv = survey(disk)
            raise_damage(disk, sv)
            prepare(disk, sv.garbage, sv.tail_cut, sv.reserved, sv.segments)
            journal = cls(disk, sv, segment_bytes=segment_bytes)
        except BaseException:
            disk.close()
            raise
        return journal, recovery_of(sv, time.monotonic() - started)

    # -- position --

    @property
    def history(self) -> int:
        return self._history

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def last_epoch(self) -> int:
        return self._last_epoch

    @property
    def durable_seq(self) -> int:
        return self._durable_seq

    # -- appending --

    def append(self, entries: Iterable[JournalEntry]) -> None:
        """Write ``entries`` after the last one (not fsynced: see ``sync``). Each seq must be
        the previous one's plus one: anything else is a bug upstream, refused before writing."""
        self._check()
        batch = list(entries)
        seq = self._last_seq
        for e in batch:
            if e.seq != seq + 1:
                raise ValueError(f"journal append: entry seq {e.seq} does not follow {seq}")
            seq = e.seq
        if not batch:
            return
        try:
            pending = bytearray()
            current = self._segments[-1][1] if self._segments else None
            for e in batch:
                if current is None or self._sizes[current] + len(pending) >= self._segment_bytes:
                    if current is not None and pending:
                        self._write(current, bytes(pending))
                        pending.clear()
                    current = self._roll(e.seq)
                pending += encode_entry(e)
            self._write(current, bytes(pending))    # type: ignore[arg-type]
        except BaseException as exc:
            self._guard(exc)
            raise
        self._last_seq = seq
        self._last_epoch = batch[-1].written_epoch

    def _roll(self, first_seq: int) -> str:
        name = segment_name(self._history, first_seq)
        self._new_segment(self._segments[-1][1] if self._segments else None, name,
                          encode_segment_header(SegmentHeader(self._history, first_seq)))
        self._segments.append((first_seq, name))
        return name

    def sync(self) -> int:
        """fsync what was appended; returns the seq now durable."""
        self._check()
        if self._flush(self._segments[-1][1] if self._segments else None):
            self._durable_seq = self._last_seq
        return self._durable_seq

    # -- snapshots --

    def reset(self, at_seq: int, at_epoch: int, blobs: Iterable[bytes]) -> None:
        """Start a new history at (at_seq, at_epoch) holding ``blobs``: the state was replaced
        wholesale, and no entry of the old history is ever replayed again. Durable on return;
        the next append is at_seq + 1."""
        self._check()
        if self._active is not None:
            self._active.abort()
        try:
            history = self._history + 1
            writer = self._begin(history, at_seq, at_epoch)
            for blob in blobs:
                writer.add(blob)
            self._complete(writer, at_seq)
            old = [n for _, n in self._segments]
            self._history = history
            self._segments = []
            self._unsynced.clear()
            self._dir_dirty = False
            self._last_seq = self._durable_seq = at_seq
            self._last_epoch = at_epoch
            for name in old:
                self._remove(name)
        except BaseException as exc:
            self._guard(exc)
            raise

    def begin_snapshot(self, at_seq: int, at_epoch: int) -> SnapshotWriter:
        """Start a snapshot of the state at journal position (at_seq, at_epoch). It may be fuzzy:
        entries keep being appended while its blobs are added, and ``finish(end_seq)`` names the
        last entry whose effects the blobs may hold."""
        self._check()
        if self._active is not None:
            raise RuntimeError("a snapshot is already in progress")
        if self._snapshot is not None and self._snapshot.history == self._history and at_seq < self._snapshot.at_seq:
            # the segments before the current snapshot's at_seq may be gone already
            raise ValueError(f"snapshot at {at_seq} is older than the current one at {self._snapshot.at_seq}")
        try:
            self._active = self._begin(self._history, at_seq, at_epoch)
        except BaseException as exc:
            self._guard(exc)
            raise
        return self._active

    def _begin(self, history: int, at_seq: int, at_epoch: int) -> SnapshotWriter:
        counter = self._next_counter
        self._next_counter += 1
        header = SnapshotHeader(history, at_seq, at_epoch, counter)
        name = snapshot_name(counter)
        return self._begin_file(SnapshotWriter(self, header, name, encode_snapshot_header(header)))

    def _finish(self, writer: SnapshotWriter, end_seq: int) -> SnapshotStats:
        self._check()
        if writer.done or writer is not self._active:
            raise SnapshotAborted("the snapshot was aborted (or a reset started a new history)")
        check_end(writer, end_seq, self._durable_seq)
        try:
            stats = self._complete(writer, end_seq)
            self._active = None
            at_seq = writer.header.at_seq
            segs = self._segments
            drop = [name for i, (_, name) in enumerate(segs) if i + 1 < len(segs) and segs[i + 1][0] <= at_seq + 1]
            self._segments = [s for s in segs if s[1] not in drop]
            for name in drop:
                self._remove(name)
        except BaseException as exc:
            self._guard(exc)
            raise
        return stats

    def _complete(self, writer: SnapshotWriter, end_seq: int) -> SnapshotStats:
        old = self._snapshot
        stats = self._seal(writer, end_seq)
        h = writer.header
        self._snapshot = SnapshotPosition(h.counter, h.history, h.at_seq, h.at_epoch, end_seq)
        if old is not None:
            self._remove(snapshot_name(old.counter))
        return stats

    def _drop_active(self, writer: SnapshotWriter) -> None:
        if self._active is writer:
            self._active = None

    # -- the rest --

    def stats(self) -> JournalStats:
        """Safe to call from another thread than the one writing (plain reads of counters)."""
        return JournalStats(self._history, self._last_seq, self._durable_seq, self._bytes,
                            len(self._segments), self._fsyncs, self._fsync_total_s, self._fsync_last_s,
                            self._last_snapshot)

    def close(self) -> None:
        """Sync what was appended (unless an I/O error stopped the journal), then release the
        directory."""
        self._close_files([] if self._active is None else [self._active],
                          self._segments[-1][1] if self._segments else None)


def prepare(disk: Disk, garbage: Iterable[str], cut: Cut | None, reserved: Iterable[tuple[str, int]],
            segments: Sequence[str]) -> None:
    """What opening a journal does to its directory before use: remove ``garbage``, cut a torn
    tail, give back the zeros reserved after the segments' data, and make what is kept durable."""
    for name in garbage:
        disk.remove(name)
    if cut is not None:
        log.warning("journal %s: torn tail: %s", disk.where, cut.describe())
        if cut.remove:
            disk.remove(cut.file)
        else:
            disk.truncate(cut.file, cut.offset)
    for name, end in reserved:
        disk.truncate(name, end)    # the zeros reserved after its data: nothing was lost
    # After a process crash (no power loss) the page cache still holds what was never
    # fsynced, and recovery just read it: sync it before anything counts as durable.
    for name in segments:
        disk.sync(name)
    disk.sync_dir()
    for name in segments[:-1]:
        disk.release(name)


def check_end(writer: SnapshotWriter, end_seq: int, durable_seq: int) -> None:
    """Refuse to finish ``writer`` at ``end_seq`` before its at_seq, or past what is durable."""
    if end_seq < writer.header.at_seq:
        raise ValueError(f"end_seq {end_seq} before the snapshot's at_seq {writer.header.at_seq}")
    if end_seq > durable_seq:
        raise ValueError(f"the journal is durable up to {durable_seq} only, the snapshot needs "
                         f"{end_seq}: sync() first")


class SnapshotWriter:
    """One snapshot being written (``Journal.begin_snapshot``), to ``name`` once complete; its
    ``group``'s in a shared journal."""

    def __init__(self, journal: JournalFiles, header: SnapshotHeader, name: str, head: bytes, group: int = 0):
        self.header = header
        self.group = group
        self.name = name
        self.tmp = name + TEMP_SUFFIX
        self.head = head
        self.blobs = 0
        self.bytes = len(head)
        self.done = False            # finished or aborted
        self.started = time.monotonic()
        self._journal = journal

    def add(self, blob: bytes) -> None:
        self.bytes += self._journal._add(self, blob)
        self.blobs += 1

    def finish(self, end_seq: int) -> SnapshotStats:
        """Complete the snapshot and compact the journal. The journal must be durable up to
        ``end_seq`` (``Journal.sync``) so that every entry the blobs may reflect survives."""
        return self._journal._finish(self, end_seq)

    def abort(self) -> None:
        self._journal._abort(self)
