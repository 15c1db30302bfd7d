"""The `gc` rare path: a master's loop stalled across a vote inside its lease (sim/scenario.py
``_gc``). As in `lease`, the master's followers stop hearing it until one stands; the
candidate's vote request reaches the master inside its lease, and in that instant the master's
event loop stalls while its Raft side runs on, until another node activates (or ``max_s``).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from sim.net import RAFT
from sim.rare.lease import deafen_followers
from sim.scenario import LEASE_WAIT_S, Fault

if TYPE_CHECKING:
    from sim.node import SimNode
    from sim.world import World


class Gc:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # waiting for a stand, a vote request, an activation

    def step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master's links to every follower one way, and wait for one of
        them to stand (``stood``) or for LEASE_WAIT_S, as a lease step does."""
        w = self.world
        cut = deafen_followers(w, "gc", self.step, f, step, tries)
        if cut is None:
            return
        wait = ("stand", f, step, *cut)
        self.wait = wait
        w.health.check()
        w.at(w.now + int(LEASE_WAIT_S * 1e6), self._give_up, wait)

    def stood(self, name: str) -> None:
        """``name`` stands for election (sim/elections.py): a step waiting for a follower other
        than its master to stand goes on."""
        w = self.world
        wait = self.wait
        if wait is not None and wait[0] == "stand" and name != wait[3] and not w.healed:
            self._vote(wait, name)

    def activated(self, node: str) -> None:
        """``node`` activated (its history line): if the master's loop is stalled, it was overtaken."""
        wait = self.wait
        if wait is not None and wait[0] == "stalled" and node != wait[3]:
            self._overtaken(wait)

    def _vote(self, wait: tuple, candidate: str) -> None:
        """``candidate`` stands now: its vote requests leave after this, slowed by the step's
        ``vote_ms`` on every link. The master gets its links back, but for ``nodes // 2 - 1``
        followers besides the candidate that stay deaf to it (they vote for the candidate with
        the master, a majority; the others, with the master, hold its lease)."""
        w = self.world
        _, f, step, master, out = wait
        w.last_fault_at = w.now
        w.reach.counts["gc_votes"] += 1
        others = [o for o in w.names if o not in (master, candidate)]
        rng = random.Random(f"{f.params['pick']}:{step}")
        deaf = sorted(rng.sample(others, len(w.names) // 2 - 1))
        held = [(master, d) for d in deaf]
        for a, b in out:
            if b not in deaf:
                w.net.restore(a, b)
        us = int(f.params["vote_ms"][step] * 1000)
        slowed = [(candidate, o) for o in w.names if o != candidate]
        for a, b in slowed:
            w.net.add_delay(a, b, us, (RAFT,))
        w.nemesis.note(candidate, "gc_vote", {"master": master, "held": [list(x) for x in held],
                                              "vote_delay_ms": us // 1000})
        w.health.check()
        # what the candidate sends after its vote requests goes at the usual speed (behind them)
        w.at(w.now + us, w.nemesis.undelay, slowed, us, (RAFT,))
        wait = ("vote", f, step, master, held, candidate)
        self.wait = wait
        w.at(w.now + us + 200_000, self._give_up, wait)

    def check(self, node: SimNode, sender: str, term: int) -> None:
        """A Raft vote request reaches ``node`` (sim/node.py, before its election core sees it):
        the step's candidate's, at the master while it leads, stalls the master's event loop
        in this instant (its Raft side reads the request on)."""
        w = self.world
        wait = self.wait
        if wait is None or wait[0] != "vote" or w.healed:
            return
        _, f, step, master, held, candidate = wait
        if node.name != master or sender != candidate or node.raft.role != "leader" or term <= node.raft.term \
                or master in w.paused or master in w.down:
            return
        active = node.core.membership.evaluate(w.now_s)[0]
        w.reach.counts["gc_stalls"] += 1
        w.reach.counts["gc_in_lease"] += active
        w.paused.add(master)
        w.running_since.pop(master, None)
        node.freeze(loop_only=True)
        w.nemesis.note(master, "stall", {"gc_step": step, "vote_from": candidate, "active": active})
        w.health.check()
        wait = ("stalled", f, step, master, held)
        self.wait = wait
        w.at(w.now + int(f.params["max_s"][step] * 1e6), self._resume, wait)

    def _overtaken(self, wait: tuple) -> None:
        """Another node activated while the master's loop stalls: it runs again ``after_ms``
        later."""
        w = self.world
        w.reach.counts["gc_overtaken"] += 1
        _, f, step, _, _ = wait
        self.wait = wait = ("resuming",) + wait[1:]
        w.at(w.now + f.params["after_ms"][step] * 1000, self._resume, wait)

    def _resume(self, wait: tuple) -> None:
        w = self.world
        if self.wait is not wait or w.healed:
            return
        self.wait = None
        _, f, step, master, held = wait
        w.resume(master)
        w.nemesis.restore_links(held, "gc", None)
        w.health.check()
        self._next(f, step)

    def _give_up(self, wait: tuple) -> None:
        """No follower stood, or the vote request did not reach the master while it led."""
        w = self.world
        if self.wait is not wait or w.healed:
            return
        self.wait = None
        f, step = wait[1], wait[2]
        w.nemesis.restore_links(wait[4], "gc", None)
        w.health.check()
        self._next(f, step)

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["vote_ms"]):
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), self.step, f, step + 1, 0)
