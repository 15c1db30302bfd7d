"""What verifying SigV4 costs: sends against a server with ``[auth] mode = "sigv4"`` and one with
``"off"``, side by side in one run.

Two single-node `elasticmq-py serve` processes on 127.0.0.1, up for the whole run: one verifies
every request's signature (elasticmq_py/auth/sigv4.py), the other checks nothing. The load is the
endpoint benchmark's send 100 B at 16 connections (bench/loadgen), in JSON and in Query; requests
to the sigv4 server are signed by botocore's SigV4Auth when each job starts and then sent again
and again (a signature stays valid for 15 minutes and has no nonce), so the generator's cost is
the same for both and the server verifies each request in full. The two servers take turns,
round after round, the order reversed every other round; each round's ratio sigv4 / off is taken
(runs seconds apart), then their median. CPU per send is the server process's. Goal: sigv4
throughput at least 85% of off.

    python -m bench --only sigv4 [--quick]
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from bench import endpoint_bench as eb
from bench.loadgen import servers
from bench.loadgen.runner import Pool
from bench.loadgen.sqs import JSON, QUERY
from bench.process_cpu import loadavg

SIGV4, OFF = "sigv4", "off"
GOAL_RATIO = 0.85
KEY = ("AKIDBENCH", "bench-secret-access-key", "us-east-1")
ACCOUNT = "123456789012"
SCENARIO = eb.SCENARIOS[0]   # send 100 B, 16 connections


class _Bench(eb.Bench):
    def start_servers(self, config: Path) -> None:
        self.servers[OFF] = servers.start_ours()
        self.servers[SIGV4] = servers.start_ours(config, credentials=KEY)

    def _job(self, sc, server, protocol, url, **kw):
        return dataclasses.replace(super()._job(sc, server, protocol, url, **kw), credentials=server.credentials)


def suite(quick: bool, log=print) -> dict:
    machine = {"python": __import__("platform").python_version(), "cpus": os.cpu_count(),
               "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    before = loadavg()
    bench = _Bench(quick, log)
    bench.rounds = 2 if quick else 5
    bench.pool = Pool(eb.PROCESSES)
    with tempfile.TemporaryDirectory(prefix="sigv4-bench-") as d:
        config = Path(d) / "auth.toml"
        config.write_text('[auth]\nmode = "sigv4"\n[[auth.credentials]]\n'
                          f'access-key-id = "{KEY[0]}"\nsecret-access-key = "{KEY[1]}"\naccount-id = "{ACCOUNT}"\n')
        try:
            bench.start_servers(config)
            _warm_up(bench)
            log(f"sigv4: send 100 B, 16 connections, sigv4 and off, JSON and Query, {bench.rounds} rounds "
                f"of {bench.duration:g} s")
            for rnd in range(bench.rounds):
                for protocol in (JSON, QUERY):
                    for target in ((SIGV4, OFF) if rnd % 2 == 0 else (OFF, SIGV4)):
                        row = bench.run_one(SCENARIO, target, protocol, rnd)
                        log(f"  [{rnd + 1}/{bench.rounds}] {target:6} {protocol:5} {eb._fmt_row(row)}")
        finally:
            bench.stop_servers()
            bench.pool.close()
    out = report(bench.runs, machine, {"loadavg_before": before, "loadavg_after": loadavg()},
                 {"duration_s": bench.duration, "rounds": bench.rounds, "connections": SCENARIO.connections,
                  "generator_processes": eb.PROCESSES}, log)
    out["loop_us"] = loop_costs(20_000 if quick else 100_000)
    log(f"  in a tight loop: {out['loop_us']}")
    return out


def loop_costs(n: int) -> dict[str, float]:
    """What verifying one JSON send costs in a tight loop, in this process (µs, best of five),
    and the three hashes it cannot do without: the floor under any verifier written in Python."""
    import hashlib
    import json
    import timeit

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    from elasticmq_py.auth.credentials import Credential
    from elasticmq_py.auth.sigv4 import Verifier

    body = json.dumps({"QueueUrl": f"http://localhost:9324/{ACCOUNT}/bench", "MessageBody": "x" * 100}).encode()
    req = AWSRequest("POST", "http://localhost:9324/", data=body,
                     headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessage"})
    SigV4Auth(Credentials(KEY[0], KEY[1]), "sqs", KEY[2]).add_auth(req)
    headers = {k.lower(): v for k, v in req.prepare().headers.items()}
    headers["host"] = "localhost:9324"
    verifier = Verifier([Credential(KEY[0], KEY[1], ACCOUNT)])
    now = time.time()
    assert verifier.verify("POST", "/", b"", headers, body, now).account_id == ACCOUNT
    canonical = b"c" * 320   # a JSON send's canonical request is about this long
    inner = hashlib.sha256(b"\x36" * 64)
    outer = hashlib.sha256(b"\x5c" * 64)
    to_sign = b"s" * 120

    def hmac_prepared() -> str:
        i = inner.copy()
        i.update(to_sign)
        o = outer.copy()
        o.update(i.digest())
        return o.hexdigest()

    def best(fn) -> float:
        return round(min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6, 3)

    return {"verify_json_send": best(lambda: verifier.verify("POST", "/", b"", headers, body, now)),
            "sha256_body": best(lambda: hashlib.sha256(body).hexdigest()),
            "sha256_canonical": best(lambda: hashlib.sha256(canonical).hexdigest()),
            "hmac_prepared": best(hmac_prepared)}


def _warm_up(bench: _Bench) -> None:
    """An unmeasured burst against each server first, as the endpoint benchmark does."""
    for server in bench.servers.values():
        url = server.create_queue(f"bench-warmup-{uuid.uuid4().hex[:8]}")
        try:
            bench.pool.run(bench._job(SCENARIO, server, JSON, url, duration=1.5))
        finally:
            server.delete_queue(url)


def report(runs: list[dict], machine: dict, env: dict, config: dict, log=print) -> dict:
    by = {(r["target"], r["protocol"], r["round"]): r for r in runs}
    rounds = sorted({r["round"] for r in runs})
    results, ratios = {}, {}
    for protocol in (JSON, QUERY):
        for target in (SIGV4, OFF):
            rows = [r for r in runs if (r["target"], r["protocol"]) == (target, protocol)]
            results[f"{target} {protocol}"] = {
                "msgs_per_s_median": round(statistics.median(r["msgs_per_s"] for r in rows)),
                "msgs_per_s_best": max(r["msgs_per_s"] for r in rows),
                "p50_ms_median": round(statistics.median(r["p50_ms"] for r in rows), 3),
                "server_cpu_us_per_send_median": round(statistics.median(r["server_cpu_us_per_req"] for r in rows), 1),
                "errors": sum(r["error_count"] for r in rows)}
        pairs = [(by[(SIGV4, protocol, n)], by[(OFF, protocol, n)]) for n in rounds]
        throughput = [round(a["msgs_per_s"] / b["msgs_per_s"], 3) for a, b in pairs if b["msgs_per_s"]]
        cpu = [round(a["server_cpu_us_per_req"] / b["server_cpu_us_per_req"], 3)
               for a, b in pairs if b["server_cpu_us_per_req"]]
        ratios[protocol] = {"throughput": {"per_round": throughput, "median": round(statistics.median(throughput), 3)},
                            "cpu_per_send": {"per_round": cpu, "median": round(statistics.median(cpu), 3)}}
    met = all(ratios[p]["throughput"]["median"] >= GOAL_RATIO for p in (JSON, QUERY))
    for p in (JSON, QUERY):
        log(f"  sigv4 / off, {p}: throughput {ratios[p]['throughput']['median']:.3f}, "
            f"CPU per send {ratios[p]['cpu_per_send']['median']:.3f}")
    log(f"  goal: throughput >= {GOAL_RATIO} of off in both protocols: {'met' if met else 'not met'}")
    return {"benchmark": "sigv4", "machine": machine, "environment": env, "config": config,
            "results": results, "ratios": ratios, "goal": {"throughput_ratio_at_least": GOAL_RATIO, "met": met},
            "runs": runs}
