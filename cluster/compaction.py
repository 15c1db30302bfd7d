"""When and how a journaled node snapshots its state for compaction, sans-I/O.

Once the journal has grown by max(``min_bytes``, the last snapshot's size) since the last
snapshot began, the state is read a step at a time (a few ms of the loop per step) into encoded
records, while writes go on: a *fuzzy* snapshot, like a state transfer's. It begins at log
position ``at_seq`` and ends at ``end_seq``; restoring it and replaying every entry after
``at_seq`` gives the exact state, because every mutation is idempotent. The journal keeps it
once it is durable up to ``end_seq``, and drops the entries behind ``at_seq``.

Sizing the threshold by the last snapshot keeps compaction's cost proportional to what the
journal grew (each byte of history is rewritten a bounded number of times), while disk use stays
within about twice the live state plus ``min_bytes``.

The caller must make sure that, at every step, the storage holds nothing its log does not
(a master cuts its executed operations into a batch first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from storage import Storage
from storage.codec import encode_many

from cluster import decisions
from cluster.replication.log import ReplicationLog

STEP_BYTES = 1024 * 1024      # ~20 MB/s at a 50 ms tick: 1M messages (~200 MB) in about 10 s
RECORDS_PER_BLOB = 256


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A finished fuzzy snapshot: read from ``at_seq`` on while the log grew to ``end_seq``.
    Valid once the journal is durable up to ``end_seq``; then what is behind ``at_seq`` can go."""

    at_seq: int
    at_epoch: int
    end_seq: int
    blobs: tuple[bytes, ...]
    group: int = 0     # the replication group whose state it is


class Compactor:
    def __init__(self, min_bytes: int, step_bytes: int = STEP_BYTES, blob_records: int = RECORDS_PER_BLOB) -> None:
        """``step_bytes`` / ``blob_records``: how much one step reads, and how many records go in
        one blob (the simulator makes both small, so that its small states are read over many
        steps while the log moves, as a real one's are)."""
        self.min_bytes = min_bytes
        self.step_bytes = step_bytes
        self.blob_records = blob_records
        self.grown = 0                  # bytes journaled since the last snapshot began
        self.last_bytes = 0             # the size of the last snapshot
        self._read: tuple[Storage, Iterator[Any], int, int, list[bytes], list[int]] | None = None

    @property
    def due(self) -> bool:
        return self._read is not None or self.grown >= max(self.min_bytes, self.last_bytes)

    def journaled(self, nbytes: int) -> None:
        self.grown += nbytes

    def replaced(self, snapshot_bytes: int) -> None:
        """The state was replaced (a transfer): the journal starts again from that snapshot."""
        self._read = None
        self.grown = 0
        self.last_bytes = snapshot_bytes

    def abort(self) -> None:
        self._read = None

    def step(self, storage: Storage, log: ReplicationLog) -> Snapshot | None:
        """Read the next step of the snapshot (beginning one if none is under way); the finished
        snapshot once the state is read to its end. Call only when ``due``."""
        read = self._read
        if read is None or read[0] is not storage:
            self._read = (storage, storage.iter_snapshot(), log.last_seq, log.last_epoch, [], [])
            self.grown = 0
            return None
        _, records, at_seq, at_epoch, blobs, read_from = read
        if not read_from:
            read_from.append(log.last_seq)    # the generator reads the state from this step on
        size = 0
        batch: list[Any] = []
        per_blob, step_bytes = self.blob_records, self.step_bytes
        for rec in records:
            batch.append(rec)
            if len(batch) >= per_blob:
                blob = encode_many(batch)
                blobs.append(blob)
                size += len(blob)
                batch = []
                if size >= step_bytes:
                    return None
        if batch:
            blobs.append(encode_many(batch))
        self._read = None
        self.last_bytes = sum(len(b) for b in blobs)
        if decisions.ON:
            # claiming the end is harmless where the whole read fell in this one step
            decisions.note("compaction.snapshot_position", log.last_seq != read_from[0])
        return Snapshot(at_seq, at_epoch, log.last_seq, tuple(blobs))
