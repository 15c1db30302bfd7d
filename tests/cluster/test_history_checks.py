"""The history checks the process tests rely on must themselves find what they look for."""

from __future__ import annotations

import pytest

from elasticmq_py.testing.cluster import active_intervals, check_single_master, check_views


def ev(node, ts, event, **kw):
    return dict(ts=ts, node=node, event=event, **kw)


def view(node, ts, vid, members, master, epoch):
    return ev(node, ts, "view", view_id=vid, members=members, master=master, epoch=epoch)


def test_check_views_accepts_overlapping_identical_sequences():
    h = {"a": [view("a", 1, 1, ["a", "b"], "a", 2), view("a", 2, 2, ["a"], "a", 2)],
         "b": [view("b", 1, 1, ["a", "b"], "a", 2)]}
    assert sorted(check_views(h)) == [1, 2]


def test_check_views_finds_divergence_and_going_back():
    with pytest.raises(AssertionError, match="differs"):
        check_views({"a": [view("a", 1, 1, ["a", "b"], "a", 2)], "b": [view("b", 1, 1, ["b"], "b", 2)]})
    with pytest.raises(AssertionError, match="not increasing"):
        check_views({"a": [view("a", 1, 2, ["a"], "a", 2), view("a", 2, 1, ["a"], "a", 2)]})
    # ...but a restarted node starts over
    check_views({"a": [view("a", 1, 1, ["a"], "a", 2), ev("a", 2, "started"), view("a", 3, 1, ["a"], "a", 2)]})


def test_check_single_master_finds_overlap_and_uses_kill_times():
    h = {"a": [ev("a", 1, "activated"), ev("a", 5, "deactivated")],
         "b": [ev("b", 4, "activated")]}
    with pytest.raises(AssertionError, match="two active masters"):
        check_single_master(h, {})
    # a killed master is active only until its kill, also when it was restarted later
    h = {"a": [ev("a", 1, "activated"), ev("a", 9, "started")], "b": [ev("b", 4, "activated")]}
    check_single_master(h, {"a": [3.0]})
    assert active_intervals(h, {"a": [3.0]}, now=10) == [("a", 1, 3.0), ("b", 4, 10)]
    with pytest.raises(AssertionError):
        check_single_master(h, {"a": [5.0]})


def test_check_single_master_is_per_replication_group():
    # two nodes mastering different groups at once: fine
    h = {"a": [ev("a", 1, "activated", group=0), ev("a", 2, "activated", group=1)],
         "b": [ev("b", 1.5, "activated", group=2)]}
    check_single_master(h, {})
    assert active_intervals(h, {}, now=10, group=1) == [("a", 2, 10)]
    # a deactivation ends its own group only, a stop ends them all
    h = {"a": [ev("a", 1, "activated", group=1), ev("a", 1, "activated", group=2),
               ev("a", 3, "deactivated", group=1), ev("a", 6, "stopped")],
         "b": [ev("b", 4, "activated", group=1), ev("b", 5, "activated", group=2)]}
    with pytest.raises(AssertionError, match="two active masters of group 2: a"):
        check_single_master(h, {})
    assert active_intervals(h, {}, now=10, group=2) == [("a", 1, 6), ("b", 5, 10)]


def test_check_views_compares_the_group_assignment_too():
    v1 = dict(view("a", 1, 1, ["a", "b"], "a", 2), groups=[["a", 2], ["b", 2]])
    v2 = dict(view("b", 1, 1, ["a", "b"], "a", 2), groups=[["a", 2], ["a", 2]])
    with pytest.raises(AssertionError, match="differs"):
        check_views({"a": [v1], "b": [v2]})
