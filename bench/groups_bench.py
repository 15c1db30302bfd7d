"""What queue groups buy: the busiest member's CPU per send with one group and with three.

Two 3-node in-memory clusters with ack policy ``majority`` on 127.0.0.1 run side by side
(elasticmq_py/localcluster.py, links encrypted): one with ``groups = 1``, one with ``groups = 3``
once every member masters one group. Each gets 30 queues before the load (10 per group where
there are three), and sends of 100 B come from nine generator processes, one per (endpoint,
group): each endpoint's clients write to a queue of every group, so with groups a third of each
endpoint's requests are its own group's and two thirds are forwarded, whichever member masters
which group (the queues rotate by round). The runs alternate, in turns:

- ``one_group``: clients at every endpoint of the one-group cluster (two thirds forwarded);
- ``one_group_direct``: the same clients all at its master's endpoint (nothing forwarded);
- ``groups``: clients at every endpoint of the three-group cluster.

Both clusters run at two loads: ``CONNECTIONS`` (18, two per generator) and ``HIGH`` (54). Each
node's CPU comes from /proc over the measured window, per acknowledged send of its cluster, and
its ZeroMQ frames sent from its status (every frame, a bundle of a turn's items with groups, costs
a send, the peer's receive and wake-up, whatever it holds). The goals, at ``CONNECTIONS``: the
groups cluster's busiest member at most 0.6 of the one-group master, and its busiest at most 1.3
times its idlest.

Why frames. A node's CPU per send is close to ``a + b * frames``: ``a`` what each operation costs
it, ``b`` what each frame it sends costs it (the receive, wake-up and loop turn of the answers
included). The two loads give two points per node kind, so ``b`` and ``a`` are fitted for the
one-group master and for the groups cluster's busiest member, and the report says how many
frames per send the goal would allow the groups members at their fitted costs.

The projection. With M members, M groups and requests spread evenly over the endpoints, a member
spends per cluster send its master share m/M, its replica share r(M-1)/M and, for the 1/M of the
requests it receives, f(M-1)/M forwarding them: c(M) = m/M + r(M-1)/M + f(M-1)/M^2. The three
costs are fitted from the one-group runs: m is the master's CPU per send with clients at every
endpoint (it takes forwarded requests as the groups members do); r is a replica's with every
client at the master (it only applies the stream); a replica of ``one_group`` spends r + f/3 (it
receives a third of the requests and forwards all of them), so f = 3 (that - r). c(3) is then
checked against the measured groups cluster, and a member on a core of its own serves
1e6 / c(M) sends/s against one master's 1e6 / m.

    python -m bench --only groups [--quick]
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.loadgen.runner import Job, Pool
from bench.loadgen.sqs import JSON
from bench.process_cpu import cpu_of, loadavg
from bench.replication_setup import create_queue, queue_url_at

ONE, DIRECT, GROUPS = "one_group", "one_group_direct", "groups"
QUEUES = 30
WORKERS = 9          # one per (endpoint, group)
CONNECTIONS = 18     # two per generator
HIGH = 54            # the second load, for the per-frame fit
GOAL_RATIO = 0.6     # busiest(groups) / master(one group)
GOAL_BALANCE = 1.3   # busiest / idlest within the groups cluster
PROJECT = (3, 5, 9)


def _start(d: Path, groups: int) -> Any:
    from elasticmq_py import localcluster

    c = localcluster.LocalCluster(d, localcluster.plan_ports(3, 0), fsync=None, groups=groups, log_level="WARNING")
    c.start()
    return c


def _masters(c: Any, groups: int, timeout: float = 40.0) -> list[str]:
    """The one master (one group), or each group's once every member masters one; a member that
    exits, or no such masters within ``timeout``, is an error."""
    names = sorted(n.name for n in c.plan)
    deadline = time.monotonic() + timeout
    while not c.exited():
        if groups == 1:
            m = c.ready_master(c.statuses())
            masters = [m] if m else None
        else:
            masters = c.group_masters()
        if masters and (groups == 1 or sorted(masters) == names):
            return masters
        if time.monotonic() > deadline:
            raise RuntimeError(f"{groups} group(s): no masters spread over the members within {timeout:g} s")
        time.sleep(0.1)
    raise RuntimeError(f"a member exited: {c.exited()}")


PING_PONGS = 20_000


def _echo(port: int, n: int, out: Any) -> None:
    """The far side of ``zmq_round_trip``: a ROUTER that sends each message back."""
    import zmq

    ctx = zmq.Context()
    s = ctx.socket(zmq.ROUTER)
    s.bind(f"tcp://127.0.0.1:{port}")
    t0 = time.process_time()
    for _ in range(n):
        s.send_multipart(s.recv_multipart())
    out.put(time.process_time() - t0)
    s.close(0)
    ctx.term()


def zmq_round_trip(n: int = PING_PONGS) -> dict:
    """What a frame costs this machine below our code: a DEALER/ROUTER ping-pong of 200 B between
    two processes, CPU per side per round trip (one send and one receive each, libzmq's I/O
    thread included), the floor under ``b``."""
    import multiprocessing
    import socket

    import zmq

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp = multiprocessing.get_context("spawn")
    out = mp.Queue()
    far = mp.Process(target=_echo, args=(port, n, out))
    far.start()
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    d.connect(f"tcp://127.0.0.1:{port}")
    msg = b"x" * 200
    d.send(msg)
    if not d.poll(30_000):           # connected, and the far side's loop running
        far.kill()
        raise RuntimeError("the ping-pong's far side did not answer within 30 s")
    d.recv()
    t0, w0 = time.process_time(), time.monotonic()
    for _ in range(n - 1):
        d.send(msg)
        d.recv()
    near, wall = time.process_time() - t0, time.monotonic() - w0
    far_cpu = out.get(timeout=60)
    far.join(10)
    d.close(0)
    ctx.term()
    return {"round_trips": n, "wall_us": round(1e6 * wall / (n - 1), 1),
            "cpu_us_per_side": round(1e6 * (near + far_cpu) / (2 * n), 1)}


def _queues_per_group(c: Any, groups: int) -> tuple[int, ...]:
    """Queues per group in the first member's copy (nothing with one group)."""
    if groups == 1:
        return ()
    st = c.statuses()[c.plan[0].name]
    return tuple(g.queues for g in st.groups) if st is not None else ()


def _new_queue_group(c: Any, groups: int, before: tuple[int, ...], timeout: float = 10.0) -> int:
    """The group whose count rose by one since ``before``: the new queue's, once the first member
    applied it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = _queues_per_group(c, groups)
        if before and len(now) == len(before) and sum(now) == sum(before) + 1:
            return next(g for g, (a, b) in enumerate(zip(before, now)) if b > a)
        time.sleep(0.02)
    raise RuntimeError(f"a new queue did not show in the first member's group counts: {before}")


def _frames_out(c: Any) -> dict[str, int]:
    """ZeroMQ frames each member sent so far, over all its stream links."""
    out = {}
    for name, st in c.statuses().items():
        tr = st.replication.transport if st is not None else None
        out[name] = sum(p.frames_out for p in tr.peers.values()) if tr is not None else 0
    return out


def _run(pool: Pool, jobs: list[Job], on_start) -> dict:
    """Each job to its own generator process, all starting at once; their results summed."""
    start_at = time.monotonic() + 0.4
    for (_, pipe), job in zip(pool.workers, jobs):
        pipe.send(Job(**{**job.__dict__, "start_at": start_at}))
    time.sleep(max(0.0, start_at - time.monotonic()))
    on_start()
    outs = [pipe.recv() for (_, pipe), _ in zip(pool.workers, jobs)]
    bad = [o for s, o in outs if s != "ok"]
    if bad:
        raise RuntimeError(f"generator failed: {bad[0]}")
    outs = [o for _, o in outs]
    errors: dict[str, int] = {}
    for o in outs:
        for k, v in o["errors"].items():
            errors[k] = errors.get(k, 0) + v
    return {"requests": sum(o["requests"] for o in outs), "messages": sum(o["messages"] for o in outs),
            "wall": max(o["wall"] for o in outs), "client_cpu": sum(o["cpu"] for o in outs), "errors": errors}


class Bench:
    def __init__(self, clusters: dict[int, Any], pool: Pool, duration: float, log=print):
        self.clusters, self.pool, self.duration, self.log = clusters, pool, duration, log
        self.urls: dict[int, list[str]] = {}
        self.by_group: dict[int, list[list[str]]] = {}   # a cluster's queues by group (thirds with one group)
        self.runs: list[dict] = []

    def setup(self) -> None:
        for g, c in self.clusters.items():
            _masters(c, g)
            ports = [n.http for n in c.plan]
            self.urls[g] = []
            self.by_group[g] = [[] for _ in range(3)]
            for k in range(QUEUES):
                # created through every endpoint in turn, one after another, so each lands in
                # the group with the fewest queues (cluster/directory.py), read back from status
                before = _queues_per_group(c, g)
                url = create_queue(ports[k % 3], f"cap-{k:02d}")
                self.urls[g].append(url)
                self.by_group[g][_new_queue_group(c, g, before) if g > 1 else k % 3].append(url)
            if g > 1 and sorted(len(qs) for qs in self.by_group[g]) != [QUEUES // 3] * 3:
                raise RuntimeError(f"queues did not spread over the groups: {[len(q) for q in self.by_group[g]]}")

    def run_one(self, mode: str, rnd: int, duration: float, connections: int = CONNECTIONS) -> dict:
        g = 3 if mode == GROUPS else 1
        c = self.clusters[g]
        masters = _masters(c, g)
        plan = {n.name: n.http for n in c.plan}
        names = sorted(plan)
        jobs = []
        for i in range(WORKERS):
            e, group = divmod(i, 3)
            entry = masters[0] if mode == DIRECT else names[e]
            port = plan[entry]
            queues = self.by_group[g][group]
            url = queue_url_at(port, queues[(rnd * 3 + e) % len(queues)])
            jobs.append(Job(kind="send", protocol=JSON, port=port, host_header=f"localhost:{port}", queue_url=url,
                            connections=connections // WORKERS + (1 if i < connections % WORKERS else 0),
                            duration=duration, body_size=100))
        marks: dict[str, Any] = {}
        pids = {n: p.pid for n, p in c.procs.items()}

        def start() -> None:
            marks.update(f=_frames_out(c), a={n: cpu_of(p) for n, p in pids.items()}, t=time.monotonic())
        r = _run(self.pool, jobs, start)
        wall = time.monotonic() - marks["t"]
        used = {n: cpu_of(p) - marks["a"][n] for n, p in pids.items()}
        frames = _frames_out(c)
        sends = max(1, r["requests"])
        row = {"mode": mode, "round": rnd, "connections": connections, "masters": masters, "requests": r["requests"],
               "msgs_per_s": round(r["messages"] / max(1e-9, r["wall"])), "errors": r["errors"],
               "error_count": sum(r["errors"].values()), "loadavg": loadavg()[0],
               "client_cpu_us_per_send": round(1e6 * r["client_cpu"] / sends, 1),
               "cpu_us_per_send": {n: round(1e6 * used[n] / sends, 1) for n in names},
               "frames_out_per_send": {n: round((frames[n] - marks["f"][n]) / sends, 3) for n in names},
               "cpu_pct": {n: round(100 * used[n] / max(1e-9, wall)) for n in names}}
        self.runs.append(row)
        return row

    def run(self, rounds: int) -> None:
        for mode in (ONE, DIRECT, GROUPS):
            self.run_one(mode, -1, 1.0)     # warm-up: connections, caches, the streams' batching
        self.runs.clear()
        order = [(ONE, CONNECTIONS), (DIRECT, CONNECTIONS), (GROUPS, CONNECTIONS), (ONE, HIGH), (GROUPS, HIGH)]
        for rnd in range(rounds):
            for mode, conns in (order if rnd % 2 == 0 else order[::-1]):
                row = self.run_one(mode, rnd, self.duration, conns)
                cpu, fr = row["cpu_us_per_send"], row["frames_out_per_send"]
                err = f"  ERRORS {row['errors']}" if row["error_count"] else ""
                self.log(f"  [{rnd + 1}/{rounds}] {mode:16} {conns:>2} conns {row['msgs_per_s']:>7,} sends/s  "
                         "CPU µs/send (frames/send): "
                         + " ".join(f"{n}{'*' if n in row['masters'] else ''} {v:.1f} ({fr[n]:.2f})"
                                    for n, v in cpu.items()) + err)


def _med(xs, digits: int = 1) -> float:
    return round(statistics.median(xs), digits)


def _fit(lo: tuple[float, float], hi: tuple[float, float]) -> tuple[float, float]:
    """(a, b) of cpu = a + b * frames through two (frames, cpu) points."""
    (f1, c1), (f2, c2) = lo, hi
    b = (c1 - c2) / (f1 - f2) if f1 != f2 else float("nan")
    return c1 - b * f1, b


def report(runs: list[dict], machine: dict, env: dict, config: dict, zmq_rt: dict, log=print) -> dict:
    def rows(mode: str, conns: int = CONNECTIONS) -> list[dict]:
        return [r for r in runs if r["mode"] == mode and r["connections"] == conns]

    def master(r: dict) -> str:
        return r["masters"][0]

    def busiest(r: dict) -> str:
        return max(r["cpu_us_per_send"], key=r["cpu_us_per_send"].get)

    def summary(rs: list[dict], who) -> dict:
        """Medians over the runs: sends/s, and CPU and frames per send of the node ``who`` picks."""
        return {"msgs_per_s_median": round(statistics.median(r["msgs_per_s"] for r in rs)),
                "cpu_us_per_send_median": _med(r["cpu_us_per_send"][who(r)] for r in rs),
                "frames_out_per_send_median": _med((r["frames_out_per_send"][who(r)] for r in rs), 3),
                "errors": sum(r["error_count"] for r in rs)}

    def replicas_of(r: dict) -> float:
        return statistics.mean(v for n, v in r["cpu_us_per_send"].items() if n != master(r))

    results = {}
    for conns in (CONNECTIONS, HIGH):
        one, grp = rows(ONE, conns), rows(GROUPS, conns)
        res = {"one_group_master": summary(one, master), "groups_busiest": summary(grp, busiest),
               "one_group_replica_cpu_us_per_send_median": _med(replicas_of(r) for r in one),
               "groups_idlest_cpu_us_per_send_median": _med(min(r["cpu_us_per_send"].values()) for r in grp)}
        if conns == CONNECTIONS:
            direct = rows(DIRECT, conns)
            res["one_group_direct_master"] = summary(direct, master)
            res["one_group_direct_replica_cpu_us_per_send_median"] = _med(replicas_of(r) for r in direct)
        res["busiest_over_master"] = round(res["groups_busiest"]["cpu_us_per_send_median"]
                                           / res["one_group_master"]["cpu_us_per_send_median"], 3)
        res["aggregate_over_one_group"] = round(res["groups_busiest"]["msgs_per_s_median"]
                                                / res["one_group_master"]["msgs_per_s_median"], 3)
        results[str(conns)] = res
    at = results[str(CONNECTIONS)]
    ratio = at["busiest_over_master"]
    balance = round(statistics.median(max(r["cpu_us_per_send"].values()) / min(r["cpu_us_per_send"].values())
                                      for r in rows(GROUPS)), 3)
    goals = {"busiest_over_master_at_most": GOAL_RATIO, "busiest_over_master": ratio,
             "ratio_met": ratio <= GOAL_RATIO, "balance_at_most": GOAL_BALANCE, "balance": balance,
             "balance_met": balance <= GOAL_BALANCE, "aggregate_over_one_group": at["aggregate_over_one_group"],
             "aggregate_met": at["aggregate_over_one_group"] >= 1.0}

    # the per-frame fit: each node kind's (frames, cpu) at the two loads
    def point(conns: int, kind: str) -> tuple[float, float]:
        x = results[str(conns)][kind]
        return x["frames_out_per_send_median"], x["cpu_us_per_send_median"]
    am, bm = _fit(point(CONNECTIONS, "one_group_master"), point(HIGH, "one_group_master"))
    ag, bg = _fit(point(CONNECTIONS, "groups_busiest"), point(HIGH, "groups_busiest"))
    fm, cm = point(CONNECTIONS, "one_group_master")
    fg, cg = point(CONNECTIONS, "groups_busiest")
    allowed = (GOAL_RATIO * cm - ag) / bg if bg > 0 else float("nan")
    fit = {"one_group_master": {"a_us": round(am, 1), "b_us_per_frame": round(bm, 1)},
           "groups_busiest": {"a_us": round(ag, 1), "b_us_per_frame": round(bg, 1)},
           "a_groups_over_a_master": round(ag / am, 2), "zmq_round_trip": zmq_rt,
           "goal_frames_per_send_allowed": round(allowed, 3), "groups_frames_per_send": fg,
           "arithmetic": f"{GOAL_RATIO} * {cm} = {GOAL_RATIO * cm:.1f} µs allowed; a {ag:.1f} µs + b {bg:.1f} µs/frame "
                         f"* frames <= it needs frames <= {allowed:.3f} per send, against {fg} measured"}

    # the projection (module docstring), from the one-group runs at CONNECTIONS
    m = cm
    r_ = at["one_group_direct_replica_cpu_us_per_send_median"]
    f = round(3 * (at["one_group_replica_cpu_us_per_send_median"] - r_), 1)
    mean_groups = _med(statistics.mean(r["cpu_us_per_send"].values()) for r in rows(GROUPS))

    def c(M: int) -> float:
        return m / M + r_ * (M - 1) / M + f * (M - 1) / M ** 2

    projection = {str(M): {"cpu_us_per_send": round(c(M), 1), "sends_per_s_per_core": round(1e6 / c(M)),
                           "over_one_master": round(m / c(M), 2),
                           "arithmetic": f"{m}/{M} + {r_}*{M - 1}/{M} + {f}*{M - 1}/{M}^2 = {c(M):.1f} µs"}
                  for M in PROJECT}
    fit.update(m_us=m, r_us=r_, f_us=f, c3_predicted_us=round(c(3), 1), groups_mean_measured_us=mean_groups)

    log(f"  at {CONNECTIONS} connections: busiest(groups) / master(one group) = {cg:.1f} / {cm:.1f} = {ratio:.2f} "
        f"(goal <= {GOAL_RATIO}: {'met' if goals['ratio_met'] else 'not met'}); balance busiest/idlest {balance:.2f} "
        f"(goal <= {GOAL_BALANCE}: {'met' if goals['balance_met'] else 'not met'})")
    for conns, res in results.items():
        log(f"  {conns} connections: sends/s one group {res['one_group_master']['msgs_per_s_median']:,}, groups "
            f"{res['groups_busiest']['msgs_per_s_median']:,} ({res['aggregate_over_one_group']:.2f}x); busiest/master "
            f"{res['busiest_over_master']:.2f}; frames/send master {res['one_group_master']['frames_out_per_send_median']}"
            f", groups busiest {res['groups_busiest']['frames_out_per_send_median']}")
    log(f"  fit cpu = a + b*frames: one-group master a {am:.1f} µs, b {bm:.1f} µs/frame; groups busiest a {ag:.1f} µs, "
        f"b {bg:.1f} µs/frame")
    log(f"  {fit['arithmetic']}; with frames free: a {ag:.1f} / {am:.1f} = {ag / am:.2f}")
    log(f"  a bare pyzmq ping-pong: {zmq_rt['cpu_us_per_side']} µs of CPU per side per round trip "
        f"({zmq_rt['wall_us']} µs wall)")
    log(f"  projection: m {m} µs, r {r_} µs, f = 3 * ({at['one_group_replica_cpu_us_per_send_median']} - {r_}) = {f} µs; "
        f"c(3) {c(3):.1f} µs against the groups cluster's mean {mean_groups} µs")
    for M, p in projection.items():
        log(f"  M={M}: {p['arithmetic']}: {p['sends_per_s_per_core']:,} cluster sends/s at one core per member, "
            f"{p['over_one_master']}x one master")
    return {"benchmark": "groups", "machine": machine, "environment": env, "config": config,
            "results": results, "goals": goals, "fit": fit, "projection": projection, "runs": runs}


def suite(quick: bool, log=print) -> dict:
    duration, rounds = (1.0, 2) if quick else (3.0, 3)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    before = loadavg()
    log(f"groups: 3 nodes majority, one group against three, {QUEUES} queues, send 100 B, {rounds} rounds")
    pool = Pool(WORKERS)
    clusters: dict[int, Any] = {}
    with tempfile.TemporaryDirectory(prefix="groups-bench-") as d:
        try:
            for g in (1, 3):
                (Path(d) / f"g{g}").mkdir()
                clusters[g] = _start(Path(d) / f"g{g}", g)
            b = Bench(clusters, pool, duration, log)
            b.setup()
            b.run(rounds)
        finally:
            for c in clusters.values():
                c.stop()
            pool.close()
    config = {"duration_s": duration, "rounds": rounds, "connections": [CONNECTIONS, HIGH], "generator_processes": WORKERS,
              "queues": QUEUES, "policy": "majority", "nodes": 3, "body_bytes": 100, "in_memory": True}
    zmq_rt = zmq_round_trip(PING_PONGS // 4 if quick else PING_PONGS)
    return report(b.runs, machine, {"loadavg_before": before, "loadavg_after": loadavg()}, config, zmq_rt, log)
