"""What ``queue_key_of`` (elasticmq_py/protocol/queue_key.py) costs a request, against the
endpoint's full parse of the same request.

The requests are the load generator's (bench/loadgen/sqs.py: signed headers, 100 B bodies unless
named), as the HTTP glue hands them to the endpoint. ``full parse`` is the endpoint's SQS path up
to the backend (``Endpoint._sqs`` with a backend that takes the command and does nothing): the
model's checks, the context, the storage command. Each figure is the best of several timed
repetitions (the least disturbed by the machine's other work), in µs per request.

    python -m bench.queue_key_bench
"""

from __future__ import annotations

import timeit
from urllib.parse import urlsplit

from storage.clock import ManualClock

from bench.loadgen.sqs import JSON, QUERY, Api, Payloads
from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint, EndpointConfig
from elasticmq_py.protocol.queue_key import queue_key_of
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.reply import Reply

HOST = "localhost:9324"
URL = f"http://{HOST}/000000000000/bench"


class _Parsed(LocalBackend):
    def execute(self, command, done) -> None:
        pass


def http_request(raw: bytes) -> HttpRequest:
    """The load generator's bytes as the HTTP glue hands them to the endpoint."""
    head, _, body = raw.partition(b"\r\n\r\n")
    line, *fields = head.decode("latin-1").split("\r\n")
    method, target, _ = line.split(" ")
    parts = urlsplit(target)
    headers = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    return HttpRequest(method, parts.path, parts.query.encode(), headers, body)


def requests() -> dict[str, HttpRequest]:
    body = Payloads(100).bodies[0]
    j, q = Api(JSON, HOST, URL), Api(QUERY, HOST, URL)
    batch = [(str(i), body) for i in range(10)]
    path = http_request(q.send(body))
    form = path.body.replace(b"QueueUrl=" + URL.replace(":", "%3A").replace("/", "%2F").encode() + b"&", b"")
    return {
        "send, JSON": http_request(j.send(body)),
        "send, Query": http_request(q.send(body)),
        "send, Query to the queue's path": HttpRequest(path.method, "/000000000000/bench", b"", path.headers, form),
        "send-batch 10x100 B, JSON": http_request(j.send_batch(batch)),
        "send-batch 10x100 B, Query": http_request(q.send_batch(batch)),
        "send 64 KiB, JSON": http_request(j.send(Payloads(64 * 1024).bodies[0])),
        "ListQueues, JSON (no queue)": HttpRequest("POST", "/", b"", {**http_request(j.send(body)).headers,
                                                                       "x-amz-target": "AmazonSQS.ListQueues"}, b"{}"),
    }


def _best_us(fn, number: int) -> float:
    return round(1e6 * min(timeit.repeat(fn, number=number, repeat=5)) / number, 2)


def run(number: int = 5_000) -> dict:
    config = EndpointConfig()
    endpoint = Endpoint(_Parsed(ManualClock(0)), config)
    rows = {}
    for name, req in requests().items():
        key = queue_key_of(req, config.region, config.account_id)
        n = max(200, number // max(1, len(req.body) // 2048))
        sink = Reply(lambda resp: None)
        rows[name] = {"queue_key_us": _best_us(lambda: queue_key_of(req, config.region, config.account_id), n),
                      "full_parse_us": _best_us(lambda: endpoint._sqs(req, sink), n),
                      "key": None if key is None else f"{key.region}/{key.account}/{key.name}"}
        rows[name]["ratio"] = round(rows[name]["queue_key_us"] / rows[name]["full_parse_us"], 3)
    return rows


def main() -> int:
    rows = run()
    print(f"{'request':34} {'queue_key_of µs':>16} {'full parse µs':>14} {'ratio':>6}")
    for name, r in rows.items():
        print(f"{name:34} {r['queue_key_us']:>16.2f} {r['full_parse_us']:>14.2f} {r['ratio']:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
