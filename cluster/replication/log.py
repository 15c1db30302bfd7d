"""The replication log: the recent batches, kept on the master to re-send gaps and on every
replica so that a new master can pull what it lacks (the master-change sync, sync.py)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from cluster import decisions


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    written_epoch: int
    mutations: bytes
    created_ms: int


@dataclass(frozen=True, slots=True)
class Reset:
    seq: int
    epoch: int
    blobs: tuple[bytes, ...]


class ReplicationLog:
    """Entries with consecutive sequence numbers, bounded in bytes (oldest dropped first).

    A replica that needs an entry older than ``first_seq`` can only catch up by state transfer.
    A state transfer in progress *pins* the entries after its read's start (``pin``): it sends
    them as its tail (transfer.py), and a log that dropped them would make it begin again, for
    ever under a steady write load. Pinned entries are kept beyond ``limit_bytes`` up to
    ``pinned_limit_bytes``; past that the oldest go anyway (the transfer starts over), so a
    transfer that stalls cannot hold the master's memory without bound.
    """

    def __init__(self, limit_bytes: int = 64 * 1024 * 1024, last_seq: int = 0, last_epoch: int = 0, *,
                 journaled: bool = False, pinned_limit_bytes: int | None = None):
        self.limit_bytes = limit_bytes
        self.pinned_limit_bytes = pinned_limit_bytes if pinned_limit_bytes is not None \
            else max(4 * limit_bytes, 256 * 1024 * 1024)
        self._pins: dict[object, int] = {}   # holder -> the oldest seq it needs
        # With a journal, every change of the log is also kept here, in order, until the node
        # core drains it into its journal's writes: an Entry, or a Reset (the state was replaced).
        self.unjournaled: list[Entry | Reset] | None = [] if journaled else None
        self._entries: deque[Entry] = deque()
        self._bytes = 0
        self._last_seq = last_seq      # survives trimming: the position the state is at
        self._last_epoch = last_epoch

    @property
    def last_seq(self) -> int:
        return self._last_seq

    @property
    def last_epoch(self) -> int:
        return self._last_epoch

    @property
    def first_seq(self) -> int:
        """The oldest seq still held (last_seq + 1 when empty)."""
        return self._entries[0].seq if self._entries else self._last_seq + 1

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, entry: Entry) -> None:
        if entry.seq != self._last_seq + 1:
            raise ValueError(f"log gap: have {self._last_seq}, got {entry.seq}")
        self._entries.append(entry)
        if self.unjournaled is not None:
            self.unjournaled.append(entry)
        self._bytes += len(entry.mutations)
        self._last_seq = entry.seq
        self._last_epoch = entry.written_epoch
        if self._bytes > self.limit_bytes:
            self._trim()

    def _trim(self) -> None:
        entries = self._entries
        pinned = min(self._pins.values()) if self._pins else None
        while self._bytes > self.limit_bytes and len(entries) > 1:
            if pinned is not None and entries[0].seq >= pinned and self._bytes <= self.pinned_limit_bytes:
                break
            self._bytes -= len(entries.popleft().mutations)

    def pin(self, holder: object, seq: int) -> None:
        """Keep the entries from ``seq`` on (within ``pinned_limit_bytes``) until ``unpin``."""
        self._pins[holder] = seq

    def unpin(self, holder: object) -> None:
        if self._pins.pop(holder, None) is not None and self._bytes > self.limit_bytes:
            self._trim()

    def drain(self) -> list[Entry | Reset]:
        """The changes since the last drain, for the journal."""
        out, self.unjournaled = self.unjournaled, []
        return out or []

    def newest(self) -> Entry | None:
        return self._entries[-1] if self._entries else None

    def get(self, seq: int) -> Entry | None:
        if decisions.ON and self._entries:
            # a lookup that checks only the upper bound: a trimmed seq indexes from the end
            decisions.note("log.lookup", seq < self._entries[0].seq)
        if not self._entries or not self._entries[0].seq <= seq <= self._last_seq:
            return None
        return self._entries[seq - self._entries[0].seq]

    def since(self, seq: int, limit: int) -> list[Entry]:
        """Up to ``limit`` entries from ``seq`` on (empty if ``seq`` is no longer held)."""
        if not self._entries or seq < self._entries[0].seq:
            return []
        start = seq - self._entries[0].seq
        return [self._entries[i] for i in range(start, min(start + limit, len(self._entries)))]

    def reset(self, last_seq: int, last_epoch: int, blobs: tuple[bytes, ...] = ()) -> None:
        """Forget every entry: the state now comes from a snapshot taken at ``last_seq``
        (``blobs``: that snapshot's encoded records, which a journal keeps as its new start)."""
        if self.unjournaled is not None:
            self.unjournaled.append(Reset(last_seq, last_epoch, blobs))
        self._entries.clear()
        self._bytes = 0
        self._last_seq = last_seq
        self._last_epoch = last_epoch
