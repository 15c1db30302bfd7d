"""The first stage of the `fork`, `relink` and `comeback` rare paths: a tail nobody takes.

The master of the moment has its stream cut (Raft stays up: it keeps office and writes a tail
that no replica takes) for the step's lead; then it is isolated, and the path's own watch
(sim/rare/fork.py, relink.py, comeback.py) takes over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.rare.comeback import COMEBACK_POLL_US
from sim.rare.fork import FORK_POLL_US
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World


class Lead:
    def __init__(self, world: World) -> None:
        self.world = world

    def step(self, kind: str, f: Fault, step: int, tries: int) -> None:
        """A ``fork``, ``relink`` or ``comeback`` step: cut the master of the moment's stream
        (Raft stays up: it keeps office and writes a tail that no replica takes) for the step's
        lead, then isolate it, and watch for the next master (the kind's watch). ``comeback``
        cuts only the master's side: members that forward clients still reach it, so its
        tail grows whoever its clients talk to."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is None:
            # a comeback step waits longer: its later stages need a master of their own
            if tries < (30 if kind != "comeback" else 100):
                w.at(w.now + 100_000, self.step, kind, f, step, tries + 1)
            return
        w.last_fault_at = w.now
        name = m.name
        others = [o for o in w.names if o != name]
        stream = [(name, o) for o in others] + ([(o, name) for o in others] if kind != "comeback" else [])
        for a, b in stream:
            w.net.cut_stream(a, b)
        w.nemesis.note(name, "stream_cut", {"links": [list(x) for x in stream], "lead_s": f.params["lead_s"][step],
                                            f"{kind}_step": step})
        w.health.check()
        w.at(w.now + int(f.params["lead_s"][step] * 1e6), self._isolate, kind, f, step, name, stream)

    def _isolate(self, kind: str, f: Fault, step: int, old: str, stream: list[tuple[str, str]]) -> None:
        w = self.world
        if w.healed:
            return
        links = w.nemesis.end_lead(old, stream, {f"{kind}_step": step})
        w.health.check()
        if kind == "fork":
            w.at(w.now + FORK_POLL_US, w.rare.fork.watch, f, step, old, links, None, 0)
        elif kind == "relink":
            w.at(w.now + FORK_POLL_US, w.rare.relink.watch, f, step, old, links, 0)
        else:
            w.at(w.now + COMEBACK_POLL_US, w.rare.comeback.ahead, f, step, old, links, 0)
