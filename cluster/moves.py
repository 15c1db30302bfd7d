"""Moves between replication groups, exactly once: the move driver of one group's master, sans-I/O.

A message that a dead-letter move or a move task sends to a queue of another group leaves its
source into the source group's outbox (storage/outbox.py). From there it reaches the destination
group in steps, each an idempotent internal command on one group taken by the driver of that
group's serving master; a step that tells the other group something waits until what it tells
is committed under ``majority``:

1. source: ``MoveOffer`` of its PENDING entries to the destination's master, once the entry
   is committed at the source;
2. destination: ``AdoptMoved``: the message joins its queue and its move id ``moves_in`` (an id
   there already adds nothing);
3. destination: ``MoveAccepted`` or ``MoveRefused``, once the adopt is committed there;
4. source: ``AcceptOutbox`` (PENDING -> ACCEPTED), or on a refusal ``ReturnOutbox``: the message
   goes back to its source queue;
5. source: ``MoveForget`` to the destination's master, once ACCEPTED is committed;
6. destination: ``ForgetMove``, and ``MoveForgot`` once that is committed;
7. source: ``ClearOutbox``: the entry is gone.

Why each gate. Offered before its commit (1), an entry that a failover of the source loses puts
the message back in its source queue while the destination holds a copy. Answered before the
adopt's commit (3), a failover of the destination loses the copy the source was told it holds.
Forgotten before ACCEPTED is committed at the source (5), a new source master still holding the
entry PENDING offers it again to a destination that no longer remembers it: a second copy.

The gate. Storage does not know log positions, so the driver notes, when it first learns of a
thing that must be committed (an outbox entry it reads, a command it asked for), the log's last
seq at its next ``tick``, and acts once the group's majority-committed seq reaches that.

The caller (cluster/group_moves.py, for the group core) runs a driver only while it is the
group's serving master, a new one per mastership, and guarantees:

* at each ``tick``, every mutation executed on the storage so far is in the log at or below
  ``logged_seq``: it cuts the staged operations into a batch first
  (``ReplicationCore.cut_staged``), as a compaction step does; ``committed_seq`` is the
  majority-committed seq of this mastership;
* each ``Execute`` runs as an internal operation under ``majority``, and ``executed`` reports it
  before the driver's next event;
* the move frames (``FRAMES``) that arrive for this group reach ``frame``; a ``Send`` reaches
  the driver of ``send.group`` on ``send.to`` (this node's own when it masters that group too),
  so the group core passes it on as it is, not tagged with its own group; and the frames of one
  sender to one member arrive in the order sent, or not at all.

Fences. Every step is retried until answered, and each is idempotent, so lost and repeated
frames are harmless. What must never happen is an offer adopted after its move was forgotten,
or after it was refused and returned. Links are FIFO (ZeroMQ over one connection), so a master's
own offers of a move reach the destination before its forget. Offers of
*other* masters are fenced: an offer names the destination's epoch it was sent to (a master of
another epoch drops it) and the source's epoch it came from (a destination master that heard
from a newer master of the source group drops it). A refusal is final within the destination
master that made it (a re-offer is refused again, never adopted), and the source acts on a
refusal only from the destination master it currently offers to: an offer to a later master is
sent only after the source moved on, when that refusal no longer counts.

Failover. Nothing here needs to survive one: a new master of either group resumes from its
storage alone (PENDING entries are offered again, ACCEPTED ones forgotten again, ``moves_in``
answers re-offers), and a new driver starts with a new mastership.

Costs. The driver reads ``outbox_pending`` and ``outbox_accepted`` once per ``retry`` period,
which builds every pending item: 2.2 ms for 10,000 waiting moves (this machine), about 1% of a
core while a destination is unreachable that long. It sends at most ``MAX_ITEMS`` moves per tick,
in frames of at most ``MAX_OFFER_BYTES`` of encoded items (one item at least): 256 small messages
offered cost 2.6 ms, each item encoded twice (once to size the frame). A destination master
remembers the moves it refused, for its life as master: a refusal is rare (the destination
queue was deleted, or is of the other type).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from storage import Storage
from storage.codec import CodecError, decode_many, encode, encode_many
from storage.commands import AcceptOutbox, AdoptMoved, ClearOutbox, ForgetMove, MoveItem, ReturnOutbox
from storage.results import AdoptMovedResult

from cluster.replication.messages import (
    MoveAccepted, MoveForget, MoveForgot, MoveOffer, MoveRefused, Rejected, Send,
)

RETRY_S = 0.2                         # an offer or forget unanswered this long is sent again
MAX_ITEMS = 256                       # moves per frame, and per tick
MAX_OFFER_BYTES = 4 * 1024 * 1024     # encoded items per offer frame (a larger item goes alone)

# what ``MoveDriver.frame`` takes: the node hands each to its driver of the group the frame came for
FRAMES = (MoveOffer, MoveAccepted, MoveRefused, MoveForget, MoveForgot)


@dataclass(frozen=True, slots=True)
class Destination:
    """Where the moves to a queue go: its group, that group's master and the master's epoch."""

    group: int
    master: str
    epoch: int


# --- actions --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Execute:
    """Run this internal command on this group's storage, replicated under ``majority`` whatever
    the queue's ack policy, and report it with ``executed`` before the next event."""

    command: AdoptMoved | AcceptOutbox | ReturnOutbox | ClearOutbox | ForgetMove


# ``Send(to, frame, group)``: for the driver of ``group`` on member ``to``
Action = Execute | Send | Rejected


class _Gate:
    """Things that may act only once the log holds them committed: each joins the open cohort,
    which the next ``mark`` closes with the log's last seq; ``release`` yields, oldest first,
    the things of the cohorts that the committed seq reaches."""

    def __init__(self) -> None:
        self._cohorts: deque[tuple[int, list]] = deque()
        self._open: list = []

    def add(self, thing: Any) -> None:
        self._open.append(thing)

    def mark(self, logged_seq: int) -> None:
        if self._open:
            self._cohorts.append((logged_seq, self._open))
            self._open = []

    def empty(self) -> bool:
        return not (self._open or self._cohorts)

    def release(self, committed_seq: int) -> Iterable[Any]:
        cohorts = self._cohorts
        while cohorts and cohorts[0][0] <= committed_seq:
            yield from cohorts.popleft()[1]


class MoveDriver:
    """The moves of one group, run by its serving master in ``epoch``; a new one per mastership.

    ``master_of(dst_arn)`` says where the moves to that queue go now (None: nowhere yet)."""

    def __init__(self, group: int, epoch: int, master_of: Callable[[str], Destination | None], *,
                 retry: float = RETRY_S) -> None:
        self.group = group
        self.epoch = epoch
        self.master_of = master_of
        self.retry = retry
        self._next_scan = float("-inf")
        # source side: PENDING entries by move id; committed ones wait in ``_ready`` until
        # offered, then in ``_sent`` (ordered by when) until answered or due again
        self._items: dict[str, MoveItem] = {}
        self._offer_gate = _Gate()
        self._ready: dict[str, None] = {}
        self._sent: dict[str, float] = {}
        self._settling: set[str] = set()          # accepted or returned: an Execute is out
        # ACCEPTED entries (move id -> destination ARN); committed ones are forgotten likewise
        self._accepted: dict[str, str] = {}
        self._forget_gate = _Gate()
        self._forget_ready: dict[str, None] = {}
        self._forget_sent: dict[str, float] = {}
        # destination side: answers once their adopt or forget is committed
        self._answer_gate = _Gate()
        # move id -> (member, group) that asked: the answer's address
        self._offered_by: dict[str, tuple[str, int]] = {}
        self._forget_by: dict[str, tuple[str, int]] = {}
        self._adopting: set[str] = set()
        self._refused: dict[str, str] = {}        # move id -> reason, for this mastership
        self._src_epochs: dict[int, int] = {}     # source group -> newest epoch heard from

    def idle(self) -> bool:
        """Nothing to offer, forget or answer: a tick would only scan the outbox."""
        return not (self._items or self._accepted) and self._answer_gate.empty()

    # -- events ----------------------------------------------------------------------------------

    def tick(self, now: float, logged_seq: int, committed_seq: int, storage: Storage) -> list[Action]:
        """Time passes. Every mutation executed on ``storage`` so far is in the log at or below
        ``logged_seq``; ``committed_seq`` is the group's majority-committed seq."""
        if now >= self._next_scan:
            self._next_scan = now + self.retry
            self._scan(storage)
        for gate in (self._offer_gate, self._forget_gate, self._answer_gate):
            gate.mark(logged_seq)
        for move_id in self._offer_gate.release(committed_seq):
            if move_id in self._items and move_id not in self._settling:
                self._ready[move_id] = None
        for move_id in self._forget_gate.release(committed_seq):
            if move_id in self._accepted:
                self._forget_ready[move_id] = None
        out: list[Action] = []
        self._answer(self._answer_gate.release(committed_seq), out)
        self._offer(now, out)
        self._forget(now, out)
        return out

    def frame(self, sender: str, frame: Any) -> list[Action]:
        """A move frame for this group from ``sender``."""
        t = type(frame)
        if t is MoveOffer:
            return self._on_offer(sender, frame)
        if t is MoveForget:
            self._heard_source(frame.src_group, frame.src_epoch)
            for move_id in frame.move_ids:
                self._forget_by[move_id] = (sender, frame.src_group)
            return [Execute(ForgetMove(frame.move_ids))]
        if t is MoveAccepted:
            ids = tuple(i for i in frame.move_ids if i in self._items and i not in self._settling)
            self._settle(ids)
            return [Execute(AcceptOutbox(ids))] if ids else []
        if t is MoveRefused:
            return self._on_refused(sender, frame)
        if t is MoveForgot:
            ids = tuple(i for i in frame.move_ids if i in self._accepted)
            for i in ids:
                self._forget_ready.pop(i, None)
                self._forget_sent.pop(i, None)
            return [Execute(ClearOutbox(ids))] if ids else []
        raise TypeError(f"{t.__name__} is not a move frame")

    def executed(self, command: Any, result: Any) -> None:
        """An ``Execute`` ran (``result``: what the storage answered)."""
        t = type(command)
        if t is AdoptMoved:
            self._adopted(command, result)
        elif t is ForgetMove:
            for move_id in command.move_ids:
                self._answer_gate.add(("forgot", move_id))
        elif t is AcceptOutbox:
            for move_id in command.move_ids:
                item = self._items.pop(move_id, None)
                self._settling.discard(move_id)
                if item is not None:
                    self._accepted[move_id] = item.dst_arn
                    self._forget_gate.add(move_id)
        elif t is ReturnOutbox:
            self._items.pop(command.move_id, None)
            self._settling.discard(command.move_id)
        elif t is ClearOutbox:
            for move_id in command.move_ids:
                self._accepted.pop(move_id, None)

    # -- the source side ---------------------------------------------------------------------------

    def _scan(self, storage: Storage) -> None:
        """Learn the entries this driver has not seen (a new receive's, or all of them at the
        start of a mastership); each waits for the log position noted at this tick."""
        for item in storage.outbox_pending():
            if item.move_id not in self._items and item.move_id not in self._accepted:
                self._items[item.move_id] = item
                self._offer_gate.add(item.move_id)
        for move_id, dst_arn in storage.outbox_accepted():
            if move_id not in self._accepted:
                self._accepted[move_id] = dst_arn
                self._forget_gate.add(move_id)

    def _offer(self, now: float, out: list[Action]) -> None:
        """Offer what is committed and not yet offered, then what is due again, ``MAX_ITEMS``
        at most, each destination's in frames of ``MAX_OFFER_BYTES`` at most."""
        picked = _pick(self._ready, self._sent, now - self.retry, MAX_ITEMS)
        by_dest: dict[Destination, list[MoveItem]] = {}
        for move_id in picked:
            self._sent[move_id] = now
            item = self._items[move_id]
            dest = self.master_of(item.dst_arn)
            if dest is not None:
                by_dest.setdefault(dest, []).append(item)
        for dest, items in by_dest.items():
            for chunk in _chunks(items):
                out.append(Send(dest.master, MoveOffer(self.group, self.epoch, dest.epoch, encode_many(chunk)),
                                dest.group))

    def _forget(self, now: float, out: list[Action]) -> None:
        picked = _pick(self._forget_ready, self._forget_sent, now - self.retry, MAX_ITEMS)
        by_dest: dict[Destination, list[str]] = {}
        for move_id in picked:
            self._forget_sent[move_id] = now
            dest = self.master_of(self._accepted[move_id])
            if dest is not None:
                by_dest.setdefault(dest, []).append(move_id)
        for dest, ids in by_dest.items():
            out.append(Send(dest.master, MoveForget(self.group, self.epoch, tuple(ids)), dest.group))

    def _on_refused(self, sender: str, frame: MoveRefused) -> list[Action]:
        item = self._items.get(frame.move_id)
        if item is None or frame.move_id in self._settling:
            return []
        dest = self.master_of(item.dst_arn)
        if dest is None or (dest.master, dest.epoch) != (sender, frame.dst_epoch):
            return []   # from a master this source has moved on from: its next offer asks anew
        self._settle((frame.move_id,))
        return [Execute(ReturnOutbox(frame.move_id, frame.reason))]

    def _settle(self, move_ids: Iterable[str]) -> None:
        for move_id in move_ids:
            self._settling.add(move_id)
            self._ready.pop(move_id, None)
            self._sent.pop(move_id, None)

    # -- the destination side ----------------------------------------------------------------------

    def _heard_source(self, group: int, epoch: int) -> bool:
        """Whether a frame of ``group``'s master of ``epoch`` is current: none newer was heard."""
        newest = self._src_epochs.get(group, epoch)
        if epoch < newest:
            return False
        self._src_epochs[group] = epoch
        return True

    def _on_offer(self, sender: str, frame: MoveOffer) -> list[Action]:
        if frame.dst_epoch != self.epoch or not self._heard_source(frame.src_group, frame.src_epoch):
            return []   # sent to another master of this group, or by a deposed source master
        try:
            items: list[MoveItem] = decode_many(frame.items, expect=MoveItem)
        except CodecError as err:
            return [Rejected(sender, f"undecodable move offer: {err}")]
        fresh: list[MoveItem] = []
        for item in items:
            move_id = item.move_id
            if move_id in self._adopting:
                continue   # its adopt's answer is on its way
            self._offered_by[move_id] = (sender, frame.src_group)
            if move_id in self._refused:
                self._answer_gate.add(("refused", move_id))
            else:
                self._adopting.add(move_id)
                fresh.append(item)
        return [Execute(AdoptMoved(tuple(fresh)))] if fresh else []

    def _adopted(self, command: AdoptMoved, result: AdoptMovedResult) -> None:
        for move_id in result.accepted:
            self._answer_gate.add(("accepted", move_id))
        for refusal in result.refused:
            self._refused[refusal.move_id] = refusal.reason
            self._answer_gate.add(("refused", refusal.move_id))
        for item in command.items:
            self._adopting.discard(item.move_id)

    def _answer(self, answers: Iterable[tuple[str, str]], out: list[Action]) -> None:
        accepted: dict[tuple[str, int], list[str]] = {}
        forgot: dict[tuple[str, int], list[str]] = {}
        for kind, move_id in answers:
            to = (self._forget_by if kind == "forgot" else self._offered_by).pop(move_id, None)
            if to is None:
                continue   # answered already (a repeated offer's answer went with the first)
            if kind == "refused":
                out.append(Send(to[0], MoveRefused(self.epoch, move_id, self._refused[move_id]), to[1]))
            else:
                (accepted if kind == "accepted" else forgot).setdefault(to, []).append(move_id)
        for (member, group), ids in accepted.items():
            for i in range(0, len(ids), MAX_ITEMS):
                out.append(Send(member, MoveAccepted(tuple(ids[i:i + MAX_ITEMS])), group))
        for (member, group), ids in forgot.items():
            for i in range(0, len(ids), MAX_ITEMS):
                out.append(Send(member, MoveForgot(tuple(ids[i:i + MAX_ITEMS])), group))


def _pick(ready: dict[str, None], sent: dict[str, float], due_before: float, limit: int) -> list[str]:
    """Up to ``limit`` ids: those never sent (oldest first), then those sent at or before
    ``due_before`` (least recently first). The picked leave ``ready``; the caller stamps them
    into ``sent``, which keeps that dict ordered by when each was sent."""
    picked: list[str] = []
    for move_id in ready:
        if len(picked) == limit:
            break
        picked.append(move_id)
    for move_id in picked:
        del ready[move_id]
    for move_id, at in sent.items():
        if len(picked) == limit or at > due_before:
            break
        picked.append(move_id)
    for move_id in picked:
        sent.pop(move_id, None)
    return picked


def _chunks(items: list[MoveItem]) -> Iterable[list[MoveItem]]:
    """``items`` in runs of at most ``MAX_OFFER_BYTES`` encoded (one item at least)."""
    chunk: list[MoveItem] = []
    size = 0
    for item in items:
        n = len(encode(item))
        if chunk and size + n > MAX_OFFER_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += n
    if chunk:
        yield chunk
