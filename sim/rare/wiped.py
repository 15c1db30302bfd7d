"""The `wiped` rare path: a master lost before the members it positioned after a wipe caught up
(sim/scenario.py ``_wiped``). The master commits on the keepers alone, the keepers crash and
restart without their data, and once the master has positioned every keeper it is isolated: the
next master's sync must not count the keepers towards its majority.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from cluster.replication.messages import SyncRequest

from sim.disk import WHERE as DISK_WHERE, SimDisk
from sim.net import STREAM
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.node import SimNode
    from sim.world import World


class Wiped:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # a step waiting for its keepers' positioning

    def _may_crash(self, keepers: list[str]) -> bool:
        """Every keeper may crash, all of them together: under crash policy ``any``, fewer than
        (n-1)/2 nodes down or catching up once they are down."""
        w = self.world
        if not all(w.nemesis.may_crash(k) for k in keepers) and w.sc.crash_policy != "any":
            return False
        if any(k in w.down or k in w.paused for k in keepers):
            return False
        m = w.master()
        lost = {n for n in w.down | set(w.recovering) if m is None or n != m.name} | set(keepers)
        return len(lost) <= (len(w.names) - 1) // 2

    def step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master of the moment's stream to every replica but the keepers
        (``nodes // 2`` of them: with the master, a majority), both ways, for the step's lead;
        Raft stays up, so it keeps office and commits on the keepers alone."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        keepers: list[str] | None = None
        if m is not None:
            rng = random.Random(f"{f.params['pick']}:{step}")
            keepers = sorted(rng.sample([o for o in w.names if o != m.name], len(w.names) // 2))
        if m is None or keepers is None or not self._may_crash(keepers):
            if tries < 30:
                w.at(w.now + 100_000, self.step, f, step, tries + 1)
            else:
                self._next(f, step)
            return
        w.last_fault_at = w.now
        others = [o for o in w.names if o != m.name and o not in keepers]
        stream = [(m.name, o) for o in others] + [(o, m.name) for o in others]
        for a, b in stream:
            w.net.cut_stream(a, b)
        w.nemesis.note(m.name, "stream_cut", {"links": [list(x) for x in stream], "lead_s": f.params["lead_s"][step],
                                              "keepers": keepers, "wiped_step": step})
        w.health.check()
        w.at(w.now + int(f.params["lead_s"][step] * 1e6), self._crash, f, step, m.name, keepers, stream)

    def _crash(self, f: Fault, step: int, master: str, keepers: list[str],
               stream: list[tuple[str, str]]) -> None:
        """Crash every keeper; each loses its data-dir too (a member restarted without its data
        is amnesiac under every fsync policy: cluster/node_core.py restarts_amnesiac)."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is None or m.name != master or not self._may_crash(keepers):
            for a, b in stream:
                w.net.restore_stream(a, b)
            w.health.check()
            self._next(f, step)
            return
        w.last_fault_at = w.now
        acked = max(w.nodes[k].acked for k in keepers)   # what the keepers held for the master
        gens = []
        for k in keepers:
            w.kill(k, "wiped")
            if w.journal is not None:
                # a new, empty data-dir: nothing to recover, so no durability promise to judge
                w.data[k] = SimDisk(f"{DISK_WHERE}/{k}")
                w.went_down.pop(k, None)
                w.promised.pop(k, None)
            gens.append(w.down_gen[k])
        w.reach.counts["wiped_crashes"] += 1
        w.health.check()
        w.at(w.now + int(f.params["down_s"][step] * 1e6), self._rejoin, f, step, master, keepers,
             stream, gens, acked)

    def _rejoin(self, f: Fault, step: int, master: str, keepers: list[str], stream: list[tuple[str, str]],
                gens: list[int], acked: int) -> None:
        """Restart the keepers, their stream from the master slowed by ``slow_ms`` (their catch-up
        takes round trips of that), and wait (``check``) for the master to position them."""
        w = self.world
        if w.healed:
            return
        for k, gen in zip(keepers, gens):
            w.restart(k, gen)
        us = int(f.params["slow_ms"][step] * 1000)
        for k in keepers:
            w.net.add_delay(master, k, us, (STREAM,))
        w.nemesis.note(master, "slow", {"links": [[master, k, us // 1000] for k in keepers], "plane": "stream",
                                        "wiped_step": step})
        wait = (f, step, master, keepers, stream, us, acked, set())
        self.wait = wait
        w.health.check()
        w.at(w.now + int(f.params["wait_s"] * 1e6), self._give_up, wait)

    def check(self, node: SimNode, sender: str, frame: Any) -> None:
        """sim/node.py, after ``node`` handled a stream frame while a wiped step waits: the
        serving master's SyncRequest naming its log end (``serving_seq``) positions a keeper;
        once it positioned every keeper, ``settle_ms`` later, the master is isolated."""
        w = self.world
        wait = self.wait
        if wait is None or w.healed or type(frame) is not SyncRequest:
            return
        f, step, master, keepers, *_, positioned = wait
        if sender != master or node.name not in keepers or frame.serving_seq <= 0:
            return
        m = w.master()
        if m is None or m.name != master:
            return
        positioned.add(node.name)
        if len(positioned) == len(keepers):
            self.wait = None
            w.at(w.now + int(f.params["settle_ms"][step] * 1000), self._isolate, wait)

    def _isolate(self, wait: tuple) -> None:
        w = self.world
        f, step, master, keepers, stream, us, acked, _ = wait
        if w.healed:
            return
        w.last_fault_at = w.now
        # at risk: the keepers had acked entries no other member holds (the master's alone now)
        held = max((x.core.groups[0].replication.log.last_seq for n, x in w.nodes.items()
                    if x.alive and n != master and n not in keepers), default=0)
        at_risk = acked > held
        w.reach.counts["wiped_isolations"] += 1
        w.reach.counts["wiped_at_risk"] += at_risk
        links = w.nemesis.isolate(master, {"wiped_step": step, "acked": acked, "held": held})
        self._restore(wait)     # after the cut: what the slowed links carried is lost
        w.at(w.now + int(f.params["hold_s"][step] * 1e6), w.nemesis.restore_then, links, "wiped",
             self._next, f, step)

    def _restore(self, wait: tuple) -> None:
        w = self.world
        _, _, master, keepers, stream, us, _, _ = wait
        for a, b in stream:
            w.net.restore_stream(a, b)
        for k in keepers:
            w.net.add_delay(master, k, -us, (STREAM,))
        w.health.check()

    def _give_up(self, wait: tuple) -> None:
        w = self.world
        if self.wait is not wait or w.healed:
            return
        self.wait = None
        self._restore(wait)
        self._next(wait[0], wait[1])

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["lead_s"]) and not w.healed:
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), self.step, f, step + 1, 0)
