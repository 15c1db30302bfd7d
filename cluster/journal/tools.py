"""Operators' tools over a journal directory: ``check`` (look) and ``truncate`` (drop the damage).

Both take the directory's lock, so they refuse (``JournalLocked``) while a node runs on it.
Entries before damage were fsynced, so the node may have acknowledged them: ``truncate`` leaves
``DROPPED_MARKER`` behind when it drops any, and the node restarts amnesiac (it counts in no
master-change majority until a serving master has brought it up to date). A torn tail was never
fsynced, so never acknowledged: cutting it alone leaves no marker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, TypeVar

from cluster.journal.disk import Disk, OsDisk
from cluster.journal.format import (
    DROPPED_MARKER, HEADER_SIZE, Damaged, FormatError, SegmentHeader, decode_entry, decode_header, scan,
)
from cluster.journal.recovery import Cut, FileInfo, Problem, Repair, SnapshotPosition, Survey, survey
from cluster.journal.shared_recovery import journal_format

if TYPE_CHECKING:
    from cluster.journal.shared_tools import SharedReport

S = TypeVar("S")

# A repair can uncover a second problem (rarely: damage in a file that the first cut kept);
# each round drops strictly more, and this bounds the rounds.
_MAX_ROUNDS = 8


@dataclass(frozen=True, slots=True)
class Dropped:
    what: str                       # for people
    from_seq: int | None            # the first entry seq dropped, where known
    to_seq: int | None              # the highest entry seq found in what was dropped, if any
    files_removed: tuple[str, ...]
    cut: Cut | None
    bytes: int
    everything: bool                # the journal was emptied: the node fetches all from its peers
    applied: bool                   # False for a dry run


@dataclass(frozen=True, slots=True)
class Report:
    path: str
    files: tuple[FileInfo, ...]
    histories: tuple[int, ...]      # every history with a file present
    history: int                    # the current one
    snapshot: SnapshotPosition | None
    entries: int                    # replayed after the snapshot
    first_seq: int | None
    last_seq: int
    bytes: int
    problem: Problem | None         # the damage that stops recovery, else a torn tail (open cuts it)
    dropped: Dropped | None         # what truncate dropped (or would drop)
    entries_dropped: bool           # DROPPED_MARKER is there: the node restarts amnesiac

    @property
    def damaged(self) -> bool:
        return self.problem is not None and self.problem.kind != "torn"


def check(path: str | os.PathLike[str]) -> Report | SharedReport:
    """What the journal in ``path`` holds and the first problem in it. Changes nothing."""
    with OsDisk(path, create=False) as disk:
        if journal_format(disk.list()) == 2:
            return _shared_tools().check(disk)
        return _report(disk, survey(disk), None)


def truncate(path: str | os.PathLike[str], *, apply: bool = True) -> Report | SharedReport:
    """Drop everything from the first damage on (the damaged segment is cut at the damage, the
    later segments of its history removed; when that leaves the snapshot without the entries it
    needs, everything goes), and a torn tail. The report describes the journal afterwards and
    what was dropped; with ``apply=False``, what would be. Dropping damage (not only a torn
    tail) first writes ``DROPPED_MARKER``, durably, so that no crash leaves entries gone
    without it."""
    with OsDisk(path, create=False) as disk:
        if journal_format(disk.list()) == 2:
            return _shared_tools().truncate(disk, apply=apply)
        sv, dropped = rounds(disk, survey(disk), survey, _drop, apply)
        return _report(disk, sv, dropped)


def rounds(disk: Disk, sv: S, read: Callable[[Disk], S], drop: Callable[[Disk, S, bool], Dropped | None],
           apply: bool) -> tuple[S, Dropped | None]:
    """Repair the survey ``sv`` of ``disk`` with ``drop`` (None: nothing left to drop) and read
    it again (``read``) until nothing is left; a dry run (``apply`` False) stops after one."""
    parts: list[Dropped] = []
    for _ in range(_MAX_ROUNDS):
        step = drop(disk, sv, apply)
        if step is None:
            break
        parts.append(step)
        if not apply:
            break
        sv = read(disk)
    return sv, merge(parts)


def _drop(disk: Disk, sv: Survey, apply: bool) -> Dropped | None:
    if sv.damage is not None and sv.repair is not None:
        if apply:
            mark_dropped(disk, sv.damage)
        return plan(disk, sv.repair, apply)
    if sv.damage is None and sv.tail_cut is not None:
        return plan(disk, Repair(sv.tail_cut, (), sv.last_seq + 1, False), apply)
    return None


def _shared_tools():
    # shared_tools builds on this module's repairs: imported when first used, not at import
    from cluster.journal import shared_tools
    return shared_tools


def mark_dropped(disk: Disk, damage: Problem) -> None:
    if DROPPED_MARKER in disk.list():
        return
    note = (f"journal truncate dropped entries from the damage in {damage.file} at offset {damage.offset} "
            f"({damage.why}) on. The node may have acknowledged them: it restarts amnesiac, and removes "
            f"this file once a serving master has brought it up to date.\n")
    disk.write_new(DROPPED_MARKER, note.encode())
    disk.sync(DROPPED_MARKER)
    disk.sync_dir()


def plan(disk: Disk, repair: Repair, apply: bool) -> Dropped:
    cut = repair.cut
    sizes = {n: disk.size(n) for n in repair.remove}
    seqs = [_max_seq(disk.read(n), None) for n in repair.remove]
    if cut is not None:
        seqs.append(_max_seq(disk.read(cut.file), cut.offset))
    found = [s for s in seqs if s is not None]
    if repair.everything:
        what = f"everything: {len(repair.remove)} files (the damage left no usable snapshot base)"
    else:
        what = "; ".join(([cut.describe()] if cut else []) + [f"removed {n}" for n in repair.remove])
    if apply:
        if cut is not None:
            if cut.remove:
                disk.remove(cut.file)
            else:
                disk.truncate(cut.file, cut.offset)
                disk.sync(cut.file)
        for name in repair.remove:
            disk.remove(name)
        disk.sync_dir()
    return Dropped(what, repair.from_seq, max(found) if found else None, repair.remove, cut,
                   sum(sizes.values()) + (cut.dropped_bytes if cut else 0), repair.everything, apply)


def _max_seq(data: bytes, start: int | None) -> int | None:
    """The highest entry seq readable in a segment's data from ``start`` (None: after its
    header), hopping over damage: for the report of what was dropped."""
    if start is None:
        try:
            if not isinstance(decode_header(data), SegmentHeader):
                return None
        except FormatError:
            return None
        start = HEADER_SIZE
    best = None
    while True:
        s = scan(data, start)
        for rec in s.records:
            try:
                seq = decode_entry(rec.payload).seq
            except FormatError:
                continue
            best = seq if best is None else max(best, seq)
        if not isinstance(s.problem, Damaged):
            return best
        start = s.problem.next_valid


def merge(parts: list[Dropped]) -> Dropped | None:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    froms = [p.from_seq for p in parts if p.from_seq is not None]
    tos = [p.to_seq for p in parts if p.to_seq is not None]
    return Dropped("; ".join(p.what for p in parts), min(froms) if froms else None, max(tos) if tos else None,
                   tuple(n for p in parts for n in p.files_removed), parts[0].cut,
                   sum(p.bytes for p in parts), any(p.everything for p in parts), parts[0].applied)


def _report(disk: Disk, sv: Survey, dropped: Dropped | None) -> Report:
    histories = sorted({f.history for f in sv.files if f.history is not None})
    problem = sv.damage
    if problem is None and sv.tail_cut is not None:
        c = sv.tail_cut
        problem = Problem(c.file, c.offset, "torn", f"torn tail: {c.dropped_bytes} bytes (opening the journal cuts it)")
    return Report(disk.where, sv.files, tuple(histories), sv.history, sv.snapshot, len(sv.entries),
                  sv.first_seq, sv.last_seq, sum(f.size for f in sv.files), problem, dropped, sv.entries_dropped)
