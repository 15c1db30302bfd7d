"""``journal check`` and ``journal truncate`` over a shared journal (format 2, groups >= 2).

tools.py sends a directory holding a shared journal here. What truncate drops:

* damage to the bytes of a shared segment: the segment is cut at the damage and the later
  segments go, every group's entries in them with them (as format 1's truncate);
* damage of one group (its newest snapshot bad, a gap in its seqs, entries of a history no
  snapshot starts, or a snapshot without the entries it needs): that group restarts empty, in a
  history of its own (an empty snapshot at seq 0). Its entries stay in the shared segments
  beside the other groups' and are never replayed again; the other groups keep everything.

Either leaves the node-wide ``DROPPED_MARKER``: the node restarts amnesiac, and every group it
holds is brought up to date by its serving master.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster.journal.disk import Disk
from cluster.journal.format import TEMP_SUFFIX, SnapshotHeader, encode_snapshot_end
from cluster.journal.recovery import FileInfo, Problem, Repair, SnapshotPosition
from cluster.journal.shared_format import encode_snapshot_header, parse_snapshot_name, snapshot_name
from cluster.journal.shared_recovery import SharedSurvey, survey
from cluster.journal.tools import Dropped, mark_dropped, merge, plan, rounds


@dataclass(frozen=True, slots=True)
class GroupReport:
    group: int
    history: int
    snapshot: SnapshotPosition | None
    entries: int                    # replayed after the snapshot
    first_seq: int | None
    last_seq: int
    problem: Problem | None


@dataclass(frozen=True, slots=True)
class SharedReport:
    path: str
    files: tuple[FileInfo, ...]
    groups: tuple[GroupReport, ...]
    bytes: int
    problem: Problem | None         # the damage that stops recovery, else a torn tail (open cuts it)
    dropped: Dropped | None
    entries_dropped: bool

    @property
    def damaged(self) -> bool:
        return self.problem is not None and self.problem.kind != "torn"

    @property
    def last_seq(self) -> int:
        """The highest seq of any group (for a line that names one position)."""
        return max((g.last_seq for g in self.groups), default=0)


def check(disk: Disk) -> SharedReport:
    return _report(disk, survey(disk), None)


def truncate(disk: Disk, *, apply: bool = True) -> SharedReport:
    """tools.truncate for a shared journal: the module's docstring says what goes."""
    sv, dropped = rounds(disk, survey(disk), survey, _drop, apply)
    return _report(disk, sv, dropped)


def _drop(disk: Disk, sv: SharedSurvey, apply: bool) -> Dropped | None:
    problem = sv.problem
    if problem is not None and sv.repair is not None:
        if apply:
            mark_dropped(disk, problem)
        return _repair(disk, sv, apply)
    if problem is None and sv.tail_cut is not None:
        return plan(disk, Repair(sv.tail_cut, (), None, False), apply)
    return None


def _repair(disk: Disk, sv: SharedSurvey, apply: bool) -> Dropped:
    repair = sv.repair
    assert repair is not None
    parts = []
    if repair.cut is not None or repair.remove:
        parts.append(plan(disk, Repair(repair.cut, repair.remove, None, False), apply))
    resets = [r for r in sv.recoveries if r.group in repair.reset_groups]
    for i, r in enumerate(resets):
        if apply:
            _restart_empty(disk, r.group, r.max_history + 1, sv.next_counter + i)
        parts.append(Dropped(f"group {r.group} restarts empty in history {r.max_history + 1} ({len(r.entries)} "
                             f"entries{'' if r.snapshot is None else ' and its snapshot'} dropped)",
                             None, None, (), None, 0, False, apply))
    merged = merge(parts)
    assert merged is not None
    everything = len(resets) == sv.groups
    return Dropped(merged.what, None, None, merged.files_removed, merged.cut, merged.bytes, everything, apply)


def _restart_empty(disk: Disk, group: int, history: int, counter: int) -> None:
    """An empty snapshot of ``group`` at seq 0 starting ``history``: the group's older files are
    never read again, and its old snapshots go."""
    name = snapshot_name(group, counter)
    old = [n for n in disk.list() if not n.endswith(TEMP_SUFFIX) and (parse_snapshot_name(n) or (-1,))[0] == group]
    disk.write_new(name + TEMP_SUFFIX, encode_snapshot_header(group, SnapshotHeader(history, 0, 0, counter))
                   + encode_snapshot_end(0, 0))
    disk.sync(name + TEMP_SUFFIX)
    disk.rename(name + TEMP_SUFFIX, name)
    disk.sync_dir()
    for n in old:
        disk.remove(n)
    disk.sync_dir()


def _report(disk: Disk, sv: SharedSurvey, dropped: Dropped | None) -> SharedReport:
    groups = tuple(GroupReport(r.group, r.history, r.snapshot, len(r.entries), r.first_seq, r.last_seq, r.damage)
                   for r in sv.recoveries)
    problem = sv.problem
    if problem is None and sv.tail_cut is not None:
        c = sv.tail_cut
        problem = Problem(c.file, c.offset, "torn", f"torn tail: {c.dropped_bytes} bytes (opening the journal cuts it)")
    return SharedReport(disk.where, sv.files, groups, sum(f.size for f in sv.files), problem, dropped,
                        sv.entries_dropped)
