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

The world holds the clock, the nodes and the run's phases; each other concern is a part of its
own, built here and reached through the world:

* ``nemesis`` (sim/nemesis.py): the scenario's faults, power cuts and the heal;
* ``rare`` (sim/rare/): the rare paths, faults timed on what the cores do;
* ``health`` (sim/health.py): the healthy set and quiescent points, judged during the run;
* ``elections`` (sim/elections.py): the judges of Raft's side (pre-vote reach, disruption, the
  vote guard, healing deposes nobody);
* ``flow`` (sim/flow_control.py): throttling, judged at the masters' ticks and releases;
* ``terms`` (sim/terms.py): every rise of a Raft term explained by a stand;
* ``reach`` (sim/reach.py): how often the run reached the rare paths' situations.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from cluster import decisions
from cluster.checker import check, parse_lines, to_line
from cluster.checker.schema import DigestRecord, History, Record
from cluster.config import Timing
from cluster.journal.journal import JournalDamaged
from cluster.queue_policies import POLICY_TAG
from cluster.replication.core import REPLICA
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy

from sim.clients import TIMEOUT_US, Client, DrainClient, Request, SetupClient
from sim.disk import PROCESS, SimDisk, WHERE as DISK_WHERE
from sim.elections import Elections
from sim.flow_control import FlowControlCheck, counted
from sim.health import PROBE_US, Health
from sim.history_checks import POWER_CUT_MARGIN_MS, relax_for_power_cuts, view_failures
from sim.nemesis import Nemesis
from sim.net import Network
from sim.node import JournalSpec, SimNode
from sim.provenance import ProvenanceCheck
from sim.raft import Durable
from sim.rare import RarePaths
from sim.reach import REACH_EVENTS, Reach
from sim.scenario import POLICIES, Scenario
from sim.terms import TermCheck
from sim.waste import WasteCheck
from sim.workload import Workload, workload_for

EPOCH_MS = 1_700_000_000_000      # the storage clock's origin (SQS timestamps look real)
# The drain gives up after DRAIN_MAX_US without a message received, or after DRAIN_CAP_US in
# all: a state grown by `busy` (thousands of messages, drained ten a round) takes longer than a
# minute, and giving up on a drain still making progress counted the rest as lost.
DRAIN_MAX_US = 60_000_000
DRAIN_CAP_US = 600_000_000
SETTLE_MAX_US = 30_000_000        # members must converge within this long after the drain


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
        self.rng_disk = random.Random(f"disk:{seed}")
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
        self.down_gen: dict[str, int] = {n: 0 for n in self.names}   # kills so far: a restart names its kill
        # since when each node has been up and running (absent: not now; Elections judges
        # disruptions by it)
        self.running_since: dict[str, int] = {}
        self.last_fault_at = -1          # when a fault last struck (a heal is judged only if none since)
        self.drain_started_us: int | None = None
        self.drain_progress_us = 0            # when the drain last received a message
        self.settle_started_us: int | None = None
        # The journal (scenario.journal): each node's data-dir, how each node last went down
        # (PROCESS or POWER) and the highest seq it had acked then, the power cuts' times.
        sc = scenario
        self.journal = JournalSpec(sc.fsync, sc.fsync_interval_ms * 1000,
                                   (int(sc.fsync_ms[0] * 1000), int(sc.fsync_ms[1] * 1000)),
                                   sc.snapshot_min_bytes, sc.segment_bytes,
                                   tuple(sc.snapshot_step)) if sc.journal else None
        self.data: dict[str, SimDisk] = {}
        self.went_down: dict[str, str] = {}
        self.promised: dict[str, int] = {}
        self.promised_groups: dict[str, list[int]] = {}   # the same per group, with several
        self.power_cuts: list[float] = []
        self.journal_failures: list[str] = []
        self.durability_failures: list[str] = []
        self.recoveries: list[dict[str, Any]] = []
        self._writers: list[Any] = []
        self.provenance = ProvenanceCheck()
        self.waste = WasteCheck()
        self.flow = FlowControlCheck(scenario.throttle_lag_batches, scenario.throttle_lag_ms)
        self.terms = TermCheck(self.names)
        self.nemesis = Nemesis(self)
        self.rare = RarePaths(self)
        self.health = Health(self)
        self.elections = Elections(self)
        self.reach = Reach(self)

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
            self.elections.deactivated(r.node, r.fields.get("group", 0))
        elif ev == "handover":
            self.elections.handed_over(r.fields["group"])
        elif ev == "activated":
            self.rare.gc.activated(r.node)
        elif ev == "throttle" and not r.fields["on"]:
            if "group" in r.fields:
                g = r.fields["group"]
                self.flow.released(f"{r.node}/g{g}", r.ts, counted(self.nodes[r.node], self.now_s, g))
            else:
                self.flow.released(r.node, r.ts, counted(self.nodes[r.node], self.now_s))
        elif ev in REACH_EVENTS:
            self.reach.observe(r)
            if ev == "transfer_started":
                self.rare.relink.transfer_started(r)

    def run(self) -> None:
        sc = self.sc
        for n in self.names:
            self.at(self.rng_nodes.randrange(100_000), self._start_node, n)
        setup = SetupClient(self, random.Random(f"setup:{sc.seed}"), list(self.workload.queues()))
        setup.start(300_000)
        for f in sc.faults:
            self.at(int(f.at * 1e6), self.nemesis.fault, f)
        self.at(int(sc.fault_end * 1e6), self.nemesis.heal)
        self.at(int(sc.duration * 1e6), self._stop_clients)
        self.at(PROBE_US, self.health.probe)
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
        self.running_since[name] = self.now
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
        if not (how == PROCESS or self.sc.fsync == "always"):
            return
        if "seqs" not in rec:
            if rec["seq"] < promised:
                self.durability_failures.append(
                    f"durability: {name} had acked seq {promised} before its {how} crash, but its journal "
                    f"recovered only up to seq {rec['seq']} (at {self.now_s:.6f} s; fsync = {self.sc.fsync})")
            return
        for g, (got, acked) in enumerate(zip(rec["seqs"], self.promised_groups.get(name, []))):
            if got < acked:
                self.durability_failures.append(
                    f"durability: {name} had acked seq {acked} of group {g} before its {how} crash, but its "
                    f"journal recovered only up to seq {got} (at {self.now_s:.6f} s; fsync = {self.sc.fsync})")

    def links_around(self, name: str) -> list[tuple[str, str]]:
        """Every directed link from and to ``name``: what isolating it cuts."""
        return [(name, o) for o in self.names if o != name] + [(o, name) for o in self.names if o != name]

    def queue_policies(self) -> dict[str, str]:
        """The queues that carry their own ack policy (the workload tagged them): the checker
        holds each queue's data to its own policy."""
        return {q.name: q.tags[POLICY_TAG] for q in self.workload.queues()
                if q.name is not None and q.tags.get(POLICY_TAG) in POLICIES}

    def master(self, group: int = 0) -> SimNode | None:
        """The god view: the node that is active and serving ``group`` now, without touching its
        state."""
        now_s = self.now_s
        if self.sc.groups > 1:
            found = [n for n in self.names if n in self.nodes and self.nodes[n].alive and not self.nodes[n].frozen
                     and self.nodes[n].core.groups[group].serving_now(now_s)]
        else:
            found = [n for n in self.names if n in self.nodes and self.nodes[n].alive and not self.nodes[n].frozen
                     and self.nodes[n].core.membership.evaluate(now_s)[0]
                     and self.nodes[n].core.groups[0].replication.serving]
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
        if empty_rounds < 2:
            return False
        for g in range(self.sc.groups):
            m = self.master(g)
            storage = m.core.groups[g].storage if m is not None else None
            # a message moving to another group's queue is in the source's outbox meanwhile
            if storage is None or storage.message_count() != 0 or storage.outbox_count() != 0:
                return False
        return True

    def drain_done(self) -> None:
        self.settle_started_us = self.now
        self._settle()

    def _settle(self) -> None:
        if self.members_converged() or self.now - self.settle_started_us > SETTLE_MAX_US:
            self.converged = self.members_converged()
            for n in self.names:
                node = self.nodes.get(n)
                if node is None or not node.alive:
                    continue
                view = node.core.view
                rc = node.core.groups[0].replication
                self.record(DigestRecord(self.now_s, n, node_digest(node), rc.master,
                                         view.view_id if view is not None else None))
            self.finished = True
            return
        self.at(self.now + 100_000, self._settle)

    def members_converged(self) -> bool:
        """For every group: every member a replica of the group's serving master, in its view,
        holding its last entry (the same seq written in the same epoch: a member outside the view
        may hold a divergent tail that ends at the same seq) and having acked it."""
        return all(self.group_converged(g) for g in range(self.sc.groups))

    def group_converged(self, g: int) -> bool:
        m = self.master(g)
        if m is None or m.core.groups[g].replication.senders:
            return False
        log = m.core.groups[g].replication.log
        last = log.last_seq
        for n in self.names:
            node = self.nodes.get(n)
            if node is None or not node.alive or node.frozen:
                return False
            if node is m:
                continue
            c = node.core.groups[g].replication
            if c.role != REPLICA or c.master != m.name or c.log.last_seq != last or c.receiver is not None \
                    or c.log.last_epoch != log.last_epoch:
                return False
        replicas = m.core.groups[g].replication.master_core.status(self.now_ms)["replicas"]
        return len(replicas) == len(self.names) - 1 and all(r["acked_seq"] == last for r in replicas.values())

    # --- what faults do to nodes (the nemesis and the rare paths decide when) -------------------

    def on_disk(self, name: str) -> int:
        """How far ``name``'s journal is really on disk (its last fsync's), reported or not."""
        x = self.nodes.get(name)
        return x.writer.durable() if x is not None and x.alive and x.writer is not None else 0

    def kill(self, name: str, detail: str | None = None) -> None:
        node = self.nodes[name]
        self.disks[name] = node.raft.durable()
        node.crash()
        self.down.add(name)
        self.paused.discard(name)
        self.running_since.pop(name, None)
        self.recovering.pop(name, None)
        self.down_gen[name] += 1
        if self.journal is not None:
            self.went_down[name] = PROCESS      # kill -9: the page cache survives
            self.promised[name] = node.acked
            self.promised_groups[name] = list(node.acked_groups)
        self.nemesis.note(name, "kill", detail)

    def restart(self, name: str, gen: int | None = None) -> None:
        if name not in self.down or (gen is not None and gen != self.down_gen[name]):
            return
        positions = [self.nodes[n].core.groups[0].replication.log.last_seq for n in self.names
                     if n != name and n in self.nodes and self.nodes[n].alive]
        self.recovering[name] = max(positions, default=0)
        self.nemesis.note(name, "restart")
        self._start_node(name)

    def resume(self, name: str) -> None:
        if name not in self.paused:
            return
        self.paused.discard(name)
        node = self.nodes.get(name)
        self.running_since[name] = self.now
        self.nemesis.note(name, "resume")
        if node is not None and node.alive:
            node.resume()


def node_digest(node: SimNode) -> str:
    """A node's state digest: its storage's, or with several groups one over every group's (each
    member holds every group)."""
    groups = node.core.groups
    if len(groups) == 1:
        return groups[0].storage.digest()
    return hashlib.sha256("".join(g.storage.digest() for g in groups).encode()).hexdigest()[:32]


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
    failures += w.flow.failures + w.terms.failures + view_failures(w.records)
    judged = w.elections
    failures += judged.heal_failures + judged.vote_failures + judged.disrupt_failures
    if not w.converged:
        failures.append("liveness: the members did not converge within "
                        f"{SETTLE_MAX_US // 1_000_000} s of the drain after the faults stopped")
    stats = {"events": w.events, "sim_end_s": w.now_s, "lines": len(lines), "bytes": len(history),
             "ops": sum(1 for r in w.records if r.event == "client_op"),
             "frames": w.net.sent, "frames_lost": w.net.lost, "skipped_crashes": w.nemesis.skipped_crashes,
             "heals_judged": judged.heal_checks, "disruptions_judged": judged.disruptions_judged,
             "quiescent_judged": verdict.quiescent_points,
             "provenance_checked": w.provenance.entries_checked + w.provenance.frames_checked,
             "waste_checked": w.waste.frames_checked + w.waste.reports_checked,
             "flow_ticks_judged": w.flow.ticks_judged, "flow_over_ms": w.flow.over_ms,
             "flow_over_batches": w.flow.over_batches, "stands_judged": w.terms.stands,
             "availability_judged_s": verdict.availability_judged_s, "epochs": len(w.reach.epochs), **w.reach.counts,
             **({"power_cuts": len(w.power_cuts), "excused": excused,
                 "fsyncs": sum(x.fsyncs for x in w._writers), "snapshots": sum(x.snapshots for x in w._writers),
                 "snapshots_refused": sum(len(x.refused) for x in w._writers),
                 "torn_tails": sum(1 for r in w.recoveries if r.get("truncated"))} if scenario.journal else {}),
             "sim_wall_s": round(sim_wall, 4), "check_wall_s": round(time.perf_counter() - t1, 4)}
    return SimResult(scenario.seed, scenario, history, verdict, failures, w.converged, stats, decided)
