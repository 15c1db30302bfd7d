"""``elasticmq-py serve``: run a server from the command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from elasticmq_py.config import DEFAULT_HOST, DEFAULT_PORT, Config, ConfigError
from elasticmq_py.server import Server


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elasticmq-py",
                                description="An SQS-compatible, replicated in-memory message server.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    s = sub.add_parser("serve", aliases=["run"], help="run the SQS endpoint",
                       description="Run the SQS endpoint (JSON and Query protocols) with the "
                                   "admin routes /health, /metrics and /cluster on the same port.")
    s.add_argument("--config", metavar="FILE",
                   help="TOML configuration file (host, port, account-id, region, limits, queues); "
                        "flags override it")
    s.add_argument("--host", help=f"address to listen on (default {DEFAULT_HOST})")
    s.add_argument("--port", type=int, help=f"port to listen on, 0 for any free one (default {DEFAULT_PORT})")
    s.add_argument("--account-id", help="account id in queue URLs and ARNs (default 000000000000)")
    s.add_argument("--region", help="region for requests without a SigV4 scope (default us-east-1)")
    s.add_argument("--limits", choices=["strict", "relaxed"], help="SQS limits profile (default strict)")
    s.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    s.add_argument("--print-port", action="store_true",
                   help="print the bound port on stdout once listening (for --port 0)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command not in ("serve", "run"):
        build_parser().print_help()
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        base = Config.from_toml(args.config) if args.config else Config()
        config = base.with_overrides(host=args.host, port=args.port, account_id=args.account_id,
                                     region=args.region, limits=args.limits)
    except (ConfigError, ValueError) as e:
        print(f"elasticmq-py: {e}", file=sys.stderr)
        return 2
    server = Server(config=config)

    async def run() -> None:
        await server.start_async()
        if args.print_port:
            print(server.port, flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await stop.wait()
        finally:
            await server.stop_async()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    except ConfigError as e:
        print(f"elasticmq-py: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"elasticmq-py: cannot listen on {config.host}:{config.port}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
