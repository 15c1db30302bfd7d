"""SyncCoordinator's own position in its quorum (sync.py, step 3): from the start by default, and
from ``counts_self_from_ms`` for a replication group's master held by its sync guard
(cluster/group_lease.py)."""

from __future__ import annotations

from storage import IdSource, ManualClock, Storage

from cluster.replication.log import ReplicationLog
from cluster.replication.messages import Send, Synced, SyncRequest, SyncStatus
from cluster.replication.sync import SyncCoordinator

THREE = ("n1", "n2", "n3")
FIVE = ("n1", "n2", "n3", "n4", "n5")


def _sync(members=THREE, **kw) -> SyncCoordinator:
    return SyncCoordinator("n1", 5, members, Storage(ManualClock(0), IdSource(1)), ReplicationLog(),
                           configured=len(members), retry_ms=100, **kw)


def _synced(actions) -> bool:
    return any(isinstance(a, Synced) for a in actions)


def test_by_default_our_own_position_counts_from_the_start():
    sync = _sync()
    assert sync.start(0) == [Send("n2", SyncRequest(5)), Send("n3", SyncRequest(5))]
    assert _synced(sync.on_frame("n2", SyncStatus(5, 0, 0, 1), 10)), "n1 + n2 are a majority of three"


def test_held_our_own_position_counts_only_from_then():
    sync = _sync(counts_self_from_ms=1_000)
    sync.start(0)
    assert sync.on_frame("n2", SyncStatus(5, 0, 0, 1), 10) == [], "n2 alone is no majority of three"
    assert sync.on_tick(999) == [Send("n3", SyncRequest(5))], "still collecting: n3 is asked again"
    assert _synced(sync.on_tick(1_000)), "the first tick from then decides"


def test_an_answer_after_then_decides_with_our_own_position():
    sync = _sync(counts_self_from_ms=1_000)
    sync.start(0)
    assert _synced(sync.on_frame("n2", SyncStatus(5, 0, 0, 1), 1_010))


def test_held_a_majority_without_us_still_decides():
    sync = _sync(counts_self_from_ms=1_000)
    sync.start(0)
    assert sync.on_frame("n2", SyncStatus(5, 0, 0, 1), 10) == []
    assert _synced(sync.on_frame("n3", SyncStatus(5, 0, 0, 1), 20))


def test_held_our_own_position_counts_as_an_amnesiac_one_once_every_member_answered():
    sync = _sync(FIVE, counts_self_from_ms=1_000)
    sync.start(0)
    assert sync.on_frame("n2", SyncStatus(5, 0, 0, 1), 10) == []
    assert sync.on_frame("n3", SyncStatus(5, 0, 0, 1), 10) == [], "n2 + n3: a majority of five only with us"
    assert sync.on_frame("n4", SyncStatus(5, 0, 0, 1, amnesiac=True), 10) == []
    assert _synced(sync.on_frame("n5", SyncStatus(5, 0, 0, 1, amnesiac=True), 10)), "everyone answered"
