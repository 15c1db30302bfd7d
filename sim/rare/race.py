"""The `race` rare path: power cuts timed on the journal (sim/scenario.py, ``generate``).

An armed cut slows the disks that open its race, then strikes in the first instant of the race:
"master", a replica's durable ack is past the master's own fsync; "replica", a replica's fsync
finished while it holds the ack of a later batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.node import SimNode
    from sim.world import World


class Race:
    def __init__(self, world: World) -> None:
        self.world = world
        self.armed: Fault | None = None       # a power cut waiting for its race

    def check(self, node: SimNode, what: str) -> None:
        """sim/node.py, after ``node`` handled a stream frame (``what`` "stream") or its journal's
        report (``persisted``), while a race cut is armed: strike if the race is on now.
        "master": a replica's ack (of what its journal holds) is past the master's own fsync.
        "replica": this replica's fsync just finished while it holds the ack of a later batch
        (what it acks is clamped to what is durable), a network hop later."""
        w = self.world
        f = self.armed
        if f is None or w.healed or not node.alive:
            return
        race = f.params["race"]

        disk = w.on_disk
        if race == "master" and what == "stream":
            mc = node.core.groups[0].replication.master_core
            if mc is None or mc.local_durable is None:
                return
            seq = disk(node.name) + 1      # its journal's fsync may be done, and not yet reported
            ackers = {r.name for r in mc.replicas.values() if r.acked >= seq}
            # and a member without it on disk, that the sync after the restarts may hear from
            if not ackers or not any(disk(n) < seq for n in w.names if n != node.name and n not in ackers):
                return
            after = f.params["after_us"] // 4
        elif race == "replica" and what == "persisted":
            group = node.core.groups[0]
            mine = group.replication.durable_seq
            held = max((a.seq for a in group._held_acks.values()), default=0)
            m = w.master()
            if mine is None or group.replication.master_core is not None or held <= mine or m is None \
                    or disk(node.name) >= held or (m.core.groups[0].replication.durable_seq or 0) < held \
                    or not any(disk(n) < held for n in w.names if n not in (node.name, m.name)):
                return
            # its ack goes out at the loop's next turn, and crosses the network
            after = w.net.hi_us + 1_000 + f.params["after_us"]
        else:
            return
        self.armed = None
        w.reach.counts["race_cuts"] += 1
        w.nemesis.note(node.name, "race", {"race": race, "after_us": after})
        w.at(w.now + after, w.nemesis.power_cut_now, f)

    def arm(self, f: Fault, tries: int) -> None:
        """Arm a race cut: the disks whose slowness opens the race turn slow (``slow_ms`` more per
        fsync): the master's for "master" (replicas' acks of what they hold on disk overtake its
        own fsync), every replica's for "replica" (batches keep arriving during each fsync)."""
        w = self.world
        if w.healed or w.journal is None or self.armed is not None:
            return
        m = w.master()
        if m is None:
            if tries < 30:
                w.at(w.now + 100_000, self.arm, f, tries + 1)
            return
        slow = [m.name] if f.params["race"] == "master" else [n for n in w.names if n != m.name]
        us = int(f.params["slow_ms"] * 1000)
        for n in slow:
            x = w.nodes.get(n)
            if x is not None and x.alive and x.writer is not None:
                x.writer.slow_us = us
        w.nemesis.note(m.name, "slow_disk", {"race": f.params["race"], "nodes": slow, "slow_ms": f.params["slow_ms"]})
        self.armed = f
        w.at(w.now + int(f.params["wait_s"] * 1e6), self._timeout, f)

    def _timeout(self, f: Fault) -> None:
        """The race never came: cut anyway."""
        w = self.world
        if self.armed is f:
            self.armed = None
            w.reach.counts["race_timed_out"] += 1
            for x in w.nodes.values():
                if x.writer is not None:
                    x.writer.slow_us = 0
            w.nemesis.power_cut_now(f)
