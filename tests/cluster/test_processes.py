"""Membership with real node processes on loopback: election, kill -9, SIGSTOP, partitions by
per-link proxies, and a wrong cluster secret. Every test's histories are also checked by the
fixture for identical view sequences and for never having two active masters."""

from __future__ import annotations

import time

import pytest

from elasticmq_py.testing.cluster import Cluster

pytestmark = pytest.mark.slow


def _events(c: Cluster, node: str, kind: str) -> list[dict]:
    return [e for e in c.history(node) if e["event"] == kind]


def test_initial_election_three_nodes(make_cluster):
    c = make_cluster(["n1", "n2", "n3"])
    c.start_all()
    master = c.wait_for("an active master with everyone", c.stable_master(members={"n1", "n2", "n3"}), 15)
    sts = c.statuses()
    assert {s["leader"] for s in sts.values()} == {master}
    assert sts[master]["quorum"] and sts[master]["lease_remaining_s"] > 0

    # Every Raft link comes up both ways. Waited for, not sampled once: under make test's load a
    # link may have just been found dead (no frame for the connection timeout) and be redialling.
    def links_up() -> bool:
        return all(s is not None and all(p["out"] == "up" and p["in"] for p in s["peers"].values())
                   for s in c.statuses().values())
    c.wait_for("every peer link up both ways", links_up, 10)


def test_kill_master_elects_new_active_master(make_cluster):
    c = make_cluster(["n1", "n2", "n3"])
    c.start_all()
    old = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    c.kill(old)
    rest = [n for n in c.names if n != old]
    new = c.wait_for("new master", c.stable_master(among=rest, members=set(rest)), 10)
    assert new != old
    act = [e["ts"] for e in _events(c, new, "activated") if e["ts"] > c.killed_at(old)]
    assert act and act[0] - c.killed_at(old) < 3.0


def test_sigstopped_master_is_inactive_before_another_is_active(make_cluster):
    c = make_cluster(["n1", "n2", "n3"])
    c.start_all()
    old = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    stopped_at = time.time()
    c.sigstop(old)
    rest = [n for n in c.names if n != old]
    new = c.wait_for("new master", c.stable_master(among=rest, members=set(rest)), 10)
    # Stay stopped past pysyncobj's leaderFallbackTimeout, so the Raft-level fallback cannot be
    # what makes it inactive: the lease must.
    time.sleep(max(0.0, c.timing.leader_fallback + 0.3 - (time.time() - stopped_at)))
    c.sigcont(old)
    resumed_at = time.time()
    # Once resumed, it must never be active again while the new master holds office.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        s = c.status(old)
        assert s is None or not s["active"], s
        time.sleep(0.05)
    c.wait_for("the old master rejoins as a replica", c.stable_master(members={"n1", "n2", "n3"}), 10)
    assert c.status(old)["active"] is False
    deact = [e["ts"] for e in _events(c, old, "deactivated") if e["ts"] >= stopped_at - 1]
    act_new = [e["ts"] for e in _events(c, new, "activated") if e["ts"] > stopped_at]
    assert deact and act_new, (deact, act_new)
    assert deact[0] < act_new[0], f"old master inactive at {deact[0]}, new active at {act_new[0]}"
    assert deact[0] < stopped_at + c.timing.lease + 0.05  # its lease ran out while it was stopped
    assert not [e for e in _events(c, old, "activated") if e["ts"] > stopped_at]
    assert resumed_at > act_new[0]


def test_partition_master_in_minority_then_heal(make_cluster):
    c = make_cluster(["n1", "n2", "n3"], proxied=True)
    c.start_all()
    old = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    cut_at = time.time()
    c.isolate(old)
    rest = [n for n in c.names if n != old]
    new = c.wait_for("majority side elects", c.stable_master(among=rest, members=set(rest)), 10)
    s = c.status(old)
    assert s is not None and s["active"] is False
    assert set(s["view"]["members"]) == {"n1", "n2", "n3"}  # the minority cannot install views
    term = c.status(new)["term"]
    time.sleep(4 * c.timing.election_max)   # the minority's election timers fire again and again
    assert c.status(old)["term"] <= term, "the cut-off old master stood for election (no pre-vote)"
    c.heal_all()
    final = c.wait_for("one view with everyone", c.stable_master(members={"n1", "n2", "n3"}), 15)
    # pre-vote (cluster/election.py): the old master never raised its term while cut
    # off, so rejoining deposes nobody
    assert final == new
    assert c.status(new)["term"] == term
    deact = [e["ts"] for e in _events(c, old, "deactivated") if e["ts"] >= cut_at]
    act_new = [e["ts"] for e in _events(c, new, "activated") if e["ts"] >= cut_at]
    assert deact and act_new and deact[0] < act_new[0]


def test_an_isolated_replica_rejoins_without_deposing_the_master(make_cluster):
    c = make_cluster(["n1", "n2", "n3"], proxied=True)
    c.start_all()
    master = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    term = c.status(master)["term"]
    replica = next(n for n in c.names if n != master)
    cut_at = time.time()
    c.isolate(replica)
    rest = {n for n in c.names if n != replica}
    c.wait_for("the master's view without the replica", c.stable_master(among=[master], members=rest), 10)
    time.sleep(6 * c.timing.election_max)   # many election timeouts on the cut-off replica
    assert c.status(replica)["term"] == term, "the cut-off replica stood for election"
    c.heal_all()
    c.wait_for("the replica back in the master's view", c.stable_master(among=[master], members=set(c.names)), 15)
    assert c.status(master)["term"] == term
    assert not [e for e in _events(c, master, "deactivated") if e["ts"] >= cut_at]


def test_wrong_secret_is_refused(make_cluster):
    c = make_cluster(["n1", "n2", "n3"], secrets={"n3": "not-the-secret"})
    c.start_all()
    c.wait_for("n1 and n2 form the group", c.stable_master(among=["n1", "n2"], members={"n1", "n2"}), 15)
    time.sleep(1.0)  # give n3 time to try, and fail, more than once
    good = c.statuses(["n1", "n2"])
    assert all(s["raft"]["auth_failures"] > 0 for s in good.values()), good
    bad = c.status("n3")
    assert bad["view"] is None and not bad["active"]
    assert all(p["out"] != "up" for p in bad["peers"].values()), bad["peers"]
    log = (c.tmp / "n1.log").read_text() + (c.tmp / "n2.log").read_text()
    assert "failed authentication" in log


def test_five_nodes_split_3_2_with_master_in_minority_then_heal(make_cluster):
    names = ["n1", "n2", "n3", "n4", "n5"]
    c = make_cluster(names, proxied=True)
    c.start_all()
    old = c.wait_for("first master", c.stable_master(members=set(names)), 15)
    minority = [old, next(n for n in names if n != old)]
    majority_side = [n for n in names if n not in minority]
    cut_at = time.time()
    for (a, b), px in c.proxies.items():
        if (a in minority) != (b in minority):
            px.cut()
    new = c.wait_for("majority side elects", c.stable_master(among=majority_side, members=set(majority_side)), 10)
    assert new in majority_side
    assert not any(c.status(n)["active"] for n in minority)
    c.heal_all()
    c.wait_for("one view with everyone", c.stable_master(members=set(names)), 15)
    deact = [e["ts"] for e in _events(c, old, "deactivated") if e["ts"] >= cut_at]
    act_new = [e["ts"] for e in _events(c, new, "activated") if e["ts"] >= cut_at]
    assert deact and act_new and deact[0] < act_new[0]


def test_bridge_partition_keeps_the_master_and_drops_the_far_end(make_cluster):
    c = make_cluster(["n1", "n2", "n3"], proxied=True)
    c.start_all()
    master = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    far, bridge = [n for n in c.names if n != master]
    term, epoch = c.status(master)["term"], c.status(master)["epoch"]
    # Cut master<->far both ways; both still reach the bridge. The far end's election timer
    # runs out and it asks for pre-votes, but the bridge, still hearing from the master, says
    # no: the far end never raises its term, so neither the cut nor the heal deposes the master.
    cut_at = time.time()
    c.proxies[(master, far)].cut()
    c.proxies[(far, master)].cut()
    c.wait_for("a view without the far end", c.stable_master(among=[master, bridge], members={master, bridge}), 10)
    for _ in range(10):
        s = c.status(master)
        assert s["active"] and s["view"]["master"] == master
        time.sleep(0.1)
    far_st = c.status(far)
    assert far_st["active"] is False and far_st["term"] == term, "the far end never stood"
    assert far_st["raft"]["not_standing"] == "no majority of the members would vote for us (pre-vote)"
    assert c.status(bridge)["raft"]["pre_votes_refused"] > 0
    c.heal_all()
    c.wait_for("one view with everyone", c.stable_master(members={"n1", "n2", "n3"}), 15)
    assert c.status(master)["term"] == term and c.status(master)["epoch"] == epoch, "healing deposed nobody"
    assert not [e for e in _events(c, master, "deactivated") if e["ts"] >= cut_at]


def _hand_over(c: Cluster, master: str, to: str | None = None, tries: int = 3) -> tuple[str, float]:
    """Ask ``master`` to step down (to ``to``) until another member leads (``to``, if named):
    (the new master, when the successful request was sent). The member asked to stand does so
    at once (pysyncobj's TimeoutNow), but it can lose that election, and whoever wins then leads
    (another member's vote request may reach the voters first): an operator asks again."""
    stable = c.stable_master(members=set(c.names))
    for _ in range(tries):
        asked_at = time.time()
        code, body = c.post(master, "/cluster/step-down", {"to": to} if to else None)
        assert code == 200 and body == {"stepped_down": True, **({"to": to} if to else {})}, body
        stood = c.wait_for("a member standing", lambda: [
            e for n in c.names if n != master for e in _events(c, n, "role")
            if e["ts"] >= asked_at and e["role"] in ("candidate", "leader") and (to is None or n == to)], 5)

        def elected() -> str | None:   # whoever leads in that member's term or later
            m = stable()
            return m if m is not None and (c.status(m) or {}).get("term", 0) >= stood[0]["term"] else None
        now = c.wait_for("a master after the hand-over", elected, 10)
        if now != master and (to is None or now == to):
            return now, asked_at
        master = now
    raise AssertionError(f"no hand-over to {to or 'another member'} in {tries} tries")


def test_step_down_hands_over_without_failback(make_cluster):
    c = make_cluster(["n1", "n2", "n3"])
    c.start_all()
    old = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    new, asked_at = _hand_over(c, old)
    deact = [e["ts"] for e in _events(c, old, "deactivated") if e["ts"] >= asked_at]
    act_new = [e["ts"] for e in _events(c, new, "activated") if e["ts"] >= asked_at]
    assert deact and act_new and deact[0] < act_new[0]
    other = next(n for n in c.names if n != new)
    code, _ = c.post(other, "/cluster/step-down")
    assert code == 409, "only the master can step down"
    target = next(n for n in c.names if n not in (new, old))   # the one never master here
    assert _hand_over(c, new, to=target)[0] == target


def test_an_amnesiac_master_that_cannot_finish_its_sync_hands_leadership_on(make_cluster):
    """The simulator's seed 103 with real processes. A node restarted with empty memory (Raft's
    state kept, no data-dir) leads through a bridge: its own position counts in no sync quorum
    and the third member is beyond the bridge, so its sync can never finish. After the
    connection timeout it hands leadership to the member that answered intact, which reaches
    the third and serves. (To make the restarted node lead, the test asks the master to hand
    over to it; its stream from the master stays cut until then, so nothing brings it up to
    date first and clears its amnesia.)"""
    c = make_cluster(["n1", "n2", "n3"], proxied=True)
    c.start_all()
    m = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    a, b = [n for n in c.names if n != m]
    sqs = c.sqs(m)
    url = sqs.create_queue(QueueName="kept")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="acknowledged before everything")
    c.kill(a)
    c.proxies[(m, a)].stream.cut()
    c.start(a)
    c.wait_for("the restarted node follows the master's Raft",
               lambda: (c.status(a) or {}).get("leader") == m, 10)
    assert c.status(a)["replication"]["amnesiac"] is True
    c.bridge(a, m, b)
    code, body = c.post(m, "/cluster/step-down", {"to": a})
    assert code == 200, body
    c.proxies[(m, a)].stream.heal()          # the stepped-down master streams nothing now
    handed = c.wait_for("the amnesiac leader hands on",
                        lambda: [e for e in c.history(a) if e["event"] == "hand_on"], 10)
    assert handed[0]["to"] == m
    new = c.wait_for("a master that reaches the far end", c.stable_master(members={"n1", "n2", "n3"}), 10)
    assert new == m and c.status(b)["master"] == m
    got = c.sqs(m).receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [x["Body"] for x in got] == ["acknowledged before everything"]
    c.heal_all()
    c.wait_for("one view with everyone", c.stable_master(members={"n1", "n2", "n3"}), 15)


def test_join_and_leave_at_runtime(make_cluster):
    c = make_cluster(["n1", "n2", "n3", "n4"])
    # n1..n3 are the configured group; n4 knows about them (and itself) but they do not know n4.
    for n in ("n1", "n2", "n3"):
        c.cluster_for[n] = ["n1", "n2", "n3"]
    for n in ("n1", "n2", "n3"):
        c.start(n)
    master = c.wait_for("first master", c.stable_master(members={"n1", "n2", "n3"}), 15)
    c.start("n4")
    time.sleep(0.5)
    assert c.status(master)["view"]["members"] == ["n1", "n2", "n3"], "not a member until added"
    spec = next(s for s in c.specs if s.name == "n4")
    code, body = c.post(master, "/cluster/members", spec.to_dict())
    assert code == 200, body
    m = c.wait_for("a view with n4", c.stable_master(members={"n1", "n2", "n3", "n4"}), 15)
    assert c.status(m)["configured"] == ["n1", "n2", "n3", "n4"]
    code, body = c.request(m, "DELETE", "/cluster/members/n4")
    assert code == 200, body
    c.wait_for("a view without n4", c.stable_master(among=["n1", "n2", "n3"], members={"n1", "n2", "n3"}), 15)
    assert c.status(m)["configured"] == ["n1", "n2", "n3"]
