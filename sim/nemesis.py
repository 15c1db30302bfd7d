"""The nemesis: the scenario's faults as they come due, power cuts, and the heal at ``fault_end``.

Each fault of the schedule (sim/scenario.py) strikes at its time: crashes, pauses and stalls,
cuts (isolations, partitions, bridges, one-way cuts), flapping links, delays, loss and
duplication, and power cuts of every node. The rare paths' faults go to sim/rare/, which times
them on what the cores do. Every fault, restore and heal writes a nemesis line to the history
(``note``). Whom a fault strikes is drawn from the nemesis's own generator, what a power cut
leaves on each disk from the disk generator.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable

from cluster.checker.schema import NemesisEvent
from cluster.replication.core import REPLICA

from sim.disk import POWER
from sim.net import RAFT, STREAM
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.world import World


class Nemesis:
    def __init__(self, world: World) -> None:
        self.world = world
        self._drops: list[float] = []
        self._dups: list[float] = []
        self.flapping: dict[tuple[str, str], int] = {}
        # since when no link has lost or doubled frames (None: not now; Elections judges
        # disruptions by it)
        self.noise_free_since: int | None = 0
        self._cut_when_busy: Fault | None = None
        self._cuts_done: list[Fault] = []
        self.skipped_crashes = 0

    def note(self, node: str, action: str, detail: Any = None) -> None:
        w = self.world
        d = None if detail is None else (detail if isinstance(detail, str) else json.dumps(detail, sort_keys=True))
        w.record(NemesisEvent(w.now_s, node, action, d))

    def _resolve(self, target: str) -> str:
        w = self.world
        if target != "master":
            return target
        m = w.master()
        if m is not None:
            return m.name
        alive = [n for n in w.names if n not in w.down]
        return w.rng_nemesis.choice(alive or w.names)

    def may_crash(self, name: str) -> bool:
        """Crashing loses a node's messages and replication log (its Raft state survives). Under
        crash policy ``any`` a node may crash whenever fewer than (n-1)/2 nodes are down or
        catching up; under ``safe`` only when the others hold everything a majority holds, so
        that the crash cannot take away a copy that any majority still needs."""
        w = self.world
        if name in w.down or name in w.paused:
            # A node killed while stopped never writes the `deactivated` line its lease expiry
            # implies, so the history would make it active for its whole pause.
            return False
        m = w.master()
        for n, need in list(w.recovering.items()):
            node = w.nodes.get(n)
            c = node.core.groups[0].replication if node is not None else None
            # caught up: a replica of the master of the moment, or that master itself (its sync
            # took in everything a majority holds)
            if c is not None and node.alive and c.receiver is None and c.log.last_seq >= need \
                    and ((c.role == REPLICA and (m is None or c.master == m.name)) or m is node):
                del w.recovering[n]
        lost = len(w.down | set(w.recovering))
        if w.sc.crash_policy == "any":
            return lost + 1 <= (len(w.names) - 1) // 2
        if lost:
            return False
        others = [w.nodes[n] for n in w.names if n != name]
        if any(o.frozen or not o.alive for o in others):
            return False
        quorum = len(w.names) // 2 + 1
        nodes = [w.nodes[n] for n in w.names]
        logs = {x.name: x.core.groups[0].replication.log for x in nodes}
        positions = {n: (log.last_epoch, log.last_seq) for n, log in logs.items()}
        held = sorted(positions.values(), reverse=True)[quorum - 1]
        if any(positions[o.name] < held for o in others):
            return False
        raft_held = sorted((len(x.raft.log) for x in nodes), reverse=True)[quorum - 1]
        return all(len(o.raft.log) >= raft_held for o in others)

    def fault(self, f: Fault) -> None:
        w = self.world
        if w.healed:
            return
        if w.rare.hung.held is not None and f.kind != "hung":
            w.rare.hung.held.append(f)      # a hung try has the floor (sim/rare/hung.py)
            return
        w.last_fault_at = w.now
        kind = f.kind
        start = w.rare.starts.get(kind)
        if start is not None:
            start(f)
            return
        end = w.now + int(f.duration * 1e6)
        net = w.net
        if kind == "crash":
            name = self._resolve(f.target)
            if not self.may_crash(name):
                self.skipped_crashes += 1
                return
            w.kill(name)
            w.at(end, w.restart, name, w.down_gen[name])
        elif kind == "crash_all":
            self._power_cut(f, 0)
        elif kind in ("pause", "stall"):
            name = self._resolve(f.target)
            node = w.nodes.get(name)
            if name in w.down or name in w.paused or node is None:
                return
            w.paused.add(name)
            w.running_since.pop(name, None)
            node.freeze(loop_only=kind == "stall")
            self.note(name, kind)
            w.at(end, w.resume, name)
        elif kind in ("isolate", "partition", "bridge", "one_way"):
            links = self._links_of(f)
            for a, b in links:
                net.cut(a, b)
            self.note(self._resolve(f.target) if kind == "isolate" else f.target, kind,
                      {"links": [list(x) for x in links]})
            w.at(end, self.restore_links, links, kind, w.elections.office())
        elif kind == "flap":
            a, b = f.params["a"], f.params["b"]
            self.note("", "flap", {"a": a, "b": b, "period_ms": f.params["period_ms"]})
            for k in ((a, b), (b, a)):
                self.flapping[k] = self.flapping.get(k, 0) + 1
            self._flap(a, b, int(f.params["period_ms"] * 1000), end, False, w.elections.office())
        elif kind == "delay":
            us = int(f.params["extra_ms"] * 1000)
            links = [tuple(x) for x in f.params["links"]]
            for a, b in links:
                net.add_delay(a, b, us)
            self.note("", "delay", f.params)
            w.at(end, self.undelay, links, us)
        elif kind == "slow_master_fails":
            name = self._resolve(f.target)
            others = [o for o in w.names if o != name]
            links = [((name, o), int(ms * 1000)) for o, ms in zip(others, f.params["extra_ms"])]
            # The stream's connections only: Raft keeps deposing the master on time, while its
            # batches are still on the way (a latency toxic on the stream proxy).
            for (a, b), us in links:
                net.add_delay(a, b, us, (STREAM,))
            self.note(name, "slow", {"links": [[a, b, us // 1000] for (a, b), us in links], "plane": "stream"})
            for (a, b), us in links:
                w.at(end, self.undelay, [(a, b)], us, (STREAM,))
            then = Fault(0.0, f.params["then"], f.params["down_s"], name)
            w.at(w.now + int(f.params["after_ms"] * 1000), self.fault, then)
        elif kind == "lossy":
            self._drops.append(f.params["drop"])
            net.drop = max(self._drops)
            self.noise_free_since = None
            self.note("", "lossy", f.params)
            w.at(end, self._unlossy, f.params["drop"])
        elif kind == "dup":
            self._dups.append(f.params["dup"])
            net.dup = max(self._dups)
            self.noise_free_since = None
            self.note("", "dup", f.params)
            w.at(end, self._undup, f.params["dup"])
        w.health.check()

    def _links_of(self, f: Fault) -> list[tuple[str, str]]:
        w = self.world
        names = w.names
        if f.kind == "isolate":
            return w.links_around(self._resolve(f.target))
        if f.kind == "partition":
            side = set(f.params["side"])
            return [(a, b) for a in names for b in names if a != b and ((a in side) != (b in side))]
        if f.kind == "bridge":
            sa, sb = set(f.params["a"]), set(f.params["b"])
            return [(a, b) for a in names for b in names if (a in sa and b in sb) or (a in sb and b in sa)]
        return [tuple(x) for x in f.params["links"]]  # type: ignore[misc]

    def isolate(self, name: str, detail: dict[str, Any]) -> list[tuple[str, str]]:
        """Cut every link from and to ``name``, both ways, and say so (``detail``: the rare path's
        step and what it found); returns the links cut."""
        w = self.world
        links = w.links_around(name)
        for a, b in links:
            w.net.cut(a, b)
        self.note(name, "isolate", {"links": [list(x) for x in links], **detail})
        return links

    def end_lead(self, name: str, stream: list[tuple[str, str]], detail: dict[str, Any]) -> list[tuple[str, str]]:
        """A rare path's lead ends: the stream links it cut come back and ``name`` is isolated
        (``isolate``); returns the links cut."""
        w = self.world
        w.last_fault_at = w.now
        for a, b in stream:
            w.net.restore_stream(a, b)
        return self.isolate(name, detail)

    def restore_links(self, links: list[tuple[str, str]], kind: str, office: tuple | None) -> None:
        w = self.world
        if w.healed:
            return
        for a, b in links:
            w.net.restore(a, b)
        self.note("", "heal", {"fault": kind, "links": [list(x) for x in links]})
        w.elections.judge_heal(kind, office)

    def restore_then(self, links: list[tuple[str, str]], kind: str, then: Callable, *args: Any) -> None:
        """A rare path's isolation ends: its links come back and the path goes on (``then``),
        unless everything healed already."""
        w = self.world
        if w.healed:
            return
        self.restore_links(links, kind, None)
        w.health.check()
        then(*args)

    def _flap(self, a: str, b: str, period: int, end: int, is_cut: bool, office: tuple | None) -> None:
        w = self.world
        if w.healed:
            return
        fl = self.flapping
        if is_cut:
            w.net.restore(a, b)
            w.net.restore(b, a)
        if w.now >= end:
            for k in ((a, b), (b, a)):
                fl[k] -= 1
                if not fl[k]:
                    del fl[k]
            w.elections.judge_heal("flap", office)
            return
        if not is_cut:
            w.net.cut(a, b)
            w.net.cut(b, a)
        w.at(w.now + period, self._flap, a, b, period, end, not is_cut, office)

    def undelay(self, links: list[tuple[str, str]], us: int, planes: tuple[int, ...] = (RAFT, STREAM)) -> None:
        w = self.world
        if not w.healed:
            for a, b in links:
                w.net.add_delay(a, b, -us, planes)

    def _unlossy(self, p: float) -> None:
        w = self.world
        if not w.healed:
            self._drops.remove(p)
            w.net.drop = max(self._drops, default=0.0)
            self._noise_changed()

    def _undup(self, p: float) -> None:
        w = self.world
        if not w.healed:
            self._dups.remove(p)
            w.net.dup = max(self._dups, default=0.0)
            self._noise_changed()

    def _noise_changed(self) -> None:
        w = self.world
        if w.net.drop or w.net.dup:
            self.noise_free_since = None
        elif self.noise_free_since is None:
            self.noise_free_since = w.now

    def _power_cut(self, f: Fault, tries: int) -> None:
        """Every node loses power at once: each disk keeps what it fsynced and a random part of
        the rest (sim/disk.py); each node restarts after the fault's duration, in a random order,
        staggered. A node paused or stalled now is waited for (a stopped node never writes the
        `deactivated` line its lease expiry implies, so killing it would leave its history
        active for the whole pause)."""
        w = self.world
        if w.healed:
            return
        if w.paused:
            if tries < 20:
                w.at(w.now + 200_000, self._power_cut, f, tries + 1)
            else:
                self.skipped_crashes += 1
            return
        if f.params.get("busy") and tries >= 0:
            # strike in the middle of the next fsync (sim/journal_writer.py tells), or in a second
            self._cut_when_busy = f
            w.at(w.now + 1_000_000, self.power_cut_now, f)
            return
        self.power_cut_now(f)

    def fsync_started(self, took_us: int) -> None:
        """A writer began an fsync that returns in ``took_us``: a busy power cut strikes in it."""
        w = self.world
        f = self._cut_when_busy
        if f is not None:
            self._cut_when_busy = None
            w.at(w.now + w.rng_disk.randint(0, max(0, took_us - 1)), self.power_cut_now, f)

    def power_cut_now(self, f: Fault) -> None:
        w = self.world
        if w.healed or any(x is f for x in self._cuts_done):
            return
        if self._cut_when_busy is f:
            self._cut_when_busy = None
        if w.paused:
            self._power_cut(f, 0)
            return
        self._cuts_done.append(f)
        w.last_fault_at = w.now
        w.power_cuts.append(w.now_s)
        on_disk = {n: w.on_disk(n) for n in w.names}
        self.note("", "power_cut", {"down_s": f.duration, "stagger_ms": f.params.get("stagger_ms", 0)})
        for name in w.names:
            disk = w.data.get(name)
            what = disk.crash(w.rng_disk, POWER, keep_unsynced=f.kind not in ("race", "hung")) if disk is not None \
                else "no data-dir"
            if name in w.down:
                w.went_down[name] = POWER    # down already: its page cache is lost now
                self.note(name, "power_lost", what)
            else:
                w.kill(name, what)
                w.went_down[name] = POWER
        order = w.rng_disk.sample(w.names, len(w.names))
        stagger = int(f.params.get("stagger_ms", 0) * 1000)
        end = w.now + int(f.duration * 1e6)
        if f.kind == "race":
            # the power comes back last (a stagger later) where the raced batch is surely on
            # disk: the sync after the restarts hears from the others first
            last = max(w.names, key=lambda n: (on_disk.get(n, -1), w.rng_disk.random()))
            for name in order:
                w.at(end + (stagger if name == last else w.rng_disk.randint(0, 100_000)), w.restart,
                     name, w.down_gen[name])
            return
        for name in order:
            w.at(end + (w.rng_disk.randint(0, stagger) if stagger else 0), w.restart, name,
                 w.down_gen[name])

    def heal(self) -> None:
        w = self.world
        w.net.heal_all()
        self._drops.clear()
        self._dups.clear()
        self._noise_changed()
        self.flapping.clear()
        w.healed = True
        self.note("", "heal", "all faults stop")
        for name in sorted(w.paused):
            w.resume(name)
        for name in sorted(w.down):
            w.restart(name)
