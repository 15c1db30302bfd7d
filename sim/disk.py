"""A simulated data-dir: the journal's ``Disk`` protocol (cluster/journal/disk.py) in memory,
with the crash semantics that protocol allows, drawn from the seed.

Files are inodes; the directory maps names to them. Each inode has its *durable* bytes (what
the last ``sync(name)`` covered) and its current bytes (the page cache: what a reader sees).
The directory has a *durable* mapping (as of the last ``sync_dir``) and the list of the
creations, renames and removals made since.

* A **process crash** (kill -9, ``crash(rng, "process")``) keeps everything written: the page
  cache belongs to the kernel, which outlives the process. Nothing is lost, nothing becomes
  durable either.
* A **power cut** (``crash(rng, "power")``) keeps, per inode, its durable bytes plus a random
  prefix of what was appended since (none of it, all of it, or a cut at a random byte: a torn
  record; rarely, the kept prefix is followed by zero bytes, as when a file system extended the
  file before its data reached the disk). A truncation since the last sync is kept or undone.
  The directory keeps its durable mapping plus the operations since ``sync_dir``: a random
  prefix of them (a file system that journals its metadata in order, the common case), or,
  sometimes, a random subset (each one kept or undone alone, in order, skipping one whose
  source is gone). Afterwards everything on the disk is durable.

Errors are ``JournalIOError``, as with ``OsDisk``. ``stats`` counts syncs and bytes.
"""

from __future__ import annotations

import errno
import logging
import random
from dataclasses import dataclass, field

from cluster.journal.disk import JournalIOError

PROCESS = "process"
POWER = "power"
WHERE = "sim"                   # every simulated disk's ``where`` starts so


class _QuietSimulatedDisks(logging.Filter):
    """The journal warns its operator of each torn tail it cuts at recovery. Simulated power cuts
    tear thousands of them in a sweep, each counted in the run's stats (``torn_tails``) and
    recorded in the node's ``started`` line, so for simulated disks the warning only buried the
    sweep's progress (and any real error) in stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        where = record.args[0] if isinstance(record.args, tuple) and record.args else None
        return not (isinstance(where, str) and (where == WHERE or where.startswith(WHERE + "/")))


logging.getLogger("cluster.journal.journal").addFilter(_QuietSimulatedDisks())


@dataclass(eq=False)
class _Inode:
    data: bytearray = field(default_factory=bytearray)   # what a reader sees now
    durable: bytes = b""                                  # what the last sync covered


class SimDisk:
    """One node's journal directory, in memory. Deterministic: every random choice comes from
    the ``rng`` given to ``crash``."""

    def __init__(self, where: str = WHERE) -> None:
        self.where = where
        self._dir: dict[str, _Inode] = {}
        self._durable_dir: dict[str, _Inode] = {}
        # since the last sync_dir: ("link", name, inode) | ("unlink", name) | ("rename", src, dst, inode)
        self._ops: list[tuple] = []
        self.syncs = 0
        self.dir_syncs = 0
        self.bytes_written = 0
        self.crashes: list[str] = []         # what each power cut did, for a failing seed's reader

    # --- the Disk protocol ------------------------------------------------------------------------

    def _get(self, name: str, what: str) -> _Inode:
        ino = self._dir.get(name)
        if ino is None:
            raise JournalIOError(errno.ENOENT, f"cannot {what}: No such file or directory", f"{self.where}/{name}")
        return ino

    def list(self) -> list[str]:
        return sorted(self._dir)

    def read(self, name: str) -> bytes:
        return bytes(self._get(name, "read").data)

    def size(self, name: str) -> int:
        return len(self._get(name, "stat").data)

    def _link(self, name: str, ino: _Inode) -> None:
        self._dir[name] = ino
        self._ops.append(("link", name, ino))

    def _unlink(self, name: str) -> None:
        del self._dir[name]
        self._ops.append(("unlink", name))

    def write_new(self, name: str, data: bytes, reserve: int = 0) -> None:
        # ``reserve`` is a hint (cluster/journal/disk.py): nothing is reserved here
        if name in self._dir:
            raise JournalIOError(errno.EEXIST, "cannot create: File exists", f"{self.where}/{name}")
        ino = _Inode(bytearray(data))
        self._link(name, ino)
        self.bytes_written += len(data)

    def append(self, name: str, data: bytes) -> None:
        ino = self._dir.get(name)
        if ino is None:
            ino = _Inode()
            self._link(name, ino)
        ino.data += data
        self.bytes_written += len(data)

    def sync(self, name: str) -> None:
        ino = self._get(name, "fsync")
        ino.durable = bytes(ino.data)
        self.syncs += 1

    def sync_dir(self) -> None:
        self._durable_dir = dict(self._dir)
        self._ops.clear()
        self.dir_syncs += 1

    def rename(self, src: str, dst: str) -> None:
        ino = self._get(src, f"rename to {dst}")
        del self._dir[src]
        self._dir[dst] = ino
        self._ops.append(("rename", src, dst, ino))

    def remove(self, name: str) -> None:
        if name in self._dir:
            self._unlink(name)

    def truncate(self, name: str, size: int) -> None:
        ino = self._get(name, f"truncate to {size} bytes")
        del ino.data[size:]

    def release(self, name: str) -> None:
        pass

    def close(self) -> None:
        pass

    # --- crashes ---------------------------------------------------------------------------------

    @property
    def unsynced(self) -> bool:
        """Something a power cut could lose: unsynced bytes or directory operations."""
        return bool(self._ops) or any(bytes(i.data) != i.durable for i in self._dir.values())

    def crash(self, rng: random.Random, mode: str, keep_unsynced: bool = True) -> str:
        """The disk as the next process finds it after a crash of ``mode`` (PROCESS or POWER);
        returns what the cut did, in words. ``keep_unsynced`` False: a power cut keeps nothing
        that was not synced (one of its random outcomes, chosen: the "race" rare path's cuts)."""
        if mode == PROCESS:
            return "process crash: the page cache survives"
        if mode != POWER:
            raise ValueError(mode)
        notes: list[str] = []
        # the directory: its durable mapping, then some of the operations made since
        names = dict(self._durable_dir)
        ops = self._ops
        if ops:
            if not keep_unsynced:
                keep = [False] * len(ops)
                how = "none"
            elif rng.random() < 0.75:
                keep = [True] * rng.randint(0, len(ops))
                keep += [False] * (len(ops) - len(keep))
                how = "prefix"
            else:
                keep = [rng.random() < 0.5 for _ in ops]
                how = "subset"
            for op, kept in zip(ops, keep):
                if not kept:
                    continue
                if op[0] == "link":
                    names[op[1]] = op[2]
                elif op[0] == "unlink":
                    names.pop(op[1], None)
                elif names.get(op[1]) is op[3]:      # a rename is atomic: all of it or none
                    del names[op[1]]
                    names[op[2]] = op[3]
            notes.append(f"dir: {sum(keep)} of {len(ops)} operations kept ({how})")
        # each file: its durable bytes, and a random prefix of what came after them
        seen: set[int] = set()
        for name in sorted(names):
            ino = names[name]
            if id(ino) in seen:      # linked twice (a subset kept a rename's target and its source)
                continue
            seen.add(id(ino))
            data, durable = bytes(ino.data), ino.durable
            if data == durable:
                continue
            if not data.startswith(durable):
                # truncated (and maybe appended to) since its last sync: the truncation is kept or not
                if not keep_unsynced or rng.random() < 0.5:
                    data = durable
                    notes.append(f"{name}: truncation undone")
                    ino.data = bytearray(data)
                    continue
                common = 0
                while common < min(len(data), len(durable)) and data[common] == durable[common]:
                    common += 1
                durable = data[:common]
            extra = len(data) - len(durable)
            r = rng.random() if keep_unsynced else 0.0
            if r < 0.3:
                keep_n = 0
            elif r < 0.6:
                keep_n = extra
            else:
                keep_n = rng.randint(0, extra)
            kept = data[:len(durable) + keep_n]
            if keep_n < extra and keep_unsynced and rng.random() < 0.1:
                kept += bytes(rng.randint(1, extra - keep_n))     # allocated, never written
                notes.append(f"{name}: {keep_n} of {extra} unsynced bytes kept, then zeros")
            else:
                notes.append(f"{name}: {keep_n} of {extra} unsynced bytes kept")
            ino.data = bytearray(kept)
        for ino in names.values():
            ino.durable = bytes(ino.data)
        self._dir = dict(sorted(names.items()))
        self._durable_dir = dict(self._dir)
        self._ops = []
        what = "power cut: " + ("; ".join(notes) if notes else "nothing unsynced")
        self.crashes.append(what)
        return what

    def cut_exactly(self, dir_ops_kept: int, unsynced_kept: dict[str, int]) -> None:
        """A power cut chosen by hand (tests, minimised failures): the first ``dir_ops_kept``
        directory operations since ``sync_dir`` are kept, and of each file appended to since its
        sync, ``unsynced_kept[name]`` of the unsynced bytes (default: none)."""
        names = dict(self._durable_dir)
        for op in self._ops[:dir_ops_kept]:
            if op[0] == "link":
                names[op[1]] = op[2]
            elif op[0] == "unlink":
                names.pop(op[1], None)
            elif names.get(op[1]) is op[3]:
                del names[op[1]]
                names[op[2]] = op[3]
        for name, ino in names.items():
            if bytes(ino.data).startswith(ino.durable):
                ino.data = bytearray(ino.data[:len(ino.durable) + unsynced_kept.get(name, 0)])
            else:
                ino.data = bytearray(ino.durable)
            ino.durable = bytes(ino.data)
        self._dir = dict(sorted(names.items()))
        self._durable_dir = dict(self._dir)
        self._ops = []

    # --- for tests and failing seeds ------------------------------------------------------------------

    def durable_view(self) -> dict[str, bytes]:
        """The files and bytes a power cut that keeps nothing unsynced would leave."""
        return {n: i.durable for n, i in sorted(self._durable_dir.items())}
