"""Part 3 of the replication benchmark: a state transfer of a large state to a joining node under a
steady send load, and what it costs the master's throughput meanwhile."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from bench.loadgen.runner import Job, Pool, Result
from bench.loadgen.sqs import AMZ_DATE, AUTH, JSON, JSON_CT
from bench.process_cpu import cpu_of, machine_busy
from bench.replication_setup import (
    ALL, CONNECTIONS, PROCESSES, Sizes, port_of, replicas_caught_up, call, create_queue,
)

# Part 3 loads the machine flat out (three nodes, the joiner restoring a million messages, the
# generator) next to whatever else runs here; with the LAN timers a node starved for 0.2 s
# triggers an election, and the part would measure the scheduler rather than the transfer.
# These are the timers tests/cluster/test_replication.py's join test uses for the same reason.
TRANSFER_TIMING_KW = dict(heartbeat=0.1, election_min=0.8, election_max=1.6, vote_guard=0.7, lease=0.6,
                          leader_fallback=2.0, connection_timeout=2.0, keepalive=0.4, suspect=2.0, debounce=0.5)
CHUNK_S, AFTER_S = 10.0, 4.0   # part 3: the steady load's chunks; how long it goes on after catch-up
TRANSFER_TIMING = ", ".join(f"{k}={v}" for k, v in TRANSFER_TIMING_KW.items())



class Sampler:
    """Every `every` s: how many messages the steady-load queue holds (the master's completed
    sends; a read, answered without replication) and the CPU of each node."""

    def __init__(self, port: int, url: str, pids: Callable[[], dict[str, int]], every: float = 0.25):
        self.port, self.url, self.pids, self.every = port, url, pids, every
        self.samples: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "Sampler":
        self.thread.start()
        return self

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)

    def _loop(self) -> None:
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Content-Type": JSON_CT, "X-Amz-Target": "AmazonSQS.GetQueueAttributes", "X-Amz-Date": AMZ_DATE,
                   "Authorization": AUTH, "Host": f"localhost:{self.port}"}
        req = json.dumps({"QueueUrl": self.url, "AttributeNames": ["ApproximateNumberOfMessages"]})
        nxt = time.time()
        while not self.stop.is_set():
            t0 = time.time()
            try:
                c.request("POST", "/", req, headers)
                r = c.getresponse()
                body = r.read()
                n = int(json.loads(body)["Attributes"]["ApproximateNumberOfMessages"]) if r.status == 200 else None
            except (OSError, http.client.HTTPException, ValueError, KeyError):
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                n = None
            t1 = time.time()
            self.samples.append({"t": t1, "rtt": t1 - t0, "count": n,
                                 "cpu": {k: cpu_of(p) for k, p in self.pids().items()}, "busy": machine_busy()})
            nxt += self.every
            self.stop.wait(max(0.0, nxt - time.time()))
        c.close()

    def rate(self, a: float, b: float) -> dict | None:
        """Sends/s completed between wall times a and b (interpolated from the samples), and
        the CPU share of each node and of the machine over the same span."""
        s = [x for x in self.samples if x["count"] is not None]
        lo = [x for x in s if x["t"] <= a]
        hi = [x for x in s if x["t"] >= b] or [x for x in s if x["t"] > a][-1:]
        if not lo or not hi:
            return None
        x, y = lo[-1], hi[0]
        span = y["t"] - x["t"]
        if span <= 0:
            return None
        cpu = {k: round(100 * (y["cpu"][k] - x["cpu"].get(k, y["cpu"][k])) / span)
               for k in y["cpu"] if k in x["cpu"]}
        return {"from": round(x["t"], 3), "to": round(y["t"], 3), "seconds": round(span, 3),
                "sends_per_s": round((y["count"] - x["count"]) / span), "cpu_pct": cpu,
                "machine_busy_pct": round(100 * (y["busy"] - x["busy"]) / span),
                "max_sample_gap_s": round(max((q["t"] - p["t"] for p, q in zip(s, s[1:]) if x["t"] <= p["t"] < y["t"]),
                                              default=0.0), 3)}


class TransferPart:
    def __init__(self, workdir: Path, pool: Pool, sizes: Sizes, log=print):
        self.workdir, self.pool, self.sizes, self.log = workdir, pool, sizes, log

    def run(self) -> dict:
        from cluster.config import Timing
        from elasticmq_py.testing.cluster import Cluster

        c = Cluster(self.workdir, ALL, timing=Timing(**TRANSFER_TIMING_KW))
        # A 16 MB replication log: the fill (~230 MB of mutations) trims it long before the join,
        # so only a transfer can bring the empty joiner up. Not smaller: 1 MB (as in the 100k
        # join test) is half a second of history at this fill rate, so any member that fell
        # behind for longer under load would need a 1M-message transfer of its own too.
        c.replication_config = {"policy": "majority", "log-limit-mb": 16}
        self.partial: dict[str, Any] = {}
        try:
            return self._run(c)
        except Exception as e:
            # What happened instead is the result: the timeline from the nodes' histories.
            self.log(f"  transfer did not complete: {type(e).__name__}: {str(e)[:300]}")
            return {**self.partial, "converged": False, "failure": f"{type(e).__name__}: {e}".split("; statuses")[0][:500],
                    "timeline": _timeline(c, self.partial.get("t_join"))}
        finally:
            c.close()

    def _run(self, c: Any) -> dict:
        n = self.sizes.transfer_messages
        for name in ("n1", "n2"):
            c.start(name)
        master = c.wait_for("a master of two", c.stable_master(among=["n1", "n2"]), 20)
        mport = port_of(c, master)
        host = f"localhost:{mport}"
        bulk = create_queue(mport, "bulk")
        steady = create_queue(mport, "steady")
        t0 = time.time()
        fill = self.pool.run(Job(kind="send_batch", protocol=JSON, port=mport, host_header=host, queue_url=bulk,
                                 connections=CONNECTIONS, processes=PROCESSES, duration=1800.0, body_size=100,
                                 max_messages=n))
        fill_s = time.time() - t0
        self.log(f"  transfer: filled {fill.messages:,} messages in {fill_s:.1f} s "
                 f"({fill.msg_rate:,.0f}/s, errors {fill.errors or 0})")
        c.wait_for("n2 caught up", lambda: replicas_caught_up(c, master), 120)
        status, attrs = call(mport, "GetQueueAttributes", {"QueueUrl": bulk, "AttributeNames": ["All"]})
        held = int(attrs["Attributes"]["ApproximateNumberOfMessages"])
        self.partial.update(messages_filled=fill.messages, fill_seconds=round(fill_s, 1), fill_errors=fill.errors,
                            messages_held_at_join=held, master=master)

        def pids() -> dict[str, int]:
            return {k: p.popen.pid for k, p in c.procs.items() if p.popen.poll() is None}

        sampler = Sampler(mport, steady, pids).start()
        # The load runs in back-to-back chunks until the joiner has caught up (how long that
        # takes is what is measured); the pool's lead between chunks is ~0.5 s without load,
        # every CHUNK_S, in every window alike.
        chunks: list[Result] = []
        stop = threading.Event()

        def load() -> None:
            while not stop.is_set():
                chunks.append(self.pool.run(Job(kind="send", protocol=JSON, port=mport, host_header=host,
                                                 queue_url=steady, connections=CONNECTIONS, processes=PROCESSES,
                                                 duration=CHUNK_S, body_size=100)))

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        t_load = time.time() + 0.4   # the pool's start lead
        time.sleep(0.4 + self.sizes.load_before_join)
        joiner = "n3"
        t_start = time.time()
        self.partial["t_join"] = t_start
        try:
            c.start(joiner)
            t_up = time.time()
            # Generous bounds (the goal is 10 s): past them the transfer is reported as failed.
            lt = c.wait_for("the joiner's state transfer", lambda: ((c.status(joiner) or {}).get("replication") or {})
                            .get("last_transfer"), 60 + n / 5_000, interval=0.1)
            t_transferred = time.time()
            c.wait_for("the joiner caught up", lambda: _caught_up(c, master, joiner), 120, interval=0.1)
            t_caught = time.time()
        except BaseException:
            stop.set()
            self.partial["master_rate_before"] = sampler.rate(t_load + 0.5, t_start)
            self.partial["master_rate_after_join_started"] = sampler.rate(t_start, time.time())
            sampler.close()
            loader.join(CHUNK_S + 60)   # the pool must be idle before anyone closes it
            raise
        time.sleep(AFTER_S)
        stop.set()
        loader.join(CHUNK_S + 60)
        sampler.close()
        end_of_load = time.time()
        # The transfer's window, from the joiner's report: it finished at `at` and took duration_s.
        tr_end = lt.get("at") or t_transferred
        tr_start = tr_end - float(lt.get("duration_s") or 0.0)
        before = sampler.rate(t_load + 0.5, t_start)
        during = sampler.rate(tr_start, tr_end)
        join_to_caught = sampler.rate(t_start, t_caught)
        after = sampler.rate(t_caught + 0.5, t_caught + AFTER_S)
        c.wait_for("all three converge (digests)", lambda: c.converged(ALL), 180)
        views = {n: [e for e in c.history(n) if e["event"] == "view"] for n in ALL}
        masters = sorted({e["master"] for evs in views.values() for e in evs})
        ratio = round(during["sends_per_s"] / before["sends_per_s"], 3) if before and during and before["sends_per_s"] else None
        cost = None
        if during and lt.get("records"):
            # per snapshot record, what the transfer window cost each node beyond serving the
            # load (the master's CPU minus what it spent per send before the join)
            secs = during["seconds"]
            per_send_before = (before["cpu_pct"].get(master, 0) / 100) / max(1, before["sends_per_s"]) if before else 0.0
            m_cpu = during["cpu_pct"].get(master, 0) / 100 * secs
            cost = {"joiner_cpu_s": round(during["cpu_pct"].get(joiner, 0) / 100 * secs, 2),
                    "master_cpu_s": round(m_cpu, 2),
                    "master_cpu_s_beyond_the_load": round(m_cpu - per_send_before * during["sends_per_s"] * secs, 2)}
            cost["joiner_us_per_record"] = round(1e6 * cost["joiner_cpu_s"] / lt["records"], 1)
            cost["master_us_per_record"] = round(1e6 * cost["master_cpu_s_beyond_the_load"] / lt["records"], 1)
        return {
            "messages_filled": fill.messages, "fill_seconds": round(fill_s, 1), "fill_errors": fill.errors,
            "messages_held_at_join": held, "master": master,
            "joiner_last_transfer": lt,
            "transfer_duration_s": lt.get("duration_s"),
            "join_process_start_s": round(t_up - t_start, 3),
            "start_to_transfer_reported_s": round(t_transferred - t_start, 3),
            "start_to_caught_up_s": round(t_caught - t_start, 3),
            "master_rate_before": before, "master_rate_during_transfer": during,
            "master_rate_start_to_caught_up": join_to_caught, "master_rate_after": after,
            "throughput_during_over_before": ratio, "transfer_cpu": cost,
            "throughput_start_to_caught_up_over_before": (round(join_to_caught["sends_per_s"] / before["sends_per_s"], 3)
                                                          if before and join_to_caught and before["sends_per_s"] else None),
            "steady_load": _merged(chunks, end_of_load - t_load),
            "converged": True,
            "masters_seen": masters, "views_seen_by_master": len(views[master]),
            "timeline": _timeline(c, t_start),
            "samples": [{"t": round(s["t"] - t_load, 3), "count": s["count"], "rtt_ms": round(1e3 * s["rtt"], 1)}
                        for s in sampler.samples],
            "marks_s": {"join_started": round(t_start - t_load, 3), "transfer_started": round(tr_start - t_load, 3),
                        "transfer_finished": round(tr_end - t_load, 3), "caught_up": round(t_caught - t_load, 3)},
        }


def _timeline(c: Any, since: float | None) -> dict:
    """From the nodes' histories after `since`: elections, views, transfers, and how long the
    cluster had an active master."""
    from elasticmq_py.testing.cluster import active_intervals

    hs = c.histories()
    since = since or 0.0
    evs = sorted((e for h in hs.values() for e in h if e["ts"] >= since and e["event"] != "op"), key=lambda e: e["ts"])
    end = time.time()
    served = 0.0
    for _, a, b in active_intervals(hs, c.kills, now=end):
        served += max(0.0, min(b, end) - max(a, since))
    count = Counter(e["event"] for e in evs)
    return {
        "seconds_observed": round(end - since, 1),
        "seconds_with_an_active_master": round(served, 1),
        "views": count["view"] // max(1, len(hs)), "terms": sorted({e.get("term") for e in evs if "term" in e})[-1:],
        "masters": [e["master"] for e in evs if e["event"] == "view" and e["node"] == e["master"]],
        "deactivations": Counter(e.get("reason", "?") for e in evs if e["event"] == "deactivated"),
        "transfers_started": Counter(f"{e['node']}->{e['peer']}" if e.get("direction") == "sent" else f"{e['peer']}->{e['node']}"
                                     for e in evs if e["event"] == "transfer_started"),
        "transfers_finished": Counter(f"{e['node']}:{e.get('direction')}:{e.get('peer')}"
                                      for e in evs if e["event"] == "transfer_finished"),
        "sync_divergent": [(e["node"], e.get("divergent")) for e in evs if e["event"] == "synced" and e.get("divergent")],
        "masters_that_had_to_pull_state_first": [e["node"] for e in evs if e["event"] == "sync_transfer"],
    }


def _merged(chunks: list[Result], seconds: float) -> dict:
    lat = sorted(x for r in chunks for x in r.latencies)
    errors: Counter[str] = Counter()
    for r in chunks:
        errors.update(r.errors)
    pick = lambda p: round(1e3 * lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 3) if lat else None  # noqa: E731
    return {"connections": CONNECTIONS, "chunks": len(chunks), "chunk_s": CHUNK_S, "seconds": round(seconds, 1),
            "sends": sum(r.messages for r in chunks), "errors": dict(errors), "p50_ms": pick(50), "p99_ms": pick(99),
            "max_ms": round(1e3 * lat[-1], 1) if lat else None}


def _caught_up(c: Any, master: str, name: str, within_batches: int = 5) -> bool:
    """The master streams to `name` live: connected, no transfer pending, at most a few batches
    behind (under a steady load a replica is never exactly at the log's end). Asked of whoever
    is master now: if mastership moves during the transfer, the joiner must catch up with the
    new one (the timeline in the report counts the moves)."""
    st = c.status(master)
    current = ((st or {}).get("replication") or {}).get("master")
    if current and current != master and current in c.procs:
        st = c.status(current)
    rep = (st or {}).get("replication") or {}
    if current == name:
        # The joiner was elected and, as a new master must, pulled the state before serving.
        return bool(rep.get("role") == "master" and rep.get("serving"))
    r = (rep.get("replicas") or {}).get(name)
    return bool(rep.get("role") == "master" and r and r["connected"] and not r["needs_transfer"]
                and (r["caught_up"] or r["lag_batches"] <= within_batches))
