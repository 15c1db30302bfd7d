"""The product as a cluster: `elasticmq-py serve --config` processes with a [cluster] section.

The active master executes SQS calls and every other member forwards to it (with forwarding off
they answer a retryable 503, tests/cluster/test_replication.py); /health?role=master follows
activity, and plain /health is 200 wherever a client is served (on the master, and on every member
that forwards to it); kill -9, SIGSTOP, step-down and runtime membership changes move the master;
the CLI shows and steers it. The fixture also checks every node's history: identical view
sequences, never two active masters."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from elasticmq_py import cli
from elasticmq_py.testing.cluster import Cluster

pytestmark = pytest.mark.slow

THREE = ["n1", "n2", "n3"]


def _health_is(c: Cluster, active: str, names: list[str]):
    """/health?role=master is 200 on the active master only; /health on every named member."""
    def pred() -> bool:
        return (all(c.health(n, "master") == (200 if n == active else 503) for n in names)
                and all(c.health(n) == 200 for n in names))
    return pred


def _cli(*argv: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "elasticmq_py", *argv], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def test_three_servers_serve_only_on_the_active_master(make_cluster, capsys):
    c = make_cluster(THREE)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    c.wait_for("/health?role=master is 200 on the master only", _health_is(c, master, THREE), 5)
    others = [n for n in THREE if n != master]
    code, doc = c.health_doc(others[0])
    assert (code, doc["serves"], doc["master"]) == (200, "forwarding", master), doc
    code, doc = c.health_doc(others[0], "master")
    assert code == 503 and doc["serves"] == "no" and f"the master is {master}" in doc["reason"], doc
    assert c.health_doc(master)[1]["serves"] == "itself"
    assert c.health(master, "bogus") == 400

    # The active master serves SQS.
    sqs = c.sqs(master)
    url = sqs.create_queue(QueueName="orders")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    assert [m["Body"] for m in sqs.receive_message(QueueUrl=url).get("Messages", [])] == ["hello"]

    # Every other member forwards to the master: its endpoint works, with its own queue URLs.
    via = c.sqs(others[0])
    via_url = via.get_queue_url(QueueName="orders")["QueueUrl"]
    assert via_url.startswith(c.url(others[0])), via_url
    via.send_message(QueueUrl=via_url, MessageBody="through " + others[0])
    got = via.receive_message(QueueUrl=via_url, WaitTimeSeconds=2).get("Messages", [])
    assert [m["Body"] for m in got] == ["through " + others[0]]
    via.delete_message(QueueUrl=via_url, ReceiptHandle=got[0]["ReceiptHandle"])
    c.wait_for("the replicas converge to the master's digest", lambda: c.converged(THREE), 10)

    # GET /cluster, /metrics and the CLI's status table.
    st = c.status(others[1])
    assert st["master"] == master and st["active"] is False and st["role"] == "follower"
    rep = st["replication"]
    assert rep["enabled"] and rep["role"] == "replica" and rep["policy"] == "majority"
    assert rep["applied_seq"] == c.status(master)["replication"]["log"]["last_seq"]
    assert set(st["peers"]) == set(THREE) - {others[1]} and all(p["out"] == "up" for p in st["peers"].values())
    with urllib.request.urlopen(c.url(master) + "/metrics") as r:
        metrics = r.read().decode()
    assert "elasticmq_cluster_active 1.0" in metrics
    assert f"elasticmq_cluster_view_id {float(st['view']['view_id'])}" in metrics
    assert f'elasticmq_cluster_peer_link_up{{direction="out",peer="{others[0]}"}} 1.0' in metrics
    code, out, err = _cli("status", "--endpoint", c.url(others[0]))
    assert code == 0, err
    assert f"master {master}" in out and "inactive" in out and "members n1, n2, n3" in out, out
    for peer in (master, others[1]):
        assert any(line.startswith(peer) and " up " in line for line in out.splitlines()), out
    # A reader that goes away (`status | head -0`) ends the CLI quietly, without a traceback.
    p = subprocess.Popen([sys.executable, "-m", "elasticmq_py", "status", "--endpoint", c.url(master)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=30) == 141 and "Traceback" not in err, err
    assert cli.main(["status", "--json", "--endpoint", c.url(master)]) == 0
    assert json.loads(capsys.readouterr().out)["active"] is True

    # Mutating admin calls need the secret; only the master can step down.
    assert c.request(master, "POST", "/cluster/step-down", secret=None)[0] == 401
    assert c.request(master, "POST", "/cluster/step-down", secret="wrong")[0] == 401
    assert c.request(others[0], "POST", "/cluster/step-down")[0] == 409
    assert c.status(master)["active"], "a refused call changes nothing"

    # Operator-forced failover through the CLI.
    assert cli.main(["step-down", "--endpoint", c.url(master), "--secret-file", _secret_file(c)]) == 0
    new = c.wait_for("another master", c.stable_master(members=set(THREE)), 10)
    assert new != master
    c.wait_for("/health follows the master", _health_is(c, new, THREE), 5)

    # kill -9 the active node: another becomes active and healthy.
    c.kill(new)
    rest = [n for n in THREE if n != new]
    third = c.wait_for("a master among the survivors", c.stable_master(among=rest, members=set(rest)), 10)
    c.wait_for("/health 200 on the survivor master", _health_is(c, third, rest), 5)
    fresh = c.sqs(third)
    fresh.create_queue(QueueName="after-failover")

    # The last member alone has no master to serve or forward to: 503, and it says why.
    c.kill(third)
    last = next(n for n in rest if n != third)

    def last_unhealthy() -> bool:
        code, doc = c.health_doc(last)
        return code == 503 and doc["serves"] == "no" and doc["reason"]
    c.wait_for("/health 503 on a member without a reachable master", last_unhealthy, 5)
    assert c.health(last, "master") == 503


def _secret_file(c: Cluster) -> str:
    path = c.tmp / "secret.txt"
    path.write_text(c.secret + "\n")
    return str(path)


def test_members_add_and_remove_through_the_cli(make_cluster):
    c = make_cluster(["n1", "n2", "n3", "n4"])
    for n in THREE:
        c.cluster_for[n] = THREE   # n4 knows them all; they learn of n4 only when it is added
    for n in THREE:
        c.start(n)
    master = c.wait_for("first master", c.stable_master(members=set(THREE)), 15)
    c.start("n4")
    spec = next(s for s in c.specs if s.name == "n4")
    argv = ["n4", "--raft", str(spec.raft_addr), "--stream", str(spec.stream_addr), "--endpoint", c.url(master),
            "--config", str(c.config_path(master))]
    assert cli.main(["members", "add", *argv]) == 0
    m = c.wait_for("a view with n4", c.stable_master(members={"n1", "n2", "n3", "n4"}), 15)
    assert c.status(m)["configured"] == ["n1", "n2", "n3", "n4"]
    assert c.status("n4")["view"]["members"] == ["n1", "n2", "n3", "n4"]
    assert c.health("n4", "master") == (200 if m == "n4" else 503)
    # every member learnt n4's stream address with the configuration change: n4 gets the data
    sqs = c.sqs(m)
    url = sqs.create_queue(QueueName="after-n4")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="to all four")
    c.wait_for("n4 holds the same state", lambda: c.converged(["n1", "n2", "n3", "n4"]), 15)
    code, _, err = _cli("members", "remove", "n4", "--endpoint", c.url(m), "--secret", c.secret)
    assert code == 0, err
    m2 = c.wait_for("a view without n4", c.stable_master(among=THREE, members=set(THREE)), 15)
    assert c.status(m2)["configured"] == THREE
    # a refused change reports why, and exits non-zero
    assert cli.main(["members", "remove", "n4", "--endpoint", c.url("n1"), "--secret", "wrong"]) == 1


def test_five_servers_kill_and_sigstop(make_cluster):
    names = ["n1", "n2", "n3", "n4", "n5"]
    c = make_cluster(names)
    c.start_all()
    first = c.wait_for("first master", c.stable_master(members=set(names)), 15)
    c.kill(first)
    four = [n for n in names if n != first]
    second = c.wait_for("master after kill -9", c.stable_master(among=four, members=set(four)), 10)
    c.wait_for("/health follows", _health_is(c, second, four), 5)

    stopped_at = time.time()
    c.sigstop(second)
    three = [n for n in four if n != second]
    third = c.wait_for("master after SIGSTOP", c.stable_master(among=three, members=set(three)), 10)
    time.sleep(max(0.0, c.timing.leader_fallback + 0.2 - (time.time() - stopped_at)))
    c.sigcont(second)
    # resumed, the old master is inactive and answers 503 from its first request on
    assert c.health(second, "master") == 503
    c.wait_for("the old master rejoins as a replica", c.stable_master(among=four, members=set(four)), 10)
    assert c.health(second, "master") == 503 and c.status(second)["active"] is False
    c.wait_for("the old master serves its clients by forwarding", lambda: c.health(second) == 200, 5)
    deact = [e["ts"] for e in c.history(second) if e["event"] == "deactivated" and e["ts"] >= stopped_at - 1]
    act = [e["ts"] for e in c.history(third) if e["event"] == "activated" and e["ts"] > stopped_at]
    assert deact and act and deact[0] < act[0], (deact, act)
