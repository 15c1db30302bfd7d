"""The docs' tables of the single-node, failover, durability and simulator benchmarks, and the
formatting every table shares; bench/replication_tables.py has the replication benchmark's.

Each block renderer takes the ``Results`` and returns the markdown between its marker lines
(bench/report.py): a table, a line or two computed from the same files, and the line that names
the file, when it ran and the command that reproduces it.
"""

from __future__ import annotations

from typing import Callable

from bench.resultfiles import MissingResult, Node, Results

# -- formatting -----------------------------------------------------------------------------------

def num(x: float, digits: int = 0) -> str:
    """12,345 or 12,345.6: thousands separated, ``digits`` decimals."""
    return f"{x:,.{digits}f}"


def pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def span(xs: list[float], fmt: Callable[[float], str]) -> str:
    """'a' when all equal, else 'lo to hi'."""
    lo, hi = fmt(min(xs)), fmt(max(xs))
    return lo if lo == hi else f"{lo} to {hi}"


def table(header: tuple[str, ...], rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> str:
    """A markdown table; columns whose index is in ``right`` are right-aligned."""
    align = "|" + "|".join("---:" if i in right else "---" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(cells) + " |" for cells in [header, *rows]]
    return "\n".join([lines[0], align, *lines[1:]])


def block(*parts: str) -> str:
    """A block's text: its table, its notes and its source line, a blank line apart."""
    return "\n\n".join(parts)


def source(results: Results, name: str, extra: str = "") -> str:
    """The line under a table that names its file and when and where it ran."""
    m = results[name]["machine"]
    return (f"*From `bench/results/{name}.json`: run {m['when']} on {m['cpus']} CPUs, Python {m['python']}"
            f"{'; ' + extra if extra else ''}. Reproduce: `python -m bench --only {name}`.*")


def loads(env: Node) -> str:
    before, after = env["loadavg_before"], env["loadavg_after"]
    return f"load average {before[0]:.1f} before, {after[0]:.1f} after"


def goals_table(goals: Node) -> str:
    """The goals a benchmark judges itself by, as it wrote them. A goal the run recorded as not
    measured (a peer that could not be started: its note says why) says so."""
    rows = []
    for g in goals:
        key = "measured" if "measured" in g.plain() else "value"
        if key in g.plain() and g.plain()[key] is None:
            value, result = "not measured", "-"
        else:
            value, result = g[key], verdict(g["met"])
        if isinstance(value, Node):
            value = "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in value.items())
        rows.append((g["goal"], str(value), g.get("target", "-"), result, g.get("note", "")))
    return table(("goal", "measured", "target", "verdict", "note"), rows)


def verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def ratio_rounds(w: Node, fmt: Callable[[float], str], unit: str) -> str:
    """A median of within-round values and the rounds: '42% (45, 41, 42%)'."""
    return f"{fmt(w['median'])}{unit} ({', '.join(fmt(x) for x in w['per_round'])}{unit})"


def figure_pct(x: float) -> str:
    return f"{100 * x:.0f}"


def figure_x(x: float) -> str:
    return f"{x:.2f}"


# -- the blocks -----------------------------------------------------------------------------------

STORAGE_LABELS = {
    "floor_dict_deque_put_get": "floor: the same loop over a bare dict + deque",
    "send": "send",
    "send_batch": "send-batch (10 per call)",
    "receive_delete": "receive + delete, one at a time",
    "receive_delete_batch10": "receive 10 + delete-batch 10",
    "fifo_send+receive_delete": "FIFO send + receive + delete (100 groups)",
    "fifo_1group_send+receive_delete": "FIFO send + receive + delete (one group)",
}


def storage(results: Results) -> str:
    s = results["storage"]
    by: dict[str, dict[int, Node]] = {}
    for r in s["results"]:
        by.setdefault(r["scenario"], {})[r["queue_depth"]] = r
    rows = []
    for scenario, sides in by.items():
        if scenario not in STORAGE_LABELS:
            raise MissingResult(f"bench/results/storage.json: scenario {scenario!r} has no label in bench/report.py")
        depths = sorted(sides)
        cells = [f"{num(sides[d]['cpu_per_second'])}/s ({num(sides[d]['per_second'])}/s)" for d in depths]
        if len(depths) == 1:
            rows.append((STORAGE_LABELS[scenario], cells[0], "-", "-", "-"))
            continue
        empty, deep = (sides[d] for d in depths)
        rows.append((STORAGE_LABELS[scenario], cells[0], num(depths[1]), cells[1],
                     f"{empty['cpu_per_second'] / deep['cpu_per_second']:.2f}"))
    load = s["machine"]["loadavg"]
    return block(
        table(("scenario (100-byte bodies)", "empty queue: CPU (wall)", "queued", "deep queue: CPU (wall)",
               "empty / deep (CPU)"), rows, right=(1, 2, 3, 4)),
        source(results, "storage", f"load average {load[0]:.1f} (1 min), {load[2]:.1f} (15 min)")
    )


ENDPOINT_TARGETS = (("elasticmq-py", "json"), ("elasticmq-py", "query"), ("trivial", "json"),
                    ("sqslite", "query"), ("moto", "json"))


def endpoint(results: Results) -> str:
    e = results["endpoint"]
    best = {(r["scenario"], r["target"], r["protocol"]): r for r in e["results"]}
    titles = {r["scenario"]: r["title"] for r in e["runs"]}   # in the order they ran
    peers = e["peers"]
    head = ["scenario", "elasticmq-py, JSON", "elasticmq-py, Query", "trivial handler (HTTP layer alone)",
            f"sqslite {peers['sqslite']['version']} (Query)", f"moto {peers['moto']['version']} (JSON)"]
    rows = []
    for scenario, title in titles.items():
        cells = [title]
        for target, protocol in ENDPOINT_TARGETS:
            r = best.get((scenario, target, protocol))
            if r is None:
                cells.append("-")
            elif r["connections"] == 1:
                cells.append(f"p50 {r['p50_ms']} ms")
            else:
                unit = "msgs/s" if r["msgs_per_s"] != r["req_per_s"] else "/s"
                cells.append(f"{num(r['msgs_per_s'])} {unit}".replace(" /s", "/s"))
        rows.append(tuple(cells))
    cfg = e["config"]
    not_compared = "\n".join(["Not compared:"] + [f"- {k}: {why}" for k, why in e["not_compared"].items()])
    return block(
        table(tuple(head), rows, right=(1, 2, 3, 4, 5)),
        not_compared,
        source(results, "endpoint", f"{cfg['connections']} connections from {cfg['generator_processes']} "
                                    f"generator processes, best of {cfg['rounds']} rounds of {cfg['duration_s']:g} s; "
                                    f"{loads(e['environment'])}; {e['errors_total']} errors")
    )


def endpoint_goals(results: Results) -> str:
    return block(goals_table(results["endpoint"]["goals"]), source(results, "endpoint"))


CPU_PROFILE_ROWS = (("trivial", None, "trivial handler (the HTTP layer alone)"),
                    ("send", "send", "SendMessage, 100 B"), ("send64k", "send64k", "SendMessage, 64 KiB"),
                    ("batch", "batch", "SendMessageBatch of 10"),
                    ("receive", "receive", "ReceiveMessage of 10 messages"),
                    ("delbatch", "delbatch", "DeleteMessageBatch of 10"), ("delete", "delete", "DeleteMessage"))


def cpu_profile(results: Results) -> str:
    c = results["cpu_profile"]
    ir = c["instructions_per_request"]
    rows = []
    for key, kind, label in CPU_PROFILE_ROWS:
        if kind is None:
            rows.append((label, num(ir[key]), "-"))
        else:
            rows.append((label, num(ir[f"{kind}_json"]), num(ir[f"{kind}_query"])))
    rows.append(("SendMessage on a 3-node `majority` master, per send", num(ir["master_json"]), "-"))
    rows.append(("... one replica's share of that send", num(ir["replica_json"]), "-"))
    single = ir["send_json"]
    return block(
        table(("instructions per request", "JSON", "Query"), rows, right=(1, 2)),
        f"A JSON send is {single / ir['trivial']:.2f}x the trivial handler, a Query send "
        f"{ir['send_query'] / ir['trivial']:.2f}x. On the master of a 3-node cluster a send is "
        f"{ir['master_json'] / single:.2f}x a single node's, and a replica's share "
        f"{ir['replica_json'] / single:.2f}x.",
        source(results, "cpu_profile", f"valgrind {c['valgrind']}, {num(c['requests'])} requests per send phase, "
                                       f"the cluster in batches of {c['cluster_batch']}")
    )


def failover(results: Results) -> str:
    f = results["failover"]
    rows = []
    for key, label in (("kill_to_new_active", "kill -9 of the master -> a new master active"),
                       ("sigstop_to_old_inactive", "SIGSTOP of the master -> it is inactive"),
                       ("sigstop_to_new_active", "SIGSTOP of the master -> a new master active")):
        s = f[key]
        rows.append((label, f"{s['median_s']:.2f} s", f"{s['p99_s']:.2f} s", f"{s['max_s']:.2f} s", str(s["n"])))
    goals, met = f["goals"], f["goals_met"]
    verdicts = [f"median <= {goals['kill_to_new_active_median_s']} s: {verdict(met['kill_to_new_active_median_s'])}",
                f"p99 <= {goals['kill_to_new_active_p99_s']} s: {verdict(met['kill_to_new_active_p99_s'])}",
                f"old master inactive first in {goals['old_inactive_first_pct']:g}% of trials: "
                f"{verdict(met['old_inactive_first_pct'])}"]
    t = f["timing"]
    return block(
        table(("measure", "median", "p99", "max", "trials"), rows, right=(1, 2, 3, 4)),
        f"The old master went inactive before the new one was active in {f['old_inactive_before_new_active']} "
        f"trials. Goals: {'; '.join(verdicts)}.",
        source(results, "failover", f"`{f['nodes']}` processes; heartbeat {t['heartbeat']:g} s, election timeout "
                                    f"{t['election_min']:g}-{t['election_max']:g} s, lease {t['lease']:g} s, "
                                    f"vote guard {t['vote_guard']:g} s, leader fallback {t['leader_fallback']:g} s")
    )


def encryption(results: Results) -> str:
    e = results["encryption"]
    r, w, cfg = e["results"], e["ratios"], e["config"]
    rows = [(label, num(r[key]["msgs_per_s_median"]), num(r[key]["msgs_per_s_best"]),
             f"{r[key]['p50_ms_median']:.2f}", num(r[key]["all_nodes_cpu_us_per_send_median"], 1),
             num(r[key]["master_cpu_us_per_send_median"], 1), str(r[key]["errors"]))
            for key, label in (("encrypted", "links encrypted (CurveZMQ)"), ("clear", "links in clear text"))]
    goal = e["goal"]
    return block(
        table(("3 nodes, `majority`, send 100 B", "sends/s median", "best", "p50 ms", "CPU µs/send, all nodes",
               "master", "errors"), rows, right=(1, 2, 3, 4, 5, 6)),
        f"Encrypted / clear, within each round: throughput {ratio_rounds(w['throughput'], pct, '')}, "
        f"CPU per send {ratio_rounds(w['cpu_per_send'], lambda x: f'{x:.2f}', 'x')}. Goal: throughput "
        f">= {pct(goal['throughput_ratio_at_least'])} of clear: {verdict(goal['met'])}.",
        source(results, "encryption", f"{cfg['connections']} connections, {cfg['rounds']} rounds of "
                                      f"{cfg['duration_s']:g} s; {loads(e['environment'])}"))


def forward(results: Results) -> str:
    e = results["forward"]
    r, w, cfg = e["results"], e["ratios"], e["config"]
    rows = []
    for key, label in (("direct", "to the master's endpoint"), ("forwarded", "to a replica's endpoint (forwarded)")):
        x, cpu = r[key], r[key]["cpu_us_per_send_median"]
        rows.append((label, num(x["msgs_per_s_median"]), f"{x['p50_ms_median']:.2f}", num(cpu["master"], 1),
                     num(cpu["forwarder"], 1), num(cpu["other_replica"], 1), str(x["errors"])))
    us = lambda x: f"{x:.1f}"  # noqa: E731
    th = w["forward_cost_by_thread_us"]
    keys = "; ".join(f"{name} {k['queue_key_us']:.2f} ({k['full_parse_us']:.2f})" for name, k in e["queue_key"].items())
    return block(
        table((f"3 nodes, `majority`, send 100 B, {cfg['connections']} connections", "sends/s", "p50 ms",
               "CPU µs/send: master", "forwarder", "other replica", "errors"), rows, right=(1, 2, 3, 4, 5, 6)),
        f"Forwarder's CPU per forwarded send, f, within each round: {ratio_rounds(w['forward_cost_us'], us, ' µs')} "
        f"against its own run as a plain replica; {ratio_rounds(w['forward_cost_vs_other_replica_us'], us, ' µs')} "
        f"against the other replica of the same run. By thread: event loop {us(th['loop']['median'])}, "
        f"libzmq {us(th['zmq']['median'])}, other {us(th['other']['median'])} µs; its loop slept "
        f"{r['forwarded']['forwarder_loop_sleeps_per_send_median']} times per send. The master spent "
        f"{w['master_cpu_forwarded_over_direct']['median']:.2f}x its direct CPU per send, "
        f"{ratio_rounds(w['master_extra_us'], us, ' µs')} more. Goal: f <= "
        f"{e['goal']['forward_cost_us_at_most']:g} µs: {verdict(e['goal']['met'])}. `queue_key_of` "
        f"(elasticmq_py/protocol/queue_key.py), µs per request, the endpoint's full parse in brackets: {keys}.",
        source(results, "forward", f"{cfg['rounds']} rounds of {cfg['duration_s']:g} s; {loads(e['environment'])}"))


def groups(results: Results) -> str:
    e = results["groups"]
    r, g, fit, cfg = e["results"], e["goals"], e["fit"], e["config"]
    rows = []
    for conns, res in r.items():
        for key, label in (("one_group_master", "one group: the master"),
                           ("one_group_direct_master", "one group, clients at the master only: the master"),
                           ("groups_busiest", "three groups: the busiest member")):
            if key in res:
                x = res[key]
                rows.append((f"{conns}", label, num(x["msgs_per_s_median"]), num(x["cpu_us_per_send_median"], 1),
                             f"{x['frames_out_per_send_median']:.3f}", str(x["errors"])))
    proj = "; ".join(f"M = {m}: {p['arithmetic']}, {num(p['sends_per_s_per_core'])} sends/s, "
                     f"{p['over_one_master']:.2f}x one master" for m, p in e["projection"].items())
    fm, fg, zmq = fit["one_group_master"], fit["groups_busiest"], fit["zmq_round_trip"]
    high = list(r)[-1]
    return block(
        table(("connections", f"3 nodes, `majority`, {cfg['queues']} queues, send 100 B, clients at every endpoint",
               "sends/s", "CPU µs/send", "frames sent/send", "errors"), rows, right=(0, 2, 3, 4, 5)),
        f"Busiest member with three groups over the one-group master: {g['busiest_over_master']:.2f} (goal <= "
        f"{g['busiest_over_master_at_most']:g}: {verdict(g['ratio_met'])}); at {high} connections "
        f"{r[high]['busiest_over_master']:.2f}. Busiest over idlest with three groups: {g['balance']:.2f} (goal <= "
        f"{g['balance_at_most']:g}: {verdict(g['balance_met'])}). Aggregate sends/s with groups over one group: "
        f"{g['aggregate_over_one_group']:.2f} (goal >= 1: {verdict(g['aggregate_met'])}). Per-frame fit, CPU = a + b "
        f"frames: one-group master a = {fm['a_us']:.1f} µs, b = {fm['b_us_per_frame']:.1f} µs/frame; groups' busiest a = "
        f"{fg['a_us']:.1f} µs, b = {fg['b_us_per_frame']:.1f} µs/frame; {fit['arithmetic']}; with frames free, "
        f"{fit['a_groups_over_a_master']:.2f}. A bare pyzmq ping-pong: {zmq['cpu_us_per_side']:.1f} µs of CPU per side "
        f"per round trip ({zmq['wall_us']:.1f} µs wall). Projection from the "
        f"one-group runs, c(M) = m/M + r(M-1)/M + f(M-1)/M^2 (m = {fit['m_us']:.1f}, r = {fit['r_us']:.1f}, f = "
        f"{fit['f_us']:.1f} µs; c(3) = {fit['c3_predicted_us']:.1f} µs predicted, {fit['groups_mean_measured_us']:.1f} "
        f"µs measured), cluster sends/s at one core per member 1e6 / c(M): {proj}.",
        source(results, "groups", f"{cfg['rounds']} rounds of {cfg['duration_s']:g} s; {loads(e['environment'])}"))


def groups_failover(results: Results) -> str:
    e = results["groups_failover"]
    r, g, cfg = e["results"], e["goals"], e["config"]
    t = cfg["timing"]

    def case(key: str) -> str:
        x = r[key]
        s = x["steps_median"]
        elected = f"elected {s['elected_s']:.3f}, " if s.get("elected_s") is not None else ""
        return (f"({x['n']} trials) median {x['median_s']:.3f} s, p90 {x['p90_s']:.3f}, max {x['max_s']:.3f}; "
                f"median s after the kill: {elected}view {s['view_s']:.3f}, active {s['active_s']:.3f}, "
                f"first success {s['first_ok_s']:.3f}")

    errors = ", ".join(f"{v} {k}" for k, v in r["other_groups_errors"].items()) or "none"
    one = r["victim_groups_client_gap"]
    held = (f"{r['held_sends']} sends in {r['trials_with_held_sends']} of {cfg['trials']} trials, median "
            f"{r['held_send_median_s']:.3f} s" if r["held_sends"] else "none")
    return block(
        f"`bench/groups_failover.py`: a 3-node in-memory `majority` cluster with {cfg['groups']} groups, each member "
        f"mastering one, a queue per group; a producer per queue at each survivor's endpoint sends every "
        f"{cfg['producer_pause_s']:g} s; one member is killed (kill -9), the Raft leader and the followers in turn, "
        f"and restarted before the next trial. A group's gap runs from its clients' last success before the kill to "
        f"their first after it. The Raft leader killed, its group's gap {case('victim_was_raft_leader')}. A follower "
        f"{case('victim_was_follower')}. Either: median {r['victim_groups']['median_s']:.3f} s (goal <= "
        f"{g['victim_groups_gap_median_at_most_s']:g} s: {verdict(g['gap_met'])}); the slowest client of the group "
        f"alone: median {one['median_s']:.3f} s, p90 {one['p90_s']:.3f}, max {one['max_s']:.3f}. The other groups' "
        f"clients: errors {errors}, longest gap {r['other_groups']['max_s']:.3f} s. Lost: {r['lost']} of "
        f"{num(r['acked'])} acknowledged sends. Elected: a survivor won the Raft election; view: a committed view "
        f"moved the group; active: its new master activated it. A follower's group moves once the Raft leader has "
        f"not heard it for group-suspect ({t['group_suspect']:g} s from its last ack, up to a heartbeat of "
        f"{t['heartbeat']:g} s before the kill), at the leader's next tick (every {cfg['tick_s']:g} s); the leader's "
        f"once a follower's election timer ({t['election_min']:g} to {t['election_max']:g} s from its last "
        f"heartbeat) ran out and it won, and its first view waited {t['gather']:g} s (gather) for the dead leader. "
        f"The new master syncs at once (the sync guard's {t['vote_guard']:g} s from a survivor's last ack of the old "
        f"epoch have passed), beats at its next tick and is active at a majority's ack. A send forwarded to the "
        f"victim as it died fails with a 503 (outcome unknown) once a view leaves the victim no group, at the "
        f"latest when the link to it has been silent for connection-timeout ({t['connection_timeout']:g} s): "
        f"sends held {cfg['held_s']:g} s or more: {held}.",
        source(results, "groups_failover", f"{cfg['trials']} trials; rebalance-quiet {cfg['rebalance_quiet_s']:g} s "
                                          f"(default 10), so the victim gets its group back in seconds; "
                                          f"{loads(e['environment'])}"))


def sigv4(results: Results) -> str:
    e = results["sigv4"]
    r, w, cfg = e["results"], e["ratios"], e["config"]
    rows = []
    for protocol, label in (("json", "JSON"), ("query", "Query")):
        for mode, what in (("sigv4", "verified (`sigv4`)"), ("off", "not checked (`off`)")):
            x = r[f"{mode} {protocol}"]
            rows.append((f"{label}, {what}", num(x["msgs_per_s_median"]), num(x["msgs_per_s_best"]),
                         f"{x['p50_ms_median']:.2f}", num(x["server_cpu_us_per_send_median"], 1), str(x["errors"])))
    goal = e["goal"]
    keep = goal["throughput_ratio_at_least"]
    cpu = {k: v["server_cpu_us_per_send_median"] for k, v in r.items()}
    added = "; ".join(f"{label} {num(cpu['sigv4 ' + p] - cpu['off ' + p], 1)} µs, of "
                      f"{num(cpu['off ' + p] * (1 / keep - 1), 1)} µs the goal allows"
                      for p, label in (("json", "JSON"), ("query", "Query")))
    ratios = "; ".join(f"{label}: throughput {ratio_rounds(w[p]['throughput'], pct, '')}, CPU per send "
                       f"{ratio_rounds(w[p]['cpu_per_send'], lambda x: f'{x:.2f}', 'x')}"
                       for p, label in (("json", "JSON"), ("query", "Query")))
    loop = e.get("loop_us")
    floor = ""
    if loop:
        hashes = loop["sha256_body"] + loop["sha256_canonical"] + loop["hmac_prepared"]
        served = cpu["sigv4 json"] - cpu["off json"]
        scale = served / loop["verify_json_send"]
        allowed = cpu["off json"] * (1 / keep - 1)
        floor = (f"In a tight loop, verifying a JSON send costs {loop['verify_json_send']:.2f} µs, of which the "
                 f"three hashes take {hashes:.2f} µs (the body's SHA-256 {loop['sha256_body']:.2f}, the canonical "
                 f"request's {loop['sha256_canonical']:.2f}, the HMAC {loop['hmac_prepared']:.2f}); served, it "
                 f"adds {served:.1f} µs, {scale:.1f}x the loop's cost. At that scale the hashes alone take "
                 f"{hashes * scale:.1f} µs of the {allowed:.1f} µs the goal allows, leaving "
                 f"{max(allowed - hashes * scale, 0):.1f} µs for the work done in Python.")
    return block(
        table(("single node, send 100 B", "sends/s median", "best", "p50 ms", "server CPU µs/send", "errors"), rows,
              right=(1, 2, 3, 4, 5)),
        f"sigv4 / off, within each round. {ratios}. Goal: throughput >= "
        f"{pct(goal['throughput_ratio_at_least'])} of off in both protocols: {verdict(goal['met'])}.",
        f"Server CPU that verification adds to a send (medians): {added}.",
        *((floor,) if floor else ()),
        source(results, "sigv4", f"{cfg['connections']} connections, {cfg['rounds']} rounds of "
                                 f"{cfg['duration_s']:g} s; {loads(e['environment'])}"))


DURABILITY_TARGETS = (("single node", "single, memory", "single, fsync always", "single"),
                      ("3 nodes, `majority`", "3 nodes, memory", "3 nodes, fsync always", "cluster"))


def durability_throughput(results: Results) -> str:
    d = results["durability"]
    summary, ratios = d["throughput"]["summary"], d["throughput"]["ratios"]
    rows = []
    for label, mem_key, disk_key, ratio_key in DURABILITY_TARGETS:
        mem, disk = summary[mem_key], summary[disk_key]
        rows.append((label,
                     f"{num(mem['msgs_per_s'])}/s, {num(mem['all_nodes_cpu_us_per_req'], 1)} µs, "
                     f"p50 {mem['p50_ms']:.2f} ms",
                     f"{num(disk['msgs_per_s'])}/s, {num(disk['all_nodes_cpu_us_per_req'], 1)} µs, "
                     f"p50 {disk['p50_ms']:.2f} ms; {disk['sends_per_fsync']} sends per fsync of "
                     f"{disk['fsync_ms_avg']:.2f} ms",
                     ratio_rounds(ratios[ratio_key], figure_x, "")))
    cfg, env = d["config"], d["environment"]
    return block(
        table(("send 100 B", "in memory: rate, CPU per send (all nodes)", "`fsync = always`",
               "journal / memory"), rows, right=(1, 2, 3)),
        source(results, "durability", f"part 1, the four targets up together, {cfg['rounds']} rounds of "
                                      f"{cfg['duration']:g} s, medians; ratios within each round, rounds in "
                                      f"brackets; {loads(env)}")
    )


def durability_recovery(results: Results) -> str:
    rec = results["durability"]["recovery"]
    rows = []
    for key, label, size in (("from_snapshot", "from a compaction snapshot", "snapshot_bytes_per_msg"),
                             ("whole_journal", "from the journal alone", "journal_bytes_per_msg")):
        r = rec[key]
        rows.append((label, f"{r['seconds']:.2f} s", f"{r['cpu_s']:.2f} s", f"{r['us_per_msg']} µs",
                     f"{rec[size]} B"))
    return block(
        table((f"recovery of {num(rec['messages'])} messages of 100 B", "time", "CPU", "per message",
               "on disk per message"), rows, right=(1, 2, 3, 4)),
        source(results, "durability", "part 2, a fresh process")
    )


def durability_restart(results: Results) -> str:
    rs = results["durability"]["restart"]
    j, m = rs["journal"], rs["memory"]
    cfg = results["durability"]["config"]
    rows = [("from its journal, then a log fetch", f"{j['seconds']:.2f} s", f"{j['process_listening_s']:.2f} s",
             f"recovery {j['recovery']['seconds']:.2f} s ({num(j['recovery']['messages'])} messages)"),
            ("in memory: empty, then a state transfer", f"{m['seconds']:.2f} s", f"{m['process_listening_s']:.2f} s",
             f"transfer {m['transfer']['duration_s']:.2f} s ({num(m['transfer']['records'])} records)")]
    return block(
        table((f"restart of one node of three after {cfg['down_s']:g} s down", "to level with the master",
               "listening after", "how"), rows, right=(1, 2)),
        f"The journal's way was {rs['speedup']:.2f}x as fast as the transfer. Ten times as fast would be "
        f"{m['seconds'] / 10:.2f} s, while recovering {num(results['durability']['recovery']['messages'])} "
        f"messages from the journal alone takes {results['durability']['recovery']['whole_journal']['seconds']:.2f} s "
        f"(part 2).",
        source(results, "durability", f"part 3, {num(cfg['restart_messages'])} messages stored")
    )


def durability_goals(results: Results) -> str:
    return block(goals_table(results["durability"]["goals"]), source(results, "durability"))


def _body(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 else f"{n} B"


def sizing_memory(results: Results) -> str:
    s = results["sizing"]
    journaled = {r["body_bytes"]: r for r in s["journaled"]}
    rows = []
    for r in s["memory"]:
        j = journaled[r["body_bytes"]]
        rows.append((_body(r["body_bytes"]), num(r["messages"]), f"{num(r['bytes_per_msg'])} B",
                     f"{num(r['mib_per_million'])} MiB", f"{num(j['rss_full_mib'] - r['rss_full_mib'])} MiB"))
    c = s["cluster"]
    empty = [r["rss_empty_mib"] for r in s["memory"]]
    return block(
        table(("body", "messages measured", "per message", "per million (scaled)",
               "journaled node: more, at that count"), rows, right=(1, 2, 3, 4)),
        f"Resident memory of one `serve` process in memory, grown from the empty queue to the count measured, "
        f"and scaled linearly to a million. The last column is a journaled node's resident set (`fsync = always`) "
        f"at the same count less the in-memory node's, not scaled. An empty node holds "
        f"{span(empty, lambda x: f'{x:.0f}')} MiB. In a 3-node "
        f"`majority` cluster at {_body(c['body_bytes'])} ({num(c['messages'])} messages), the master grew "
        f"{num(c['master']['mib_per_million'])} MiB per million and a replica {num(c['replica']['mib_per_million'])} "
        f"MiB: every member holds the whole state.",
        source(results, "sizing", "part 1, filled over HTTP with SendMessageBatch")
    )


def sizing_disk(results: Results) -> str:
    s = results["sizing"]
    rows = [(_body(r["body_bytes"]), num(r["messages"]), f"{num(r['journal_mib_per_million'])} MiB",
             f"{num(r['snapshot_mib_per_million'])} MiB", f"{r['kept_segment_mib']:.0f} MiB")
            for r in s["journaled"]]
    return block(
        table(("body", "messages measured", "journal as written, per million (scaled)",
               "compaction snapshot, per million (scaled)", "segment kept beside it"), rows, right=(1, 2, 3, 4)),
        source(results, "sizing", "part 2, `fsync = always`, the snapshot taken offline by the product's code")
    )


def sim(results: Results) -> str:
    s = results["sim"]
    rows = [(r["master"], num(r["seeds"]), f"{r['wall_s']:.1f} s", str(r["seeds_per_min"]),
             f"{r['avg_task_cpu_s']:.2f} s", str(len(r["failing"])),
             f"{r['load_avg_before']:.1f} -> {r['load_avg_after']:.1f}") for r in s["results"]]
    goal = s["goal"]
    return block(
        table(("Spark master", "seeds", "wall time", "seeds/min", "CPU per seed", "failing", "load average"),
              rows, right=(1, 2, 3, 4, 5)),
        f"Speed-up local[2] / local[1]: {s['speedup']}x. 1,000 seeds on local[2]: {s['minutes_for_1000_seeds_local2']} "
        f"minutes (goal: at least {goal['seeds_per_min_local2']:g} seeds/min, {verdict(goal['met'])}). From the "
        f"tasks' own CPU time, two idle cores would run {s['idle_2core_seeds_per_min_from_cpu']} seeds/min.",
        source(results, "sim", f"3 nodes, `majority`, {s['duration_s']:g} simulated seconds a seed")
    )


def headline(results: Results) -> str:
    """The README's few numbers: a single node and a 3-node `majority` cluster side by side in one
    run, failover as a client sees it, and what `fsync = always` costs a single node."""
    r, d = results["replication"], results["durability"]
    tp = r["throughput"]
    single, cluster = tp["results"]["send_100B/single"], tp["results"]["send_100B/majority"]
    kill = r["failover"]["by_policy"]["majority"]
    summary, ratios = d["throughput"]["summary"], d["throughput"]["ratios"]
    replication = ("`bench/results/replication.json`", "`python -m bench --only replication`")
    rows = [
        ("single node, in memory", f"{num(single['msgs_per_s_median'])} msgs/s", *replication),
        ("3 nodes, `majority`", f"{num(cluster['msgs_per_s_median'])} msgs/s "
         f"({tp['within_round']['send_100B: majority / single']['median']} of the single node, median within rounds)",
         *replication),
        (f"kill -9 of the master → first acknowledged send through a survivor (`majority`, {kill['rounds']} rounds)",
         f"median {kill['kill_to_first_ack_s']['median_s']} s, {num(kill['lost_acked'])} of "
         f"{num(kill['acked_sends'])} acknowledged sends lost", *replication),
        ("single node, `fsync = always` vs in memory",
         f"{num(summary['single, fsync always']['msgs_per_s'])} vs {num(summary['single, memory']['msgs_per_s'])} "
         f"msgs/s ({ratios['single']['median']}, median within rounds)",
         "`bench/results/durability.json`", "`python -m bench --only durability`"),
    ]
    return table((f"measure (send 100 B, {r['config']['connections']} connections)", "result", "results file",
                  "reproduce"), rows, right=(1,))
