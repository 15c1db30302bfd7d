"""The servers under test, each a real process on 127.0.0.1: elasticmq-py, the trivial handler on
the same HTTP stack, and the peers (moto's server, sqslite), which are installed on first use
into ``.venv/bench-peers/`` (a separate venv for moto, an npm prefix for sqslite) and reused.
A peer that cannot be installed or started raises ``Unavailable`` with the reason."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from bench.loadgen.sqs import AUTH, AMZ_DATE, FORM_CT, Credentials, sign

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT / ".venv" / "bench-peers"
INSTALL_TIMEOUT_S = 900
_TICK = os.sysconf("SC_CLK_TCK")


class Unavailable(Exception):
    pass


class ServerProc:
    def __init__(self, name: str, proc: subprocess.Popen, port: int, protocols: tuple[str, ...],
                 version: str = "", notes: str = "", credentials: Credentials | None = None):
        self.name = name
        self.credentials = credentials   # what requests must be signed with (a sigv4 server)
        self.proc = proc
        self.port = port
        self.protocols = protocols
        self.version = version
        self.notes = notes
        # sqslite only recognises queue URLs on "localhost"; every target gets the same Host
        self.host_header = f"localhost:{port}"

    def cpu_seconds(self) -> float:
        """user+sys CPU of the server process (all its threads) so far."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / _TICK
        except (OSError, IndexError, ValueError):
            return float("nan")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    # -- control-plane calls (Query protocol, plain http.client; not measured) ------------

    def call(self, action: str, params: dict, timeout: float = 30.0) -> tuple[int, bytes]:
        body = urlencode({"Action": action, "Version": "2012-11-05", **params}).encode()
        auth, date = (AUTH, AMZ_DATE) if self.credentials is None else \
            sign(self.credentials, self.host_header, "/", FORM_CT, body)
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", "/", body, {"Host": self.host_header, "Content-Type": FORM_CT,
                                          "X-Amz-Date": date, "Authorization": auth})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def create_queue(self, name: str) -> str:
        status, body = self.call("CreateQueue", {"QueueName": name})
        m = re.search(rb"<QueueUrl>\s*([^<\s]+)\s*</QueueUrl>", body)
        if status != 200 or not m:
            raise RuntimeError(f"{self.name}: CreateQueue failed: {status} {body[:300]!r}")
        return m.group(1).decode()

    def delete_queue(self, url: str) -> None:
        try:
            self.call("DeleteQueue", {"QueueUrl": url})
        except OSError:
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc: subprocess.Popen, port: int, name: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Unavailable(f"{name} exited at start-up with code {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise Unavailable(f"{name} did not listen on port {port} within {timeout:.0f} s")


def _print_port_server(name: str, argv: list[str], protocols: tuple[str, ...], version: str,
                       credentials: Credentials | None = None) -> ServerProc:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError(f"{name} did not start: {line!r}")
    return ServerProc(name, proc, int(line), protocols, version, credentials=credentials)


def start_ours(config: Path | None = None, credentials: Credentials | None = None) -> ServerProc:
    """``config``: a `serve --config` file; ``credentials``: what that server's clients sign with."""
    # what `.venv/bin/elasticmq-py serve` runs, started as the tests do (from the source tree, so
    # that packages added since the editable install, e.g. cluster/, are importable)
    argv = [sys.executable, "-m", "elasticmq_py"]
    return _print_port_server("elasticmq-py", argv + ["serve", "--port", "0", "--print-port",
                                                       "--log-level", "WARNING",
                                                       *(["--config", str(config)] if config else [])],
                              ("json", "query"), _version_of("elasticmq-py"), credentials)


def start_trivial() -> ServerProc:
    return _print_port_server("trivial", [sys.executable, "-m", "bench.loadgen.trivial"],
                              ("json",), "")


def _version_of(dist: str) -> str:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return "?"


# -- moto ---------------------------------------------------------------------------------

def ensure_moto(log=print) -> Path:
    venv = PEERS / "moto"
    exe = venv / "bin" / "moto_server"
    if exe.exists():
        return exe
    PEERS.mkdir(parents=True, exist_ok=True)
    log(f"  installing moto[server] into {venv.relative_to(ROOT)} (once) ...")
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True,
                       capture_output=True, timeout=INSTALL_TIMEOUT_S)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "moto[server]"], check=True, capture_output=True, timeout=INSTALL_TIMEOUT_S)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise Unavailable(f"could not install moto[server]: {e}; {err.decode(errors='replace')[-300:]}")
    if not exe.exists():
        raise Unavailable("moto[server] installed but moto_server is missing")
    return exe


def start_moto(log=print) -> ServerProc:
    exe = ensure_moto(log)
    py = exe.parent / "python"
    version = subprocess.run([str(py), "-c", "import moto; print(moto.__version__)"],
                             capture_output=True, text=True, timeout=60).stdout.strip()
    port = free_port()
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], cwd=PEERS,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(proc, port, "moto_server")
    return ServerProc("moto", proc, port, ("json", "query"), version,
                      "werkzeug threaded server; answers Connection: close (no keep-alive)")


# -- sqslite --------------------------------------------------------------------------------

def ensure_sqslite(log=print) -> Path:
    prefix = PEERS / "node"
    cli = prefix / "node_modules" / "sqslite" / "bin" / "cli.js"
    if cli.exists():
        return cli
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        raise Unavailable("node/npm not found on PATH")
    prefix.mkdir(parents=True, exist_ok=True)
    log(f"  installing sqslite into {prefix.relative_to(ROOT)} (once) ...")
    try:
        subprocess.run([npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "sqslite"],
                       check=True, capture_output=True, timeout=INSTALL_TIMEOUT_S)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
        err = getattr(e, "stderr", b"") or b""
        raise Unavailable(f"could not npm install sqslite: {e}; {err.decode(errors='replace')[-300:]}")
    if not cli.exists():
        raise Unavailable("sqslite installed but bin/cli.js is missing")
    return cli


def start_sqslite(log=print, logging: bool = False) -> ServerProc:
    cli = ensure_sqslite(log)
    node = shutil.which("node")
    if not node:
        raise Unavailable("node not found on PATH")
    try:
        version = json.loads((cli.parents[1] / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        version = "?"
    node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    port = free_port()
    if logging:
        argv = [node, str(cli), "--host", "127.0.0.1", f"--port={port}"]
        notes = "its CLI, with its default per-request logging to stdout (here /dev/null)"
    else:
        # sqslite's CLI always logs every request (fastify's pino logger, to stdout); elasticmq-py
        # logs no request either way. For a like-for-like comparison the server is started through
        # sqslite's own API, as its CLI does, with only the logger turned off.
        lib = str(cli.parents[1] / "lib")
        code = (f"require({json.dumps(lib)})({{logger: false}}).listen("
                f"{{host: '127.0.0.1', port: {port}}}, (err) => {{ if (err) throw err; }});")
        argv = [node, "-e", code]
        notes = "started through its API as its CLI does, with fastify's per-request logger off"
    proc = subprocess.Popen(argv, cwd=PEERS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(proc, port, "sqslite")
    return ServerProc("sqslite", proc, port, ("query",), version, f"node {node_version}, fastify; {notes}")
