"""Failover with queue groups: a kill -9 of one member pauses only the groups it mastered.

One 3-node in-memory cluster, ack policy ``majority``, three groups (elasticmq_py/localcluster.py),
each member mastering one, a queue in each group. Per trial:

1. every member masters one group again (the cluster settled), and the Raft leader is known;
2. light load: a producer per queue at each endpoint but the victim's, a send every ``PAUSE_S``
   over a kept-alive connection, each body new (only acknowledged sends are counted);
3. after ``BEFORE_S``, kill -9 the victim: the Raft leader in even trials, a follower (in turn)
   in odd ones; load goes on until every group has a serving master again and every producer
   has had a success after the kill, and ``AFTER_S`` more;
4. per group, the gap between the last send answered ok before the kill and the first answered
   ok after it (and each producer's own), whether the victim mastered the group, and when the
   survivors' histories say the steps happened; sends held ``HELD_S`` or more (a forward to the
   victim that was on its way as it died); the errors clients of every other group saw (the
   goal: none); every acknowledged send is received and deleted through a survivor (the goal:
   nothing lost);
5. the victim restarts and gets a group back by a handover once steady for ``rebalance-quiet``,
   which this cluster sets to ``QUIET_S`` instead of the default, so a trial takes seconds.

The goal: the victim's groups serve again in at most 0.4 s, median. The bounds on the gap are
the block's arithmetic (bench/tables.py): a follower's groups move once the Raft leader has not
heard it for ``group-suspect``; the leader's, once a follower's election timer ran out and it
won, and its first view moved them.

    python -m bench --only groups_failover [--quick]
"""

from __future__ import annotations

import http.client
import inspect
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.loadgen.sqs import AMZ_DATE, AUTH, JSON_CT
from bench.process_cpu import loadavg
from bench.replication_setup import call, create_queue, queue_url_at
from cluster.history import read_history

TRIALS, QUICK_TRIALS = 10, 4
GOAL_MEDIAN_S = 0.4
QUIET_S = 2.0        # rebalance-quiet of the bench's cluster (default 10 s; it must exceed suspect + debounce)
PAUSE_S = 0.02       # a producer's sleep after each send
BEFORE_S = 1.0       # load before the kill
AFTER_S = 0.5        # load after every producer served again
TIMEOUT_S = 3.0      # a send not answered within this is an error
HELD_S = 0.5         # a send answered this long after it was made was held (a forward to the dead master)
QUEUES = ("fo-0", "fo-1", "fo-2")   # created in turn, queue k lands in group k (the least-loaded group)


class Producer(threading.Thread):
    """Sends to one queue through one endpoint until stopped: (sent, answered, body or None, error)."""

    def __init__(self, port: int, url: str, tag: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.port, self.url, self.tag, self.stop = port, url, tag, stop
        self.sends: list[tuple[float, float, str | None, str | None]] = []

    def _send(self, conn: http.client.HTTPConnection, body: str) -> str | None:
        """None when acknowledged, else the error's name."""
        conn.request("POST", "/", json.dumps({"QueueUrl": self.url, "MessageBody": body}),
                     {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.SendMessage", "X-Amz-Date": AMZ_DATE,
                      "Authorization": AUTH, "Host": f"localhost:{self.port}"})
        r = conn.getresponse()
        data = r.read()
        if r.status == 200:
            return None
        try:
            return str(json.loads(data).get("__type", r.status)).rsplit("#", 1)[-1]
        except ValueError:
            return f"HTTP {r.status}"

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
        k = 0
        while not self.stop.is_set():
            body = f"{self.tag}-{k}"
            k += 1
            sent = time.monotonic()
            try:
                error = self._send(conn, body)
            except (OSError, http.client.HTTPException) as e:
                error = type(e).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            self.sends.append((sent, time.monotonic(), body if error is None else None, error))
            time.sleep(PAUSE_S)
        conn.close()


def _settled(c: Any, timeout: float = 60.0) -> tuple[list[str], str]:
    """Each group's master once every member masters one, and the Raft leader every member names."""
    names = sorted(n.name for n in c.plan)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if c.exited():
            raise RuntimeError(f"a member exited: {c.exited()}")
        sts = c.statuses()
        masters = c.group_masters()
        leaders = {st.leader if st else None for st in sts.values()}
        if masters and sorted(masters) == names and len(leaders) == 1 and None not in leaders:
            return masters, leaders.pop()
        time.sleep(0.1)
    raise RuntimeError(f"the groups did not spread over the members within {timeout:g} s: {c.statuses()}")


def _serving_without(c: Any, victim: str, timeout: float = 20.0) -> list[str]:
    """Each group's master once every survivor names the same ones, none the victim, each serving."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sts = {n: st for n, st in c.statuses().items() if n != victim}
        seen = {tuple(g.master for g in st.groups) for st in sts.values() if st and st.groups}
        if len(seen) == 1 and len([s for s in sts.values() if s]) == len(sts):
            masters = list(seen.pop())
            if victim not in masters and all(sts[m].groups[g].serving for g, m in enumerate(masters)):
                return masters
        time.sleep(0.05)
    raise RuntimeError(f"the victim's groups got no serving master within {timeout:g} s")


def _drain(port: int, url: str) -> set[str]:
    """Every message of the queue, received and deleted through ``port``."""
    got: set[str] = set()
    empty = 0
    while empty < 2:
        status, r = call(port, "ReceiveMessage", {"QueueUrl": url, "MaxNumberOfMessages": 10}, retry_s=10)
        if status != 200:
            raise RuntimeError(f"ReceiveMessage on :{port}: {status} {r}")
        msgs = r.get("Messages", [])
        empty = empty + 1 if not msgs else 0
        got |= {m["Body"] for m in msgs}
        if msgs:
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)]
            call(port, "DeleteMessageBatch", {"QueueUrl": url, "Entries": entries}, retry_s=10)
    return got


def _steps(c: Any, survivors: list[str], victim: str, group: int, killed_wall: float) -> dict:
    """When, after the kill, the survivors' histories say: a new Raft leader took office (only
    when the victim led), a committed view moved ``group`` off the victim, and its new master
    activated the group (seconds; None where a history has no such line)."""
    events = [(n, e) for n in survivors for e in read_history(str(c.directory / f"{n}.history.jsonl"))
              if e["ts"] >= killed_wall]

    def first(pick) -> float | None:
        ts = [e["ts"] for n, e in events if pick(n, e)]
        return round(min(ts) - killed_wall, 4) if ts else None

    def moves(e: dict) -> bool:
        return e["event"] == "view" and any(x["group"] == group and x["master"] != victim
                                            for x in e.get("groups", ()))

    return {"elected_s": first(lambda n, e: e["event"] == "role" and e.get("role") == "leader"),
            "view_s": first(lambda n, e: moves(e)),
            "active_s": first(lambda n, e: e["event"] == "activated" and e.get("group") == group)}


def trial(c: Any, urls: list[str], i: int, log=print) -> dict:
    waited = time.monotonic()
    masters, leader = _settled(c)
    settle_s = time.monotonic() - waited
    followers = sorted(n for n in masters if n != leader)
    victim = leader if i % 2 == 0 else followers[(i // 2) % len(followers)]
    ports = {n.name: n.http for n in c.plan}
    survivors = [n for n in sorted(ports) if n != victim]
    stop = threading.Event()
    producers = {(g, n): Producer(ports[n], queue_url_at(ports[n], urls[g]), f"t{i}-g{g}-{n}", stop)
                 for g in range(len(urls)) for n in survivors}
    load_before = loadavg()[0]
    for p in producers.values():
        p.start()
    time.sleep(BEFORE_S)
    killed_at, killed_wall = time.monotonic(), time.time()
    c.procs[victim].kill()
    c.procs[victim].wait(5)
    _serving_without(c, victim)
    serving_seen_s = time.monotonic() - killed_at
    # every producer served again (one whose forward was in flight to the victim waits longer)
    deadline = time.monotonic() + TIMEOUT_S + 2
    while time.monotonic() < deadline and not all(any(x[3] is None and x[1] >= killed_at for x in p.sends[-50:])
                                                  for p in producers.values()):
        time.sleep(0.05)
    time.sleep(AFTER_S)
    stop.set()
    for p in producers.values():
        p.join(TIMEOUT_S + 1)

    groups = []
    lost = acked_total = 0
    for g, url in enumerate(urls):
        sends = sorted((s for (pg, _), p in producers.items() if pg == g for s in p.sends), key=lambda s: s[1])
        oks = [s for s in sends if s[3] is None]
        before = [s[1] for s in oks if s[1] < killed_at]
        after = [s[1] for s in oks if s[1] >= killed_at]
        errors: dict[str, int] = {}
        for s in sends:
            if s[3] is not None:
                errors[s[3]] = errors.get(s[3], 0) + 1
        acked = {s[2] for s in oks}
        # each client's own gap, and its sends that waited HELD_S or more (answered after the kill)
        client_gaps = []
        for (pg, _), p in producers.items():
            mine = [x[1] for x in p.sends if x[3] is None]
            pre, post = [t for t in mine if t < killed_at], [t for t in mine if t >= killed_at]
            if pg == g and pre and post:
                client_gaps.append(post[0] - max(pre))
        held = sorted(round(x[1] - x[0], 3) for x in sends if x[1] >= killed_at and x[1] - x[0] >= HELD_S)
        missing = acked - _drain(ports[survivors[0]], queue_url_at(ports[survivors[0]], url))
        lost += len(missing)
        acked_total += len(acked)
        gr = {"group": g, "victim_mastered": masters[g] == victim,
              "gap_s": round(after[0] - max(before), 4) if before and after else None,
              "client_gap_max_s": round(max(client_gaps), 4) if client_gaps else None, "held_s": held,
              "acked": len(acked), "lost": len(missing), "errors": errors}
        if gr["victim_mastered"] and before and after:
            gr.update(last_ok_s=round(max(before) - killed_at, 4), first_ok_s=round(after[0] - killed_at, 4),
                      **_steps(c, survivors, victim, g, killed_wall))
        groups.append(gr)
    c.start_node(victim)
    row = {"trial": i, "victim": victim, "victim_was_raft_leader": victim == leader, "masters_before": masters,
           "serving_seen_s": round(serving_seen_s, 3), "settle_wait_s": round(settle_s, 1),
           "loadavg_before": load_before, "groups": groups, "acked": acked_total, "lost": lost}
    mine = [x for x in groups if x["victim_mastered"]]
    others = [x for x in groups if not x["victim_mastered"]]
    err = sum(sum(x["errors"].values()) for x in others)
    log(f"  [{i + 1}] killed {victim} ({'Raft leader' if victim == leader else 'follower'}): its group "
        + ", ".join(f"g{x['group']} gap {x['gap_s']} s (last ok {x.get('last_ok_s')}, elected {x.get('elected_s')}, "
                    f"view {x.get('view_s')}, active {x.get('active_s')}, first ok {x.get('first_ok_s')}; slowest "
                    f"client {x['client_gap_max_s']} s, held sends {x['held_s']})"
                    for x in mine)
        + f"; other groups gap {', '.join(str(x['gap_s']) for x in others)} s, errors {err}; "
        f"lost {lost} of {acked_total}; load {load_before:.1f}")
    return row


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def _summary(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median_s": round(statistics.median(xs), 3), "p90_s": round(_pct(xs, 90), 3),
            "max_s": round(max(xs), 3), "min_s": round(min(xs), 3)}


def report(trials: list[dict], machine: dict, env: dict, config: dict, log=print) -> dict:
    def gaps(pick) -> list[float]:
        return [g["gap_s"] for t in trials for g in t["groups"] if pick(t, g) and g["gap_s"] is not None]

    def steps(led: bool) -> dict:
        """The median time after the kill of each step, over the victim's groups."""
        rows = [g for t in trials for g in t["groups"] if g["victim_mastered"] and t["victim_was_raft_leader"] == led]
        out = {}
        for k in ("last_ok_s", "elected_s", "view_s", "active_s", "first_ok_s"):
            xs = [g[k] for g in rows if g.get(k) is not None]
            out[k] = round(statistics.median(xs), 3) if xs else None
        return out

    leader = {**_summary(gaps(lambda t, g: g["victim_mastered"] and t["victim_was_raft_leader"])),
              "steps_median": steps(True)}
    follower = {**_summary(gaps(lambda t, g: g["victim_mastered"] and not t["victim_was_raft_leader"])),
                "steps_median": steps(False)}
    victims = _summary(gaps(lambda t, g: g["victim_mastered"]))
    others = _summary(gaps(lambda t, g: not g["victim_mastered"]))
    other_errors: dict[str, int] = {}
    victim_errors: dict[str, int] = {}
    for t in trials:
        for g in t["groups"]:
            into = victim_errors if g["victim_mastered"] else other_errors
            for k, v in g["errors"].items():
                into[k] = into.get(k, 0) + v
    unmeasured = sum(g["gap_s"] is None for t in trials for g in t["groups"])
    mine = [g for t in trials for g in t["groups"] if g["victim_mastered"]]
    held = sorted(x for g in mine for x in g["held_s"])
    results = {"victim_groups": victims, "victim_was_raft_leader": leader, "victim_was_follower": follower,
               "other_groups": others, "other_groups_errors": other_errors, "victim_groups_errors": victim_errors,
               "victim_groups_client_gap": _summary([g["client_gap_max_s"] for g in mine
                                                     if g["client_gap_max_s"] is not None]),
               "held_sends": len(held), "held_send_median_s": round(statistics.median(held), 3) if held else None,
               "trials_with_held_sends": sum(bool(g["held_s"]) for g in mine),
               "gaps_unmeasured": unmeasured, "acked": sum(t["acked"] for t in trials),
               "lost": sum(t["lost"] for t in trials)}
    goals = {"victim_groups_gap_median_at_most_s": GOAL_MEDIAN_S,
             "gap_met": victims.get("median_s") is not None and victims["median_s"] <= GOAL_MEDIAN_S,
             "other_groups_errors_met": not other_errors, "nothing_lost_met": results["lost"] == 0}
    log(f"{'victim':18} {'n':>3} {'median':>8} {'p90':>8} {'max':>8}")
    for label, s in (("the Raft leader", leader), ("a follower", follower), ("either", victims),
                     ("(other groups)", others)):
        if s["n"]:
            log(f"{label:18} {s['n']:>3} {s['median_s']:>7.3f}s {s['p90_s']:>7.3f}s {s['max_s']:>7.3f}s"
                + (f"   steps (median s after the kill): {s['steps_median']}" if "steps_median" in s else ""))
    cg = results["victim_groups_client_gap"]
    if cg["n"]:
        log(f"{'(one client)':18} {cg['n']:>3} {cg['median_s']:>7.3f}s {cg['p90_s']:>7.3f}s {cg['max_s']:>7.3f}s   "
            f"a victim group's slowest client; {len(held)} sends held >= {HELD_S:g} s "
            f"(median {results['held_send_median_s']} s) in {results['trials_with_held_sends']} trials")
    log(f"  victim's groups serve again: median {victims.get('median_s')} s (goal <= {GOAL_MEDIAN_S}: "
        f"{'met' if goals['gap_met'] else 'not met'}); other groups' errors {other_errors or 'none'}; "
        f"lost {results['lost']} of {results['acked']} acknowledged sends")
    return {"benchmark": "groups_failover", "machine": machine, "environment": env, "config": config,
            "results": results, "goals": goals, "trials": trials}


def suite(quick: bool, trials: int | None = None, log=print) -> dict:
    from cluster.config import Timing
    from cluster.replicated import ReplicatedStorage
    from elasticmq_py import localcluster

    n = trials or (QUICK_TRIALS if quick else TRIALS)
    timing = Timing(rebalance_quiet=QUIET_S).validate()
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    before = loadavg()
    started = time.monotonic()
    log(f"groups_failover: 3 nodes majority, 3 groups, kill -9 of one member, {n} trials, "
        f"rebalance-quiet {QUIET_S:g} s")
    rows = []
    with tempfile.TemporaryDirectory(prefix="groups-failover-") as d:
        c = localcluster.LocalCluster(Path(d), localcluster.plan_ports(3, 0), fsync=None, groups=3,
                                      log_level="WARNING", timing=timing)
        c.start()
        try:
            _settled(c)
            ports = [p.http for p in c.plan]
            urls = [create_queue(ports[k % 3], q) for k, q in enumerate(QUEUES)]
            placed = [g.queues for g in c.statuses()[c.plan[0].name].groups]
            if placed != [1, 1, 1]:
                raise RuntimeError(f"the queues did not land one per group: {placed}")
            for i in range(n):
                rows.append(trial(c, urls, i, log))
            _settled(c)
        finally:
            c.stop()
    config = {"trials": n, "nodes": 3, "groups": 3, "policy": "majority", "in_memory": True,
              "producer_pause_s": PAUSE_S, "load_before_kill_s": BEFORE_S, "send_timeout_s": TIMEOUT_S,
              "held_s": HELD_S,
              "rebalance_quiet_s": QUIET_S,
              # the node's tick: its timers, the group masters' beats, the leader's failover check
              "tick_s": inspect.signature(ReplicatedStorage).parameters["tick"].default,
              "timing": {k: getattr(timing, k) for k in ("heartbeat", "election_min", "election_max", "vote_guard",
                                                         "lease", "group_suspect", "gather", "debounce",
                                                         "connection_timeout", "keepalive")}}
    env = {"loadavg_before": before, "loadavg_after": loadavg(), "wall_s": round(time.monotonic() - started)}
    return report(rows, machine, env, config, log)
