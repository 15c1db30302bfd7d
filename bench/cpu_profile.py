"""Instructions per request through the real HTTP protocol, endpoint and storage, in-process.

    python -m bench.cpu_profile [--only send_json,trivial] [-n 1000] [--keep DIR]

The request bytes are the load generator's (``bench.loadgen.sqs``), fed to
``HttpProtocol.data_received`` with a stub transport, on an ``Endpoint`` over a ``LocalBackend``
with the wall clock, in production mode (``ELASTICMQ_PY_FROZEN`` unset), as ``elasticmq-py
serve`` runs them. The driver re-runs itself under ``valgrind --tool=callgrind`` and counts
instructions only inside each measured loop (each loop is one ``functools.reduce`` call, the
function callgrind is told to collect in), so the count of N requests is exact and does not
depend on the machine's load, unlike the CPU seconds of ``make bench``. What it leaves out:
the event loop's turn and the socket's system calls, which a real server pays per request too
and which are the same for every handler. ``noop`` (the loop alone) is subtracted from each
phase. ``--keep`` keeps callgrind's files, one per measured loop, for ``callgrind_annotate``.

Phases (100-byte bodies unless named):
  trivial           the load generator's JSON send to the trivial handler (the HTTP layer alone)
  send_json/query   SendMessage
  send64k_json/...  SendMessage of 64 KiB
  batch_json/...    SendMessageBatch of 10
  receive_json/...  ReceiveMessage of 10 from a deep queue
  delbatch_json/... DeleteMessageBatch of the 10 handles one receive got
  delete_json/...   DeleteMessage of one handle
  cluster_json      SendMessage on the master of a 3-node `majority` cluster, in-process
                    (bench/inprocess_cluster.py: the real cluster backend, glue, node core and
                    wire codec; no sockets, no Raft, no event loop): 15 connections send one
                    request each, the master cuts them into a batch, both replicas apply it and
                    ack, the master answers. It reports two counts per send: ``master_json``
                    (requests, batch, acks, answers) and ``replica_json`` (one replica's share).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROTOCOLS = ("json", "query")
PHASES = ("noop", "trivial") + tuple(
    f"{kind}_{p}" for kind in ("send", "send64k", "batch", "receive", "delbatch", "delete") for p in PROTOCOLS) \
    + ("cluster_json",)
CLUSTER_BATCH = 15   # connections of the cluster phase, one request each per round trip
HOST = "localhost:9324"
_MARKER = "functools_reduce"   # the C function each measured loop runs inside


# -- inside valgrind ---------------------------------------------------------------------------

class _Transport:
    """What HttpProtocol needs of an asyncio transport; keeps what was written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        raise AssertionError("the driver's requests keep the connection alive")


class _Conn:
    def __init__(self, endpoint, max_body: int):
        from elasticmq_py.httpserver import HttpProtocol

        self.transport = _Transport()
        self.protocol = HttpProtocol(endpoint, max_body)
        self.protocol.connection_made(self.transport)

    def bodies(self) -> list[bytes]:
        """The bodies of the responses written so far (every one must be a 200), then forget them."""
        out = []
        for raw in self.transport.written:
            head, _, body = raw.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200 "):
                raise AssertionError(f"not a 200: {raw[:300]!r}")
            out.append(body)
        self.transport.written.clear()
        return out


def _measure(feed, requests: list[bytes], n: int) -> None:
    k = len(requests)

    def step(_, i):
        feed(requests[i % k])

    functools.reduce(step, range(n), None)


def _cluster_phase(n: int, max_body: int, done: list[tuple[str, int, int]]) -> None:
    """``cluster_json``: each round trip is measured in three parts, each its own dump: the
    master's requests and batch, the replicas' apply and acks, the master's acks and answers."""
    from bench.inprocess_cluster import InProcessCluster
    from bench.loadgen.sqs import Api, Payloads
    from storage.commands import CreateQueue, Namespace

    from elasticmq_py.endpoint import Endpoint

    cluster = InProcessCluster("majority")
    cluster.elect("n1")
    master = cluster.backends["n1"]
    created: list = []
    master.execute(CreateQueue(Namespace(), "cpu-cluster"), lambda result, err: created.append(err))
    cluster.settle()
    if created != [None]:
        raise AssertionError(f"CreateQueue on the in-process master: {created}")
    a = Api("json", HOST, f"http://{HOST}/000000000000/cpu-cluster")
    requests = [a.send(b) for b in Payloads(100).bodies]
    endpoint = Endpoint(master)
    conns = [_Conn(endpoint, max_body) for _ in range(CLUSTER_BATCH)]
    replicas = ("n2", "n3")
    sent = 0

    def send(_, __):
        nonlocal sent
        for conn in conns:
            conn.protocol.data_received(requests[sent % len(requests)])
            sent += 1
        cluster.run_due()    # the turn's end: the master cuts the batch

    def apply(_, __):
        cluster.deliver(replicas)

    def answer(_, __):
        cluster.deliver(("n1",))

    def round_trip(measured: bool) -> None:
        for part, name, count in ((send, "master_json", CLUSTER_BATCH), (apply, "replica_json", 2 * CLUSTER_BATCH),
                                  (answer, "master_json", 0)):
            if measured:
                functools.reduce(part, range(1), None)
                done.append((name, count, 1))
            else:
                part(None, None)

    for _ in range(20):
        round_trip(False)
    for conn in conns:
        conn.bodies()   # every one a 200: all answered
    gc.collect()
    gc.freeze()
    for _ in range(max(4, n // CLUSTER_BATCH)):
        round_trip(True)
    answered = sum(len(conn.bodies()) for conn in conns)
    if answered != max(4, n // CLUSTER_BATCH) * CLUSTER_BATCH:
        raise AssertionError(f"the in-process master answered {answered} requests")


def _inside(phases: list[str], n: int, manifest: Path) -> None:
    from bench.loadgen.sqs import Api, Payloads
    from bench.loadgen.trivial import TrivialEndpoint
    from cluster.clock import SystemClock
    from storage.commands import CreateQueue, Namespace, SendMessage

    from elasticmq_py.backend import LocalBackend
    from elasticmq_py.config import Config
    from elasticmq_py.endpoint import Endpoint

    max_body = Config().max_body_bytes()
    backend = LocalBackend(SystemClock())
    endpoint = Endpoint(backend)
    ns = Namespace()
    done: list[tuple[str, int, int]] = []   # (phase, requests, steps of its measured loop)

    def api(proto: str, queue: str) -> Api:
        backend.execute_now(CreateQueue(ns, queue))
        return Api(proto, HOST, f"http://{HOST}/000000000000/{queue}")

    def run(name: str, conn: _Conn | None, requests: list[bytes], count: int, warm: int = 20) -> list[bytes]:
        feed = conn.protocol.data_received if conn is not None else (lambda data: None)
        for i in range(warm):   # first-use costs (caches, the queue's first message) stay out
            feed(requests[i % len(requests)])
        if len(requests) > warm:
            requests = requests[warm:]   # a delete's handle is used once
        if conn is not None:
            conn.bodies()
        gc.collect()
        gc.freeze()    # as the served node's collector policy leaves the heap between turns
        _measure(feed, requests, count)
        done.append((name, count, count))
        return conn.bodies() if conn is not None else []

    # SQS work on a live queue: the count is the same for a few hundred requests as for millions
    # (bench/storage_bench.py shows depth does not matter), so the defaults stay small.
    for name in phases:
        kind, _, proto = name.partition("_")
        if name == "noop":
            run(name, None, [b""], n)
        elif name == "trivial":
            bodies = Payloads(100).bodies
            a = Api("json", HOST, f"http://{HOST}/000000000000/trivial")
            run(name, _Conn(TrivialEndpoint(), max_body), [a.send(b) for b in bodies], n)
        elif kind in ("send", "send64k"):
            a = api(proto, f"cpu-{name}".replace("_", "-"))
            size, count = (100, n) if kind == "send" else (64 * 1024, max(20, n // 10))
            run(name, _Conn(endpoint, max_body), [a.send(b) for b in Payloads(size).bodies], count)
        elif kind == "batch":
            a = api(proto, f"cpu-{name}".replace("_", "-"))
            bodies = Payloads(100).bodies
            reqs = [a.send_batch([(str(i), bodies[(j * 10 + i) % len(bodies)]) for i in range(10)])
                    for j in range(len(bodies))]
            run(name, _Conn(endpoint, max_body), reqs, max(20, n // 5))
        elif name == "cluster_json":
            _cluster_phase(n, max_body, done)
        elif kind in ("receive", "delbatch", "delete"):
            queue = f"cpu-{name}".replace("_", "-")
            a = api(proto, queue)
            count, warm = max(20, n // 5), 20
            # a receive takes 10 messages; a delete-batch deletes one receive's 10, a delete one
            receives = count + warm if kind != "delete" else (count + warm + 9) // 10
            body = Payloads(100).bodies[0]
            for _ in range(10 * receives):
                backend.execute_now(SendMessage(ns.key(queue), body))
            conn = _Conn(endpoint, max_body)
            if kind == "receive":
                run(name, conn, [a.receive(10)], count, warm)
                continue
            for _ in range(receives):
                conn.protocol.data_received(a.receive(10))
            handles = [h for body in conn.bodies() for _, h, _, _ in a.parse_receive(body)]
            if kind == "delbatch":
                reqs = [a.delete_batch([(str(i), h) for i, h in enumerate(handles[j:j + 10])])
                        for j in range(0, len(handles), 10)]
            else:
                reqs = [a.delete(h) for h in handles]
            run(name, conn, reqs, count, warm)
        else:
            raise SystemExit(f"unknown phase {name}")
    manifest.write_text(json.dumps(done))


# -- outside: run valgrind, read its counts -----------------------------------------------------

def _totals(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise ValueError(f"no totals in {path}")


def profile(phases: list[str], n: int, keep: Path | None = None) -> dict[str, float]:
    """Instructions per request of each phase, the loop's own cost subtracted."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    if "noop" not in phases:
        phases = ["noop"] + phases
    out_dir = Path(tempfile.mkdtemp(prefix="cpu-profile-")) if keep is None else keep
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = out_dir / "phases.json"
    for old in out_dir.glob("callgrind.out*"):   # a --keep folder used before: its files go
        old.unlink()
    env = {k: v for k, v in os.environ.items() if k != "ELASTICMQ_PY_FROZEN"}
    env["PYTHONHASHSEED"] = "0"
    cmd = ["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--toggle-collect={_MARKER}",
           f"--dump-after={_MARKER}", f"--callgrind-out-file={out_dir}/callgrind.out",
           sys.executable, "-m", "bench.cpu_profile", "--inside", ",".join(phases), "-n", str(n),
           "--manifest", str(manifest)]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dumps = sorted(out_dir.glob("callgrind.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
    done = json.loads(manifest.read_text())
    if len(dumps) != len(done):
        raise SystemExit(f"{len(dumps)} callgrind dumps for {len(done)} phases: something else called reduce")
    # A phase is one dump (one measured loop) or several (the cluster's parts of each round
    # trip): each dump's total less the loop's own cost, summed, over the phase's requests.
    totals: dict[str, int] = {}
    counts: dict[str, int] = {}
    steps: dict[str, int] = {}
    for i, ((name, count, n_steps), path) in enumerate(zip(done, dumps)):
        totals[name] = totals.get(name, 0) + _totals(path)
        counts[name] = counts.get(name, 0) + count
        steps[name] = steps.get(name, 0) + n_steps
        if keep is not None:
            path.rename(out_dir / f"callgrind.out.{name}.{i}")
    loop = totals.pop("noop") / steps.pop("noop")   # per step of a measured loop
    if keep is None:
        shutil.rmtree(out_dir)
    return {name: round((totals[name] - loop * steps[name]) / counts[name]) for name in totals}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cpu_profile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", help="comma-separated phases (default: all)")
    p.add_argument("-n", type=int, default=500, help="requests per send phase (others scale from it)")
    p.add_argument("--keep", type=Path, help="keep callgrind's files here, one per phase")
    p.add_argument("--json", action="store_true", help="print the counts as JSON")
    p.add_argument("--inside", help=argparse.SUPPRESS)
    p.add_argument("--manifest", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.inside is not None:
        _inside(args.inside.split(","), args.n, args.manifest)
        return 0
    phases = args.only.split(",") if args.only else list(PHASES)
    for ph in phases:
        if ph not in PHASES:
            raise SystemExit(f"unknown phase {ph}; phases: {', '.join(PHASES)}")
    per = profile(phases, args.n, args.keep)
    if args.json:
        print(json.dumps(per, indent=1))
        return 0
    for name, ir in per.items():
        print(f"{name:16} {ir:>11,} Ir/request")
    triv = per.get("trivial")
    for proto in PROTOCOLS:
        send = per.get(f"send_{proto}")
        if triv and send:
            print(f"send_{proto} / trivial: {send / triv:.2f}x")
    single, master, replica = per.get("send_json"), per.get("master_json"), per.get("replica_json")
    if single and master and replica:
        print(f"master_json / send_json: {master / single:.2f}x; replica_json / send_json: {replica / single:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
