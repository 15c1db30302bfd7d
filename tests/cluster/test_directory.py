"""cluster/directory.py: placements are deterministic, balanced and kept; the record holds builtins only."""

from __future__ import annotations

import io
import pickle
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.directory import Directory

SETTINGS = settings(max_examples=200, deadline=None)
KEYS = st.tuples(st.sampled_from(["us-east-1", "eu-west-1"]), st.sampled_from(["000000000000", "123456789012"]),
                 st.text(min_size=1, max_size=8))


def key(i: int, region: str = "us-east-1", account: str = "000000000000") -> tuple[str, str, str]:
    return (region, account, f"q{i}")


def test_thirty_names_created_one_after_another_fill_three_groups_evenly():
    d = Directory()
    for i in range(30):
        d.apply_place(key(i), 3)
        counts = d.counts(3)
        assert max(counts) - min(counts) <= 1, counts
    assert d.counts(3) == (10, 10, 10) and len(d) == 30


def test_a_new_key_goes_to_the_least_placed_group_ties_to_the_lowest_id():
    d = Directory()
    assert [d.apply_place(key(i), 3) for i in range(4)] == [0, 1, 2, 0]
    assert d.group_of(key(1)) == 1 and d.group_of(key(99)) is None
    # a wider cluster sends new keys to its empty groups first, lowest id first
    assert [d.apply_place(key(i), 5) for i in range(4, 7)] == [3, 4, 1]


def test_a_placed_key_keeps_its_group_and_counts_once():
    d = Directory()
    for i in range(3):
        d.apply_place(key(i), 3)
    assert d.apply_place(key(1), 3) == 1
    assert d.apply_place(key(1), 7) == 1, "not even among another number of groups"
    assert d.counts(3) == (1, 1, 1) and len(d) == 3
    assert d.apply_place(key(1, region="eu-west-1"), 3) == 0, "another region: another queue"


@SETTINGS
@given(st.lists(KEYS, max_size=60), st.integers(1, 5))
def test_members_applying_one_log_agree_and_a_repeat_keeps_the_first_group(log, groups):
    # Concurrent creates of one name commit several placements; every member applies them in
    # log order, and every one after the first answers the first one's group.
    a, b = Directory(), Directory()
    first: dict = {}
    for k in log:
        g = a.apply_place(k, groups)
        assert b.apply_place(k, groups) == g
        assert first.setdefault(k, g) == g
    assert a == b and a.to_record() == b.to_record()
    counts = a.counts(groups)
    assert sum(counts) == len(first) and max(counts) - min(counts) <= 1


@SETTINGS
@given(st.lists(KEYS, max_size=60), st.integers(1, 5))
def test_the_record_round_trips_in_placement_order(log, groups):
    d = Directory()
    for k in log:
        d.apply_place(k, groups)
    back = Directory.from_record(d.to_record())
    assert back == d and back.to_record() == d.to_record() and back.counts(groups) == d.counts(groups)
    # it goes on placing exactly as the original would
    assert back.apply_place(("r", "a", "new"), groups) == d.apply_place(("r", "a", "new"), groups)


class _BuiltinsOnly(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        raise AssertionError(f"the record pickles a class: {module}.{name}")


def test_the_record_unpickles_with_no_class_at_all():
    d = Directory()
    for i in range(5):
        d.apply_place(key(i), 2)
    data = pickle.dumps({"record": d.to_record()})    # what pysyncobj's dump holds
    assert Directory.from_record(_BuiltinsOnly(io.BytesIO(data)).load()["record"]) == d


@pytest.mark.parametrize("bad", [("r", "a"), ("r", "a", 3), "r/a/q", None, ("r", "a", "q", "x")])
def test_a_malformed_key_is_refused(bad):
    with pytest.raises(ValueError):
        Directory().apply_place(bad, 3)


def test_a_placement_needs_a_group_and_a_placed_key_never_moves():
    d = Directory()
    for groups in (0, -1, True, 2.0):
        with pytest.raises(ValueError):
            d.apply_place(key(0), groups)
    assert len(d) == 0
    d.apply_place(key(0), 2)
    d.learn(key(0), 0)
    with pytest.raises(ValueError):
        d.learn(key(0), 1)
    with pytest.raises(ValueError):
        Directory.from_record((("r", "a", "q", -1),))


def test_the_cost_of_a_placement():
    # What the module docstring says one placed name costs, for a 27-character name (the key
    # arrives unpickled from a Raft command, so its strings are fresh objects, as in the product).
    n = 5000
    keys = [pickle.loads(pickle.dumps(("us-east-1", "123456789012", f"orders-service-queue-{i:06d}")))
            for i in range(n)]
    command = pickle.dumps((1, (keys[0], 3)))     # pysyncobj's journal entry: (method id, args)
    tracemalloc.start()
    try:
        d = Directory()
        before = tracemalloc.get_traced_memory()[0]
        for k in keys:
            d.apply_place(k, 3)
        per_key_memory = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    per_key_snapshot = len(pickle.dumps({"record": d.to_record()})) / n
    assert len(command) <= 100
    assert per_key_snapshot <= 50, "region and account are written once, not per key"
    assert per_key_memory <= 120, "beside the name's own string (76 bytes), shared with the key"
