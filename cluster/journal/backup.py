"""Operators' ``backup`` (a consistent copy of a live node's journal) and ``restore`` (a fresh
journal from such a copy).

Copying a live journal directory with ``cp`` is not safe as is: compaction removes the segments
a new snapshot covers and the older snapshot, and a state transfer replaces every file, so a
copy taken file by file can hold an old snapshot without the segments after it. ``backup`` reads
the files without taking the node's lock, and starts again when one of the files it listed has
gone (the node compacted meanwhile); the copy then passes ``check`` or is taken again.

Why the copy holds everything acknowledged before it began: with ``fsync = always`` an entry is
on disk before its client is answered, and every file is read after the listing. A segment is
synced before the next one is created (journal.py), so only the last segment listed can still
be growing; it is copied up to its last complete record. Temporary files (a snapshot being
written) are left out, and so are a segment's reserved zeros.

``restore`` writes the backup's state into an empty journal directory as one snapshot (the
backup's snapshot blobs, then its entries' mutations, in order: what recovery would apply) at
the backup's last seq and epoch 0. Epoch 0 matters to a cluster restored from it: its members'
Raft state is new, so their terms start again from 1, and a log position from the old epochs
would otherwise rank above every entry the new cluster writes (sync.py orders positions by
(last_epoch, last_seq)).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cluster.journal.disk import LOCK_NAME, OsDisk
from cluster.journal.format import HEADER_SIZE, TEMP_SUFFIX, parse_segment_name, scan
from cluster.journal.journal import Journal
from cluster.journal.recovery import raise_damage, survey
from cluster.journal.shared_recovery import journal_format
from cluster.journal.tools import Report, check

ATTEMPTS = 5


class BackupFailed(RuntimeError):
    """No consistent copy after ``ATTEMPTS`` tries, or the source journal is damaged."""


@dataclass(frozen=True, slots=True)
class Backup:
    report: Report          # ``check`` of the copy
    attempts: int           # 1 unless compaction removed a listed file during a copy


def backup(src: str | os.PathLike[str], dest: str | os.PathLike[str], *, attempts: int = ATTEMPTS) -> Backup:
    """Copy the journal in ``src`` (a node may be running on it) to ``dest``, which must not exist
    or be empty, and check the copy."""
    src = os.fspath(src)
    if not os.path.isdir(src):
        raise FileNotFoundError(f"no such journal directory: {src}")
    if journal_format(os.listdir(src)) == 2:
        raise BackupFailed(f"{src} holds a shared journal (a node with [cluster] groups >= 2): backup copies "
                           f"a journal of groups = 1 only")
    with OsDisk(dest) as disk:
        if disk.list():
            raise FileExistsError(f"{disk.where} is not empty: give a new directory for the backup")
        why = ""
        for attempt in range(1, attempts + 1):
            for name in disk.list():
                disk.remove(name)
            try:
                _copy(src, disk)
            except FileNotFoundError as e:
                why = f"{e.filename} was removed while it was copied (the node compacted)"
                continue
            sv = survey(disk)
            if sv.damage is None:
                disk.sync_dir()
                break
            why = f"{sv.damage.file} at offset {sv.damage.offset}: {sv.damage.why}"
        else:
            raise BackupFailed(f"no consistent copy of {src} in {attempts} attempts; the last problem: {why}")
    report = check(dest)
    return Backup(report, attempt)


def _copy(src: str, disk: OsDisk) -> None:
    names = sorted(n for n in os.listdir(src) if n != LOCK_NAME and not n.endswith(TEMP_SUFFIX))
    for name in names:
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        if parse_segment_name(name) is not None and len(data) >= HEADER_SIZE:
            data = data[:scan(data, HEADER_SIZE).end]     # complete records only, no reserved zeros
        disk.write_new(name, data)
        disk.sync(name)
        disk.release(name)


def restore(backup_dir: str | os.PathLike[str], dest: str | os.PathLike[str]) -> Report:
    """Write the state held by the backup in ``backup_dir`` into ``dest``, a journal directory
    that must not exist or be empty, as one snapshot at epoch 0; ``check`` of the result."""
    with OsDisk(backup_dir, create=False) as src:
        sv = survey(src)
        raise_damage(src, sv)
        blobs = list(sv.blobs) + [e.mutations for e in sv.entries]
        last_seq = sv.last_seq
    with OsDisk(dest) as disk:
        if disk.list():
            raise FileExistsError(f"{disk.where} is not empty: restore into a new data-dir")
        journal, _ = Journal.open(disk)
        journal.reset(last_seq, 0, blobs)
        journal.close()
    return check(dest)
