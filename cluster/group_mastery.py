"""Who masters one replication group, and whether this node is its active master (sans-I/O).

With several groups (``[cluster] groups``), a group's master is named by the committed view
(``View.groups``: master and epoch per group), not by Raft leadership, and it is fenced by a
lease of its own: the rule and its proof are in cluster/group_lease.py. This object binds that
rule to one group on one node:

* **Master side.** While the view names this node master of the group, it sends a stamped
  ``GroupBeat`` to every member each heartbeat; acks of its epoch feed the lease. It is *active*
  while the view names it, its master-change sync for that epoch is done (the gate), it has not
  given the epoch up, and the lease holds.
* **Member side.** A member acks beats only from the master it follows, in the epoch it
  follows; a new master's ``SyncRequest`` for a newer epoch (answering it adopts that epoch) is
  held until the guard allows it, and released at the next tick after that. A master asked by a
  newer epoch gives its own up first, in the same step.
* **Forwarding.** A member forwards to the group's master only while it hears its beats.

One group, one node: the node core (cluster/node_core.py) holds one per group and the group
core (cluster/group_core.py) calls it.
"""

from __future__ import annotations

from typing import Any, Callable

from cluster.config import Timing
from cluster.group_lease import GroupLease, SyncGuard
from cluster.replication.messages import GroupBeat, GroupBeatAck, Released, SyncRequest

_INF = float("inf")


class GroupMastery:
    def __init__(self, name: str, group: int, members: tuple[str, ...], timing: Timing, started: float,
                 view_floor: int = 0) -> None:
        self.name = name
        # The newest view this node may have applied before it (re)started: its durable Raft log's.
        # A slot naming it that a view up to there assigned, it may have mastered in an earlier
        # life, with a log it no longer holds whole; mastering that epoch again could write a
        # second entry at a (epoch, seq) some member holds. So it gives such a slot up (and
        # resigns it), and masters only an epoch a later view assigns.
        self.view_floor = view_floor
        self.assigned_at = 0                # the view that assigned the group its current slot
        self.group = group
        self.timing = timing
        self.master: str | None = None      # the committed view's master of the group
        self.epoch = 0                      # ... and its epoch
        self.synced = -1                    # the epoch whose master-change sync finished here
        self.abdicated = -1                 # the newest epoch this node gave up as master
        self.lease = GroupLease(name, frozenset(members), timing.lease)
        # what the member follows is its replica's: the group core binds it (``follow``)
        self.guard = SyncGuard(timing.vote_guard, started, lambda: (None, -1))
        self._next_beat = -_INF
        self._heard = -_INF                 # a beat from the master this node follows, last
        self._held: list[tuple[str, SyncRequest]] = []

    def follow(self, following: Callable[[], tuple[str | None, int]]) -> None:
        """Where to read the master and epoch this node's replica of the group follows."""
        self.guard.following = following

    # -- queries -------------------------------------------------------------------------------

    def active(self, now: float) -> bool:
        e = self.epoch
        return self.master == self.name and self.synced == e and self.abdicated < e \
            and self.lease.epoch == e and self.lease.active(now)

    def inactive_since(self, now: float) -> float:
        """When activity that has just been found over really ended: at the lease's expiry if
        that is what ended it and nobody looked in between."""
        expiry = self.lease.expiry()
        return expiry if expiry is not None and expiry < now else now

    def reason(self, now: float, synced: bool, journal_error: str | None) -> str:
        if journal_error is not None:
            return "its journal failed"
        if self.master is None:
            return "no view has assigned the group yet"
        if self.master != self.name:
            return f"the master is {self.master}"
        if self.abdicated >= self.epoch:
            return "it gave the group up"
        if not synced or self.synced != self.epoch:
            return "it is the new master and is synchronising with a majority of the members"
        if not self.lease.active(now):
            return "its lease expired (lost contact with a majority)"
        return "master of the group with a fresh lease"

    def heard_master(self, now: float) -> bool:
        t = self.timing
        return now - self._heard < t.election_min + t.heartbeat

    def counts_self_from_ms(self, epoch: int) -> int:
        """From when the new master of ``epoch`` may count its own position in its sync."""
        return self.guard.self_count_from_ms(epoch)

    # -- events --------------------------------------------------------------------------------

    def install(self, master: str, epoch: int, now: float, view_id: int) -> None:
        """The committed view ``view_id`` names ``master`` for the group in ``epoch``."""
        if master == self.master and epoch == self.epoch:
            return
        if self.master == self.name and epoch > self.epoch:
            self._abdicate(self.epoch)
        if epoch > self.epoch:
            self.guard.knows_newer(epoch)
        self.master, self.epoch = master, epoch
        self.assigned_at = view_id
        if master == self.name:
            if view_id <= self.view_floor:
                self._abdicate(epoch)    # a slot of an earlier life (view_floor)
                return
            self.lease.start(epoch)
            self._next_beat = -_INF

    @property
    def stale(self) -> bool:
        """The view names this node master by a slot of its earlier life (``view_floor``)."""
        return self.master == self.name and self.assigned_at <= self.view_floor

    def members_changed(self, members: tuple[str, ...]) -> None:
        self.lease.members = frozenset(members)

    def opened(self, epoch: int) -> None:
        """This node's master-change sync for ``epoch`` finished (the replication gate)."""
        self.synced = epoch

    def on_frame(self, sender: str, frame: Any, now: float) -> tuple[bool, list[tuple[str, Any]]]:
        """(handled here, frames to send)."""
        t = type(frame)
        if t is GroupBeat:
            ack = self.guard.on_beat(now, sender, frame.epoch, frame.stamp_us)
            if ack is None:
                return True, []
            self._heard = now
            return True, [(sender, ack)]
        if t is GroupBeatAck:
            if self.master == self.name:
                self.lease.on_ack(sender, frame, now)
            return True, []
        if t is Released:
            self.guard.released(sender, frame.epoch)
            return True, []
        if t is SyncRequest:
            if self.master == self.name and self.epoch < frame.epoch:
                self._abdicate(self.epoch)     # give the older epoch up, then answer
            self.guard.knows_newer(frame.epoch)
            # held, also when the view already adopted its epoch (group_lease.py)
            if not self.guard.may_answer(now, frame.epoch):
                self._held.append((sender, frame))
                return True, []
        return False, []

    def tick(self, now: float) -> list[tuple[str, Any]]:
        """The master's beats, every heartbeat."""
        if self.master != self.name or self.abdicated >= self.epoch or now < self._next_beat:
            return []
        beat = self.lease.beat(now)
        if beat is None:
            return []
        self._next_beat = now + self.timing.heartbeat
        return [(m, beat) for m in sorted(self.lease.members) if m != self.name]

    def due(self, now: float) -> list[tuple[str, SyncRequest]]:
        """The held sync requests the guard allows now, in the order they came."""
        if not self._held:
            return []
        due = [(s, f) for s, f in self._held if self.guard.may_answer(now, f.epoch)]
        if due:
            self._held = [x for x in self._held if x not in due]
        return due

    def abdicate(self) -> None:
        """Give the current epoch up for good (a handover's release: ``Released`` may follow)."""
        self._abdicate(self.epoch)

    def _abdicate(self, epoch: int) -> None:
        self.abdicated = max(self.abdicated, epoch)
        self.lease.abdicate(epoch)
