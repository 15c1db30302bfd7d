"""``SharedJournalWriter``: the shared journal (shared.py) on a thread of its own.

As ``JournalWriter`` (writer.py, whose thread it is): the loop enqueues work tagged with its
group and a node-wide token, and the thread takes everything queued at once, writes it (one write
for a run of appends, whatever their groups), then makes it durable with one fsync for every
group. ``on_durable(token)`` says the same as ``JournalWriter``'s under each fsync policy, for
every token up to ``token``, whatever its group.
"""

from __future__ import annotations

from typing import Iterable

from cluster.journal.format import JournalEntry
from cluster.journal.journal import SnapshotWriter
from cluster.journal.shared import SharedJournal
from cluster.journal.writer import PendingSnapshot, Writer, _Append, _Reset, _SnapBegin


class SharedJournalWriter(Writer):
    """The writer of a node's shared journal; tokens increase across groups."""

    _journal: SharedJournal

    def submit(self, token: int, group: int, entries: Iterable[JournalEntry]) -> None:
        """``entries`` of ``group``: JournalEntry, or anything with its seq, written_epoch and
        mutations (the replication log's entries)."""
        self._put(_Append(token, entries if type(entries) is tuple else tuple(entries), group), token)

    def submit_reset(self, token: int, group: int, at_seq: int, at_epoch: int, blobs: Iterable[bytes]) -> None:
        """Start ``group``'s next history at (at_seq, at_epoch) holding ``blobs``
        (``SharedJournal.reset``); ``on_durable(token)`` once it is on disk, under every policy."""
        self._put(_Reset(token, at_seq, at_epoch, tuple(blobs), group), token)

    def begin_snapshot(self, group: int, at_seq: int, at_epoch: int) -> PendingSnapshot:
        snap = PendingSnapshot(self, group)
        self._put(_SnapBegin(snap, at_seq, at_epoch))
        return snap

    def _write(self, ops: list[_Append]) -> int:
        self._journal.append_groups([(op.group, op.entries) for op in ops])
        return sum(len(op.entries) for op in ops)

    def _reset(self, op: _Reset) -> None:
        self._journal.reset(op.group, op.at_seq, op.at_epoch, op.blobs)
        # The reset's token is reported durable, and with it every token before it. A reset of
        # one journal (format 1) replaced all that they stood for; here other groups' entries
        # written before it are still to be synced.
        if self._policy == "always" and self._journal.unsynced:
            self._sync()

    def _begin(self, snap: PendingSnapshot, at_seq: int, at_epoch: int) -> SnapshotWriter:
        return self._journal.begin_snapshot(snap.group, at_seq, at_epoch)

    def _durable_seq(self, snap: PendingSnapshot) -> int:
        return self._journal.durable_seq(snap.group)

    def _unsynced(self) -> bool:
        return self._journal.unsynced
