"""Reach of the rare paths: how often a run got into the situations they are there for, observed
from outside the cores (the history's lines and the members' logs): epochs seen, the members'
positions when each sync started, sync decisions by what their positions held, transfers (sent)
and those during which the sender's log moved; and each rare path's own counts, which the paths
(sim/rare/) add to ``counts``. The run's stats carry them all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.world import World

REACH_EVENTS = frozenset(("view", "sync_started", "synced", "transfer_started", "transfer_finished"))


class Reach:
    def __init__(self, world: World) -> None:
        self.world = world
        self.epochs: set[int] = set()
        self._sync_pos: dict[str, dict[str, tuple[int, int]]] = {}
        self._transfer_at: dict[tuple[str, str], int] = {}
        self.counts = {"syncs": 0, "syncs_multi_epoch": 0, "syncs_older_longer": 0, "syncs_order_matters": 0,
                       "transfers": 0, "transfers_log_moved": 0, "transfer_records_max": 0, "lease_votes": 0,
                       "fork_steps": 0, "fork_older_longer": 0, "deaf_heals": 0,
                       "race_cuts": 0, "race_timed_out": 0, "handoff_gates": 0, "handoff_isolations": 0,
                       "handoff_tails": 0, "wiped_crashes": 0, "wiped_isolations": 0, "wiped_at_risk": 0,
                       "hung_fsyncs": 0, "hung_resets": 0, "hung_tails": 0, "hung_releases": 0,
                       "replay_stalls": 0, "replay_frames": 0, "replay_forwards": 0,
                       "relink_transfers": 0, "relink_reconnects": 0,
                       "gc_votes": 0, "gc_stalls": 0, "gc_in_lease": 0, "gc_overtaken": 0,
                       "comeback_ahead": 0, "comeback_handed": 0, "comeback_lost": 0,
                       "turn_aligned": 0, "turn_last_chunks": 0, "turn_isolations": 0}

    def observe(self, r: Any) -> None:
        """Counts how often a run reached the rare paths (observed from outside the cores)."""
        w = self.world
        ev, f = r.event, r.fields
        if ev == "view":
            self.epochs.add(f.get("epoch"))
        elif ev == "sync_started":
            logs = {n: x.core.groups[0].replication.log for n, x in w.nodes.items() if x.alive}
            self._sync_pos[r.node] = {n: (log.last_epoch, log.last_seq) for n, log in logs.items()}
        elif ev == "synced":
            snap = self._sync_pos.pop(r.node, {})
            answered = {r.node, *(f.get("positions") or {}), *(f.get("divergent") or ())}
            pos = [snap[n] for n in sorted(answered) if n in snap]
            self.counts["syncs"] += 1
            if len({e for e, _ in pos}) > 1:
                self.counts["syncs_multi_epoch"] += 1
            if any(ea < eb and sa > sb for ea, sa in pos for eb, sb in pos):
                self.counts["syncs_older_longer"] += 1
            if pos and max(pos) != max(pos, key=lambda p: (p[1], p[0])):
                self.counts["syncs_order_matters"] += 1
        elif f.get("direction") == "sent":
            key = (r.node, f.get("peer"))
            if ev == "transfer_started":
                self._transfer_at[key] = f.get("at_seq") or 0
            elif key in self._transfer_at:
                at = self._transfer_at.pop(key)
                node = w.nodes.get(r.node)
                self.counts["transfers"] += 1
                self.counts["transfer_records_max"] = max(self.counts["transfer_records_max"], f.get("records") or 0)
                if node is not None and node.core.groups[0].replication.log.last_seq > at:
                    self.counts["transfers_log_moved"] += 1
