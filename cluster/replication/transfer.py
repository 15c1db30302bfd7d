"""State transfer in chunks, while the master keeps serving (sans-I/O).

The sender reads the master's storage with ``Storage.iter_snapshot()``, which may interleave
with client operations (a "fuzzy" snapshot): it begins at log position ``at_seq``, and each
record shows the state at the moment it was read. Such a state is exact at no log position
until the entries that ran during the read are applied on top (every mutation is idempotent, so
applying one whose effect the read already saw changes nothing). So the transfer carries them:
once every record is read, the chunks that follow hold the log's entries after ``at_seq`` (the
*tail*), and the last chunk names the log's end ``(seq, epoch)`` when it was cut. The joiner
restores everything into a fresh storage, which is then exactly the master's state at that
position, and the stream resumes after it.

Why the tail belongs to the transfer, not to the stream that follows it: a joiner holding the
fuzzy records with its log at ``at_seq`` would hold effects of entries it does not have. Were
the master to fail before streaming them, the next master's sync would take that log position
for a clean prefix of a history that may have dropped those entries, and the joiner would stay
diverged for good (the simulator plays it: seed 63 with the mutant ``held-ack-unclamped``).
Operations the master executed but has not yet cut into the log are the same hazard, so the
sender has them cut (``cut_staged``) before it fixes the last chunk's position.

Chunks go out in a bounded window and are acked cumulatively. After ``resend_after_ms`` without
an ack the unacked window is sent again, so a dropped link resumes where it stopped instead of
starting over; a joiner that lost its staging state asks for a restart (ack index -1), as does
a tail the log trimmed before it was sent. The runtime paces ``pump`` (a few chunks per loop
turn) so that a large state never stalls the master: reading 1,000,000 messages becomes
thousands of small steps between client requests.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

from storage import Storage
from storage.codec import CodecError, decode_many, encode_many
from storage.mutations import MessagesRestored

from cluster import decisions
from cluster.replication.log import ReplicationLog
from cluster.replication.messages import Action, Rejected, Send, SnapshotAck, SnapshotChunk


@dataclass(frozen=True, slots=True)
class TransferDone:
    """Sender side: the joiner holds the state exactly at log position ``at_seq`` (the last
    chunk's); stream to it from ``at_seq + 1``."""

    replica: str
    at_seq: int
    records: int
    bytes: int
    started_ms: int
    finished_ms: int


class TransferSender:
    def __init__(self, replica: str, epoch: int, new_id: Callable[[], int], storage: Storage,
                 log: ReplicationLog, now_ms: int, *, chunk_records: int = 2_000, window: int = 8,
                 resend_after_ms: int = 1_000, chunk_bytes: int = 256 * 1024,
                 cut_staged: Callable[[int], list[Action]] | None = None):
        self.replica = replica
        self.epoch = epoch
        self._new_id = new_id
        self._storage = storage
        self._log = log
        # The first chunk is small (its record size is unknown yet: a record is a queue or a
        # group of up to 64 KiB of messages); later ones adapt to bytes.
        self.chunk_records = min(chunk_records, 4)
        self.max_chunk_records = chunk_records
        # Chunks are bounded in bytes too (aiming at chunk_bytes, adapted from the last chunk's
        # bytes per record): 2,000 records of 1 KB messages made 2 MB frames, a window of 16 MB,
        # which a slow link took seconds to drain while heartbeats queued behind it.
        self.chunk_bytes = chunk_bytes
        self.window = window
        self.resend_after_ms = resend_after_ms
        # A master's operations executed on the storage but not yet in the log: cut them into it
        # (the actions that go with that) before the last chunk's position is fixed.
        self._cut_staged = cut_staged
        self.started_ms = now_ms
        self._begin(now_ms)

    def _begin(self, now_ms: int) -> None:
        # A fresh id per pass: acks of an abandoned pass may still be in flight and must not be
        # taken for acks of this one.
        self.transfer_id = self._new_id()
        self.at_seq = self._log.last_seq
        self.at_epoch = self._log.last_epoch
        self._records: Iterator = self._storage.iter_snapshot()
        self._read_all = False      # every record is read: tail chunks follow
        self._tail_from = self.at_seq + 1
        self._log.pin(self, self._tail_from)
        self._next_index = 0
        self._unacked: deque[SnapshotChunk] = deque()
        self._exhausted = False     # the last chunk is built
        self.end_seq: int | None = None   # the position it names
        self._last_ack_ms = now_ms
        self._resend_wait = self.resend_after_ms
        self.sent_records = 0
        self.sent_bytes = 0

    def release(self) -> None:
        """The transfer is abandoned: the log may drop what it kept for the tail."""
        self._log.unpin(self)

    @property
    def done(self) -> bool:
        return self._exhausted and not self._unacked

    def pump(self, now_ms: int, max_chunks: int = 1) -> list[Action]:
        """Read and send up to ``max_chunks`` more chunks, as the window allows."""
        out: list[Action] = []
        while not self._exhausted and len(self._unacked) < self.window and max_chunks > 0:
            if self._read_all:
                chunk = self._tail_chunk(now_ms, out)
                if chunk is None:
                    continue     # the tail was trimmed: a new pass began
            else:
                chunk = self._record_chunk()
            self._next_index += 1
            self._unacked.append(chunk)
            self.sent_bytes += len(chunk.records)
            out.append(Send(self.replica, chunk))
            max_chunks -= 1
        return out

    def _chunk(self, blob: bytes, *, last: bool = False, at: tuple[int, int] | None = None) -> SnapshotChunk:
        seq, epoch = at if at is not None else (self.at_seq, self.at_epoch)
        return SnapshotChunk(self.epoch, self.transfer_id, self._next_index, seq, epoch, blob, last)

    def _record_chunk(self) -> SnapshotChunk:
        batch = []
        for rec in self._records:
            batch.append(rec)
            if len(batch) >= self.chunk_records:
                break
        self._read_all = len(batch) < self.chunk_records
        blob = encode_many(batch)
        if batch:
            per_record = max(1, len(blob) // len(batch))
            self.chunk_records = max(1, min(self.max_chunk_records, self.chunk_bytes // per_record))
        self.sent_records += _messages_in(batch)
        return self._chunk(blob)

    def _tail_chunk(self, now_ms: int, out: list[Action]) -> SnapshotChunk | None:
        """The log's entries from ``_tail_from`` on, up to ``chunk_bytes``; the last chunk once
        they reach the log's end, naming that position."""
        if self._cut_staged is not None:
            out += self._cut_staged(now_ms)
        log = self._log
        if self._tail_from < log.first_seq and self._tail_from <= log.last_seq:
            # trimmed past the pin's bound before it was sent: what the read saw can no longer
            # be made exact
            self._begin(now_ms)
            return None
        mutations: list = []
        size = 0
        while self._tail_from <= log.last_seq and size < self.chunk_bytes:
            entries = log.since(self._tail_from, 64)
            if not entries:
                break
            for e in entries:
                mutations += decode_many(e.mutations)
                size += len(e.mutations)
                self._tail_from = e.seq + 1
                if size >= self.chunk_bytes:
                    break
        self.sent_records += len(mutations)
        if self._tail_from <= log.last_seq:
            return self._chunk(encode_many(mutations))
        self._exhausted = True
        self.end_seq = log.last_seq
        log.unpin(self)     # resends reuse the chunks built
        if decisions.ON:
            # a transfer that skipped the tail would leave the joiner ahead of its log
            decisions.note("transfer.snapshot_position", log.last_seq != self.at_seq)
        return self._chunk(encode_many(mutations), last=True, at=(log.last_seq, log.last_epoch))

    def on_ack(self, ack: SnapshotAck, now_ms: int) -> list[Action | TransferDone]:
        if ack.transfer_id != self.transfer_id or ack.epoch != self.epoch:
            return [Rejected(self.replica, f"ack for transfer {ack.transfer_id}, ours is {self.transfer_id}")]
        if ack.index < 0:
            # The joiner lost its staging state (it restarted): the read cannot be rewound, so
            # begin a new one, from the log's position now.
            self._begin(now_ms)
            return self.pump(now_ms, self.window)
        while self._unacked and self._unacked[0].index <= ack.index:
            self._unacked.popleft()
        self._last_ack_ms = now_ms
        self._resend_wait = self.resend_after_ms
        if self.done:
            assert self.end_seq is not None
            return [TransferDone(self.replica, self.end_seq, self.sent_records, self.sent_bytes,
                                 self.started_ms, now_ms)]
        return self.pump(now_ms, self.window)

    def on_tick(self, now_ms: int) -> list[Action]:
        # The unacked window goes again after a silence, with the wait doubling while nothing is
        # acked (reset by any ack): on a link slower than a window per timeout, resending every
        # timeout queued copy after copy, behind which the useful chunks (and the stream's
        # heartbeats) waited. The receiver drops chunks out of order, so after a dropped
        # connection the whole window is needed again.
        if self._unacked and now_ms - self._last_ack_ms >= self._resend_wait:
            self._last_ack_ms = now_ms
            self._resend_wait = min(self._resend_wait * 2, 16 * self.resend_after_ms)
            return [Send(self.replica, c) for c in self._unacked]
        return []


class TransferReceiver:
    """The joiner's side: restores chunks, in order, into a fresh staging storage."""

    def __init__(self, master: str, epoch: int, new_storage: Callable[[], Storage], *, keep_blobs: bool = False):
        self.master = master
        # A journaled member keeps the chunks as they came: they are the snapshot its journal
        # starts again from, without encoding the whole state a second time.
        self.keep_blobs = keep_blobs
        self.blobs: list[bytes] = []
        self.epoch = epoch
        self._new_storage = new_storage
        self.transfer_id: int | None = None
        self.staging: Storage | None = None
        self.expected = 0
        self.finished: SnapshotChunk | None = None
        self.received_records = 0   # of the current transfer, for operators
        self.received_bytes = 0

    def on_chunk(self, sender: str, chunk: SnapshotChunk) -> list[Action]:
        if sender != self.master or chunk.epoch != self.epoch:
            return [Rejected(sender, f"snapshot chunk from {sender} in epoch {chunk.epoch}")]
        if chunk.transfer_id != self.transfer_id or (chunk.index == 0 and self.expected == 0):
            if chunk.index != 0:
                # A transfer we hold no staging state for: ask the sender to begin again.
                return [Send(sender, SnapshotAck(self.epoch, chunk.transfer_id, -1))]
            self.transfer_id = chunk.transfer_id
            self.staging = self._new_storage()
            self.expected = 0
            self.finished = None
            self.blobs = []
            self.received_records = self.received_bytes = 0
        if decisions.ON:
            decisions.note("transfer.chunk_order", chunk.index > self.expected)
        if chunk.index != self.expected:
            # a duplicate or one ahead of a lost chunk: repeat where we are, the sender resends
            return [Send(sender, SnapshotAck(self.epoch, chunk.transfer_id, self.expected - 1))]
        try:
            records = decode_many(chunk.records)
        except CodecError as err:
            return [Rejected(sender, f"undecodable snapshot chunk {chunk.index}: {err}")]
        assert self.staging is not None
        self.staging.apply_many(records)
        if self.keep_blobs:
            self.blobs.append(chunk.records)
        self.received_records += _messages_in(records)
        self.received_bytes += len(chunk.records)
        self.expected += 1
        if chunk.last:
            self.finished = chunk
        return [Send(sender, SnapshotAck(self.epoch, chunk.transfer_id, chunk.index))]

    def take(self) -> tuple[Storage, int, int, tuple[bytes, ...]] | None:
        """After the last chunk: the restored storage, the log position to resume from, and the
        chunks' encoded records (kept only with ``keep_blobs``)."""
        if self.finished is None or self.staging is None:
            return None
        done, staging, blobs = self.finished, self.staging, tuple(self.blobs)
        self.finished = self.staging = None
        self.blobs = []
        self.transfer_id = None
        self.expected = 0
        return staging, done.at_seq, done.at_epoch, blobs


def _messages_in(records: list) -> int:
    """What operators count as a transfer's records: one per message (a MessagesRestored group
    counts its messages) and one per other record (a queue, the storage-wide counters)."""
    return sum(len(r.messages) if type(r) is MessagesRestored else 1 for r in records)
