"""The sans-I/O membership core, driven with a hand-held clock: no threads, no sockets."""

from __future__ import annotations

import pytest

from cluster.config import Timing
from cluster.membership import (FOLLOWER, LEADER, ActivityChanged, DeliverView, GateOpened, LeaseAck,
                                MembershipCore, ProposeView, RaftSample, Record, StepDown, TimePassed, View,
                                ViewCommitted, accept_view)

T = Timing()
ALL = frozenset({"a", "b", "c"})


def core(name: str = "a", gates: frozenset[str] = frozenset()) -> MembershipCore:
    return MembershipCore(name, T, gates, configured=ALL)


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def lead(c: MembershipCore, now: float, term: int = 2) -> list:
    return c.handle(RaftSample(now, term, LEADER, c.self_name, ALL))


def take_office(c: MembershipCore, now: float = 10.0, term: int = 2) -> View:
    """Become leader, collect acks from everyone, commit the proposed view."""
    lead(c, now, term)
    c.handle(LeaseAck(now + 0.001, "b", term, now))
    acts = c.handle(LeaseAck(now + 0.001, "c", term, now))
    (p,) = of(acts, ProposeView)
    c.handle(ViewCommitted(now + 0.002, p.view))
    return p.view


def test_accept_view_rule():
    v1 = View(1, ("a", "b"), "a", 2)
    assert accept_view(None, v1)
    assert not accept_view(None, View(2, ("a",), "a", 2))
    assert accept_view(v1, View(2, ("a", "b", "c"), "b", 3))
    assert not accept_view(v1, View(3, ("a",), "a", 2)), "ids must not skip"
    assert not accept_view(v1, View(2, ("a",), "a", 1)), "epochs must not go back"
    assert not accept_view(v1, View(2, ("b",), "a", 2)), "the master is a member"


def test_view_record_roundtrip_is_plain_data():
    v = View(4, ("c", "a"), "a", 7)
    r = v.to_record()
    assert r == (4, ("c", "a"), "a", 7)
    assert View.from_record(r) == View(4, ("a", "c"), "a", 7)


def test_new_leader_proposes_once_everyone_acked_and_activates_on_commit():
    c = core()
    acts = lead(c, 10.0)
    assert not of(acts, ProposeView), "no quorum contact yet"
    c.handle(LeaseAck(10.001, "b", 2, 10.0))
    acts = c.handle(TimePassed(10.002))
    assert not of(acts, ProposeView), "waits up to `gather` for stragglers"
    acts = c.handle(LeaseAck(10.003, "c", 2, 10.0))
    (p,) = of(acts, ProposeView)
    assert p.view == View(1, ("a", "b", "c"), "a", 2)
    assert not c.evaluate(10.004)[0], "not active before the view commits"
    acts = c.handle(ViewCommitted(10.005, p.view))
    assert of(acts, DeliverView)[0].view == p.view
    (ch,) = of(acts, ActivityChanged)
    assert ch.active and ch.at == 10.005


def test_new_leader_with_a_dead_member_proposes_after_gather():
    c = core()
    lead(c, 10.0)
    c.handle(LeaseAck(10.001, "b", 2, 10.0))
    acts = c.handle(TimePassed(10.0 + T.gather))
    (p,) = of(acts, ProposeView)
    assert p.view.members == ("a", "b")


def test_lease_expiry_deactivates_at_the_expiry_time_even_if_noticed_late():
    c = core()
    take_office(c, 10.0)
    assert c.evaluate(10.0 + T.lease - 0.001)[0]
    assert not c.evaluate(10.0 + T.lease)[0], "the query itself sees the expiry"
    acts = c.handle(TimePassed(13.0))  # e.g. the process was paused
    (ch,) = of(acts, ActivityChanged)
    assert not ch.active and ch.at == pytest.approx(10.0 + T.lease)
    rec = [r for r in of(acts, Record) if r.event == "deactivated"][0]
    assert rec.at == ch.at


def test_acks_renew_the_lease_by_send_stamp_not_arrival():
    c = core()
    take_office(c, 10.0)
    # An ack that arrives late for a heartbeat sent long ago does not extend the lease.
    c.handle(LeaseAck(12.0, "b", 2, 10.01))
    assert not c.evaluate(12.0)[0]
    c.handle(LeaseAck(12.0, "b", 2, 11.99))
    assert c.evaluate(12.0)[0], "one peer plus self is a majority of three"


def test_acks_of_another_term_are_ignored():
    c = core()
    take_office(c, 10.0, term=2)
    c.handle(TimePassed(11.0))
    c.handle(LeaseAck(11.0, "b", 1, 10.99))
    assert not c.evaluate(11.0)[0]


def test_losing_leadership_deactivates_immediately():
    c = core()
    take_office(c, 10.0)
    acts = c.handle(RaftSample(10.05, 3, FOLLOWER, None, ALL))
    (ch,) = of(acts, ActivityChanged)
    assert not ch.active and ch.at == 10.05


def test_step_down_is_immediate_and_sticks_while_the_transfer_may_succeed():
    c = core()
    take_office(c, 10.0)
    acts = c.handle(StepDown(10.01))
    assert not of(acts, ActivityChanged)[0].active
    c.handle(LeaseAck(10.02, "b", 2, 10.02))
    assert not c.evaluate(10.02)[0]
    c.handle(LeaseAck(11.0, "b", 2, 11.0))
    assert not c.evaluate(11.0)[0], "still within leader_fallback + election_max"


def test_a_step_down_that_left_us_leader_ends_and_we_serve_again():
    c = core()
    take_office(c, 10.0)
    c.handle(StepDown(10.01))
    retry = 10.01 + T.leader_fallback + T.election_max
    acts = c.handle(LeaseAck(retry, "b", 2, retry))
    assert [r.event for r in of(acts, Record)] == ["step_down_failed", "activated"]
    assert c.evaluate(retry)[0]


def test_a_successful_step_down_is_forgotten_with_the_term():
    c = core()
    take_office(c, 10.0)
    c.handle(StepDown(10.01))
    c.handle(RaftSample(10.2, 3, FOLLOWER, "b", ALL))
    assert not of(c.handle(TimePassed(12.0)), Record), "no step_down_failed after a real hand-over"


def test_member_loss_gives_a_new_view_after_suspect_and_debounce():
    c = core()
    v1 = take_office(c, 10.0)
    t = 10.0
    proposals = []
    while t < 12.0:
        t = round(t + 0.05, 3)
        proposals += of(c.handle(LeaseAck(t, "b", 2, t - 0.001)), ProposeView)  # c has died
        proposals += of(c.handle(TimePassed(t)), ProposeView)
    assert len(proposals) == 1
    v2 = proposals[0].view
    assert v2 == View(2, ("a", "b"), "a", 2)
    # Not before c was suspected for `suspect` and that held for `debounce`.
    c2 = core()
    take_office(c2, 10.0)
    acts = c2.handle(TimePassed(10.0 + T.suspect + T.debounce - 0.06))
    assert not of(acts, ProposeView)
    assert v1.view_id == 1


def test_flapping_member_is_debounced():
    c = core()
    take_office(c, 10.0)
    t, proposals = 10.0, []
    while t < 10.0 + T.suspect + T.debounce * 0.9:
        t = round(t + 0.05, 3)
        proposals += of(c.handle(LeaseAck(t, "b", 2, t)), ProposeView)
        proposals += of(c.handle(TimePassed(t)), ProposeView)
    proposals += of(c.handle(LeaseAck(t, "c", 2, t)), ProposeView)  # c is back before the debounce ran out
    t += 0.3
    proposals += of(c.handle(LeaseAck(t, "b", 2, t)), ProposeView)
    proposals += of(c.handle(LeaseAck(t, "c", 2, t)), ProposeView)
    assert proposals == []


def test_minority_leader_proposes_nothing():
    c = core()
    lead(c, 10.0)
    assert not of(c.handle(TimePassed(11.0)), ProposeView)


def test_uncommitted_proposal_is_retried_not_repeated():
    c = core()
    lead(c, 10.0)
    c.handle(LeaseAck(10.001, "b", 2, 10.0))
    first = of(c.handle(LeaseAck(10.001, "c", 2, 10.0)), ProposeView)
    assert len(first) == 1
    for i in range(1, 20):
        t = 10.0 + i * 0.05
        assert not of(c.handle(LeaseAck(t, "b", 2, t)) + c.handle(LeaseAck(t, "c", 2, t)), ProposeView)
    t = 10.0 + T.proposal_retry + 0.01
    again = of(c.handle(LeaseAck(t, "b", 2, t)) + c.handle(LeaseAck(t, "c", 2, t)), ProposeView)
    assert [p.view for p in again] == [p.view for p in first]


def test_follower_delivers_views_in_order_and_ignores_old_ones():
    c = core("b")
    c.handle(RaftSample(1.0, 2, FOLLOWER, "a", ALL))
    v1, v2 = View(1, ("a", "b", "c"), "a", 2), View(2, ("a", "b"), "a", 2)
    assert of(c.handle(ViewCommitted(1.1, v1)), DeliverView)
    assert of(c.handle(ViewCommitted(1.2, v2)), DeliverView)
    assert not of(c.handle(ViewCommitted(1.3, v1)), DeliverView)
    assert c.view == v2 and not c.evaluate(1.3)[0]


def test_required_gate_must_be_opened_for_the_current_epoch():
    c = core(gates=frozenset({"replication"}))
    v = take_office(c, 10.0)
    assert c.evaluate(10.01) == (False, "waiting for gate replication")
    c.handle(GateOpened(10.01, "replication", v.epoch - 1))
    assert not c.evaluate(10.01)[0]
    acts = c.handle(GateOpened(10.02, "replication", v.epoch))
    assert of(acts, ActivityChanged)[0].active


def test_history_records_roles_leaders_and_views():
    c = core("b")
    acts = c.handle(RaftSample(1.0, 2, FOLLOWER, "a", ALL))
    acts += c.handle(ViewCommitted(1.1, View(1, ("a", "b"), "a", 2)))
    events = [r.event for r in of(acts, Record)]
    assert events == ["role", "leader", "view"]
