"""A node's durable journal: the mutation batches it applied, in files, with snapshots.

``format`` turns bytes into records (sans-I/O), ``disk`` is the directory (``Disk``, ``OsDisk``),
``recovery`` reads a directory back, ``journal`` appends, syncs, snapshots and compacts
(synchronous), ``writer`` runs a journal on its own thread with group commit, and ``tools`` are
the operator's ``check`` and ``truncate``; ``backup`` copies a running node's journal consistently
and restores a new one from the copy. DESIGN.md, "Durability (the journal)", says why.

A node with groups >= 2 keeps one shared journal for all its groups (format 2): ``shared_format``,
``shared`` (``SharedJournal``), ``shared_recovery``, ``shared_writer`` (``SharedJournalWriter``) and
``shared_tools``, which ``tools`` calls for such a directory.
"""

from cluster.journal.disk import Disk, JournalIOError, JournalLocked, OsDisk
from cluster.journal.format import FormatError, JournalEntry, UnsupportedVersion
from cluster.journal.journal import (
    DEFAULT_SEGMENT_BYTES, Journal, JournalFailed, JournalStats, SnapshotAborted, SnapshotStats, SnapshotWriter,
)
from cluster.journal.recovery import JournalDamaged, Recovery, SnapshotPosition, UnsupportedJournal, recover
from cluster.journal.shared import SharedJournal
from cluster.journal.shared_recovery import GroupRecovery, JournalFormatMismatch, SharedRecovery, require_format
from cluster.journal.shared_writer import SharedJournalWriter
from cluster.journal.tools import Report, check, truncate
from cluster.journal.writer import JournalWriter, PendingSnapshot, WriterStats, WriterStopped

__all__ = [
    "DEFAULT_SEGMENT_BYTES", "Disk", "FormatError", "GroupRecovery", "Journal", "JournalDamaged", "JournalEntry",
    "JournalFailed", "JournalFormatMismatch", "JournalIOError", "JournalLocked", "JournalStats", "JournalWriter",
    "OsDisk", "PendingSnapshot", "Recovery", "Report", "SharedJournal", "SharedJournalWriter", "SharedRecovery",
    "SnapshotAborted", "SnapshotPosition", "SnapshotStats", "SnapshotWriter", "UnsupportedJournal",
    "UnsupportedVersion", "WriterStats", "WriterStopped", "check", "recover", "require_format", "truncate",
]
