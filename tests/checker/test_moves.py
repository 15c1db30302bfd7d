"""cluster/checker/moves.py: a dead-letter queue that a ``redrive`` line names is judged with its
source, a delivery from the source after one from the dead-letter queue is an anomaly, and a
message whose last delivery nobody deleted, and that nobody received again, is lost on its way."""

from __future__ import annotations

from cluster.checker import check
from cluster.checker.verdict import AFTER_ACKED_DELETE, AFTER_MOVE, AFTER_TIMEOUT
from tests.checker.builder import H


def _pair() -> H:
    h = H("src")
    h.node(0.5, "n1", "redrive", queue="src", dead_letter="dead")
    return h


def test_a_moved_message_is_one_message_across_the_pair():
    h = _pair()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1.0)                 # received once, not deleted: it moves
    h.recv(4.0, 4.1, "a", queue="dead")
    h.delete("r-a-2", 4.2, queue="dead")
    v = check(h.history())
    assert set(v.queues) == {"src"}
    q = v.queues["src"]
    assert (q.acknowledged, q.lost, q.unexpected, q.deliveries) == (1, 0, 0, 2)
    assert [d.category for d in v.duplicates] == [AFTER_TIMEOUT]
    assert v.ok_for("majority"), v.failures("majority")


def test_without_a_redrive_line_each_queue_is_judged_on_its_own():
    h = H("src")
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1.0)
    h.recv(4.0, 4.1, "a", queue="dead")
    h.delete("r-a-2", 4.2, queue="dead")
    v = check(h.history())
    assert v.queues["dead"].unexpected == 1


def test_the_source_handing_out_a_message_after_its_dead_letter_queue_did_is_an_anomaly():
    h = _pair()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1.0)
    h.recv(4.0, 4.1, "a", queue="dead", vt=1.0)
    h.recv(6.0, 6.1, "a")
    h.delete("r-a-3", 6.2)
    v = check(h.history())
    assert [d.category for d in v.duplicates][-1] == AFTER_MOVE
    assert any(f.startswith("moved back: 1") for f in v.failures("majority")), v.failures("majority")


def test_a_message_nobody_deleted_and_nobody_received_again_was_lost_on_its_way():
    h = _pair()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1.0)
    h.recv(5.0, 5.1, queue="dead", phase="drain")
    h.recv(5.2, 5.3, phase="drain")
    v = check(h.history())
    assert [x.token for x in v.lost] == ["a"]
    assert any(f.startswith("lost: 1") for f in v.failures("majority"))


def test_a_delete_after_the_window_may_have_been_stale_once_the_message_could_move():
    h = _pair()
    h.send("a", 1.0)
    h.recv(2.0, 2.1, "a", vt=1.0)
    h.delete("r-a-1", 3.5)          # after the window: a receive may have moved it meanwhile
    h.recv(4.0, 4.1, "a", queue="dead")
    h.delete("r-a-2", 4.2, queue="dead")
    v = check(h.history())
    assert AFTER_ACKED_DELETE not in [d.category for d in v.duplicates]
    assert v.ok_for("majority"), v.failures("majority")
