"""The command: its argparse wiring and ``--config`` (the builtin server's own CLI)."""

from __future__ import annotations

import argparse
import json

from toxiproxy import Toxiproxy

from elasticmq_py.toxiproxy import cli
from elasticmq_py.toxiproxy.testing import start_toxiproxy
from tests.toxiproxy.upstreams import connect, roundtrip


def test_add_parser_wires_a_subcommand():
    parser = argparse.ArgumentParser(prog="elasticmq-py")
    sub = parser.add_subparsers(dest="command")
    cli.add_parser(sub)
    args = parser.parse_args(["toxiproxy", "--host", "127.0.0.1", "--port", "0", "--seed", "3"])
    assert (args.command, args.host, args.port, args.seed) == ("toxiproxy", "127.0.0.1", 0, 3)
    assert callable(cli.run)


def test_config_populates_proxies_at_start(tmp_path, echo_upstream):
    config = tmp_path / "proxies.json"
    config.write_text(json.dumps([{"name": "from_config", "upstream": echo_upstream.address,
                                   "listen": "127.0.0.1:0"}]))
    with start_toxiproxy(mode="builtin", extra_args=["--config", str(config)]) as server:
        client = Toxiproxy()
        client.update_api_consumer(server.host, server.port)
        p = client.get_proxy("from_config")
        assert p is not None and p.enabled
        with connect(p.listen) as s:
            assert roundtrip(s) < 1.0


def test_main_cli_serves_the_toxiproxy_api(echo_upstream):
    """`elasticmq-py toxiproxy` (the product's own command) serves the API to the client."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "elasticmq_py", "toxiproxy", "--port", "0", "--print-port"],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        client = Toxiproxy()
        client.update_api_consumer("127.0.0.1", port)
        proxy = client.create(upstream=echo_upstream.address, name="via_main_cli", listen="127.0.0.1:0")
        assert "via_main_cli" in client.proxies()
        with connect(proxy.listen) as s:
            assert roundtrip(s) < 1.0
        proxy.destroy()
        assert "via_main_cli" not in client.proxies()
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) is not None
