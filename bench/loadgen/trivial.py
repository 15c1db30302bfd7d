"""The HTTP-stack ceiling: elasticmq-py's own HTTP protocol (``elasticmq_py.httpserver``, raw
asyncio + httptools) with a handler that does nothing but answer a fixed JSON document.

    python -m bench.loadgen.trivial [--port P]     # prints the bound port, serves until killed

Everything below the SQS work is the same code as the real server (parsing, keep-alive,
limits, response encoding), so ``ours / trivial`` is the share of the stack's capacity left
after the SQS work.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from elasticmq_py.httpserver import serve
from elasticmq_py.protocol.wire import HttpResponse

BODY = b'{"MessageId":"trivial"}'
_RESPONSE = HttpResponse(200, (("Content-Type", "application/x-amz-json-1.0"),
                               ("x-amzn-RequestId", "00000000-0000-0000-0000-000000000000")), BODY)


class TrivialEndpoint:
    """Duck-types ``elasticmq_py.endpoint.Endpoint`` for the HTTP layer."""

    def handle(self, req, reply) -> None:
        reply.set(_RESPONSE)

    def reject(self, headers, err) -> HttpResponse:
        return HttpResponse(400, (("Content-Type", "application/x-amz-json-1.0"),), b'{"__type":"rejected"}')


async def _main(host: str, port: int) -> None:
    server = await serve(TrivialEndpoint(), host, port, max_body=1024 * 1024)
    print(server.port, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    asyncio.run(_main(args.host, args.port))


if __name__ == "__main__":
    main()
