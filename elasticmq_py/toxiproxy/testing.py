"""Starting a Toxiproxy server for tests: the real ``toxiproxy-server`` when one is on PATH, else
this package's builtin server, as a child process either way.

``ELASTICMQ_PY_TOXIPROXY`` chooses:

* ``auto`` (the default): ``real`` if ``toxiproxy-server`` is on PATH, else ``builtin``;
* ``builtin``: ``python -m elasticmq_py.toxiproxy`` (always available);
* ``real``: ``toxiproxy-server`` from PATH (or the path in ``ELASTICMQ_PY_TOXIPROXY_BIN``);
  an error if there is none.

    with start_toxiproxy() as tp:          # tp.kind, tp.host, tp.port, tp.pid
        Toxiproxy().update_api_consumer(tp.host, tp.port)
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

ENV_MODE = "ELASTICMQ_PY_TOXIPROXY"
ENV_BIN = "ELASTICMQ_PY_TOXIPROXY_BIN"
MODES = ("auto", "builtin", "real")
START_TIMEOUT = 15.0


class ToxiproxyUnavailable(RuntimeError):
    pass


def resolve_mode(mode: str | None = None) -> tuple[str, str | None]:
    """-> ("builtin", None) or ("real", path of toxiproxy-server)."""
    mode = (mode or os.environ.get(ENV_MODE) or "auto").strip().lower()
    if mode not in MODES:
        raise ToxiproxyUnavailable(f"{ENV_MODE}={mode!r}: expected one of {', '.join(MODES)}")
    binary = os.environ.get(ENV_BIN) or shutil.which("toxiproxy-server")
    if mode == "builtin":
        return "builtin", None
    if binary:
        return "real", binary
    if mode == "real":
        raise ToxiproxyUnavailable(f"{ENV_MODE}=real but no toxiproxy-server on PATH")
    return "builtin", None


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _wait_connectable(host: str, port: int, proc: subprocess.Popen, deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ToxiproxyUnavailable(f"toxiproxy server exited with {proc.returncode}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ToxiproxyUnavailable(f"toxiproxy server not listening on {host}:{port} in time")


@dataclass
class RunningToxiproxy:
    kind: str
    host: str
    port: int
    proc: subprocess.Popen = field(repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self) -> "RunningToxiproxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_toxiproxy(mode: str | None = None, host: str = "127.0.0.1",
                    extra_args: list[str] | None = None) -> RunningToxiproxy:
    kind, binary = resolve_mode(mode)
    deadline = time.monotonic() + START_TIMEOUT
    if kind == "real":
        port = _free_port(host)
        proc = subprocess.Popen([binary, "-host", host, "-port", str(port), *(extra_args or [])],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_connectable(host, port, proc, deadline)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        return RunningToxiproxy("real", host, port, proc)
    proc = subprocess.Popen(
        [sys.executable, "-m", "elasticmq_py.toxiproxy", "--host", host, "--port", "0",
         "--print-port", "--log-level", "WARNING", *(extra_args or [])],
        stdout=subprocess.PIPE, stderr=None, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], max(deadline - time.monotonic(), 0))
        line = proc.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            raise ToxiproxyUnavailable(f"builtin toxiproxy did not start (got {line!r})")
        port = int(line)
        _wait_connectable(host, port, proc, deadline)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return RunningToxiproxy("builtin", host, port, proc)
