"""Parts 2 and 4 of the replication benchmark: kill -9 rounds. Per round, unique sends at full speed
to the master, the kill, probes through both survivors, and a drain through the new master: what
`none` loses that `majority` keeps, and how long failover takes end to end."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import multiprocessing as mp
import os
import statistics
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from bench.loadgen.sqs import AMZ_DATE, AUTH, JSON, JSON_CT, Api
from bench.process_cpu import loadavg
from bench.replication_setup import (
    ALL, CONNECTIONS, MAJORITY, NONE, PROCESSES, Sizes, Target, port_of, call, create_queue, queue_url_at,
)


def _warm(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def race_sender(port: int, queue_url: str, tag: str, connections: int, start_at: float, max_s: float) -> dict:
    """Runs in a worker process: send unique 100-byte bodies on `connections` keep-alive
    connections as fast as the master answers, until the connections die (the kill) or `max_s`.
    Returns the acknowledged bodies (200, a MessageId and the right MD5)."""
    return asyncio.run(_race(port, queue_url, tag, connections, start_at, max_s))


async def _race(port: int, queue_url: str, tag: str, connections: int, start_at: float, max_s: float) -> dict:
    api = Api(JSON, f"localhost:{port}", queue_url)
    acked: list[str] = []
    errors: Counter[str] = Counter()
    state = {"requests": 0, "in_flight_at_end": 0, "last_ack": 0.0}

    async def conn(i: int) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as e:
            errors[f"connect_failed:{type(e).__name__}:{e}"[:120]] += 1
            return
        n = 0
        deadline = start_at + max_s
        try:
            while time.time() < deadline:
                n += 1
                body = f"{tag}-{i:03d}-{n:08d}-".ljust(100, "x")
                writer.write(api.send(body))
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            length = int(v)
                    data = await reader.readexactly(length)
                except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    state["in_flight_at_end"] += 1
                    return
                state["requests"] += 1
                status = int(head.split(b" ", 2)[1])
                if status != 200:
                    errors[api.error_kind(status, data)] += 1
                    continue
                o = json.loads(data)
                if o.get("MessageId") and o.get("MD5OfMessageBody") == hashlib.md5(body.encode()).hexdigest():
                    acked.append(body)
                    state["last_ack"] = time.time()
                else:
                    errors["bad_send_response"] += 1
        finally:
            writer.close()

    await asyncio.sleep(max(0.0, start_at - time.time()))
    t0 = time.time()
    if t0 > start_at + 0.2:
        errors["started_late"] += 1
    await asyncio.gather(*(conn(i) for i in range(connections)))
    return {"acked": acked, "errors": dict(errors), "t0": t0, **state}


class Prober:
    """SendMessage through one endpoint every few ms on its own connections (a failed or refused
    attempt is retried at once), recording (sent, answered, status) of every attempt."""

    def __init__(self, port: int, queue_url: str, threads: int = 2, pace_s: float = 0.005):
        self.port, self.url, self.pace = port, queue_url, pace_s
        self.attempts: list[tuple[float, float, int | str]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(threads)]

    def start(self) -> "Prober":
        for t in self.threads:
            t.start()
        return self

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(5)

    def _loop(self, k: int) -> None:
        conn = None
        headers = {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.SendMessage", "X-Amz-Date": AMZ_DATE,
                   "Authorization": AUTH, "Host": f"localhost:{self.port}"}
        i = 0
        while not self.stop.is_set():
            i += 1
            t0 = time.time()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3)
                conn.request("POST", "/", json.dumps({"QueueUrl": self.url, "MessageBody": f"probe {k} {i}"}), headers)
                r = conn.getresponse()
                r.read()
                status: int | str = r.status
            except (OSError, http.client.HTTPException) as e:
                status = type(e).__name__
                if conn is not None:
                    conn.close()
                conn = None
            self.attempts.append((t0, time.time(), status))
            time.sleep(self.pace)
        if conn is not None:
            conn.close()

    def first_ack_after(self, t_kill: float, sent_after: bool = True) -> float | None:
        ok = [b for a, b, s in self.attempts if s == 200 and b > t_kill and (a >= t_kill or not sent_after)]
        return min(ok) - t_kill if ok else None


def drain_bodies(port: int, url: str, empties: int = 3) -> list[str]:
    """Every body the queue hands out (received with a long visibility timeout, not deleted)."""
    out: list[str] = []
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.ReceiveMessage", "X-Amz-Date": AMZ_DATE,
               "Authorization": AUTH, "Host": f"localhost:{port}"}
    req = json.dumps({"QueueUrl": url, "MaxNumberOfMessages": 10, "VisibilityTimeout": 3600, "WaitTimeSeconds": 0})
    empty, failures = 0, 0
    try:
        while empty < empties:
            c.request("POST", "/", req, headers)
            r = c.getresponse()
            body = r.read()
            if r.status != 200:
                failures += 1
                if failures > 200:
                    raise RuntimeError(f"drain: {r.status} {body[:200]!r}")
                time.sleep(0.05)
                continue
            msgs = json.loads(body).get("Messages") or []
            empty = 0 if msgs else empty + 1
            out.extend(m["Body"] for m in msgs)
    finally:
        c.close()
    return out


class KillPart:
    """Parts 2 and 4: per round, full-speed unique sends to the master, a kill -9 of the master,
    probes through both survivors; then the queue is drained through the new master."""

    def __init__(self, clusters: dict[str, Target], sizes: Sizes, log=print):
        self.clusters, self.sizes, self.log = clusters, sizes, log
        self.rounds: list[dict] = []

    def run(self) -> dict:
        with ProcessPoolExecutor(PROCESSES, mp_context=mp.get_context("spawn")) as ex:
            # Every worker started and this module imported before the first round: a worker
            # spawned on demand would connect after the kill.
            list(ex.map(_warm, [0.5] * PROCESSES))
            for i in range(self.sizes.kill_rounds):
                for policy in ((NONE, MAJORITY) if i % 2 == 0 else (MAJORITY, NONE)):
                    for _attempt in range(3):
                        try:
                            row = self.one(ex, self.clusters[policy], i)
                        except Exception as e:  # a round that cannot finish is reported, the rest go on
                            row = {"policy": policy, "round": i, "failed": f"{type(e).__name__}: {e}"[:500]}
                            self.log(f"  kill round {i + 1} {policy}: FAILED {row['failed']}")
                        self.rounds.append(row)
                        if "invalid" not in row:
                            break
                        self.log(f"  kill round {i + 1} {policy}: not counted ({row['invalid']}); again")
        return self.summary()

    def one(self, ex: ProcessPoolExecutor, t: Target, i: int) -> dict:
        c = t.cluster
        t.ready()
        master = t.master
        mport = port_of(c, master)
        survivors = [n for n in ALL if n != master]
        tag = f"{t.name}{i}-{uuid.uuid4().hex[:6]}"
        url = create_queue(mport, f"race-{tag}")
        probe_url = create_queue(mport, f"probe-{tag}")
        start_at = time.time() + 0.5
        futs = [ex.submit(race_sender, mport, url, f"{tag}w{w}", CONNECTIONS // PROCESSES, start_at, 30.0)
                for w in range(PROCESSES)]
        time.sleep(max(0.0, start_at + self.sizes.send_before_kill - 0.3 - time.time()))
        probers = {n: Prober(port_of(c, n), queue_url_at(port_of(c, n), probe_url)).start() for n in survivors}
        time.sleep(0.3)
        la = loadavg()[0]
        still = c.stable_master(members=set(ALL))() == master
        c.kill(master)
        t_kill = c.killed_at(master)
        senders = [f.result(timeout=60) for f in futs]
        new = c.wait_for("a new master", c.stable_master(among=survivors), 20)
        deadline = time.time() + 15
        while time.time() < deadline and any(p.first_ack_after(t_kill) is None for p in probers.values()):
            time.sleep(0.05)
        for p in probers.values():
            p.close()
        activated = [e["ts"] for e in c.history(new) if e["event"] == "activated" and e["ts"] >= t_kill]
        nport = port_of(c, new)
        got = drain_bodies(nport, queue_url_at(nport, url))
        acked = [b for s in senders for b in s["acked"]]
        got_set = set(got)
        lost = [b for b in acked if b not in got_set]
        send_s = max(s["last_ack"] for s in senders) - min(s["t0"] for s in senders) if acked else 0.0
        rate = len(acked) / send_s if send_s > 0 else 0.0
        first = {n: p.first_ack_after(t_kill) for n, p in probers.items()}
        first_any = {n: p.first_ack_after(t_kill, sent_after=False) for n, p in probers.items()}
        row = {
            "policy": t.name, "round": i, "old_master": master, "new_master": new,
            "acked_sends": len(acked), "send_rate_per_s": round(rate), "sending_s": round(send_s, 3),
            "unknown_outcome_in_flight": sum(s["in_flight_at_end"] for s in senders),
            "send_errors": dict(sum((Counter(s["errors"]) for s in senders), Counter())),
            "received_after_failover": len(got), "duplicates_received": len(got) - len(got_set),
            "lost_acked": len(lost), "lost_pct": round(100 * len(lost) / len(acked), 3) if acked else None,
            "loss_window_ms": round(1e3 * len(lost) / rate, 1) if rate else None,
            "kill_to_new_master_active_s": round(min(activated) - t_kill, 4) if activated else None,
            "kill_to_first_ack_s": {n: (round(v, 4) if v is not None else None) for n, v in first.items()},
            "kill_to_first_ack_any_send_time_s": {n: (round(v, 4) if v is not None else None)
                                                  for n, v in first_any.items()},
            "probe_attempts_after_kill": {n: Counter(str(s) for a, b, s in p.attempts if a >= t_kill)
                                          for n, p in probers.items()},
            "loadavg": la,
        }
        e2e = [v for v in first.values() if v is not None]
        row["kill_to_first_ack_min_s"] = round(min(e2e), 4) if e2e else None
        if not still or not activated:
            # Mastership had moved (a lease lapse on the busy machine) just before the kill:
            # what was killed was not the serving master, so this round measures nothing.
            row["invalid"] = "the killed node was not the active master at the kill"
        self.log(f"  kill round {i + 1}/{self.sizes.kill_rounds} {t.name:8} acked {len(acked):6} "
                 f"({row['send_rate_per_s']:,}/s) lost {len(lost):5} ({row['lost_pct']}%), new master active "
                 f"+{row['kill_to_new_master_active_s']} s, first ack via survivors "
                 f"{ {n: v for n, v in row['kill_to_first_ack_s'].items()} }")
        for q in (url, probe_url):
            call(nport, "DeleteQueue", {"QueueUrl": queue_url_at(nport, q)}, retry_s=5)
        c.start(master)
        t.master = None
        t.ready(timeout=60)
        return row

    def summary(self) -> dict:
        out: dict[str, Any] = {}
        for policy in (NONE, MAJORITY):
            rows = [r for r in self.rounds if r["policy"] == policy and "failed" not in r and "invalid" not in r]
            acked = sum(r["acked_sends"] for r in rows)
            lost = sum(r["lost_acked"] for r in rows)
            e2e = [r["kill_to_first_ack_min_s"] for r in rows if r["kill_to_first_ack_min_s"] is not None]
            act = [r["kill_to_new_master_active_s"] for r in rows if r["kill_to_new_master_active_s"] is not None]
            out[policy] = {
                "rounds": len(rows), "failed_rounds": sum(1 for r in self.rounds if r["policy"] == policy and "failed" in r),
                "invalid_rounds": sum(1 for r in self.rounds if r["policy"] == policy and "invalid" in r),
                "acked_sends": acked, "lost_acked": lost,
                "lost_pct": round(100 * lost / acked, 3) if acked else None,
                "rounds_with_loss": sum(1 for r in rows if r["lost_acked"]),
                "lost_per_round": [r["lost_acked"] for r in rows],
                "loss_window_ms_median": _median([r["loss_window_ms"] for r in rows if r["loss_window_ms"] is not None]),
                "kill_to_first_ack_s": _stats(e2e),
                "kill_to_new_master_active_s": _stats(act),
            }
        return {"by_policy": out, "rounds": self.rounds}


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 4) if xs else None


def _stats(xs: list[float]) -> dict:
    if not xs:
        return {"n": 0}
    s = sorted(xs)
    return {"n": len(s), "median_s": round(statistics.median(s), 4), "max_s": round(s[-1], 4),
            "min_s": round(s[0], 4), "p90_s": round(s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))], 4)}
