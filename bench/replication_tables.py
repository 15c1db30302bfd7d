"""The docs' tables of the replication benchmark (bench/replication_bench.py): throughput, CPU by
process and by thread, failover, state transfer, the cost of a wake-up, and the arithmetic of
what the master's CPU goal leaves for replication and of throughput on two saturated cores.
"""

from __future__ import annotations

import re

from bench.resultfiles import MissingResult, Node, Results
from bench.tables import (
    block, figure_pct, figure_x, goals_table, loads, num, pct, ratio_rounds, source, span, table,
)

REPLICATION_SCENARIOS = (("send_100B", "send 100 B"), ("send_batch", "send-batch 10 x 100 B"),
                         ("receive_delete", "receive 10 + delete-batch, steady"))


def _replication_source(results: Results, part: str) -> str:
    r = results["replication"]
    cfg = r["config"]
    return source(results, "replication", f"{part}; {cfg['connections']} connections, {cfg['rounds']} rounds of "
                                          f"{cfg['duration']:g} s; {loads(r['environment'])}, "
                                          f"{r['environment']['background_busy_pct']}% of a core busy before")


def replication_throughput(results: Results) -> str:
    tp = results["replication"]["throughput"]
    res, within = tp["results"], tp["within_round"]
    rows = []
    for key, label in REPLICATION_SCENARIOS:
        unit = "/s" if key == "send_100B" else " msgs/s"
        cells = [label, f"{num(res[f'{key}/single']['msgs_per_s_median'])}{unit}"]
        for policy in ("majority", "none"):
            cells.append(f"{num(res[f'{key}/{policy}']['msgs_per_s_median'])}{unit}: "
                         f"{ratio_rounds(within[f'{key}: {policy} / single'], figure_pct, '%')}")
        rows.append(tuple(cells))
    lat = [f"p50 {res['latency_1conn/single']['p50_ms_median']} ms"]
    for policy in ("majority", "none"):
        lat.append(ratio_rounds(within[f"latency_1conn: {policy} - single, p50 ms"], lambda x: f"+{x:.2f}", " ms"))
    rows.append(("send 100 B, 1 connection", *lat))
    return block(
        table(("scenario", "single node", "3 nodes, `majority`: of single", "3 nodes, `none`: of single"), rows,
              right=(1, 2, 3)),
        _replication_source(results, "part 1, medians of the rounds; ratios within each round, rounds in brackets")
    )


def replication_cpu(results: Results) -> str:
    tp = results["replication"]["throughput"]
    res, within = tp["results"], tp["within_round"]
    rows = []
    for key, label in REPLICATION_SCENARIOS:
        cells = [label, num(res[f"{key}/single"]["master_cpu_us_per_req_median"], 1)]
        for policy in ("majority", "none"):
            for role in ("master", "replica"):
                field = f"{role}_cpu_us_per_req_median"
                ratio = within[f"{key}: {policy} {role} CPU/op / single"]
                cells.append(f"{num(res[f'{key}/{policy}'][field], 1)}: {ratio_rounds(ratio, figure_x, 'x')}")
        rows.append(tuple(cells))
    return block(
        table(("CPU per request, µs", "single node", "`majority` master", "`majority` replica", "`none` master",
               "`none` replica"), rows, right=(1, 2, 3, 4, 5)),
        _replication_source(results, "part 1; each process's user + system CPU from /proc per acknowledged "
                                     "request, a replica the mean of the two; ratios to the single node within "
                                     "each round")
    )


def _send_runs(results: Results, target: str) -> list[Node]:
    runs = [r for r in results["replication"]["throughput"]["runs"] if r["scenario"] == "send_100B"
            and r["target"] == target]
    if not runs:
        raise MissingResult(f"bench/results/replication.json has no send_100B run of {target}")
    return sorted(runs, key=lambda r: r["round"])


def replication_threads(results: Results) -> str:
    rows = []
    for target, role, label in (("single", "master", "single node"), ("majority", "master", "`majority` master"),
                                ("majority", "replica", "`majority` replica"), ("none", "master", "`none` master"),
                                ("none", "replica", "`none` replica")):
        runs = _send_runs(results, target)
        cells = [label]
        for part in ("loop", "zmq", "other"):
            cells.append(", ".join(num(r["cpu_us_per_req_by_thread"][role][part], 1) for r in runs))
        cells.append(", ".join(f"{r['loop_sleeps_per_req'][role]:.3f}" for r in runs))
        rows.append(tuple(cells))
    return block(
        table(("send 100 B, per send (rounds)", "event loop, µs", "ZeroMQ's threads, µs",
               "other threads (pysyncobj), µs", "loop sleeps"), rows, right=(1, 2, 3, 4)),
        _replication_source(results, "part 1, each thread's CPU from /proc; a sleep is a voluntary context "
                                     "switch of the loop's thread")
    )


def wake_cost(results: Results) -> str:
    env = results["replication"]["environment"]
    before, after = env["wake_cost_before"], env["wake_cost_after"]
    rows = [(label, f"{before[k]}{unit}", f"{after[k]}{unit}") for k, label, unit in (
        ("hot_us_per_piece", "the piece run again at once", " µs"),
        ("cold_us_per_piece", "the piece right after a sleep", " µs"),
        ("penalty_us_per_wake", "added by one wake-up", " µs"),
        ("cold_over_hot", "after a sleep / at once", "x"))]
    return block(
        table(("CPU of one piece, median of the cycles", "before part 1", "after part 1"), rows, right=(1, 2)),
        f"The piece: {before['piece']}; a sleep of {before['sleep_ms']} ms before each cold piece, "
        f"{num(before['cycles'])} cycles.",
        _replication_source(results, "`environment.wake_cost_before` and `_after`")
    )


MASTER_CPU_GOAL = "send_100B: 3-node majority master's CPU per send / single node's"
REPLICA_CPU_GOAL = "send_100B: 3-node majority replica's CPU per send / single node's"


def _goal_target(results: Results, name: str, goal: str) -> float:
    """The number of a goal's target ('<= 1.5' -> 1.5), as the benchmark wrote it."""
    for g in results[name]["goals"]:
        if g["goal"] == goal:
            return float(str(g["target"]).split()[-1])
    raise MissingResult(f"bench/results/{name}.json has no goal {goal!r}")


def _requests_in(piece: str) -> int:
    """How many requests a wake-cost piece is ('15 SendMessage requests ...' -> 15)."""
    m = re.match(r"(\d+) ", piece)
    if m is None:
        raise MissingResult(f"bench/results/replication.json: a wake-cost piece without its size: {piece!r}")
    return int(m.group(1))


def master_budget(results: Results) -> str:
    """What the master's CPU goal leaves for replication, against what the design spends on it."""
    r = results["replication"]
    target = _goal_target(results, "replication", MASTER_CPU_GOAL)
    env = r["environment"]
    wakes = [env["wake_cost_before"], env["wake_cost_after"]]
    hot_us = [w["hot_us_per_piece"] / _requests_in(w["piece"]) for w in wakes]
    ir = results["cpu_profile"]["instructions_per_request"]
    python_share = ir["master_json"] / ir["send_json"] - 1
    one = lambda x: num(x, 1)  # noqa: E731
    rows = []
    most_left, least_extra = float("-inf"), float("inf")
    for single, master in zip(_send_runs(results, "single"), _send_runs(results, "majority")):
        s = single["master_cpu_us_per_req"]
        m = master["cpu_us_per_req_by_thread"]["master"]
        threads = m["zmq"] + m["other"]
        python = [python_share * h for h in hot_us]
        wake = [master["loop_sleeps_per_req"]["master"] * w["penalty_us_per_wake"] for w in wakes]
        budget = (target - 1) * s
        left = [budget - threads - p - w for p, w in zip(python, wake)]   # each phase's own pair
        most_left = max(most_left, *left)
        least_extra = min(least_extra, m["loop"] - s)
        rows.append((str(single["round"]), num(s, 1), num(budget, 1), num(threads, 1),
                     span(python, one), span(wake, one), span(left, one), num(m["loop"] - s, 1)))
    return block(
        table(("round", "single node's send, µs", f"budget at {target:g}x", "ZeroMQ + pysyncobj threads",
               "replication's Python, hot", "wake-ups", "left for the rest", "master loop's extra, measured"),
              rows, right=tuple(range(1, 8))),
        f"Per send, in µs. The budget is {target - 1:g} of the single node's send. Replication's Python is "
        f"the in-process count's extra ({ir['master_json'] / ir['send_json']:.2f}x a single node's send, "
        f"`bench/results/cpu_profile.json`) at the speed of a hot single-node send "
        f"({span(hot_us, one)} µs, the wake-cost pieces); wake-ups are the master loop's sleeps "
        f"per send times one wake-up's cost ({span([w['penalty_us_per_wake'] for w in wakes], one)} µs).",
        f"So at most {num(max(most_left, 0), 1)} µs per send is left for the rest of the loop's work beyond a single "
        f"node's (its extra turns per batch, the pyzmq calls around each frame), where the master's loop spent "
        f"at least {num(least_extra, 1)} µs per send above the single node's.",
        _replication_source(results, "part 1, send 100 B")
    )


def cpu_model(results: Results) -> str:
    """Throughput on two saturated cores follows the CPU each request costs the whole machine."""
    rows = []
    master_goal = _goal_target(results, "replication", MASTER_CPU_GOAL)
    replica_goal = _goal_target(results, "replication", REPLICA_CPU_GOAL)
    for single, cluster in zip(_send_runs(results, "single"), _send_runs(results, "majority")):
        s, g = single["master_cpu_us_per_req"], 1e4 * single["client_cpu_pct"] / single["msgs_per_s"]
        m, rep = cluster["master_cpu_us_per_req"], cluster["replica_cpu_us_per_req"]
        model = (s + g) / (m + 2 * rep + g)
        at_goal = (s + g) / (master_goal * s + 2 * replica_goal * s + g)
        rows.append((str(single["round"]), num(s, 1), num(g, 1), num(m, 1), num(rep, 1), pct(model),
                     pct(cluster["msgs_per_s"] / single["msgs_per_s"]), pct(at_goal)))
    return block(
        table(("round", "S: single node", "G: load generator", "M: master", "R: replica",
               "(S + G) / (M + 2R + G)", "measured", "at the CPU goals"), rows, right=tuple(range(1, 8))),
        f"CPU per send in µs, `majority` against the single node, send 100 B. G is the load generator's CPU "
        f"per request in the single node's run; \"at the CPU goals\" puts M = {master_goal:g} S and "
        f"R = {replica_goal:g} S.",
        _replication_source(results, "part 1")
    )


def replication_history(results: Results) -> str:
    wh = results["replication"]["with_history"]
    single, cluster, within = wh["results"]["send_100B/single"], wh["results"]["send_100B/majority"], wh["within_round"]
    rows = [("send 100 B", f"{num(single['msgs_per_s_median'])}/s", f"{num(cluster['msgs_per_s_median'])}/s: "
             f"{ratio_rounds(within['send_100B: majority / single'], figure_pct, '%')}"),
            ("CPU per send, µs", num(single["master_cpu_us_per_req_median"], 1),
             f"master {num(cluster['master_cpu_us_per_req_median'], 1)}: "
             f"{ratio_rounds(within['send_100B: majority master CPU/op / single'], figure_x, 'x')}; "
             f"replica {num(cluster['replica_cpu_us_per_req_median'], 1)}: "
             f"{ratio_rounds(within['send_100B: majority replica CPU/op / single'], figure_x, 'x')}")]
    return block(
        table(("history log on", "single node", "3 nodes, `majority`"), rows, right=(1, 2)),
        _replication_source(results, "part 1b, the cluster writing its history log")
    )


def replication_failover(results: Results) -> str:
    fo = results["replication"]["failover"]["by_policy"]
    rows = []
    cells: dict[str, list[str]] = {}
    for policy in ("none", "majority"):
        p = fo[policy]
        lost = p["lost_per_round"]
        first, active = p["kill_to_first_ack_s"], p["kill_to_new_master_active_s"]
        cells[policy] = [
            num(p["acked_sends"]),
            f"{num(p['lost_acked'])} ({p['lost_pct']}%; {min(lost)}-{max(lost)} per round)",
            f"{p['rounds_with_loss']} of {p['rounds']}",
            f"{first['median_s']:.2f} s (max {first['max_s']:.2f} s)",
            f"{active['median_s']:.2f} s (max {active['max_s']:.2f} s)",
        ]
    for i, label in enumerate(("acknowledged sends", "acknowledged, then lost", "rounds with a loss",
                               "kill -> first acknowledged send through a survivor, median",
                               "kill -> the new master active, median")):
        rows.append((label, cells["none"][i], cells["majority"][i]))
    return block(
        table(("kill -9 of the master while sending", "`none`", "`majority`"), rows, right=(1, 2)),
        _replication_source(results, "parts 2 and 4")
    )


def replication_transfer(results: Results) -> str:
    t = results["replication"]["transfer"]
    cpu, load = t["transfer_cpu"], t["steady_load"]
    timers = results["replication"]["config"]["timing"]
    before, during = t["master_rate_before"]["sends_per_s"], t["master_rate_during_transfer"]["sends_per_s"]
    rows = [("messages held when the third node joins", num(t["messages_held_at_join"])),
            ("the joiner's transfer", f"{t['transfer_duration_s']:.1f} s"),
            ("from starting the joiner's process to caught up", f"{t['start_to_caught_up_s']:.1f} s"),
            ("the master's send rate before / during the transfer",
             f"{num(before)}/s / {num(during)}/s ({t['throughput_during_over_before']:.2f})"),
            ("CPU per record: joiner / master beyond its load",
             f"{cpu['joiner_us_per_record']} µs / {cpu['master_us_per_record']} µs"),
            ("the steady load's latency: p50 / p99 / max",
             f"{load['p50_ms']} / {load['p99_ms']} / {load['max_ms']} ms"),
            ("changes of master; converged", f"{len(t['masters_seen']) - 1}; {'yes' if t['converged'] else 'no'}")]
    return block(
        table(("state transfer while the master serves", ""), rows, right=(1,)),
        _replication_source(results, f"part 3, with the timers {timers.split('part 3: ')[-1]}")
    )


def replication_goals(results: Results) -> str:
    return block(goals_table(results["replication"]["goals"]), _replication_source(results, "every part"))
