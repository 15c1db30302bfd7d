"""Master change: a new master does not serve until it holds everything a majority acknowledged.

Sans-I/O, run by the new master of ``epoch`` before it opens the membership layer's
"replication" gate:

1. Ask every member for its log position (``SyncRequest``); answering adopts the new epoch, so
   from then on the member refuses the deposed master's frames (fencing).
2. With positions from a majority (the new master counts itself), the most advanced position
   by (last_epoch, last_seq) is the truth. Why that is safe: an operation acknowledged under
   ``majority`` sits in the logs of a majority; any two majorities intersect, so some answering
   member holds it. Entries are only written by the master of their epoch, in seq order, and a
   member accepts them only in order from that master; so two logs that agree on an entry's
   (seq, written_epoch) agree on everything before it (Raft's log-matching property), and the
   member with the highest (last_epoch, last_seq) holds every entry any majority acknowledged.
3. If the new master is behind the truth, it fetches the missing entries from its holder,
   checking first that its own last entry is on the truth's history (same written_epoch at the
   same seq). If it is not, or the holder no longer has the entries, it takes the holder's
   snapshot instead (``TransferFrom``), asked for again if no chunk comes for a while.
   A member that restarted with empty memory (``SyncStatus.amnesiac``) lost what it acknowledged,
   so the intersection argument does not hold for it: its answer is recorded but does not count
   towards the majority, unless every configured member has answered (then nothing is missing
   that any member could still supply). Once a serving master has brought it up to date it holds
   a prefix of a synced master's history and counts again (core.py clears the flag).
   The master of a replication group that is not the Raft leader counts itself the same way
   until ``counts_self_from_ms``: its own position is an answer to its own sync, and the
   group's sync guard (cluster/group_lease.py) holds such an answer until the leases it acked
   of older epochs have surely run out. None (the default, and a single group's Raft-leased
   master): it counts from the start.
4. ``Synced`` lists the members whose logs are a prefix of the master's (streaming continues
   from their position) and the divergent ones (a deposed master's unacknowledged tail): those
   are reset by state transfer.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage import Storage

from cluster import decisions
from cluster.lease import majority
from cluster.replication.log import ReplicationLog
from cluster.replication.messages import (
    Action, Batch, Fetch, FetchMiss, Rejected, Send, Synced, SyncRequest, SyncStatus, TransferFrom,
)
from cluster.replication.replica import apply_entry


@dataclass(frozen=True, slots=True)
class Position:
    last_seq: int
    last_epoch: int
    first_seq: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.last_epoch, self.last_seq)


def is_prefix_of(pos: Position, log: ReplicationLog) -> bool | None:
    """Whether a member at ``pos`` holds a prefix of ``log``'s history (None: cannot tell,
    the entry needed for the check was trimmed)."""
    if pos.last_seq == 0:
        return True
    if pos.last_seq > log.last_seq:
        return False
    if pos.last_seq == log.last_seq:
        return pos.last_epoch == log.last_epoch
    entry = log.get(pos.last_seq)
    if entry is None:
        return None
    return entry.written_epoch == pos.last_epoch


class SyncCoordinator:
    COLLECTING, FETCHING, TRANSFERRING, DONE = "collecting", "fetching", "transferring", "done"

    def __init__(self, self_name: str, epoch: int, members: tuple[str, ...], storage: Storage,
                 log: ReplicationLog, *, fetch_limit: int = 256, retry_ms: int = 300, configured: int = 0,
                 amnesiac: bool = False, transfer_retry_ms: int = 4_000,
                 counts_self_from_ms: int | None = None):
        self.self_name = self_name
        self.epoch = epoch
        self.members = tuple(sorted(members))
        # A majority of the configured cluster, not of the view: see AckPolicy.required.
        self.quorum = majority(max(len(self.members), configured))
        self.everyone = max(len(self.members), configured)
        self.amnesiac: set[str] = {self_name} if amnesiac else set()
        self.storage = storage
        self.log = log
        self.fetch_limit = fetch_limit
        self.positions: dict[str, Position] = {self_name: self._own()}
        self.state = self.COLLECTING
        self.truth: str | None = None
        self._truth_pos: Position | None = None
        self.retry_ms = retry_ms
        # Whether our last entry is known to be on the truth's history (the first fetched answer
        # repeats it, or we have none, or a transfer from the truth reset the log). Until then no
        # fetched entry is appended: when that answer was lost and a later one came first, the
        # entry after ours was appended onto a deposed master's divergent tail (the simulator,
        # seed 990 under a 30%-lossy network, lost an acknowledged send that way).
        self._verified = log.last_seq == 0
        self._fetch_until = 0
        self._progress_ms = 0
        # The holder's sender resends lost chunks itself, but a transfer can still stall: the
        # holder dropped its sender, or our request was lost. Without a chunk for this long,
        # the snapshot is asked for again.
        self.transfer_retry_ms = transfer_retry_ms
        self._transfer_progress_ms = 0
        # From then on our own position counts towards the majority (step 3); until then it
        # counts only once every member answered. The first tick from then decides again.
        self.counts_self_from_ms = counts_self_from_ms
        self._uncounted_until = counts_self_from_ms

    def _own(self) -> Position:
        return Position(self.log.last_seq, self.log.last_epoch, self.log.first_seq)

    def start(self, now_ms: int) -> list[Action]:
        self._progress_ms = now_ms
        out: list[Action] = [Send(m, SyncRequest(self.epoch)) for m in self.members if m != self.self_name]
        return out + self._maybe_decide(now_ms)

    def forget(self, member: str, now_ms: int) -> list[Action]:
        """A member's link dropped: what it answered may be gone (it may come back restarted,
        empty). Its position no longer counts, and if it was the truth we were fetching from or
        taking a snapshot of, the decision is made again from what is left. (The simulator, seed
        920: a truth holder killed and restarted mid-sync handed over its empty state, which
        replaced the syncing master's, again and again.)"""
        if member == self.self_name or self.state == self.DONE:
            return []
        self.positions.pop(member, None)
        self.amnesiac.discard(member)
        if self.state != self.COLLECTING and member == self.truth:
            self.state = self.COLLECTING
            self.truth = self._truth_pos = None
            self.positions[self.self_name] = self._own()
            self._verified = self.log.last_seq == 0
            self._fetch_until = 0
            return self._maybe_decide(now_ms)
        return []

    def ask_again(self, member: str) -> list[Action]:
        """A member (re)connected while we were still collecting: ask it again."""
        if self.state == self.COLLECTING and member in self.members and member not in self.positions:
            return [Send(member, SyncRequest(self.epoch))]
        return []

    def on_frame(self, sender: str, frame: object, now_ms: int) -> list[Action]:
        if getattr(frame, "epoch", None) != self.epoch:
            return [Rejected(sender, f"sync frame for epoch {getattr(frame, 'epoch', None)}, ours is {self.epoch}")]
        if isinstance(frame, SyncStatus):
            if sender not in self.members:
                return [Rejected(sender, "not a member of the view")]
            self.positions[sender] = Position(frame.last_seq, frame.last_epoch, frame.first_seq)
            if frame.amnesiac:
                self.amnesiac.add(sender)
            else:
                self.amnesiac.discard(sender)
            return self._maybe_decide(now_ms)
        if self.state == self.FETCHING and sender == self.truth:
            if isinstance(frame, FetchMiss):
                return self._transfer_from(sender, now_ms)
            if isinstance(frame, Batch):
                return self._fetched(sender, frame, now_ms)
        return [Rejected(sender, f"unexpected {type(frame).__name__} while {self.state}")]

    def restored(self, now_ms: int) -> list[Action]:
        """The runtime restored the truth holder's snapshot and reset the log to its position
        (the snapshot may already be older than the holder's log end: fetch the rest)."""
        if self.state != self.TRANSFERRING:
            return []
        self.positions[self.self_name] = self._own()
        self._verified = True     # the log was reset to a position of the truth's own history
        self._fetch_until = self.log.last_seq
        self._progress_ms = now_ms
        return self._next_fetch(now_ms)

    # --- internals ------------------------------------------------------------------------------

    def _maybe_decide(self, now_ms: int) -> list[Action]:
        if self.state != self.COLLECTING or not self.has_quorum(now_ms):
            return []
        own = self.positions[self.self_name]
        self.truth = max(self.positions, key=lambda n: (self.positions[n].key, n == self.self_name))
        if decisions.ON:
            _note_truth(self.positions, self.self_name, self.truth)
        self._truth_pos = self.positions[self.truth]
        if self.truth == self.self_name or self._truth_pos.key <= own.key:
            self.truth = self.self_name
            return self._finish()
        if own.last_seq and own.last_seq < self._truth_pos.first_seq:
            # The holder no longer has our last entry: we cannot check that we are on its
            # history, nor fetch from there.
            return self._transfer_from(self.truth, now_ms)
        # Fetch from our own last entry (inclusive) so that the first answer proves we share it.
        self._progress_ms = now_ms
        return self._fetch(max(own.last_seq, 1))

    def has_quorum(self, now_ms: int) -> bool:
        quorate = self._quorate(self._self_counts(now_ms))
        if decisions.ON:
            decisions.note("sync.quorum", quorate != (self.quorum <= len(self.positions)))
        return quorate

    def _self_counts(self, now_ms: int) -> bool:
        """Whether our own position counts towards the majority yet (it does from then on)."""
        if self._uncounted_until is not None and now_ms >= self._uncounted_until:
            self._uncounted_until = None
        return self._uncounted_until is None

    def _quorate(self, self_counts: bool) -> bool:
        uncounted = self.amnesiac if self_counts else self.amnesiac | {self.self_name}
        counted = sum(1 for n in self.positions if n not in uncounted)
        return counted >= self.quorum or len(self.positions) >= self.everyone

    def hand_on_to(self, reachable: frozenset[str]) -> str | None:
        """An amnesiac master's way out of a sync it cannot finish: every member it reaches has
        answered, and without its own position (it counts in no quorum) they are no majority. A
        member that answered with its memory intact may reach the members this one cannot (a
        bridge), and its own position counts there: the most advanced such member, to hand
        Raft leadership to. None while this sync may still finish, or nobody is better placed."""
        if self.state != self.COLLECTING or self.self_name not in self.amnesiac:
            return None
        if self._quorate(self_counts=False):   # amnesiac: our own position counts for nothing here
            return None
        waiting = any(m not in self.positions for m in self.members if m in reachable)
        if decisions.ON:
            decisions.note("sync.hand_on", waiting)
        if waiting:
            return None
        intact = [(p.key, n) for n, p in self.positions.items() if n not in self.amnesiac]
        return max(intact)[1] if intact else None

    def _fetched(self, sender: str, frame: Batch, now_ms: int) -> list[Action]:
        log = self.log
        if frame.seq == log.last_seq and log.last_seq:
            if decisions.ON:
                decisions.note("sync.fetch_verify", log.last_epoch != frame.written_epoch)
            if frame.written_epoch != log.last_epoch:
                return self._transfer_from(sender, now_ms)   # our tail is not on the truth's history
            self._verified = True
            self._progress_ms = now_ms
            return self._next_fetch(now_ms)
        if frame.seq != log.last_seq + 1 or not self._verified:
            return []   # a duplicate, or ahead of a lost frame: on_tick asks again
        rejected = apply_entry(self.storage, log, frame, now_ms)
        if rejected:
            return [Rejected(sender, rejected)]
        self._progress_ms = now_ms
        return self._next_fetch(now_ms)

    def _next_fetch(self, now_ms: int) -> list[Action]:
        assert self._truth_pos is not None and self.truth is not None
        if self.log.last_seq >= self._truth_pos.last_seq:
            return self._finish()
        if self.log.last_seq < self._fetch_until:
            return []   # the rest of the outstanding fetch is on its way
        return self._fetch(self.log.last_seq + 1)

    def _fetch(self, from_seq: int) -> list[Action]:
        self.state = self.FETCHING
        self._fetch_until = from_seq + self.fetch_limit - 1
        return [Send(self.truth, Fetch(self.epoch, from_seq, self.fetch_limit))]  # type: ignore[arg-type]

    def chunk_arrived(self, now_ms: int) -> None:
        if self.state == self.TRANSFERRING:
            self._transfer_progress_ms = now_ms

    def _transfer_from(self, holder: str, now_ms: int) -> list[Action]:
        self.state = self.TRANSFERRING
        self._transfer_progress_ms = now_ms
        return [TransferFrom(holder)]

    def on_tick(self, now_ms: int) -> list[Action]:
        """Frames get lost: ask again after ``retry_ms`` without progress (``transfer_retry_ms``
        without a snapshot chunk)."""
        if self.state == self.TRANSFERRING:
            if now_ms - self._transfer_progress_ms < self.transfer_retry_ms:
                return []
            assert self.truth is not None
            return self._transfer_from(self.truth, now_ms)
        if self._uncounted_until is not None and self._self_counts(now_ms):
            decided = self._maybe_decide(now_ms)   # our own position counts from now on
            if decided:
                return decided
        if now_ms - self._progress_ms < self.retry_ms:
            return []
        self._progress_ms = now_ms
        if self.state == self.COLLECTING:
            return [Send(m, SyncRequest(self.epoch)) for m in self.members
                    if m != self.self_name and m not in self.positions]
        if self.state == self.FETCHING:
            # until our last entry is verified, ask for it again (inclusive), not past it
            return self._fetch(self.log.last_seq + 1 if self._verified else max(self.log.last_seq, 1))
        return []

    def _finish(self) -> list[Action]:
        self.state = self.DONE
        positions: list[tuple[str, int]] = []
        divergent: list[str] = []
        for name, pos in sorted(self.positions.items()):
            if name == self.self_name:
                continue
            if decisions.ON:
                decisions.note("sync.divergent", seq_only_prefix_differs(pos, self.log))
            if is_prefix_of(pos, self.log):
                positions.append((name, pos.last_seq))
            else:
                divergent.append(name)
        return [Synced(self.epoch, self.log.last_seq, tuple(positions), tuple(divergent),
                       tuple(sorted(self.amnesiac - {self.self_name})))]


def _note_truth(positions: dict[str, Position], self_name: str, truth: str) -> None:
    """sync.most_advanced: the truth by (last_seq, last_epoch) instead (decisions.py)."""
    alt = max(positions, key=lambda n: ((positions[n].last_seq, positions[n].last_epoch), n == self_name))
    decisions.note("sync.most_advanced", positions[alt].key != positions[truth].key)


def seq_only_prefix_differs(pos: Position, log: ReplicationLog) -> bool:
    """Whether "no longer than the log" (seq only) says prefix where ``is_prefix_of`` does not
    (is_prefix_of's steps, with the entry read through ``since`` so that log.lookup counts
    only the real lookups)."""
    if pos.last_seq == 0 or pos.last_seq > log.last_seq:
        return False
    if pos.last_seq == log.last_seq:
        return pos.last_epoch != log.last_epoch
    held = log.since(pos.last_seq, 1)
    return not held or held[0].written_epoch != pos.last_epoch
