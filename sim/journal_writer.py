"""A node's journal writer in simulated time (cluster/journal/writer.py's thread, on the real
journal over the node's SimDisk): one journal for one group, or the shared journal
(cluster/journal/shared.py) of a node with several replication groups."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from cluster.compaction import Snapshot
from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal, SnapshotAborted
from cluster.journal.shared import SharedJournal
from cluster.node_actions import ForgetDropped, Persist, PersistReset

if TYPE_CHECKING:
    from sim.node import JournalSpec, SimNode

class JournalWriter:
    """The journal writer (cluster/journal/writer.py) in simulated time, on the real ``Journal``
    over the node's SimDisk. Like the product's writer thread it takes everything submitted
    since its last turn at once, writes it, and (``always``) syncs once for the lot; what is
    submitted during that fsync waits for the next turn (group commit). An fsync takes a random
    latency; its bytes become durable when it returns. ``interval``: durable is reported once
    written, an fsync follows within the interval; ``never``: durable once written, fsyncs only
    inside snapshots and resets. A reset is durable (and reported) on return, under every policy;
    on a slowed disk (``slow_us``: the "race" and "hung" rare paths) its own fsyncs take an
    fsync's latency plus the slowness before it returns, and what was submitted after it waits.
    Each report reaches the loop as a post (``persisted``). A paused process stops this thread
    too; a stalled loop does not."""

    def __init__(self, node: SimNode, journal: Journal | SharedJournal, spec: JournalSpec, rng: random.Random) -> None:
        self.node = node
        self.journal = journal
        self.shared = isinstance(journal, SharedJournal)
        self.spec = spec
        self.rng = rng
        self.queue: list[Any] = []
        self.busy = False                 # an fsync is under way
        self.slow_us = 0                  # extra latency of every fsync: a slow disk (the "race" rare path)
        self.hang = False                 # the next fsync hangs until release() (the "hung" rare path)
        self.hung = False                 # an fsync hangs now
        self.woken = False                # a turn is coming
        self.sync_planned = False         # interval: an fsync is planned
        self.written: int | None = None   # the last token written
        self.reported: int | None = None
        self.last_sync = node.world.now
        self.failed: str | None = None
        self.fsyncs = 0
        self.snapshots = 0
        self.refused: list[str] = []      # snapshots the journal refused (a reset overtook them...)

    def submit(self, op: Any) -> None:
        if self.failed is not None:
            return
        self.queue.append(op)
        self._wake()

    def _wake(self) -> None:
        if self.busy or self.woken:
            return
        self.woken = True
        w = self.node.world
        from sim.node import HOP_US    # (sim/node.py imports this module)
        w.at(w.now + self.rng.randint(*HOP_US), self.node._node_event, self._turn, ())

    def _turn(self) -> None:
        self.woken = False
        if self.busy or self.failed is not None:
            return
        ops, self.queue = self.queue, []
        try:
            for i, op in enumerate(ops):
                self._apply(op)
                if self.slow_us and type(op) is PersistReset:
                    # a slow disk: the reset returns once its fsyncs (its snapshot's, the
                    # directory's) have, and only then is it reported; the rest waits
                    self.queue = ops[i + 1:] + self.queue
                    self.busy = True
                    w = self.node.world
                    took = self.rng.randint(*self.spec.fsync_us) + self.slow_us
                    w.at(w.now + took, self.node._node_event, self._reset_returned, (op.token,))
                    return
        except Exception as e:     # the SimDisk raises no I/O error: this is a bug
            self._fail(e)
            return
        if self.written is None:
            return
        unsynced = self._unsynced()
        if self.spec.fsync == "always" and unsynced:
            self._start_sync()
            return
        self._report(self.written)
        if self.spec.fsync == "interval" and unsynced:
            self._plan_sync()

    def _apply(self, op: Any) -> None:
        t = type(op)
        if t is Persist:
            entries = [JournalEntry(e.seq, e.written_epoch, e.mutations) for e in op.entries]
            if self.shared:
                self.journal.append(op.group, entries)
            else:
                self.journal.append(entries)
            self.written = op.token
        elif t is PersistReset:
            if self.shared:
                self.journal.reset(op.group, op.seq, op.epoch, op.blobs)
            else:
                self.journal.reset(op.seq, op.epoch, op.blobs)
            self.written = op.token
            if not self.slow_us:
                self._report(op.token)
        elif t is Snapshot:
            sw = None
            try:
                sw = self.journal.begin_snapshot(op.group, op.at_seq, op.at_epoch) if self.shared \
                    else self.journal.begin_snapshot(op.at_seq, op.at_epoch)
                for blob in op.blobs:
                    sw.add(blob)
                if self.durable(op.group) < op.end_seq:
                    self.journal.sync()
                    self.fsyncs += 1
                    if self.written is not None:
                        self._report(self.written)
                sw.finish(op.end_seq)
                self.snapshots += 1
            except (SnapshotAborted, ValueError, RuntimeError) as e:
                self.refused.append(f"{type(e).__name__}: {e}")
                if sw is not None:
                    sw.abort()
        elif t is ForgetDropped:
            self.journal.forget_dropped()

    def _start_sync(self) -> None:
        self.busy = True
        w = self.node.world
        if self.hang:
            self.hang = False
            self.hung = True
            w.rare.hung.fsync_hung(self.node)
            return
        took = self.rng.randint(*self.spec.fsync_us) + self.slow_us
        w.at(w.now + took, self.node._node_event, self._synced, ())
        w.nemesis.fsync_started(took)

    def release(self) -> None:
        """A hung fsync returns now."""
        if self.hung:
            self.hung = False
            w = self.node.world
            w.at(w.now, self.node._node_event, self._synced, ())

    def _reset_returned(self, token: int) -> None:
        """A reset on a slowed disk returns now (``_turn``)."""
        self.busy = False
        if self.failed is not None:
            return
        self._report(token)
        if self.queue:
            self._turn()

    def _synced(self) -> None:
        self.busy = False
        try:
            self.journal.sync()
        except Exception as e:
            self._fail(e)
            return
        self.fsyncs += 1
        self.last_sync = self.node.world.now
        if self.written is not None:
            self._report(self.written)
        if self.queue:
            self._turn()

    def _plan_sync(self) -> None:
        if self.sync_planned:
            return
        self.sync_planned = True
        w = self.node.world
        w.at(max(w.now, self.last_sync + self.spec.interval_us), self.node._node_event, self._interval_due, ())

    def _interval_due(self) -> None:
        self.sync_planned = False
        # busy: the fsync under way covers everything written (nothing is written meanwhile)
        if self.failed is None and not self.busy and self._unsynced():
            self._start_sync()

    def durable(self, group: int = 0) -> int:
        """How far ``group``'s entries are on disk (the last fsync's)."""
        return self.journal.durable_seq(group) if self.shared else self.journal.durable_seq

    def _unsynced(self) -> bool:
        return self.journal.unsynced if self.shared else self.journal.last_seq != self.journal.durable_seq

    def _report(self, token: int) -> None:
        if self.reported is None or token > self.reported:
            self.reported = token
            self.node._post(True, self.node._loop_persisted, token)

    def _fail(self, e: BaseException) -> None:
        self.failed = f"{type(e).__name__}: {e}"
        self.queue.clear()
        self.node.world.journal_failures.append(
            f"journal: {self.node.name}'s writer failed at {self.node.world.now_s:.6f} s: {self.failed}")
        self.node._post(True, self.node._loop_journal_failed, self.failed)
