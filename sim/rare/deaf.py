"""The `deaf` rare path: followers deaf to the master (sim/scenario.py ``_deaf``).

A minority of followers stop hearing the master (its links to them cut one way) until one of
them asks for pre-votes, or for the step's hold; the others still hear the master and refuse
them, so no deaf node may stand (sim/elections.py judges the stand).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World


class Deaf:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # a step waiting for a deaf follower's pre-vote

    def step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master's links to ``deaf`` of its followers one way (they
        still reach it), until one of them asks for pre-votes (``pre_voting``), or for the
        step's hold: the heal then races the master's next heartbeat with the pre-vote's
        answers, which the master must refuse."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is None:
            if tries < 30:
                w.at(w.now + 100_000, self.step, f, step, tries + 1)
            return
        w.last_fault_at = w.now
        rng = random.Random(f"{f.params['pick']}:{step}")
        deaf = sorted(rng.sample([o for o in w.names if o != m.name], f.params["deaf"][step]))
        links = [(m.name, d) for d in deaf]
        for a, b in links:
            w.net.cut(a, b)
        w.nemesis.note(m.name, "one_way", {"links": [list(x) for x in links], "deaf_step": step})
        w.health.check()
        wait = (f, step, links, frozenset(deaf))
        self.wait = wait
        w.at(w.now + int(f.params["hold_s"][step] * 1e6), self._heal, wait)

    def pre_voting(self, name: str) -> None:
        """``name`` sends its pre-vote requests now (sim/node.py)."""
        w = self.world
        wait = self.wait
        if wait is not None and name in wait[3] and not w.healed:
            w.reach.counts["deaf_heals"] += 1
            self._heal(wait)

    def _heal(self, wait: tuple) -> None:
        w = self.world
        if self.wait is not wait or w.healed:
            return
        self.wait = None
        f, step, links, _ = wait
        w.nemesis.restore_links(links, "deaf", None)
        w.health.check()
        if step + 1 < len(f.params["hold_s"]):
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), self.step, f, step + 1, 0)
