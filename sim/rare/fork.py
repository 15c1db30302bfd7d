"""The `fork` rare path: an older epoch's tail longer than a newer epoch's log (sim/scenario.py
``_fork``). After the lead (sim/rare/lead.py), the next master is deposed right after its first
batch of its epoch committed, and in that instant the old tail-holder is healed: the master
after that syncs with it, finding (older epoch, longer log) against (newer epoch, shorter log).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World

FORK_POLL_US = 2_000              # the fork path watches for the next master's first batch this often
FORK_WAIT_US = 6_000_000          # and gives up (healing the old master) after this long


class Fork:
    def __init__(self, world: World) -> None:
        self.world = world

    def watch(self, f: Fault, step: int, old: str, links: list[tuple[str, str]],
              new: tuple[str, int] | None, polls: int) -> None:
        """Wait for the next master, then for its first batch of its epoch to commit (up to
        FORK_WAIT_US in all); then, after the step's settle time, depose it and heal ``old``."""
        w = self.world
        if w.healed:
            return
        if polls * FORK_POLL_US > FORK_WAIT_US:
            w.nemesis.restore_links(links, "fork", None)
            w.health.check()
            self._next(f, step)
            return
        if new is None:
            m = w.master()
            if m is not None and m.name != old and m.core.view is not None:
                log, epoch = m.core.groups[0].replication.log, m.core.view.epoch
                first = log.last_seq + 1     # its epoch's first seq
                while first > 1 and (e := log.get(first - 1)) is not None and e.written_epoch == epoch:
                    first -= 1
                new = (m.name, first)
        elif self._committed(*new):
            w.at(w.now + int(f.params["settle_ms"][step] * 1000), self._depose, f, step, old, links, new[0])
            return
        w.at(w.now + FORK_POLL_US, self.watch, f, step, old, links, new, polls + 1)

    def _committed(self, name: str, first: int) -> bool:
        """Whether ``name``'s first batch of its epoch (seq ``first``) is on as many replicas as
        its policy needs (one at least) and, with a journal, on its own disk."""
        w = self.world
        node = w.nodes[name]
        mc = node.core.groups[0].replication.master_core if node.alive else None
        if mc is None:
            return False
        need = max(1, mc.policy.required(len(mc.members), mc.configured))
        own = mc.local_durable is None or mc.local_durable >= first
        return own and sum(1 for r in mc.replicas.values() if r.acked >= first) >= need

    def _depose(self, f: Fault, step: int, old: str, old_links: list[tuple[str, str]], new: str) -> None:
        w = self.world
        if w.healed:
            return
        w.last_fault_at = w.now
        o = w.nodes[old].core.groups[0].replication.log
        held = [(x.core.groups[0].replication.log.last_epoch, x.core.groups[0].replication.log.last_seq)
                for n, x in w.nodes.items() if x.alive and n not in (old, new)]
        longer = any(e > o.last_epoch and s < o.last_seq for e, s in held)
        w.reach.counts["fork_steps"] += 1
        w.reach.counts["fork_older_longer"] += longer
        links = w.nemesis.isolate(new, {"fork_step": step, "tail": [o.last_epoch, o.last_seq],
                                        "older_longer": longer})
        w.nemesis.restore_links(old_links, "fork", None)
        w.health.check()
        w.at(w.now + int(f.params["hold_s"][step] * 1e6), w.nemesis.restore_then, links, "fork",
             self._next, f, step)

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["lead_s"]):
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), w.rare.lead.step, "fork", f, step + 1, 0)
