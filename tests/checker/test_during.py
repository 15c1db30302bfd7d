"""Rules judged during a run (cluster/checker/during.py) and the default verdict of majority / all:
lost deletes and in-window duplicates fail them without strict mode; divergence at a quiescent
point and a healthy majority that answers no send fail every policy (where judged)."""

from __future__ import annotations

import json

from cluster.checker import NemesisEvent, check
from cluster.checker.during import AVAILABILITY_BOUND, HEALTH, QUIESCENT

from tests.checker.builder import H


def _health(h: H, ts: float, healthy: list[str], judged: bool = True, everyone: bool | None = None) -> None:
    everyone = len(healthy) == 3 if everyone is None else everyone
    h.records.append(NemesisEvent(ts, "", HEALTH, json.dumps({"healthy": healthy, "judged": judged,
                                                              "everyone": everyone})))


def test_a_lost_delete_fails_majority_and_all_without_strict():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5)
    h.delete("r-a-1", 2.2, 2.3)
    h.recv(9.0, 9.1, "a", client="c2")
    v = check(h.history())
    assert len(v.lost_deletes) == 1
    assert any(f.startswith("lost deletes") for f in v.failures("majority"))
    assert not v.ok_for("all")
    assert v.ok_for("one") and v.ok_for("none")           # which promise no such thing
    assert v.failures("majority", strict=True) == v.failures("majority")


def test_a_divergence_at_a_quiescent_point_fails_every_policy():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a")
    h.delete("r-a-1", 2.2, 2.3)
    h.records.append(NemesisEvent(3.0, "", QUIESCENT, json.dumps(
        {"master": "n1", "digests": {"n1": "x", "n2": "x", "n3": "x"}})))
    h.records.append(NemesisEvent(5.0, "", QUIESCENT, json.dumps(
        {"master": "n1", "digests": {"n1": "y", "n2": "y", "n3": "z"}})))
    # ... and the final digests agree: the divergence was drained away before the end
    for n in ("n1", "n2", "n3"):
        h.digest(9.0, n, "w", "n1")
    v = check(h.history())
    assert v.quiescent_points == 2 and [(q.at, q.node) for q in v.quiescent] == [(5.0, "n3")]
    assert v.divergence == ()
    for policy in ("none", "one", "majority", "all"):
        fails = v.failures(policy)
        assert len(fails) == 1 and fails[0].startswith("divergence at t=5.000: n3"), fails
    assert "quiescent points judged" in v.summary("majority")


def _unavailable(v, policy: str, **kw) -> list[str]:
    """The availability failures only (the hand-written sends are never received: lost)."""
    return [f for f in v.failures(policy, **kw) if f.startswith("unavailable")]


def _stalled(h: H, t0: float, t1: float, node: str = "n1") -> None:
    """A client that tries a send every 0.5 s in [t0, t1) and never gets an answer."""
    t = t0
    while t < t1:
        h.send(f"s{t:.1f}", t, t + 2.0, outcome="unknown", node=node)
        t += 0.5


def test_a_healthy_majority_that_answers_no_send_is_unavailable():
    h = H()
    _health(h, 0.0, ["n1", "n2", "n3"])
    h.send("a", 1.0)
    _health(h, 2.0, ["n1", "n2"])                       # n3 slow: a majority with the master
    h.send("b", 2.5)                                    # inside the bound: not judged yet
    _stalled(h, 6.0, 12.0)
    h.send("c", 14.0)
    v = check(h.history())
    assert v.unavailable and v.unavailable[0].start == 6.0 and not v.unavailable[0].everyone
    fails = _unavailable(v, "majority")
    assert len(fails) == 1 and fails[0].startswith("unavailable: no send succeeded in [6.000, "), fails
    assert _unavailable(v, "none") and _unavailable(v, "one")
    # `all` waits for the slow replica by design: not judged while only a majority is healthy
    assert not _unavailable(v, "all")
    assert v.availability_judged_s > 0


def test_all_is_judged_while_every_member_is_healthy():
    h = H()
    _health(h, 0.0, ["n1", "n2", "n3"])
    h.send("a", 1.0)
    _stalled(h, 5.0, 11.0)
    h.send("b", 14.0)
    v = check(h.history())
    assert v.unavailable and v.unavailable[0].everyone
    assert _unavailable(v, "all") and _unavailable(v, "majority")


def test_a_queue_of_policy_all_waits_for_a_slow_replica_on_a_majority_cluster():
    h = H()
    _health(h, 0.0, ["n1", "n2"], everyone=False)
    _stalled(h, 5.0, 11.0)
    v = check(h.history())
    assert _unavailable(v, "majority")
    assert not _unavailable(v, "majority", queue_policies={"q": "all"})


def test_availability_is_not_judged_within_the_bound_nor_outside_judged_stretches_nor_while_throttling():
    h = H()
    _health(h, 0.0, ["n1", "n2", "n3"])
    h.send("a", 1.0)
    _health(h, 2.0, ["n2", "n3"], judged=False)          # the master is the slow one
    _stalled(h, 2.0, 9.0)
    _health(h, 9.0, ["n1", "n2", "n3"])
    _stalled(h, 9.0, 9.0 + AVAILABILITY_BOUND - 0.1)     # a failover's worth: within the bound
    h.send("b", 9.0 + AVAILABILITY_BOUND + 0.2)
    h.node(20.0, "n1", "throttle", on=True)
    _stalled(h, 20.0, 26.0)                              # flow control refuses on purpose
    h.node(26.0, "n1", "throttle", on=False)
    h.send("c", 26.5)
    v = check(h.history())
    assert v.unavailable == (), v.unavailable
    assert not _unavailable(v, "majority")


def test_an_sqs_error_is_an_answer_and_a_503_is_not():
    # a queue lost by a power cut under fsync = never answers NonExistentQueue: the cluster is up
    # (the error codes are the ones sim/node.py's _outcome gives a client)
    from dataclasses import replace
    for error, unavailable in (("AWS.SimpleQueueService.NonExistentQueue", False),
                               ("ServiceUnavailable", True), ("ThrottlingException", True)):
        h = H()
        _health(h, 0.0, ["n1", "n2", "n3"])
        t = 5.0
        while t < 11.0:
            op = h.send(f"s{t:.1f}", t, t + 0.01, outcome="failed")
            h.records[h.records.index(op)] = replace(op, error=error)
            t += 0.5
        v = check(h.history())
        assert bool(_unavailable(v, "majority")) == unavailable, (error, v.unavailable)


def test_a_history_without_health_lines_is_not_judged_for_availability():
    h = H()
    _stalled(h, 5.0, 30.0)
    v = check(h.history())
    assert v.unavailable == () and v.availability_judged_s == 0.0
