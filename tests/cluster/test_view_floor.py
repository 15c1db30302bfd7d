"""The view floor a member keeps in its state-dir (cluster/view_floor.py)."""

from __future__ import annotations

from cluster import view_floor


def test_a_first_start_has_no_floor_and_the_newest_recorded_view_is_read_back(tmp_path):
    d = str(tmp_path)
    assert view_floor.read(d) == 0
    view_floor.record(d, 3)
    view_floor.record(d, 7)
    assert view_floor.read(d) == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == [view_floor.FILE]
