"""The queue-group planner (cluster/assignment.py): pure, so every rule is a plain call."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.assignment import Plan, PlanInput, initial, plan
from cluster.config import Timing
from cluster.membership import View, accept_view

T = Timing()
QUIET = T.rebalance_quiet
NAMES = ("a", "b", "c", "d", "e", "f", "g")


def pin(groups, members=("a", "b", "c"), *, reachable=None, now=100.0, term=5, steady_since=None, **kw):
    """A leader ``a`` that has seen every member steady since time 0, unless told otherwise."""
    members = tuple(sorted(members))
    return PlanInput(count=len(groups), proposer="a", groups=tuple(groups), members=members,
                     configured=frozenset(members), reachable=frozenset(members if reachable is None else reachable),
                     steady_since=steady_since if steady_since is not None else {m: 0.0 for m in members},
                     now=now, term=term, timing=T, **kw)


def cap(count: int, members: int) -> int:
    return -(-count // members)


def loads(groups, members):
    c = Counter(m for m, _ in groups)
    return {m: c[m] for m in members}


def settle(p: PlanInput, steps: int = 200) -> tuple[tuple[tuple[str, int], ...], int]:
    """Apply plans until none moves anything: a handover completes at once (its release)."""
    groups, handovers = p.groups, 0
    for _ in range(steps):
        out = plan(replace(p, groups=groups))
        if out.groups is not None:
            groups = out.groups
        elif out.handover is not None:
            handovers += 1
            out = plan(replace(p, groups=groups, released={out.handover[0]: out.handover[1]}))
            groups = out.groups
        else:
            return groups, handovers
    raise AssertionError("the planner never settled")


# -- the first view ---------------------------------------------------------------------------------

def test_first_view_rotates_from_the_member_after_the_leader():
    assert plan(replace(pin([("a", 1)] * 3), groups=())) == Plan((("b", 5), ("c", 5), ("a", 5)))
    four = initial(4, ("a", "b", "c"), "a", 2)
    assert four == (("b", 2), ("c", 2), ("a", 2), ("b", 2)), "the Raft leader gets the fewest"


@given(st.integers(1, 12), st.integers(1, 7), st.data())
def test_first_view_gives_nobody_more_than_the_cap(count, m, data):
    members = NAMES[:m]
    leader = data.draw(st.sampled_from(members))
    slots = initial(count, members, leader, 7)
    per = loads(slots, members)
    assert max(per.values()) <= cap(count, m)
    assert per[leader] == min(per.values())
    assert {e for _, e in slots} == {7}


# -- stickiness -------------------------------------------------------------------------------------

@given(st.integers(1, 12), st.integers(2, 7), st.data())
@settings(max_examples=200)
def test_nothing_moves_while_nothing_changed(count, m, data):
    members = NAMES[:m]
    # any assignment within the cap and one group of each other
    order = data.draw(st.permutations(members))
    groups = tuple((order[g % m], data.draw(st.integers(1, 9))) for g in range(count))
    now = data.draw(st.floats(0, 1e6))
    assert plan(pin(groups, members, now=now)) == Plan()


# -- failover ---------------------------------------------------------------------------------------

def test_a_silent_master_loses_only_its_groups_spread_over_the_others():
    members = ("a", "b", "c", "d", "e")
    groups = tuple((members[g % 5], 3) for g in range(10))   # two each; d masters 3 and 8
    out = plan(pin(groups, members, reachable={"a", "b", "c", "e"}, term=5))
    moved = {g: s for g, s in enumerate(out.groups) if s != groups[g]}
    assert set(moved) == {3, 8}
    assert {e for _, e in moved.values()} == {5}
    assert len({m for m, _ in moved.values()}) == 2, "not both on d's neighbour"


def test_failover_takes_the_next_epoch_when_the_term_is_older():
    out = plan(pin([("a", 9), ("c", 9), ("b", 2)], reachable={"a", "b"}, term=4))
    assert out.groups == (("a", 9), ("b", 10), ("b", 2))


def test_failover_needs_no_debounce_and_may_exceed_the_cap():
    out = plan(pin([("a", 1), ("b", 1), ("c", 1)], reachable={"a", "b"}, now=0.0, steady_since={}))
    assert out.groups is not None and loads(out.groups, "abc") in ({"a": 2, "b": 1, "c": 0}, {"a": 1, "b": 2, "c": 0})


def test_a_member_leaving_the_view_hands_its_groups_on():
    # still heard (within group_suspect), but the proposed view drops it: a master is a member
    out = plan(PlanInput(3, "a", (("a", 1), ("b", 1), ("c", 1)), ("a", "b"), frozenset("abc"), frozenset("abc"),
                         {m: 0.0 for m in "abc"}, 100.0, 5, T))
    assert out.groups is not None and out.groups[2][0] in ("a", "b") and out.groups[:2] == (("a", 1), ("b", 1))


def test_failover_prefers_a_steady_member_to_one_that_just_came_back():
    groups = [("a", 1), ("b", 1), ("c", 1), ("d", 1)]
    steady = {"a": 0.0, "b": 0.0, "c": 0.0, "d": 95.0}     # d returned 5 s ago and has nothing
    groups[3] = ("b", 1)                                   # b holds d's old group as well
    out = plan(pin(groups, "abcd", reachable="acd", steady_since=steady))
    assert [out.groups[g][0] for g in (1, 3)] == ["a", "c"], "d has nothing, but it is not steady yet"


@given(st.integers(2, 12), st.integers(3, 7), st.data())
@settings(max_examples=300)
def test_failover_moves_exactly_the_groups_of_silent_masters_to_reachable_members(count, m, data):
    members = NAMES[:m]
    groups = tuple((data.draw(st.sampled_from(members)), data.draw(st.integers(1, 9))) for _ in range(count))
    silent = data.draw(st.sets(st.sampled_from(members[1:]), max_size=m - 1))   # never the leader
    term = data.draw(st.integers(1, 12))
    out = plan(pin(groups, members, reachable=set(members) - silent, term=term))
    if not any(master in silent for master, _ in groups):
        assert out.groups is None
        return
    assert out.groups is not None and out.handover is None
    for (m0, e0), (m1, e1) in zip(groups, out.groups):
        if m0 in silent:
            assert m1 not in silent and e1 == max(e0 + 1, term)
        else:
            assert (m1, e1) == (m0, e0)
    # the moved groups went to the least loaded: no reachable member has 2 more than another
    # took from the silent ones
    took = Counter(m1 for (m0, _), (m1, _) in zip(groups, out.groups) if m0 in silent)
    before = loads([s for s in groups if s[0] not in silent], members)
    after = {x: before[x] + took[x] for x in members if x not in silent}
    assert all(took[x] == 0 or after[x] - 1 <= min(after.values()) for x in after)


# -- balance and hysteresis -------------------------------------------------------------------------

def test_a_returning_member_gets_groups_back_only_after_the_quiet():
    groups = (("a", 1), ("b", 1), ("a", 3), ("b", 3))        # c lost its two groups to a and b
    for since in (100.0 - QUIET + 0.01, 100.0 - 1.0):
        assert plan(pin(groups, steady_since={"a": 0.0, "b": 0.0, "c": since})) == Plan(), "still flapping"
    out = plan(pin(groups, steady_since={"a": 0.0, "b": 0.0, "c": 100.0 - QUIET}))
    assert out == Plan(handover=(2, "c")), "a balance move is a handover by the busiest member, never a move"


def test_one_handover_at_a_time():
    groups = (("a", 1), ("a", 1), ("a", 1), ("b", 1))
    assert plan(pin(groups)).handover is not None
    assert plan(pin(groups, handover_in_flight=0)) == Plan()


def test_the_cap_only_binds_while_every_configured_member_is_in_the_view():
    # G = 6 over a view of a and c (b, configured, is out of it): three each is balanced
    p = PlanInput(6, "a", (("a", 1),) * 3 + (("c", 1),) * 3, ("a", "c"), frozenset("abc"), frozenset("ac"),
                  {"a": 0.0, "c": 0.0}, 100.0, 5, T)
    assert plan(p) == Plan()
    # b back in the view and steady: balance down to the cap of two, one handover at a time
    back = replace(p, members=("a", "b", "c"), reachable=frozenset("abc"), steady_since={m: 0.0 for m in "abc"})
    assert plan(back).handover == (2, "b")
    settled, handovers = settle(back)
    assert loads(settled, "abc") == {"a": 2, "b": 2, "c": 2} and handovers == 2


@given(st.integers(1, 12), st.integers(2, 7), st.data())
@settings(max_examples=200)
def test_balance_settles_within_the_cap(count, m, data):
    members = NAMES[:m]
    groups = tuple((data.draw(st.sampled_from(members)), 1) for _ in range(count))
    settled, handovers = settle(pin(groups, members))
    per = loads(settled, members)
    assert max(per.values()) <= cap(count, m) and max(per.values()) - min(per.values()) <= 1
    assert handovers <= count, "each handover moves a group to where it stays"


# -- released and resigned groups ---------------------------------------------------------------------

def test_a_released_group_moves_to_its_target():
    out = plan(pin([("a", 4), ("b", 4), ("b", 4)], released={2: "c"}, term=3))
    assert out.groups == (("a", 4), ("b", 4), ("c", 5))


def test_a_group_released_to_a_member_gone_silent_fails_over():
    out = plan(pin([("a", 4), ("b", 4), ("b", 4)], reachable="ab", released={2: "c"}, term=6))
    assert out.groups == (("a", 4), ("b", 4), ("a", 6))


def test_a_resigned_group_moves_and_its_master_is_not_a_target():
    groups = (("a", 2), ("b", 2), ("c", 2), ("c", 2))
    out = plan(pin(groups, resigned=frozenset({1}), term=5))
    assert out.groups == (("a", 2), ("a", 5), ("c", 2), ("c", 2)), "b resigned: it is not taken, c is busier"



def test_a_member_that_resigned_is_taken_when_nobody_else_is_reachable():
    out = plan(pin((("a", 2), ("b", 2), ("c", 2)), reachable="a", resigned=frozenset({0}), term=5))
    assert out.groups == (("a", 2), ("a", 5), ("a", 5)), "a keeps the group it resigned: nobody else to take it"


@given(st.integers(1, 8), st.integers(2, 6), st.data())
@settings(max_examples=300)
def test_every_move_raises_the_groups_epoch(count, m, data):
    members = NAMES[:m]
    groups = tuple((data.draw(st.sampled_from(members)), data.draw(st.integers(1, 20))) for _ in range(count))
    reachable = {"a"} | data.draw(st.sets(st.sampled_from(members)))
    released = data.draw(st.dictionaries(st.integers(0, count - 1), st.sampled_from(members), max_size=2))
    resigned = frozenset(data.draw(st.sets(st.integers(0, count - 1), max_size=2)))
    term = data.draw(st.integers(1, 25))
    out = plan(pin(groups, members, reachable=reachable, released=released, resigned=resigned, term=term))
    for (m0, e0), (m1, e1) in zip(groups, out.groups or groups):
        assert (m1, e1) == (m0, e0) or (e1 == max(e0 + 1, term) and m1 in reachable)


@given(st.integers(1, 8), st.integers(1, 6), st.data())
@settings(max_examples=300)
def test_a_view_the_planner_makes_from_the_committed_one_always_installs(count, m, data):
    configured = NAMES[:m]
    committed = tuple((data.draw(st.sampled_from(configured)), data.draw(st.integers(1, 20))) for _ in range(count))
    members = tuple(sorted({"a"} | data.draw(st.sets(st.sampled_from(configured)))))
    term = data.draw(st.integers(1, 25))
    p = PlanInput(count, "a", committed, members, frozenset(configured),
                  frozenset({"a"} | data.draw(st.sets(st.sampled_from(configured)))),
                  {x: data.draw(st.floats(0, 200)) for x in members}, 100.0, term, T,
                  resigned=frozenset(data.draw(st.sets(st.integers(0, count - 1), max_size=2))),
                  released=data.draw(st.dictionaries(st.integers(0, count - 1), st.sampled_from(configured), max_size=2)))
    out = plan(p)
    previous = View(7, tuple(sorted(set(configured))), "a", 1, committed)
    proposed = View(8, members, "a", term, out.groups if out.groups is not None else committed)
    assert accept_view(previous, proposed), "the leader (always reachable) takes whatever nobody else can"
    if out.handover is not None:
        g, to = out.handover
        assert to in members and to != committed[g][0]
