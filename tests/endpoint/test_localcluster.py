"""`elasticmq-py local-cluster` as a user runs it: a real process that starts real node processes,
prints where they are, and takes them all down on Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import pytest
from botocore.config import Config as BotoConfig

from elasticmq_py import localcluster

ROOT = Path(__file__).parents[2]
NODE_LINE = re.compile(r"^\s+(n\d+)\s+(http://127\.0\.0\.1:\d+)\s+pid (\d+)\s+(.+)$")
MASTER_LINE = re.compile(r"^master\s+(n\d+)\s+(http://\S+)$")


class Command:
    """The command as a subprocess, its stdout read by a thread so a wait can time out."""

    def __init__(self, *argv: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "elasticmq_py", "local-cluster", *argv],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._pumping = threading.Thread(target=self._pump, daemon=True)
        self._pumping.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def read_until(self, marker: str, timeout: float) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.proc.kill()
                raise AssertionError(f"no {marker!r} line; got {seen}; stderr: {self.proc.stderr.read()}")
            seen.append(line)
            if line.startswith(marker):
                return seen

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._pumping.join(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _processes_using(path: Path) -> list[int]:
    """Pids whose command line mentions ``path`` (the node processes name their config in it)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(path).encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                pass
    return found


def _status(url: str) -> dict:
    with urllib.request.urlopen(url + "/cluster", timeout=5) as r:
        return json.load(r)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_three_nodes_start_serve_and_stop_on_ctrl_c(tmp_path):
    # one group: one master for every queue (a group per node is the next test's)
    cmd = Command("--nodes", "3", "--http-port", "0", "--dir", str(tmp_path), "--groups", "1", "--log-level", "WARNING")
    try:
        out = cmd.read_until("ready:", 30)
        nodes = {m[1]: (m[2], int(m[3]), m[4]) for m in map(NODE_LINE.match, out) if m}
        assert sorted(nodes) == ["n1", "n2", "n3"], out
        masters = [m for m in map(MASTER_LINE.match, out) if m]
        assert len(masters) == 1, out
        master, master_url = masters[0][1], masters[0][2]
        assert nodes[master][0] == master_url and nodes[master][2] == "master"
        assert [n for n, (_, _, role) in nodes.items() if role == "master"] == [master]
        assert f"status     elasticmq-py status --endpoint {master_url}" in out
        assert f"directory  {tmp_path}" in out
        assert any(line.startswith(f"dashboard  {master_url}/ui ") for line in out), out
        with urllib.request.urlopen(master_url + "/ui") as r:
            assert r.status == 200 and b"/ui/static/dashboard.js" in r.read()

        # Every node answers GET /cluster and names the same master as the command did.
        for name, (url, _, _) in nodes.items():
            st = _status(url)
            assert st["node"] == name and st["master"] == master, st
        assert _status(master_url)["active"] is True
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["secret"] + [f"n{k}.{ext}" for k in (1, 2, 3) for ext in ("toml", "log", "history.jsonl", "data")])
        assert (tmp_path / "n1.data" / "raft" / "raft.journal").is_file(), "Raft state is durable (cluster/runtime.py)"
        assert (tmp_path / "n1.data" / "journal" / "LOCK").is_file(), "and so are queues and messages (the journal)"
        assert f"data       {tmp_path}/nK.data per node (fsync always)" in out
        assert (tmp_path / "secret").stat().st_mode & 0o077 == 0

        sqs = boto3.session.Session().client(
            "sqs", endpoint_url=master_url, region_name="us-east-1", aws_access_key_id="AKIDTEST",
            aws_secret_access_key="secret", config=BotoConfig(retries={"max_attempts": 3}))
        q = sqs.create_queue(QueueName="local-cluster")["QueueUrl"]
        sqs.send_message(QueueUrl=q, MessageBody="hello")
        got = sqs.receive_message(QueueUrl=q, WaitTimeSeconds=1).get("Messages", [])
        assert [m["Body"] for m in got] == ["hello"]

        pids = [pid for _, pid, _ in nodes.values()]
        assert all(_alive(p) for p in pids)
        cmd.proc.send_signal(signal.SIGINT)
        assert cmd.proc.wait(20) == 0, cmd.proc.stderr.read()
        assert not [p for p in pids if _alive(p)]
        assert _processes_using(tmp_path) == []
        rest = []
        while (line := cmd.lines.get(timeout=5)) is not None:
            rest.append(line)
        assert any(line.startswith("elasticmq-py local-cluster: stopped") for line in rest), rest
    finally:
        cmd.close()


def _taken_port() -> socket.socket:
    """A listening socket on a port local-cluster could be given as its base."""
    for _ in range(100):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", int.from_bytes(os.urandom(2), "big") % 10_000 + 10_000))
        except OSError:
            s.close()
            continue
        s.listen()
        return s
    raise RuntimeError("no free port")


def test_a_taken_port_is_a_clear_error(tmp_path):
    with _taken_port() as s:
        port = s.getsockname()[1]
        p = subprocess.run([sys.executable, "-m", "elasticmq_py", "local-cluster", "--http-port", str(port),
                            "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert f"{port} (n1 http)" in p.stderr and "taken" in p.stderr, p.stderr
    assert not list(tmp_path.iterdir()), "nothing is started or written"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_node_dying_at_start_up_fails_the_command_with_its_log(tmp_path):
    # A file where each node's data-dir should be: every node exits at start, binding nothing.
    for n in ("n1", "n2", "n3"):
        (tmp_path / f"{n}.data").write_text("not a directory\n")
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", "local-cluster", "--http-port", "0",
                        "--dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1
    assert "exited with code 1 during start-up" in p.stderr and "Not a directory" in p.stderr, p.stderr
    assert "ready:" not in p.stdout
    assert _processes_using(tmp_path) == []


def test_a_misspelt_log_level_is_a_usage_error_before_anything_starts(tmp_path):
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", "local-cluster", "--http-port", "0",
                        "--dir", str(tmp_path), "--log-level", "NOSUCHLEVEL"],
                       cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "invalid choice: 'NOSUCHLEVEL'" in p.stderr, p.stderr
    assert not list(tmp_path.iterdir()), "nothing was started or written"


def test_a_group_count_out_of_bounds_is_a_clear_error_before_anything_starts(tmp_path):
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", "local-cluster", "--http-port", "0",
                        "--dir", str(tmp_path), "--groups", "0"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "--groups must be between 1 and" in p.stderr, p.stderr
    assert not list(tmp_path.iterdir()), "nothing was started or written"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_nodes_get_a_group_per_node_by_default_and_the_banner_names_their_masters(tmp_path):
    cmd = Command("--nodes", "3", "--http-port", "0", "--dir", str(tmp_path), "--log-level", "WARNING")
    try:
        out = cmd.read_until("ready:", 30)
        [groups] = [line for line in out if line.startswith("groups ")]
        masters = [part.split()[1] for part in groups.split(None, 1)[1].split(", ")]
        assert [part.split()[0] for part in groups.split(None, 1)[1].split(", ")] == ["g0", "g1", "g2"], out
        # (spread over the members from the first view that holds them all: test_groups_process.py)
        assert set(masters) <= {"n1", "n2", "n3"}, out
        [master] = [m[1] for m in map(MASTER_LINE.match, out) if m]
        assert master == masters[0], out     # "master" is group 0's
        cmd.proc.send_signal(signal.SIGINT)
        assert cmd.proc.wait(20) == 0, cmd.proc.stderr.read()
    finally:
        cmd.close()
    assert 'groups = 3' in (tmp_path / "n1.toml").read_text()


def test_port_plan():
    plan = localcluster.plan_ports(3, 9324)
    assert [(n.name, n.http, n.raft, n.stream) for n in plan] == [
        ("n1", 9324, 19324, 19424), ("n2", 9325, 19325, 19425), ("n3", 9326, 19326, 19426)]
    free = localcluster.plan_ports(3, 0)
    ports = [p for n in free for p in (n.http, n.raft, n.stream)]
    assert len(set(ports)) == 9 and all(p < 32768 for p in ports)
    with pytest.raises(localcluster.LocalClusterError, match="below 32768"):
        localcluster.plan_ports(3, 30000)
    with pytest.raises(localcluster.LocalClusterError, match="--nodes"):
        localcluster.plan_ports(0, 0)


def test_node_configs_load_as_cluster_members(tmp_path):
    from elasticmq_py.config import Config

    plan = localcluster.plan_ports(3, 0)
    paths = localcluster.write_configs(tmp_path, plan, "all", forward=False)
    secrets = set()
    for node in plan:
        cfg = Config.from_toml(paths[node.name])
        c = cfg.cluster
        assert cfg.port == node.http and cfg.node_name == node.name
        assert c.self_name == node.name and c.history_path == str(tmp_path / f"{node.name}.history.jsonl")
        assert [(s.name, s.raft_addr.port, s.stream_addr.port, s.http_addr.port) for s in c.cluster.nodes] == \
            [(n.name, n.raft, n.stream, n.http) for n in plan]
        assert c.cluster.replication.policy == "all" and c.cluster.replication.forward is False
        secrets.add(c.cluster.secret)
    assert len(secrets) == 1 and len(secrets.pop()) >= 32
