"""The `lease` rare path: votes timed inside a master's lease (sim/scenario.py ``_lease``).

Each step cuts the master's links to every follower one way until a follower stands; in that
instant the voters get the master back while the candidate's vote requests are on their way,
slowed: the voters renew the master's lease just before the requests arrive, which the vote
guard must drop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from sim.net import RAFT
from sim.scenario import LEASE_WAIT_S, Fault

if TYPE_CHECKING:
    from sim.world import World


class Lease:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # a step waiting for a follower to stand

    def step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master's links to every follower one way, and wait for one of
        them to stand (``stood``) or for LEASE_WAIT_S."""
        w = self.world
        cut = deafen_followers(w, "lease", self.step, f, step, tries)
        if cut is None:
            return
        wait = (f, step, *cut)
        self.wait = wait
        w.health.check()
        w.at(w.now + int(LEASE_WAIT_S * 1e6), self._unanswered, wait)

    def _unanswered(self, wait: tuple) -> None:
        w = self.world
        if self.wait is not wait or w.healed:
            return
        self.wait = None
        f, step, _, out = wait
        w.nemesis.restore_links(out, "lease", None)
        w.health.check()
        self._next(f, step)

    def stood(self, name: str) -> None:
        """``name`` stands for election (sim/elections.py): a step waiting for a follower other
        than its master to stand goes on."""
        w = self.world
        wait = self.wait
        if wait is not None and name != wait[2] and not w.healed:
            self._vote(wait, name)

    def _vote(self, wait: tuple, candidate: str) -> None:
        """``candidate`` stands now: its vote requests leave after this. The voters get the
        master back at once; the candidate's requests to them are slowed by the step's delay."""
        w = self.world
        f, step, master, out = wait
        self.wait = None
        w.last_fault_at = w.now
        w.reach.counts["lease_votes"] += 1
        for a, b in out:
            if b != candidate:
                w.net.restore(a, b)
        held = [(master, candidate)]
        if f.params["shape"][step] == "bridge":
            w.net.cut(candidate, master)
            held.append((candidate, master))
        us = int(f.params["vote_delay_ms"][step] * 1000)
        slowed = [(candidate, o) for o in w.names if o not in (candidate, master)] if us else []
        for a, b in slowed:
            w.net.add_delay(a, b, us, (RAFT,))
        w.nemesis.note(candidate, "lease_vote", {"master": master, "held": [list(x) for x in held],
                                                 "vote_delay_ms": us // 1000})
        w.health.check()
        w.at(w.now + int(f.params["hold_s"][step] * 1e6), self._heal, f, step, held, slowed, us)

    def _heal(self, f: Fault, step: int, held: list[tuple[str, str]],
              slowed: list[tuple[str, str]], us: int) -> None:
        w = self.world
        if w.healed:
            return
        w.nemesis.undelay(slowed, us, (RAFT,))
        w.nemesis.restore_links(held, "lease", None)
        w.health.check()
        self._next(f, step)

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["hold_s"]):
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), self.step, f, step + 1, 0)


def deafen_followers(w: World, kind: str, again: Callable, f: Fault, step: int,
                     tries: int) -> tuple[str, list[tuple[str, str]]] | None:
    """A lease or gc step's start: cut the master of the moment's links to every follower
    one way (they stop hearing it, it still hears them). None while there is no master
    (``again`` is tried every 0.1 s, 30 times at most)."""
    if w.healed:
        return None
    m = w.master()
    if m is None:
        if tries < 30:
            w.at(w.now + 100_000, again, f, step, tries + 1)
        return None
    w.last_fault_at = w.now
    out = [(m.name, o) for o in w.names if o != m.name]
    for a, b in out:
        w.net.cut(a, b)
    w.nemesis.note(m.name, "one_way", {"links": [list(x) for x in out], f"{kind}_step": step})
    return m.name, out
