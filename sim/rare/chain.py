"""The `chain` and `tail` rare paths: quick successive failovers (sim/scenario.py ``_chain``).

Each step cuts the stream of the master of the moment for its lead (it keeps office through Raft
and serves, its batches reaching nobody), then isolates it, and heals the one the step before
isolated; the step after waits for the next master and lets it serve for its gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World


class Chain:
    def __init__(self, world: World) -> None:
        self.world = world

    def step(self, f: Fault, step: int, prev: tuple[str, list] | None, expected: str | None = None) -> None:
        """Step ``step``: cut the stream of the master of the moment for its lead (it keeps
        office through Raft and serves, its batches reaching nobody), then isolate it. The
        step after waits for the next master, then lets it serve for its gap (sim/scenario.py
        _chain) before it deposes that one in turn."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is None or (prev is not None and m.name == prev[0]) or (expected is not None and m.name != expected):
            self._next(f, step, prev, 0)
            return
        w.last_fault_at = w.now
        name = m.name
        lead = f.params["lead_s"][step]
        others = [o for o in w.names if o != name]
        if f.params.get("keep_one") and len(others) > 1:
            others = others[1:]
        links = [(name, o) for o in others] + [(o, name) for o in others] if lead > 0 else []
        for a, b in links:
            w.net.cut_stream(a, b)
        if links:
            w.nemesis.note(name, "stream_cut", {"links": [list(x) for x in links], "lead_s": lead})
        w.health.check()
        w.at(w.now + int(lead * 1e6), self._isolate, f, step, prev, name, links)

    def _next(self, f: Fault, step: int, prev: tuple[str, list] | None, tries: int) -> None:
        """Wait (up to 5 s) for a master other than the one isolated last; give up the chain
        (healing the isolation it holds) if none comes."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is not None and (prev is None or m.name != prev[0]):
            w.at(w.now + int(f.params["gap_s"][step - 1] * 1e6), self.step, f, step, prev, m.name)
        elif tries < 50:
            w.at(w.now + 100_000, self._next, f, step, prev, tries + 1)
        elif prev is not None:
            w.nemesis.restore_links(prev[1], "chain", None)

    def _isolate(self, f: Fault, step: int, prev: tuple[str, list] | None, name: str,
                 stream: list[tuple[str, str]]) -> None:
        w = self.world
        if w.healed:
            return
        links = w.nemesis.end_lead(name, stream, {"chain_step": step})
        if prev is not None:
            w.nemesis.restore_links(prev[1], "chain", None)
        if step + 1 < len(f.params["lead_s"]):
            w.at(w.now + 100_000, self._next, f, step + 1, (name, links), 0)
        else:
            w.at(w.now + int(f.params["hold_s"] * 1e6), w.nemesis.restore_links, links, "chain", None)
        w.health.check()
