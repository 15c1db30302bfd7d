"""What a chaos scenario (tests/chaos/scenarios.py) is told with: a ``Run`` holds the cluster of
real ``elasticmq-py serve`` processes (every directed link through a Toxiproxy proxy), the
recording clients, the nemesis log and the run's seeded choices, and gathers the scenario's own
rules (``never_succeeds``, ``keeps_serving``, ``keeps_office``), applied to the history once the
run is over; ``heal`` ends every fault.

The short schedule (``long=False``, ``make test``) holds each fault a few seconds; the long one
(``make chaos``) draws timings, victims and cut modes from the run's seed, and writes each
choice down in the result's ``params``.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from cluster.checker import History
from cluster.config import Timing
from elasticmq_py.testing.cluster import Cluster
from tests.cluster.workload import Nemesis, Recorder, stop_all

# The chaos clusters share two cores with their clients, the proxy server and possibly another
# test: the LAN defaults elect a new master whenever a process is starved for 0.2 s, a test of
# the scheduler rather than of partitions. These are tests/cluster/test_replication.py's LOADED.
CHAOS_TIMING = Timing(heartbeat=0.1, election_min=0.8, election_max=1.6, vote_guard=0.7, lease=0.6,
                      leader_fallback=2.0, connection_timeout=2.0, keepalive=0.4, suspect=2.0, debounce=0.5)
QUEUES = ("jobs", "orders.fifo")
# A cut-off master stays active at most `lease` after the last heartbeat a quorum acked, and
# that heartbeat was sent before the cut was complete (the nemesis notes the time after the last
# proxy call): nothing invoked on it later than this after the cut may succeed, whatever the ack
# policy. 0.1 s covers the clocks' granularity, not any slack of the rule.
LATE_S = CHAOS_TIMING.lease * (1 + CHAOS_TIMING.max_drift) + 0.1
# The stream notices an unreachable replica after `connection_timeout` without frames.
DETECT_S = CHAOS_TIMING.connection_timeout
# After a heal, a master that kept its majority keeps office at least this long (invariant 6):
# two election timeouts, long enough for a cut-off node's higher term to have reached it.
HEAL_QUIET_S = 2 * CHAOS_TIMING.election_max
# A client gives up on an answer after this long (recording `unknown`). Longer than any wait in
# the workload (no long polls but the drain's 1 s); shorter than the 30 s a forwarding member
# waits for a reply lost with its connection, which would otherwise stall a short run.
CLIENT_READ_TIMEOUT = 8.0


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: int
    body: Callable[["Run"], None]
    doc: str
    replication: dict[str, Any] = field(default_factory=dict)   # extra [cluster.replication] keys
    prefill: tuple[int, int] = (0, 0)    # bulk messages loaded before the faults (short, long)
    clients: int = 3
    clients_on_master: bool = False      # clients talk to the master only (no forwarding)
    receive_ratio: float = 0.4
    fsync: str | None = None             # each node keeps a data-dir with this fsync policy; None: in memory


Check = Callable[[History], None]


class Run:
    """One run of one scenario: the cluster, the clients, the nemesis log, the seeded choices,
    and the scenario's own checks, applied to the history once the run is over."""

    def __init__(self, sc: Scenario, folder: Path, seed: int, policy: str, long: bool, nice: int = 0,
                 groups: int = 1) -> None:
        self.sc = sc
        self.folder = folder
        self.seed = seed
        self.policy = policy
        self.long = long
        self.rng = random.Random(f"{sc.name}/{seed}/{policy}/{long}")
        self.params: dict[str, Any] = {}
        self.observations: dict[str, Any] = {}
        self.problems: list[str] = []
        self.checks: list[Check] = []
        self.names = [f"n{i}" for i in range(1, sc.nodes + 1)]
        self.groups = groups
        self.c = Cluster(folder, self.names, timing=CHAOS_TIMING, toxiproxy=True, nice=nice, fsync=sc.fsync,
                         groups=groups)
        self.c.replication_config = {"policy": policy, **sc.replication}
        self.nemesis: Nemesis | None = None
        self.recorders: list[Recorder] = []
        self.pinned: list[Recorder] = []
        # The master: with several groups the Raft leader, whose views name each group's master
        # (``masters``, by group; with one group ``[master]``). Scenarios that watch one stream
        # (its lag, its transfers) watch group 0's, on ``masters[0]``.
        self.master = ""
        self.masters: list[str] = []
        self.killed: set[str] = set()
        self.started = False   # the cluster is up and the clients run
        self.prefix = ""       # the story being told, in a combo: keys are prefixed with it
        self._open_until: list[dict[str, float | None]] = []   # windows that end at the next heal

    # -- seeded choices, written down --------------------------------------------------------------

    def draw(self, key: str, short: float | tuple[float, float], long: tuple[float, float]) -> float:
        lo, hi = long if self.long else ((short, short) if isinstance(short, (int, float)) else short)
        v = round(self.rng.uniform(lo, hi), 3)
        self.params[self.prefix + key] = v
        return v

    def choose(self, key: str, options: list[Any], short: Any = None) -> Any:
        v = short if (short is not None and not self.long) else self.rng.choice(options)
        self.params[self.prefix + key] = v
        return v

    def cut_mode(self, short: str = "refuse") -> str:
        return self.choose("cut_mode", ["refuse", "drop"], short)

    def observe(self, **kw: Any) -> None:
        self.observations.update({self.prefix + k: v for k, v in kw.items()})

    # -- faults ------------------------------------------------------------------------------------

    def note(self, node: str, action: str, detail: str | None = None, ts: float | None = None) -> float:
        ts = time.time() if ts is None else ts
        assert self.nemesis is not None
        self.nemesis.note(node, action, detail, ts=ts)
        return ts

    def kill(self, name: str) -> float:
        self.c.kill(name)
        self.killed.add(name)
        return self.note(name, "kill", ts=self.c.killed_at(name))

    def restart(self, name: str) -> float:
        self.c.start(name)
        self.killed.discard(name)
        return self.note(name, "restart", "empty memory" if self.sc.fsync is None else "from its data-dir")

    def wait_master(self, among: list[str] | None = None, since: float | None = None, timeout: float = 20.0,
                    key: str = "failover_s") -> str:
        m = self.c.wait_for(f"a stable master among {among or 'the live nodes'}", self.c.stable_master(among=among),
                            timeout)
        if since is not None:
            self.observe(**{key: round(time.time() - since, 2)})
        return m

    def aim(self, what: str, timeout: float) -> str:
        """Wait for a master whose view holds every member and, with groups, for every group's
        master; remember them (``master``, ``masters``) as the ones the faults aim at."""
        c, members = self.c, set(self.names)
        self.master = c.wait_for(what, c.stable_master(members=members), timeout)
        self.masters = [self.master] if self.groups == 1 else c.wait_for(
            f"{what}: every group's master", lambda: c.group_masters(self.names), timeout)
        return self.master

    def phase(self, label: str | None) -> None:
        for r in self.recorders:
            r.phase = label

    def pinned_client(self, nodes: list[str]) -> Recorder:
        """A client that talks to ``nodes`` only (the minority side of a partition), until the
        next heal."""
        name = f"m{len(self.pinned)}"
        r = Recorder(name, self.folder / f"{name}.jsonl", client_urls(self.c, lambda: nodes), QUEUES,
                     seed=self.rng.randrange(1 << 30), receive_ratio=self.sc.receive_ratio,
                     read_timeout=CLIENT_READ_TIMEOUT)
        self.recorders.append(r)
        self.pinned.append(r)
        return r.start()

    def hold(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    # -- the scenario's own rules ------------------------------------------------------------------

    def expect(self, cond: Any, message: str) -> bool:
        if not cond:
            self.problems.append(message)
        return bool(cond)

    def until_heal(self) -> dict[str, float | None]:
        """A window that the next heal closes (``w["until"]`` is None while it is open)."""
        w: dict[str, float | None] = {"until": None}
        self._open_until.append(w)
        return w

    def never_succeeds(self, nodes: list[str], cut_at: float) -> None:
        """Nothing invoked on ``nodes`` later than LATE_S after the cut, until the heal, may
        answer with success: they are cut off from any majority (DESIGN.md: a minority node never
        acknowledges a write or hands out a message)."""
        w, label = self.until_heal(), self.prefix or self.sc.name

        def check(history: History) -> None:
            late = _late_oks(history, nodes, cut_at + LATE_S, w["until"])
            self.expect(not late, f"{label}: {len(late)} successful answers from the cut-off side {nodes} to "
                                  f"attempts invoked > {LATE_S:.1f}s after the cut, e.g. "
                                  f"{[(o.op_id, o.node, o.op, round(o.ts - cut_at, 3)) for o in late[:3]]}")
        self.checks.append(check)

    def keeps_serving(self, since: float) -> None:
        """Some send invoked after ``since``, before the heal, succeeded: a majority was up."""
        w, label = self.until_heal(), self.prefix or self.sc.name

        def check(history: History) -> None:
            hi = w["until"] or float("inf")
            ok = [op for op in history.ops if op.outcome == "ok" and op.op == "send" and since <= op.ts <= hi]
            self.expect(ok, f"{label}: no send succeeded anywhere in [{since:.3f}, {hi:.3f}] although a "
                            f"majority was connected")
        self.checks.append(check)

    def keeps_office(self, master: str, since: float, keep: list[str] | None = None) -> None:
        """Invariant 6: ``master`` keeps its majority through this fault, so it stays master in its
        epoch through the fault, the heal and HEAL_QUIET_S after it: no node stands, none
        records a term beyond the master's (a cut-off node catching up to it is no election).
        With groups, every group mastered by one of ``keep`` (default: the master), which the
        master still hears, keeps its master too; the others' groups may move."""
        w, label = self.until_heal(), self.prefix or self.sc.name
        kept = None if self.groups == 1 else {
            g: n for g, n in enumerate(self.masters) if n in (keep if keep is not None else [master])}

        def check(history: History) -> None:
            for problem in office_kept(history, master, since, (w["until"] or float("inf")) + HEAL_QUIET_S, kept):
                self.expect(False, f"{label}: {problem}")
        self.checks.append(check)

    def healed(self, at: float) -> None:
        for w in self._open_until:
            if w["until"] is None:
                w["until"] = at


def office_kept(history: History, master: str, since: float, until: float,
                groups: dict[int, str] | None = None) -> list[str]:
    """What breaks invariant 6 for ``master`` in ``(since, until]``: a term beyond the one it held
    at ``since`` (an election; a cut-off node catching up to the master's term is none), or
    another node taking office; with ``groups`` (group -> its master at ``since``), another node
    taking office in one of those groups."""
    roles = [e for e in history.node_events if e.event == "role"]
    before = [e for e in roles if e.node == master and e.ts <= since]
    if not before:
        return [f"no role line of {master} before the cut"]
    term = before[-1].fields.get("term")
    beyond = [(e.node, e.fields.get("role"), e.fields.get("term"), round(e.ts - since, 3)) for e in roles
              if since < e.ts <= until and isinstance(e.fields.get("term"), int) and e.fields["term"] > term]
    others = [(e.node, round(e.ts - since, 3)) for e in history.node_events
              if e.event == "activated" and since < e.ts <= until
              and (e.node != master if groups is None else groups.get(e.fields.get("group", 0), e.node) != e.node)]
    out = []
    if beyond:
        out.append(f"{master} (term {term}) kept its majority, yet terms rose during the fault or after its heal "
                   f"(node, role, term, s after the cut): {beyond[:4]}")
    if others:
        out.append(f"another master took office (node, s after the cut): {others[:3]}")
    return out


def client_urls(c: Cluster, nodes: Callable[[], Iterable[str]]) -> Callable[[], dict[str, str]]:
    def urls() -> dict[str, str]:
        alive = set(c.alive())
        return {n: c.url(n) for n in nodes() if n in alive}
    return urls


def others(run: Run, *but: str) -> list[str]:
    return [n for n in run.names if n not in but]


def _late_oks(history: History, nodes: Iterable[str], after: float, until: float | None = None) -> list[Any]:
    """Successful client answers from ``nodes`` to attempts invoked after ``after``."""
    nodes = set(nodes)
    return [op for op in history.ops if op.node in nodes and op.outcome == "ok" and op.ts > after
            and (until is None or op.ts < until) and op.phase != "drain"]


def heal(run: Run) -> str:
    """The faults stop: every link up and every toxic gone, paused nodes resumed, killed ones
    restarted (empty); then wait for one master whose view holds every member."""
    c = run.c
    run.phase(None)
    if c.net is not None:
        c.heal_all()
    for n, p in c.procs.items():
        if p.stopped:
            c.sigcont(n)
            run.note(n, "resume", "SIGCONT at heal")
    for n in sorted(run.killed):
        run.restart(n)
    at = run.note("", "heal", "every link up, every toxic removed")
    run.healed(at)
    stop_all(run.pinned)
    run.wait_master(since=at, timeout=45, key="recovery_s")
    return run.aim("every member in the master's view", 45)
