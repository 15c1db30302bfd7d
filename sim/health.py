"""Judged during the run (cluster/checker/during.py): who is healthy, and quiescent points.

The world probes every PROBE_US (and at once whenever a fault starts or ends). Each change of the
healthy set goes to the history as a HEALTH nemesis line, from which the checker judges
availability while a healthy majority holds the master; once every member has been healthy for
QUIESCE_SETTLE_US and the members have converged, a QUIESCENT line carries every member's
digest, which must all be the master's.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from cluster.checker.during import HEALTH, QUIESCENT

if TYPE_CHECKING:
    from sim.world import World

PROBE_US = 100_000                # the health probe's period (fault starts are probed at once too)
QUIESCE_SETTLE_US = 500_000       # every member healthy this long before a quiescent point is judged
QUIESCE_CALM_US = 10_000_000     # in calm stretches one quiescent point per this long (each costs a digest
                                  # per member: ~14 ms on a grown state); the first after each fault at once


class Health:
    def __init__(self, world: World) -> None:
        self.world = world
        # the healthy set last written, since when every member has been healthy, the last
        # quiescent point
        self._health: tuple | None = None
        self._everyone_since: int | None = None
        self._last_quiescent = -QUIESCE_CALM_US
        self._quiesce_due = True         # a fault touched someone since the last quiescent point
        self.quiescent_points = 0

    def probe(self) -> None:
        w = self.world
        if w.drain_started_us is not None or w.finished:
            return
        w.provenance.scan(w.now_s, w.nodes)
        self.check()
        self._quiescent()
        w.at(w.now + PROBE_US, self.probe)

    def _healthy(self) -> tuple[str, ...]:
        """The largest set of nodes that are up, not paused or catching up (no transfer coming
        in, not amnesiac: a member that restarted without its state counts in no sync quorum
        until a serving master has brought it up to date), and connected
        to each other both ways on both planes without extra latency or flapping, while no link
        loses or doubles frames; of several, one holding the master."""
        w = self.world
        net = w.net
        if net.drop or net.dup:
            return ()
        cand = []
        for n in w.names:
            node = w.nodes.get(n)
            if n in w.down or n in w.paused or node is None or not node.alive \
                    or any(g.replication.receiver is not None or g.replication.amnesiac for g in node.core.groups):
                continue
            cand.append(n)
        links, flapping = net.links, w.nemesis.flapping
        bad = {(a, b) for a in cand for b in cand if a != b
               and ((lk := links[(a, b)]).cuts or lk.stream_cuts or lk.extra_us[0] or lk.extra_us[1]
                    or (a, b) in flapping or (a, b) in net.gates or (a, b) in w.rare.replay.replaying)}
        if not bad:
            return tuple(cand)
        m = w.master()
        quorum = len(w.names) // 2 + 1
        for size in range(len(cand) - 1, quorum - 1, -1):
            found = [c for c in itertools.combinations(cand, size)
                     if not any((a, b) in bad for a in c for b in c if a != b)]
            if found:
                return next((c for c in found if m is not None and m.name in c), found[0])
        return ()

    def check(self) -> None:
        w = self.world
        healthy = self._healthy()
        everyone = len(healthy) == len(w.names)
        if everyone:
            if self._everyone_since is None:
                self._everyone_since = w.now
        else:
            self._everyone_since = None
            self._quiesce_due = True
        majority = len(healthy) > len(w.names) // 2
        if w.sc.groups == 1:
            m = w.master()
            judged = majority and (m is None or m.name in healthy)
            state: tuple = (healthy, judged)
            if state != self._health:
                self._health = state
                w.nemesis.note("", HEALTH, {"healthy": list(healthy), "judged": judged, "everyone": everyone})
            return
        # each group judged on its own: only the groups whose master the healthy set holds
        # (or that have none) must answer; a failed member pauses the groups it mastered
        groups = [g for g in range(w.sc.groups)
                  if majority and ((m := w.master(g)) is None or m.name in healthy)]
        state = (healthy, tuple(groups))
        if state != self._health:
            self._health = state
            w.nemesis.note("", HEALTH, {"healthy": list(healthy), "judged": bool(groups), "everyone": everyone,
                                        "groups": groups})

    def _quiescent(self) -> None:
        """Every member healthy for a while and the stream idle: all digests must be the master's."""
        w = self.world
        if self._everyone_since is None or w.now - self._everyone_since < QUIESCE_SETTLE_US \
                or (not self._quiesce_due and w.now - self._last_quiescent < QUIESCE_CALM_US) \
                or not w.members_converged():
            return
        records = []
        for g in range(w.sc.groups):
            m = w.master(g)
            mc = m.core.groups[g].replication.master_core if m is not None else None
            if mc is None or mc._staged:
                return
            records.append({"group": g, "master": m.name,
                            "digests": {n: w.nodes[n].core.groups[g].storage.digest() for n in w.names}})
        self._last_quiescent = w.now
        self._quiesce_due = False
        self.quiescent_points += 1
        if w.sc.groups == 1:
            del records[0]["group"]
            w.nemesis.note("", QUIESCENT, records[0])
        else:
            w.nemesis.note("", QUIESCENT, {"groups": records})
