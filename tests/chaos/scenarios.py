"""The chaos scenarios: one fault story each (``SCENARIOS``, what ``make chaos`` draws from), and
several in a row on one cluster, healing in between (``COMBOS``; ``SHORT_SUITE`` is what
``make test`` runs).

A scenario is a function of a ``Run`` (tests/chaos/harness.py): it draws its timings, victims and
cut modes, injects its faults, bounded in time, and states what it is about as rules on the
history (an isolated minority never answers with success, flow control throttles only for a
reachable replica, a reset transfer resumes, ...). tests/chaos/runner.py sets the cluster and
its clients up around it, heals, drains and judges.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from cluster.checker import History
from elasticmq_py.testing.cluster import Cluster
from tests.chaos.harness import CHAOS_TIMING, DETECT_S, QUEUES, Run, Scenario, heal, others

SCENARIOS: dict[str, Scenario] = {}   # one fault story each: what `make chaos` draws from
COMBOS: dict[str, Scenario] = {}      # several stories in a row on one cluster (the short suite)


def scenario(name: str, nodes: int = 3, combo: bool = False,
             **kw: Any) -> Callable[[Callable[["Run"], None]], Callable[["Run"], None]]:
    def register(body: Callable[["Run"], None]) -> Callable[["Run"], None]:
        (COMBOS if combo else SCENARIOS)[name] = Scenario(
            name, nodes, body, (body.__doc__ or "").strip().splitlines()[0], **kw)
        return body
    return register


# -- the scenarios ----------------------------------------------------------------------------------

@scenario("isolate-master")
def isolate_master(run: Run) -> None:
    """The master is cut off from both replicas (2/1): the majority elects, the minority never succeeds."""
    c, m = run.c, run.master
    mode = run.cut_mode("drop")
    hold = run.draw("hold_s", 4, (3, 12))
    run.pinned_client([m])
    run.phase("fault")
    c.isolate(m, mode)
    cut = run.note(m, "partition", f"isolated from every peer ({mode})")
    run.never_succeeds([m], cut)
    run.wait_master(others(run, m), since=cut)
    run.hold(cut + hold - time.time())


@scenario("isolate-replica")
def isolate_replica(run: Run) -> None:
    """A replica is cut off: the master keeps serving with the other one."""
    c, m = run.c, run.master
    r = run.choose("victim", others(run, m))
    mode = run.cut_mode("refuse")
    hold = run.draw("hold_s", 4, (3, 12))
    run.pinned_client([r])
    run.phase("fault")
    c.isolate(r, mode)
    cut = run.note(r, "partition", f"isolated from every peer ({mode})")
    run.never_succeeds([r], cut)
    # the master and the other replica are a majority all along: no reason to stop serving
    run.keeps_serving(cut + 1.0)
    run.keeps_office(m, cut, keep=others(run, r))
    run.hold(cut + hold - time.time())


@scenario("split-3-2", nodes=5)
def split_3_2(run: Run) -> None:
    """Five nodes split 3/2 with the master in the minority: the three elect, the two never succeed."""
    c, m = run.c, run.master
    mate = run.choose("minority_mate", others(run, m))
    minority = sorted([m, mate])
    majority = others(run, *minority)
    mode = run.cut_mode("refuse")
    hold = run.draw("hold_s", 4, (3, 12))
    run.pinned_client(minority)
    run.phase("fault")
    c.partition([minority, majority], mode)
    cut = run.note("", "partition", f"{minority} | {majority} ({mode})")
    run.never_succeeds(minority, cut)
    run.wait_master(majority, since=cut)
    run.hold(cut + hold - time.time())


@scenario("bridge")
def bridge(run: Run) -> None:
    """A bridge: n1-n2 and n2-n3 up, n1-n3 cut (the master is one end): a majority keeps serving."""
    c, m = run.c, run.master
    # The short schedule cuts the master from one replica; the long one may cut the two replicas.
    ends = run.choose("ends", [sorted([m, x]) for x in others(run, m)] + [others(run, m)],
                      short=sorted([m, others(run, m)[0]]))
    middle = others(run, *ends)[0]
    mode = run.cut_mode("refuse")
    hold = run.draw("hold_s", 5, (4, 12))
    run.phase("fault")
    c.bridge(ends[0], middle, ends[1], mode)
    cut = run.note("", "partition", f"bridge {ends[0]} - {middle} - {ends[1]}, {ends[0]}-{ends[1]} cut ({mode})")
    # whoever ends up master, the middle node gives it a majority: after the dust settles, it serves
    run.keeps_serving(cut + hold / 2)
    # and it is the master of the moment: the cut-off end's pre-vote finds no majority (the middle
    # still hears the master), so the cut and its heal depose nobody; with groups, nor do the
    # groups of the members the master still hears (an end it cannot hear may lose its groups)
    run.keeps_office(m, cut, keep=others(run, next(e for e in ends if e != m)) if m in ends else run.names)
    run.hold(cut + hold - time.time())


def _ring_plan(run: Run, hold_s: float, hold_range: tuple[float, float]) -> tuple[list[str], str, float]:
    """A ring's node order (shuffled on long schedules), cut mode and hold, drawn in that order."""
    order = list(run.names)
    if run.long:
        run.rng.shuffle(order)
    run.params[run.prefix + "order"] = order
    return order, run.cut_mode("refuse"), run.draw("hold_s", hold_s, hold_range)


@scenario("ring", nodes=5)
def ring(run: Run) -> None:
    """Five nodes in a majorities ring: each sees only its two neighbours (a majority, never the same one)."""
    c = run.c
    order, mode, hold = _ring_plan(run, 5, (4, 12))
    run.phase("fault")
    c.ring(order, mode)
    run.note("", "partition", f"majorities ring {order} ({mode})")
    run.hold(hold)


@scenario("one-way-ring")
def one_way_ring(run: Run) -> None:
    """A ring of one-way cuts (n1->n2, n2->n3, n3->n1): no pair can complete a round trip, so nobody may succeed."""
    c = run.c
    order, mode, hold = _ring_plan(run, 4, (3, 10))
    run.phase("fault")
    c.one_way_ring(order, mode)
    cut = run.note("", "partition", f"one-way ring {order} ({mode})")
    run.never_succeeds(list(run.names), cut)
    run.hold(cut + hold - time.time())


@scenario("flapping")
def flapping(run: Run) -> None:
    """Partitions that change every 1-3 s: isolations, bridges, one-way cuts, heals."""
    c = run.c
    total = run.draw("total_s", 8, (30, 30))
    end = time.time() + total
    changes = []
    run.phase("fault")
    while time.time() < end:
        c.heal_all()
        run.healed(time.time())
        kind = run.rng.choice(["isolate", "isolate", "bridge", "one-way", "heal"])
        mode = run.rng.choice(["refuse", "drop"])
        if kind == "isolate":
            victim = run.rng.choice(run.names)
            c.isolate(victim, mode)
            run.never_succeeds([victim], time.time())
            what = f"isolate {victim}"
        elif kind == "bridge":
            a, b = run.rng.sample(run.names, 2)
            c.cut(a, b, mode, both=True)
            what = f"cut {a}<->{b}"
        elif kind == "one-way":
            a, b = run.rng.sample(run.names, 2)
            c.cut(a, b, mode)
            what = f"cut {a}->{b}"
        else:
            what = "heal"
        run.note("", "partition" if kind != "heal" else "heal", f"{what} ({mode})")
        changes.append(f"{what} ({mode})")
        run.hold(min(run.rng.uniform(1, 3), end - time.time()))
    run.observe(changes=changes)


@scenario("kill-master")
def kill_master(run: Run) -> None:
    """kill -9 of the master under load; later it restarts (from its data-dir, or empty) and rejoins."""
    m = run.master
    run.hold(run.draw("before_s", 1, (0.5, 4)))
    run.phase("fault")
    t = run.kill(m)
    run.wait_master(others(run, m), since=t)
    run.hold(t + run.draw("down_s", 3, (2, 10)) - time.time())
    run.restart(m)


@scenario("kill-all", fsync="always")
def kill_all(run: Run) -> None:
    """kill -9 of every node under load, then all restart from their data-dirs: nothing acknowledged is lost."""
    run.hold(run.draw("before_s", 1, (0.5, 4)))
    run.phase("fault")
    order = list(run.names)
    run.rng.shuffle(order)
    for n in order:
        run.kill(n)
    run.hold(run.draw("down_s", 1, (0.5, 5)))
    run.rng.shuffle(order)
    t = time.time()
    for n in order:
        run.restart(n)
    run.wait_master(run.names, since=t, key="restart_to_master_s")
    run.observe(kill_order=order)


@scenario("pause-master")
def pause_master(run: Run) -> None:
    """SIGSTOP of the master past the fallback timeout, then SIGCONT: it must come back as a replica."""
    c, m = run.c, run.master
    pause = run.draw("pause_s", CHAOS_TIMING.leader_fallback + 2, (CHAOS_TIMING.leader_fallback + 0.5,
                                                                     CHAOS_TIMING.leader_fallback + 6))
    run.phase("fault")
    c.sigstop(m)
    t = run.note(m, "pause", "SIGSTOP")
    new = run.wait_master(others(run, m), since=t)
    run.hold(t + pause - time.time())
    c.sigcont(m)
    run.note(m, "resume", "SIGCONT")
    # It was deposed while paused: once it runs again it must see so, not serve (any group).
    c.wait_for(f"{m} resumes as a replica", lambda: _serves_nothing(c.status(m) or {}), 10)
    run.observe(new_master=new, old_master=m)


@scenario("restart-empty", prefill=(3000, 8000), replication={"log-limit-mb": 1})
def restart_empty(run: Run) -> None:
    """A node restarts with empty memory and rejoins by state transfer (its log is long trimmed)."""
    c, m = run.c, run.master
    victim = run.choose("victim", run.names, short=others(run, m)[0])
    run.phase("fault")
    t = run.kill(victim)
    if victim == m:
        run.wait_master(others(run, m), since=t)
    run.hold(t + run.draw("down_s", 2, (0.5, 6)) - time.time())
    r = run.restart(victim)
    lt = c.wait_for(f"{victim} received a state transfer", lambda: _transfer_after(run, victim, r), 45)
    run.observe(transfer=lt)


def _serves_nothing(st: dict[str, Any]) -> bool:
    return st.get("active") is False and not any(g["serving"] for g in st.get("groups", ()))


def _bulk_group(run: Run) -> int:
    """The group of the prefill's queue ``bulk``: a new queue goes to the least-loaded group,
    the lowest first (cluster/directory.py), and ``bulk`` comes after the workload's queues. Only
    its log is long enough to be trimmed: with groups, an empty node catches the others up from
    their streams."""
    return len(QUEUES) % run.groups


def _transfer_line(run: Run, node: str, event: str, since: float, peer: str | None = None
                   ) -> dict[str, Any] | None:
    """``node``'s first history line ``event`` of the bulk group after ``since`` (with groups
    the status reports group 0's transfers only)."""
    return next((e for e in run.c.history(node) if e["event"] == event and e["ts"] > since
                 and e.get("group", 0) == _bulk_group(run) and peer in (None, e.get("peer"))), None)


def _transfer_after(run: Run, node: str, since: float) -> dict[str, Any] | None:
    if run.groups > 1:
        return _transfer_line(run, node, "transfer_finished", since)
    st = run.c.status(node)
    lt = (st or {}).get("replication", {}).get("last_transfer")
    if lt and lt.get("direction") == "received" and (lt.get("at") or 0) > since:
        return lt
    return None


@scenario("slow-link", replication={"throttle-lag-ms": 1200, "throttle-lag-batches": 100_000},
          clients_on_master=True, receive_ratio=0.25)
def slow_link(run: Run) -> None:
    """A slow replica link (200 ms each way, a bandwidth cap): lag shows, producers are throttled; cut it: they are not.

    Under policy ``all`` the slow replica's acks pace every send instead, so the sends must get
    through slowly rather than be throttled. With groups the story is group 0's (its master, the
    clients' only endpoint, and its queue ``jobs``)."""
    c, m = run.c, run.masters[0]
    # with groups, not the master of a queue the clients use: they would wait on forwards over
    # the slow link, and send too little for the lag to build
    r = run.choose("slow_replica", [n for n in others(run, m) if n not in run.masters[:len(QUEUES)]]
                   or others(run, m))
    latency = int(run.draw("latency_ms", 200, (200, 200)))
    rate = int(run.draw("rate_kb", 8, (4, 16)))
    slow_min = run.draw("slow_s", 4, (4, 10))
    fwd, back = c.link(m, r), c.link(r, m)
    run.phase("slow")
    fwd.latency(latency)                      # both proxies (Raft, stream), both directions
    back.latency(latency)
    fwd.bandwidth(rate, stream="upstream", which="stream")   # the master's batches to r
    t_slow = run.note(r, "slow", f"{m}<->{r}: latency {latency} ms, {m}->{r} stream {rate} KB/s")
    # How fast the lag builds depends on how much the clients get through a loaded machine: the
    # slow phase lasts until the master throttles (and a little more), or 20 s.
    samples = _sample(c, m, r, t_slow + 20, lambda ss: time.time() > t_slow + slow_min
                      and any(s["throttling"] for s in ss) and time.time() > _first_throttle(ss) + 1.5)
    run.phase("cut")
    c.isolate(r, "refuse")
    t_cut = run.note(r, "partition", "slow replica cut off")
    settled = t_cut + DETECT_S + 1.5   # the master has noticed r is unreachable
    samples += _sample(c, m, r, t_cut + 20, lambda ss: time.time() > settled + 2
                       and sum(1 for s in ss if s["t"] > settled) >= 3)
    run.phase(None)
    slow = [s for s in samples if s["t"] < t_cut]
    cut = [s for s in samples if s["t"] > settled]
    run.observe(slow_replica=r, samples=len(samples), slow_phase_s=round(t_cut - t_slow, 1),
                max_lag_ms=max((s["lag_ms"] for s in slow), default=None),
                max_lag_batches=max((s["lag_batches"] for s in slow), default=None),
                throttling_seen_slow=any(s["throttling"] for s in slow),
                throttling_seen_cut=any(s["throttling"] for s in cut))
    run.expect(any(s["lag_ms"] >= latency for s in slow),
               f"the master never reported {r}'s lag (lag_ms) above the link latency: {slow[-3:]}")
    run.expect(any(s["lag_batches"] > 0 for s in slow), f"the master never reported {r} behind (lag_batches)")
    # Under `all` every send waits for the slow replica's ack: the acks themselves pace the
    # producers, so the lag stays near the link's latency and no throttling is called for
    # (`make chaos SEED=2622` plays slow-link under `all`: a lag of about 577 ms against the
    # 1,200 ms bound).
    paced = run.policy == "all"
    run.expect(paced or any(s["throttling"] for s in slow),
               "the master never throttled producers while a reachable replica lagged beyond the bound")
    run.expect(cut and not any(s["throttling"] for s in cut),
               f"the master still throttled {settled - t_cut:.1f}s after the lagging replica became unreachable")
    run.expect(cut and not any(s["connected"] for s in cut),
               f"the master still reports the cut replica {r} connected: {cut[-2:]}")

    def check(history: History) -> None:
        sends = [op for op in history.ops if op.op == "send" and op.phase != "drain"]
        thr = [op for op in sends if op.error == "RequestThrottled"]
        healed = max((e.ts for e in history.nemesis if e.action == "heal"), default=float("inf"))
        run.observe(throttled_sends={"before": sum(op.ts < t_slow for op in thr),
                                     "slow": sum(t_slow <= op.ts < t_cut for op in thr),
                                     "cut": sum(t_cut <= op.ts for op in thr)})
        before = [op for op in thr if op.ts < t_slow]
        during = [op for op in thr if t_slow <= op.ts < settled]
        after = [op for op in thr if settled < op.ts]
        run.expect(not before, f"{len(before)} sends throttled before the link was slowed")
        if paced:
            ok_slow = [op for op in sends if op.outcome == "ok" and t_slow <= op.ts < t_cut]
            run.expect(ok_slow, "no send succeeded while the slow replica paced them (policy all)")
        else:
            run.expect(during, "no producer got RequestThrottled while the replica lagged")
        run.expect(not after, f"{len(after)} sends throttled after the lagging replica had been unreachable "
                              f"for {settled - t_cut:.1f}s (flow control must not wait for it)")
        ok_cut = [op for op in sends if op.outcome == "ok" and settled < op.ts < healed]
        run.expect(ok_cut, "no send succeeded while the slow replica was cut off")
    run.checks.append(check)


def _first_throttle(samples: list[dict[str, Any]]) -> float:
    return min((s["t"] for s in samples if s["throttling"]), default=float("inf"))


def _sample(c: Cluster, master: str, replica: str, until: float,
            done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The master's view of one replica, every 0.2 s, until ``done(samples)`` or ``until``."""
    out: list[dict[str, Any]] = []
    while time.time() < until and not done(out):
        st = c.status(master)
        rep = (st or {}).get("replication") or {}
        rr = rep.get("replicas", {}).get(replica)
        if rr is not None:
            out.append({"t": time.time(), "lag_ms": rr.get("lag_ms", 0), "lag_batches": rr.get("lag_batches", 0),
                        "connected": rr.get("connected"), "throttling": bool(rep.get("throttling"))})
        elif rep.get("role") == "master":
            # dropped from the view (suspected): the master does not stream to it at all
            out.append({"t": time.time(), "lag_ms": 0, "lag_batches": 0, "connected": False, "in_view": False,
                        "throttling": bool(rep.get("throttling"))})
        time.sleep(0.2)
    return out


# The link is capped so the transfer lasts long enough to be hit in its middle, but not below
# ~2.5 MB/s: how transfers fare over slower links is not what this scenario is about (docs/testing.md,
# "Chaos tests"; tests/chaos/transfer_probe.py watches one).
@scenario("reset-transfer", prefill=(6000, 12000), replication={"log-limit-mb": 1})
def reset_transfer(run: Run) -> None:
    """reset_peer in the middle of a state transfer: the transfer resumes and the joiner converges.

    With groups the transfer watched is the bulk queue's group's, from its master."""
    c, m = run.c, run.masters[_bulk_group(run)]
    r = run.choose("joiner", others(run, m))
    rate = int(run.draw("rate_kb", 3000, (2500, 6000)))
    run.phase("fault")
    run.kill(r)
    c.link(m, r).bandwidth(rate, stream="upstream", which="stream")
    t_restart = run.restart(r)
    c.wait_for(f"{r} receiving a state transfer", lambda: _receiving(run, m, r, t_restart), 30,
               interval=0.02 if run.groups == 1 else 0.1)
    t_in = time.time()
    # well inside the transfer: a fraction of what the capped link needs for the whole state
    expected_s = run.sc.prefill[1 if run.long else 0] * 1.13 / rate
    run.hold(run.draw("reset_after_s", 0.5, (0.1, max(0.2, min(1.5, expected_s / 3)))))
    in_transfer = _receiving(run, m, r, t_restart)
    for a, b in ((m, r), (r, m)):
        c.link(a, b).reset_peer(0, which="stream")
    t_reset = run.note(r, "reset_peer", f"{m}<->{r} stream connections reset mid-transfer")
    run.hold(run.draw("reset_hold_s", 1.0, (0.3, 1.8)))
    for a, b in ((m, r), (r, m)):
        c.link(a, b).remove("reset_peer", which="stream")
    run.note(r, "heal", "reset_peer removed")
    run.expect(in_transfer, f"the transfer to {r} was over before the reset (nothing was tested)")
    lt = c.wait_for(f"{r} finished the state transfer", lambda: _transfer_after(run, r, t_restart), 60)
    c.link(m, r).remove("bandwidth", which="stream")
    run.observe(transfer=lt, transfer_seen_at=t_in, t_reset=t_reset)

    def check(history: History) -> None:
        starts = [e for e in history.node_events if e.node == m and e.event == "transfer_started"
                  and e.get("peer") == r and e.ts >= t_restart and e.get("group", 0) == _bulk_group(run)]
        finished = [e for e in history.node_events if e.node == r and e.event == "transfer_finished"
                    and e.ts >= t_restart and e.get("group", 0) == _bulk_group(run)]
        run.observe(transfer_passes=len(starts), transfers_finished=len(finished))
        run.expect(finished, f"{r} wrote no transfer_finished event after its restart")
        run.expect(len(starts) == 1, f"the master started {len(starts)} transfers to {r}: the reset one "
                                     f"did not resume")
        # A second completion of the same transfer would replace the joiner's storage with the
        # old snapshot again, below what it had acknowledged (tests/chaos/test_found_bugs.py).
        run.expect(len(finished) <= 1, f"{r} completed {len(finished)} transfers for one restart: "
                                       f"{[(e.ts, e.get('at_seq')) for e in finished]}")
    run.checks.append(check)


def _receiving(run: Run, master: str, joiner: str, since: float) -> bool:
    """``joiner`` is in the middle of a state transfer (of the bulk group's, with groups)."""
    if run.groups == 1:
        return bool((run.c.status(joiner) or {}).get("replication", {}).get("transfer_in"))
    return (_transfer_line(run, master, "transfer_started", since, peer=joiner) is not None
            and _transfer_line(run, joiner, "transfer_finished", since) is None)


# -- several stories on one cluster: the short suite of make test ---------------------------------

def _in_a_row(*bodies: Callable[[Run], None]) -> Callable[[Run], None]:
    def body(run: Run) -> None:
        for i, b in enumerate(bodies):
            name = next(n for n, sc in SCENARIOS.items() if sc.body is b)
            run.prefix = f"{name}."
            if i:
                heal(run)
                run.hold(run.draw("settle_s", 1.0, (0.5, 3.0)))
            b(run)
        run.prefix = ""
    return body


def _combo(name: str, nodes: int, *bodies: Callable[[Run], None], **kw: Any) -> None:
    body = _in_a_row(*bodies)
    body.__doc__ = "In a row on one cluster, healing in between: " + ", ".join(
        n for n, sc in SCENARIOS.items() if sc.body in bodies) + "."
    scenario(name, nodes=nodes, combo=True, **kw)(body)


_combo("partitions", 3, isolate_master, isolate_replica, bridge, one_way_ring, flapping)
_combo("partitions-5", 5, split_3_2, ring)
# journaled: the whole-cluster kill needs the data-dirs (in memory it loses everything)
_combo("process-faults", 3, kill_master, pause_master, kill_all, fsync="always")
# reset-transfer's prefill and small log: both stories need a joiner that only a transfer brings up
_combo("transfers", 3, restart_empty, reset_transfer, prefill=SCENARIOS["reset-transfer"].prefill,
       replication={"log-limit-mb": 1})

# What make test runs: every scenario, the short way, on five clusters.
SHORT_SUITE = ("partitions", "partitions-5", "process-faults", "transfers", "slow-link")
