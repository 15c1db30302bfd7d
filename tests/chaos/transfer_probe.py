"""A state transfer over a capped link, watched from both ends (docs/testing.md, "Chaos tests").

    python -m tests.chaos.transfer_probe RATE_KB [MESSAGES] [BODY_BYTES]

Three `elasticmq-py serve` nodes behind Toxiproxy (CHAOS_TIMING, log-limit-mb 1); MESSAGES bulk
messages (default 8,000 x 1,000 B, ~9 MB) on the master; a replica is killed, the master->replica
stream link capped at RATE_KB, the replica restarted empty. Every 3 s: bytes the master's stream
transport sent to the joiner vs bytes the joiner received, and the transfer's state, until the
joiner has the snapshot or 90 s pass.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from tests.chaos.harness import CHAOS_TIMING
from elasticmq_py.testing.cluster import Cluster
from tests.cluster.workload import bulk_fill


def probe(rate_kb: int, messages: int = 8000, body: int = 1000, limit_s: float = 90.0) -> float | None:
    folder = Path(tempfile.mkdtemp(prefix=f"transfer-probe-{rate_kb}-"))
    c = Cluster(folder, ["n1", "n2", "n3"], timing=CHAOS_TIMING, toxiproxy=True)
    c.replication_config = {"log-limit-mb": 1}
    try:
        c.start_all(parallel=True)
        m = c.wait_for("a master", c.stable_master(members={"n1", "n2", "n3"}), 30)
        c.sqs(m).create_queue(QueueName="bulk")
        bulk_fill(c.url(m), "bulk", messages, body_size=body)
        r = next(x for x in c.names if x != m)
        c.kill(r)
        c.link(m, r).bandwidth(rate_kb, stream="upstream", which="stream")
        t = time.time()
        c.start(r)
        base = None
        while time.time() - t < limit_s:
            sm = (c.status(m) or {}).get("replication", {})
            sr = (c.status(r) or {}).get("replication", {})
            out = sm.get("transport", {}).get("peers", {}).get(r, {})
            got = sr.get("transport", {}).get("peers", {}).get(m, {})
            base = out.get("bytes_out", 0) if base is None else base
            lt = sr.get("last_transfer")
            print(f"{time.time() - t:5.1f}s  {m}->{r} sent {(out.get('bytes_out', 0) - base) / 1e6:6.1f} MB "
                  f"(connected {out.get('connected')})  {r} received {got.get('bytes_in', 0) / 1e6:6.1f} MB in "
                  f"{got.get('frames_in')} frames  transfer_in={sr.get('transfer_in')}", flush=True)
            if lt and lt.get("direction") == "received":
                print(f"done after {time.time() - t:.1f}s: {lt}  ({folder})")
                return time.time() - t
            time.sleep(3)
        print(f"not done after {limit_s:.0f}s ({folder})")
        return None
    finally:
        c.close()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    probe(*args)
