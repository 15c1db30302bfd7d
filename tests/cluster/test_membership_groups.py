"""Queue groups in views and in the membership core: the install rule, the record, and the Raft
leader's proposals from the planner (cluster/assignment.py), driven with a hand-held clock."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.config import Timing
from cluster.membership import (LEADER, DeliverView, GroupReleased, GroupResigned, HandOverRequested, LeaseAck,
                                MembershipCore, ProposeView, RaftSample, Record, TimePassed, View, ViewCommitted,
                                accept_view)

T = Timing()
ALL = frozenset({"a", "b", "c"})
ALL_SORTED = ("a", "b", "c")


def core(name: str = "a", groups: int = 3) -> MembershipCore:
    return MembershipCore(name, T, groups=groups, configured=ALL)


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def acks(c: MembershipCore, now: float, peers=("b", "c")) -> list:
    out = []
    for p in peers:
        out += c.handle(LeaseAck(now, p, c.term, now))
    return out + c.handle(TimePassed(now))


def take_office(c: MembershipCore, now: float, term: int, peers=("b", "c")) -> View:
    return in_office(c, now, term, peers)[0]


def in_office(c: MembershipCore, now: float, term: int, peers=("b", "c")) -> tuple[View, list]:
    """Lead ``term`` from ``now``: the first view and what its commit made us do."""
    c.handle(RaftSample(now, term, LEADER, c.self_name, ALL))
    (p,) = of(acks(c, now + 0.001, peers) + c.handle(TimePassed(now + T.gather)), ProposeView)
    return p.view, c.handle(ViewCommitted(now + T.gather + 0.001, p.view))


# -- the record and the install rule ----------------------------------------------------------------

def test_a_view_without_groups_keeps_the_four_tuple_record():
    v = View(4, ("a", "c"), "a", 7)
    assert v.to_record() == (4, ("a", "c"), "a", 7)
    assert "groups" not in v.to_dict()


def test_a_view_with_groups_is_a_five_tuple_of_builtins():
    v = View(4, ("a", "c"), "a", 7, (("c", 7), ("a", 5)))
    r = v.to_record()
    assert r == (4, ("a", "c"), "a", 7, (("c", 7), ("a", 5)))
    assert View.from_record(r) == v
    assert View.from_record([4, ["c", "a"], "a", 7, [["c", 7], ["a", 5]]]) == v, "as a log or snapshot decodes it"
    assert v.to_dict()["groups"] == [{"group": 0, "master": "c", "epoch": 7}, {"group": 1, "master": "a", "epoch": 5}]


def test_the_first_view_fixes_the_number_of_groups():
    v1 = View(1, ("a", "b"), "a", 2, (("a", 2), ("b", 2)))
    assert accept_view(None, v1)
    assert not accept_view(None, View(1, ("a", "b"), "a", 2, (("a", 0), ("b", 2)))), "epochs start at 1"
    assert not accept_view(None, View(1, ("a", "b"), "a", 2, (("a", 2), ("c", 2)))), "a group master is a member"
    assert not accept_view(v1, View(2, ("a", "b"), "a", 2, (("a", 2),)))
    assert not accept_view(v1, View(2, ("a", "b"), "a", 2)), "groups never go away"
    assert not accept_view(View(1, ("a", "b"), "a", 2), View(2, ("a", "b"), "a", 2, (("a", 2), ("b", 2)))), \
        "nor appear"


def test_a_group_keeps_its_master_and_epoch_or_takes_a_higher_epoch():
    v1 = View(1, ("a", "b", "c"), "a", 2, (("a", 2), ("b", 2)))
    assert accept_view(v1, View(2, ("a", "b", "c"), "a", 2, (("a", 2), ("b", 2))))
    assert accept_view(v1, View(2, ("a", "b", "c"), "a", 2, (("a", 2), ("c", 3))))
    assert accept_view(v1, View(2, ("a", "b", "c"), "a", 2, (("a", 2), ("b", 9)))), "same master, new epoch"
    assert not accept_view(v1, View(2, ("a", "b", "c"), "a", 2, (("a", 2), ("c", 2)))), "two masters of (1, 2)"
    assert not accept_view(v1, View(2, ("a", "b", "c"), "a", 2, (("a", 2), ("b", 1)))), "epochs never go back"
    assert not accept_view(v1, View(2, ("a", "c"), "a", 2, (("a", 2), ("b", 2)))), "b left the view"


NAMES = ("a", "b", "c", "d", "e")


@st.composite
def proposals(draw, count: int):
    """Views made from a (possibly stale) view: any member set, any masters, epochs around the old ones."""
    n = draw(st.integers(1, 40))
    out = []
    for _ in range(n):
        members = tuple(sorted(draw(st.sets(st.sampled_from(NAMES), min_size=1))))
        slots = tuple((draw(st.sampled_from(NAMES)), draw(st.integers(0, 12))) for _ in range(count))
        out.append((draw(st.integers(0, 3)), members, draw(st.sampled_from(members)), draw(st.integers(1, 12)),
                    draw(st.booleans()), slots))
    return out


@given(st.integers(1, 4), st.data())
@settings(max_examples=300)
def test_views_accepted_in_log_order_give_each_group_rising_epochs_and_one_master_per_epoch(count, data):
    committed: View | None = None
    masters: dict[tuple[int, int], str] = {}
    last: dict[int, tuple[str, int]] = {}
    for lag, members, master, epoch, stick, slots in data.draw(proposals(count)):
        if committed is not None and stick:
            # most proposers start from the committed view: keep some slots, bump others
            slots = tuple(old if s[1] % 2 else (s[0], old[1] + s[1] // 2 - 2)
                          for old, s in zip(committed.groups, slots))
            members = tuple(sorted(set(members) | {m for m, _ in slots}))
            epoch = max(epoch, committed.epoch)
        v = View((committed.view_id if committed else 0) + 1 - lag % 2, members,
                 master if master in members else members[0], epoch, slots)
        if not accept_view(committed, v):
            continue
        committed = v
        for g, (m, e) in enumerate(v.groups):
            if g in last and last[g] != (m, e):
                assert e > last[g][1], "a group's epoch rises strictly whenever its slot changes"
            assert masters.setdefault((g, e), m) == m, "one master per (group, epoch)"
            last[g] = (m, e)


# -- the leader's proposals -------------------------------------------------------------------------

def test_one_group_proposes_the_four_tuple_view_as_ever():
    c = MembershipCore("a", T, configured=ALL)
    v = take_office(c, 10.0, 2)
    assert v == View(1, ("a", "b", "c"), "a", 2) and len(v.to_record()) == 4


def test_the_first_view_spreads_the_groups_from_the_member_after_the_leader():
    v = take_office(core("a", groups=4), 10.0, 2)
    assert v == View(1, ("a", "b", "c"), "a", 2, (("b", 2), ("c", 2), ("a", 2), ("b", 2)))


def test_a_silent_master_loses_its_group_before_it_leaves_the_view():
    c = core("a")
    v = take_office(c, 10.0, 2)          # groups: b, c, a
    t = 10.06
    while t < 10.001 + T.group_suspect:
        assert not of(acks(c, t, ("b",)), ProposeView)
        t += 0.05
    (p,) = of(acks(c, t, ("b",)), ProposeView)
    assert p.view.members == v.members, "a move of groups alone keeps the members"
    assert p.view.groups == (("b", 2), ("b", 3), ("a", 2)), "c's group: a and b tie, the ring from c + 1 + 1 says b"
    c.handle(ViewCommitted(t + 0.001, p.view))
    while not of(out := acks(c, t, ("b",)), ProposeView):
        t += 0.05
    (p,) = of(out, ProposeView)
    assert p.view.members == ("a", "b") and p.view.groups == (("b", 2), ("b", 3), ("a", 2))
    assert t >= 10.0 + T.suspect + T.debounce


def follower_with(view: View, name: str = "b") -> MembershipCore:
    c = core(name)
    c.handle(RaftSample(0.0, view.epoch, "follower", view.master, ALL))
    c.handle(ViewCommitted(0.0, view))
    return c


V1 = View(1, ("a", "b", "c"), "a", 2, (("b", 2), ("c", 2), ("a", 2)))


def test_a_new_leader_moves_the_old_leaders_groups_in_its_first_view():
    c = follower_with(V1)
    c.leader_contact("a", 10.0)                     # then a went silent: an election
    c.handle(RaftSample(10.0 + T.election_min, 3, LEADER, "b", ALL))
    t = 10.0 + T.election_min
    acks(c, t + 0.001, ("c",))
    (p,) = of(c.handle(TimePassed(t + T.gather)), ProposeView)
    assert p.view == View(2, ("b", "c"), "b", 3, (("b", 2), ("c", 2), ("b", 3)))


def test_an_old_leader_that_still_acks_keeps_its_groups():
    c = follower_with(V1)
    c.leader_contact("a", 10.15)                    # it handed over (step-down) and is alive
    c.handle(RaftSample(10.2, 3, LEADER, "b", ALL))
    (p,) = of(acks(c, 10.201, ("a", "c")), ProposeView)
    assert p.view == View(2, ALL_SORTED, "b", 3, V1.groups)


def test_a_new_leader_gives_live_members_group_suspect_to_ack():
    c = follower_with(V1)
    c.leader_contact("a", 10.15)
    c.handle(RaftSample(10.2, 3, LEADER, "b", ALL))
    acks(c, 10.201, ("a",))                         # c has not acked our term yet
    (p,) = of(c.handle(TimePassed(10.2 + T.gather)), ProposeView)
    assert p.view == View(2, ALL_SORTED, "b", 3, V1.groups), "c stays, and keeps its group, for now"
    c.handle(ViewCommitted(10.26, p.view))
    assert not of(acks(c, 10.2 + T.group_suspect - 0.001, ("a",)), ProposeView)
    (p,) = of(acks(c, 10.2 + T.group_suspect + 0.001, ("a",)), ProposeView)
    assert p.view.members == ALL_SORTED and p.view.groups == (("b", 2), ("b", 3), ("a", 2))


def leading(groups) -> tuple[MembershipCore, list]:
    """``a`` leads term 2 over a view of term 1 committed at time 0 (everyone steady since)."""
    c = core("a")
    c.handle(ViewCommitted(0.0, View(1, ALL_SORTED, "a", 1, groups)))
    v, out = in_office(c, 20.0, 2)
    assert v.groups == groups
    return c, out


def test_balance_asks_the_busiest_master_to_hand_a_group_over_once():
    c, out = leading((("a", 1), ("a", 1), ("b", 1)))
    assert of(out, HandOverRequested) == [HandOverRequested(1, 1, "a", "c")]
    assert not of(out, ProposeView), "balance is never a reassignment"
    assert [r.fields for r in of(out, Record) if r.event == "handover_requested"] == \
        [{"group": 1, "epoch": 1, "master": "a", "to": "c"}]
    assert not of(acks(c, 20.15), HandOverRequested), "one handover in flight"
    (p,) = of(c.handle(GroupReleased(20.2, 1, 1, "c")), ProposeView)
    assert p.view.groups == (("a", 1), ("c", 2), ("b", 1))
    acts = c.handle(ViewCommitted(20.21, p.view))
    assert of(acts, DeliverView) and not of(acts + acks(c, 20.25), HandOverRequested), "balanced now"


def test_a_handover_that_never_ends_is_asked_again_later():
    c, out = leading((("a", 1), ("a", 1), ("b", 1)))
    asked = T.gather + 20.001
    assert of(out, HandOverRequested)
    wait = 2 * (T.leader_fallback + T.election_max)
    t = asked
    while t < asked + wait - 0.05:
        t += 0.05
        assert not of(acks(c, t), HandOverRequested)
    assert of(acks(c, asked + wait + 0.001), HandOverRequested)


def joined_by_c() -> tuple[MembershipCore, float]:
    """``a`` takes office over a view of a and b (three groups, two of them a's); c joins it."""
    c = core("a")
    c.handle(ViewCommitted(0.0, View(1, ("a", "b"), "a", 1, (("a", 1), ("a", 1), ("b", 1)))))
    v, out = in_office(c, 20.0, 2)
    assert v.members == ALL_SORTED and not of(out, HandOverRequested)
    return c, 20.0 + T.gather + 0.001


def quiet_until(c: MembershipCore, t: float, end: float, peers=("b", "c")) -> float:
    while t < end:
        assert not of(acks(c, t, peers), HandOverRequested)
        t += 0.05
    return t


def test_a_member_new_in_the_view_gets_nothing_until_the_quiet():
    c, joined = joined_by_c()
    t = quiet_until(c, joined, joined + T.rebalance_quiet - 0.01)
    assert of(acks(c, joined + T.rebalance_quiet + 0.001), HandOverRequested) == [HandOverRequested(1, 1, "a", "c")]


def test_a_member_silent_for_a_moment_counts_as_new():
    c, joined = joined_by_c()
    t = quiet_until(c, joined, 25.0)
    t = quiet_until(c, t, t + T.group_suspect + 0.05, ("b",))     # c silent, not long enough to leave the view
    back = t
    quiet_until(c, t, back + T.rebalance_quiet - 0.1)
    assert of(acks(c, back + T.rebalance_quiet), HandOverRequested)


def test_a_resigned_group_moves_at_once():
    c, out = leading((("a", 1), ("c", 1), ("b", 1)))
    assert not of(out, HandOverRequested), "balanced"
    assert not of(c.handle(GroupResigned(20.1, 1, 0)), ProposeView), "not its epoch"
    (p,) = of(c.handle(GroupResigned(20.1, 1, 1)), ProposeView)
    assert p.view.groups == (("a", 1), ("b", 2), ("b", 1))


def test_a_node_with_another_number_of_groups_says_so_and_proposes_nothing():
    c = core("a", groups=2)
    acts = c.handle(ViewCommitted(0.0, View(1, ALL_SORTED, "a", 1)))
    assert [r.fields for r in of(acts, Record) if r.event == "groups_mismatch"] == [{"cluster": 1, "node": 2}]
    assert c.groups_mismatch == "cluster has groups = 1, this node 2"
    c.handle(RaftSample(10.0, 2, LEADER, "a", ALL))
    assert not of(acks(c, 10.1), ProposeView)
    one = MembershipCore("b", T, configured=ALL)
    one.handle(ViewCommitted(0.0, V1))
    assert one.groups_mismatch == "cluster has groups = 3, this node 1"
