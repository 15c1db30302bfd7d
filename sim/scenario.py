"""A scenario: everything one simulated run does, drawn from its seed.

The generator decides the cluster size (unless pinned), the operation mix and pace, the network's
normal behaviour, the fault schedule, the ack policy (unless pinned) and a few protocol knobs
(a small replication log, so that catching up needs a state transfer; small snapshot chunks, so
transfers take several round trips). A scenario is plain data (``to_json``) so a failing seed can
be read, stored next to its history, and rerun.

Faults run from ``fault_start`` to ``fault_end``; then the network heals, crashed nodes restart,
paused ones resume, and the clients keep working on a healthy cluster until ``duration``, after
which the run drains every queue and records each node's digest.

Crashes lose the node's messages and replication log (they are in memory) but not its Raft
term, vote and log (the product's state-dir); on a seed with a journal (``journal``, half the
seeds) a crash is a kill -9 and the node restarts from its data-dir (sim/disk.py), and
``crash_all`` power-cuts every node at once. When a crash may happen is part of the fault
model (decided by the simulator at the moment of the crash, since only then is the cluster's
state known; see ``Nemesis.may_crash``, sim/nemesis.py):

* ``any`` (the default): whenever fewer than ``(nodes - 1) // 2`` nodes are down or catching up,
  i.e. any crash the cluster is meant to tolerate, such as a member restarting empty while the
  only other copy of a committed view is cut off (tests/sim/test_found_bugs.py);
* ``safe``: only when no other node is down or still catching up after a restart, and every other
  node holds everything a majority holds (its replication log and its Raft log).
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from typing import Any

POLICIES = ("none", "one", "majority", "all")

# Fault kinds and their relative weights in a schedule.
FAULT_WEIGHTS: dict[str, int] = {
    "crash": 3,        # a node dies (state lost), restarts after `duration` with empty memory
    "crash_master": 3, # the same, aimed at whichever node is the active master then
    "pause": 2,        # SIGSTOP-like: the node stops processing for `duration`, then resumes its backlog
    "pause_master": 2,
    "stall": 2,        # the node's event loop stops (a long GC, a slow callback) while its Raft thread
                       # goes on: lease acks and fences reach the loop late (the master, half of the time)
    "isolate": 2,      # cut every link to and from one node (the master, half of the time)
    "partition": 2,    # a random split of the nodes into two sides
    "bridge": 1,       # two sides that cannot talk, and one node that talks to both
    "one_way": 1,      # cut one direction of one or more links
    "flap": 1,         # a link pair going down and up every few hundred ms
    "delay": 2,        # extra latency on some links (FIFO kept), up to seconds
    "lossy": 1,        # random frame drops on every link
    "dup": 1,          # frames delivered twice on every link
    "slow_master_fails": 6,  # the master's outgoing links turn slow (each its own delay), then it
                             # crashes or pauses while its batches are still on the way
}
# Drawn apart from the rest, only for a seed with a journal (so seeds without one are as before):
# "crash_all", a power cut of every node at once (their disks keep only what was fsynced, and a
# random part of the rest), then a restart of each after `duration` plus a random stagger.
# "busy": the cut waits (up to a second) for some node's fsync to be under way, and strikes
# in the middle of it, so that written but unsynced bytes are at stake.

FSYNC_POLICIES = ("always", "interval", "never")

# Rare paths, drawn apart from everything else (the "rare:" generator), each with its
# own probability per seed, so that a seed without them draws what it always drew:
# * "chain": quick successive failovers. Each step isolates the master of the moment and heals the
#   one isolated by the step before, so that the deposed master, still holding its tail, answers
#   the next master's sync; with a "lead" (its stream cut, Raft up) before its isolation, a
#   master keeps serving for that long with no replica taking its batches: under `none` (and
#   under `one`, which keeps one replica's stream) an unacknowledged tail of seconds.
# * "tail": a chain whose first lead lasts 1.5-5 s (the long deposed tail).
# * "busy": state transfers that run while the master keeps writing: a grown state (fewer
#   receives and deletes), chunks of 1-2 records, a transfer window of 1-2 chunks, a small
#   replication log, and replica crashes late in the run, so a restarted replica's transfer
#   spans many pumps while the log moves.
# * "lease": votes timed inside a master's lease. Each step cuts the master's links to every
#   follower one way (they stop hearing it; it still hears them) until a follower stands, and in
#   that instant gives the master back its links to the voters (the candidate's vote requests
#   are on their way, slowed by 0-150 ms): the voters hear the master and renew its lease just
#   before the request arrives, which the vote guard must drop. The candidate stays cut off
#   from the master one way, or both ways (a bridge through the voters), for the step's hold.
#   Without the guard, two masters would be active at once (cluster/lease.py).
# * "amnesia": power cuts under a lax fsync. The seed gets a journal with `fsync` interval or
#   never (unless pinned), compaction at 4 KB and one or two `crash_all` (after the first third
#   of the fault window, once compaction has made the queues durable): every member restarts
#   amnesiac yet with a journal, so the sync may find an amnesiac member the most advanced, and
#   a master whose log ends before that member's journal starts needs its snapshot, which a
#   member that refused it as "restarted empty" would leave the sync waiting for for ever (the
#   decision point transfer.empty_holder, cluster/decisions.py, is reached about once in 60
#   seeds without this path). Not played on a seed pinned to `journal=False` or
#   `fsync="always"`.
# Chains take up to ~15 s: they are played only with a fault window of CHAIN_MIN_WINDOW or more
# (the default 60-second scenarios), so that short scenarios keep their density of ordinary faults.
# * "fork": an older epoch's tail longer than a newer epoch's log, under every policy (the sync's
#   ordering of (epoch, seq) decides). The master of the moment has its stream cut (Raft up) for
#   the lead, so it keeps office and writes a tail nobody takes (under `majority` and `all` its
#   clients block, then time out and go on: a tail of a few batches); then it is isolated. The
#   next master is deposed (isolated) right after its first batch of the new epoch committed on a
#   replica (the world watches for it), and in that instant the old tail-holder is healed: the
#   master after that syncs with it, finding (older epoch, longer log) against (newer epoch,
#   shorter log). sim/rare/fork.py plays it.
# * "deaf": a minority of followers stop hearing the master (its links to them cut one way: they
#   still reach it) for 0.3-1 s, several times. The others still hear the master, and so refuse
#   their pre-votes: no deaf node may stand (sim/elections.py fails a stand that a leader
#   holding a healthy majority suffers). A leader that granted pre-votes would let them.
# * "race": power cuts timed on the journal's state, under `fsync = always` (the seed gets a
#   journal unless pinned without one or to another fsync policy, and not with "amnesia"). Each
#   of one or two cuts is armed at a random time, then strikes in the first instant of its
#   race (sim/rare/race.py): "master", a replica's durable ack reached the master before the
#   master's own fsync of that batch finished; "replica", a replica's fsync finished while it
#   had applied (and was holding the ack of) a later batch, a few ms later, when an ack for the
#   later batch, had it gone out unclamped, would be at the master. The restarts are staggered,
#   so that the sync after them may hear from members without the raced batch first.
# * "handoff": a master lost right after a state transfer it sent, while only the joiner holds
#   what the transfer's read saw. A replica crashes for 1-3 s (a small log makes its catch-up
#   a transfer);
#   when the master sends the transfer, the other members' streams either take its batches
#   ``slow_ms`` late (``mark`` "slow": writes go on, committing late, while the read runs) or
#   stop at the position the last chunk names ("end"), and once the joiner holds the transfer
#   the master is isolated ``settle_ms`` later, for ``hold_s`` (what is on its way is lost). The next
#   master syncs the joiner with members level at the mark: a joiner that holds effects its log
#   lacks diverges from them for good (sim/rare/handoff.py).
# * "wiped": a master lost while members restarted without their data count for nothing yet.
#   The master's stream to all but ``nodes // 2`` replicas (the keepers) is cut for ``lead_s``
#   (Raft up: it keeps office, and under `majority` commits on the keepers alone), then every
#   keeper crashes and restarts ``down_s`` later with its memory and data-dir lost (amnesiac),
#   its stream from the master slowed by ``slow_ms``. In the instant the master has positioned
#   the last of them (its SyncRequest naming its log end arrived), ``settle_ms`` later, the
#   master is isolated for ``hold_s``: what it committed on the keepers since the cut is on
#   its disk alone, and the next master's sync must not count the keepers, which have not caught
#   up, towards its majority (sync.py; sim/rare/wiped.py).
# * "hung": an fsync hung across two master changes, under `fsync = always` (the seed gets a
#   journal unless pinned without one or to another policy; not with "amnesia"). The
#   master's stream is cut for ``lead_s`` (it writes a tail nobody takes), then its next fsync
#   hangs and it is isolated; once the next master serves it is healed (Raft first, once that
#   master leads Raft), and that master's transfer resets it (the reset waits behind the hung
#   fsync); then that master steps down in favour of another member (``pick``: which) and is
#   isolated for ``hold_s``, and once the hung node holds the ack of a batch from the master
#   after that, the fsync returns and the power of every node is cut ``cut_after_us`` later:
#   the node may have acked nothing past what its journal holds (docs/simulator.md, durability). A try has the floor (the faults that come due wait for it), and one
#   that loses its way is followed by another while one fits (sim/rare/hung.py).
# * "replay": a member's stream connection to the master breaks in the instant a request it
#   forwarded (a receive) reached the master, and is back ``stall_s`` later, longer than that
#   receive's visibility timeout. Like a transport that resends what it cannot know arrived, the
#   member first sends again its frames of the last moments, the forwarded request among them
#   (which arrives twice, seconds apart), then what it sent meanwhile: its client's delete of
#   what the receive returned. The master must serve the copy once (cluster/node_core.py): run
#   again, it takes the message anew, and the delete, holding the first receipt, deletes nothing
#   (sim/rare/replay.py).
# * "relink": a divergent member's stream link lost and back while its transfer runs. The
#   master's stream is cut (Raft up) for ``lead_s``, so it writes a tail nobody takes; then it
#   is isolated, and once the next master serves it is healed: that master finds it divergent
#   and starts a transfer to it. In that instant their stream is cut, both ways (Raft up), for
#   ``down_s``, past the stream's connection timeout: the master counts the member gone, then
#   connected anew, while the transfer is still under way. ``settle_ms`` after that reconnection
#   the master is isolated for ``hold_s``, so the transfer never finishes and the next master
#   syncs with the member as the reconnection left it. A master that streamed to it on the
#   reconnection would have it take entries by seq onto its divergent tail. The seed keeps
#   the whole replication log (64 MB, unless another path shrinks it) and plays early in the
#   fault window, so that the log still starts at seq 1 (sim/rare/relink.py).
# * "gc": a master's event loop stalled across a vote inside its lease. As in "lease", the
#   master's links to every follower are cut one way until a follower stands; in that instant
#   the master gets them back (but for the extra deaf ones, ``nodes // 2 - 1`` followers that
#   stay cut off and vote for the candidate), and the candidate's Raft links are slowed by
#   ``vote_ms`` for its vote requests: the other followers hear the master first, renewing its
#   lease, and drop the requests (the vote guard), while the master gets one inside its lease.
#   In the instant it arrives the master's event loop stalls (a long GC pause, a slow turn),
#   its Raft thread running on: the fence (cluster/election.py) holds the request until the
#   loop has stopped serving, or the lease has surely run out. The stall ends ``after_ms``
#   after another node activates (or after ``max_s``): a master whose Raft voted at once would
#   still count itself active then, its lease fresh, while the new master serves
#   (sim/rare/gc.py).
# * "comeback": a deposed master made master again over its own divergent tail, the first
#   answer of its fetch lost. Its stream is cut (Raft up) for ``lead_s``, so it writes a tail
#   nobody takes; then it is isolated. Once the next master's log has passed the tail's end by
#   two entries, the old master's Raft links come back (its stream stays cut: it follows in
#   Raft and takes nothing), and once its Raft log has caught up, ``settle_ms`` later, an
#   operator asks the master to step down in its favour (the admin route's step-down with a
#   target, Raft's leadership transfer) and its stream comes back. Syncing, it fetches from the
#   truth from its own last entry, inclusive, to check that entry; the answer that carries it
#   is lost (the network's filter, once), while the answers after it arrive. Appended onto the
#   divergent tail, they would make its log claim the truth's history over a state that is not.
#   The seed keeps the whole replication log, as "relink" does
#   (sim/rare/comeback.py).
# * "turn": a transfer's last chunk built in the loop turn in which the master executed a
#   client's operation, not yet cut into the log. A replica is down for ``down_s`` (a small
#   log makes its catch-up a transfer, read whole in one turn: chunks of up to 200 records,
#   8 in flight); when it is back, its frames that start or advance a transfer (its
#   positioning answer, its chunk acks) reach the master in the turn of the master's next
#   client operation, right after it (at most ``cap_ms`` late), as a busy loop reads a socket
#   and an HTTP request in one turn. Once a last chunk was built in such a turn, the members
#   take no batch past the position it names (the "handoff" path's "end" filter), and once
#   the joiner holds the transfer the master is isolated ``settle_ms`` later: a last chunk
#   naming a position without the operation, whose effects the read saw, leaves the joiner
#   holding effects no member's log carries (sim/rare/turn.py).
RARE_PROBABILITY = {"tail": 0.3, "chain": 0.3, "busy": 0.3, "lease": 0.3, "amnesia": 0.2, "fork": 0.3,
                    "deaf": 0.3, "race": 0.3, "handoff": 0.3, "wiped": 0.3, "hung": 0.3, "replay": 0.3,
                    "relink": 0.3, "gc": 0.3, "comeback": 0.3, "turn": 0.3}
CHAIN_MIN_WINDOW = 20.0
FORK_MIN_WINDOW = 10.0
LEASE_MIN_WINDOW = 4.0
LEASE_WAIT_S = 2.0               # a lease step heals if no follower stands within this


@dataclass(frozen=True)
class Fault:
    at: float                 # seconds of simulated time
    kind: str
    duration: float
    target: str = ""          # node name, "master", or ""
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Scenario:
    seed: int
    nodes: int
    policy: str
    duration: float                  # seconds of workload (faults included); drain comes after
    fault_start: float
    fault_end: float
    faults: tuple[Fault, ...]
    clients: int
    think_ms: float                  # mean pause of a client between two operations
    mix: dict[str, float]            # op kind -> weight
    fifo_groups: int
    base_delay_ms: tuple[float, float]   # normal one-way latency, uniform in [lo, hi]
    log_limit_bytes: int             # replication log bound (small: lagging replicas need a transfer)
    chunk_records: int               # snapshot chunk size, in records (a record: a queue or <= 64 messages)
    bugs: tuple[str, ...] = ()
    crash_policy: str = "any"        # when the nemesis may crash a node: see sim/nemesis.py may_crash
    forward: bool = True             # members forward clients to the master (else: 503 and a hint)
    throttle_lag_ms: int = 5_000     # flow control's bounds (cluster/replication/master.py Limits)
    throttle_lag_batches: int = 10_000
    queue_policy: str | None = None  # the standard queue's own ack policy (its POLICY_TAG), as
                                     # strict as the cluster's or stricter; None: untagged
    # A data-dir per node (sim/disk.py): the journal that ships, on a simulated disk.
    journal: bool = False
    fsync: str = "always"            # the journal's fsync policy (cluster/journal/writer.py)
    fsync_interval_ms: int = 100     # for fsync = interval
    fsync_ms: tuple[float, float] = (0.2, 2.0)   # an fsync's latency, uniform in [lo, hi]
    snapshot_min_bytes: int = 64 * 1024 * 1024   # compaction threshold (CoreSettings)
    # compaction's step (bytes read a step, records a blob): small, a snapshot of the
    # simulator's small states is read over many steps while the log moves (its fuzzy part)
    snapshot_step: tuple[int, int] = (1024 * 1024, 256)
    segment_bytes: int = 64 * 1024 * 1024        # a journal segment's size before a new one
    transfer_window: int = 8         # snapshot chunks in flight (TransferSettings.window)
    gather_ms: int = 0               # the master's gather after an ack (Limits.gather_ms)
    rare: tuple[str, ...] = ()       # the rare paths this seed plays (RARE_PROBABILITY)
    # Replication groups ([cluster] groups): each queue in one, each group its own master. With
    # two or more, the run plays no rare path (each is written for one group's master).
    groups: int = 1

    def names(self) -> list[str]:
        return [f"n{i + 1}" for i in range(self.nodes)]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["faults"] = [f.to_json() for f in self.faults]
        d["base_delay_ms"] = list(self.base_delay_ms)
        d["bugs"] = list(self.bugs)
        d["fsync_ms"] = list(self.fsync_ms)
        d["snapshot_step"] = list(self.snapshot_step)
        d["rare"] = list(self.rare)
        if self.groups == 1:
            del d["groups"]    # a one-group scenario reads as it always did
        return d

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Scenario":
        d = dict(d)
        d["faults"] = tuple(Fault(**f) for f in d["faults"])
        d["base_delay_ms"] = tuple(d["base_delay_ms"])
        d["bugs"] = tuple(d.get("bugs", ()))
        if "fsync_ms" in d:
            d["fsync_ms"] = tuple(d["fsync_ms"])
        if "snapshot_step" in d:
            d["snapshot_step"] = tuple(d["snapshot_step"])
        d["rare"] = tuple(d.get("rare", ()))
        return cls(**d)


DEFAULT_MIX = {"send": 6, "send_fifo": 4, "receive": 4, "receive_fifo": 3, "delete": 3, "change_visibility": 1}


CRASH_POLICIES = ("safe", "any")


def generate(seed: int, *, nodes: int | None = 3, policy: str | None = "majority", duration: float = 60.0,
             bugs: tuple[str, ...] | frozenset[str] = (), faults: bool = True,
             crash_policy: str = "any", journal: bool | None = None, fsync: str | None = None,
             rare: tuple[str, ...] | None = None, groups: int | None = 1) -> Scenario:
    """The scenario of ``seed``. ``nodes`` / ``policy`` None: drawn from the seed too, and so are
    ``journal`` (half the seeds have one) and ``fsync`` (mostly always) when None, the rare
    paths (``rare``: a subset of RARE_PROBABILITY's keys) when None, and ``groups`` (1 to 4, from
    a generator of its own, so that every other draw of a seed stays as it was) when None."""
    n_groups = groups if groups is not None else random.Random(f"groups:{seed}").randint(1, 4)
    if n_groups < 1:
        raise ValueError(f"groups must be >= 1, not {n_groups}")
    rng = random.Random(f"scenario:{seed}")
    n = nodes if nodes is not None else rng.choice((3, 3, 3, 5))
    pol = policy if policy is not None else rng.choice(POLICIES)
    if pol not in POLICIES:
        raise ValueError(f"unknown ack policy {pol!r}")
    if crash_policy not in CRASH_POLICIES:
        raise ValueError(f"unknown crash policy {crash_policy!r}")
    fault_start = min(2.0, duration * 0.1)
    fault_end = max(fault_start, duration * 0.75)
    schedule: list[Fault] = []
    if faults and fault_end > fault_start:
        # Swarm testing (as TigerBeetle and FoundationDB do): each seed plays with a subset of
        # the fault kinds and its own spacing, so that rare combinations, and calm stretches in
        # which one fault's effect can be judged alone, are common somewhere in every sweep.
        swarm = random.Random(f"swarm:{seed}")
        kinds = [k for k in sorted(FAULT_WEIGHTS) if swarm.random() < 0.6] or [swarm.choice(sorted(FAULT_WEIGHTS))]
        weights = [FAULT_WEIGHTS[k] for k in kinds]
        gap_hi = swarm.choice((6.0, 6.0, 12.0))
        t = fault_start + rng.uniform(0.0, 1.5)
        while t < fault_end:
            kind = rng.choices(kinds, weights)[0]
            f = _fault(rng, kind, t, n, fault_end)
            schedule.append(f)
            t += rng.uniform(0.3, gap_hi)
    mix = dict(DEFAULT_MIX)
    for k in mix:
        mix[k] = round(mix[k] * rng.uniform(0.5, 1.5), 3)
    lo = rng.choice((0.1, 0.3, 1.0))
    clients = rng.choice((2, 3, 3, 4))
    think_ms = rng.choice((50.0, 100.0, 200.0))
    fifo_groups = rng.choice((1, 2, 3))
    base_delay_ms = (lo, lo * rng.choice((2.0, 5.0, 10.0)))
    log_limit_bytes = rng.choice((64 * 1024 * 1024, 64 * 1024, 8 * 1024))
    chunk_records = rng.choice((200, 8, 1))
    forward = rng.random() < 0.7
    # Drawn after everything above, so that adding them left every earlier draw of a seed as it was.
    mix["send_batch"] = round(2 * rng.uniform(0.5, 1.5), 3)
    throttle_lag_ms = rng.choice((300, 1_000, 5_000))
    throttle_lag_batches = rng.choice((30, 10_000))
    queue_policy = rng.choice(POLICIES[POLICIES.index(pol):]) if rng.random() < 0.3 else None
    # The journal, from a generator of its own: a seed without one draws what it always drew.
    jr = random.Random(f"journal:{seed}")
    on = jr.random() < 0.5
    pol_fsync = jr.choices(FSYNC_POLICIES, (7, 2, 1))[0]
    jextra: dict[str, Any] = {}
    journal_on = on if journal is None else journal
    if journal_on:
        fs = pol_fsync if fsync is None else fsync
        if fs not in FSYNC_POLICIES:
            raise ValueError(f"unknown fsync policy {fs!r}")
        lo = jr.choice((0.2, 0.5, 1.0))
        jextra = dict(journal=True, fsync=fs, fsync_interval_ms=jr.choice((20, 100, 500)),
                      fsync_ms=(lo, lo * jr.choice((2.0, 5.0, 10.0))),
                      snapshot_min_bytes=jr.choice((4 * 1024, 32 * 1024, 64 * 1024 * 1024)),
                      segment_bytes=jr.choice((8 * 1024, 64 * 1024, 64 * 1024 * 1024)))
        if faults and fault_end > fault_start + 1.0 and jr.random() < 0.7:
            for _ in range(jr.choice((1, 1, 2))):
                at = round(jr.uniform(fault_start, fault_end - 1.0), 3)
                schedule.append(Fault(at, "crash_all", round(jr.uniform(0.3, 4.0), 3), "",
                                      {"stagger_ms": jr.choice((0, 200, 1000, 3000)),
                                       "busy": jr.random() < 0.6}))
            schedule.sort(key=lambda f: f.at)
    # The master's gather ([replication] gather-ms: 2 ships), in half the seeds, from a generator
    # of its own: the other half batches as without it.
    gather_ms = 2 if random.Random(f"gather:{seed}").random() < 0.5 else 0
    # The rare paths, from a generator of their own (as the journal's).
    rr = random.Random(f"rare:{seed}")
    drawn = tuple(k for k in ("busy", "chain", "tail") if rr.random() < RARE_PROBABILITY[k])
    # The paths added later each draw from a generator of their own, so that every seed kept
    # the draws above; each generator goes on to draw its path's faults below.
    later = {k: random.Random(f"{k}:{seed}") for k in ("lease", "amnesia", "fork", "deaf", "race", "handoff", "wiped", "hung",
                                                        "replay", "relink", "gc", "comeback", "turn")}
    for k, g in later.items():
        if g.random() < RARE_PROBABILITY[k]:
            drawn = tuple(sorted(drawn + (k,)))
    lr, ar, fr, dr, qr, hr, wr, ur = (later[k] for k in ("lease", "amnesia", "fork", "deaf", "race", "handoff", "wiped",
                                                         "hung"))
    pr, kr, gr, cr, tr = later["replay"], later["relink"], later["gc"], later["comeback"], later["turn"]
    plays = drawn if rare is None else tuple(sorted(rare))
    if n_groups > 1:
        plays = ()
    if any(k not in RARE_PROBABILITY for k in plays):
        raise ValueError(f"unknown rare paths {plays} (expected some of {sorted(RARE_PROBABILITY)})")
    transfer_window = 8
    window = fault_end - fault_start
    plays = tuple(k for k in plays if faults and window > 2.0 and (
        k == "busy" or window >= {"lease": LEASE_MIN_WINDOW, "deaf": LEASE_MIN_WINDOW, "fork": FORK_MIN_WINDOW,
                                  "handoff": LEASE_MIN_WINDOW, "wiped": LEASE_MIN_WINDOW,
                                  "hung": FORK_MIN_WINDOW, "replay": LEASE_MIN_WINDOW,
                                  "relink": FORK_MIN_WINDOW, "gc": LEASE_MIN_WINDOW,
                                  "comeback": FORK_MIN_WINDOW, "turn": LEASE_MIN_WINDOW}.get(k, CHAIN_MIN_WINDOW)))
    plays = tuple(k for k in plays if k != "amnesia" or (journal is not False and fsync in (None, "interval", "never")))
    plays = tuple(k for k in plays if k != "race" or (journal is not False and fsync in (None, "always")
                                                      and "amnesia" not in plays))
    plays = tuple(k for k in plays if k != "hung" or (journal is not False and fsync in (None, "always")
                                                      and "amnesia" not in plays))
    if plays:
        if "relink" in plays:
            schedule.append(_relink(kr, fault_start, fault_end))
            log_limit_bytes = 64 * 1024 * 1024     # "handoff" and "busy" (below) may shrink it again
        if "comeback" in plays:
            schedule.append(_comeback(cr, fault_start, fault_end))
            log_limit_bytes = 64 * 1024 * 1024     # as for "relink"
        if "lease" in plays:
            schedule.append(_lease(lr, fault_start, fault_end))
        if "fork" in plays:
            schedule.append(_fork(fr, fault_start, fault_end))
        if "deaf" in plays:
            schedule.append(_deaf(dr, fault_start, fault_end, n))
        if "turn" in plays:
            schedule.append(_turn(tr, fault_start, fault_end))
            log_limit_bytes = min(log_limit_bytes, 4 * 1024)   # a replica down for a second falls behind it
            chunk_records = 200     # a small state is read, and its last chunk built, in one turn
        if "handoff" in plays:
            schedule.append(_handoff(hr, fault_start, fault_end))
            log_limit_bytes = min(log_limit_bytes, 8 * 1024)   # a replica down for a second falls behind it
            # a transfer of many round trips, during which the master goes on writing
            chunk_records, transfer_window = hr.choice((1, 2)), 1
        if "wiped" in plays:
            schedule.append(_wiped(wr, fault_start, fault_end))
        if "replay" in plays:
            schedule.append(_replay(pr, fault_start, fault_end))
        if "gc" in plays:
            schedule.append(_gc(gr, fault_start, fault_end))
        if "race" in plays:
            if not jextra or jextra.get("fsync") != "always":
                lo = qr.choice((0.2, 0.5, 1.0))
                jextra = dict(journal=True, fsync="always", fsync_interval_ms=100, fsync_ms=(lo, lo * qr.choice((2.0, 5.0, 10.0))),
                              snapshot_min_bytes=qr.choice((4 * 1024, 64 * 1024 * 1024)),
                              segment_bytes=qr.choice((8 * 1024, 64 * 1024 * 1024)))
            for _ in range(qr.choice((1, 2))):
                at = round(qr.uniform(fault_start + window / 3, max(fault_start + window / 3, fault_end - 4.0)), 3)
                schedule.append(Fault(at, "race", round(qr.uniform(0.3, 2.0), 3), "",
                                      {"race": qr.choice(("master", "master", "replica")), "wait_s": 3.0,
                                       "stagger_ms": qr.choice((1000, 3000)),
                                       "after_us": qr.choice((0, 500, 2000)), "slow_ms": qr.choice((5, 20))}))
        if "hung" in plays:
            if not jextra or jextra.get("fsync") != "always":
                lo = ur.choice((0.2, 0.5, 1.0))
                jextra = dict(journal=True, fsync="always", fsync_interval_ms=100, fsync_ms=(lo, lo * ur.choice((2.0, 5.0))),
                              snapshot_min_bytes=ur.choice((4 * 1024, 64 * 1024 * 1024)),
                              segment_bytes=ur.choice((8 * 1024, 64 * 1024 * 1024)))
            schedule.append(_hung(ur, fault_start, fault_end))
        if "amnesia" in plays:
            lo = ar.choice((0.2, 0.5, 1.0))
            jextra = dict(journal=True, fsync=fsync or ar.choice(("interval", "never")),
                          fsync_interval_ms=ar.choice((100, 500)), fsync_ms=(lo, lo * 5),
                          snapshot_min_bytes=4 * 1024, segment_bytes=ar.choice((8 * 1024, 64 * 1024)))
            for _ in range(ar.choice((1, 2))):
                # not in the first third: under `never` a cut before the first compaction snapshot
                # loses the queues themselves, and every later send is refused (NonExistentQueue)
                at = round(ar.uniform(fault_start + window / 3, fault_end - 1.0), 3)
                schedule.append(Fault(at, "crash_all", round(ar.uniform(0.3, 4.0), 3), "",
                                      {"stagger_ms": ar.choice((0, 200, 1000, 3000)), "busy": ar.random() < 0.6}))
        for k in plays:
            if k in ("tail", "chain"):
                schedule.append(_chain(rr, k, fault_start, fault_end, n, pol))
        if "tail" in plays:
            # every client writes into the tail: none waits on a queue of a stricter policy
            queue_policy = None
        if "busy" in plays:
            for m in ("receive", "receive_fifo", "delete"):
                mix[m] = round(mix[m] * 0.25, 3)
            chunk_records = rr.choice((1, 2))
            transfer_window = rr.choice((1, 2))
            log_limit_bytes = min(log_limit_bytes, 8 * 1024)
            names = [f"n{i + 1}" for i in range(n)]
            # half the time, frames are lost from the first restart to the end of the fault
            # window, and the transfer window is 4 (from a generator of its own, so the draws
            # above are as they were): a chunk lost inside the window is followed by the next,
            # out of order (the decision point transfer.chunk_order, cluster/decisions.py)
            br = random.Random(f"busy-loss:{seed}")
            lossy = br.random() < 0.5
            drop = br.choice((0.05, 0.1))
            for i in range(rr.choice((1, 2))):
                at = round(rr.uniform(fault_start + (fault_end - fault_start) / 2, fault_end - 1.0), 3)
                down = round(rr.uniform(0.3, 2.0), 3)
                schedule.append(Fault(at, "crash", down, rr.choice(names)))
                if lossy and i == 0 and fault_end - (at + down) >= 0.2:
                    transfer_window = 4
                    schedule.append(Fault(round(at + down, 3), "lossy", round(fault_end - (at + down), 3), "",
                                          {"drop": drop}))
        schedule.sort(key=lambda f: f.at)
    if jextra:
        # compaction read over many steps, in half the journaled seeds (a generator of its own)
        sr = random.Random(f"step:{seed}")
        if sr.random() < 0.5:
            jextra["snapshot_step"] = (1, sr.choice((1, 4, 16)))
    return Scenario(
        seed=seed, nodes=n, policy=pol, duration=duration, fault_start=fault_start, fault_end=fault_end,
        faults=tuple(schedule), clients=clients, think_ms=think_ms, mix=mix, fifo_groups=fifo_groups,
        base_delay_ms=base_delay_ms, log_limit_bytes=log_limit_bytes, chunk_records=chunk_records,
        bugs=tuple(sorted(bugs)), crash_policy=crash_policy, forward=forward,
        throttle_lag_ms=throttle_lag_ms, throttle_lag_batches=throttle_lag_batches, queue_policy=queue_policy,
        transfer_window=transfer_window, gather_ms=gather_ms, rare=plays, groups=n_groups, **jextra)


def _chain(rng: random.Random, kind: str, lo: float, hi: float, n: int, policy: str) -> Fault:
    """Quick successive failovers (see RARE_PROBABILITY): ``steps`` isolations of the master of
    the moment, ``gap_s`` apart (more than a failover takes, so each builds an epoch), each
    after ``lead_s`` with the master's stream cut (0: none); the last is healed after ``hold_s``.
    ``keep_one``: one replica's stream stays up during a lead (policy `one` then still commits)."""
    steps = rng.choice((2, 3)) if kind == "tail" else rng.choice((3, 3, 4))
    lead = [round(rng.uniform(1.5, 5.0), 3) if (kind == "tail" and i == 0) else
            rng.choice((0.0, 0.0, round(rng.uniform(0.2, 1.0), 3))) for i in range(steps)]
    # a deposed tail is longer than the next epoch's log only if the next master serves briefly
    gaps = [round(rng.uniform(0.5, 1.5) if kind == "tail" else rng.uniform(1.0, 2.5), 3) for _ in range(steps - 1)]
    hold = round(rng.uniform(0.5, 3.0), 3)
    # it starts early enough to end in the fault window, a failover (~1 s) per step included
    length = sum(lead) + sum(gaps) + steps * 1.0 + hold
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "chain", round(sum(lead) + sum(gaps) + hold, 3), "master",
                 {"kind": kind, "lead_s": lead, "gap_s": gaps, "hold_s": hold, "keep_one": policy == "one"})


def _fork(rng: random.Random, lo: float, hi: float) -> Fault:
    """An older epoch's longer tail (see RARE_PROBABILITY): ``steps`` forks, ``gap_s`` apart; in
    each the master's stream is cut for ``lead_s``, then it is isolated; the next master is
    isolated ``settle_ms`` after its first batch of its epoch committed, and the first one healed;
    the second is healed ``hold_s`` later."""
    steps = rng.choice((1, 1, 2))
    leads = [round(rng.uniform(1.5, 4.0), 3) for _ in range(steps)]
    settle = [rng.choice((0, 1, 5, 20)) for _ in range(steps)]
    holds = [round(rng.uniform(0.5, 2.5), 3) for _ in range(steps)]
    gaps = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps - 1)]
    length = sum(leads) + sum(holds) + sum(gaps) + steps * 3.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "fork", round(length, 3), "master",
                 {"lead_s": leads, "settle_ms": settle, "hold_s": holds, "gap_s": gaps})


def _handoff(rng: random.Random, lo: float, hi: float) -> Fault:
    """A master lost right after a transfer (see RARE_PROBABILITY): ``steps`` of them, ``gap_s``
    apart; in each a replica (picked by the world) is down for ``down_s``, and the master that
    sends it a transfer is isolated ``settle_ms`` after the joiner took it, for ``hold_s``; a
    step gives up after ``wait_s`` without a transfer."""
    steps = rng.choice((1, 2))
    downs = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps)]
    marks = [rng.choice(("slow", "end")) for _ in range(steps)]
    slow = [rng.choice((100, 300, 600)) for _ in range(steps)]
    settle = [rng.choice((0, 5, 50)) for _ in range(steps)]
    holds = [round(rng.uniform(0.5, 2.0), 3) for _ in range(steps)]
    gaps = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps - 1)]
    length = sum(downs) + sum(holds) + sum(gaps) + steps * 2.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "handoff", round(length, 3), "master",
                 {"down_s": downs, "mark": marks, "slow_ms": slow, "settle_ms": settle, "hold_s": holds, "gap_s": gaps,
                  "wait_s": 4.0, "pick": rng.random()})


def _wiped(rng: random.Random, lo: float, hi: float) -> Fault:
    """A master lost while the members it positioned after their data was lost have not caught
    up (see RARE_PROBABILITY): ``steps`` of them, ``gap_s`` apart; in each the master's stream to
    all but the keepers (picked by the world) is cut for ``lead_s``, the keepers are down for
    ``down_s`` and come back wiped, and once the master has positioned them all it is isolated
    ``settle_ms`` later for ``hold_s``; a step gives up after ``wait_s`` without that."""
    steps = rng.choice((1, 2))
    leads = [round(rng.uniform(0.5, 2.0), 3) for _ in range(steps)]
    downs = [round(rng.uniform(0.3, 1.5), 3) for _ in range(steps)]
    # the keepers' catch-up is slowed by this much a hop: the isolation comes before it
    slow = [rng.choice((20, 100, 300)) for _ in range(steps)]
    settle = [rng.choice((0, 0, 2, 10)) for _ in range(steps)]
    holds = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps)]
    gaps = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps - 1)]
    length = sum(leads) + sum(downs) + sum(holds) + sum(gaps) + steps * 1.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "wiped", round(length, 3), "master",
                 {"lead_s": leads, "down_s": downs, "slow_ms": slow, "settle_ms": settle, "hold_s": holds,
                  "gap_s": gaps, "wait_s": 3.0, "pick": rng.random()})


def _hung(rng: random.Random, lo: float, hi: float) -> Fault:
    """An fsync hung across two master changes (see RARE_PROBABILITY): one step; each of its
    stages waits at most ``wait_s``."""
    lead = round(rng.uniform(3.0, 6.0), 3)
    length = lead + 8.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "hung", round(length, 3), "master",
                 {"lead_s": lead, "hold_s": round(rng.uniform(1.0, 2.5), 3), "wait_s": 3.0,
                  "slow_ms": rng.choice((5, 20)), "cut_after_us": rng.choice((1_000, 2_000)),
                  "down_s": round(rng.uniform(0.3, 2.0), 3), "stagger_ms": rng.choice((0, 200, 1000)),
                  "pick": rng.random()})


def _relink(rng: random.Random, lo: float, hi: float) -> Fault:
    """A divergent member's stream link lost during its transfer (see RARE_PROBABILITY):
    ``steps`` of them, ``gap_s`` apart; each stage waits at most ``wait_s``."""
    steps = rng.choice((1, 2))
    leads = [round(rng.uniform(1.0, 2.5), 3) for _ in range(steps)]
    # past the stream's connection timeout (1 s: Timing.connection_timeout)
    downs = [rng.choice((1.2, 1.5, 2.0)) for _ in range(steps)]
    # after the reconnection, time for what the master sent then to arrive (the isolation loses
    # what is still on its way)
    settle = [rng.choice((10, 30, 100)) for _ in range(steps)]
    holds = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps)]
    gaps = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps - 1)]
    length = sum(leads) + sum(downs) + sum(holds) + sum(gaps) + steps * 2.0
    # early: the log still holds every entry from seq 1
    at = round(rng.uniform(lo, max(lo, min(lo + 2.0, hi - length))), 3)
    return Fault(at, "relink", round(length, 3), "master",
                 {"lead_s": leads, "down_s": downs, "settle_ms": settle, "hold_s": holds, "gap_s": gaps,
                  "wait_s": 3.0})


def _replay(rng: random.Random, lo: float, hi: float) -> Fault:
    """Forwarded requests delivered again after a reconnection (see RARE_PROBABILITY):
    ``steps`` of them, ``gap_s`` apart; in each the world waits (at most ``wait_s``) for a
    forwarded receive whose visibility timeout is shorter than ``stall_s``, then stalls the
    forwarder's stream connection to the master for ``stall_s``; on reconnection the forwarder
    sends again what it sent since ``back_ms`` before that receive."""
    steps = rng.choice((3, 4, 5, 6))
    # longer than a receive's visibility timeout of 1 s, and short enough that the requests
    # queued meanwhile are answered within a client's 2-second timeout
    stalls = [rng.choice((1.1, 1.3, 1.5)) for _ in range(steps)]
    back = [rng.choice((0, 20, 200)) for _ in range(steps)]
    gaps = [round(rng.uniform(0.5, 2.0), 3) for _ in range(steps - 1)]
    length = sum(stalls) + sum(gaps) + steps * 1.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "replay", round(length, 3), "master",
                 {"stall_s": stalls, "back_ms": back, "gap_s": gaps, "wait_s": 10.0})


def _deaf(rng: random.Random, lo: float, hi: float, n: int) -> Fault:
    """A minority of followers deaf to the master (see RARE_PROBABILITY): ``steps`` of them,
    ``gap_s`` apart, each cutting the master's links to ``deaf`` followers (picked by the world
    among the master of the moment's) one way for ``hold_s``."""
    steps = rng.choice((3, 4, 5, 6))
    # short: a deaf node's Raft log is still as up to date as the leader's when it hears again
    # (the leader's next view leaves it behind), and its election timer (0.2-0.4 s) has run out,
    # so its pre-vote may race the leader's first heartbeat after the heal
    holds = [round(rng.uniform(0.5, 1.5), 3) for _ in range(steps)]
    gaps = [round(rng.uniform(0.3, 1.5), 3) for _ in range(steps - 1)]
    # a minority, the largest one half of the time: with 5 nodes two deaf ones are a majority
    # together with the leader
    deaf = [rng.choice((1, (n - 1) // 2)) for _ in range(steps)]
    length = sum(holds) + sum(gaps)
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "deaf", round(length, 3), "master",
                 {"hold_s": holds, "gap_s": gaps, "deaf": deaf, "pick": rng.random()})


def _lease(rng: random.Random, lo: float, hi: float) -> Fault:
    """Votes timed inside the master's lease (see RARE_PROBABILITY): ``steps`` of them, ``gap_s``
    apart; in each the candidate's vote requests are slowed by ``vote_delay_ms`` and it stays cut
    off from the master (``shape``: one way, or both ways as a bridge) for ``hold_s``."""
    steps = rng.choice((2, 3, 4, 5))
    gaps = [round(rng.uniform(0.8, 2.5), 3) for _ in range(steps - 1)]
    holds = [round(rng.uniform(0.3, 1.5), 3) for _ in range(steps)]
    # 0: the vote request races the master's next heartbeat; more: the heartbeat surely wins,
    # and up to G (0.18 s) later
    delays = [rng.choice((0, 0, 20, 60, 150)) for _ in range(steps)]
    shapes = [rng.choice(("one_way", "bridge")) for _ in range(steps)]
    length = sum(gaps) + sum(holds) + steps * 0.5
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "lease", round(length, 3), "master",
                 {"gap_s": gaps, "hold_s": holds, "vote_delay_ms": delays, "shape": shapes})


def _turn(rng: random.Random, lo: float, hi: float) -> Fault:
    """A transfer's last chunk built in the turn of a client's operation (see
    RARE_PROBABILITY): ``steps`` of them, ``gap_s`` apart, each a "handoff" step (its
    params) with the joiner's frames aligned to the master's operations."""
    steps = rng.choice((1, 2, 2))
    downs = [round(rng.uniform(1.5, 3.0), 3) for _ in range(steps)]
    settle = [rng.choice((0, 5, 50)) for _ in range(steps)]
    holds = [round(rng.uniform(0.5, 2.0), 3) for _ in range(steps)]
    gaps = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps - 1)]
    length = sum(downs) + sum(holds) + sum(gaps) + steps * 2.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "turn", round(length, 3), "master",
                 {"down_s": downs, "settle_ms": settle, "hold_s": holds, "gap_s": gaps, "wait_s": 4.0,
                  "cap_ms": rng.choice((20, 50)), "pick": rng.random()})


def _comeback(rng: random.Random, lo: float, hi: float) -> Fault:
    """A deposed master made master again over its divergent tail (see RARE_PROBABILITY):
    ``steps`` of them, ``gap_s`` apart; each stage waits at most ``wait_s``."""
    steps = rng.choice((1, 2, 2))
    leads = [round(rng.uniform(0.5, 1.5), 3) for _ in range(steps)]
    settle = [rng.choice((0, 50, 200)) for _ in range(steps)]
    gaps = [round(rng.uniform(1.0, 3.0), 3) for _ in range(steps - 1)]
    length = sum(leads) + sum(gaps) + steps * 6.0
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "comeback", round(length, 3), "master",
                 {"lead_s": leads, "settle_ms": settle, "gap_s": gaps, "wait_s": 3.0})


def _gc(rng: random.Random, lo: float, hi: float) -> Fault:
    """A master's loop stalled across a vote inside its lease (see RARE_PROBABILITY): ``steps``
    of them, ``gap_s`` apart."""
    steps = rng.choice((2, 3, 4))
    gaps = [round(rng.uniform(0.8, 2.5), 3) for _ in range(steps - 1)]
    # longer than the master's next heartbeat takes to reach a follower and its ack to come back
    # (a heartbeat is sent every 50-60 ms), shorter than the vote guard (0.18 s) after it
    vote_ms = [rng.choice((80, 100, 120)) for _ in range(steps)]
    # how long after the new master's activation the stalled loop runs again: a loop that
    # still counts itself active then overlaps it (the lease is 0.15 s)
    after_ms = [rng.choice((1, 3, 10)) for _ in range(steps)]
    max_s = [rng.choice((0.3, 0.5, 0.8)) for _ in range(steps)]
    length = sum(gaps) + steps * 1.5
    at = round(rng.uniform(lo, max(lo, hi - length)), 3)
    return Fault(at, "gc", round(length, 3), "master",
                 {"gap_s": gaps, "vote_ms": vote_ms, "after_ms": after_ms, "max_s": max_s, "pick": rng.random()})


def _fault(rng: random.Random, kind: str, at: float, n: int, fault_end: float) -> Fault:
    names = [f"n{i + 1}" for i in range(n)]
    dur = lambda lo, hi: round(min(rng.uniform(lo, hi), max(0.05, fault_end - at)), 3)  # noqa: E731
    at = round(at, 3)
    if kind in ("crash", "crash_master"):
        return Fault(at, "crash", dur(0.2, 6.0), "master" if kind == "crash_master" else rng.choice(names))
    if kind in ("pause", "pause_master"):
        return Fault(at, "pause", dur(0.05, 3.0), "master" if kind == "pause_master" else rng.choice(names))
    if kind == "isolate":
        return Fault(at, "isolate", dur(0.3, 8.0), "master" if rng.random() < 0.5 else rng.choice(names))
    if kind == "partition":
        side = rng.sample(names, rng.randint(1, n - 1))
        return Fault(at, "partition", dur(0.3, 8.0), "", {"side": sorted(side)})
    if kind == "bridge":
        shuffled = rng.sample(names, n)
        bridge = shuffled[0]
        rest = shuffled[1:]
        half = len(rest) // 2
        return Fault(at, "bridge", dur(0.5, 8.0), bridge, {"a": sorted(rest[:half]), "b": sorted(rest[half:])})
    if kind == "one_way":
        links = []
        for _ in range(rng.randint(1, n)):
            a, b = rng.sample(names, 2)
            links.append([a, b])
        return Fault(at, "one_way", dur(0.3, 6.0), "", {"links": sorted(links)})
    if kind == "flap":
        a, b = rng.sample(names, 2)
        return Fault(at, "flap", dur(1.0, 6.0), "", {"a": a, "b": b, "period_ms": rng.choice((50, 150, 400))})
    if kind == "delay":
        k = rng.randint(1, n * (n - 1))
        pairs = [[a, b] for a in names for b in names if a != b]
        links = sorted(rng.sample(pairs, k))
        return Fault(at, "delay", dur(0.5, 6.0), "", {"links": links, "extra_ms": rng.choice((20, 100, 400, 1500))})
    if kind == "slow_master_fails":
        return Fault(at, "slow_master_fails", dur(0.5, 4.0), "master",
                     # one replica a little behind, another far behind: whichever takes over, the
                     # other may hold (or receive late) batches the new master lacks
                     {"extra_ms": rng.sample([rng.choice((0, 300, 1000))] + [rng.choice((1000, 2000, 3000))
                                                                            for _ in range(n - 2)], n - 1),
                      "after_ms": rng.choice((50, 200, 600, 1500)), "then": rng.choice(("crash", "pause")),
                      "down_s": round(rng.uniform(0.5, 5.0), 3)})
    if kind == "stall":
        return Fault(at, "stall", dur(0.05, 1.5), "master" if rng.random() < 0.5 else rng.choice(names))
    if kind == "lossy":
        return Fault(at, "lossy", dur(0.5, 6.0), "", {"drop": rng.choice((0.02, 0.1, 0.3))})
    if kind == "dup":
        return Fault(at, "dup", dur(0.5, 6.0), "", {"dup": rng.choice((0.05, 0.2))})
    raise ValueError(kind)
