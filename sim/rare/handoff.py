"""The `handoff` rare path: a master lost right after a state transfer it sent (sim/scenario.py
``_handoff``). A replica crashes (a small log makes its catch-up a transfer); once the master
sends the transfer, the other members' streams take its batches late or stop at the position the
last chunk names, and once the joiner holds the transfer the master is isolated. The `turn` path
(sim/rare/turn.py) starts the same way and ends here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cluster.replication.messages import Batch

from sim.net import STREAM
from sim.rare.fork import FORK_POLL_US
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World

HANDOFF_CHUNK_US = 10_000         # the "slow" mark: how late the joiner takes each chunk


class Handoff:
    def __init__(self, world: World) -> None:
        self.world = world

    def step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: crash a replica for ``down_s`` (restarted without its memory, or behind
        the master's small log, its catch-up is a transfer), then watch for that transfer."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        replicas = [n for n in w.names if m is not None and n != m.name and n not in w.down
                    and n not in w.paused]
        joiner = replicas[int(f.params["pick"] * len(replicas))] if replicas else None
        if joiner is None or not w.nemesis.may_crash(joiner):
            if tries < 30:
                w.at(w.now + 100_000, self.step, f, step, tries + 1)
            else:
                self.next(f, step)
            return
        w.last_fault_at = w.now
        w.kill(joiner, f.kind)
        w.at(w.now + int(f.params["down_s"][step] * 1e6), self._rejoin, f, step, joiner,
             w.down_gen[joiner])

    def _rejoin(self, f: Fault, step: int, joiner: str, gen: int) -> None:
        w = self.world
        if w.healed:
            return
        w.restart(joiner, gen)
        if f.kind == "turn":
            w.rare.turn.arm(f, step, joiner)
        else:
            self.watch(f, step, joiner, None, 0)

    def watch(self, f: Fault, step: int, joiner: str, gated: tuple | None, polls: int) -> None:
        """Once a serving master sends ``joiner`` a transfer, every member's stream from it stops
        taking batches past the step's mark ("now": the log's end at that instant, so that what
        the rest of the read sees is the master's alone; "end": the position the last chunk
        names); once the joiner took the transfer, ``settle_ms`` later, the master is isolated."""
        w = self.world
        if w.healed:
            return
        if gated is None:
            m = w.master()
            rc = m.core.groups[0].replication if m is not None and m.alive else None
            sender = rc.senders.get(joiner) if rc is not None and rc.serving else None
            if sender is not None:
                at = rc.log.last_seq
                mark = f.params["mark"][step]
                others = [o for o in w.names if o != m.name]
                delays: tuple[tuple[str, int], ...] = ()
                if mark == "end":
                    gate = lambda msg: type(msg) is not Batch or sender.end_seq is None or msg.seq <= sender.end_seq  # noqa: E731
                    for o in others:
                        w.net.gates[(m.name, o)] = gate
                else:
                    # "slow": the others take the stream late, so that writes go on (committing
                    # late) while the read runs and the isolation loses what is on its way; the
                    # joiner takes each chunk HANDOFF_CHUNK_US late: a read of many round trips
                    slow = int(f.params["slow_ms"][step] * 1000)
                    delays = tuple((o, HANDOFF_CHUNK_US if o == joiner else slow) for o in others)
                    for o, us in delays:
                        w.net.add_delay(m.name, o, us, (STREAM,))
                w.reach.counts["handoff_gates"] += 1
                w.nemesis.note(m.name, "handoff_gate", {"joiner": joiner, "mark": mark, "at_seq": at,
                                                        "slow_ms": f.params["slow_ms"][step]})
                gated = (m.name, at, delays)
                w.health.check()
        else:
            master, at, _ = gated
            node, j = w.nodes[master], w.nodes[joiner]
            if not node.alive or not node.core.groups[0].replication.serving:
                self._ungate(f, step, gated)
                self.next(f, step)
                return
            taken = j.core.groups[0].replication.last_transfer if j.alive else None
            if taken is not None and taken.get("direction") == "received" and taken.get("peer") == master:
                if f.kind == "handoff":
                    w.reach.counts["handoff_tails"] += taken["at_seq"] > at
                w.at(w.now + int(f.params["settle_ms"][step] * 1000), self._isolate, f, step, gated)
                return
        if polls * FORK_POLL_US > f.params["wait_s"] * 1e6:
            if gated is not None:
                self._ungate(f, step, gated)
            self.next(f, step)
            return
        w.at(w.now + FORK_POLL_US, self.watch, f, step, joiner, gated, polls + 1)

    def _isolate(self, f: Fault, step: int, gated: tuple) -> None:
        w = self.world
        if w.healed:
            return
        master = gated[0]
        w.last_fault_at = w.now
        w.reach.counts[f"{f.kind}_isolations"] += 1
        links = w.nemesis.isolate(master, {f"{f.kind}_step": step})
        self._ungate(f, step, gated)   # after the cut: what the slowed links carried is lost
        w.health.check()
        w.at(w.now + int(f.params["hold_s"][step] * 1e6), self._heal, f, step, links)

    def _heal(self, f: Fault, step: int, links: list[tuple[str, str]]) -> None:
        w = self.world
        w.nemesis.restore_links(links, f.kind, None)
        w.health.check()
        self.next(f, step)

    def _ungate(self, f: Fault, step: int, gated: tuple) -> None:
        w = self.world
        master, _, delays = gated
        for o in w.names:
            w.net.gates.pop((master, o), None)
        for o, us in delays:
            w.net.add_delay(master, o, -us, (STREAM,))
        w.health.check()

    def next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["down_s"]) and not w.healed:
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), self.step, f, step + 1, 0)
