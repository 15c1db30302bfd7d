"""A stand-alone membership node: `python -m cluster.node --config n1.toml`.

It runs the membership runtime and a tiny admin HTTP endpoint (stdlib asyncio, JSON only):

    GET  /cluster                  status (view, master, epoch, role, active, quorum, peers)
    POST /cluster/step-down        hand over mastership (409 if this node is not the master)
    POST /cluster/members          body {"name", "raft", "stream"}: add a member (on the master)
    DELETE /cluster/members/NAME   remove a member (on the master)

When it is serving it prints one line `READY {"node":..., "admin": "host:port", "raft": ...}` on
stdout, so a supervisor or a test knows the OS-chosen admin port. SIGTERM/SIGINT stop it cleanly.
The product (elasticmq_py) embeds MembershipNode directly and serves these routes itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any

from cluster.config import Address, ConfigError, NodeConfig, NodeSpec
from cluster.history import HistoryWriter
from cluster.runtime import BindError, MembershipNode

log = logging.getLogger("cluster.node")

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 500: "Internal Server Error", 503: "Service Unavailable"}


async def _admin(node: MembershipNode, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:] if l)}
        length = int(headers.get("content-length", "0") or 0)
        body = await asyncio.wait_for(reader.readexactly(length), 5) if length else b""
        code, payload = await _route(node, method, path, body)
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, asyncio.LimitOverrunError, ValueError):
        code, payload = 400, {"error": "bad request"}
    except Exception as e:  # an admin request must never take the node down
        log.exception("admin request failed")
        code, payload = 500, {"error": str(e)}
    data = json.dumps(payload).encode()
    writer.write(f"HTTP/1.1 {code} {_REASONS.get(code, 'Error')}\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
    try:
        await writer.drain()
    finally:
        writer.close()


async def _route(node: MembershipNode, method: str, path: str, body: bytes) -> tuple[int, Any]:
    if path == "/cluster":
        if method != "GET":
            return 405, {"error": "use GET"}
        return 200, node.status()
    if path == "/cluster/step-down" and method == "POST":
        ok = await node.step_down()
        return (200, {"stepped_down": True}) if ok else (409, {"error": "not the master, or no follower to hand over to"})
    if path == "/cluster/members" and method == "POST":
        try:
            spec = NodeSpec.from_dict(json.loads(body or b"{}"))
        except (ConfigError, json.JSONDecodeError) as e:
            return 400, {"error": str(e)}
        try:
            await node.add_member(spec)
        except (RuntimeError, asyncio.TimeoutError) as e:
            return 409, {"error": str(e) or "timed out"}
        return 200, {"added": spec.name}
    if path.startswith("/cluster/members/") and method == "DELETE":
        name = path.rsplit("/", 1)[1]
        try:
            await node.remove_member(name)
        except (RuntimeError, asyncio.TimeoutError) as e:
            return 409, {"error": str(e) or "timed out"}
        return 200, {"removed": name}
    return 404, {"error": f"no route {method} {path}"}


async def run(config: NodeConfig) -> int:
    history = HistoryWriter(config.history_path, config.self_name) if config.history_path else None
    node = MembershipNode(config, history=history)
    try:
        node.start()
    except BindError as e:
        log.error("%s", e)
        print(f"BIND-FAILED {json.dumps(str(e))}", flush=True)
        if history is not None:
            history.close()
        return 3
    admin_addr = config.admin_addr or Address("127.0.0.1", 0)
    server = await asyncio.start_server(lambda r, w: _admin(node, r, w), admin_addr.host, admin_addr.port)
    host, port = server.sockets[0].getsockname()[:2]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("READY " + json.dumps({"node": config.self_name, "admin": f"{host}:{port}",
                                 "raft": node.bound_raft_addr}), flush=True)
    try:
        await stop.wait()
    finally:
        server.close()
        node.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cluster.node", description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="node configuration (TOML, or JSON by .json suffix)")
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pysyncobj").setLevel(logging.WARNING)
    try:
        config = NodeConfig.load(args.config)
    except (ConfigError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return asyncio.run(run(config))


if __name__ == "__main__":
    sys.exit(main())
