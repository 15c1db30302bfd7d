"""The checker with several replication groups: each rule about masters holds per group
(cluster/checker/core.py, node_rules.py, during.py). Lines without a group are group 0, so a
one-group history is judged as it always was (the other checker tests)."""

from __future__ import annotations

import json

from cluster.checker import NemesisEvent, check
from cluster.checker.core import active_intervals, master_overlaps
from cluster.checker.during import AVAILABILITY_BOUND, HEALTH, QUIESCENT

from tests.checker.builder import H


def test_two_nodes_mastering_different_groups_at_once_is_no_overlap():
    h = H()
    h.node(1.0, "n1", "activated", group=0)
    h.node(1.0, "n2", "activated", group=1)
    h.node(2.0, "n3", "activated", group=2)
    v = check(h.history())
    assert v.two_masters == ()
    assert sorted((i.node, i.group, i.open) for i in v.active_intervals) == [
        ("n1", 0, True), ("n2", 1, True), ("n3", 2, True)]


def test_two_masters_of_one_group_overlap_and_the_verdict_names_the_group():
    h = H()
    h.node(1.0, "n1", "activated", group=1)
    h.node(2.0, "n2", "activated", group=1)
    h.node(3.0, "n1", "deactivated", group=1)
    v = check(h.history())
    assert [(o.node_a, o.node_b, o.start, o.end, o.group) for o in v.two_masters] == [("n1", "n2", 2.0, 3.0, 1)]
    assert any(f.startswith("two active masters") for f in v.failures("none"))
    assert v.to_json()["two_masters"][0]["group"] == 1


def test_a_deactivation_ends_only_its_group_and_a_stop_or_kill_ends_them_all():
    h = H()
    h.node(1.0, "n1", "activated", group=0)
    h.node(1.0, "n1", "activated", group=1)
    h.node(2.0, "n1", "deactivated", group=1)
    h.node(3.0, "n1", "activated", group=2)
    h.node(4.0, "n1", "stopped")
    iv = active_intervals(h.history())
    assert [(i.group, i.start, i.end, i.closed_by) for i in iv] == [
        (0, 1.0, 4.0, "stopped"), (1, 1.0, 2.0, "deactivated"), (2, 3.0, 4.0, "stopped")]
    assert master_overlaps(iv) == []


def test_a_one_group_verdict_writes_no_group_fields():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(2.0, "n2", "activated")
    h.node(3.0, "n1", "deactivated")
    j = check(h.history()).to_json()
    assert "group" not in j["active_intervals"][0] and "group" not in j["two_masters"][0]


def test_gating_is_judged_against_the_operations_own_group():
    h = H()
    h.node(1.0, "n1", "activated", group=0)
    h.node(1.5, "n1", "op", action="SendMessage", outcome="ok", group=0)
    # n1 masters group 0 only: an operation of group 1 executed there breaks gating
    h.node(1.6, "n1", "op", action="SendMessage", outcome="ok", group=1)
    v = check(h.history())
    assert [(g.node, g.at, g.group) for g in v.gating] == [("n1", 1.6, 1)]


def test_a_throttle_binds_only_its_own_groups_producers():
    h = H()
    h.node(1.0, "n1", "activated", group=0)
    h.node(1.0, "n1", "activated", group=1)
    h.node(2.0, "n1", "throttle", on=True, group=1)
    h.node(2.5, "n1", "op", action="SendMessage", outcome="ok", group=0)    # another group: fine
    h.node(2.6, "n1", "op", action="SendMessage", outcome="ok", group=1)    # its own: a violation
    h.node(3.0, "n1", "throttle", on=False, group=1)
    v = check(h.history())
    assert [(t.at, t.group) for t in v.throttled] == [(2.6, 1)]


def test_quiescent_points_judge_each_group_against_its_own_master():
    h = H()
    h.records.append(NemesisEvent(3.0, "", QUIESCENT, json.dumps({"groups": [
        {"group": 0, "master": "n1", "digests": {"n1": "a", "n2": "a", "n3": "a"}},
        {"group": 1, "master": "n2", "digests": {"n1": "b", "n2": "b", "n3": "c"}}]})))
    v = check(h.history())
    assert v.quiescent_points == 1
    assert [(q.node, q.master, q.group) for q in v.quiescent] == [("n3", "n2", 1)]


def _health(h: H, ts: float, healthy: list[str], groups: list[int]) -> None:
    h.records.append(NemesisEvent(ts, "", HEALTH, json.dumps(
        {"healthy": healthy, "judged": bool(groups), "everyone": len(healthy) == 3, "groups": groups})))


def _unavailable(h: H) -> list[tuple[str, int]]:
    return [(u.queue, u.group) for u in check(h.history()).unavailable]


def test_availability_is_judged_per_group_with_answers_of_the_same_group_only():
    b = AVAILABILITY_BOUND
    h = H()
    h.node(0.5, "n1", "placed", queue="qa", group=0)
    h.node(0.5, "n1", "placed", queue="qb", group=1)
    # n3, master of group 2, failed: groups 0 and 1 are judged, group 2 is not
    _health(h, 1.0, ["n1", "n2"], [0, 1])
    t = 1.0 + b + 0.5
    h.send("a1", t, t + 0.01, queue="qa")                     # group 0 answers
    h.send("b1", t, None, outcome="unknown", queue="qb")      # group 1 does not, though group 0 did
    h.node(0.5, "n1", "placed", queue="qc", group=2)
    h.send("c1", t, None, outcome="unknown", queue="qc")      # group 2 is not judged
    h.records.append(NemesisEvent(t + 2 * b, "", "heal", None))
    assert _unavailable(h) == [("qb", 1)]


def test_a_throttle_excuses_only_sends_to_its_own_group():
    b = AVAILABILITY_BOUND
    h = H()
    h.node(0.5, "n1", "placed", queue="qa", group=0)
    h.node(0.5, "n1", "placed", queue="qb", group=1)
    _health(h, 1.0, ["n1", "n2", "n3"], [0, 1])
    t = 1.0 + b + 0.5
    h.node(t - 0.1, "n2", "throttle", on=True, group=1)
    h.send("a1", t, None, outcome="unknown", queue="qa")
    h.send("b1", t, None, outcome="unknown", queue="qb")
    h.records.append(NemesisEvent(t + 2 * b, "", "heal", None))
    assert _unavailable(h) == [("qa", 0)]


def test_a_producer_refused_as_throttled_while_its_group_does_not_throttle_breaks_flow_control():
    h = H()
    h.node(1.0, "n1", "activated", group=0)
    h.node(1.0, "n1", "activated", group=1)
    h.node(2.0, "n1", "throttle", on=True, group=1)
    h.node(2.5, "n1", "op", action="SendMessage", outcome="failed", error="ThrottlingException", group=1)  # rightly
    h.node(2.6, "n1", "op", action="SendMessage", outcome="failed", error="ThrottlingException", group=0)  # wrongly
    h.node(3.0, "n1", "throttle", on=False, group=1)
    v = check(h.history())
    assert [(t.at, t.group, t.refused) for t in v.throttled] == [(2.6, 0, True)]
    assert "flow control: 1 producers refused as throttled while not throttling" in v.failures("none")


def test_a_refusal_in_the_instant_a_throttle_began_and_ended_is_covered_by_it():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(2.0, "n1", "throttle", on=True)
    h.node(2.0, "n1", "op", action="SendMessage", outcome="failed", error="ThrottlingException")
    h.node(2.0, "n1", "throttle", on=False)
    assert check(h.history()).throttled == ()
