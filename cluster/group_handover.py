"""A group master giving its group up, sans-I/O: the handover and the resignation.

With several groups (``[cluster] groups``), the Raft leader's views name each group's master
(cluster/assignment.py). A master gives its group up in one of two ways:

* **Handover** (``start``): today's step-down, per group. The leader's balance step asks for it
  (a ``HandOver`` frame, or its own ``HandOverRequested``), and so does an operator's
  ``step-down --group N [--to X]``. The master abdicates: nothing more executes in the group
  here, and clients get the retryable refusal. It cuts what is staged and keeps streaming until
  the target (named, or else the first connected replica, by name, that has it all) has acked the
  whole log. Then it gives the epoch up for good, sends ``Released`` to every member (the guard's
  shortcut, cluster/group_lease.py: a member may answer the target's sync at once, since the old
  master will never serve that epoch again) and tells the Raft leader, whose next view moves the
  group to the target in a newer epoch. The target has everything, so its sync fetches nothing.
  Waiting operations complete as their acks come. If the target has not caught up within the
  fallback plus an election, the master resumes in its epoch: it never released it, so no
  member skipped its guard (a failed Raft step-down does the same, membership.py).
* **Resignation** (``resign_check``): a master whose group lease has lapsed for ``leader_fallback``
  while the view still names it (it reaches Raft's leader but not a stream majority) says so
  to the leader, again every ``leader_fallback`` while it lasts; the leader then moves the group
  as if its master were unreachable. This is the group's counterpart of pysyncobj's leader
  fallback. A master that released its group resigns it to its target, should the leader have
  missed the release.

One group, one node: the group core (cluster/group_core.py) holds one and calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cluster.membership import GroupReleased, GroupResigned, Record
from cluster.node_actions import Action
from cluster.replication.messages import Released, Resign, Send

if TYPE_CHECKING:
    from cluster.group_core import GroupCore


class GroupHandover:
    def __init__(self, group: GroupCore) -> None:
        self.group = group
        self.handing: tuple[int, str | None, float] | None = None   # (epoch, target or None, since)
        self.stopped = -1                           # the epoch in which execution stopped for it
        self._released: tuple[int, str] | None = None   # (epoch, target) given up for good
        self._lapsed_since: float | None = None     # the named master's group lease lapsed then
        self._resigned = -1                         # the newest epoch resigned to the Raft leader

    def start(self, to: str | None, now: float, out: list[Action], epoch: int | None = None) -> bool:
        """Hand the group over to ``to``. False, with nothing done, unless this node is the
        group's serving master (in ``epoch``, when given) and ``to`` another member."""
        g = self.group
        m = g.mastery
        node = g.node
        if m is None or self.handing is not None or (epoch is not None and epoch != m.epoch) \
                or (to is not None and (to == node.name or to not in node.members)) or not g.serving_now(now):
            return False
        self.handing = (m.epoch, to, now)
        self._abdicate(now)
        out.append(Record(now, "handover", {"epoch": m.epoch, "to": to, "group": g.index}))
        g.cut_staged(now, out)
        self.step(now, out)
        return True

    def reason(self) -> str | None:
        """Why the master does not serve while it hands the group over."""
        m = self.group.mastery
        h = self.handing
        if h is not None and m.master == self.group.node.name and m.epoch == h[0]:   # type: ignore[union-attr]
            return "it is handing the group over"
        return None

    def view_installed(self, master: str, epoch: int) -> None:
        if self.handing is not None and (master, epoch) != (self.group.node.name, self.handing[0]):
            self.handing = None     # the view moved the group: the handover is over

    def step(self, now: float, out: list[Action]) -> None:
        """Release the group once the target holds the whole log; resume when no view moved it
        within the fallback plus an election."""
        if self.handing is None:
            return
        epoch, to, since = self.handing
        g = self.group
        m = g.mastery
        node = g.node
        if m.master != node.name or m.epoch != epoch:   # type: ignore[union-attr]
            self.handing = None
            return
        if self._released is not None and self._released[0] == epoch:
            return     # given up for good: only a view moves the group now
        t = node.timing
        if now - since >= t.leader_fallback + t.election_max:
            self.handing = None
            self.stopped = -1
            out.append(Record(now, "handover_failed", {"epoch": epoch, "to": to, "group": g.index}))
            g.serving_check(now, out)
            return
        target = self._caught_up(to)
        if target is None:
            return
        m.abdicate()   # type: ignore[union-attr]
        self._released = (epoch, target)
        out += [Send(peer, Released(epoch), g.index) for peer in node.members if peer != node.name]
        out.append(Record(now, "released", {"epoch": epoch, "to": target, "group": g.index}))
        self._tell_leader(epoch, target, now, out)

    def resign_check(self, now: float, out: list[Action]) -> None:
        """Resign the group to the Raft leader once its lease has lapsed for ``leader_fallback``."""
        g = self.group
        m = g.mastery
        if m.master != g.node.name or m.lease.active(now):   # type: ignore[union-attr]
            self._lapsed_since = None
            return
        if self._lapsed_since is None:
            self._lapsed_since = now
            return
        if now - self._lapsed_since < g.node.timing.leader_fallback:
            return
        self._lapsed_since = now
        epoch = m.epoch   # type: ignore[union-attr]
        released = self._released
        to = released[1] if released is not None and released[0] == epoch else None
        if self._resigned != epoch:
            self._resigned = epoch
            out.append(Record(now, "resign", {"epoch": epoch, "to": to, "group": g.index}))
        self._tell_leader(epoch, to, now, out)

    # -- internals ---------------------------------------------------------------------------------

    def _abdicate(self, now: float) -> None:
        """The handover's first step: stop executing in the current epoch (until the group moves,
        or the handover fails and the master resumes)."""
        self.stopped = self.group.mastery.epoch   # type: ignore[union-attr]

    def _caught_up(self, to: str | None) -> str | None:
        """The target, once it has acked the whole log over a live link: ``to``, or the first
        connected replica (by name) that has."""
        g = self.group
        mc = g.replication.master_core
        if mc is None:
            return None
        last = g.replication.log.last_seq
        liveness = g.node.liveness
        for name in sorted(mc.replicas):
            r = mc.replicas[name]
            if (to is None or name == to) and r.connected and not r.needs_transfer and r.acked >= last \
                    and liveness.connected(name):
                return name
        return None

    def _tell_leader(self, epoch: int, to: str | None, now: float, out: list[Action]) -> None:
        """Tell the Raft leader this master gave ``epoch`` up: released to ``to``, or resigned."""
        g = self.group
        node = g.node
        ms = node.membership
        if ms.role == "leader":
            event = GroupReleased(now, g.index, epoch, to) if to is not None else GroupResigned(now, g.index, epoch)
            node.membership_event(event, now, out)
        elif ms.leader is not None and ms.leader != node.name and node.liveness.connected(ms.leader):
            out.append(Send(ms.leader, Resign(epoch, to or ""), g.index))
