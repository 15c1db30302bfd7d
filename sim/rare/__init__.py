"""The rare paths: faults timed on what the cores do, not on the clock (sim/scenario.py draws them,
``RARE_PROBABILITY``, and describes what each plays).

Each path is a small state machine of its own (one module each), started by the fault of its
kind that the nemesis hands over (``starts``), going on by timers and by hooks: the nodes call
them as a frame arrives or an operation runs (sim/node.py), the world as a history line is
written, the elections' judge as a node stands. A path's waits live on its own object, so that
a hook that finds nothing waiting costs one attribute read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from sim.rare.chain import Chain
from sim.rare.comeback import Comeback
from sim.rare.deaf import Deaf
from sim.rare.fork import Fork
from sim.rare.gc import Gc
from sim.rare.handoff import Handoff
from sim.rare.hung import Hung
from sim.rare.lead import Lead
from sim.rare.lease import Lease
from sim.rare.race import Race
from sim.rare.relink import Relink
from sim.rare.replay import Replay
from sim.rare.turn import Turn
from sim.rare.wiped import Wiped
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World


class RarePaths:
    def __init__(self, world: World) -> None:
        self.chain = Chain(world)
        self.lead = Lead(world)
        self.fork = Fork(world)
        self.deaf = Deaf(world)
        self.race = Race(world)
        self.handoff = Handoff(world)
        self.turn = Turn(world)
        self.wiped = Wiped(world)
        self.hung = Hung(world)
        self.replay = Replay(world)
        self.relink = Relink(world)
        self.gc = Gc(world)
        self.lease = Lease(world)
        self.comeback = Comeback(world)
        # each path's first step, by the kind of fault that starts it
        self.starts: dict[str, Callable[[Fault], None]] = {
            "chain": lambda f: self.chain.step(f, 0, None),
            "lease": lambda f: self.lease.step(f, 0, 0),
            "fork": lambda f: self.lead.step("fork", f, 0, 0),
            "deaf": lambda f: self.deaf.step(f, 0, 0),
            "race": lambda f: self.race.arm(f, 0),
            "handoff": lambda f: self.handoff.step(f, 0, 0),
            "wiped": lambda f: self.wiped.step(f, 0, 0),
            "hung": self.hung.step,
            "replay": lambda f: self.replay.step(f, 0),
            "relink": lambda f: self.lead.step("relink", f, 0, 0),
            "gc": lambda f: self.gc.step(f, 0, 0),
            "comeback": lambda f: self.lead.step("comeback", f, 0, 0),
            "turn": lambda f: self.handoff.step(f, 0, 0),
        }

    def stood(self, name: str) -> None:
        """``name`` stands for election: the paths that wait for a follower to stand go on."""
        self.lease.stood(name)
        self.gc.stood(name)
