"""The ``toxiproxy`` command: ``elasticmq-py toxiproxy --host 127.0.0.1 --port 8474`` (wired by
the main CLI through :func:`add_parser` and :func:`run`) or ``python -m elasticmq_py.toxiproxy``.
Flags mirror ``toxiproxy-server`` (-host, -port, -config, -seed) in GNU spelling."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from elasticmq_py import loglevel
from elasticmq_py.foreground import run_until_signalled
from elasticmq_py.toxiproxy.proxy import DEFAULT_BUFFER_SIZE

DESCRIPTION = ("Run a server for the Toxiproxy HTTP API: TCP proxies with injectable faults "
               "(latency, bandwidth, timeout, reset_peer, slicer, limit_data, slow_close), "
               "driven by any Toxiproxy client.")


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="API address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8474,
                   help="API port to listen on, 0 for any free one (default 8474)")
    p.add_argument("--config", metavar="FILE",
                   help="JSON file of proxies to create at start (the POST /populate body)")
    p.add_argument("--seed", type=int, help="seed for jitter, slicing and toxicity (default random)")
    p.add_argument("--buffer-size", type=int, default=DEFAULT_BUFFER_SIZE, metavar="BYTES",
                   help=f"bytes a connection may hold per direction before it stops reading "
                        f"(default {DEFAULT_BUFFER_SIZE})")
    p.add_argument("--print-port", action="store_true",
                   help="print the bound API port on stdout once listening (for --port 0)")
    loglevel.add_argument(p)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``toxiproxy`` subcommand to the main CLI's subparsers."""
    p = subparsers.add_parser("toxiproxy", help="run a Toxiproxy-API fault proxy server",
                              description=DESCRIPTION)
    _add_arguments(p)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the server until SIGINT/SIGTERM; returns the process exit code."""
    from elasticmq_py.toxiproxy.api import ApiError
    from elasticmq_py.toxiproxy.server import ToxiproxyServer

    logging.basicConfig(level=args.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server = ToxiproxyServer(args.host, args.port, config=args.config, seed=args.seed,
                             buffer_size=args.buffer_size)

    def started() -> None:
        if args.print_port:
            print(server.port, flush=True)

    try:
        asyncio.run(run_until_signalled(server.start, server.stop, started))
    except KeyboardInterrupt:
        pass
    except ApiError as e:
        print(f"toxiproxy: --config {args.config}: {e.message}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"toxiproxy: cannot listen on {args.host}:{args.port} or read the config: {e}",
              file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m elasticmq_py.toxiproxy", description=DESCRIPTION)
    _add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
