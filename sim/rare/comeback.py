"""The `comeback` rare path: a deposed master made master again over its divergent tail
(sim/scenario.py ``_comeback``). After the lead (sim/rare/lead.py), the old master follows in
Raft, an operator's step-down makes it master again, and the answer of its sync's fetch that
would verify its own last entry is lost (once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cluster.replication.messages import Batch

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World

COMEBACK_POLL_US = 10_000         # the comeback path watches logs and Raft this often


class Comeback:
    def __init__(self, world: World) -> None:
        self.world = world

    def ahead(self, f: Fault, step: int, old: str, links: list[tuple[str, str]], polls: int) -> None:
        """``old`` is isolated with its tail: once another master serves and its log has passed
        the tail's end by two entries, give ``old`` its Raft links back, its stream cut."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        node = w.nodes[old]
        if m is not None and m.name != old and node.alive \
                and m.core.groups[0].replication.log.last_seq >= node.core.groups[0].replication.log.last_seq + 2:
            w.reach.counts["comeback_ahead"] += 1
            w.last_fault_at = w.now
            stream = w.links_around(old)
            for a, b in stream:
                w.net.cut_stream(a, b)
            w.nemesis.restore_links(links, "comeback", None)
            w.nemesis.note(old, "stream_cut", {"links": [list(x) for x in stream], "comeback_step": step})
            w.health.check()
            w.at(w.now + COMEBACK_POLL_US, self._caught_up, f, step, old, m.name, stream, 0)
        elif polls * COMEBACK_POLL_US > f.params["wait_s"] * 1e6:
            w.nemesis.restore_links(links, "comeback", None)
            w.health.check()
            self._next(f, step)
        else:
            w.at(w.now + COMEBACK_POLL_US, self.ahead, f, step, old, links, polls + 1)

    def _caught_up(self, f: Fault, step: int, old: str, master: str, stream: list[tuple[str, str]],
                   polls: int) -> None:
        """Once ``old`` follows ``master`` in Raft with its whole log, ``settle_ms`` later, the
        operator's step-down."""
        w = self.world
        if w.healed:
            return
        m, node = w.nodes[master], w.nodes[old]
        if not m.alive or not node.alive or w.master() is not m or polls * COMEBACK_POLL_US > f.params["wait_s"] * 1e6:
            self._restore(f, step, stream)
            self._next(f, step)
        elif node.raft.leader == master and node.raft.last_index >= m.raft.last_index:
            w.at(w.now + int(f.params["settle_ms"][step] * 1000), self._hand, f, step, old, master,
                 stream)
        else:
            w.at(w.now + COMEBACK_POLL_US, self._caught_up, f, step, old, master, stream, polls + 1)

    def _hand(self, f: Fault, step: int, old: str, master: str, stream: list[tuple[str, str]]) -> None:
        """The master steps down in favour of ``old``, whose stream comes back; the answer that
        would verify its own last entry, when its sync fetches, is lost (once)."""
        w = self.world
        if w.healed:
            return
        m, node = w.nodes[master], w.nodes[old]
        if m.alive and node.alive and not m.frozen and w.master() is m:
            w.reach.counts["comeback_handed"] += 1
            w.nemesis.note(master, "step_down", {"to": old, "comeback_step": step})
            m.step_down(old)
            lost: list[bool] = []

            def gate(msg: Any) -> bool:
                # the answer that carries the syncing master's own last entry, once
                if lost or type(msg) is not Batch:
                    return True
                rc = w.nodes[old].core.groups[0].replication
                if rc.sync is None or rc.sync.state != rc.sync.FETCHING or msg.seq != rc.log.last_seq:
                    return True
                lost.append(True)
                w.reach.counts["comeback_lost"] += 1
                w.at(w.now, self._ungate, old)
                return False

            for o in w.names:
                if o != old:
                    w.net.gates[(o, old)] = gate
            w.at(w.now + int(f.params["wait_s"] * 1e6), self._ungate, old)
        self._restore(f, step, stream)
        self._next(f, step)

    def _ungate(self, old: str) -> None:
        w = self.world
        popped = [w.net.gates.pop((o, old), None) for o in w.names if o != old]
        if any(popped) and not w.healed:
            w.health.check()

    def _restore(self, f: Fault, step: int, stream: list[tuple[str, str]]) -> None:
        w = self.world
        if w.healed:
            return
        for a, b in stream:
            w.net.restore_stream(a, b)
        w.nemesis.note("", "heal", {"fault": "comeback", "links": [list(x) for x in stream]})
        w.health.check()

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["lead_s"]) and not w.healed:
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), w.rare.lead.step, "comeback", f, step + 1, 0)
