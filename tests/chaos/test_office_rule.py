"""The chaos scenarios' invariant-6 rule (tests/chaos/harness.py office_kept), on made-up
histories: it must see an election a heal causes, and must not mistake a cut-off node catching up
to the master's term for one."""

from __future__ import annotations

from tests.checker.builder import H
from tests.chaos.harness import office_kept


def _base() -> H:
    h = H()
    h.node(1.0, "n1", "role", role="leader", term=3)
    h.node(1.0, "n2", "role", role="follower", term=3)
    h.node(1.0, "n3", "role", role="follower", term=2)   # was cut off through the last election
    return h


def test_catching_up_to_the_masters_term_is_no_election():
    h = _base()
    h.node(6.0, "n3", "role", role="follower", term=3)
    assert office_kept(h.history(), "n1", since=2.0, until=9.0) == []


def test_a_cut_off_node_standing_and_deposing_the_master_on_heal_is_caught():
    h = _base()
    h.node(4.0, "n3", "role", role="candidate", term=4)
    h.node(6.1, "n1", "role", role="follower", term=5)
    h.node(6.5, "n2", "activated", term=5, view_id=3, epoch=5)
    problems = office_kept(h.history(), "n1", since=2.0, until=9.0)
    assert len(problems) == 2
    assert "terms rose" in problems[0] and "('n3', 'candidate', 4" in problems[0]
    assert "another master took office" in problems[1]


def test_events_outside_the_window_do_not_count():
    h = _base()
    h.node(12.0, "n3", "role", role="candidate", term=4)
    assert office_kept(h.history(), "n1", since=2.0, until=9.0) == []
    assert office_kept(H().history(), "n1", since=2.0, until=9.0) == ["no role line of n1 before the cut"]


def test_with_groups_only_the_kept_groups_must_keep_their_masters():
    # n3 was cut off: its group 2 moves to n2, which is allowed; group 1 moving is not
    h = _base()
    h.node(4.0, "n2", "activated", epoch=4, group=2)
    kept = {0: "n1", 1: "n2"}
    assert office_kept(h.history(), "n1", since=2.0, until=9.0, groups=kept) == []
    h.node(5.0, "n1", "activated", epoch=4, group=1)
    problems = office_kept(h.history(), "n1", since=2.0, until=9.0, groups=kept)
    assert len(problems) == 1 and "another master took office" in problems[0] and "('n1', 3.0)" in problems[0]
