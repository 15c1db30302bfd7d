"""Replication groups with real processes: `local-cluster --groups 3` on loopback, boto3 clients.

Each member masters one group; queues spread over the groups as they are created; every endpoint
serves every queue (itself or by forwarding to the queue's group master); the dashboard (in
headless Chromium) shows each group and its master as /cluster does; and a kill -9 of one
member pauses only the groups it mastered, loses nothing acknowledged, and its groups serve again
on the survivors.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from elasticmq_py import cli, localcluster
from tests.cluster.workload import sqs_client

pytestmark = pytest.mark.slow

QUEUES = [f"g-{k}" for k in range(6)]


def _retrying(url: str):
    """A client as applications run one: it retries a retryable 503 (a forward refused while a
    stream link to a group master is re-established under the test machine's load)."""
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x", config=Config(retries={"mode": "standard", "max_attempts": 5}))


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _status(url: str) -> dict:
    return json.loads(_get(url + "/cluster")[1])


def _spread(cluster: localcluster.LocalCluster, deadline_s: float) -> list[str]:
    """Each group's master once every member names them, each serves its group, and every
    member masters one."""
    deadline = time.monotonic() + deadline_s
    while True:
        assert not cluster.exited(), f"a node exited: {cluster.exited()}"
        masters = cluster.group_masters()
        if masters is not None and sorted(masters) == sorted(n.name for n in cluster.plan):
            return masters
        assert time.monotonic() < deadline, \
            f"groups not spread over the members: {masters}; statuses {cluster.statuses()}"
        time.sleep(0.1)


@pytest.fixture
def groups3(tmp_path: Path):
    cluster = localcluster.LocalCluster(tmp_path, localcluster.plan_ports(3, 0), fsync=None, groups=3,
                                        log_level="WARNING")
    cluster.start()
    try:
        # A member that missed the first view gets its group by a handover once it has been
        # steady for rebalance-quiet (10 s): under load that is the slow path to the spread.
        yield cluster, _spread(cluster, 30)
    finally:
        cluster.stop()


def _create(cluster: localcluster.LocalCluster) -> dict[str, str]:
    """The queues, each created through another endpoint: name -> its URL path on any node."""
    urls = {}
    for k, q in enumerate(QUEUES):
        node = cluster.plan[k % len(cluster.plan)]
        url = _retrying(node.url).create_queue(QueueName=q)["QueueUrl"]
        urls[q] = url[url.index("/", len("http://")):]
    return urls


def _dashboard_shows_groups(url: str, profile: Path) -> str:
    """Loads the dashboard at ``url`` in headless Chromium (tests/endpoint/browser.py) and waits
    until its groups table shows what the node's /cluster says of each group (all but the lag,
    which moves); the serving pill's text then."""
    from tests.endpoint.browser import start_browser, text_of, wait_until

    def shown(d) -> list[tuple[str, ...]]:
        return [tuple(c.text for i, c in enumerate(tr.find_elements("css selector", "td")) if i != 4)
                for tr in d.find_elements("css selector", "#groups tbody tr")]

    def told() -> list[tuple[str, ...]]:
        return [(str(g["id"]), g["master"], str(g["epoch"]), str(g["queues"]),
                 "yes (active master)" if g["serving"] else "no") for g in _status(url)["groups"]]

    browser = start_browser(profile)
    try:
        browser.get(url + "/ui")
        wait_until(browser, "the groups as /cluster names them", lambda d: shown(d) == told(), timeout=10)
        return text_of(browser, "#serving")
    finally:
        browser.quit()


def test_queues_spread_over_groups_and_every_endpoint_serves_every_queue(groups3, tmp_path):
    cluster, masters = groups3
    paths = _create(cluster)
    # Placement: the group with the fewest queues, so six names land two in each group, on
    # every member's copy.
    for n in cluster.plan:
        st = _status(n.url)
        assert [g["queues"] for g in st["groups"]] == [2, 2, 2], st["groups"]
        assert [g["master"] for g in st["groups"]] == masters
        assert [g["serving"] for g in st["groups"]] == [m == n.name for m in masters]
        assert all(g["epoch"] >= 1 for g in st["groups"])

    # A send to every queue through every endpoint lands once and is received once.
    sent = set()
    for n in cluster.plan:
        sqs = _retrying(n.url)
        for q in QUEUES:
            body = f"{q} via {n.name}"
            sqs.send_message(QueueUrl=n.url + paths[q], MessageBody=body)
            sent.add(body)
    got: list[str] = []
    for k, q in enumerate(QUEUES):
        n = cluster.plan[(k + 1) % len(cluster.plan)]
        sqs = _retrying(n.url)
        for _ in range(10):
            msgs = sqs.receive_message(QueueUrl=n.url + paths[q], MaxNumberOfMessages=10).get("Messages", [])
            if not msgs:
                break
            for m in msgs:
                got.append(m["Body"])
                sqs.delete_message(QueueUrl=n.url + paths[q], ReceiptHandle=m["ReceiptHandle"])
    assert sorted(got) == sorted(sent)

    # ListQueues (no queue named: group 0) sees every group's queues from any endpoint.
    for n in cluster.plan:
        listed = _retrying(n.url).list_queues(QueueNamePrefix="g-").get("QueueUrls", [])
        assert sorted(u.rsplit("/", 1)[1] for u in listed) == QUEUES

    for n in cluster.plan:
        code, body = _get(n.url + "/health")
        health = json.loads(body)
        assert code == 200 and health["serves"] == "forwarding", health
        assert [g["serves"] for g in health["groups"]] == ["itself" if m == n.name else "forwarding"
                                                           for m in masters]
        assert _get(n.url + "/health?role=master")[0] == 200   # each masters a group
        metrics = _get(n.url + "/metrics")[1].decode()
        mine = masters.index(n.name)
        assert f'elasticmq_cluster_group_serving{{group="{mine}"}} 1.0' in metrics
        assert 'elasticmq_cluster_group_queues{group="0"} 2.0' in metrics

    _dead_letter_move_across_groups(cluster, masters)
    # A move task runs in its source queue's group, whichever endpoint starts, lists or cancels
    # it: g-1 and g-4 are group 1's (placed in turn), g-1 the dead-letter queue of g-4.
    arn = {q: f"arn:aws:sqs:us-east-1:000000000000:{q}" for q in ("g-1", "g-4")}
    first = _retrying(cluster.plan[0].url)
    first.set_queue_attributes(QueueUrl=cluster.plan[0].url + paths["g-4"], Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn["g-1"], "maxReceiveCount": 5})})
    first.send_message_batch(QueueUrl=cluster.plan[0].url + paths["g-1"],
                             Entries=[{"Id": str(k), "MessageBody": "dead"} for k in range(10)])
    for k, n in enumerate(cluster.plan):
        lister, canceller = (cluster.plan[(k + d) % len(cluster.plan)].url for d in (1, 2))
        handle = _retrying(n.url).start_message_move_task(
            SourceArn=arn["g-1"], DestinationArn=arn["g-4"], MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
        [task] = _retrying(lister).list_message_move_tasks(SourceArn=arn["g-1"])["Results"]
        assert (task["Status"], task["TaskHandle"], task["DestinationArn"]) == ("RUNNING", handle, arn["g-4"])
        _retrying(canceller).cancel_message_move_task(TaskHandle=handle)
        [task] = _retrying(n.url).list_message_move_tasks(SourceArn=arn["g-1"])["Results"]
        assert task["Status"] == "CANCELLED", task
    # step-down --group: the master of group 0 hands it to another member, answers once a view
    # moved it, and the group's queues serve on through the old master's endpoint.
    old = next(n for n in cluster.plan if n.name == masters[0])
    to = next(n.name for n in cluster.plan if n.name != old.name)
    assert cli.main(["step-down", "--group", "0", "--to", to, "--endpoint", old.url,
                     "--secret-file", str(cluster.directory / "secret")]) == 0
    deadline = time.monotonic() + 10
    while cluster.group_masters() != [to] + masters[1:]:
        assert time.monotonic() < deadline, f"group 0 not moved to {to}: {cluster.statuses()}"
        time.sleep(0.1)
    sqs = _retrying(old.url)
    for q in QUEUES:
        sqs.send_message(QueueUrl=old.url + paths[q], MessageBody="after the step-down")
    # The dashboard of the member that now masters two groups shows each group and its master.
    pill = _dashboard_shows_groups(next(n.url for n in cluster.plan if n.name == to), tmp_path / "chromium-profile")
    assert pill == "serving, by forwarding other groups to their masters"


def _dead_letter_move_across_groups(cluster: localcluster.LocalCluster, masters: list[str]) -> None:
    """A message received past maxReceiveCount moves to a dead-letter queue of another group
    (the outbox and the move driver, docs/groups.md) and is received from it once, by a long
    poll that its arrival wakes."""
    sqs = _retrying(cluster.plan[2].url)
    # the groups hold two queues each: the dead-letter queue lands in group 0, its source in 1
    dlq = sqs.create_queue(QueueName="dead")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    deadline = time.monotonic() + 10
    while True:
        try:   # the source's master reads the dead-letter queue from its replica of group 0
            src = sqs.create_queue(QueueName="redriven", Attributes={"RedrivePolicy": policy})["QueueUrl"]
            break
        except ClientError:
            assert time.monotonic() < deadline, "the dead-letter queue never became visible to its source"
            time.sleep(0.1)
    groups = [g["queues"] for g in _status(cluster.plan[2].url)["groups"]]   # it placed both
    assert groups == [3, 3, 2], groups
    sent = sqs.send_message(QueueUrl=src, MessageBody="to the dead letters")["MessageId"]
    first = sqs.receive_message(QueueUrl=src, VisibilityTimeout=0)["Messages"]
    assert [m["MessageId"] for m in first] == [sent]
    # a long poll parked on the dead-letter queue's master before the move
    dead_master = next(n for n in cluster.plan if n.name == masters[0]).url
    dlq = dead_master + dlq[dlq.index("/", len("http://")):]
    polled: dict[str, list] = {}
    poll = threading.Thread(target=lambda: polled.update(got=_retrying(dead_master).receive_message(
        QueueUrl=dlq, WaitTimeSeconds=10).get("Messages", [])))
    poll.start()
    time.sleep(0.3)
    started = time.monotonic()
    # received again past maxReceiveCount: it leaves through the outbox, and the receive gets nothing
    assert sqs.receive_message(QueueUrl=src).get("Messages", []) == []
    poll.join(12)
    assert time.monotonic() - started < 5, "the arrival woke the long poll, not the end of its wait"
    got = polled["got"]
    assert [(m["MessageId"], m["Body"]) for m in got] == [(sent, "to the dead letters")]
    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=got[0]["ReceiptHandle"])
    assert sqs.receive_message(QueueUrl=dlq).get("Messages", []) == []
    assert sqs.receive_message(QueueUrl=src).get("Messages", []) == []


def _producers(nodes: list, paths: dict[str, str], stop: threading.Event, timeout: float):
    """A producer per queue, through ``nodes``' endpoints in turn, each retrying a send that did
    not come back ok (a new body each time: only acknowledged sends are counted), until ``stop``.
    (acked bodies, errors with their times and codes, times of the oks, the threads) per queue."""
    acked: dict[str, list[str]] = {q: [] for q in QUEUES}
    errors: dict[str, list[tuple[float, str]]] = {q: [] for q in QUEUES}
    oks: dict[str, list[float]] = {q: [] for q in QUEUES}

    def produce(q: str) -> None:
        clients = [(n, sqs_client(n.url, timeout=timeout)) for n in nodes]
        k = 0
        while not stop.is_set():
            n, sqs = clients[k % len(clients)]
            body = f"{q}-{k}"
            k += 1
            try:
                sqs.send_message(QueueUrl=n.url + paths[q], MessageBody=body)
            except (ClientError, BotoCoreError) as e:
                code = e.response["Error"]["Code"] if isinstance(e, ClientError) else type(e).__name__
                errors[q].append((time.time(), code))
                time.sleep(0.02)
                continue
            acked[q].append(body)
            oks[q].append(time.time())
            time.sleep(0.01)

    threads = [threading.Thread(target=produce, args=(q,), daemon=True) for q in QUEUES]
    for t in threads:
        t.start()
    return acked, errors, oks, threads


@pytest.mark.parametrize("raft_leader", [False, True], ids=["a-follower", "the-raft-leader"])
def test_kill_9_of_a_member_pauses_only_its_group(groups3, raft_leader):
    cluster, masters = groups3
    paths = _create(cluster)
    leader = _status(cluster.plan[0].url)["leader"]
    victim = leader if raft_leader else next(m for m in masters if m != leader)
    lost = masters.index(victim)
    survivors = [n for n in cluster.plan if n.name != victim]

    stop = threading.Event()
    acked, errors, oks, threads = _producers(survivors, paths, stop, timeout=3)
    time.sleep(1.5)
    killed_at = time.time()
    cluster.procs[victim].kill()
    cluster.procs[victim].wait(5)
    # the victim's group gets a new master among the survivors
    deadline = time.monotonic() + 15
    while True:
        sts = {n.name: _status(n.url) for n in survivors}
        new = {tuple(g["master"] for g in st["groups"]) for st in sts.values()}
        if len(new) == 1:
            ms = list(new.pop())
            if victim not in ms and all(sts[m]["groups"][g]["serving"] for g, m in enumerate(ms)):
                break
        assert time.monotonic() < deadline, f"the victim's group has no serving master: {sts}"
        time.sleep(0.1)
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(10)

    # Created one after another, queue k went to group k % 3 (the group with the fewest queues,
    # ties to the lowest id: cluster/directory.py): the victim's group holds two of them.
    paused = [q for k, q in enumerate(QUEUES) if k % 3 == lost]
    gaps = {}
    for q in QUEUES:
        before = [t for t in oks[q] if t < killed_at]
        after = [t for t in oks[q] if t >= killed_at]
        assert before and after, (q, len(before), len(after), errors[q][:5])
        gaps[q] = after[0] - max(before)
    print(f"\nkilled {victim} (raft leader: {raft_leader}); gaps after the kill (s):",
          {q: round(g, 3) for q, g in gaps.items()}, "errors (count, codes, last s after the kill):",
          {q: (len(e), sorted({c for _, c in e}), round(max(t for t, _ in e) - killed_at, 3) if e else None)
           for q, e in errors.items()})
    # The victim's groups: retryable 503s only, and served again within the bound. The other
    # groups see no error on a quiet machine (every run measured so far); on a loaded one a
    # stream link may miss its keepalives, and a forward over it gets the same retryable 503.
    assert all(errors[q] for q in paused) or all(gaps[q] > 0.1 for q in paused), (gaps, errors)
    for q in QUEUES:
        assert {c for _, c in errors[q]} <= {"ServiceUnavailable"}, errors[q][:5]
        assert gaps[q] < 10.0 and all(t - killed_at < 10.0 for t, _ in errors[q]), (q, gaps[q], errors[q][:5])

    # Nothing acknowledged is lost: every acked body is received through a survivor.
    for q in QUEUES:
        n = survivors[0]
        sqs = _retrying(n.url)
        got: set[str] = set()
        empty = 0
        while empty < 2:
            msgs = sqs.receive_message(QueueUrl=n.url + paths[q], MaxNumberOfMessages=10).get("Messages", [])
            empty = empty + 1 if not msgs else 0
            for m in msgs:
                got.add(m["Body"])
                sqs.delete_message(QueueUrl=n.url + paths[q], ReceiptHandle=m["ReceiptHandle"])
        missing = set(acked[q]) - got
        assert not missing, (q, len(missing), sorted(missing)[:5])


def _until_every_group_serves(cluster: localcluster.LocalCluster, deadline_s: float) -> list[str]:
    deadline = time.monotonic() + deadline_s
    while True:
        assert not cluster.exited(), f"a node exited: {cluster.exited()}"
        masters = cluster.group_masters()
        if masters is not None:
            return masters
        assert time.monotonic() < deadline, f"no master for every group: {cluster.statuses()}"
        time.sleep(0.1)


def test_kill_9_of_every_member_with_journals_loses_nothing_acknowledged(tmp_path):
    """Each member keeps every group's entries in one shared journal (fsync = always): a kill -9
    of the whole cluster under load, then a restart from the data-dirs, gives back every send
    that was acknowledged, in every group."""
    plan = localcluster.plan_ports(3, 0)
    cluster = localcluster.LocalCluster(tmp_path, plan, fsync="always", groups=3, log_level="WARNING")
    cluster.start()
    try:
        _until_every_group_serves(cluster, 30)
        paths = _create(cluster)
        stop = threading.Event()
        acked, _, _, threads = _producers(plan, paths, stop, timeout=2)
        time.sleep(2.0)
        for p in cluster.procs.values():          # as close to a power cut as processes get
            p.kill()
        stop.set()
        for p in cluster.procs.values():
            p.wait(5)
        for t in threads:
            t.join(10)
        assert all(len(v) > 5 for v in acked.values()), {q: len(v) for q, v in acked.items()}
        cluster.start()                           # the same data-dirs
        _until_every_group_serves(cluster, 30)
        for q in QUEUES:
            sqs = _retrying(plan[0].url)
            got: set[str] = set()
            empty = 0
            while empty < 2:
                msgs = sqs.receive_message(QueueUrl=plan[0].url + paths[q], MaxNumberOfMessages=10,
                                           VisibilityTimeout=60).get("Messages", [])
                empty = empty + 1 if not msgs else 0
                got |= {m["Body"] for m in msgs}
            missing = set(acked[q]) - got
            assert not missing, (q, len(missing), sorted(missing)[:5])
        for n in plan:                            # one shared journal per member
            data = tmp_path / f"{n.name}.data"
            assert any(p.name.startswith("shared-") for p in data.rglob("*.seg")), sorted(data.rglob("*"))
    finally:
        cluster.stop()
