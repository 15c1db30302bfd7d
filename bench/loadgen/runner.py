"""Keep-alive HTTP/1.1 load over raw sockets, in one or several worker processes.

Each worker process runs one tight epoll loop over N non-blocking sockets (no asyncio: its
per-event machinery cost ~30% more CPU per request here); each connection has one request in
flight (no pipelining, as SDK clients behave) and is driven by a ``Plan`` driver. Responses are
parsed with httptools (llhttp, C), so the generator costs a few tens of microseconds of CPU per
request; its CPU time is measured and reported with every run, so that a reader can see when it,
rather than the server, was the limit. A connection the server closes (``Connection: close``,
as moto answers every request) is reopened and the reconnect is part of the request's latency.

``mode="blocking"`` runs a single connection as a tight blocking-socket loop instead: the
sequential-latency scenario, with as little client overhead as Python allows.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import select
import socket
import time
from dataclasses import dataclass, field, replace
from time import perf_counter

import httptools

from bench.loadgen.sqs import Plan, Stats

GRACE_S = 30.0         # after the deadline, how long in-flight requests/cycles may still take
MAX_CONNECT_FAILURES = 20


@dataclass(frozen=True)
class Job:
    kind: str                       # a Plan kind: send, send_batch, receive_delete, ...
    protocol: str
    port: int
    host_header: str
    queue_url: str
    connections: int = 16           # in total, split over the worker processes
    processes: int = 1
    duration: float = 3.0
    body_size: int = 100
    max_requests: int = 0           # in total; 0 = bounded by the duration only
    max_messages: int = 0           # in total; stop once this many messages are done (prefill)
    mode: str = "async"             # or "blocking" (one connection, sequential)
    host: str = "127.0.0.1"
    trivial_body: bytes = b""
    credentials: tuple[str, str, str] | None = None   # sign for real: (key, secret, region)
    start_at: float = 0.0           # time.monotonic() (system-wide), set by the pool
    worker: int = 0


@dataclass
class Result:
    job: Job
    requests: int
    messages: int
    received: int
    errors: dict
    latencies: list[float]          # seconds, every request
    wall: float                     # start to last response
    client_cpu: float               # user+sys seconds of the generator processes
    empty_receives: int
    reconnects: int
    drained: bool = False
    extra: dict = field(default_factory=dict)

    @property
    def req_rate(self) -> float:
        return self.requests / self.wall if self.wall > 0 else 0.0

    @property
    def msg_rate(self) -> float:
        return self.messages / self.wall if self.wall > 0 else 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        s = sorted(self.latencies)
        return s[min(len(s) - 1, int(p / 100.0 * len(s)))]


# -- the event-loop client: one epoll loop per worker process --------------------------------

class _Response:
    """Collects one HTTP response from httptools' callbacks."""

    __slots__ = ("parser", "body", "done", "status", "keep")

    # status and keep-alive must be read here, before the parser resets
    def on_body(self, b: bytes) -> None:
        self.body.append(b)

    def on_message_complete(self) -> None:
        self.done = True
        self.status = self.parser.get_status_code()
        self.keep = self.parser.should_keep_alive()


class _Conn(_Response):
    """One connection (reopened when the server closes it) and its driver."""

    __slots__ = ("sock", "fd", "gen", "req", "out", "t0", "t_end", "finished", "awaiting")

    def __init__(self, gen):
        self.gen = gen
        self.sock: socket.socket | None = None
        self.fd = -1
        self.parser = None
        self.body: list[bytes] = []
        self.done = False
        self.status = 0
        self.keep = True
        self.req = b""
        self.out: memoryview | None = None   # the unsent rest of a request (large bodies)
        self.t0 = 0.0
        self.t_end = 0.0
        self.finished = False
        self.awaiting = False


def _run_loop(job: Job) -> dict:
    plan = Plan(job.kind, job.protocol, job.host_header, job.queue_url, job.body_size,
                trivial_body=job.trivial_body, credentials=job.credentials)
    stats = Stats()
    ep = select.epoll()
    by_fd: dict[int, _Conn] = {}
    IN, OUT, HUP = select.EPOLLIN, select.EPOLLOUT, select.EPOLLHUP | select.EPOLLERR
    live = job.connections

    def connect(c: _Conn) -> bool:
        for _ in range(MAX_CONNECT_FAILURES):
            try:
                s = socket.create_connection((job.host, job.port), timeout=10)
                break
            except OSError:
                stats.error("connect_failed")
                time.sleep(0.05)
        else:
            return False
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        c.sock, c.fd = s, s.fileno()
        c.parser = httptools.HttpResponseParser(c)
        c.body, c.done, c.out = [], False, None
        by_fd[c.fd] = c
        ep.register(c.fd, IN)
        return True

    def drop(c: _Conn) -> None:
        if c.sock is not None:
            try:
                ep.unregister(c.fd)
            except OSError:
                pass
            by_fd.pop(c.fd, None)
            c.sock.close()
            c.sock = None

    def finish(c: _Conn) -> None:
        nonlocal live
        if not c.finished:
            c.finished = True
            live -= 1
            drop(c)

    def write(c: _Conn) -> None:
        if c.sock is None:  # the server closed the last one (Connection: close)
            stats.reconnects += 1
            if not connect(c):
                finish(c)
                return
        c.awaiting = True
        try:
            n = c.sock.send(c.req)
        except BlockingIOError:
            n = 0
        except OSError:
            lost(c)
            return
        if n < len(c.req):
            c.out = memoryview(c.req)[n:]
            ep.modify(c.fd, IN | OUT)

    def lost(c: _Conn) -> None:
        drop(c)
        if c.awaiting and not c.finished:
            # resend the same request on a new connection; counted, never silent
            stats.error("connection_lost_mid_request")
            write(c)

    conns = [_Conn(plan.driver(job.worker * 1000 + i, stats)) for i in range(job.connections)]
    for c in conns:
        if not connect(c):
            finish(c)
    time.sleep(max(0.0, job.start_at - time.monotonic()))
    cpu0 = _cpu()
    t0 = perf_counter()
    deadline = t0 + job.duration
    hard_deadline = deadline + GRACE_S
    drained = False
    for c in conns:
        if c.finished:
            continue
        try:
            c.req = next(c.gen)
        except StopIteration:
            finish(c)
            continue
        c.t0 = perf_counter()
        write(c)
    lat = stats.latencies
    max_requests, max_messages = job.max_requests, job.max_messages
    cycle_start = plan.cycle_start
    poll = ep.poll
    while live > 0:
        events = poll(0.5)
        if not events and perf_counter() > hard_deadline:
            for c in conns:
                if not c.finished:
                    stats.error("timeout")
                    finish(c)
            break
        for fd, ev in events:
            c = by_fd.get(fd)
            if c is None:
                continue
            if ev & OUT and c.out is not None:
                try:
                    n = c.sock.send(c.out)
                except BlockingIOError:
                    n = 0
                except OSError:
                    lost(c)
                    continue
                c.out = c.out[n:] if n < len(c.out) else None
                if c.out is None:
                    ep.modify(fd, IN)
            if not ev & (IN | HUP):
                continue
            try:
                data = c.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                lost(c)
                continue
            try:
                c.parser.feed_data(data)
            except httptools.HttpParserError:
                stats.error("bad_http_response")
                lost(c)
                continue
            if not c.done:
                continue
            now = perf_counter()
            c.awaiting = c.done = False
            lat.append(now - c.t0)
            stats.requests += 1
            c.t_end = now
            body = b"".join(c.body) if len(c.body) != 1 else c.body[0]
            c.body = []
            keep = c.keep
            if c.out is not None:  # answered before it was fully sent: the stream is unusable
                stats.error("early_response")
                keep = False
            try:
                c.req = c.gen.send((c.status, body))
            except StopIteration:
                drained = True
                finish(c)
                continue
            # stop only between cycles: a receive's messages still get their delete
            if cycle_start(c.req) and (now >= deadline or (max_requests and stats.requests >= max_requests)
                                       or (max_messages and stats.messages >= max_messages)):
                finish(c)
                continue
            if not keep:
                drop(c)
            c.t0 = now
            write(c)
    cpu = _cpu() - cpu0
    for c in conns:
        drop(c)
    ep.close()
    ends = [c.t_end for c in conns if c.t_end]
    d = stats.to_dict()
    d.update(wall=(max(ends) - t0) if ends else 0.0, cpu=cpu, drained=drained)
    return d


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


# -- the blocking client (sequential latency) -------------------------------------------------

class _Sink(_Response):
    __slots__ = ()

    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.done = False
        self.parser = httptools.HttpResponseParser(self)


def _run_blocking(job: Job) -> dict:
    plan = Plan(job.kind, job.protocol, job.host_header, job.queue_url, job.body_size,
                trivial_body=job.trivial_body, credentials=job.credentials)
    stats = Stats()
    gen = plan.driver(job.worker * 1000, stats)

    def connect():
        s = socket.create_connection((job.host, job.port), timeout=GRACE_S)  # a hung server is an error
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    sock = connect()
    drained = False
    time.sleep(max(0.0, job.start_at - time.monotonic()))
    cpu0 = _cpu()
    t0 = perf_counter()
    deadline = t0 + job.duration
    req = next(gen)
    t_end = t0
    lat = stats.latencies
    while True:
        sink = _Sink()
        parser = sink.parser
        start = perf_counter()
        try:
            if sock is None:
                sock = connect()
                stats.reconnects += 1
            sock.sendall(req)
            while not sink.done:
                data = sock.recv(262144)
                if not data:
                    raise ConnectionError("closed")
                parser.feed_data(data)
        except (OSError, httptools.HttpParserError) as e:
            stats.error("connection_lost_mid_request" if isinstance(e, OSError) else "bad_http_response")
            if sock is not None:
                sock.close()
            sock = None
            if perf_counter() > deadline:
                break
            continue
        now = perf_counter()
        lat.append(now - start)
        stats.requests += 1
        t_end = now
        if not sink.keep:
            sock.close()
            sock = None
        try:
            req = gen.send((sink.status, b"".join(sink.body)))
        except StopIteration:
            drained = True
            break
        if plan.cycle_start(req) and (now >= deadline or (job.max_requests and stats.requests >= job.max_requests)):
            break
    cpu = _cpu() - cpu0
    if sock is not None:
        sock.close()
    d = stats.to_dict()
    d.update(wall=t_end - t0, cpu=cpu, drained=drained)
    return d


def run_job(job: Job) -> dict:
    if job.mode == "blocking":
        return _run_blocking(job)
    return _run_loop(job)


# -- worker processes -------------------------------------------------------------------------

def _worker_main(pipe) -> None:
    while True:
        job = pipe.recv()
        if job is None:
            return
        try:
            pipe.send(("ok", run_job(job)))
        except BaseException as e:  # report, never hang the parent
            pipe.send(("error", f"{type(e).__name__}: {e}"))


class Pool:
    """Long-lived generator processes (spawned once: forking a process per run would cost more
    than some runs). ``run(job)`` splits the job's connections and limits over the workers,
    starts them all at the same instant and merges their results."""

    def __init__(self, processes: int = 2):
        ctx = mp.get_context("spawn")
        self.workers = []
        for _ in range(processes):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_worker_main, args=(child,), daemon=True)
            p.start()
            self.workers.append((p, parent))

    def close(self) -> None:
        for p, pipe in self.workers:
            try:
                pipe.send(None)
            except OSError:
                pass
        for p, _ in self.workers:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
        self.workers = []

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, job: Job, lead_s: float = 0.4, on_start=None) -> Result:
        n = 1 if job.mode == "blocking" else max(1, min(job.processes, len(self.workers), job.connections))
        start_at = time.monotonic() + lead_s

        def share(total: int, i: int) -> int:
            return total // n + (1 if i < total % n else 0) if total else 0

        parts = []
        for i in range(n):
            parts.append(replace(job, connections=share(job.connections, i) if job.mode != "blocking" else 1,
                                 max_requests=share(job.max_requests, i) or (0 if not job.max_requests else 1),
                                 max_messages=share(job.max_messages, i) or (0 if not job.max_messages else 1),
                                 start_at=start_at, worker=i))
        for i, part in enumerate(parts):
            self.workers[i][1].send(part)
        if on_start is not None:
            time.sleep(max(0.0, start_at - time.monotonic()))
            on_start()
        outs = []
        failures = []
        for i in range(n):
            try:
                status, out = self.workers[i][1].recv()
            except (EOFError, OSError) as e:
                status, out = "error", f"worker process died: {e!r}"
            if status == "ok":
                outs.append(out)
            else:
                failures.append(out)
        errors: dict[str, int] = {}
        lat: list[float] = []
        from array import array
        for o in outs:
            for k, v in o["errors"].items():
                errors[k] = errors.get(k, 0) + v
            a = array("d")
            a.frombytes(o["latencies"])
            lat.extend(a)
        for f in failures:
            errors[f"generator_crashed:{f[:120]}"] = errors.get(f"generator_crashed:{f[:120]}", 0) + 1
        return Result(job=replace(job, start_at=start_at), requests=sum(o["requests"] for o in outs),
                      messages=sum(o["messages"] for o in outs), received=sum(o["received"] for o in outs),
                      errors=errors, latencies=lat, wall=max((o["wall"] for o in outs), default=0.0),
                      client_cpu=sum(o["cpu"] for o in outs),
                      empty_receives=sum(o["empty_receives"] for o in outs),
                      reconnects=sum(o["reconnects"] for o in outs),
                      drained=any(o["drained"] for o in outs))
