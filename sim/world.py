"""The simulated world: a discrete-event loop over one seed's scenario, and its history.

Time is an integer count of microseconds from the start of the run; every history line's ``ts``
is that time in seconds (a shared clock, so the checker needs no tolerance). Every random choice
comes from generators seeded from the scenario's seed, one per concern (network, nemesis, each
node incarnation, each client), and nothing iterates a set or reads the wall clock, so one seed
gives one history, byte for byte, in any process (tests/sim/test_determinism.py).

A run: nodes start; a setup client creates the queues through the cluster; the clients work until
``duration`` while the nemesis injects the scenario's faults between ``fault_start`` and
``fault_end``; at ``fault_end`` everything heals (links restored, crashed nodes restarted with
empty memory, paused nodes resumed); after ``duration`` the clients stop, a drain client empties
the queues, and once the members have converged (or a bound passed) every node's digest is
recorded. The verdict is the checker's (cluster/checker) on the history, plus a liveness failure
when the cluster never converged after healing.
"""

from __future__ import annotations

import heapq
import itertools
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cluster import decisions
from cluster.checker import check, parse_lines, to_line
from cluster.checker.during import HEALTH, QUIESCENT
from cluster.checker.schema import DigestRecord, History, NemesisEvent, NodeEvent, Record
from cluster.config import Timing
from cluster.node_core import POLICY_TAG
from cluster.replication.core import REPLICA
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy, Batch, Forward, SnapshotAck, SyncRequest, SyncStatus

from cluster.journal.journal import JournalDamaged
from storage.commands import ReceiveMessage

from sim.clients import TIMEOUT_US, Client, DrainClient, Request, SetupClient
from sim.disk import POWER, PROCESS, SimDisk, WHERE as DISK_WHERE
from sim.net import RAFT, STREAM, Network
from sim.node import HOP_US, JournalSpec, SimNode
from sim.provenance import ProvenanceCheck
from sim.waste import WasteCheck
from sim.raft import Durable
from sim.scenario import LEASE_WAIT_S, POLICIES, Fault, Scenario
from sim.workload import Workload, workload_for

EPOCH_MS = 1_700_000_000_000      # the storage clock's origin (SQS timestamps look real)
# The drain gives up after DRAIN_MAX_US without a message received, or after DRAIN_CAP_US in
# all: a state grown by `busy` (thousands of messages, drained ten a round) takes longer than a
# minute, and giving up on a drain still making progress counted the rest as lost.
DRAIN_MAX_US = 60_000_000
DRAIN_CAP_US = 600_000_000
HEAL_QUIET_US = 2_000_000         # after a heal, a master that kept its majority keeps office this long
SETTLE_MAX_US = 30_000_000        # members must converge within this long after the drain
FORK_POLL_US = 2_000              # the fork path watches for the next master's first batch this often
FORK_WAIT_US = 6_000_000          # and gives up (healing the old master) after this long
HUNG_STAGES_S = 6.0               # a try of the hung path needs its lead plus about this
HUNG_RETRY_US = 500_000           # ... and starts this long after the try before it lost its way
HUNG_HAND_S = 0.5                 # the heir of the master that reset the hung node takes over within this
COMEBACK_POLL_US = 10_000         # the comeback path watches logs and Raft this often
HANDOFF_CHUNK_US = 10_000         # the handoff path's "slow" mark: how late the joiner takes each chunk
PROBE_US = 100_000                # the health probe's period (fault starts are probed at once too)
QUIESCE_SETTLE_US = 500_000       # every member healthy this long before a quiescent point is judged
QUIESCE_CALM_US = 10_000_000     # in calm stretches one quiescent point per this long (each costs a digest
                                  # per member: ~14 ms on a grown state); the first after each fault at once


class _StorageClock:
    __slots__ = ("world",)

    def __init__(self, world: "World") -> None:
        self.world = world

    def now_ms(self) -> int:
        return EPOCH_MS + self.world.now // 1000


@dataclass
class SimResult:
    seed: int
    scenario: Scenario
    history: str                 # JSON lines
    verdict: Any                 # cluster.checker.Verdict
    failures: list[str]
    converged: bool
    stats: dict[str, Any] = field(default_factory=dict)
    # decision coverage (cluster/decisions.py): point -> (ran, differed) over the run's cores
    decisions: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failures


class World:
    def __init__(self, scenario: Scenario, timing: Timing | None = None,
                 workload: Callable[[Scenario], Workload] | None = None):
        self.sc = scenario
        self.workload = workload_for(scenario, workload)
        self.timing = timing or Timing()
        self.names = scenario.names()
        self.now = 0
        self._heap: list[tuple[int, int, Callable, tuple]] = []
        self._seq = 0
        self.events = 0
        seed = scenario.seed
        self.rng_net = random.Random(f"net:{seed}")
        self.rng_nemesis = random.Random(f"nemesis:{seed}")
        self.rng_nodes = random.Random(f"nodes:{seed}")
        self.rng_clients = random.Random(f"clients:{seed}")
        self.storage_clock = _StorageClock(self)
        self.net = Network(self, self.rng_net, self.names, scenario.base_delay_ms)
        self.policy = AckPolicy(scenario.policy)
        self.bugs = frozenset(scenario.bugs)
        self.nodes: dict[str, SimNode] = {}
        self.incarnations: dict[str, int] = {n: 0 for n in self.names}
        self.records: list[Record] = []
        self.clients: list[Client] = []
        self.stopping = False
        self.finished = False
        self.converged = False
        self.healed = False
        self.down: set[str] = set()
        self.paused: set[str] = set()    # paused or stalled (sim/node.py: frozen)
        self.recovering: dict[str, int] = {}    # restarted node -> log position it must reach
        self.disks: dict[str, Durable] = {}      # a crashed node's durable Raft state
        self._drops: list[float] = []
        self._dups: list[float] = []
        self.drain_started_us: int | None = None
        self.drain_progress_us = 0            # when the drain last received a message
        self.settle_started_us: int | None = None
        self.skipped_crashes = 0
        # Healing deposes nobody (cluster/election.py): what each cut found at its start, the
        # heals judged, and the failures found.
        self._deactivations: dict[str, int] = {}
        self._last_fault_at = -1
        self.heal_checks = 0
        self.heal_failures: list[str] = []
        # The journal (scenario.journal): each node's data-dir, how each node last went down
        # (PROCESS or POWER) and the highest seq it had acked then, the power cuts' times.
        self.rng_disk = random.Random(f"disk:{seed}")
        self.data: dict[str, SimDisk] = {}
        self.went_down: dict[str, str] = {}
        self.promised: dict[str, int] = {}
        self.power_cuts: list[float] = []
        self.journal_failures: list[str] = []
        self.durability_failures: list[str] = []
        self.provenance = ProvenanceCheck()
        self.waste = WasteCheck()
        self.recoveries: list[dict[str, Any]] = []
        self._down_gen: dict[str, int] = {n: 0 for n in self.names}
        self._writers: list[Any] = []
        self._cut_when_busy: Fault | None = None
        self._cuts_done: list[Fault] = []
        # Judged during the run (cluster/checker/during.py): the healthy set last written, since
        # when every member has been healthy, the last quiescent point, the flapping links.
        self._health: tuple | None = None
        self._everyone_since: int | None = None
        self._last_quiescent = -QUIESCE_CALM_US
        self._quiesce_due = True         # a fault touched someone since the last quiescent point
        self.quiescent_points = 0
        self._flapping: dict[tuple[str, str], int] = {}
        # Reach of the rare paths (sim/README.md, "Rare paths"): epochs seen, the members'
        # positions when each sync started, sync decisions by what their positions held,
        # transfers (sent) and those during which the sender's log moved.
        self.epochs: set[int] = set()
        self._sync_pos: dict[str, dict[str, tuple[int, int]]] = {}
        self._transfer_at: dict[tuple[str, str], int] = {}
        self.reach = {"syncs": 0, "syncs_multi_epoch": 0, "syncs_older_longer": 0, "syncs_order_matters": 0,
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
        self._lease_wait: tuple | None = None    # a lease step waiting for a follower to stand
        self.deaf_wait: tuple | None = None      # a deaf step waiting for a deaf follower's pre-vote
        self.race_arm: Fault | None = None       # a power cut waiting for its race (race_check)
        self.wiped_wait: tuple | None = None     # a wiped step waiting for its keepers' positioning
        self.hung_wait: tuple | None = None      # a hung step waiting for its master's next fsync
        self.hung_held: list[Fault] | None = None   # faults due while a hung try has the floor
        self.replay_wait: tuple | None = None    # a replay step waiting for a forwarded receive's answer
        self._replaying: set[tuple[str, str]] = set()   # stream connections stalled by it
        self.relink_wait: tuple | None = None    # a relink step waiting for a transfer to its divergent member
        self.gc_wait: tuple | None = None        # a gc step: waiting for a stand, a vote request, an activation
        # each rare path's first step (scenario.RARE_PROBABILITY), by the kind of fault that starts it
        self._rare_starts: dict[str, Callable[[Fault], None]] = {
            "chain": lambda f: self._chain(f, 0, None),
            "lease": lambda f: self._lease_step(f, 0, 0),
            "fork": lambda f: self._lead_step("fork", f, 0, 0),
            "deaf": lambda f: self._deaf_step(f, 0, 0),
            "race": lambda f: self._race_arm(f, 0),
            "handoff": lambda f: self._handoff_step(f, 0, 0),
            "wiped": lambda f: self._wiped_step(f, 0, 0),
            "hung": self._hung_step,
            "replay": lambda f: self._replay_step(f, 0),
            "relink": lambda f: self._lead_step("relink", f, 0, 0),
            "gc": lambda f: self._gc_step(f, 0, 0),
            "comeback": lambda f: self._lead_step("comeback", f, 0, 0),
            "turn": lambda f: self._handoff_step(f, 0, 0),
        }
        self.turn_wait: tuple | None = None      # a turn step: the joiner's frames held for a master's operation
        # The vote guard's premise (cluster/lease.py): when each node last accepted an
        # AppendEntries, and from whom, as Raft saw it (not as the election core recorded it).
        self.leader_contact: dict[str, tuple[int, str]] = {}
        self.vote_failures: list[str] = []
        # Disruption (World.stood): since when each node has been up and running (absent: not
        # now), and since when no link has lost or doubled frames (None: not now).
        self._running_since: dict[str, int] = {}
        self._noise_free_since: int | None = 0
        self.disruptions_judged = 0
        self.disrupt_failures: list[str] = []
        sc = scenario
        self.journal = JournalSpec(sc.fsync, sc.fsync_interval_ms * 1000,
                                   (int(sc.fsync_ms[0] * 1000), int(sc.fsync_ms[1] * 1000)),
                                   sc.snapshot_min_bytes, sc.segment_bytes,
                                   tuple(sc.snapshot_step)) if sc.journal else None

    # --- time and events ------------------------------------------------------------------------

    @property
    def now_s(self) -> float:
        return self.now / 1e6

    @property
    def now_ms(self) -> int:
        return self.now // 1000

    def at(self, t: int, fn: Callable, *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn, args))

    def record(self, r: Record) -> None:
        self.records.append(r)
        ev = r.event
        if ev == "deactivated":
            self._deactivations[r.node] = self._deactivations.get(r.node, 0) + 1
        elif ev == "activated":
            if self.gc_wait is not None and self.gc_wait[0] == "stalled" and r.node != self.gc_wait[3]:
                self._gc_overtaken(self.gc_wait)
        elif ev in _REACH_EVENTS:
            self._reach(r)
            if ev == "transfer_started" and self.relink_wait is not None:
                self._relink_check(r)

    def _reach(self, r: Any) -> None:
        """Counts how often a run reached the rare paths (observed from outside the cores)."""
        ev, f = r.event, r.fields
        if ev == "view":
            self.epochs.add(f.get("epoch"))
        elif ev == "sync_started":
            self._sync_pos[r.node] = {n: (x.core.replication.log.last_epoch, x.core.replication.log.last_seq)
                                      for n, x in self.nodes.items() if x.alive}
        elif ev == "synced":
            snap = self._sync_pos.pop(r.node, {})
            answered = {r.node, *(f.get("positions") or {}), *(f.get("divergent") or ())}
            pos = [snap[n] for n in sorted(answered) if n in snap]
            self.reach["syncs"] += 1
            if len({e for e, _ in pos}) > 1:
                self.reach["syncs_multi_epoch"] += 1
            if any(ea < eb and sa > sb for ea, sa in pos for eb, sb in pos):
                self.reach["syncs_older_longer"] += 1
            if pos and max(pos) != max(pos, key=lambda p: (p[1], p[0])):
                self.reach["syncs_order_matters"] += 1
        elif f.get("direction") == "sent":
            key = (r.node, f.get("peer"))
            if ev == "transfer_started":
                self._transfer_at[key] = f.get("at_seq") or 0
            elif key in self._transfer_at:
                at = self._transfer_at.pop(key)
                node = self.nodes.get(r.node)
                self.reach["transfers"] += 1
                self.reach["transfer_records_max"] = max(self.reach["transfer_records_max"], f.get("records") or 0)
                if node is not None and node.core.replication.log.last_seq > at:
                    self.reach["transfers_log_moved"] += 1

    def run(self) -> None:
        sc = self.sc
        for n in self.names:
            self.at(self.rng_nodes.randrange(100_000), self._start_node, n)
        setup = SetupClient(self, random.Random(f"setup:{sc.seed}"), list(self.workload.queues()))
        setup.start(300_000)
        for f in sc.faults:
            self.at(int(f.at * 1e6), self._fault, f)
        self.at(int(sc.fault_end * 1e6), self._heal)
        self.at(int(sc.duration * 1e6), self._stop_clients)
        self.at(PROBE_US, self._probe)
        heap = self._heap
        pop = heapq.heappop
        limit = int(sc.duration * 1e6) + DRAIN_CAP_US + SETTLE_MAX_US + 60_000_000
        while heap and not self.finished:
            t, _, fn, args = pop(heap)
            if t > limit:
                break
            self.now = t
            self.events += 1
            fn(*args)

    # --- nodes ----------------------------------------------------------------------------------

    def _start_node(self, name: str) -> None:
        self.incarnations[name] += 1
        inc = self.incarnations[name]
        jextra: dict[str, Any] = {}
        if self.journal is not None:
            data = self.data.setdefault(name, SimDisk(f"{DISK_WHERE}/{name}"))
            jextra = dict(journal=self.journal, data=data,
                          disk_rng=random.Random(f"writer:{self.sc.seed}:{name}:{inc}"))
        try:
            node = SimNode(self, name, self.names, inc * 1000 + self.names.index(name),
                           policy=self.policy, forward=self.sc.forward, timing=self.timing,
                           limits=Limits(throttle_lag_batches=self.sc.throttle_lag_batches,
                                         throttle_lag_ms=self.sc.throttle_lag_ms, gather_ms=self.sc.gather_ms),
                           log_limit_bytes=self.sc.log_limit_bytes,
                           chunk_records=self.sc.chunk_records, transfer_window=self.sc.transfer_window,
                           bugs=self.bugs,
                           rng=random.Random(f"node:{self.sc.seed}:{name}:{inc}"),
                           disk=self.disks.get(name), **jextra)
        except JournalDamaged as e:
            # the product refuses to start (an operator must run `journal truncate`): so does this
            self.journal_failures.append(f"journal: {name} cannot start at {self.now_s:.6f} s: {e}")
            self.down.add(name)
            return
        if node.recovered is not None:
            self._check_recovery(name, node)
            self._writers.append(node.writer)
        self.nodes[name] = node
        self.down.discard(name)
        self._running_since[name] = self.now
        node.start()

    def _check_recovery(self, name: str, node: SimNode) -> None:
        """What the journal gave back must cover every seq the node acked before it went down,
        where its fsync policy promises that: after a process crash under every policy (what
        was reported durable was at least written, and the page cache survives), after a power
        cut only under `always`."""
        rec = dict(node.recovered or {})
        how = self.went_down.get(name)
        rec.update(node=name, at=self.now_s, how=how, acked=self.promised.get(name, 0))
        self.recoveries.append(rec)
        if how is None:
            return
        promised = self.promised.get(name, 0)
        if (how == PROCESS or self.sc.fsync == "always") and rec["seq"] < promised:
            self.durability_failures.append(
                f"durability: {name} had acked seq {promised} before its {how} crash, but its journal "
                f"recovered only up to seq {rec['seq']} (at {self.now_s:.6f} s; fsync = {self.sc.fsync})")

    def queue_policies(self) -> dict[str, str]:
        """The queues that carry their own ack policy (the workload tagged them): the checker
        holds each queue's data to its own policy."""
        return {q.name: q.tags[POLICY_TAG] for q in self.workload.queues()
                if q.name is not None and q.tags.get(POLICY_TAG) in POLICIES}

    def master(self) -> SimNode | None:
        """The god view: the node that is active and serving now, without touching its state."""
        now_s = self.now_s
        found = [n for n in self.names if n in self.nodes and self.nodes[n].alive and not self.nodes[n].frozen
                 and self.nodes[n].core.membership.evaluate(now_s)[0] and self.nodes[n].core.replication.serving]
        return self.nodes[found[0]] if len(found) == 1 else None

    # --- clients --------------------------------------------------------------------------------

    def setup_done(self) -> None:
        sc = self.sc
        for i in range(sc.clients):
            c = Client(self, f"c{i + 1}", random.Random(f"client:{sc.seed}:{i}"), self.workload, sc.think_ms * 1000)
            self.clients.append(c)
            c.start(self.rng_clients.randrange(50_000))
        if self.stopping:
            self._maybe_drain()

    def send_request(self, req: Request) -> None:
        node = self.nodes.get(req.node)
        delay = self.rng_clients.randint(200, 2_000)
        if node is not None and node.alive:
            self.at(self.now + delay, _deliver_request, node, req)
        self.at(req.sent_us + TIMEOUT_US, self._timeout, req)

    def _timeout(self, req: Request) -> None:
        if not req.done:
            req.done = True
            req.client.done(req, "unknown", None, "Timeout: no answer", None)

    def reply(self, req: Request, outcome: str, result: Any, error: str | None, hint: str | None = None) -> None:
        self.at(self.now + self.rng_clients.randint(200, 2_000), self._answer, req, outcome, result, error, hint)

    def _answer(self, req: Request, outcome: str, result: Any, error: str | None, hint: str | None) -> None:
        if not req.done:
            req.done = True
            req.client.done(req, outcome, result, error, hint)

    def _stop_clients(self) -> None:
        self.stopping = True
        self._maybe_drain()

    def client_idle(self) -> None:
        self._maybe_drain()

    def _maybe_drain(self) -> None:
        if self.drain_started_us is not None or not self.clients or not all(c.idle for c in self.clients):
            return
        self.drain_started_us = self.now
        d = DrainClient(self, random.Random(f"drain:{self.sc.seed}"), [q.name for q in self.workload.queues()])
        self.drain = d
        d.start(10_000)

    def drained(self, empty_rounds: int) -> bool:
        started = self.drain_started_us
        if started is not None and (self.now - max(started, self.drain_progress_us) > DRAIN_MAX_US
                                    or self.now - started > DRAIN_CAP_US):
            return True
        m = self.master()
        return empty_rounds >= 2 and m is not None and m.core.storage.message_count() == 0

    def drain_done(self) -> None:
        self.settle_started_us = self.now
        self._settle()

    def _settle(self) -> None:
        if self._converged() or self.now - self.settle_started_us > SETTLE_MAX_US:
            self.converged = self._converged()
            for n in self.names:
                node = self.nodes.get(n)
                if node is None or not node.alive:
                    continue
                view = node.core.view
                self.record(DigestRecord(self.now_s, n, node.core.storage.digest(), node.core.replication.master,
                                         view.view_id if view is not None else None))
            self.finished = True
            return
        self.at(self.now + 100_000, self._settle)

    def _converged(self) -> bool:
        """Every member a replica of the serving master, in its view, holding its last entry (the
        same seq written in the same epoch: a member outside the view may hold a divergent tail
        that ends at the same seq) and having acked it."""
        m = self.master()
        if m is None or m.core.replication.senders:
            return False
        log = m.core.replication.log
        last = log.last_seq
        for n in self.names:
            node = self.nodes.get(n)
            if node is None or not node.alive or node.frozen:
                return False
            if node is m:
                continue
            c = node.core.replication
            if c.role != REPLICA or c.master != m.name or c.log.last_seq != last or c.receiver is not None \
                    or c.log.last_epoch != log.last_epoch:
                return False
        replicas = m.core.replication.master_core.status(self.now_ms)["replicas"]
        return len(replicas) == len(self.names) - 1 and all(r["acked_seq"] == last for r in replicas.values())

    # --- judged during the run (cluster/checker/during.py) ------------------------------------

    def _probe(self) -> None:
        if self.drain_started_us is not None or self.finished:
            return
        self.provenance.scan(self.now_s, self.nodes)
        self._check_health()
        self._quiescent()
        self.at(self.now + PROBE_US, self._probe)

    def _healthy(self) -> tuple[str, ...]:
        """The largest set of nodes that are up, not paused or catching up (no transfer coming
        in, not amnesiac: a member that restarted without its state counts in no sync quorum
        until a serving master has brought it up to date, sim/README.md bug 1), and connected
        to each other both ways on both planes without extra latency or flapping, while no link
        loses or doubles frames; of several, one holding the master."""
        net = self.net
        if net.drop or net.dup:
            return ()
        cand = []
        for n in self.names:
            node = self.nodes.get(n)
            if n in self.down or n in self.paused or node is None or not node.alive \
                    or node.core.replication.receiver is not None or node.core.replication.amnesiac:
                continue
            cand.append(n)
        links, flapping = net.links, self._flapping
        bad = {(a, b) for a in cand for b in cand if a != b
               and ((lk := links[(a, b)]).cuts or lk.stream_cuts or lk.extra_us[0] or lk.extra_us[1]
                    or (a, b) in flapping or (a, b) in net.gates or (a, b) in self._replaying)}
        if not bad:
            return tuple(cand)
        m = self.master()
        quorum = len(self.names) // 2 + 1
        for size in range(len(cand) - 1, quorum - 1, -1):
            found = [c for c in itertools.combinations(cand, size)
                     if not any((a, b) in bad for a in c for b in c if a != b)]
            if found:
                return next((c for c in found if m is not None and m.name in c), found[0])
        return ()

    def _check_health(self) -> None:
        healthy = self._healthy()
        everyone = len(healthy) == len(self.names)
        if everyone:
            if self._everyone_since is None:
                self._everyone_since = self.now
        else:
            self._everyone_since = None
            self._quiesce_due = True
        m = self.master()
        judged = len(healthy) > len(self.names) // 2 and (m is None or m.name in healthy)
        state = (healthy, judged)
        if state != self._health:
            self._health = state
            self._nemesis("", HEALTH, {"healthy": list(healthy), "judged": judged, "everyone": everyone})

    def _quiescent(self) -> None:
        """Every member healthy for a while and the stream idle: all digests must be the master's."""
        if self._everyone_since is None or self.now - self._everyone_since < QUIESCE_SETTLE_US \
                or (not self._quiesce_due and self.now - self._last_quiescent < QUIESCE_CALM_US) \
                or not self._converged():
            return
        m = self.master()
        if m is None or m.core.replication.master_core is None or m.core.replication.master_core._staged:
            return
        self._last_quiescent = self.now
        self._quiesce_due = False
        self.quiescent_points += 1
        self._nemesis("", QUIESCENT, {"master": m.name,
                                      "digests": {n: self.nodes[n].core.storage.digest() for n in self.names}})

    # --- the nemesis ----------------------------------------------------------------------------

    def _nemesis(self, node: str, action: str, detail: Any = None) -> None:
        d = None if detail is None else (detail if isinstance(detail, str) else json.dumps(detail, sort_keys=True))
        self.record(NemesisEvent(self.now_s, node, action, d))

    def _resolve(self, target: str) -> str:
        if target != "master":
            return target
        m = self.master()
        if m is not None:
            return m.name
        alive = [n for n in self.names if n not in self.down]
        return self.rng_nemesis.choice(alive or self.names)

    def _may_crash(self, name: str) -> bool:
        """Crashing loses a node's messages and replication log (its Raft state survives). Under
        crash policy ``any`` a node may crash whenever fewer than (n-1)/2 nodes are down or
        catching up; under ``safe`` only when the others hold everything a majority holds, so
        that the crash cannot take away a copy that any majority still needs."""
        if name in self.down or name in self.paused:
            # A node killed while stopped never writes the `deactivated` line its lease expiry
            # implies, so the history would make it active for its whole pause.
            return False
        m = self.master()
        for n, need in list(self.recovering.items()):
            node = self.nodes.get(n)
            c = node.core.replication if node is not None else None
            # caught up: a replica of the master of the moment, or that master itself (its sync
            # took in everything a majority holds)
            if c is not None and node.alive and c.receiver is None and c.log.last_seq >= need \
                    and ((c.role == REPLICA and (m is None or c.master == m.name)) or m is node):
                del self.recovering[n]
        lost = len(self.down | set(self.recovering))
        if self.sc.crash_policy == "any":
            return lost + 1 <= (len(self.names) - 1) // 2
        if lost:
            return False
        others = [self.nodes[n] for n in self.names if n != name]
        if any(o.frozen or not o.alive for o in others):
            return False
        quorum = len(self.names) // 2 + 1
        nodes = [self.nodes[n] for n in self.names]
        held = sorted(((x.core.replication.log.last_epoch, x.core.replication.log.last_seq) for x in nodes),
                      reverse=True)[quorum - 1]
        if any((o.core.replication.log.last_epoch, o.core.replication.log.last_seq) < held for o in others):
            return False
        raft_held = sorted((len(x.raft.log) for x in nodes), reverse=True)[quorum - 1]
        return all(len(o.raft.log) >= raft_held for o in others)

    def _fault(self, f: Fault) -> None:
        if self.healed:
            return
        if self.hung_held is not None and f.kind != "hung":
            self.hung_held.append(f)      # a hung try has the floor (_hung_step)
            return
        self._last_fault_at = self.now
        kind = f.kind
        start = self._rare_starts.get(kind)
        if start is not None:
            start(f)
            return
        end = self.now + int(f.duration * 1e6)
        net = self.net
        if kind == "crash":
            name = self._resolve(f.target)
            if not self._may_crash(name):
                self.skipped_crashes += 1
                return
            self._kill(name)
            self.at(end, self._restart, name, self._down_gen[name])
        elif kind == "crash_all":
            self._power_cut(f, 0)
        elif kind in ("pause", "stall"):
            name = self._resolve(f.target)
            node = self.nodes.get(name)
            if name in self.down or name in self.paused or node is None:
                return
            self.paused.add(name)
            self._running_since.pop(name, None)
            node.freeze(loop_only=kind == "stall")
            self._nemesis(name, kind)
            self.at(end, self._resume, name)
        elif kind in ("isolate", "partition", "bridge", "one_way"):
            links = self._links_of(f)
            for a, b in links:
                net.cut(a, b)
            self._nemesis(self._resolve(f.target) if kind == "isolate" else f.target, kind,
                          {"links": [list(x) for x in links]})
            self.at(end, self._restore_links, links, kind, self._office())
        elif kind == "flap":
            a, b = f.params["a"], f.params["b"]
            self._nemesis("", "flap", {"a": a, "b": b, "period_ms": f.params["period_ms"]})
            for k in ((a, b), (b, a)):
                self._flapping[k] = self._flapping.get(k, 0) + 1
            self._flap(a, b, int(f.params["period_ms"] * 1000), end, False, self._office())
        elif kind == "delay":
            us = int(f.params["extra_ms"] * 1000)
            links = [tuple(x) for x in f.params["links"]]
            for a, b in links:
                net.add_delay(a, b, us)
            self._nemesis("", "delay", f.params)
            self.at(end, self._undelay, links, us)
        elif kind == "slow_master_fails":
            name = self._resolve(f.target)
            others = [o for o in self.names if o != name]
            links = [((name, o), int(ms * 1000)) for o, ms in zip(others, f.params["extra_ms"])]
            # The stream's connections only: Raft keeps deposing the master on time, while its
            # batches are still on the way (a latency toxic on the stream proxy).
            for (a, b), us in links:
                net.add_delay(a, b, us, (STREAM,))
            self._nemesis(name, "slow", {"links": [[a, b, us // 1000] for (a, b), us in links], "plane": "stream"})
            for (a, b), us in links:
                self.at(end, self._undelay, [(a, b)], us, (STREAM,))
            then = Fault(0.0, f.params["then"], f.params["down_s"], name)
            self.at(self.now + int(f.params["after_ms"] * 1000), self._fault, then)
        elif kind == "lossy":
            self._drops.append(f.params["drop"])
            net.drop = max(self._drops)
            self._noise_free_since = None
            self._nemesis("", "lossy", f.params)
            self.at(end, self._unlossy, f.params["drop"])
        elif kind == "dup":
            self._dups.append(f.params["dup"])
            net.dup = max(self._dups)
            self._noise_free_since = None
            self._nemesis("", "dup", f.params)
            self.at(end, self._undup, f.params["dup"])
        self._check_health()

    # --- quick successive failovers (scenario._chain) -------------------------------------------

    def _chain(self, f: Fault, step: int, prev: tuple[str, list] | None, expected: str | None = None) -> None:
        """Step ``step``: cut the stream of the master of the moment for its lead (it keeps
        office through Raft and serves, its batches reaching nobody), then isolate it. The
        step after waits for the next master, then lets it serve for its gap (sim/scenario.py
        _chain) before it deposes that one in turn."""
        if self.healed:
            return
        m = self.master()
        if m is None or (prev is not None and m.name == prev[0]) or (expected is not None and m.name != expected):
            self._chain_next(f, step, prev, 0)
            return
        self._last_fault_at = self.now
        name = m.name
        lead = f.params["lead_s"][step]
        others = [o for o in self.names if o != name]
        if f.params.get("keep_one") and len(others) > 1:
            others = others[1:]
        links = [(name, o) for o in others] + [(o, name) for o in others] if lead > 0 else []
        for a, b in links:
            self.net.cut_stream(a, b)
        if links:
            self._nemesis(name, "stream_cut", {"links": [list(x) for x in links], "lead_s": lead})
        self._check_health()
        self.at(self.now + int(lead * 1e6), self._chain_isolate, f, step, prev, name, links)

    def _chain_next(self, f: Fault, step: int, prev: tuple[str, list] | None, tries: int) -> None:
        """Wait (up to 5 s) for a master other than the one isolated last; give up the chain
        (healing the isolation it holds) if none comes."""
        if self.healed:
            return
        m = self.master()
        if m is not None and (prev is None or m.name != prev[0]):
            self.at(self.now + int(f.params["gap_s"][step - 1] * 1e6), self._chain, f, step, prev, m.name)
        elif tries < 50:
            self.at(self.now + 100_000, self._chain_next, f, step, prev, tries + 1)
        elif prev is not None:
            self._restore_links(prev[1], "chain", None)

    def _chain_isolate(self, f: Fault, step: int, prev: tuple[str, list] | None, name: str,
                       stream: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        self._last_fault_at = self.now
        for a, b in stream:
            self.net.restore_stream(a, b)
        links = [(name, o) for o in self.names if o != name] + [(o, name) for o in self.names if o != name]
        for a, b in links:
            self.net.cut(a, b)
        self._nemesis(name, "isolate", {"links": [list(x) for x in links], "chain_step": step})
        if prev is not None:
            self._restore_links(prev[1], "chain", None)
        if step + 1 < len(f.params["lead_s"]):
            self.at(self.now + 100_000, self._chain_next, f, step + 1, (name, links), 0)
        else:
            self.at(self.now + int(f.params["hold_s"] * 1e6), self._restore_links, links, "chain", None)
        self._check_health()

    # --- an older epoch's longer tail (scenario._fork) --------------------------------------

    def _lead_step(self, kind: str, f: Fault, step: int, tries: int) -> None:
        """A ``fork``, ``relink`` or ``comeback`` step: cut the master of the moment's stream
        (Raft stays up: it keeps office and writes a tail that no replica takes) for the step's
        lead, then isolate it, and watch for the next master (``_<kind>_watch``). ``comeback``
        cuts only the master's side: members that forward clients still reach it, so its
        tail grows whoever its clients talk to."""
        if self.healed:
            return
        m = self.master()
        if m is None:
            # a comeback step waits longer: its later stages need a master of their own
            if tries < (30 if kind != "comeback" else 100):
                self.at(self.now + 100_000, self._lead_step, kind, f, step, tries + 1)
            return
        self._last_fault_at = self.now
        name = m.name
        others = [o for o in self.names if o != name]
        stream = [(name, o) for o in others] + ([(o, name) for o in others] if kind != "comeback" else [])
        for a, b in stream:
            self.net.cut_stream(a, b)
        self._nemesis(name, "stream_cut", {"links": [list(x) for x in stream], "lead_s": f.params["lead_s"][step],
                                           f"{kind}_step": step})
        self._check_health()
        self.at(self.now + int(f.params["lead_s"][step] * 1e6), self._lead_isolate, kind, f, step, name, stream)

    def _lead_isolate(self, kind: str, f: Fault, step: int, old: str, stream: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        self._last_fault_at = self.now
        for a, b in stream:
            self.net.restore_stream(a, b)
        links = [(old, o) for o in self.names if o != old] + [(o, old) for o in self.names if o != old]
        for a, b in links:
            self.net.cut(a, b)
        self._nemesis(old, "isolate", {"links": [list(x) for x in links], f"{kind}_step": step})
        self._check_health()
        if kind == "fork":
            self.at(self.now + FORK_POLL_US, self._fork_watch, f, step, old, links, None, 0)
        elif kind == "relink":
            self.at(self.now + FORK_POLL_US, self._relink_watch, f, step, old, links, 0)
        else:
            self.at(self.now + COMEBACK_POLL_US, self._comeback_ahead, f, step, old, links, 0)

    def _fork_watch(self, f: Fault, step: int, old: str, links: list[tuple[str, str]],
                    new: tuple[str, int] | None, polls: int) -> None:
        """Wait for the next master, then for its first batch of its epoch to commit (up to
        FORK_WAIT_US in all); then, after the step's settle time, depose it and heal ``old``."""
        if self.healed:
            return
        if polls * FORK_POLL_US > FORK_WAIT_US:
            self._restore_links(links, "fork", None)
            self._check_health()
            self._fork_next(f, step)
            return
        if new is None:
            m = self.master()
            if m is not None and m.name != old and m.core.view is not None:
                log, epoch = m.core.replication.log, m.core.view.epoch
                first = log.last_seq + 1     # its epoch's first seq
                while first > 1 and (e := log.get(first - 1)) is not None and e.written_epoch == epoch:
                    first -= 1
                new = (m.name, first)
        elif self._fork_committed(*new):
            self.at(self.now + int(f.params["settle_ms"][step] * 1000), self._fork_depose, f, step, old, links, new[0])
            return
        self.at(self.now + FORK_POLL_US, self._fork_watch, f, step, old, links, new, polls + 1)

    def _fork_committed(self, name: str, first: int) -> bool:
        """Whether ``name``'s first batch of its epoch (seq ``first``) is on as many replicas as
        its policy needs (one at least) and, with a journal, on its own disk."""
        node = self.nodes[name]
        mc = node.core.replication.master_core if node.alive else None
        if mc is None:
            return False
        need = max(1, mc.policy.required(len(mc.members), mc.configured))
        own = mc.local_durable is None or mc.local_durable >= first
        return own and sum(1 for r in mc.replicas.values() if r.acked >= first) >= need

    def _fork_depose(self, f: Fault, step: int, old: str, old_links: list[tuple[str, str]], new: str) -> None:
        if self.healed:
            return
        self._last_fault_at = self.now
        links = [(new, o) for o in self.names if o != new] + [(o, new) for o in self.names if o != new]
        for a, b in links:
            self.net.cut(a, b)
        o = self.nodes[old].core.replication.log
        held = [(x.core.replication.log.last_epoch, x.core.replication.log.last_seq)
                for n, x in self.nodes.items() if x.alive and n not in (old, new)]
        longer = any(e > o.last_epoch and s < o.last_seq for e, s in held)
        self.reach["fork_steps"] += 1
        self.reach["fork_older_longer"] += longer
        self._nemesis(new, "isolate", {"links": [list(x) for x in links], "fork_step": step,
                                       "tail": [o.last_epoch, o.last_seq], "older_longer": longer})
        self._restore_links(old_links, "fork", None)
        self._check_health()
        self.at(self.now + int(f.params["hold_s"][step] * 1e6), self._fork_heal, f, step, links)

    def _fork_heal(self, f: Fault, step: int, links: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        self._restore_links(links, "fork", None)
        self._check_health()
        self._fork_next(f, step)

    def _fork_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["lead_s"]):
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._lead_step, "fork", f, step + 1, 0)

    # --- followers deaf to the master (scenario._deaf) -----------------------------------------

    def _deaf_step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master's links to ``deaf`` of its followers one way (they
        still reach it), until one of them asks for pre-votes (``pre_voting``), or for the
        step's hold: the heal then races the master's next heartbeat with the pre-vote's
        answers, which the master must refuse."""
        if self.healed:
            return
        m = self.master()
        if m is None:
            if tries < 30:
                self.at(self.now + 100_000, self._deaf_step, f, step, tries + 1)
            return
        self._last_fault_at = self.now
        rng = random.Random(f"{f.params['pick']}:{step}")
        deaf = sorted(rng.sample([o for o in self.names if o != m.name], f.params["deaf"][step]))
        links = [(m.name, d) for d in deaf]
        for a, b in links:
            self.net.cut(a, b)
        self._nemesis(m.name, "one_way", {"links": [list(x) for x in links], "deaf_step": step})
        self._check_health()
        wait = (f, step, links, frozenset(deaf))
        self.deaf_wait = wait
        self.at(self.now + int(f.params["hold_s"][step] * 1e6), self._deaf_heal, wait)

    def pre_voting(self, name: str) -> None:
        """``name`` sends its pre-vote requests now (sim/node.py)."""
        wait = self.deaf_wait
        if wait is not None and name in wait[3] and not self.healed:
            self.reach["deaf_heals"] += 1
            self._deaf_heal(wait)

    def _deaf_heal(self, wait: tuple) -> None:
        if self.deaf_wait is not wait or self.healed:
            return
        self.deaf_wait = None
        f, step, links, _ = wait
        self._restore_links(links, "deaf", None)
        self._check_health()
        if step + 1 < len(f.params["hold_s"]):
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._deaf_step, f, step + 1, 0)

    # --- a master lost right after a transfer (scenario._handoff) -------------------------------

    def _handoff_step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: crash a replica for ``down_s`` (restarted without its memory, or behind
        the master's small log, its catch-up is a transfer), then watch for that transfer."""
        if self.healed:
            return
        m = self.master()
        replicas = [n for n in self.names if m is not None and n != m.name and n not in self.down
                    and n not in self.paused]
        joiner = replicas[int(f.params["pick"] * len(replicas))] if replicas else None
        if joiner is None or not self._may_crash(joiner):
            if tries < 30:
                self.at(self.now + 100_000, self._handoff_step, f, step, tries + 1)
            else:
                self._handoff_next(f, step)
            return
        self._last_fault_at = self.now
        self._kill(joiner, f.kind)
        self.at(self.now + int(f.params["down_s"][step] * 1e6), self._handoff_rejoin, f, step, joiner,
                self._down_gen[joiner])

    def _handoff_rejoin(self, f: Fault, step: int, joiner: str, gen: int) -> None:
        if self.healed:
            return
        self._restart(joiner, gen)
        if f.kind == "turn":
            self._turn_arm(f, step, joiner)
        else:
            self._handoff_watch(f, step, joiner, None, 0)

    def _handoff_watch(self, f: Fault, step: int, joiner: str, gated: tuple | None, polls: int) -> None:
        """Once a serving master sends ``joiner`` a transfer, every member's stream from it stops
        taking batches past the step's mark ("now": the log's end at that instant, so that what
        the rest of the read sees is the master's alone; "end": the position the last chunk
        names); once the joiner took the transfer, ``settle_ms`` later, the master is isolated."""
        if self.healed:
            return
        if gated is None:
            m = self.master()
            rc = m.core.replication if m is not None and m.alive else None
            sender = rc.senders.get(joiner) if rc is not None and rc.serving else None
            if sender is not None:
                at = rc.log.last_seq
                mark = f.params["mark"][step]
                others = [o for o in self.names if o != m.name]
                delays: tuple[tuple[str, int], ...] = ()
                if mark == "end":
                    gate = lambda msg: type(msg) is not Batch or sender.end_seq is None or msg.seq <= sender.end_seq  # noqa: E731
                    for o in others:
                        self.net.gates[(m.name, o)] = gate
                else:
                    # "slow": the others take the stream late, so that writes go on (committing
                    # late) while the read runs and the isolation loses what is on its way; the
                    # joiner takes each chunk HANDOFF_CHUNK_US late: a read of many round trips
                    slow = int(f.params["slow_ms"][step] * 1000)
                    delays = tuple((o, HANDOFF_CHUNK_US if o == joiner else slow) for o in others)
                    for o, us in delays:
                        self.net.add_delay(m.name, o, us, (STREAM,))
                self.reach["handoff_gates"] += 1
                self._nemesis(m.name, "handoff_gate", {"joiner": joiner, "mark": mark, "at_seq": at,
                                                       "slow_ms": f.params["slow_ms"][step]})
                gated = (m.name, at, delays)
                self._check_health()
        else:
            master, at, _ = gated
            node, j = self.nodes[master], self.nodes[joiner]
            if not node.alive or not node.core.replication.serving:
                self._handoff_ungate(f, step, gated)
                self._handoff_next(f, step)
                return
            taken = j.core.replication.last_transfer if j.alive else None
            if taken is not None and taken.get("direction") == "received" and taken.get("peer") == master:
                if f.kind == "handoff":
                    self.reach["handoff_tails"] += taken["at_seq"] > at
                self.at(self.now + int(f.params["settle_ms"][step] * 1000), self._handoff_isolate, f, step, gated)
                return
        if polls * FORK_POLL_US > f.params["wait_s"] * 1e6:
            if gated is not None:
                self._handoff_ungate(f, step, gated)
            self._handoff_next(f, step)
            return
        self.at(self.now + FORK_POLL_US, self._handoff_watch, f, step, joiner, gated, polls + 1)

    def _handoff_isolate(self, f: Fault, step: int, gated: tuple) -> None:
        if self.healed:
            return
        master = gated[0]
        self._last_fault_at = self.now
        links = [(master, o) for o in self.names if o != master] + [(o, master) for o in self.names if o != master]
        for a, b in links:
            self.net.cut(a, b)
        self.reach[f"{f.kind}_isolations"] += 1
        self._nemesis(master, "isolate", {"links": [list(x) for x in links], f"{f.kind}_step": step})
        self._handoff_ungate(f, step, gated)   # after the cut: what the slowed links carried is lost
        self._check_health()
        self.at(self.now + int(f.params["hold_s"][step] * 1e6), self._handoff_heal, f, step, links)

    def _handoff_heal(self, f: Fault, step: int, links: list[tuple[str, str]]) -> None:
        self._restore_links(links, f.kind, None)
        self._check_health()
        self._handoff_next(f, step)

    def _handoff_ungate(self, f: Fault, step: int, gated: tuple) -> None:
        master, _, delays = gated
        for o in self.names:
            self.net.gates.pop((master, o), None)
        for o, us in delays:
            self.net.add_delay(master, o, -us, (STREAM,))
        self._check_health()

    def _handoff_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["down_s"]) and not self.healed:
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._handoff_step, f, step + 1, 0)

    # --- a transfer's last chunk built in the turn of a client's operation (scenario._turn) ------

    def _turn_arm(self, f: Fault, step: int, joiner: str) -> None:
        """The joiner is back: its stream frames that start or advance a transfer (SyncStatus,
        SnapshotAck) wait, once they have arrived, for the receiver's next turn with a client's
        operation (``turn_op``), at most ``cap_ms``, and so does whatever arrives after them on
        that link (FIFO): they sat in the socket until the loop read it with a request."""
        held: dict[str, list[tuple[Any, int]]] = {o: [] for o in self.names if o != joiner}
        holds = {o: 0 for o in held}    # per receiver: how many times frames began to be held
        wait = (f, step, joiner, held, holds)
        self.turn_wait = wait
        self.at(self.now + int(f.params["wait_s"] * 1e6), self._turn_give_up, wait)

    def turn_hold(self, node: SimNode, sender: str, msg: Any) -> bool:
        """sim/node.py, as a stream frame reaches ``node``: whether this path holds it."""
        wait = self.turn_wait
        if wait is None or sender != wait[2] or self.healed:
            return False
        q = wait[3][node.name]
        if not q and type(msg) not in (SyncStatus, SnapshotAck):
            return False
        if not q:
            wait[4][node.name] += 1
            self.at(self.now + wait[0].params["cap_ms"] * 1000, self._turn_release, wait, node.name,
                    wait[4][node.name])
        q.append((msg, self.net.links[(sender, node.name)].gen))
        return True

    def _turn_deliver(self, wait: tuple, dst: str) -> None:
        """The frames held for ``dst`` are read now (those of a connection reset meanwhile, or of
        an incarnation of ``dst`` that died, are lost)."""
        joiner, q = wait[2], wait[3][dst]
        frames, q[:] = list(q), []
        node = self.nodes.get(dst)
        for msg, gen in frames:
            if node is None or not node.alive or self.net.links[(joiner, dst)].gen != gen:
                continue
            node.read_held(joiner, msg)

    def _turn_release(self, wait: tuple, dst: str, hold: int) -> None:
        """No operation came within ``cap_ms`` of the hold's first frame: its frames are read now."""
        if self.turn_wait is wait and wait[4][dst] == hold and wait[3][dst]:
            self._turn_deliver(wait, dst)

    def turn_op(self, node: SimNode) -> None:
        """sim/node.py, right after ``node`` executed a client's operation (its turn goes on):
        the joiner's frames held for it arrive now. If that built the last chunk of a transfer
        to the joiner, members take no batch past the position it names, and once the joiner
        holds the transfer the master is isolated (the "handoff" path's "end" step)."""
        wait = self.turn_wait
        if wait is None or self.healed or not wait[3].get(node.name):
            return
        f, step, joiner = wait[:3]
        rc = node.core.replication
        staged = rc.master_core.status(self.now_ms)["staged_ops"] if rc.master_core is not None else 0
        if not staged:
            return      # an operation that changed nothing: wait for one that did
        self.reach["turn_aligned"] += 1
        self._turn_deliver(wait, node.name)
        sender = rc.senders.get(joiner)
        if sender is None or sender.end_seq is None or not rc.serving:
            return
        self.turn_wait = None
        end = sender.end_seq
        self.reach["turn_last_chunks"] += 1
        gate = lambda msg: type(msg) is not Batch or msg.seq <= end  # noqa: E731
        for o in self.names:
            if o != node.name:
                self.net.gates[(node.name, o)] = gate
        self._nemesis(node.name, "handoff_gate", {"joiner": joiner, "mark": "turn", "at_seq": end, "staged": staged})
        self._check_health()
        self._handoff_watch(f, step, joiner, (node.name, end, ()), 0)

    def _turn_give_up(self, wait: tuple) -> None:
        if self.turn_wait is not wait:
            return
        self.turn_wait = None
        for dst in wait[3]:
            self._turn_deliver(wait, dst)
        self._handoff_next(wait[0], wait[1])

    # --- a master lost before the members it positioned after a wipe caught up (scenario._wiped) ---

    def _wiped_may_crash(self, keepers: list[str]) -> bool:
        """Every keeper may crash, all of them together: under crash policy ``any``, fewer than
        (n-1)/2 nodes down or catching up once they are down."""
        if not all(self._may_crash(k) for k in keepers) and self.sc.crash_policy != "any":
            return False
        if any(k in self.down or k in self.paused for k in keepers):
            return False
        m = self.master()
        lost = {n for n in self.down | set(self.recovering) if m is None or n != m.name} | set(keepers)
        return len(lost) <= (len(self.names) - 1) // 2

    def _wiped_step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master of the moment's stream to every replica but the keepers
        (``nodes // 2`` of them: with the master, a majority), both ways, for the step's lead;
        Raft stays up, so it keeps office and commits on the keepers alone."""
        if self.healed:
            return
        m = self.master()
        keepers: list[str] | None = None
        if m is not None:
            rng = random.Random(f"{f.params['pick']}:{step}")
            keepers = sorted(rng.sample([o for o in self.names if o != m.name], len(self.names) // 2))
        if m is None or keepers is None or not self._wiped_may_crash(keepers):
            if tries < 30:
                self.at(self.now + 100_000, self._wiped_step, f, step, tries + 1)
            else:
                self._wiped_next(f, step)
            return
        self._last_fault_at = self.now
        others = [o for o in self.names if o != m.name and o not in keepers]
        stream = [(m.name, o) for o in others] + [(o, m.name) for o in others]
        for a, b in stream:
            self.net.cut_stream(a, b)
        self._nemesis(m.name, "stream_cut", {"links": [list(x) for x in stream], "lead_s": f.params["lead_s"][step],
                                             "keepers": keepers, "wiped_step": step})
        self._check_health()
        self.at(self.now + int(f.params["lead_s"][step] * 1e6), self._wiped_crash, f, step, m.name, keepers, stream)

    def _wiped_crash(self, f: Fault, step: int, master: str, keepers: list[str],
                     stream: list[tuple[str, str]]) -> None:
        """Crash every keeper; each loses its data-dir too (a member restarted without its data
        is amnesiac under every fsync policy: cluster/node_core.py restarts_amnesiac)."""
        if self.healed:
            return
        m = self.master()
        if m is None or m.name != master or not self._wiped_may_crash(keepers):
            for a, b in stream:
                self.net.restore_stream(a, b)
            self._check_health()
            self._wiped_next(f, step)
            return
        self._last_fault_at = self.now
        acked = max(self.nodes[k].acked for k in keepers)   # what the keepers held for the master
        gens = []
        for k in keepers:
            self._kill(k, "wiped")
            if self.journal is not None:
                # a new, empty data-dir: nothing to recover, so no durability promise to judge
                self.data[k] = SimDisk(f"{DISK_WHERE}/{k}")
                self.went_down.pop(k, None)
                self.promised.pop(k, None)
            gens.append(self._down_gen[k])
        self.reach["wiped_crashes"] += 1
        self._check_health()
        self.at(self.now + int(f.params["down_s"][step] * 1e6), self._wiped_rejoin, f, step, master, keepers,
                stream, gens, acked)

    def _wiped_rejoin(self, f: Fault, step: int, master: str, keepers: list[str], stream: list[tuple[str, str]],
                      gens: list[int], acked: int) -> None:
        """Restart the keepers, their stream from the master slowed by ``slow_ms`` (their catch-up
        takes round trips of that), and wait (``wiped_check``) for the master to position them."""
        if self.healed:
            return
        for k, gen in zip(keepers, gens):
            self._restart(k, gen)
        us = int(f.params["slow_ms"][step] * 1000)
        for k in keepers:
            self.net.add_delay(master, k, us, (STREAM,))
        self._nemesis(master, "slow", {"links": [[master, k, us // 1000] for k in keepers], "plane": "stream",
                                       "wiped_step": step})
        wait = (f, step, master, keepers, stream, us, acked, set())
        self.wiped_wait = wait
        self._check_health()
        self.at(self.now + int(f.params["wait_s"] * 1e6), self._wiped_give_up, wait)

    def wiped_check(self, node: SimNode, sender: str, frame: Any) -> None:
        """sim/node.py, after ``node`` handled a stream frame while a wiped step waits: the
        serving master's SyncRequest naming its log end (``serving_seq``) positions a keeper;
        once it positioned every keeper, ``settle_ms`` later, the master is isolated."""
        wait = self.wiped_wait
        if wait is None or self.healed or type(frame) is not SyncRequest:
            return
        f, step, master, keepers, *_, positioned = wait
        if sender != master or node.name not in keepers or frame.serving_seq <= 0:
            return
        m = self.master()
        if m is None or m.name != master:
            return
        positioned.add(node.name)
        if len(positioned) == len(keepers):
            self.wiped_wait = None
            self.at(self.now + int(f.params["settle_ms"][step] * 1000), self._wiped_isolate, wait)

    def _wiped_isolate(self, wait: tuple) -> None:
        f, step, master, keepers, stream, us, acked, _ = wait
        if self.healed:
            return
        self._last_fault_at = self.now
        links = [(master, o) for o in self.names if o != master] + [(o, master) for o in self.names if o != master]
        for a, b in links:
            self.net.cut(a, b)
        # at risk: the keepers had acked entries no other member holds (the master's alone now)
        held = max((x.core.replication.log.last_seq for n, x in self.nodes.items()
                    if x.alive and n != master and n not in keepers), default=0)
        at_risk = acked > held
        self.reach["wiped_isolations"] += 1
        self.reach["wiped_at_risk"] += at_risk
        self._nemesis(master, "isolate", {"links": [list(x) for x in links], "wiped_step": step,
                                          "acked": acked, "held": held})
        self._wiped_restore(wait)     # after the cut: what the slowed links carried is lost
        self.at(self.now + int(f.params["hold_s"][step] * 1e6), self._wiped_heal, f, step, links)

    def _wiped_restore(self, wait: tuple) -> None:
        _, _, master, keepers, stream, us, _, _ = wait
        for a, b in stream:
            self.net.restore_stream(a, b)
        for k in keepers:
            self.net.add_delay(master, k, -us, (STREAM,))
        self._check_health()

    def _wiped_give_up(self, wait: tuple) -> None:
        if self.wiped_wait is not wait or self.healed:
            return
        self.wiped_wait = None
        self._wiped_restore(wait)
        self._wiped_next(wait[0], wait[1])

    def _wiped_heal(self, f: Fault, step: int, links: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        self._restore_links(links, "wiped", None)
        self._check_health()
        self._wiped_next(f, step)

    def _wiped_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["lead_s"]) and not self.healed:
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._wiped_step, f, step + 1, 0)

    # --- an fsync hung across two master changes (scenario._hung) -------------------------------

    def _hung_step(self, f: Fault) -> None:
        """Cut the master of the moment's stream (both ways, Raft up) for the lead: it writes a
        tail no replica takes; then its next fsync hangs (``fsync_hung``). Waits for a master
        while a try still fits in the fault window (``_hung_again``)."""
        if self.healed:
            return
        m = self.master()
        if m is None or m.writer is None:
            if self._hung_fits(f):
                self.at(self.now + 100_000, self._hung_step, f)
            return
        self._last_fault_at = self.now
        name = m.name
        others = [o for o in self.names if o != name]
        stream = [(name, o) for o in others] + [(o, name) for o in others]
        for a, b in stream:
            self.net.cut_stream(a, b)
        self._nemesis(name, "stream_cut", {"links": [list(x) for x in stream], "lead_s": f.params["lead_s"],
                                           "hung": True})
        if self.hung_held is None:
            self.hung_held = []
        self._check_health()
        self.at(self.now + int(f.params["lead_s"] * 1e6), self._hung_arm, f, name, m.incarnation, stream)

    def _hung_fits(self, f: Fault) -> bool:
        """Another try of the path still fits before the fault window ends: its lead, and time
        for its stages."""
        return self.now_s + f.params["lead_s"] + HUNG_STAGES_S <= self.sc.fault_end

    def _hung_again(self, f: Fault) -> None:
        """A try that lost its way (the master deposed or crashed during the lead, no fsync, a
        stage that did not come) gives way to another on the master of the moment, if it fits."""
        self._hung_yield(0)
        if not self.healed and self._hung_fits(f):
            self.at(self.now + HUNG_RETRY_US, self._hung_step, f)

    def _hung_yield(self, after_us: int) -> None:
        """A try is over: the faults that came due while it had the floor start ``after_us``
        from now, in their order."""
        held, self.hung_held = self.hung_held, None
        for f in held or ():
            self.at(self.now + after_us, self._fault, f)

    def _hung_arm(self, f: Fault, name: str, inc: int, stream: list[tuple[str, str]]) -> None:
        node = self.nodes.get(name)
        m = self.master()
        if self.healed or node is None or not node.alive or node.incarnation != inc or node.writer is None \
                or m is not node:
            # deposed or down during the lead (other faults): its tail reaches the next sync
            # as any deposed master's does
            if not self.healed:
                for a, b in stream:
                    self.net.restore_stream(a, b)
                self._check_health()
                self._hung_again(f)
            return
        node.writer.hang = True
        wait = (f, name, inc, stream)
        self.hung_wait = wait
        self.at(self.now + int(f.params["wait_s"] * 1e6), self._hung_unarmed, wait)

    def _hung_unarmed(self, wait: tuple) -> None:
        """No fsync began: give up."""
        if self.hung_wait is not wait:
            return
        self.hung_wait = None
        f, name, inc, stream = wait
        node = self.nodes.get(name)
        if node is not None and node.incarnation == inc and node.writer is not None:
            node.writer.hang = False
        if not self.healed:
            for a, b in stream:
                self.net.restore_stream(a, b)
            self._check_health()
            self._hung_again(f)

    def fsync_hung(self, node: SimNode) -> None:
        """sim/node.py: ``node``'s fsync hangs from now (its writer was told to). The node, whose
        tail reached nobody, is isolated: the next master syncs without it."""
        wait = self.hung_wait
        if wait is None or node.name != wait[1] or node.incarnation != wait[2]:
            node.writer.release()
            return
        self.hung_wait = None
        f, name, inc, stream = wait
        if self.healed:
            node.writer.release()
            return
        self._last_fault_at = self.now
        links = [(name, o) for o in self.names if o != name] + [(o, name) for o in self.names if o != name]
        for a, b in links:
            self.net.cut(a, b)
        for a, b in stream:
            self.net.restore_stream(a, b)
        tail = node.writer.journal.last_seq       # the entries the hung fsync covers
        self.reach["hung_fsyncs"] += 1
        self._nemesis(name, "isolate", {"links": [list(x) for x in links], "hung_fsync_seq": tail})
        self._check_health()
        self.at(self.now + FORK_POLL_US, self._hung_watch, f, ("elect", name, inc, links, tail, None, None), 0)

    def _hung_watch(self, f: Fault, state: tuple, polls: int) -> None:
        """The hung node's way through two master changes, each stage within ``wait_s``:
        "elect": once another node leads Raft, give the hung node its Raft links back, its
        stream still cut; "raft": once that node serves, its stream too (it is divergent: a
        transfer, which its stream connection's handshake starts a little later); "reset": once
        it restored that master's transfer (its reset not yet durable behind the hung fsync),
        that master steps down in favour of another member, the heir ("hand": within
        ``HUNG_HAND_S``), and is isolated for ``hold_s``; "ack": once the hung node holds an ack
        of a batch past the transfer's position from the master after that (which positioned
        it and streamed to it), the fsync returns, and ``cut_after_us`` later the power is cut.
        A stage that does not come in time releases the fsync, and the path tries again
        (``_hung_again``)."""
        stage, name, inc, links, tail, second, at = state
        node = self.nodes.get(name)
        if self.healed or node is None or not node.alive or node.incarnation != inc:
            # the hung node went down (other faults): its links come back as they do on a release
            if not self.healed and stage == "elect":
                self._restore_links(links, "hung", None)
            elif not self.healed and stage == "raft":
                for a, b in links:
                    self.net.restore_stream(a, b)
            if not self.healed:
                self._check_health()
            self._hung_again(f)
            return
        core = node.core
        if polls * FORK_POLL_US > (HUNG_HAND_S if stage == "hand" else f.params["wait_s"]) * 1e6:
            if stage == "hand":     # the heir did not take over: the isolation decides
                self._hung_isolate(f, second, at, tail)
                state, polls = ("ack", name, inc, None, tail, second, at), -1
            else:
                if stage == "raft" and not self.healed:
                    for a, b in links:
                        self.net.restore_stream(a, b)
                self._hung_release(f, node, links if stage == "elect" else None, cut=False)
                self._hung_again(f)
                return
        m = self.master()
        if stage == "elect":
            if any(o != name and x.alive and x.raft.role == "leader" for o, x in self.nodes.items()):
                # another node leads Raft: the hung node gets its Raft links back (it follows, and
                # is current in Raft when its stream comes back), its stream still cut, so that
                # the next master's sync goes on without it (its tail would be the truth)
                for a, b in links:
                    self.net.cut_stream(a, b)
                self._restore_links(links, "hung", None)
                self._check_health()
                state, polls = ("raft", name, inc, links, tail, None, None), -1
        elif stage == "raft":
            if m is not None and m.name != name:
                for a, b in links:
                    self.net.restore_stream(a, b)
                self._nemesis("", "heal", {"fault": "hung", "links": [list(x) for x in links], "stream": True})
                self._check_health()
                state, polls = ("reset", name, inc, None, tail, m.name, None), -1
        elif stage == "reset":
            taken = core.replication.last_transfer
            if taken is not None and taken.get("direction") == "received" and taken.get("peer") == second \
                    and core._resets_pending:
                at = taken["at_seq"]
                self.reach["hung_resets"] += 1
                self.reach["hung_tails"] += tail > at
                # The master after this one must be another member, which positions the hung node
                # and streams to it: one elected when this one is isolated may be the hung node
                # itself (its Raft log is whole), so this one first hands its office to an heir
                # (an operator's step-down with a target: Raft's leadership transfer).
                s = self.nodes.get(second)
                heirs = [o for o in self.names if o not in (name, second) and o in self.nodes
                         and self.nodes[o].alive and not self.nodes[o].frozen]
                if s is not None and s.alive and not s.frozen and heirs and m is s:
                    heir = heirs[int(f.params["pick"] * len(heirs))]
                    self._nemesis(second, "step_down", {"to": heir, "hung_reset_seq": at})
                    s.step_down(heir)
                    state, polls = ("hand", name, inc, None, tail, second, at), -1
                else:
                    self._hung_isolate(f, second, at, tail)
                    state, polls = ("ack", name, inc, None, tail, second, at), -1
        elif stage == "hand":
            if m is not None and m.name not in (second, name):     # the heir serves
                self._hung_isolate(f, second, at, tail)
                state, polls = ("ack", name, inc, None, tail, second, at), -1
            elif _holds_ack_past_reset(core, at):
                # its transfer failed and this master was elected again, positioning the hung node
                self._hung_release(f, node, None, cut=True)
                return
        elif stage == "ack":
            if _holds_ack_past_reset(core, at):
                self._hung_release(f, node, None, cut=True)
                return
        self.at(self.now + FORK_POLL_US, self._hung_watch, f, state, polls + 1)

    def _hung_isolate(self, f: Fault, second: str, at: int, tail: int) -> None:
        """The master that reset the hung node is isolated for ``hold_s``."""
        cut = [(second, o) for o in self.names if o != second] + [(o, second) for o in self.names if o != second]
        for a, b in cut:
            self.net.cut(a, b)
        self._nemesis(second, "isolate", {"links": [list(x) for x in cut], "hung_reset_seq": at,
                                          "hung_fsync_seq": tail})
        self._check_health()
        self.at(self.now + int(f.params["hold_s"] * 1e6), self._restore_links, cut, "hung", None)

    def _hung_release(self, f: Fault, node: SimNode, links: list[tuple[str, str]] | None, cut: bool) -> None:
        """The hung fsync returns (the fsyncs after it take ``slow_ms`` more); with ``cut``, the
        power of every node is cut ``cut_after_us`` later, keeping nothing unsynced."""
        if links is not None:
            self._restore_links(links, "hung", None)
        if cut:
            node.writer.slow_us = int(f.params["slow_ms"] * 1000)
        node.writer.release()
        self._nemesis(node.name, "fsync_returns", {"cut": cut})
        if cut:
            self.reach["hung_releases"] += 1
            power = Fault(0.0, "hung", f.params["down_s"], "", {"stagger_ms": f.params["stagger_ms"]})
            self.at(self.now + f.params["cut_after_us"], self._power_cut_now, power)
            # what came due during the try starts once every node has its power back
            self._hung_yield(f.params["cut_after_us"] + int((f.params["down_s"] + f.params["stagger_ms"] / 1000) * 1e6) + 1)
        self._check_health()

    # --- forwarded requests delivered again after a reconnection (scenario._replay) -------------

    def _replay_step(self, f: Fault, step: int) -> None:
        """Step ``step``: keep the stream frames sent (``Network.recent``) and wait, at most
        ``wait_s``, for the master to answer a forwarded receive (``replay_check``)."""
        if self.healed:
            return
        self.net.recent = {}
        wait = (f, step)
        self.replay_wait = wait
        self.at(self.now + int(f.params["wait_s"] * 1e6), self._replay_give_up, wait)

    def replay_check(self, node: SimNode, sender: str, request_id: int, command: Any, result: Any) -> None:
        """sim/node.py, after the serving master ``node`` answered a request that ``sender``
        forwarded, while a replay step waits: a receive that returned messages, with a
        visibility timeout that ends before the step's stall does, breaks the forwarder's
        connection to the master. When it is back the forwarder sends again (first) what it sent
        since ``back_ms`` before that request: the request arrives twice, after the messages it
        took are visible again, and its client's delete of them, sent meanwhile, after the copy."""
        wait = self.replay_wait
        if wait is None or self.healed or self.master() is not node:
            return
        f, step = wait
        stall = f.params["stall_s"][step]
        if type(command) is not ReceiveMessage or command.visibility_timeout is None \
                or command.visibility_timeout >= stall or not getattr(result, "messages", None):
            return
        link = (sender, node.name)
        sent = next((ts for ts, m in self.net.recent.get(link, ()) if type(m) is Forward
                     and m.request_id == request_id), None)
        if sent is None:
            return
        self.replay_wait = None
        self._last_fault_at = self.now
        again = self.net.reconnect(sender, node.name, int(stall * 1e6), sent - f.params["back_ms"][step] * 1000)
        self.net.recent = None
        self._replaying.add(link)
        self.reach["replay_stalls"] += 1
        self.reach["replay_frames"] += len(again)
        self.reach["replay_forwards"] += sum(1 for m in again if type(m) is Forward)
        self._nemesis(sender, "reconnect", {"link": list(link), "stall_s": stall, "sent_again": len(again),
                                            "request_id": request_id, "replay_step": step})
        self._check_health()
        self.at(self.now + int(stall * 1e6), self._replay_back, f, step, link)

    def _replay_back(self, f: Fault, step: int, link: tuple[str, str]) -> None:
        self._replaying.discard(link)
        self._check_health()
        self._replay_next(f, step)

    def _replay_give_up(self, wait: tuple) -> None:
        if self.replay_wait is not wait:
            return
        self.replay_wait = None
        self.net.recent = None
        self._replay_next(*wait)

    def _replay_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["stall_s"]) and not self.healed:
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._replay_step, f, step + 1)

    # --- a divergent member's stream link lost during its transfer (scenario._relink) -----------
    # Its steps begin as fork's (``_lead_step``): a tail nobody takes, then isolation.

    def _relink_watch(self, f: Fault, step: int, old: str, links: list[tuple[str, str]], polls: int) -> None:
        """Once another master serves, heal ``old``: it holds a tail that master lacks, so the
        master finds it divergent and sends it a transfer (``_relink_check``)."""
        if self.healed:
            return
        m = self.master()
        if m is not None and m.name != old and m.core.replication.serving:
            wait = (f, step, old, m.name)
            self.relink_wait = wait
            self._restore_links(links, "relink", None)
            self._check_health()
            self.at(self.now + int(f.params["wait_s"] * 1e6), self._relink_give_up, wait)
        elif polls * FORK_POLL_US > FORK_WAIT_US:
            self._restore_links(links, "relink", None)
            self._check_health()
            self._relink_next(f, step)
        else:
            self.at(self.now + FORK_POLL_US, self._relink_watch, f, step, old, links, polls + 1)

    def _relink_check(self, r: Any) -> None:
        """The master starts a transfer to the divergent member (its first chunks not yet sent):
        cut their stream, both ways, Raft up, for ``down_s``, longer than the stream's connection
        timeout, so that the master counts the member disconnected and, after, connected anew
        while the transfer is still under way."""
        f, step, old, master = self.relink_wait
        if r.node != master or r.fields.get("peer") != old or r.fields.get("direction") != "sent" or self.healed:
            return
        self.relink_wait = None
        self._last_fault_at = self.now
        stream = [(master, old), (old, master)]
        for a, b in stream:
            self.net.cut_stream(a, b)
        self.reach["relink_transfers"] += 1
        self._nemesis(master, "stream_cut", {"links": [list(x) for x in stream], "down_s": f.params["down_s"][step],
                                             "relink_step": step, "transfer_at_seq": r.fields.get("at_seq")})
        self._check_health()
        self.at(self.now + int(f.params["down_s"][step] * 1e6), self._relink_back, f, step, old, master, stream)

    def _relink_back(self, f: Fault, step: int, old: str, master: str, stream: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        for a, b in stream:
            self.net.restore_stream(a, b)
        self._nemesis(master, "heal", {"fault": "relink", "links": [list(x) for x in stream]})
        self._check_health()
        self.at(self.now + FORK_POLL_US, self._relink_reconnected, f, step, old, master, 0)

    def _relink_reconnected(self, f: Fault, step: int, old: str, master: str, polls: int) -> None:
        """Once the master has the member connected again (its transfer still under way),
        ``settle_ms`` later, isolate the master for ``hold_s``: the next master syncs with a
        member whose transfer never finished."""
        if self.healed:
            return
        node = self.nodes[master]
        mc = node.core.replication.master_core if node.alive else None
        r = mc.replicas.get(old) if mc is not None and node.core.replication.serving else None
        if r is None or polls * FORK_POLL_US > f.params["wait_s"] * 1e6:
            self._relink_next(f, step)
            return
        if not r.connected:
            self.at(self.now + FORK_POLL_US, self._relink_reconnected, f, step, old, master, polls + 1)
            return
        self.reach["relink_reconnects"] += 1
        self.at(self.now + int(f.params["settle_ms"][step] * 1000), self._relink_depose, f, step, master)

    def _relink_depose(self, f: Fault, step: int, master: str) -> None:
        if self.healed:
            return
        self._last_fault_at = self.now
        links = [(master, o) for o in self.names if o != master] + [(o, master) for o in self.names if o != master]
        for a, b in links:
            self.net.cut(a, b)
        self._nemesis(master, "isolate", {"links": [list(x) for x in links], "relink_step": step})
        self._check_health()
        self.at(self.now + int(f.params["hold_s"][step] * 1e6), self._relink_heal, f, step, links)

    def _relink_heal(self, f: Fault, step: int, links: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        self._restore_links(links, "relink", None)
        self._check_health()
        self._relink_next(f, step)

    def _relink_give_up(self, wait: tuple) -> None:
        if self.relink_wait is not wait:
            return
        self.relink_wait = None
        self._relink_next(wait[0], wait[1])

    def _relink_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["lead_s"]) and not self.healed:
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._lead_step, "relink", f, step + 1, 0)

    # --- a deposed master made master again over its divergent tail (scenario._comeback) --------

    def _comeback_ahead(self, f: Fault, step: int, old: str, links: list[tuple[str, str]], polls: int) -> None:
        """``old`` is isolated with its tail: once another master serves and its log has passed
        the tail's end by two entries, give ``old`` its Raft links back, its stream cut."""
        if self.healed:
            return
        m = self.master()
        node = self.nodes[old]
        if m is not None and m.name != old and node.alive \
                and m.core.replication.log.last_seq >= node.core.replication.log.last_seq + 2:
            self.reach["comeback_ahead"] += 1
            self._last_fault_at = self.now
            stream = [(old, o) for o in self.names if o != old] + [(o, old) for o in self.names if o != old]
            for a, b in stream:
                self.net.cut_stream(a, b)
            self._restore_links(links, "comeback", None)
            self._nemesis(old, "stream_cut", {"links": [list(x) for x in stream], "comeback_step": step})
            self._check_health()
            self.at(self.now + COMEBACK_POLL_US, self._comeback_caught_up, f, step, old, m.name, stream, 0)
        elif polls * COMEBACK_POLL_US > f.params["wait_s"] * 1e6:
            self._restore_links(links, "comeback", None)
            self._check_health()
            self._comeback_next(f, step)
        else:
            self.at(self.now + COMEBACK_POLL_US, self._comeback_ahead, f, step, old, links, polls + 1)

    def _comeback_caught_up(self, f: Fault, step: int, old: str, master: str, stream: list[tuple[str, str]],
                            polls: int) -> None:
        """Once ``old`` follows ``master`` in Raft with its whole log, ``settle_ms`` later, the
        operator's step-down."""
        if self.healed:
            return
        m, node = self.nodes[master], self.nodes[old]
        if not m.alive or not node.alive or self.master() is not m or polls * COMEBACK_POLL_US > f.params["wait_s"] * 1e6:
            self._comeback_restore(f, step, stream)
            self._comeback_next(f, step)
        elif node.raft.leader == master and node.raft.last_index >= m.raft.last_index:
            self.at(self.now + int(f.params["settle_ms"][step] * 1000), self._comeback_hand, f, step, old, master,
                    stream)
        else:
            self.at(self.now + COMEBACK_POLL_US, self._comeback_caught_up, f, step, old, master, stream, polls + 1)

    def _comeback_hand(self, f: Fault, step: int, old: str, master: str, stream: list[tuple[str, str]]) -> None:
        """The master steps down in favour of ``old``, whose stream comes back; the answer that
        would verify its own last entry, when its sync fetches, is lost (once)."""
        if self.healed:
            return
        m, node = self.nodes[master], self.nodes[old]
        if m.alive and node.alive and not m.frozen and self.master() is m:
            self.reach["comeback_handed"] += 1
            self._nemesis(master, "step_down", {"to": old, "comeback_step": step})
            m.step_down(old)
            lost: list[bool] = []

            def gate(msg: Any) -> bool:
                # the answer that carries the syncing master's own last entry, once
                if lost or type(msg) is not Batch:
                    return True
                rc = self.nodes[old].core.replication
                if rc.sync is None or rc.sync.state != rc.sync.FETCHING or msg.seq != rc.log.last_seq:
                    return True
                lost.append(True)
                self.reach["comeback_lost"] += 1
                self.at(self.now, self._comeback_ungate, old)
                return False

            for o in self.names:
                if o != old:
                    self.net.gates[(o, old)] = gate
            self.at(self.now + int(f.params["wait_s"] * 1e6), self._comeback_ungate, old)
        self._comeback_restore(f, step, stream)
        self._comeback_next(f, step)

    def _comeback_ungate(self, old: str) -> None:
        popped = [self.net.gates.pop((o, old), None) for o in self.names if o != old]
        if any(popped) and not self.healed:
            self._check_health()

    def _comeback_restore(self, f: Fault, step: int, stream: list[tuple[str, str]]) -> None:
        if self.healed:
            return
        for a, b in stream:
            self.net.restore_stream(a, b)
        self._nemesis("", "heal", {"fault": "comeback", "links": [list(x) for x in stream]})
        self._check_health()

    def _comeback_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["lead_s"]) and not self.healed:
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._lead_step, "comeback", f, step + 1, 0)

    # --- power cuts timed on the journal (scenario "race") --------------------------------------

    def race_check(self, node: SimNode, what: str) -> None:
        """sim/node.py, after ``node`` handled a stream frame (``what`` "stream") or its journal's
        report (``persisted``), while a race cut is armed: strike if the race is on now.
        "master": a replica's ack (of what its journal holds) is past the master's own fsync.
        "replica": this replica's fsync just finished while it holds the ack of a later batch
        (what it acks is clamped to what is durable), a network hop later."""
        f = self.race_arm
        if f is None or self.healed or not node.alive:
            return
        race = f.params["race"]

        disk = self._on_disk
        if race == "master" and what == "stream":
            mc = node.core.replication.master_core
            if mc is None or mc.local_durable is None:
                return
            seq = disk(node.name) + 1      # its journal's fsync may be done, and not yet reported
            ackers = {r.name for r in mc.replicas.values() if r.acked >= seq}
            # and a member without it on disk, that the sync after the restarts may hear from
            if not ackers or not any(disk(n) < seq for n in self.names if n != node.name and n not in ackers):
                return
            after = f.params["after_us"] // 4
        elif race == "replica" and what == "persisted":
            core = node.core
            mine = core.replication.durable_seq
            held = max((a.seq for a in core._held_acks.values()), default=0)
            m = self.master()
            if mine is None or core.replication.master_core is not None or held <= mine or m is None \
                    or disk(node.name) >= held or (m.core.replication.durable_seq or 0) < held \
                    or not any(disk(n) < held for n in self.names if n not in (node.name, m.name)):
                return
            # its ack goes out at the loop's next turn, and crosses the network
            after = self.net.hi_us + 1_000 + f.params["after_us"]
        else:
            return
        self.race_arm = None
        self.reach["race_cuts"] += 1
        self._nemesis(node.name, "race", {"race": race, "after_us": after})
        self.at(self.now + after, self._power_cut_now, f)

    def _race_arm(self, f: Fault, tries: int) -> None:
        """Arm a race cut: the disks whose slowness opens the race turn slow (``slow_ms`` more per
        fsync): the master's for "master" (replicas' acks of what they hold on disk overtake its
        own fsync), every replica's for "replica" (batches keep arriving during each fsync)."""
        if self.healed or self.journal is None or self.race_arm is not None:
            return
        m = self.master()
        if m is None:
            if tries < 30:
                self.at(self.now + 100_000, self._race_arm, f, tries + 1)
            return
        slow = [m.name] if f.params["race"] == "master" else [n for n in self.names if n != m.name]
        us = int(f.params["slow_ms"] * 1000)
        for n in slow:
            x = self.nodes.get(n)
            if x is not None and x.alive and x.writer is not None:
                x.writer.slow_us = us
        self._nemesis(m.name, "slow_disk", {"race": f.params["race"], "nodes": slow, "slow_ms": f.params["slow_ms"]})
        self.race_arm = f
        self.at(self.now + int(f.params["wait_s"] * 1e6), self._race_timeout, f)

    def _on_disk(self, name: str) -> int:
        """How far ``name``'s journal is really on disk (its last fsync's), reported or not."""
        x = self.nodes.get(name)
        return x.writer.journal.durable_seq if x is not None and x.alive and x.writer is not None else 0

    def _race_timeout(self, f: Fault) -> None:
        """The race never came: cut anyway."""
        if self.race_arm is f:
            self.race_arm = None
            self.reach["race_timed_out"] += 1
            for x in self.nodes.values():
                if x.writer is not None:
                    x.writer.slow_us = 0
            self._power_cut_now(f)

    # --- a master's loop stalled across a vote inside its lease (scenario._gc) ------------------

    def _gc_step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master's links to every follower one way, and wait for one of
        them to stand (``stood``) or for LEASE_WAIT_S, as a lease step does."""
        cut = self._deafen_followers("gc", self._gc_step, f, step, tries)
        if cut is None:
            return
        wait = ("stand", f, step, *cut)
        self.gc_wait = wait
        self._check_health()
        self.at(self.now + int(LEASE_WAIT_S * 1e6), self._gc_give_up, wait)

    def _gc_vote(self, wait: tuple, candidate: str) -> None:
        """``candidate`` stands now: its vote requests leave after this, slowed by the step's
        ``vote_ms`` on every link. The master gets its links back, but for ``nodes // 2 - 1``
        followers besides the candidate that stay deaf to it (they vote for the candidate with
        the master, a majority; the others, with the master, hold its lease)."""
        _, f, step, master, out = wait
        self._last_fault_at = self.now
        self.reach["gc_votes"] += 1
        others = [o for o in self.names if o not in (master, candidate)]
        rng = random.Random(f"{f.params['pick']}:{step}")
        deaf = sorted(rng.sample(others, len(self.names) // 2 - 1))
        held = [(master, d) for d in deaf]
        for a, b in out:
            if b not in deaf:
                self.net.restore(a, b)
        us = int(f.params["vote_ms"][step] * 1000)
        slowed = [(candidate, o) for o in self.names if o != candidate]
        for a, b in slowed:
            self.net.add_delay(a, b, us, (RAFT,))
        self._nemesis(candidate, "gc_vote", {"master": master, "held": [list(x) for x in held],
                                             "vote_delay_ms": us // 1000})
        self._check_health()
        # what the candidate sends after its vote requests goes at the usual speed (behind them)
        self.at(self.now + us, self._undelay, slowed, us, (RAFT,))
        wait = ("vote", f, step, master, held, candidate)
        self.gc_wait = wait
        self.at(self.now + us + 200_000, self._gc_give_up, wait)

    def gc_check(self, node: SimNode, sender: str, term: int) -> None:
        """A Raft vote request reaches ``node`` (sim/node.py, before its election core sees it):
        the step's candidate's, at the master while it leads, stalls the master's event loop
        in this instant (its Raft side reads the request on)."""
        wait = self.gc_wait
        if wait is None or wait[0] != "vote" or self.healed:
            return
        _, f, step, master, held, candidate = wait
        if node.name != master or sender != candidate or node.raft.role != "leader" or term <= node.raft.term \
                or master in self.paused or master in self.down:
            return
        active = node.core.membership.evaluate(self.now_s)[0]
        self.reach["gc_stalls"] += 1
        self.reach["gc_in_lease"] += active
        self.paused.add(master)
        self._running_since.pop(master, None)
        node.freeze(loop_only=True)
        self._nemesis(master, "stall", {"gc_step": step, "vote_from": candidate, "active": active})
        self._check_health()
        wait = ("stalled", f, step, master, held)
        self.gc_wait = wait
        self.at(self.now + int(f.params["max_s"][step] * 1e6), self._gc_resume, wait)

    def _gc_overtaken(self, wait: tuple) -> None:
        """Another node activated while the master's loop stalls: it runs again ``after_ms``
        later."""
        self.reach["gc_overtaken"] += 1
        _, f, step, _, _ = wait
        self.gc_wait = wait = ("resuming",) + wait[1:]
        self.at(self.now + f.params["after_ms"][step] * 1000, self._gc_resume, wait)

    def _gc_resume(self, wait: tuple) -> None:
        if self.gc_wait is not wait or self.healed:
            return
        self.gc_wait = None
        _, f, step, master, held = wait
        self._resume(master)
        self._restore_links(held, "gc", None)
        self._check_health()
        self._gc_next(f, step)

    def _gc_give_up(self, wait: tuple) -> None:
        """No follower stood, or the vote request did not reach the master while it led."""
        if self.gc_wait is not wait or self.healed:
            return
        self.gc_wait = None
        f, step = wait[1], wait[2]
        self._restore_links(wait[4], "gc", None)
        self._check_health()
        self._gc_next(f, step)

    def _gc_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["vote_ms"]):
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._gc_step, f, step + 1, 0)

    # --- votes timed inside a lease (scenario._lease) ------------------------------------------

    def _lease_step(self, f: Fault, step: int, tries: int) -> None:
        """Step ``step``: cut the master's links to every follower one way, and wait for one of
        them to stand (``stood``) or for LEASE_WAIT_S."""
        cut = self._deafen_followers("lease", self._lease_step, f, step, tries)
        if cut is None:
            return
        wait = (f, step, *cut)
        self._lease_wait = wait
        self._check_health()
        self.at(self.now + int(LEASE_WAIT_S * 1e6), self._lease_unanswered, wait)

    def _deafen_followers(self, kind: str, again: Callable, f: Fault, step: int,
                          tries: int) -> tuple[str, list[tuple[str, str]]] | None:
        """A lease or gc step's start: cut the master of the moment's links to every follower
        one way (they stop hearing it, it still hears them). None while there is no master
        (``again`` is tried every 0.1 s, 30 times at most)."""
        if self.healed:
            return None
        m = self.master()
        if m is None:
            if tries < 30:
                self.at(self.now + 100_000, again, f, step, tries + 1)
            return None
        self._last_fault_at = self.now
        out = [(m.name, o) for o in self.names if o != m.name]
        for a, b in out:
            self.net.cut(a, b)
        self._nemesis(m.name, "one_way", {"links": [list(x) for x in out], f"{kind}_step": step})
        return m.name, out

    def _lease_unanswered(self, wait: tuple) -> None:
        if self._lease_wait is not wait or self.healed:
            return
        self._lease_wait = None
        f, step, _, out = wait
        self._restore_links(out, "lease", None)
        self._check_health()
        self._lease_next(f, step)

    def _lease_vote(self, wait: tuple, candidate: str) -> None:
        """``candidate`` stands now: its vote requests leave after this. The voters get the
        master back at once; the candidate's requests to them are slowed by the step's delay."""
        f, step, master, out = wait
        self._lease_wait = None
        self._last_fault_at = self.now
        self.reach["lease_votes"] += 1
        for a, b in out:
            if b != candidate:
                self.net.restore(a, b)
        held = [(master, candidate)]
        if f.params["shape"][step] == "bridge":
            self.net.cut(candidate, master)
            held.append((candidate, master))
        us = int(f.params["vote_delay_ms"][step] * 1000)
        slowed = [(candidate, o) for o in self.names if o not in (candidate, master)] if us else []
        for a, b in slowed:
            self.net.add_delay(a, b, us, (RAFT,))
        self._nemesis(candidate, "lease_vote", {"master": master, "held": [list(x) for x in held],
                                                "vote_delay_ms": us // 1000})
        self._check_health()
        self.at(self.now + int(f.params["hold_s"][step] * 1e6), self._lease_heal, f, step, held, slowed, us)

    def _lease_heal(self, f: Fault, step: int, held: list[tuple[str, str]],
                    slowed: list[tuple[str, str]], us: int) -> None:
        if self.healed:
            return
        self._undelay(slowed, us, (RAFT,))
        self._restore_links(held, "lease", None)
        self._check_health()
        self._lease_next(f, step)

    def _lease_next(self, f: Fault, step: int) -> None:
        if step + 1 < len(f.params["hold_s"]):
            self.at(self.now + int(f.params["gap_s"][step] * 1e6), self._lease_step, f, step + 1, 0)

    def _links_of(self, f: Fault) -> list[tuple[str, str]]:
        names = self.names
        if f.kind == "isolate":
            x = self._resolve(f.target)
            return [(x, o) for o in names if o != x] + [(o, x) for o in names if o != x]
        if f.kind == "partition":
            side = set(f.params["side"])
            return [(a, b) for a in names for b in names if a != b and ((a in side) != (b in side))]
        if f.kind == "bridge":
            sa, sb = set(f.params["a"]), set(f.params["b"])
            return [(a, b) for a in names for b in names if (a in sa and b in sb) or (a in sb and b in sa)]
        return [tuple(x) for x in f.params["links"]]  # type: ignore[misc]

    def _restore_links(self, links: list[tuple[str, str]], kind: str, office: tuple | None) -> None:
        if self.healed:
            return
        for a, b in links:
            self.net.restore(a, b)
        self._nemesis("", "heal", {"fault": kind, "links": [list(x) for x in links]})
        self._judge_heal(kind, office)

    def _flap(self, a: str, b: str, period: int, end: int, is_cut: bool, office: tuple | None) -> None:
        if self.healed:
            return
        fl = self._flapping
        if is_cut:
            self.net.restore(a, b)
            self.net.restore(b, a)
        if self.now >= end:
            for k in ((a, b), (b, a)):
                fl[k] -= 1
                if not fl[k]:
                    del fl[k]
            self._judge_heal("flap", office)
            return
        if not is_cut:
            self.net.cut(a, b)
            self.net.cut(b, a)
        self.at(self.now + period, self._flap, a, b, period, end, not is_cut, office)

    # --- healing deposes nobody (invariant 6) ------------------------------------------------

    def stood(self, name: str) -> None:
        """``name`` stands for election. With a pre-vote it can only have a majority's yes if
        enough peers' links to it carried their answers: a node that nobody (or too few) could
        reach for a whole election timeout, and more, never stands."""
        quorum = len(self.names) // 2 + 1
        cut_off = self.timing.election_max * 1e6 + 2 * HOP_US[1]
        reachable = sum(1 for p in self.names if p != name and self.net.down_for(p, name) <= cut_off)
        if reachable + 1 < quorum:
            self.heal_failures.append(f"pre-vote: {name} stood for election at {self.now_s:.3f} s, cut off from "
                                      f"a majority (only {reachable} peers could reach it)")
        self._judge_disruption(name)
        wait = self._lease_wait
        if wait is not None and name != wait[2] and not self.healed:
            self._lease_vote(wait, name)
        gc = self.gc_wait
        if gc is not None and gc[0] == "stand" and name != gc[3] and not self.healed:
            self._gc_vote(gc, name)

    def _judge_disruption(self, name: str) -> None:
        """``name`` stands. No election may depose a leader that has held Raft links both ways
        with a majority (itself included) for the last election timeout: up and running, no
        cut, no extra latency, nothing lost or doubled. Each of them then accepted the leader's
        heartbeats within that time, so none grants a pre-vote, and no majority says yes.
        Exempt (not judged): a stand that the leader asked for (leadership transfer), any
        stand while some node's term is ahead of the leader's (a candidate that lost, whose
        term legitimately ran ahead: it refuses the leader's AppendEntries, and grants pre-votes,
        until the leader adopts its term, cluster/election.py TermAhead), and a stand from a
        term behind the leader's, which deposes nobody: its vote requests carry a term no
        higher than the leader's, which every member at the leader's term refuses. A node
        resuming from a pause stands so, on grants from before it, before it reads the
        leader's heartbeats that waited for it (its Raft side stands before the election
        core's tick would drop the stale stand, as pysyncobj's thread does)."""
        nodes = self.nodes
        leaders = [x for x in nodes.values() if x.alive and x.raft.role == "leader" and x.name != name]
        if not leaders:
            return
        lead = max(leaders, key=lambda x: x.raft.term)
        term = lead.raft.term
        me = nodes[name]
        if me.election._transfer or me.raft.term < term or any(x.alive and x.raft.term > term for x in nodes.values()):
            return
        since = self.now - int(self.timing.election_max * 1e6)
        running, links = self._running_since, self.net.links

        def calm(a: str, b: str) -> bool:
            c = links[(a, b)].raft_calm_since
            return c is not None and c <= since

        if self._noise_free_since is None or self._noise_free_since > since \
                or running.get(lead.name, self.now) > since or lead.raft.leader_since * 1e6 > since:
            return
        held = [p for p in self.names if p != lead.name and running.get(p, self.now) <= since
                and calm(lead.name, p) and calm(p, lead.name)]
        quorum = len(self.names) // 2 + 1
        self.disruptions_judged += 1
        if len(held) + 1 >= quorum:
            self.disrupt_failures.append(
                f"disruption: {name} stood for election at {self.now_s:.3f} s while leader {lead.name} "
                f"(term {term}) had held Raft links both ways with a majority ({', '.join(held)}) for "
                f"the last election timeout")

    def voted(self, name: str, candidate: str, term: int) -> None:
        """``name`` voted for ``candidate`` in ``term``. The lease argument (cluster/lease.py, case
        2) needs every vote to come at least G after the voter last accepted another leader's
        AppendEntries: else the old leader may still hold a lease resting on the voter's ack
        when the candidate wins. Judged on Raft's side of the node, so a fault in how the
        election core tracks that contact is caught as well as one in its guard."""
        contact = self.leader_contact.get(name)
        if contact is None or contact[1] == candidate:
            return
        since = self.now - contact[0]
        if since < self.timing.vote_guard * 1e6:
            self.vote_failures.append(
                f"vote guard: {name} voted for {candidate} in term {term} at {self.now_s:.3f} s, "
                f"{since / 1000:.1f} ms after it accepted {contact[1]}'s AppendEntries "
                f"(the guard is {self.timing.vote_guard * 1000:.0f} ms)")

    def _office(self) -> tuple[str, int, int] | None:
        """The active master now: (name, epoch, its deactivations so far)."""
        m = self.master()
        if m is None or m.core.view is None:
            return None
        return m.name, m.core.view.epoch, self._deactivations.get(m.name, 0)

    def _quiet(self) -> bool:
        """No fault in play: every link up and unslowed, nothing lost or doubled, every node up."""
        net = self.net
        return (not self.down and not self.paused and not net.drop and not net.dup
                and all(not link.cuts and not link.stream_cuts and not any(link.extra_us)
                        for link in net.links.values()))

    def _judge_heal(self, kind: str, office: tuple | None) -> None:
        """A master that kept its majority through a cut (active at its start and at the heal,
        never deactivated in between) stays master in its epoch, with no election anywhere, as
        long as nothing else happens: judged HEAL_QUIET_US later, if the network stayed quiet."""
        now_office = self._office()
        if office is None or now_office is None or now_office != office or not self._quiet():
            return
        term = self.nodes[office[0]].raft.term
        self.at(self.now + HEAL_QUIET_US, self._heal_verdict, kind, self.now, office, term)

    def _heal_verdict(self, kind: str, healed_at: int, office: tuple, term: int) -> None:
        if self._last_fault_at > healed_at or not self._quiet():
            return      # something else happened since: not the heal's doing
        self.heal_checks += 1
        name, epoch, _ = office
        now_office = self._office()
        # An election is a term beyond the master's (a node that was cut off catching up to the
        # master's term is not one).
        raised = sorted(n for n in self.names if self.nodes[n].raft.term > term)
        if now_office == office and not raised:
            return
        what = (f"the master changed from {name} in epoch {epoch} to {now_office[0]} in epoch {now_office[1]}"
                if now_office is not None and now_office[:2] != (name, epoch)
                else f"{name} lost office" if now_office != office else "an election was held")
        self.heal_failures.append(f"heal: after the {kind} healed at {healed_at / 1e6:.3f} s, {what}"
                                  + (f" ({', '.join(raised)} raised the term)" if raised else ""))

    def _undelay(self, links: list[tuple[str, str]], us: int, planes: tuple[int, ...] = (RAFT, STREAM)) -> None:
        if not self.healed:
            for a, b in links:
                self.net.add_delay(a, b, -us, planes)

    def _unlossy(self, p: float) -> None:
        if not self.healed:
            self._drops.remove(p)
            self.net.drop = max(self._drops, default=0.0)
            self._noise_changed()

    def _undup(self, p: float) -> None:
        if not self.healed:
            self._dups.remove(p)
            self.net.dup = max(self._dups, default=0.0)
            self._noise_changed()

    def _noise_changed(self) -> None:
        if self.net.drop or self.net.dup:
            self._noise_free_since = None
        elif self._noise_free_since is None:
            self._noise_free_since = self.now

    def _kill(self, name: str, detail: str | None = None) -> None:
        node = self.nodes[name]
        self.disks[name] = node.raft.durable()
        node.crash()
        self.down.add(name)
        self.paused.discard(name)
        self._running_since.pop(name, None)
        self.recovering.pop(name, None)
        self._down_gen[name] += 1
        if self.journal is not None:
            self.went_down[name] = PROCESS      # kill -9: the page cache survives
            self.promised[name] = node.acked
        self._nemesis(name, "kill", detail)

    def _power_cut(self, f: Fault, tries: int) -> None:
        """Every node loses power at once: each disk keeps what it fsynced and a random part of
        the rest (sim/disk.py); each node restarts after the fault's duration, in a random order,
        staggered. A node paused or stalled now is waited for (killing a stopped node would
        leave its history active for the whole pause, sim/README.md bug 3)."""
        if self.healed:
            return
        if self.paused:
            if tries < 20:
                self.at(self.now + 200_000, self._power_cut, f, tries + 1)
            else:
                self.skipped_crashes += 1
            return
        if f.params.get("busy") and tries >= 0:
            # strike in the middle of the next fsync (sim/node.py _Writer tells), or in a second
            self._cut_when_busy = f
            self.at(self.now + 1_000_000, self._power_cut_now, f)
            return
        self._power_cut_now(f)

    def fsync_started(self, took_us: int) -> None:
        """A writer began an fsync that returns in ``took_us``: a busy power cut strikes in it."""
        f = self._cut_when_busy
        if f is not None:
            self._cut_when_busy = None
            self.at(self.now + self.rng_disk.randint(0, max(0, took_us - 1)), self._power_cut_now, f)

    def _power_cut_now(self, f: Fault) -> None:
        if self.healed or any(x is f for x in self._cuts_done):
            return
        if self._cut_when_busy is f:
            self._cut_when_busy = None
        if self.paused:
            self._power_cut(f, 0)
            return
        self._cuts_done.append(f)
        self._last_fault_at = self.now
        self.power_cuts.append(self.now_s)
        on_disk = {n: self._on_disk(n) for n in self.names}
        self._nemesis("", "power_cut", {"down_s": f.duration, "stagger_ms": f.params.get("stagger_ms", 0)})
        for name in self.names:
            disk = self.data.get(name)
            what = disk.crash(self.rng_disk, POWER, keep_unsynced=f.kind not in ("race", "hung")) if disk is not None \
                else "no data-dir"
            if name in self.down:
                self.went_down[name] = POWER    # down already: its page cache is lost now
                self._nemesis(name, "power_lost", what)
            else:
                self._kill(name, what)
                self.went_down[name] = POWER
        order = self.rng_disk.sample(self.names, len(self.names))
        stagger = int(f.params.get("stagger_ms", 0) * 1000)
        end = self.now + int(f.duration * 1e6)
        if f.kind == "race":
            # the power comes back last (a stagger later) where the raced batch is surely on
            # disk: the sync after the restarts hears from the others first
            last = max(self.names, key=lambda n: (on_disk.get(n, -1), self.rng_disk.random()))
            for name in order:
                self.at(end + (stagger if name == last else self.rng_disk.randint(0, 100_000)), self._restart,
                        name, self._down_gen[name])
            return
        for name in order:
            self.at(end + (self.rng_disk.randint(0, stagger) if stagger else 0), self._restart, name,
                    self._down_gen[name])

    def _restart(self, name: str, gen: int | None = None) -> None:
        if name not in self.down or (gen is not None and gen != self._down_gen[name]):
            return
        positions = [self.nodes[n].core.replication.log.last_seq for n in self.names
                     if n != name and n in self.nodes and self.nodes[n].alive]
        self.recovering[name] = max(positions, default=0)
        self._nemesis(name, "restart")
        self._start_node(name)

    def _resume(self, name: str) -> None:
        if name not in self.paused:
            return
        self.paused.discard(name)
        node = self.nodes.get(name)
        self._running_since[name] = self.now
        self._nemesis(name, "resume")
        if node is not None and node.alive:
            node.resume()

    def _heal(self) -> None:
        self.net.heal_all()
        self._drops.clear()
        self._dups.clear()
        self._noise_changed()
        self._flapping.clear()
        self.healed = True
        self._nemesis("", "heal", "all faults stop")
        for name in sorted(self.paused):
            self._resume(name)
        for name in sorted(self.down):
            self._restart(name)


_REACH_EVENTS = frozenset(("view", "sync_started", "synced", "transfer_started", "transfer_finished"))


def view_failures(records: list[Record]) -> list[str]:
    """"Same views everywhere" (cluster/HISTORY.md): one view_id always carries the same members,
    master and epoch, and per node view ids only grow (from each start)."""
    seen: dict[int, tuple] = {}
    last: dict[str, int] = {}
    bad: list[str] = []
    for r in records:
        if not isinstance(r, NodeEvent):
            continue
        if r.event == "started":
            last.pop(r.node, None)
        elif r.event == "view":
            vid = r.fields["view_id"]
            content = (tuple(r.fields["members"]), r.fields["master"], r.fields["epoch"])
            if seen.setdefault(vid, content) != content:
                bad.append(f"views: view {vid} is {content} on {r.node} at {r.ts:.6f}, {seen[vid]} elsewhere")
            if vid <= last.get(r.node, 0):
                bad.append(f"views: {r.node} went from view {last[r.node]} to {vid} at {r.ts:.6f}")
            last[r.node] = vid
    return bad[:1] + ([f"views: {len(bad) - 1} more view inconsistencies"] if len(bad) > 1 else [])


POWER_CUT_MARGIN_MS = 5     # thread hops and the answer's way back, beyond interval + fsync
REPLY_MAX_S = 0.0021        # World.reply: an answer's way to its client, at most


def relax_for_power_cuts(verdict: Any, records: list[Record], cuts: list[float],
                         window_s: float) -> tuple[Any, int]:
    """What fsync = interval / never allow a power cut to lose, taken out of the verdict.

    A write acknowledged at ``t`` is on the disks of a majority by ``t + window_s`` (interval:
    the interval plus an fsync; never: no bound, ``inf``), so a power cut at ``c`` may lose
    what was acknowledged in ``[c - window_s, c]``, and nothing earlier or later. Excused: a
    lost send acknowledged in that window; a lost delete or an in-window redelivery whose
    earlier delivery (or delete) completed in that window and whose redelivery came after the cut;
    a FIFO order violation whose deliveries straddle a cut. Unexpected messages, divergence,
    gating and two masters are never excused. Returns the new verdict and how many were excused."""
    import dataclasses

    from cluster.checker.schema import ClientOp
    from cluster.checker.verdict import AFTER_ACKED_DELETE, IN_WINDOW

    done = {r.op_id: r.completed for r in records if isinstance(r, ClientOp) and r.completed is not None}

    def in_window(t: float | None) -> float | None:
        """The cut that may have lost something acknowledged at ``t``."""
        if t is None:
            return None
        # an answer decided before the cut may reach its client up to REPLY_MAX_S after it
        return next((c for c in cuts if c - window_s <= t <= c + REPLY_MAX_S), None)

    lost = [x for x in verdict.lost if in_window(x.acked_at) is None]

    def excused_dup(d: Any) -> bool:
        # the earlier delivery (a receive: its receipt and window) may be what the cut lost, and
        # for a lost delete, the delete itself (a delete made with the receipt of a lost receive
        # is a no-op the node rightly acknowledges)
        cut = [in_window(d.prev_at[1] if d.prev_at else None)]
        if d.category == AFTER_ACKED_DELETE:
            cut.append(in_window(done.get(d.delete_op_id)))
        elif d.category != IN_WINDOW:
            return False
        return any(c is not None and d.at[1] >= c for c in cut)

    dups = [d for d in verdict.duplicates if not excused_dup(d)]

    def excused_order(o: Any) -> bool:
        ts = [t for at in (o.earlier_at, o.later_at) if at for t in at]
        return bool(ts) and any(min(ts) <= c <= max(ts) for c in cuts)

    order = [o for o in verdict.order_violations if not excused_order(o)]
    n = (len(verdict.lost) - len(lost)) + (len(verdict.duplicates) - len(dups)) \
        + (len(verdict.order_violations) - len(order))
    return dataclasses.replace(verdict, lost=tuple(lost), duplicates=tuple(dups), order_violations=tuple(order)), n


def _holds_ack_past_reset(core: Any, at: int) -> bool:
    """The hung node holds, behind its reset still pending in the hung fsync, an ack of a batch
    past the transfer's position ``at``: the moment the hung path releases the fsync."""
    return bool(core._resets_pending) and any(a.seq > at for a in core._held_acks.values())


def _deliver_request(node: SimNode, req: Request) -> None:
    node.request(req)


def simulate(scenario: Scenario, *, strict: bool = False, timing: Timing | None = None,
             workload: Callable[[Scenario], Workload] | None = None) -> SimResult:
    """Run one scenario and check its history (``workload``: a factory, sim/workload.py)."""
    t0 = time.perf_counter()
    with decisions.recording() as decided:
        w = World(scenario, timing, workload)
        w.run()
        w.provenance.scan(w.now_s, w.nodes)     # the drain's entries too, while the record is on
    sim_wall = time.perf_counter() - t0
    lines = [to_line(r) for r in w.records]
    history = "\n".join(lines) + "\n"
    t1 = time.perf_counter()
    verdict = check(History.of(parse_lines(lines)))
    excused = 0
    if scenario.journal and scenario.fsync != "always" and w.power_cuts:
        window = float("inf") if scenario.fsync == "never" else \
            (scenario.fsync_interval_ms + scenario.fsync_ms[1] + POWER_CUT_MARGIN_MS) / 1000
        verdict, excused = relax_for_power_cuts(verdict, w.records, w.power_cuts, window)
    failures = verdict.failures(scenario.policy, strict=strict, queue_policies=w.queue_policies())
    failures += w.journal_failures + w.durability_failures + w.provenance.failures + w.waste.failures
    failures += view_failures(w.records)
    failures += w.heal_failures + w.vote_failures + w.disrupt_failures
    if not w.converged:
        failures.append("liveness: the members did not converge within "
                        f"{SETTLE_MAX_US // 1_000_000} s of the drain after the faults stopped")
    stats = {"events": w.events, "sim_end_s": w.now_s, "lines": len(lines), "bytes": len(history),
             "ops": sum(1 for r in w.records if r.event == "client_op"),
             "frames": w.net.sent, "frames_lost": w.net.lost, "skipped_crashes": w.skipped_crashes,
             "heals_judged": w.heal_checks, "disruptions_judged": w.disruptions_judged, "quiescent_judged": verdict.quiescent_points,
             "provenance_checked": w.provenance.entries_checked + w.provenance.frames_checked,
             "waste_checked": w.waste.frames_checked + w.waste.reports_checked,
             "availability_judged_s": verdict.availability_judged_s, "epochs": len(w.epochs), **w.reach,
             **({"power_cuts": len(w.power_cuts), "excused": excused,
                 "fsyncs": sum(x.fsyncs for x in w._writers), "snapshots": sum(x.snapshots for x in w._writers),
                 "snapshots_refused": sum(len(x.refused) for x in w._writers),
                 "torn_tails": sum(1 for r in w.recoveries if r.get("truncated"))} if scenario.journal else {}),
             "sim_wall_s": round(sim_wall, 4), "check_wall_s": round(time.perf_counter() - t1, 4)}
    return SimResult(scenario.seed, scenario, history, verdict, failures, w.converged, stats, decided)
