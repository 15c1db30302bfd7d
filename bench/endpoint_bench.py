"""The SQS endpoint over real HTTP: elasticmq-py against its peers, in the same run.

Every server is a real process on 127.0.0.1; the load comes from ``bench.loadgen`` (raw
keep-alive HTTP/1.1 over asyncio, N connections over worker processes, every response checked:
status, MessageId, MD5OfMessageBody against the body sent, received bodies against their
MD5OfBody, batch entries, delete results; errors counted by kind). Scenarios:

- send 100 B and send 64 KiB, 16 connections (JSON and Query; sqslite speaks Query only)
- send-batch, 10 x 100 B per request, 16 connections
- receive+delete cycle: receive up to 10 then DeleteMessageBatch, on a pre-filled queue
- receive+single-delete cycle (one DeleteMessage per message): the cycle sqslite can do, since
  its batch and delete-batch replies are broken
- sequential latency, one connection, send 100 B (p50/p90/p99)
- the HTTP-stack ceiling: elasticmq-py's own HTTP layer with a trivial handler (same request)

Peers: moto's server (``moto[server]``, installed into .venv/bench-peers/moto) and sqslite (npm,
.venv/bench-peers/node). Each scenario runs every target in turn, round after round, with the
order alternating between rounds; the best round per target is reported and every run is kept in
the JSON. CPU used by the server, by the generator and by everything else on the machine is
measured per run, so a reader can tell a saturated server from a starved one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass

from bench.loadgen import servers
from bench.loadgen.runner import Job, Pool, Result
from bench.loadgen.sqs import AMZ_DATE, AUTH, JSON, JSON_CT, QUERY, Payloads
from bench.loadgen.trivial import BODY as TRIVIAL_BODY
from bench.process_cpu import machine_busy

OURS, TRIVIAL, MOTO, SQSLITE = "elasticmq-py", "trivial", "moto", "sqslite"
CONNECTIONS = 16
PROCESSES = 2
MAX_64K_REQUESTS = 6000        # bounds the memory a 64 KiB run leaves in a server (~400 MB)


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    kind: str
    targets: tuple[tuple[str, str], ...]   # (server, protocol)
    body_size: int = 100
    connections: int = CONNECTIONS
    mode: str = "async"
    prefill: bool = False
    max_requests: int = 0


SCENARIOS = (
    Scenario("send_100B", "send 100 B", "send",
             ((OURS, JSON), (OURS, QUERY), (TRIVIAL, JSON), (SQSLITE, QUERY), (MOTO, JSON))),
    Scenario("send_64KiB", "send 64 KiB", "send",
             ((OURS, JSON), (OURS, QUERY), (SQSLITE, QUERY), (MOTO, JSON)),
             body_size=64 * 1024, max_requests=MAX_64K_REQUESTS),
    Scenario("send_batch", "send-batch 10x100 B", "send_batch",
             ((OURS, JSON), (OURS, QUERY), (MOTO, JSON))),
    Scenario("receive_delete", "receive+delete-batch", "receive_delete",
             ((OURS, JSON), (OURS, QUERY), (MOTO, JSON)), prefill=True),
    Scenario("receive_delete_single", "receive+delete 1 by 1", "receive_delete_single",
             ((OURS, QUERY), (OURS, JSON), (SQSLITE, QUERY)), prefill=True),
    Scenario("latency_1conn", "latency send, 1 conn", "send",
             ((OURS, JSON), (OURS, QUERY), (TRIVIAL, JSON), (SQSLITE, QUERY), (MOTO, JSON)),
             connections=1, mode="blocking"),
)

PEER_NOTES = {
    SQSLITE: "Query protocol only. Its SendMessageBatch/DeleteMessageBatch replies are broken, so batch "
             "scenarios are not compared. All messages of one receive share one receipt handle and "
             "DeleteMessage deletes every message carrying it (the driver still sends one DeleteMessage per "
             "message). Recognises queue URLs only on host 'localhost' (every server gets Host: localhost:port). "
             "Receive and delete scan the whole queue.",
    MOTO: "Routes on the SigV4 credential scope (every server gets the same SigV4-shaped Authorization "
          "header). Answers Connection: close, so every request opens a new connection. Its receive cost "
          "grows with queue depth; prefill is bounded by time, so its queue is shallower than ours.",
}

NOT_COMPARED = {
    (SQSLITE, "send_batch"): "sqslite's SendMessageBatch replies are broken",
    (SQSLITE, "receive_delete"): "sqslite's DeleteMessageBatch replies are broken",
    (MOTO, "receive_delete_single"): "covered by the batch cycle (moto is ~100x slower)",
}


# -- machine-wide CPU accounting --------------------------------------------------------------

class _CpuWindow:
    def __init__(self, server: servers.ServerProc):
        self.server = server

    def start(self) -> None:
        self.s0, self.m0, self.t0 = self.server.cpu_seconds(), machine_busy(), time.monotonic()

    def stop(self) -> None:
        self.s1, self.m1, self.t1 = self.server.cpu_seconds(), machine_busy(), time.monotonic()

    def shares(self, client_cpu: float) -> dict:
        wall = max(1e-9, self.t1 - self.t0)
        server = self.s1 - self.s0
        other = max(0.0, (self.m1 - self.m0) - server - client_cpu)
        return {"server_cpu_pct": round(100 * server / wall), "client_cpu_pct": round(100 * client_cpu / wall),
                "other_cpu_pct": round(100 * other / wall)}


# -- one run --------------------------------------------------------------------------------

class Bench:
    def __init__(self, quick: bool, log=print):
        self.quick = quick
        self.log = log
        self.duration = 1.0 if quick else 3.0
        self.rounds = 1 if quick else 2
        self.prefill_messages = 4_000 if quick else 20_000
        self.prefill_max_s = 4.0 if quick else 10.0
        self.servers: dict[str, servers.ServerProc] = {}
        self.peers: dict[str, dict] = {}
        self.runs: list[dict] = []
        self.pool: Pool | None = None

    # servers

    def start_servers(self) -> None:
        self.servers[OURS] = servers.start_ours()
        self.servers[TRIVIAL] = servers.start_trivial()
        for name, start in ((SQSLITE, servers.start_sqslite), (MOTO, servers.start_moto)):
            try:
                s = start(self.log)
                self.servers[name] = s
                self.peers[name] = {"available": True, "version": s.version, "notes": s.notes}
            except Exception as e:  # a peer that cannot be had is reported, and the bench goes on
                self.peers[name] = {"available": False, "reason": f"{type(e).__name__}: {e}"}
                self.log(f"  peer {name} unavailable: {e}")
        self.peers[OURS] = {"available": True, "version": self.servers[OURS].version}

    def warm_up(self) -> None:
        """An unmeasured burst of sends against every server first (node's JIT, CPython's
        caches, first-touch allocations), so the first measured target is not penalised."""
        sc = SCENARIOS[0]
        for name, server in self.servers.items():
            proto = JSON if JSON in server.protocols else QUERY
            if name == TRIVIAL:
                url = f"http://{server.host_header}/000000000000/trivial"
            else:
                url = server.create_queue(f"bench-warmup-{uuid.uuid4().hex[:8]}")
            try:
                self.pool.run(self._job(sc, server, proto, url, duration=1.5))
            finally:
                if name != TRIVIAL:
                    server.delete_queue(url)

    def stop_servers(self) -> None:
        for s in self.servers.values():
            s.stop()

    # runs

    def _job(self, sc: Scenario, server: servers.ServerProc, protocol: str, url: str, **kw) -> Job:
        kind = "trivial" if server.name == TRIVIAL else sc.kind
        base = dict(kind=kind, protocol=protocol, port=server.port, host_header=server.host_header,
                    queue_url=url, connections=sc.connections,
                    processes=1 if sc.mode == "blocking" else PROCESSES, duration=self.duration,
                    body_size=sc.body_size, max_requests=sc.max_requests, mode=sc.mode,
                    trivial_body=TRIVIAL_BODY)
        base.update(kw)
        return Job(**base)

    def _prefill(self, sc: Scenario, server: servers.ServerProc, protocol: str, url: str) -> int:
        kind = "send" if server.name == SQSLITE else "send_batch"
        job = self._job(sc, server, protocol, url, kind=kind, mode="async", connections=CONNECTIONS,
                        processes=PROCESSES, duration=self.prefill_max_s,
                        max_messages=self.prefill_messages, max_requests=0)
        r = self.pool.run(job)
        if r.error_count:
            self.log(f"  prefill errors on {server.name}: {r.errors}")
        return r.messages

    def run_one(self, sc: Scenario, target: str, protocol: str, rnd: int) -> dict | None:
        server = self.servers.get(target)
        if server is None or not server.alive():
            return None
        if target == TRIVIAL:
            url = f"http://{server.host_header}/000000000000/trivial"
        else:
            url = server.create_queue(f"bench-{sc.key.replace('_', '-')}-{uuid.uuid4().hex[:8]}")
        try:
            prefilled = self._prefill(sc, server, protocol, url) if sc.prefill else None
            window = _CpuWindow(server)
            r = self.pool.run(self._job(sc, server, protocol, url), on_start=window.start)
            window.stop()
        finally:
            if target != TRIVIAL:
                server.delete_queue(url)
        row = _row(sc, target, protocol, rnd, r)
        row.update(window.shares(r.client_cpu))
        # the server's own CPU per request: steadier than req/s on a shared machine
        row["server_cpu_us_per_req"] = round(1e6 * (window.s1 - window.s0) / max(1, r.requests), 1)
        if prefilled is not None:
            row["prefilled"] = prefilled
        self.runs.append(row)
        return row

    def run_all(self) -> None:
        for rnd in range(self.rounds):
            for sc in SCENARIOS:
                targets = list(sc.targets) if rnd % 2 == 0 else list(reversed(sc.targets))
                for target, protocol in targets:
                    row = self.run_one(sc, target, protocol, rnd)
                    if row is not None:
                        self.log(f"  [{rnd + 1}/{self.rounds}] {sc.title:24} {target:13} {protocol:5} "
                                 f"{_fmt_row(row)}")

    # generator ceiling

    def generator_ceiling(self) -> dict:
        """How much the generator itself can drive, against the trivial handler (the cheapest
        server there is), and its CPU cost per request; plus wrk as an independent client."""
        triv = self.servers[TRIVIAL]
        url = f"http://{triv.host_header}/000000000000/trivial"
        sc = SCENARIOS[0]
        out: dict = {"runs": []}
        for processes, conns in ((1, 16), (2, 16), (2, 64)):
            window = _CpuWindow(triv)
            r = self.pool.run(self._job(sc, triv, JSON, url, connections=conns, processes=processes),
                              on_start=window.start)
            window.stop()
            row = {"client": "loadgen", "processes": processes, "connections": conns,
                   "req_per_s": round(r.req_rate), "errors": r.error_count,
                   "client_cpu_us_per_req": round(1e6 * r.client_cpu / max(1, r.requests), 1),
                   "p50_ms": round(1e3 * r.percentile(50), 3)}
            row.update(window.shares(r.client_cpu))
            out["runs"].append(row)
        best_cost = min(x["client_cpu_us_per_req"] for x in out["runs"])
        cores = os.cpu_count() or 1
        out["client_cpu_us_per_req"] = best_cost
        out["cpu_bound_ceiling_per_core_req_per_s"] = round(1e6 / best_cost) if best_cost else None
        out["cpu_bound_ceiling_all_cores_req_per_s"] = round(cores * 1e6 / best_cost) if best_cost else None
        out["measured_against_trivial_req_per_s"] = max(x["req_per_s"] for x in out["runs"])
        if shutil.which("wrk"):
            ours = self.servers[OURS]
            qurl = ours.create_queue(f"bench-wrk-{uuid.uuid4().hex[:8]}")
            try:
                out["wrk"] = {
                    "trivial_send_100B_json": self._wrk(triv, url, CONNECTIONS),
                    "elasticmq_send_100B_json": self._wrk(ours, qurl, CONNECTIONS),
                    "trivial_send_100B_json_1conn": self._wrk(triv, url, 1),
                    "elasticmq_send_100B_json_1conn": self._wrk(ours, qurl, 1),
                }
            finally:
                ours.delete_queue(qurl)
        else:
            out["wrk"] = None
        return out

    def _wrk(self, server: servers.ServerProc, url: str, connections: int) -> dict:
        import json as _json
        body = _json.dumps({"QueueUrl": url, "MessageBody": Payloads(100).bodies[0]}, separators=(",", ":"))
        headers = {"Host": server.host_header, "Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.SendMessage",
                   "X-Amz-Date": AMZ_DATE, "Authorization": AUTH}
        lua = 'wrk.method = "POST"\nwrk.body = %s\n' % _lua_str(body)
        lua += "".join(f"wrk.headers[{_lua_str(k)}] = {_lua_str(v)}\n" for k, v in headers.items())
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write(lua)
        try:
            import resource
            kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            window = _CpuWindow(server)
            window.start()
            p = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(self.duration))}s", "--latency",
                                "-s", f.name, f"http://127.0.0.1:{server.port}/"],
                               capture_output=True, text=True, timeout=120)
            window.stop()
            kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            wrk_cpu = (kids1.ru_utime - kids0.ru_utime) + (kids1.ru_stime - kids0.ru_stime)
        finally:
            os.unlink(f.name)
        text = p.stdout
        m = re.search(r"Requests/sec:\s*([\d.]+)", text)
        non2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
        sock = re.search(r"Socket errors: (.*)", text)
        p50 = re.search(r"^\s*50%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)
        out = {"client": "wrk", "connections": connections,
               "req_per_s": round(float(m.group(1))) if m else None,
               "p50_ms": round(float(p50.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[p50.group(2)], 3) if p50 else None,
               "non_2xx": int(non2xx.group(1)) if non2xx else 0,
               "socket_errors": sock.group(1).strip() if sock else None}
        out.update(window.shares(wrk_cpu))
        dur = max(1, round(self.duration))
        if out["req_per_s"]:
            out["client_cpu_us_per_req"] = round(1e6 * wrk_cpu / (out["req_per_s"] * dur), 1)
        return out


def _lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _row(sc: Scenario, target: str, protocol: str, rnd: int, r: Result) -> dict:
    return {"scenario": sc.key, "title": sc.title, "target": target, "protocol": protocol, "round": rnd,
            "connections": sc.connections, "body_bytes": sc.body_size, "requests": r.requests,
            "messages": r.messages, "received": r.received, "seconds": round(r.wall, 3),
            "req_per_s": round(r.req_rate), "msgs_per_s": round(r.msg_rate),
            "p50_ms": round(1e3 * r.percentile(50), 3), "p90_ms": round(1e3 * r.percentile(90), 3),
            "p99_ms": round(1e3 * r.percentile(99), 3), "errors": r.errors, "error_count": r.error_count,
            "reconnects": r.reconnects, "drained": r.drained,
            "client_cpu_us_per_req": round(1e6 * r.client_cpu / max(1, r.requests), 1)}


def _fmt_row(row: dict) -> str:
    if row["connections"] == 1:
        main = f"p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms"
    else:
        main = f"{row['msgs_per_s']:>7,} msgs/s {row['req_per_s']:>7,} req/s"
    err = f"  ERRORS {row['errors']}" if row["error_count"] else ""
    return (f"{main}  cpu srv {row.get('server_cpu_pct', '?')}% ({row.get('server_cpu_us_per_req', '?')} us/req) "
            f"gen {row.get('client_cpu_pct', '?')}% other {row.get('other_cpu_pct', '?')}%{err}")


# -- summary ------------------------------------------------------------------------------------

def _best(runs: list[dict]) -> dict[tuple[str, str, str], dict]:
    best: dict = {}
    for r in runs:
        k = (r["scenario"], r["target"], r["protocol"])
        cur = best.get(k)
        if r["connections"] == 1:
            better = cur is None or r["p50_ms"] < cur["p50_ms"]
        else:
            better = cur is None or r["msgs_per_s"] > cur["msgs_per_s"]
        if better:
            best[k] = r
    return best


def _ratios(best: dict) -> dict[str, float]:
    out = {}
    for sc in SCENARIOS:
        for peer in (SQSLITE, MOTO):
            for proto in (JSON, QUERY):
                for peer_proto in (JSON, QUERY):
                    ours, theirs = best.get((sc.key, OURS, proto)), best.get((sc.key, peer, peer_proto))
                    if not ours or not theirs:
                        continue
                    if sc.mode == "blocking":
                        # latency: how many times faster (peer p50 / our p50)
                        if ours["p50_ms"] > 0:
                            out[f"{sc.key} p50: {peer}({peer_proto}) / ours({proto})"] = \
                                round(theirs["p50_ms"] / ours["p50_ms"], 2)
                    elif theirs["msgs_per_s"] > 0:
                        out[f"{sc.key}: ours({proto}) / {peer}({peer_proto})"] = \
                            round(ours["msgs_per_s"] / theirs["msgs_per_s"], 2)
        triv = best.get((sc.key, TRIVIAL, JSON))
        for proto in (JSON, QUERY):
            ours = best.get((sc.key, OURS, proto))
            if triv and ours:
                if sc.mode == "blocking":
                    out[f"{sc.key} p50: trivial / ours({proto})"] = round(triv["p50_ms"] / ours["p50_ms"], 2)
                elif triv["req_per_s"]:
                    out[f"{sc.key}: ours({proto}) / trivial handler, req/s"] = \
                        round(ours["req_per_s"] / triv["req_per_s"], 3)
    return out


def _paired_ratios(runs: list[dict]) -> dict[str, list[float]]:
    """Throughput ratios ours/peer within each round (runs minutes apart rather than the best of
    each side, which may come from different moments of a noisy machine)."""
    by_round: dict = {}
    for r in runs:
        by_round[(r["scenario"], r["target"], r["protocol"], r["round"])] = r
    out: dict[str, list[float]] = {}
    for (sc, target, proto, rnd), ours in sorted(by_round.items()):
        if target != OURS or ours["connections"] == 1:
            continue
        for (sc2, peer, pproto, rnd2), theirs in sorted(by_round.items()):
            if sc2 == sc and rnd2 == rnd and peer != OURS and theirs["msgs_per_s"] > 0:
                key = f"{sc}: ours({proto}) / {peer}({pproto})"
                if peer == TRIVIAL:
                    key, val = f"{sc}: ours({proto}) / trivial handler, req/s", ours["req_per_s"] / theirs["req_per_s"]
                    if ours.get("server_cpu_us_per_req") and theirs.get("server_cpu_us_per_req"):
                        out.setdefault(f"{sc}: server CPU per request, ours({proto}) / trivial handler", []).append(
                            round(ours["server_cpu_us_per_req"] / theirs["server_cpu_us_per_req"], 2))
                else:
                    val = ours["msgs_per_s"] / theirs["msgs_per_s"]
                out.setdefault(key, []).append(round(val, 3 if peer == TRIVIAL else 2))
    return out


def _goals(best: dict, peers: dict, ceiling: dict, paired: dict, runs: list[dict]) -> list[dict]:
    def get(sc, target, proto, field):
        r = best.get((sc, target, proto))
        return None if r is None else r[field]

    goals = []

    def goal(name, measured, target, op, note=""):
        met = None if measured is None else (measured >= target if op == ">=" else measured <= target)
        goals.append({"goal": name, "measured": measured, "target": f"{op} {target}", "met": met, "note": note})

    sq_note = "" if peers.get(SQSLITE, {}).get("available") else \
        f"sqslite unavailable: {peers.get(SQSLITE, {}).get('reason')}"
    sq = get("send_100B", SQSLITE, QUERY, "msgs_per_s")
    for proto in (QUERY, JSON):
        ours = get("send_100B", OURS, proto, "msgs_per_s")
        ratio = round(ours / sq, 2) if ours and sq else None
        rounds = paired.get(f"send_100B: ours({proto}) / sqslite(query)")
        note = sq_note or (f"best vs best; within each round: {rounds}" if rounds else "")
        goal(f"send 100 B, 16 conns, ours ({proto}) / sqslite (query)", ratio, 1.5, ">=", note)
    for proto in (JSON, QUERY):
        goal(f"send 100 B, 16 conns ({proto}), msgs/s", get("send_100B", OURS, proto, "msgs_per_s"), 5000, ">=")
    goal("send-batch 10x100 B, 16 conns (json), msgs/s", get("send_batch", OURS, JSON, "msgs_per_s"), 25000, ">=")
    goal("receive+delete-batch cycle, 16 conns (json), msgs/s",
         get("receive_delete", OURS, JSON, "msgs_per_s"), 5000, ">=")
    goal("p50 latency, send 100 B, 1 conn (json), ms", get("latency_1conn", OURS, JSON, "p50_ms"), 0.5, "<=")
    ours_rps, triv_rps = get("send_100B", OURS, JSON, "req_per_s"), get("send_100B", TRIVIAL, JSON, "req_per_s")
    note = "both measured with bench.loadgen, 16 conns, the same request bytes"
    wrk = (ceiling.get("wrk") or {})
    w_ours, w_triv = (wrk.get("elasticmq_send_100B_json") or {}).get("req_per_s"), \
        (wrk.get("trivial_send_100B_json") or {}).get("req_per_s")
    rounds = paired.get("send_100B: ours(json) / trivial handler, req/s")
    if rounds:
        note += f"; within each round: {[round(100 * x, 1) for x in rounds]}%"
    if w_ours and w_triv:
        note += f"; with wrk as the client: {w_ours:,} / {w_triv:,} = {100 * w_ours / w_triv:.0f}%"
    goal("send 100 B (json) req/s as % of the trivial handler on the same HTTP stack",
         round(100 * ours_rps / triv_rps, 1) if ours_rps and triv_rps else None, 50, ">=", note)
    # Server CPU per request: steadier than req/s on a shared machine, and what the 50% means
    # (when the server is the limit, req/s is the inverse of its CPU per request).
    # Each side's lowest of its rounds, as throughput takes each side's best round.
    ours_cpu, triv_cpu = (min((r["server_cpu_us_per_req"] for r in runs if r["scenario"] == "send_100B"
                               and r["target"] == t and r["protocol"] == JSON), default=None)
                          for t in (OURS, TRIVIAL))
    rounds = paired.get("send_100B: server CPU per request, ours(json) / trivial handler")
    goal("send 100 B (json) server CPU per request / the trivial handler's",
         round(ours_cpu / triv_cpu, 2) if ours_cpu and triv_cpu else None, 2.0, "<=",
         f"{ours_cpu} / {triv_cpu} us" + (f"; within each round: {rounds}" if rounds else ""))
    return goals


def _print_table(best: dict, ratios: dict, goals: list[dict], ceiling: dict, peers: dict, env: dict) -> None:
    print("\nendpoint (real server processes on 127.0.0.1, keep-alive HTTP/1.1, every response validated; "
          "best of rounds)")
    print(f"{'scenario':24} {'target':13} {'proto':5} {'conns':>5} {'msgs/s':>8} {'req/s':>8} {'p50 ms':>7} "
          f"{'p99 ms':>7} {'errors':>6} {'srv%':>5} {'us/req':>7} {'gen%':>5} {'other%':>6}")
    for sc in SCENARIOS:
        for target, proto in sc.targets:
            r = best.get((sc.key, target, proto))
            if r is None:
                print(f"{sc.title:24} {target:13} {proto:5}   (not run: "
                      f"{peers.get(target, {}).get('reason', 'unavailable')[:60]})")
                continue
            print(f"{sc.title:24} {target:13} {proto:5} {r['connections']:>5} {r['msgs_per_s']:>8,} "
                  f"{r['req_per_s']:>8,} {r['p50_ms']:>7.3f} {r['p99_ms']:>7.3f} {r['error_count']:>6} "
                  f"{r['server_cpu_pct']:>5} {r.get('server_cpu_us_per_req', float('nan')):>7.1f} "
                  f"{r['client_cpu_pct']:>5} {r['other_cpu_pct']:>6}")
    print(f"  generator: {ceiling['client_cpu_us_per_req']} us CPU per request (user+sys, incl. loopback) -> "
          f"~{ceiling['cpu_bound_ceiling_per_core_req_per_s']:,} req/s per core; drove the trivial handler at "
          f"{ceiling['measured_against_trivial_req_per_s']:,} req/s")
    wrk = ceiling.get("wrk") or {}
    for k, v in wrk.items():
        if v and v.get("req_per_s") is not None:
            print(f"  wrk cross-check {k}: {v['req_per_s']:,} req/s, p50 {v['p50_ms']} ms (non-2xx {v['non_2xx']}; "
                  f"wrk {v.get('client_cpu_us_per_req')} us CPU/req; cpu srv {v['server_cpu_pct']}% "
                  f"wrk {v['client_cpu_pct']}% other {v['other_cpu_pct']}%)")
    print(f"  machine: {env['cpus']} cpus, load avg before {env['loadavg_before']}, after {env['loadavg_after']}")
    for k, v in ratios.items():
        print(f"  ratio {k}: {v}")
    for g in goals:
        mark = {True: "MET", False: "NOT MET", None: "NOT MEASURED"}[g["met"]]
        print(f"  goal {g['goal']}: {g['measured']} ({g['target']}) {mark}"
              + (f"  [{g['note']}]" if g["note"] else ""))


def run(quick: bool = False) -> dict:
    bench = Bench(quick)
    env = {"cpus": os.cpu_count(), "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    print(f"endpoint bench: {'quick, ' if quick else ''}{bench.rounds} round(s) of {bench.duration:.0f} s "
          f"per scenario and target; starting servers ...", flush=True)
    bench.pool = Pool(PROCESSES)
    try:
        bench.start_servers()
        bench.warm_up()
        ceiling = bench.generator_ceiling()
        bench.run_all()
    finally:
        bench.pool.close()
        bench.stop_servers()
    env["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    best = _best(bench.runs)
    ratios = _ratios(best)
    paired = _paired_ratios(bench.runs)
    goals = _goals(best, bench.peers, ceiling, paired, bench.runs)
    _print_table(best, ratios, goals, ceiling, bench.peers, env)
    return {
        "config": {"duration_s": bench.duration, "rounds": bench.rounds, "connections": CONNECTIONS,
                   "generator_processes": PROCESSES, "prefill_messages": bench.prefill_messages,
                   "prefill_max_s": bench.prefill_max_s, "max_64KiB_requests": MAX_64K_REQUESTS},
        "environment": env,
        "peers": bench.peers,
        "not_compared": {f"{t}/{s}": why for (t, s), why in NOT_COMPARED.items()},
        "peer_notes": PEER_NOTES,
        "generator": ceiling,
        "results": [best[k] for k in sorted(best)],
        "ratios": ratios,
        "ratios_within_rounds": paired,
        "goals": goals,
        "errors_total": sum(r["error_count"] for r in bench.runs),
        "runs": bench.runs,
    }


def suite(quick: bool) -> dict:
    """``python -m bench --only endpoint``: prints the table, returns the JSON report."""
    import platform

    report = run(quick)
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {"benchmark": "endpoint", "machine": machine, **report}
