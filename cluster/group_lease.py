"""A replication group's lease and sync guard: why two masters of one group are never active at once.

With queue groups, the master of a group need not be the Raft leader, so Raft's lease and vote
guard (lease.py) do not fence it. Each group is fenced on its own mutation stream instead, by
the same argument on the same clock assumption.

Definitions, per group g (all times are seconds of a node's own monotonic clock; no clock is
ever compared with another node's clock):

* h   heartbeat period (Timing.heartbeat): the master of g beats at least this often.
* D   lease (Timing.lease).
* Gd  sync guard (Timing.vote_guard): the same value as Raft's vote guard, so that
      Timing.validate's D(1 + rho) < Gd(1 - rho) covers both.
* rho bound on the relative drift of two monotonic clocks (Timing.max_drift).

The lease (``GroupLease``, the master's side). The master M of g in epoch e sends every member
``GroupBeat(e, s)``, s being M's clock at sending. M holds g's lease until q + D, where q is the
newest stamp such that acks of stamps >= q, carrying e, came from enough members to make a
majority of the configured members together with M. Acks of another epoch count for nothing.
M is *active* for g only while it holds the lease, has not abdicated e (once abdicated, never
again in e), the committed view names it master of g in e, and its sync for (g, e) finished;
the last two are the group core's to check.

The guard (``SyncGuard``, a member's side). A member acks ``GroupBeat(e)`` only from the master
it follows and only in the epoch it has adopted (the replica's ``master`` and ``epoch``, both
single-valued, so it never acks two epochs at once), and records the ack's time before the ack
leaves. It stops acking e once it knows of a newer epoch of g (its applied view says so, or a
``SyncRequest(e' > e)`` arrived) or e's master released it. It answers a ``SyncRequest(e')``,
which adopts e' (sync.py, step 1), only Gd after the last beat it acked of any epoch older than
e', and not before Gd after its own start (startup quiet); until then the request is held. A
new master counts its own position in its sync (SyncCoordinator's ``counts_self_from_ms``) only
from the same time. Shortcut: the acks of an epoch e whose master, the one acked or followed in
e, sent ``Released(e)`` hold no answer back (those of other epochs still do); a master sends
``Released(e)`` only once it has abdicated e for good. Adopting an epoch through the view
answers nothing, so the guard does not apply there; the request of that epoch which follows is
held like any other (the replay in the tests finds an overlap when it is not).

The old master: a ``SyncRequest(e' > e)`` reaching M itself makes M abdicate e before it
answers, in the same core step.

Claim: if C becomes active for g in epoch e' > e, then at that real time M's lease for (g, e)
has expired, or M is inactive in e for good.

Argument. Let q be the stamp M's lease rests on, and Q1 the majority that acked stamps >= q in
e. C is active only after its sync, which needs answers to ``SyncRequest(e')`` from a majority
Q2 of the configured members, C counted (amnesiac answers count only when every member
answered, and then M answered too). Q1 and Q2 intersect; take A in both.

1. A = M. M answered e' only after abdicating e, in the same step: M was inactive for good
   before C was synced.
2. A != M. A acked a stamp s >= q at real time r_A >= s (it was received after it was sent),
   while it still followed e: once it has adopted e' it acks no beat of e. So A's answer to e'
   (or C counting itself, if A = C) came after r_A, and the guard put it at A-clock >= the ack
   + Gd, that is at real time >= r_A + Gd(1 - rho) >= q + Gd(1 - rho). The exception is the
   shortcut, when A held M's ``Released(e)``, which M sent only once inactive in e for good.

M's lease ends at M-clock q + D, that is at real time <= q + D(1 + rho) < q + Gd(1 - rho).
Each (g, e) has one master, from the committed view; a node that holds g in e and later in e'
abandons e when it installs e', in the same core.

Pauses: a master that is paused (SIGSTOP) cannot be fooled on resuming. Acks that queued up
while it was stopped carry the stamps of beats sent before the pause, so they do not extend
the lease; stale or reordered acks cannot either, since stamps are compared, not arrival
times. An ack of a stamp newer than any this master sent in its epoch (a previous process's,
whose monotonic clock a reboot reset) counts for nothing.

Restarts: a restarted member has lost the times of its acks, but the startup quiet of Gd covers
the acks it sent before the crash. It has lost the epoch it adopted too, and the argument also
needs it never to ack a beat of an epoch older than one it answered before the crash. The view
naming e' is committed before any ``SyncRequest(e')`` is sent, so a restarted member that acks
only once it has applied the views of its durable Raft log (the state-dir, which lease.py
requires for the same reason) keeps that; the group core feeds ``following()`` accordingly.

Defaults (Timing): h = 0.05, D = 0.15, Gd = 0.18, rho = 0.001, so D(1 + rho) = 0.15015 <
Gd(1 - rho) = 0.17982: a 30 ms margin, as for the master lease.
"""

from __future__ import annotations

import math
from typing import Callable

from cluster.lease import LeaseTracker
from cluster.replication.messages import GroupBeat, GroupBeatAck

US = 1_000_000


class GroupLease:
    """The master's side of one group's lease: stamps beats, takes acks, says whether it holds.

    Pure, driven by the caller's clock (seconds). ``members`` is the configured members, the
    master itself among them."""

    def __init__(self, self_name: str, members: frozenset[str], duration: float) -> None:
        self.members = members
        self.tracker = LeaseTracker(self_name, duration)
        self._abdicated = -1        # the newest epoch given up for good
        self._newest_stamp_us = -1  # the newest stamp sent in the current epoch

    @property
    def epoch(self) -> int:
        return self.tracker.term

    def start(self, epoch: int) -> None:
        """Master of the group in ``epoch`` from now: nothing acked yet."""
        self.tracker.reset(epoch)
        self._newest_stamp_us = -1

    def abdicate(self, epoch: int) -> None:
        """Inactive in ``epoch`` (and every older one) for good."""
        self._abdicated = max(self._abdicated, epoch)

    def beat(self, now: float) -> GroupBeat | None:
        """The beat to send every member now; None when there is no epoch to hold."""
        if self.tracker.term < 0 or self.tracker.term <= self._abdicated:
            return None
        # Rounded down: a stamp never later than the sending, which the argument needs.
        stamp_us = math.floor(now * US)
        self._newest_stamp_us = max(self._newest_stamp_us, stamp_us)
        return GroupBeat(self.tracker.term, stamp_us)

    def on_ack(self, peer: str, ack: GroupBeatAck, now: float) -> bool:
        """Take a member's ack; False when it counts for nothing (another epoch, a stamp newer than
        any we sent)."""
        if ack.stamp_us > self._newest_stamp_us:
            return False
        return self.tracker.on_ack(peer, ack.epoch, ack.stamp_us / US, now)

    def expiry(self) -> float | None:
        """When the lease ends, on this node's clock; None while it rests on no majority."""
        if self.tracker.term < 0 or self.tracker.term <= self._abdicated:
            return None
        return self.tracker.expiry(self.members)

    def active(self, now: float) -> bool:
        expiry = self.expiry()
        return expiry is not None and now < expiry


class SyncGuard:
    """A member's side of one group's lease: which beats it acks, and when it may join a newer
    epoch's sync. Pure, driven by the caller's clock (seconds).

    ``following()`` is the (master, epoch) the member follows: its replica's ``master`` and
    ``epoch`` (replica.py), or its own name and epoch while it is the group's master."""

    def __init__(self, guard: float, started_at: float,
                 following: Callable[[], tuple[str | None, int]]) -> None:
        self.guard = guard
        self.started_at = started_at
        self.following = following
        self._acks_from = 0   # no beat of an older epoch is acked
        # epoch -> (its master, when we last acked one of its beats), while that still holds
        # a newer epoch's answer back; and those of them whose master released them
        self._acked: dict[int, tuple[str, float]] = {}
        self._released: set[int] = set()

    def on_beat(self, now: float, master: str, epoch: int, stamp_us: int) -> GroupBeatAck | None:
        """The ack to send back, or None: a beat from a master we do not follow in ``epoch``."""
        if epoch < self._acks_from or (master, epoch) != self.following():
            return None
        for e in [e for e, (_, at) in self._acked.items() if at + self.guard <= now]:
            del self._acked[e]         # it can hold nothing back any more
            self._released.discard(e)
        self._acked[epoch] = (master, now)   # recorded before the ack leaves
        return GroupBeatAck(epoch, stamp_us)

    def knows_newer(self, epoch: int) -> None:
        """A newer ``epoch`` of the group exists (the applied view, or a sync request held or
        answered): no beat of an older epoch is acked from now on."""
        self._acks_from = max(self._acks_from, epoch)

    def released(self, master: str, epoch: int) -> None:
        """``master`` abdicated ``epoch`` for good: its acks no longer hold a newer epoch's
        answer back. Only the master we acked (or follow) in that epoch can release it."""
        acked = self._acked.get(epoch)
        if acked is not None and acked[0] == master:
            self._released.add(epoch)
        elif (master, epoch) != self.following():
            return
        self._acks_from = max(self._acks_from, epoch + 1)

    def due_at(self, epoch: int) -> float:
        """When a ``SyncRequest(epoch)`` may be answered, or the new master of ``epoch`` count
        itself: Gd after our start and after the last ack we gave of an older, unreleased epoch."""
        held = [at for e, (_, at) in self._acked.items() if e < epoch and e not in self._released]
        return max([self.started_at, *held]) + self.guard

    def may_answer(self, now: float, epoch: int) -> bool:
        return now >= self.due_at(epoch)

    def self_count_from_ms(self, epoch: int) -> int:
        """``due_at`` for the new master of ``epoch`` itself, as SyncCoordinator's
        ``counts_self_from_ms``: rounded up, since the node's ms clock is rounded down."""
        return math.ceil(self.due_at(epoch) * 1000)
