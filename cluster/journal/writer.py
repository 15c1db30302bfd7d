"""``JournalWriter``: the journal on a thread of its own, with group commit.

The node's event loop must never wait for a disk, so it only enqueues work (``submit``,
``submit_reset``, snapshot steps) and hears back through callbacks made on the writer thread
(the caller posts them to its loop). The thread takes everything queued at once, writes it all,
then syncs once for the lot: with many batches in flight, one fsync covers many of them.

What ``on_durable(token)`` promises depends on the policy:

* ``always``: the fsync covering the token's entries has returned.
* ``interval``: the entries were written (handed to the OS); an fsync follows within
  ``interval_ms``. A crash of the process loses nothing; a power loss may lose that much.
  The policy promises no more, so waiting for the fsync would only add latency.
* ``never``: written, as above; fsync only at a snapshot, a reset and ``close``.

Fail-stop: on the first error (I/O, or a bug such as a seq gap) the writer calls ``on_error``
once and refuses all later work with ``WriterStopped``. After a failed write or fsync the OS
may have dropped the dirty pages and forgotten the error (PostgreSQL's "fsyncgate"), so no later
fsync can be trusted to mean durable; only a restart, whose recovery reads what is really on
disk, can.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Literal

from cluster.journal.format import JournalEntry
from cluster.journal.journal import Journal, JournalFailed, SnapshotAborted, SnapshotWriter

if TYPE_CHECKING:
    from cluster.journal.shared import SharedJournal

log = logging.getLogger(__name__)

Policy = Literal["always", "interval", "never"]
POLICIES: tuple[Policy, ...] = ("always", "interval", "never")
_RATE_WINDOW_S = 5.0


class WriterStopped(RuntimeError):
    """The writer takes no more work: it failed (``__cause__`` is why) or was closed."""


@dataclass(frozen=True, slots=True)
class WriterStats:
    policy: str
    fsyncs: int
    fsyncs_per_s: float             # over the last few seconds
    last_fsync_ms: float | None
    avg_fsync_ms: float | None
    queue_depth: int
    entries_per_fsync: float | None
    durable_token: int | None       # the last token reported to on_durable
    failed: str | None


@dataclass(frozen=True, slots=True)
class _Append:
    token: int
    entries: tuple[JournalEntry, ...]
    group: int = 0          # in a shared journal


@dataclass(frozen=True, slots=True)
class _Reset:
    token: int
    at_seq: int
    at_epoch: int
    blobs: tuple[bytes, ...]
    group: int = 0


@dataclass(frozen=True, slots=True)
class _SnapBegin:
    snap: PendingSnapshot
    at_seq: int
    at_epoch: int


@dataclass(frozen=True, slots=True)
class _SnapAdd:
    snap: PendingSnapshot
    blob: bytes


@dataclass(frozen=True, slots=True)
class _SnapFinish:
    snap: PendingSnapshot
    end_seq: int
    done: Callable[[BaseException | None], None]


@dataclass(frozen=True, slots=True)
class _SnapAbort:
    snap: PendingSnapshot


@dataclass(frozen=True, slots=True)
class _ForgetDropped:
    pass


_Op = _Append | _Reset | _SnapBegin | _SnapAdd | _SnapFinish | _SnapAbort | _ForgetDropped


class PendingSnapshot:
    """A snapshot fed from the caller's loop: each call only enqueues, in order with the appends,
    so ``finish(end_seq)`` runs after every entry up to end_seq was written (and the writer
    syncs them first). Feed blobs at the pace the loop allows; ``stats().queue_depth`` shows
    how far the writer is behind."""

    def __init__(self, writer: Writer, group: int = 0):
        self._writer = writer
        self.group = group
        self.journal_writer: SnapshotWriter | None = None   # on the writer thread only
        self.error: BaseException | None = None             # on the writer thread only

    def add(self, blob: bytes) -> None:
        self._writer._put(_SnapAdd(self, blob))

    def finish(self, end_seq: int, done: Callable[[BaseException | None], None]) -> None:
        """Complete the snapshot once the journal is durable up to ``end_seq`` (the last entry
        submitted when the blobs were taken). ``done(None)`` or ``done(error)`` follows, on the
        writer thread; an error that stops the writer also goes to ``on_error``."""
        self._writer._put(_SnapFinish(self, end_seq, done))

    def abort(self) -> None:
        self._writer._put(_SnapAbort(self))


class Writer:
    """The writer thread, whatever the journal: ``JournalWriter`` for one group's journal,
    ``SharedJournalWriter`` (shared_writer.py) for the shared journal of every group. Owns
    ``journal`` from here on: ``close`` closes it."""

    def __init__(self, journal: Journal | SharedJournal, policy: Policy = "always", *, interval_ms: float = 100,
                 on_durable: Callable[[int], None], on_error: Callable[[BaseException], None]):
        if policy not in POLICIES:
            raise ValueError(f"fsync policy {policy!r}: one of {', '.join(POLICIES)}")
        self._journal = journal
        self._policy = policy
        self._interval_s = interval_ms / 1000
        self._on_durable = on_durable
        self._on_error = on_error
        self._cond = threading.Condition()
        self._queue: collections.deque[_Op] = collections.deque()
        self._closing = False
        self._failed: BaseException | None = None
        self._last_token: int | None = None          # the caller's side: tokens must increase
        # the writer thread's own state
        self._written: int | None = None             # highest token written
        self._reported: int | None = None            # highest token passed to on_durable
        self._last_sync = time.monotonic()
        self._entries_since_sync = 0
        self._fsyncs = 0
        self._fsync_total_s = 0.0
        self._fsync_last_s: float | None = None
        self._fsync_entries = 0
        self._fsync_times: collections.deque[float] = collections.deque()
        self._thread = threading.Thread(target=self._run, name=f"journal-writer {journal.where}", daemon=True)
        self._thread.start()

    # -- the caller's side (any thread) --

    def forget_dropped(self) -> None:
        """``Journal.forget_dropped``, in order with the work queued before it."""
        self._put(_ForgetDropped())

    def _put(self, op: _Op, token: int | None = None) -> None:
        with self._cond:
            if self._failed is not None:
                raise WriterStopped(f"the journal writer stopped after an error: {self._failed}") from self._failed
            if self._closing:
                raise WriterStopped("the journal writer is closed")
            if token is not None:
                if self._last_token is not None and token <= self._last_token:
                    raise ValueError(f"token {token} after {self._last_token}: tokens must increase")
                self._last_token = token
            self._queue.append(op)
            self._cond.notify()

    def close(self, timeout: float | None = None) -> None:
        """Write and sync everything queued (under every policy), stop the thread, close the
        journal."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("JournalWriter.close() from its own thread (an on_durable callback?) would deadlock")
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the journal writer did not stop within {timeout} s")
        self._journal.close()

    @property
    def failed(self) -> BaseException | None:
        return self._failed

    def stats(self) -> WriterStats:
        now = time.monotonic()
        with self._cond:
            depth = len(self._queue)
            recent = [t for t in self._fsync_times if now - t <= _RATE_WINDOW_S]
        n = self._fsyncs
        return WriterStats(
            self._policy, n, len(recent) / _RATE_WINDOW_S,
            None if self._fsync_last_s is None else self._fsync_last_s * 1000,
            self._fsync_total_s * 1000 / n if n else None, depth,
            self._fsync_entries / n if n else None, self._reported,
            None if self._failed is None else repr(self._failed))

    # -- the writer thread --

    def _run(self) -> None:
        ops: list[_Op] = []
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._closing and not self._sync_due():
                        self._cond.wait(self._wait_s())
                    ops = list(self._queue)
                    self._queue.clear()
                    closing = self._closing
                while ops:
                    n = self._appends(ops)
                    if n:
                        # appends queued one after another (a loop flushes several times per
                        # fsync under load) go to the disk as one write
                        self._entries_since_sync += self._write(ops[:n])     # type: ignore[arg-type]
                        self._written = ops[n - 1].token                     # type: ignore[union-attr]
                        del ops[:n]
                        continue
                    self._apply(ops[0])
                    ops.pop(0)
                self._after_batch(closing)
                if closing:
                    return
        except BaseException as exc:    # noqa: BLE001 (fail-stop: every error ends the writer)
            self._fail(exc, ops)

    @staticmethod
    def _appends(ops: list[_Op]) -> int:
        """How many ops from the first are appends."""
        n = 0
        for op in ops:
            if type(op) is not _Append:
                break
            n += 1
        return n

    # what the journal's kind decides

    def _write(self, ops: list[_Append]) -> int:
        """Write the entries of ``ops``, appends queued one after another; returns how many."""
        raise NotImplementedError

    def _reset(self, op: _Reset) -> None:
        raise NotImplementedError

    def _begin(self, snap: PendingSnapshot, at_seq: int, at_epoch: int) -> SnapshotWriter:
        raise NotImplementedError

    def _durable_seq(self, snap: PendingSnapshot) -> int:
        """How far the journal of ``snap``'s group is durable."""
        raise NotImplementedError

    def _unsynced(self) -> bool:
        raise NotImplementedError

    def _sync_due(self) -> bool:
        return (self._policy == "interval" and self._unsynced()
                and time.monotonic() - self._last_sync >= self._interval_s)

    def _wait_s(self) -> float | None:
        if self._policy == "interval" and self._unsynced():
            return max(0.0, self._last_sync + self._interval_s - time.monotonic())
        return None

    def _apply(self, op: _Op) -> None:
        if isinstance(op, _Reset):
            self._reset(op)
            self._written = op.token
            self._entries_since_sync = 0
            # the reset's snapshot was fsynced, and with it everything the token stands for
            self._report(op.token)
        elif type(op) is _ForgetDropped:
            self._journal.forget_dropped()
        else:
            self._snapshot_step(op)

    def _snapshot_step(self, op: _SnapBegin | _SnapAdd | _SnapFinish | _SnapAbort) -> None:
        snap = op.snap
        try:
            if isinstance(op, _SnapBegin):
                snap.journal_writer = self._begin(snap, op.at_seq, op.at_epoch)
            elif snap.error is not None or snap.journal_writer is None:
                pass
            elif isinstance(op, _SnapAdd):
                snap.journal_writer.add(op.blob)
            elif isinstance(op, _SnapAbort):
                snap.journal_writer.abort()
            elif isinstance(op, _SnapFinish):
                if self._durable_seq(snap) < op.end_seq:
                    self._sync()
                snap.journal_writer.finish(op.end_seq)
        except (SnapshotAborted, ValueError, RuntimeError) as e:
            if isinstance(e, JournalFailed):
                raise
            # a refused snapshot (a reset overtook it, a bad position) leaves the journal sound
            snap.error = e
            if snap.journal_writer is not None:
                snap.journal_writer.abort()
        if isinstance(op, _SnapFinish):
            self._call(op.done, snap.error)

    def _after_batch(self, closing: bool) -> None:
        if self._written is None:
            return
        if self._policy == "always" or closing or self._sync_due():
            if self._unsynced():
                self._sync()
            else:
                self._report(self._written)
        else:
            self._report(self._written)

    def _sync(self) -> None:
        started = time.monotonic()
        self._journal.sync()
        now = time.monotonic()
        self._last_sync = now
        self._fsyncs += 1
        self._fsync_last_s = now - started
        self._fsync_total_s += now - started
        self._fsync_entries += self._entries_since_sync
        self._entries_since_sync = 0
        with self._cond:    # stats() reads the deque from other threads
            self._fsync_times.append(now)
            while self._fsync_times and now - self._fsync_times[0] > _RATE_WINDOW_S:
                self._fsync_times.popleft()
        if self._written is not None:
            self._report(self._written)

    def _report(self, token: int) -> None:
        if self._reported is None or token > self._reported:
            self._reported = token
            self._call(self._on_durable, token)

    def _call(self, fn: Callable, arg: object) -> None:
        try:
            fn(arg)
        except Exception:
            # the caller's bug: the journal itself is fine, so keep going
            log.exception("journal writer: callback %r failed", fn)

    def _fail(self, exc: BaseException, unfinished: list[_Op]) -> None:
        with self._cond:
            self._failed = exc
            dropped = unfinished + list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        log.error("journal writer %s stopped: %r", self._journal.where, exc)
        self._call(self._on_error, exc)
        for op in dropped:
            if isinstance(op, _SnapFinish):
                self._call(op.done, exc)


class JournalWriter(Writer):
    """The writer of one group's journal (``Journal``)."""

    _journal: Journal

    def submit(self, token: int, entries: Iterable[JournalEntry]) -> None:
        """``entries``: JournalEntry, or anything with its seq, written_epoch and mutations (the
        replication log's entries)."""
        self._put(_Append(token, entries if type(entries) is tuple else tuple(entries)), token)

    def submit_reset(self, token: int, at_seq: int, at_epoch: int, blobs: Iterable[bytes]) -> None:
        """Replace the journal with a new history at (at_seq, at_epoch) holding ``blobs``
        (``Journal.reset``); ``on_durable(token)`` once it is on disk, under every policy."""
        self._put(_Reset(token, at_seq, at_epoch, tuple(blobs)), token)

    def begin_snapshot(self, at_seq: int, at_epoch: int) -> PendingSnapshot:
        snap = PendingSnapshot(self)
        self._put(_SnapBegin(snap, at_seq, at_epoch))
        return snap

    def _write(self, ops: list[_Append]) -> int:
        entries = ops[0].entries if len(ops) == 1 else [e for op in ops for e in op.entries]
        self._journal.append(entries)
        return len(entries)

    def _reset(self, op: _Reset) -> None:
        self._journal.reset(op.at_seq, op.at_epoch, op.blobs)

    def _begin(self, snap: PendingSnapshot, at_seq: int, at_epoch: int) -> SnapshotWriter:
        return self._journal.begin_snapshot(at_seq, at_epoch)

    def _durable_seq(self, snap: PendingSnapshot) -> int:
        return self._journal.durable_seq

    def _unsynced(self) -> bool:
        return self._journal.last_seq != self._journal.durable_seq
