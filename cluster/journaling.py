"""A node's journal bound to its event loop: recovery at start, the writer thread, and the
journal actions of the node cores (Persist, PersistReset, Snapshot, ForgetDropped) carried out.
A member of several replication groups keeps one shared journal (cluster/journal/shared.py) for
all of them: ``open_shared_journal`` recovers every group, and the binding hands each action to
the shared writer with its group.

Both a cluster member (cluster/replicated.py) and a journaled single node
(elasticmq_py/durable.py) use it. Every decision (what to persist, when an ack, an answer or a
snapshot may go) is their cores'; this only translates: the writer thread's "durable up to
token" and its failures come back to the loop as core events.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from storage import Storage
from storage.codec import decode_many

from cluster.compaction import Snapshot
from cluster.config import Durability
from cluster.journal.disk import OsDisk
from cluster.journal.journal import Journal, Recovery
from cluster.journal.shared import SharedJournal
from cluster.journal.shared_recovery import GroupRecovery, JournalFormatMismatch, require_format
from cluster.journal.shared_writer import SharedJournalWriter
from cluster.journal.writer import JournalWriter
from cluster.node_actions import ForgetDropped, Persist, PersistReset
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.replica import MUTATION_TYPES

log = logging.getLogger("cluster.journaling")


class DataDirError(RuntimeError):
    """The data-dir cannot be used (unwritable, locked by another process, damaged)."""


@dataclass(frozen=True, slots=True)
class Recovered:
    storage: Storage
    log: ReplicationLog
    existed: bool            # the journal was there before: not a new (or lost) data-dir
    seconds: float
    entries: int             # replayed after the snapshot
    messages: int
    snapshot_seq: int | None
    truncated: str | None    # a torn tail dropped at start
    entries_dropped: bool    # `journal truncate` dropped fsynced entries (its marker is there)


def rebuild(rec: Recovery | GroupRecovery, new_storage: Callable[[], Storage],
            log_limit_bytes: int) -> tuple[Storage, ReplicationLog]:
    """The state and the log a journal's recovery holds: its snapshot, then every entry after
    the snapshot's position (the simulator rebuilds its nodes with this very function)."""
    storage = new_storage()
    for blob in rec.blobs:
        storage.apply_many(decode_many(blob, expect=MUTATION_TYPES))
    at_seq, at_epoch = (rec.snapshot.at_seq, rec.snapshot.at_epoch) if rec.snapshot is not None else (0, 0)
    rlog = ReplicationLog(log_limit_bytes, last_seq=at_seq, last_epoch=at_epoch, journaled=True)
    for e in rec.entries:
        storage.apply_many(decode_many(e.mutations, expect=MUTATION_TYPES))
        rlog.append(Entry(e.seq, e.written_epoch, e.mutations, 0))
    rlog.drain()          # what was read from the journal needs no writing back
    return storage, rlog


def open_journal(durability: Durability, new_storage: Callable[[], Storage],
                 log_limit_bytes: int) -> tuple[Journal, Recovered]:
    """Lock the data-dir's journal and rebuild the state and the log it holds."""
    started = time.monotonic()
    where = durability.journal_dir
    existed = _existed(where)
    try:
        disk = _disk(where)
        try:
            require_format(disk, 1)     # a shared journal (groups >= 2) is not this node's to read
        except JournalFormatMismatch:
            disk.close()
            raise
        journal, rec = Journal.open(disk)
    except (OSError, RuntimeError, ValueError) as e:
        raise DataDirError(f"data-dir {durability.data_dir}: {e}") from e
    try:
        storage, rlog = rebuild(rec, new_storage, log_limit_bytes)
    except Exception as e:
        # Records whose CRC holds but whose mutations do not decode: refuse, as for damage,
        # and let another process (or `journal check`) have the lock
        journal.close()
        raise DataDirError(f"data-dir {durability.data_dir}: the journal's records do not rebuild a state "
                           f"({type(e).__name__}: {e}); see `elasticmq-py journal check`") from e
    recovered = Recovered(storage, rlog, existed, time.monotonic() - started, len(rec.entries),
                          storage.message_count(), rec.snapshot.at_seq if rec.snapshot is not None else None,
                          rec.truncated, rec.entries_dropped)
    if rec.entries_dropped:
        log.warning("journal %s: `journal truncate` dropped entries this node may have acknowledged: "
                    "a cluster member starts amnesiac until a serving master has brought it up to date", where)
    log.info("journal %s: recovered %d messages (snapshot at seq %s, %d entries replayed, log at seq %d) in %.2f s",
             where, recovered.messages, recovered.snapshot_seq, recovered.entries, rlog.last_seq, recovered.seconds)
    return journal, recovered


def open_shared_journal(durability: Durability, groups: int, new_storage: Callable[[], Storage],
                        log_limit_bytes: int) -> tuple[SharedJournal, tuple[Recovered, ...]]:
    """Lock the data-dir's shared journal and rebuild each group's state and log from it."""
    started = time.monotonic()
    where = durability.journal_dir
    existed = _existed(where)
    try:
        journal, rec = SharedJournal.open(_disk(where), groups)
    except (OSError, RuntimeError, ValueError) as e:
        raise DataDirError(f"data-dir {durability.data_dir}: {e}") from e
    try:
        state = [rebuild(g, new_storage, log_limit_bytes) for g in rec.groups]
    except Exception as e:
        journal.close()
        raise DataDirError(f"data-dir {durability.data_dir}: the journal's records do not rebuild a state "
                           f"({type(e).__name__}: {e}); see `elasticmq-py journal check`") from e
    seconds = time.monotonic() - started
    recovered = tuple(
        Recovered(st, lg, existed, seconds, len(g.entries), st.message_count(),
                  g.snapshot.at_seq if g.snapshot is not None else None, rec.truncated, rec.entries_dropped)
        for (st, lg), g in zip(state, rec.groups))
    log.info("journal %s: recovered %d groups, %d messages, in %.2f s", where, len(recovered),
             sum(r.messages for r in recovered), seconds)
    return journal, recovered


def _existed(where: str) -> bool:
    return os.path.isdir(where) and any(n.endswith((".seg", ".snap")) for n in os.listdir(where))


def _disk(where: str) -> OsDisk:
    os.makedirs(where, exist_ok=True)
    if not os.access(where, os.W_OK | os.X_OK):
        raise PermissionError(f"{where} is not writable")
    return OsDisk(where)


def _ms(v: float | None) -> float | None:
    return round(v, 3) if v is not None else None


class JournalBinding:
    """The writer thread for a loop: ``do`` takes a core's journal action; ``on_persisted(token)``
    and ``on_failed(reason)`` are called on the loop."""

    def __init__(self, journal: Journal | SharedJournal, durability: Durability, loop: asyncio.AbstractEventLoop,
                 on_persisted: Callable[[int], None], on_failed: Callable[[str], None]) -> None:
        self.journal = journal
        self.durability = durability
        self._loop = loop
        self._on_persisted = on_persisted
        self._on_failed = on_failed
        self.failed: str | None = None
        self.shared = isinstance(journal, SharedJournal)
        writer = SharedJournalWriter if self.shared else JournalWriter
        self.writer = writer(journal, durability.fsync, interval_ms=durability.fsync_interval_ms,   # type: ignore[arg-type]
                             on_durable=self._durable, on_error=self._error)

    def do(self, action: Any) -> None:
        if self.failed is not None:
            return
        t = type(action)
        try:
            if t is Persist:
                # the log's entries carry what a JournalEntry does (seq, written_epoch, mutations)
                if self.shared:
                    self.writer.submit(action.token, action.group, action.entries)   # type: ignore[call-arg]
                else:
                    self.writer.submit(action.token, action.entries)
            elif t is PersistReset:
                if self.shared:
                    self.writer.submit_reset(action.token, action.group, action.seq, action.epoch,  # type: ignore
                                             list(action.blobs))
                else:
                    self.writer.submit_reset(action.token, action.seq, action.epoch, list(action.blobs))
            elif t is Snapshot:
                snap = self.writer.begin_snapshot(action.group, action.at_seq, action.at_epoch) if self.shared \
                    else self.writer.begin_snapshot(action.at_seq, action.at_epoch)   # type: ignore[call-arg]
                for blob in action.blobs:
                    snap.add(blob)
                snap.finish(action.end_seq, self._snapshot_done)
            elif t is ForgetDropped:
                self.writer.forget_dropped()
        except Exception as e:   # a writer that failed refuses more: the core hears it once
            self._error(e)

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            log.exception("journal: closing failed")

    def stats(self) -> dict[str, Any]:
        """For /cluster, /metrics and `status`: the writer's figures and the journal's files."""
        w = self.writer.stats()
        j = self.journal.stats()
        snap = j.last_snapshot
        if self.shared:   # group 0's position where one group's is, then every group's
            groups = j.groups    # type: ignore[union-attr]
            positions: dict[str, Any] = {
                "last_seq": groups[0].last_seq, "durable_seq": groups[0].durable_seq,
                "groups": [{"group": p.group, "last_seq": p.last_seq, "durable_seq": p.durable_seq,
                            "snapshot_seq": p.snapshot_at_seq} for p in groups]}
        else:
            positions = {"last_seq": j.last_seq, "durable_seq": j.durable_seq}   # type: ignore[union-attr]
        return {
            "data_dir": self.durability.data_dir, "fsync": w.policy, "bytes": j.bytes_on_disk,
            "segments": j.segments, **positions,
            "fsyncs": w.fsyncs, "fsyncs_per_s": round(w.fsyncs_per_s, 1),
            "fsync_ms_last": _ms(w.last_fsync_ms), "fsync_ms_avg": _ms(w.avg_fsync_ms),
            "entries_per_fsync": round(w.entries_per_fsync, 2) if w.entries_per_fsync is not None else None,
            "queue_depth": w.queue_depth,
            "last_snapshot": None if snap is None else {
                "at_seq": snap.at_seq, "end_seq": snap.end_seq, "bytes": snap.bytes,
                "duration_s": round(snap.duration_s, 3), "finished_at": snap.finished_at},
            "error": self.failed,
        }

    # -- from the writer thread ----------------------------------------------------------------

    def _snapshot_done(self, error: BaseException | None) -> None:
        if error is not None:
            log.warning("journal %s: a compaction snapshot failed: %s", self.durability.journal_dir, error)

    def _durable(self, token: int) -> None:
        self._loop.call_soon_threadsafe(self._on_persisted, token)

    def _error(self, exc: BaseException) -> None:
        reason = f"{type(exc).__name__}: {exc}"

        def report() -> None:
            if self.failed is None:
                self.failed = reason
                log.error("journal %s failed: %s", self.durability.journal_dir, reason)
                self._on_failed(reason)
        try:
            self._loop.call_soon_threadsafe(report)
        except RuntimeError:
            pass    # the loop is closed: the node is stopping anyway


def journal_status(binding: JournalBinding, recovered: Recovered | None) -> dict[str, Any]:
    d = binding.stats()
    if recovered is not None:
        d["recovery"] = {"seconds": round(recovered.seconds, 3), "messages": recovered.messages,
                         "entries": recovered.entries, "snapshot_seq": recovered.snapshot_seq,
                         "truncated": recovered.truncated, "entries_dropped": recovered.entries_dropped}
    return d
