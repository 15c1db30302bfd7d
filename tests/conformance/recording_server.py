"""``elasticmq-py serve`` that also writes every request its endpoint is handed to a file, so that
the corpus's requests can be replayed in-process after the server stops (the queue-key check in
conftest.py).

    python -m tests.conformance.recording_server FILE serve ...

Each record is msgpack of ``[method, path, query, headers, body]``, as the endpoint got them.
"""

from __future__ import annotations

import sys

import msgpack

from elasticmq_py.cli import main
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol.wire import HttpRequest


def read(path) -> list[HttpRequest]:
    with open(path, "rb") as f:
        return [HttpRequest(m, p, q, dict(h), b) for m, p, q, h, b in msgpack.Unpacker(f, raw=False)]


def _recording(out, handle):
    def recorded(self: Endpoint, req: HttpRequest, reply) -> None:
        out.write(msgpack.packb([req.method, req.path, req.query, list(req.headers.items()), req.body],
                                use_bin_type=True))
        handle(self, req, reply)
    return recorded


if __name__ == "__main__":
    out = open(sys.argv.pop(1), "ab", buffering=0)   # unbuffered: read once the server has stopped
    Endpoint.handle = _recording(out, Endpoint.handle)
    sys.exit(main())
