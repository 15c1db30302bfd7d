"""The checker against hand-written histories: each anomaly is found, each legitimate look-alike
is not, clean histories pass."""

from __future__ import annotations

import pytest

from cluster.checker import check
from cluster.checker.verdict import (AFTER_ACKED_DELETE, AFTER_TIMEOUT, AFTER_UNKNOWN_DELETE,
                                     AFTER_VISIBILITY_CHANGE, BATCH_ORDER, CONCURRENT, IN_WINDOW, OVERTAKE,
                                     REORDER, RESEND, SEQ_INVERSION)
from tests.checker.builder import H


def cats(v):
    return [d.category for d in v.duplicates]


# --- clean ---------------------------------------------------------------------------------

def test_clean_standard_history_passes():
    h = H()
    h.send("a", 1.0)
    h.send("b", 1.1, client="p2")
    h.recv(2.0, 2.1, "a", "b")
    h.delete("r-a-1", 2.2)
    h.delete("r-b-1", 2.3)
    h.recv(3.0, 3.1, phase="drain")
    v = check(h.history())
    q = v.queues["q"]
    assert (q.attempted, q.acknowledged, q.lost, q.unexpected, q.duplicated, q.recovered) == (2, 2, 0, 0, 0, 0)
    assert q.received == 2 and q.deliveries == 2
    assert q.ops["send"] == {"ok": 2} and q.ops["delete"] == {"ok": 2} and q.ops["receive"] == {"ok": 2}
    for policy in ("none", "one", "majority", "all"):
        assert v.ok_for(policy, strict=True), v.summary(policy)
    assert "PASS" in v.summary("majority")


def test_empty_history_passes():
    v = check(H().history())
    assert v.ok_for("all", strict=True) and v.queues == {}


# --- lost / unexpected / recovered ----------------------------------------------------------

def test_lost_acknowledged_send():
    h = H()
    h.send("a", 1.0)
    h.send("b", 1.0, 1.2)
    h.recv(2.0, 2.1, "a")
    h.recv(5.0, 5.1, phase="drain")
    v = check(h.history())
    assert v.queues["q"].lost == 1
    assert [(x.token, x.acked_at, x.message_ids) for x in v.lost] == [("b", 1.2, ("m-b",))]
    assert not v.ok_for("majority") and not v.ok_for("all")
    assert v.ok_for("none") and v.ok_for("one")
    assert "lost" in v.summary("majority") and "token=b" in v.summary()


def test_each_queue_is_held_to_its_own_ack_policy():
    h = H()
    h.send("a", 1.0, queue="weak")
    h.send("b", 1.0, queue="tagged")
    h.recv(5.0, 5.1, queue="weak", phase="drain")
    h.recv(5.0, 5.1, queue="tagged", phase="drain")
    v = check(h.history())
    assert v.ok_for("one"), "both lost sends are within a cluster policy of one"
    assert v.failures("one", queue_policies={"tagged": "majority"}) == ["lost: 1 acknowledged sends never received"]
    assert v.failures("majority", queue_policies={"weak": "none"}) == ["lost: 1 acknowledged sends never received"]
    assert v.ok_for("majority", queue_policies={"weak": "none", "tagged": "one"})
    with pytest.raises(ValueError):
        v.failures("one", queue_policies={"tagged": "most"})


def test_unexpected_message():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", h.msg("ghost", mid="m-ghost"))
    v = check(h.history())
    assert v.queues["q"].unexpected == 1
    u = v.unexpected[0]
    assert (u.token, u.message_id, u.client) == ("ghost", "m-ghost", "c1")
    assert not v.ok_for("majority")


def test_message_without_token_is_identified_by_message_id():
    h = H()
    h.send("a", 1.0, mid="m1")
    from cluster.checker import ReceivedMessage
    h.recv(2.0, 2.1, ReceivedMessage("m1", None, "r1"))
    h.recv(2.0, 2.1, ReceivedMessage("m-unknown", None, "r2"))
    v = check(h.history())
    assert v.queues["q"].lost == 0 and v.queues["q"].unexpected == 1


def test_message_sent_to_another_queue_is_unexpected_here():
    h = H()
    h.send("a", 1.0, queue="other")
    h.recv(2.0, 2.1, "a")
    v = check(h.history())
    assert v.queues["q"].unexpected == 1 and v.queues["other"].lost == 1


def test_unknown_send_recovered_vs_not():
    h = H()
    h.send("u1", 1.0, outcome="unknown")
    h.send("u2", 1.0, outcome="unknown")
    h.send("f1", 1.0, outcome="failed")
    h.recv(2.0, 2.1, "u1", "f1")
    v = check(h.history())
    q = v.queues["q"]
    assert (q.attempted, q.acknowledged, q.recovered, q.recovered_failed, q.unrecovered, q.lost) == (3, 0, 2, 1, 1, 0)
    assert sorted(r.token for r in v.recovered) == ["f1", "u1"]
    assert v.ok_for("majority", strict=True)  # neither recovered nor unrecovered is an anomaly


def test_retried_send_counts_once_and_acknowledged_if_any_attempt_was():
    h = H()
    h.send("a", 1.0, outcome="unknown")
    h.send("a", 2.0)
    h.recv(3.0, 3.1, "a")
    q = check(h.history()).queues["q"]
    assert (q.attempted, q.acknowledged, q.recovered, q.duplicated) == (1, 1, 0, 0)


def test_resent_token_delivered_twice_is_a_resend_not_an_anomaly():
    h = H()
    h.send("a", 1.0, outcome="unknown", mid="m1")
    h.send("a", 2.0, mid="m2")
    h.recv(3.0, 3.1, h.msg("a", mid="m1"), h.msg("a", mid="m2"))
    v = check(h.history())
    assert cats(v) == [RESEND] and v.queues["q"].duplicated == 1
    assert v.ok_for("majority", strict=True)


# --- duplicates ----------------------------------------------------------------------------

def test_duplicate_inside_one_visibility_window():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=30, client="c1")
    h.recv(5.0, 5.1, "a", vt=30, client="c2")
    v = check(h.history())
    assert cats(v) == [IN_WINDOW]
    d = v.in_window[0]
    assert (d.client, d.prev_client, d.window_end) == ("c2", "c1", 32.0)
    assert v.queues["q"].in_window == 1 and v.queues["q"].duplicated == 1
    assert not v.ok_for("majority") and not v.ok_for("all")  # invariant 2, by default
    assert v.ok_for("one") and v.ok_for("none")  # which none / one do not promise
    assert "in-window" in v.summary()


def test_overlapping_receives_both_getting_the_message_is_in_window():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.5, "a", vt=10, client="c1")
    h.recv(2.1, 2.4, "a", vt=10, client="c2")
    assert cats(check(h.history())) == [IN_WINDOW]


def test_redelivery_after_timeout_is_legitimate():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5, client="c1")
    h.recv(7.2, 7.3, "a", vt=5, client="c2")   # 7.2 >= 2.1 + 5
    v = check(h.history())
    assert cats(v) == [AFTER_TIMEOUT]
    assert v.queues["q"].in_window == 0 and v.queues["q"].duplicated == 1
    assert v.ok_for("all", strict=True)


def test_redelivery_near_the_timeout_is_concurrent_not_flagged():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 3.0, "a", vt=5, client="c1")   # window ends somewhere in [7, 8]
    h.recv(7.5, 7.6, "a", vt=5, client="c2")
    v = check(h.history())
    assert cats(v) == [CONCURRENT] and v.ok_for("all", strict=True)


def test_redelivery_after_unknown_delete_is_legitimate():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5)
    h.delete("r-a-1", 2.2, 3.0, outcome="unknown")
    h.recv(8.0, 8.1, "a", vt=5, client="c2")
    v = check(h.history())
    assert cats(v) == [AFTER_UNKNOWN_DELETE] and v.duplicates[0].delete_op_id is not None
    assert v.ok_for("all", strict=True)


def test_redelivery_inside_the_window_after_unknown_delete_is_not_in_window():
    # The delete may have happened; then nobody holds the message and the next receive is a
    # (resurrection-or-not) question, not two consumers in one window.
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=30)
    h.delete("r-a-1", 2.2, 3.0, outcome="unknown")
    h.recv(4.0, 4.1, "a", client="c2")
    assert cats(check(h.history())) == [AFTER_UNKNOWN_DELETE]


def test_redelivery_after_acknowledged_delete_is_a_lost_delete():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5)
    h.delete("r-a-1", 2.2, 2.3)
    h.recv(9.0, 9.1, "a", client="c2")
    v = check(h.history())
    assert cats(v) == [AFTER_ACKED_DELETE]
    assert v.queues["q"].lost_deletes == 1
    assert not v.ok_for("majority", strict=True) and v.ok_for("one", strict=True)


def test_ok_delete_with_stale_receipt_deletes_nothing():
    # c1's handle went stale when c2 received the message again; its ok delete is a no-op (SQS).
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5, client="c1")
    h.recv(8.0, 8.1, "a", vt=5, client="c2")
    h.delete("r-a-1", 9.0, 9.1, client="c1")
    h.recv(20.0, 20.1, "a", client="c3")
    v = check(h.history())
    assert cats(v) == [AFTER_TIMEOUT, AFTER_TIMEOUT]
    assert v.ok_for("all", strict=True)


def test_visibility_change_to_zero_ends_the_window():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=30)
    h.cv("r-a-1", 0, 3.0, 3.1)
    h.recv(4.0, 4.1, "a", client="c2")
    v = check(h.history())
    assert cats(v) == [AFTER_VISIBILITY_CHANGE] and v.ok_for("all", strict=True)


def test_unknown_visibility_change_may_have_ended_the_window():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=30)
    h.cv("r-a-1", 0, 3.0, 3.1, outcome="unknown")
    h.recv(4.0, 4.1, "a", client="c2")
    assert cats(check(h.history())) == [AFTER_VISIBILITY_CHANGE]


def test_lost_visibility_extension_is_in_window():
    # The extension to 60 s was acknowledged; a redelivery at 40 s means it was lost.
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=30)
    h.cv("r-a-1", 60, 10.0, 10.1)
    h.recv(40.0, 40.1, "a", client="c2")
    v = check(h.history())
    assert cats(v) == [IN_WINDOW] and v.in_window[0].window_end == 70.0


def test_a_change_through_a_superseded_handle_moves_the_current_window():
    # SQS (standard queues): a handle from an earlier receive still changes the message's
    # visibility (LocalStack's AWS-validated test_terminate_visibility_timeout_after_receive).
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1)            # r-a-1, expires at 3
    h.recv(4.0, 4.1, "a", vt=30)           # r-a-2: after the timeout
    h.cv("r-a-1", 0, 5.0, 5.1)             # through the first, superseded handle: ends r-a-2's window
    h.recv(6.0, 6.1, "a", client="c2")
    v = check(h.history())
    assert cats(v) == [AFTER_TIMEOUT, AFTER_VISIBILITY_CHANGE] and v.ok_for("all", strict=True)


def test_a_change_through_a_superseded_handle_overlapping_the_next_receive_may_have_done_nothing():
    # The simulator's seed 100057: the change through the first handle was invoked after that
    # window ended and before the second receive completed. Had it come first it found the
    # message visible (a no-op, 200); so the second window may end at its own timeout, and a
    # third receive after that is no in-window duplicate.
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1)            # r-a-1, expires at 3
    h.cv("r-a-1", 3, 3.1, 3.2)             # overlaps the next receive
    h.recv(3.15, 3.2, "a", vt=1)           # r-a-2: its own window ends at ~4.2
    h.recv(4.3, 4.4, "a", client="c2")
    v = check(h.history())
    assert IN_WINDOW not in cats(v) and v.ok_for("all", strict=True)
    h2 = H()
    h2.send("a", 1.0)
    h2.recv(2.0, 2.1, "a", vt=1)
    h2.recv(3.15, 3.2, "a", vt=1)
    h2.cv("r-a-1", 3, 3.3, 3.4)            # certainly after the second receive: it moved that window
    h2.recv(4.3, 4.4, "a", client="c2")
    assert IN_WINDOW in cats(check(h2.history()))


def test_an_acknowledged_change_after_the_window_ended_did_nothing():
    # SQS (standard queues) answers 200 for a message no longer in flight and leaves it visible
    # (LocalStack's AWS-validated test_change_message_visibility_after_visibility_timeout_expiration).
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5)            # window [2, 7)
    h.cv("r-a-1", 60, 10.0, 10.1)          # too late: the message was visible again
    h.recv(20.0, 20.1, "a", client="c2")
    v = check(h.history())
    assert IN_WINDOW not in cats(v) and v.ok_for("all", strict=True)


def test_retried_receive_returning_the_same_receipt_is_one_delivery():
    h = H()
    h.send("a", 1.0)
    m = h.msg("a")
    h.recv(2.0, 2.1, m)
    h.recv(2.2, 2.3, m)   # ReceiveRequestAttemptId retry: same handle
    v = check(h.history())
    assert v.duplicates == () and v.queues["q"].deliveries == 1


# --- FIFO ----------------------------------------------------------------------------------

def fifo() -> H:
    return H("q.fifo")


def test_fifo_order_violation_across_receives():
    h = fifo()
    h.send("a", 1.0, 1.1, group="g")
    h.send("b", 1.2, 1.3, group="g")          # a acknowledged before b invoked
    h.recv(2.0, 2.1, "b")
    h.delete("r-b-1", 2.2)
    h.recv(3.0, 3.1, "a")
    v = check(h.history())
    kinds = {(o.kind, o.earlier, o.later) for o in v.order_violations}
    assert (REORDER, "a", "b") in kinds
    assert v.queues["q.fifo"].order_violations >= 1
    assert not v.ok_for("majority") and v.ok_for("none")
    assert "order violations" in v.summary()


def test_fifo_order_violation_inside_one_batch():
    h = fifo()
    h.send("a", 1.0, 1.1, group="g")
    h.send("b", 1.2, 1.3, group="g")
    h.recv(2.0, 2.1, "b", "a")
    v = check(h.history())
    assert [(o.kind, o.earlier, o.later) for o in v.order_violations] == [(BATCH_ORDER, "a", "b")]


def test_fifo_order_by_sequence_number_for_concurrent_sends():
    h = fifo()
    h.send("a", 1.0, 2.0, group="g", seq=1)
    h.send("b", 1.5, 2.5, group="g", seq=2)   # concurrent: only the sequence numbers order them
    h.recv(3.0, 3.1, "b")
    h.delete("r-b-1", 3.2)
    h.recv(4.0, 4.1, "a")
    v = check(h.history())
    assert [(o.kind, o.earlier, o.later) for o in v.order_violations] == [(REORDER, "a", "b")]


def test_fifo_concurrent_sends_without_sequence_numbers_may_come_either_way():
    h = fifo()
    h.send("a", 1.0, 2.0, group="g")
    h.send("b", 1.5, 2.5, group="g")
    h.recv(3.0, 3.1, "b")
    h.delete("r-b-1", 3.2)
    h.recv(4.0, 4.1, "a")
    assert check(h.history()).order_violations == ()


def test_fifo_sequence_inversion():
    h = fifo()
    h.send("a", 1.0, 1.1, group="g", seq=5)
    h.send("b", 1.2, 1.3, group="g", seq=3)
    h.recv(2.0, 2.1, "a", "b")
    v = check(h.history())
    assert (SEQ_INVERSION, "a", "b") in {(o.kind, o.earlier, o.later) for o in v.order_violations}


def test_fifo_overtake_while_earlier_message_in_flight():
    h = fifo()
    h.send("a", 1.0, 1.1, group="g")
    h.send("b", 1.2, 1.3, group="g")
    h.recv(2.0, 2.1, "a", vt=30, client="c1")
    h.recv(3.0, 3.1, "b", vt=30, client="c2")   # a still in flight, not deleted: group is blocked
    v = check(h.history())
    assert [(o.kind, o.earlier, o.later) for o in v.order_violations] == [(OVERTAKE, "a", "b")]


def test_fifo_legitimate_redeliveries_are_not_violations():
    h = fifo()
    for i, t in enumerate("abc"):
        h.send(t, 1.0 + i * 0.1, 1.05 + i * 0.1, group="g", seq=i + 1)
    h.recv(2.0, 2.1, "a", "b", vt=5, client="c1")     # both expire
    h.recv(7.5, 7.6, "a", "b", vt=5, client="c2")     # redelivered in order: a, b, a, b
    h.delete("r-a-2", 7.7)                            # b's stays in flight then expires
    h.recv(13.0, 13.1, "b", vt=5, client="c3")        # b again (after a, b, a, b): fine
    h.delete("r-b-3", 13.2)
    h.recv(14.0, 14.1, "c", vt=5, client="c1")
    h.cv("r-c-1", 0, 14.2)                            # c given back: visible at once
    h.recv(14.5, 14.6, "c", vt=5, client="c2")
    h.delete("r-c-2", 14.7)
    v = check(h.history())
    assert v.order_violations == (), v.summary()
    assert sorted(cats(v)) == sorted([AFTER_TIMEOUT, AFTER_TIMEOUT, AFTER_TIMEOUT, AFTER_VISIBILITY_CHANGE])
    assert v.ok_for("all", strict=True)


def test_fifo_next_message_after_delete_is_not_overtake():
    h = fifo()
    h.send("a", 1.0, 1.1, group="g")
    h.send("b", 1.2, 1.3, group="g")
    h.recv(2.0, 2.1, "a", vt=30)
    h.delete("r-a-1", 2.2, 2.3)
    h.recv(3.0, 3.1, "b", vt=30, client="c2")
    assert check(h.history()).ok_for("all", strict=True)


def test_fifo_groups_are_independent():
    h = fifo()
    h.send("a", 1.0, 1.1, group="g1")
    h.send("b", 1.2, 1.3, group="g2")
    h.recv(2.0, 2.1, "b")
    h.recv(3.0, 3.1, "a")
    assert check(h.history()).order_violations == ()


def test_order_rules_apply_only_to_fifo_queues():
    h = H("plain")
    h.send("a", 1.0, 1.1, group="g")
    h.send("b", 1.2, 1.3, group="g")
    h.recv(2.0, 2.1, "b", "a")
    v = check(h.history())
    assert v.order_violations == () and not v.queues["plain"].fifo


# --- masters -------------------------------------------------------------------------------

def test_two_active_masters_overlapping():
    h = H()
    h.node(1.0, "n1", "activated", reason="elected", term=1, view_id=1, epoch=1)
    h.node(5.0, "n2", "activated", reason="elected", term=2, view_id=2, epoch=2)
    h.node(6.5, "n1", "deactivated", reason="lease", term=1, view_id=1, epoch=1)
    v = check(h.history())
    assert len(v.two_masters) == 1
    o = v.two_masters[0]
    assert (o.node_a, o.node_b, o.start, o.end) == ("n1", "n2", 5.0, 6.5)
    assert o.duration == pytest.approx(1.5)
    # at most one active partition is promised under every ack policy (invariant 2)
    assert not v.ok_for("majority") and not v.ok_for("one") and not v.ok_for("none")
    assert "n1 & n2" in v.summary()


def test_back_to_back_masters_pass():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(5.0, "n1", "deactivated")
    h.node(5.0, "n2", "activated")
    h.node(9.0, "n2", "stopped", was_active=True)
    h.node(9.5, "n3", "activated")
    v = check(h.history())
    assert v.two_masters == () and v.ok_for("all")
    assert [(i.node, i.start, i.end, i.closed_by) for i in v.active_intervals] == [
        ("n1", 1.0, 5.0, "deactivated"), ("n2", 5.0, 9.0, "stopped"), ("n3", 9.5, 9.5, "end")]
    assert v.final_master == "n3"


def test_kill_ends_the_active_interval():
    h = H()
    h.node(1.0, "n1", "activated")
    h.kill(4.0, "n1")
    h.node(4.5, "n2", "activated")
    h.node(8.0, "n1", "started")   # restarted: nothing more from its old life
    h.node(10.0, "n2", "deactivated")
    v = check(h.history())
    assert v.two_masters == ()
    assert [(i.node, i.end, i.closed_by) for i in v.active_intervals] == [("n1", 4.0, "kill"), ("n2", 10.0, "deactivated")]


def test_killed_master_without_nemesis_record_is_closed_by_its_restart():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(4.5, "n2", "activated")
    h.node(8.0, "n1", "started")
    v = check(h.history())
    assert len(v.two_masters) == 1 and (v.two_masters[0].start, v.two_masters[0].end) == (4.5, 8.0)


def test_tolerance_ignores_tiny_overlaps():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(5.0, "n2", "activated")
    h.node(5.0005, "n1", "deactivated")
    assert len(check(h.history()).two_masters) == 1
    assert check(h.history(), tolerance=0.001).two_masters == ()


# --- digests -------------------------------------------------------------------------------

def test_digest_divergence_from_master():
    h = H()
    h.node(1.0, "n1", "activated")
    h.digest(10.0, "n1", "aaa")
    h.digest(10.0, "n2", "aaa")
    h.digest(10.0, "n3", "bbb")
    v = check(h.history())
    assert v.final_master == "n1"
    assert [(d.node, d.digest, d.reference_node, d.reference_digest) for d in v.divergence] == [("n3", "bbb", "n1", "aaa")]
    # convergence after the heal is promised under every ack policy (invariant 4)
    assert not v.ok_for("all") and not v.ok_for("none")
    assert "divergent" in v.summary()


def test_master_can_be_the_minority_digest():
    h = H()
    h.digest(10.0, "n1", "aaa", master="n3")
    h.digest(10.0, "n2", "aaa", master="n3")
    h.digest(10.0, "n3", "bbb", master="n3")
    v = check(h.history())
    assert v.final_master == "n3" and sorted(d.node for d in v.divergence) == ["n1", "n2"]


def test_only_the_last_digest_of_each_node_counts():
    h = H()
    h.node(1.0, "n1", "activated")
    h.digest(10.0, "n1", "aaa")
    h.digest(10.0, "n2", "old")
    h.digest(11.0, "n2", "aaa")
    v = check(h.history())
    assert v.divergence == () and v.digests == {"n1": "aaa", "n2": "aaa"}


def test_without_a_master_digest_the_most_common_is_the_reference():
    h = H()
    h.digest(10.0, "n1", "aaa")
    h.digest(10.0, "n2", "aaa")
    h.digest(10.0, "n3", "ccc")
    v = check(h.history())
    assert [(d.node, d.reference_node) for d in v.divergence] == [("n3", None)]


def test_policy_names_are_checked():
    with pytest.raises(ValueError):
        check(H().history()).ok_for("quorum")


def test_ok_delete_may_be_stale_after_an_unknown_receive():
    # Between c1's receive and its late delete, an unknown-outcome receive may have taken the
    # message again (its window had expired), making c1's handle stale: not a lost delete.
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=5, client="c1")
    h.recv(8.0, 8.1, vt=5, client="c2", outcome="unknown")
    h.delete("r-a-1", 9.0, 9.1, client="c1")
    h.recv(20.0, 20.1, "a", client="c3")
    v = check(h.history())
    assert cats(v) == [AFTER_UNKNOWN_DELETE] and v.ok_for("all", strict=True)


def test_ok_delete_inside_the_window_is_effective_despite_unknown_receives():
    h = H()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=30, client="c1")
    h.recv(3.0, 3.1, vt=5, client="c2", outcome="unknown")
    h.delete("r-a-1", 4.0, 4.1, client="c1")   # its window runs to >= 32: the handle was current
    h.recv(40.0, 40.1, "a", client="c3")
    assert cats(check(h.history())) == [AFTER_ACKED_DELETE]


def test_a_hundred_thousand_operations_in_seconds():
    import time
    h = H("q.fifo")
    t = 1.0
    for i in range(33_000):
        tok = f"t{i}"
        if i % 10 == 0:   # standard queue, redelivered after its window: a legitimate duplicate
            h.send(tok, t, t + 0.0005, client=f"p{i % 4}", queue="q")
            h.recv(t + 0.001, t + 0.0015, tok, vt=30, client=f"c{i % 4}", queue="q")
            h.recv(t + 31, t + 31.0005, h.msg(tok), vt=30, client="c9", queue="q")
            h.delete(f"r-{tok}-2", t + 31.001, queue="q")
        else:             # FIFO, 50 groups
            h.send(tok, t, t + 0.0005, group=f"g{i % 50}", seq=i + 1, client=f"p{i % 4}")
            h.recv(t + 0.001, t + 0.0015, tok, vt=30, client=f"c{i % 4}")
            h.delete(f"r-{tok}-1", t + 0.002)
        t += 0.003
    hist = h.history()
    assert len(hist.ops) >= 100_000
    start = time.perf_counter()
    v = check(hist)
    took = time.perf_counter() - start
    assert v.ok_for("all", strict=True), v.summary("all")
    assert v.totals.redeliveries == {"after_timeout": 3300}
    assert took < 10, f"{took:.1f} s"   # ~1.5 s on the 2-core dev box


def test_verdict_as_data_is_json():
    import json
    h = H("q.fifo")
    h.send("a", 1.0, 1.1, group="g")
    h.send("b", 1.2, 1.3, group="g")
    h.recv(2.0, 2.1, "b", "a")
    h.recv(3.0, 3.1, "a", client="c2")
    h.node(1.0, "n1", "activated")
    h.node(2.0, "n2", "activated")
    h.digest(5.0, "n1", "x")
    h.digest(5.0, "n2", "y")
    v = check(h.history())
    d = json.loads(json.dumps(v.to_json()))
    assert d["queues"]["q.fifo"]["order_violations"] == 1 and d["queues"]["q.fifo"]["in_window"] == 1
    assert len(d["two_masters"]) == 1 and len(d["divergence"]) == 1
    assert "FAIL" in v.summary("all") and len(v.failures("all")) == 4 and v.failures("all", strict=True) == v.failures("all")


# --- rules a node keeps on its own (cluster/checker/node_rules.py) ------------------------------

def test_an_operation_executed_outside_the_nodes_active_intervals_breaks_gating():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(1.5, "n1", "op", action="SendMessage", queue="q", outcome="ok", completed=1.6)
    h.node(2.0, "n1", "deactivated", reason="lease")
    h.node(2.5, "n1", "op", action="SendMessage", queue="q", outcome="failed", error="ServiceUnavailable")
    h.node(2.6, "n1", "op", action="ReceiveMessage", queue="q", outcome="unknown", error="ServiceUnavailable")
    h.node(3.0, "n2", "op", action="DeleteMessage", queue="q", outcome="ok", completed=3.1)
    v = check(h.history())
    assert [(g.node, g.at, g.action) for g in v.gating] == [("n1", 2.6, "ReceiveMessage"), ("n2", 3.0, "DeleteMessage")]
    assert not v.ok_for("none") and "gating: 2" in v.failures("majority")[0]


def test_a_producer_executed_while_throttling_breaks_flow_control():
    h = H()
    h.node(1.0, "n1", "activated")
    h.node(2.0, "n1", "throttle", on=True)
    h.node(2.5, "n1", "op", action="ReceiveMessage", queue="q", outcome="ok", completed=2.6)
    h.node(2.7, "n1", "op", action="SendMessage", queue="q", outcome="failed", error="RequestThrottled")
    h.node(2.8, "n1", "op", action="SendMessageBatch", queue="q", outcome="ok", completed=2.9)
    h.node(3.0, "n1", "throttle", on=False)
    h.node(3.5, "n1", "op", action="SendMessage", queue="q", outcome="ok", completed=3.6)
    v = check(h.history())
    assert [(t.node, t.at, t.action, t.throttling_since) for t in v.throttled] == [("n1", 2.8, "SendMessageBatch", 2.0)]
    assert not v.gating
    assert "flow control: 1" in " ".join(v.failures("none"))
