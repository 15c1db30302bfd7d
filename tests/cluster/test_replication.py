"""Replicated storage end to end: real node processes, boto3 clients, the history checker.

Each scenario records every client attempt in the checker's schema next to the nodes' own
history files; after the faults the cluster heals, the queues are drained, the members' digests
are recorded, and cluster.checker decides: under `majority` nothing acknowledged may be lost,
nothing unexpected delivered, FIFO order kept, never two active masters, and every member ends
with the master's digest. A failing test leaves everything in its tmp_path folder.
"""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest
from botocore.exceptions import ClientError

from cluster.checker import check_dir
from cluster.config import Timing
from elasticmq_py.testing.cluster import Cluster
from tests.cluster.workload import VISIBILITY, Nemesis, Recorder, queue_url, record_digests, sqs_client, stop_all

pytestmark = pytest.mark.slow

THREE = ["n1", "n2", "n3"]
# For scenarios that load the machine flat out (three nodes, load generators and a state
# transfer on two cores, next to another test): the LAN defaults elect a new master whenever a
# process is starved for 0.2 s, which is a test of the scheduler, not of replication.
LOADED = Timing(heartbeat=0.1, election_min=0.8, election_max=1.6, vote_guard=0.7, lease=0.6,
                leader_fallback=2.0, connection_timeout=2.0, keepalive=0.4, suspect=2.0, debounce=0.5)
QUEUES = ("jobs", "orders.fifo")


def _setup_queues(c: Cluster, node: str) -> None:
    sqs = c.sqs(node)
    sqs.create_queue(QueueName="jobs")
    sqs.create_queue(QueueName="orders.fifo", Attributes={"FifoQueue": "true"})


def _urls(c: Cluster, among: list[str] | None = None):
    def urls() -> dict[str, str]:
        return {n: c.url(n) for n in (among or c.alive())}
    return urls


def _finish(c: Cluster, recorders: list[Recorder], survivors: list[str], master: str) -> None:
    """Heal is done: drain through the master, record digests once converged, check."""
    stop_all(recorders)
    # Messages handed out by receives whose answers were lost are invisible for one timeout.
    recorders[0].drain(master, c.url(master), visible_at=time.time() + VISIBILITY + 0.5)
    c.wait_for("members converge", lambda: c.converged(survivors), 20)
    record_digests(c.tmp / "digests.jsonl", {n: (c.replication(n)["digest"], master) for n in survivors})
    for r in recorders:
        r.close()
    verdict = check_dir(c.tmp)
    failures = verdict.failures("majority", strict=True)
    assert not failures, f"{failures}\n{verdict.summary('majority')}\n(histories in {c.tmp})"
    acked = sum(q.acknowledged for q in verdict.queues.values())
    assert acked > 20, f"too little acknowledged work to mean anything: {verdict.summary('majority')}"


def _recorders(c: Cluster, n: int, urls) -> list[Recorder]:
    return [Recorder(f"c{i}", c.tmp / f"c{i}.jsonl", urls, QUEUES, seed=i) for i in range(n)]


def test_sends_through_every_endpoint_land_once_and_in_order(make_cluster):
    c = make_cluster(THREE)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    # a stable view does not yet mean each replica's stream link to the master is up, and
    # forwarding refuses (503) until it is
    c.wait_for("replicas connected to the master", lambda: all(
        (c.status(n) or {}).get("replication", {}).get("peers", {}).get(master) for n in THREE if n != master), 10)
    _setup_queues(c, master)
    clients = {n: c.sqs(n) for n in THREE}
    sent_fifo: list[str] = []
    for i in range(30):
        node = THREE[i % 3]
        body = f"m{i} via {node}"
        clients[node].send_message(QueueUrl=queue_url(c.url(node), "jobs"), MessageBody=body)
        clients[node].send_message(QueueUrl=queue_url(c.url(node), "orders.fifo"), MessageBody=body,
                                   MessageGroupId="g", MessageDeduplicationId=f"d{i}")
        sent_fifo.append(body)
    # Received through a replica's endpoint too (forwarded), each exactly once, FIFO in order.
    reader = THREE[(THREE.index(master) + 1) % 3]
    got_std: list[str] = []
    got_fifo: list[str] = []
    for queue, into in (("jobs", got_std), ("orders.fifo", got_fifo)):
        url = queue_url(c.url(reader), queue)
        while True:
            msgs = clients[reader].receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not msgs:
                break
            for m in msgs:
                into.append(m["Body"])
                clients[reader].delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert sorted(got_std) == sorted(sent_fifo) and len(got_std) == 30
    assert got_fifo == sent_fifo
    c.wait_for("members converge", lambda: c.converged(THREE), 10)
    st = c.status(master)["replication"]
    assert st["role"] == "master" and st["serving"] and not st["halted"]
    assert all(r["connected"] and r["lag_batches"] == 0 for r in st["replicas"].values()), st
    fwd = [c.status(n)["replication"]["forwarding"]["forwarded"] for n in THREE if n != master]
    assert sum(fwd) >= 40, "the replicas forwarded their clients' requests"
    # The master's history tells the story: its sync, the client operations it executed (also
    # the forwarded ones), and the replicas' acknowledged positions.
    time.sleep(1.2)
    events = c.history(master)
    kinds = {e["event"] for e in events}
    assert {"sync_started", "synced", "op", "replication"} <= kinds, kinds
    ops = [e for e in events if e["event"] == "op"]
    sends = [e for e in ops if e["action"] == "SendMessage"]
    # (the SDK may retry a send whose answer was slow: a FIFO retry is deduplicated, so >= 60)
    assert len([e for e in sends if e["outcome"] == "ok"]) >= 60 and all(e["completed"] >= e["ts"] for e in sends)
    last = [e for e in events if e["event"] == "replication"][-1]
    assert set(last["replicas"]) == set(THREE) - {master}


def test_kill_master_under_load_loses_nothing_acknowledged(make_cluster):
    c = make_cluster(THREE)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    _setup_queues(c, master)
    nemesis = Nemesis(c.tmp / "nemesis.jsonl")
    recorders = [r.start() for r in _recorders(c, 3, _urls(c))]
    time.sleep(3)
    c.kill(master)
    nemesis.note(master, "kill", ts=c.killed_at(master))
    survivors = [n for n in THREE if n != master]
    new = c.wait_for("a new master", c.stable_master(among=survivors), 15)
    time.sleep(2)
    # The old master comes back with empty memory but its Raft state-dir: it knows it was a
    # member (the `started` line says so) and is amnesiac, counting in no sync quorum, until
    # the new master has brought it up to date.
    c.start(master)
    nemesis.note(master, "restart", "empty memory")
    c.wait_for(f"{master} caught up", lambda: any(e["event"] == "caught_up" for e in c.history(master)), 30)
    started = [e for e in c.history(master) if e["event"] == "started"]
    assert [e.get("restarted") for e in started] == [False, True], started
    c.wait_for(f"{master} in the view", c.stable_master(members=set(THREE)), 15)
    assert c.replication(master)["amnesiac"] is False
    time.sleep(1)
    nemesis.close()
    _finish(c, recorders, list(THREE), new)


def test_an_isolated_master_is_reset_and_its_minority_never_succeeds(make_cluster):
    c = make_cluster(THREE, proxied=True)
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    _setup_queues(c, master)
    majority = [n for n in THREE if n != master]
    nemesis = Nemesis(c.tmp / "nemesis.jsonl")
    # Clients of the majority keep writing; one client talks to the isolated master only.
    recorders = [r.start() for r in _recorders(c, 2, _urls(c, majority))]
    time.sleep(1.5)
    c.isolate(master)
    cut = time.time()
    nemesis.note(master, "partition", "isolated from the others (both directions)", ts=cut)
    minority = Recorder("m0", c.tmp / "m0.jsonl", _urls(c, [master]), QUEUES, seed=99).start()
    new = c.wait_for("a master in the majority", c.stable_master(among=majority), 15)
    time.sleep(3)
    minority.stop()
    # The minority answered nothing with success once its lease (0.15 s) had run out: every
    # write and receive issued there later is refused or of unknown outcome, never ok.
    late_ok = [json.loads(line) for line in (c.tmp / "m0.jsonl").read_text().splitlines()
               if json.loads(line)["outcome"] == "ok" and json.loads(line)["ts"] > cut + 0.5]
    assert not late_ok, f"the isolated minority answered with success: {late_ok[:3]}"
    assert c.status(master)["active"] is False
    c.heal_all()
    nemesis.note("", "heal")
    nemesis.close()
    c.wait_for("the old master rejoins the master's view", c.stable_master(members=set(THREE)), 15)
    recorders.append(minority)
    _finish(c, recorders, THREE, new)


def _fill(url: str, queue: str, count: int, threads: int = 4) -> None:
    """Bulk load through the JSON protocol with a plain keep-alive client: boto3 manages
    ~500 calls/s per thread, which would make 100,000 messages the slowest part of the test."""
    host, port = url.removeprefix("http://").split(":")
    body_of = {"QueueUrl": queue_url(url, queue)}

    def work(first: int, n: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessageBatch"}
        for start in range(first, first + n, 10):
            entries = [{"Id": str(i), "MessageBody": f"{i:09d}" + "x" * 91} for i in range(start, min(start + 10, first + n))]
            for _ in range(20):   # the fill is set-up: retry a throttled or 503 batch
                conn.request("POST", "/", json.dumps({**body_of, "Entries": entries}), headers)
                r = conn.getresponse()
                data = r.read()
                if r.status == 200:
                    break
                time.sleep(0.1)
            # AWS leaves "Failed" out when no entry failed
            assert r.status == 200 and not json.loads(data).get("Failed"), data[:300]
        conn.close()

    per = count // threads
    ts = [threading.Thread(target=work, args=(i * per, per)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def test_a_fresh_node_joins_100k_messages_while_writes_continue(make_cluster):
    c = make_cluster(THREE, timing=LOADED)
    # A small replication log, so that the joiner is behind its start: a state transfer, not a
    # replay of the log, must bring it up.
    c.replication_config = {"policy": "majority", "log-limit-mb": 1}
    for n in ("n1", "n2"):
        c.start(n)
    master = c.wait_for("a master of two", c.stable_master(among=["n1", "n2"]), 15)
    c.sqs(master).create_queue(QueueName="bulk")
    _fill(c.url(master), "bulk", 100_000)

    # A writer keeps sending to the master while n3 starts empty and catches up by transfer.
    stop = threading.Event()
    answers: list[tuple[float, float, str]] = []

    def writer() -> None:
        sqs = sqs_client(c.url(master))
        i = 0
        while not stop.is_set():
            t0 = time.time()
            try:
                sqs.send_message(QueueUrl=queue_url(c.url(master), "bulk"), MessageBody=f"during {i}")
                answers.append((t0, time.time(), "ok"))
            except ClientError as e:
                answers.append((t0, time.time(), e.response["Error"]["Code"]))
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.5)
    c.start("n3")
    c.wait_for("n3 received a state transfer", lambda: (c.status("n3") or {}).get("replication", {})
               .get("last_transfer"), 30)
    c.wait_for("n3 in the view", c.stable_master(members=set(THREE)), 15)
    time.sleep(0.5)
    stop.set()
    t.join()
    c.wait_for("n3 converges to the master's digest", lambda: c.converged(THREE), 30)
    lt = c.status("n3")["replication"]["last_transfer"]
    assert lt["direction"] == "received" and lt["records"] >= 100_000, lt
    failed = [a for a in answers if a[2] != "ok"]
    assert not failed, f"the master failed requests during the transfer: {failed[:5]}"
    gaps = [b[1] - a[1] for a, b in zip(answers, answers[1:])]
    assert len(answers) > 50 and max(gaps) < 2.0, \
        f"the master stalled for {max(gaps):.2f} s during the transfer ({len(answers)} sends)"
    stats = c.sqs(master).get_queue_attributes(QueueUrl=queue_url(c.url(master), "bulk"),
                                               AttributeNames=["ApproximateNumberOfMessages"])
    assert int(stats["Attributes"]["ApproximateNumberOfMessages"]) >= 100_000 + len(answers)


def test_forwarding_off_refuses_on_replicas_with_a_retryable_503(make_cluster):
    c = make_cluster(THREE)
    c.replication_config = {"forward": False}
    c.start_all()
    master = c.wait_for("an active master", c.stable_master(members=set(THREE)), 15)
    url = c.sqs(master).create_queue(QueueName="orders")["QueueUrl"]
    other = next(n for n in THREE if n != master)
    bad = c.sqs(other, retries={"mode": "standard", "total_max_attempts": 2})
    for call in (lambda: bad.send_message(QueueUrl=url, MessageBody="x"),
                 lambda: bad.receive_message(QueueUrl=url, WaitTimeSeconds=1),
                 lambda: bad.list_queues()):
        with pytest.raises(ClientError) as ei:
            call()
        err = ei.value.response
        assert err["Error"]["Code"] == "ServiceUnavailable", err
        assert err["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert err["ResponseMetadata"]["RetryAttempts"] == 1, "botocore classifies it as retryable"
        assert f"the master is {master}" in err["Error"]["Message"]
    # /health says so too, so that a load balancer leaves such a member out
    code, doc = c.health_doc(other)
    assert code == 503 and "Forwarding is off" in doc["reason"] and f"the master is {master}" in doc["reason"], doc
    assert c.health(master) == 200
