"""cluster/checker/listing.py: an ok ListQueues names every queue of its prefix whose CreateQueue
was acknowledged before the list was invoked (read-your-writes, across replication groups too)."""

from __future__ import annotations

import json

from cluster.checker import ClientOp, check
from sim.history_checks import relax_for_power_cuts

from tests.checker.builder import H


def _create(h: H, name: str, t0: float, t1: float, outcome: str = "ok") -> ClientOp:
    op = ClientOp(t0, "n1", "c1", h._id("c1"), "create_queue", name, outcome, t1)
    h.records.append(op)
    return op


def _list(h: H, t0: float, t1: float, *listed: str, outcome: str = "ok", prefix: str = "new-") -> ClientOp:
    op = ClientOp(t0, "n2", "c2", h._id("c2"), "list_queues", prefix, outcome, t1,
                  listed=listed if outcome == "ok" else ())
    h.records.append(op)
    return op


def test_a_list_missing_a_queue_created_before_it_is_a_stale_list_under_majority():
    h = H()
    _create(h, "new-a", 1.0, 1.1)
    _create(h, "new-b", 2.0, 2.1)
    miss = _list(h, 2.2, 2.3, "new-a")
    v = check(h.history())
    assert [(s.queue, s.op_id, s.created_at) for s in v.stale_lists] == [("new-b", miss.op_id, 2.1)]
    (failure,) = [f for f in v.failures("majority") if f.startswith("stale lists")]
    assert f"{miss.op_id} at 2.200 s missed new-b" in failure
    assert not [f for f in v.failures("none") if f.startswith("stale lists")], "none promises no durability"
    assert v.to_json()["stale_lists"][0]["queue"] == "new-b"


def test_creates_overlapping_the_list_failed_or_of_another_prefix_are_not_required():
    h = H()
    _create(h, "new-a", 1.0, 1.1)
    _create(h, "new-late", 2.0, 2.35)          # acknowledged after the list began
    _create(h, "new-failed", 1.0, 1.1, outcome="failed")
    _create(h, "new-unknown", 1.0, 1.1, outcome="unknown")
    _create(h, "other", 1.0, 1.1)
    _list(h, 2.2, 2.3, "new-a")
    _list(h, 2.2, 2.3, outcome="failed")
    v = check(h.history())
    assert v.stale_lists == () and v.failures("majority") == []
    assert "stale_lists" not in v.to_json(), "a history without stale lists reads as before"
    assert set(v.queues) == set(), "queue operations are not message queues' counts"


def test_the_listed_names_round_trip_through_the_history_line():
    h = H()
    op = _list(h, 2.2, 2.3, "new-a", "new-b")
    line = op.to_json()
    assert line["op"] == "list_queues" and line["listed"] == ["new-a", "new-b"]
    assert ClientOp.from_json(json.loads(json.dumps(line))) == op
    assert "listed" not in _list(h, 3.0, 3.1).to_json()


def test_a_power_cut_excuses_a_list_missing_a_create_acknowledged_just_before_it():
    h = H()
    _create(h, "new-a", 1.0, 1.1)
    _create(h, "new-b", 4.9, 5.0)
    _list(h, 6.0, 6.1)
    v = check(h.history())
    assert len(v.stale_lists) == 2
    relaxed, excused = relax_for_power_cuts(v, h.records, [5.05], 0.5)
    assert excused == 1 and [s.queue for s in relaxed.stale_lists] == ["new-a"]
