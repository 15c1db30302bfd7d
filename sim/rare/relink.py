"""The `relink` rare path: a divergent member's stream link lost during its transfer
(sim/scenario.py ``_relink``). After the lead (sim/rare/lead.py), the old master is healed once
the next one serves; in the instant that master starts a transfer to it, their stream is cut past
its connection timeout, and once it is connected anew the master is isolated: the transfer never
finishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.rare.fork import FORK_POLL_US, FORK_WAIT_US
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World


class Relink:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # a step waiting for a transfer to its divergent member

    def watch(self, f: Fault, step: int, old: str, links: list[tuple[str, str]], polls: int) -> None:
        """Once another master serves, heal ``old``: it holds a tail that master lacks, so the
        master finds it divergent and sends it a transfer (``transfer_started``)."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is not None and m.name != old and m.core.groups[0].replication.serving:
            wait = (f, step, old, m.name)
            self.wait = wait
            w.nemesis.restore_links(links, "relink", None)
            w.health.check()
            w.at(w.now + int(f.params["wait_s"] * 1e6), self._give_up, wait)
        elif polls * FORK_POLL_US > FORK_WAIT_US:
            w.nemesis.restore_links(links, "relink", None)
            w.health.check()
            self._next(f, step)
        else:
            w.at(w.now + FORK_POLL_US, self.watch, f, step, old, links, polls + 1)

    def transfer_started(self, r: Any) -> None:
        """The master starts a transfer to the divergent member (its first chunks not yet sent):
        cut their stream, both ways, Raft up, for ``down_s``, longer than the stream's connection
        timeout, so that the master counts the member disconnected and, after, connected anew
        while the transfer is still under way."""
        w = self.world
        if self.wait is None:
            return
        f, step, old, master = self.wait
        if r.node != master or r.fields.get("peer") != old or r.fields.get("direction") != "sent" or w.healed:
            return
        self.wait = None
        w.last_fault_at = w.now
        stream = [(master, old), (old, master)]
        for a, b in stream:
            w.net.cut_stream(a, b)
        w.reach.counts["relink_transfers"] += 1
        w.nemesis.note(master, "stream_cut", {"links": [list(x) for x in stream], "down_s": f.params["down_s"][step],
                                              "relink_step": step, "transfer_at_seq": r.fields.get("at_seq")})
        w.health.check()
        w.at(w.now + int(f.params["down_s"][step] * 1e6), self._back, f, step, old, master, stream)

    def _back(self, f: Fault, step: int, old: str, master: str, stream: list[tuple[str, str]]) -> None:
        w = self.world
        if w.healed:
            return
        for a, b in stream:
            w.net.restore_stream(a, b)
        w.nemesis.note(master, "heal", {"fault": "relink", "links": [list(x) for x in stream]})
        w.health.check()
        w.at(w.now + FORK_POLL_US, self._reconnected, f, step, old, master, 0)

    def _reconnected(self, f: Fault, step: int, old: str, master: str, polls: int) -> None:
        """Once the master has the member connected again (its transfer still under way),
        ``settle_ms`` later, isolate the master for ``hold_s``: the next master syncs with a
        member whose transfer never finished."""
        w = self.world
        if w.healed:
            return
        node = w.nodes[master]
        mc = node.core.groups[0].replication.master_core if node.alive else None
        r = mc.replicas.get(old) if mc is not None and node.core.groups[0].replication.serving else None
        if r is None or polls * FORK_POLL_US > f.params["wait_s"] * 1e6:
            self._next(f, step)
            return
        if not r.connected:
            w.at(w.now + FORK_POLL_US, self._reconnected, f, step, old, master, polls + 1)
            return
        w.reach.counts["relink_reconnects"] += 1
        w.at(w.now + int(f.params["settle_ms"][step] * 1000), self._depose, f, step, master)

    def _depose(self, f: Fault, step: int, master: str) -> None:
        w = self.world
        if w.healed:
            return
        w.last_fault_at = w.now
        links = w.nemesis.isolate(master, {"relink_step": step})
        w.health.check()
        w.at(w.now + int(f.params["hold_s"][step] * 1e6), w.nemesis.restore_then, links, "relink",
             self._next, f, step)

    def _give_up(self, wait: tuple) -> None:
        if self.wait is not wait:
            return
        self.wait = None
        self._next(wait[0], wait[1])

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["lead_s"]) and not w.healed:
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), w.rare.lead.step, "relink", f, step + 1, 0)
