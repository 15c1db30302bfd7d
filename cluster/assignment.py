"""Which member masters each queue group: the Raft leader's planner, a pure function.

A cluster's queues are split into G groups, and the committed view names each group's master and
epoch (``View.groups``, membership.py). The Raft leader decides what its next view says about
them by calling ``plan`` with what it knows now; ``plan`` reads no clock and keeps no state, so
the same input always gives the same plan, in the product and in the simulator.

The rules, in the order ``plan`` applies them:

1. **First view.** Before any view has groups, group g goes to the g-th member of the view in a
   rotation that starts after the proposer. Each member gets at most ceil(G/M) groups, and the
   Raft leader, which also carries Raft's work, gets the fewest when G is not a multiple of M.
2. **Released.** A master that handed its group over (``released``: it has abdicated its epoch
   for good and caught the target up) gets its group moved to that target, if the target is a
   reachable member of the view. A target that is not is treated as in rule 3: the group has
   no master until a view moves it.
3. **Failover, without debounce.** A group whose master is not in the view, not reachable
   (the leader has not heard it within ``group_suspect``) or has resigned the group (its group
   lease lapsed while Raft still reached it) moves at once. It goes to the reachable member,
   other than its master, that first is steady (in the view and reachable for
   ``rebalance_quiet`` without a break), then masters the fewest groups, then comes first in
   the sorted ring of members counted from ``i + 1 + g`` (i: the old master's place). So the
   groups of one dead member spread over the others instead of piling on its neighbour. A
   member that resigned a group is taken only when no other is reachable. Failover may exceed
   the cap; rule 4 restores it.
4. **Balance, with hysteresis.** Only when nothing moved by rules 1-3 and no handover is in
   flight anywhere in the cluster. The target is the steady reachable member with the fewest
   groups; the source is the member with the most. One group (the source's highest) moves
   when the source masters at least two more than the target. A balance move is never a
   reassignment: it is a handover request (``Plan.handover``) that the source carries out
   (abdicate, catch the target up, release), ending in rule 2. Each move lowers the sum of
   squared loads, so balancing stops, and it stops with no two members two groups apart. That
   is the cap: while every configured member is in the view and steady, nobody masters more
   than ceil(G/M). A member above it always has a target two below it, so no separate cap rule
   is needed.

Every group that moves takes epoch max(previous + 1, term): strictly above its previous epoch,
as ``accept_view`` demands, and the term for a group that moves with the Raft leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from cluster.config import Timing

Slots = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class PlanInput:
    count: int                          # G, the cluster's number of groups
    proposer: str                       # the Raft leader making the proposal
    groups: Slots                       # the committed view's (master, epoch) per group; () before the first
    members: tuple[str, ...]            # the members of the view being proposed, sorted
    configured: frozenset[str]          # the Raft configuration
    reachable: frozenset[str]           # heard by the leader within group_suspect, the leader included
    steady_since: Mapping[str, float]   # since when each member has been in the view and reachable, unbroken
    now: float
    term: int
    timing: Timing
    resigned: frozenset[int] = frozenset()    # groups whose master resigned its current epoch
    released: Mapping[int, str] = field(default_factory=dict)  # group -> target, in its current epoch
    handover_in_flight: int | None = None     # the group of the handover the leader asked for, if any


@dataclass(frozen=True, slots=True)
class Plan:
    groups: Slots | None = None             # the next view's groups; None: unchanged
    handover: tuple[int, str] | None = None  # (group, to): ask that group's master to hand it over


def initial(count: int, members: tuple[str, ...], proposer: str, term: int) -> Slots:
    """Rule 1: the groups of a cluster's first view."""
    start = members.index(proposer) + 1 if proposer in members else 0
    return tuple((members[(start + g) % len(members)], term) for g in range(count))


def plan(p: PlanInput) -> Plan:
    if not p.groups:
        return Plan(initial(p.count, p.members, p.proposer, p.term))
    ring = sorted(p.configured | set(p.members))
    steady = frozenset(m for m in p.members
                       if m in p.reachable and p.now - p.steady_since.get(m, p.now) >= p.timing.rebalance_quiet)
    resigners = frozenset(p.groups[g][0] for g in p.resigned)
    loads = {m: 0 for m in p.members}
    for m, _ in p.groups:
        if m in loads:
            loads[m] += 1
    moved = _moves(p, ring, steady, resigners, loads)
    if moved != p.groups:
        return Plan(moved)
    if p.handover_in_flight is None:
        handover = _balance(p, steady, resigners, loads)
        if handover is not None:
            return Plan(handover=handover)
    return Plan()


def _moves(p: PlanInput, ring: list[str], steady: frozenset[str], resigners: frozenset[str],
           loads: dict[str, int]) -> Slots:
    """Rules 2 and 3. Updates ``loads`` as groups move, so the groups of one dead member spread."""
    candidates = [m for m in p.members if m in p.reachable]
    slots = list(p.groups)
    for g, (master, epoch) in enumerate(slots):
        to = p.released.get(g)
        if to is not None and to != master and to in candidates:
            target: str | None = to
        elif master in candidates and g not in p.resigned and to is None:
            continue
        else:
            target = _failover_target(g, master, ring, candidates, steady, resigners, loads)
            if target is None:
                continue
        slots[g] = (target, max(epoch + 1, p.term))
        if master in loads:
            loads[master] -= 1
        loads[target] += 1
    return tuple(slots)


def _failover_target(g: int, master: str, ring: list[str], candidates: list[str], steady: frozenset[str],
                     resigners: frozenset[str], loads: dict[str, int]) -> str | None:
    pool = [c for c in candidates if c != master and c not in resigners] \
        or [c for c in candidates if c != master]
    if not pool:
        return None
    start = (ring.index(master) if master in ring else 0) + 1 + g
    return min(pool, key=lambda c: (c not in steady, loads[c], (ring.index(c) - start) % len(ring)))


def _balance(p: PlanInput, steady: frozenset[str], resigners: frozenset[str],
             loads: dict[str, int]) -> tuple[int, str] | None:
    """Rule 4: at most one handover, from the busiest member to the idlest steady one."""
    targets = [m for m in p.members if m in steady and m not in resigners]
    if not targets:
        return None
    target = min(targets, key=lambda m: loads[m])
    source = max(p.members, key=lambda m: loads[m])
    if loads[source] < loads[target] + 2:
        return None
    return max(g for g, (m, _) in enumerate(p.groups) if m == source), target
