"""One group's mastery on one node (cluster/group_mastery.py): the group lease and the sync guard
(cluster/group_lease.py) bound to the view's assignment, the beats and the held sync requests."""

from __future__ import annotations

from cluster.config import Timing
from cluster.group_mastery import GroupMastery
from cluster.replication.messages import Batch, GroupBeat, GroupBeatAck, Released, SyncRequest

T = Timing()
MEMBERS = ("n1", "n2", "n3")


def mastery(name: str, following: tuple[str | None, int] = (None, 0), started: float = 0.0) -> GroupMastery:
    m = GroupMastery(name, 1, MEMBERS, T, started)
    state = {"following": following}
    m.follow(lambda: state["following"])
    m.state = state     # type: ignore[attr-defined]  (the test moves what the replica follows)
    return m


def active_master(now: float = 1.0) -> GroupMastery:
    """n1, master of the group in epoch 2, synced, its lease acked by n2."""
    m = mastery("n1", ("n1", 2))
    m.install("n1", 2, now, 1)
    m.opened(2)
    beats = m.tick(now)
    assert sorted(to for to, _ in beats) == ["n2", "n3"]
    beat = beats[0][1]
    assert m.on_frame("n2", GroupBeatAck(2, beat.stamp_us), now) == (True, [])
    assert m.active(now)
    return m


def test_the_master_is_active_from_its_sync_and_a_majority_acked_beat_until_the_lease_runs_out():
    m = active_master(1.0)
    assert m.active(1.0 + T.lease - 0.001)
    assert not m.active(1.0 + T.lease)
    assert "lease expired" in m.reason(1.0 + T.lease, True, None)
    assert m.inactive_since(1.0 + T.lease + 5) == 1.0 + T.lease


def test_not_active_before_its_sync_for_the_epoch_finished():
    m = mastery("n1", ("n1", 2))
    m.install("n1", 2, 1.0, 1)
    beat = m.tick(1.0)[0][1]
    m.on_frame("n2", GroupBeatAck(2, beat.stamp_us), 1.0)
    assert not m.active(1.0) and "synchronising" in m.reason(1.0, False, None)
    m.opened(2)
    assert m.active(1.0)


def test_an_old_master_asked_by_a_newer_epochs_sync_gives_the_group_up_before_it_answers():
    m = active_master(1.0)
    handled, sends = m.on_frame("n3", SyncRequest(3), 1.05)
    # its own guard lets it answer at once (it acked no beat of its own), and it answers only
    # as a member that gave the old epoch up, in the same step
    assert (handled, sends) == (False, [])
    assert not m.active(1.05)
    assert m.tick(1.2) == []                        # and it beats no more


def test_a_view_that_moves_the_group_away_ends_the_old_masters_epoch():
    m = active_master(1.0)
    m.install("n2", 3, 1.05, 2)
    assert not m.active(1.05) and m.master == "n2"


def test_a_member_acks_only_the_beats_of_the_master_it_follows_and_hears_it():
    m = mastery("n2", ("n1", 2))
    assert not m.heard_master(1.0)
    assert m.on_frame("n1", GroupBeat(2, 1_000_000), 1.0) == (True, [("n1", GroupBeatAck(2, 1_000_000))])
    assert m.heard_master(1.0 + T.election_min)
    assert not m.heard_master(1.0 + T.election_min + T.heartbeat)
    assert m.on_frame("n3", GroupBeat(2, 1_000_000), 1.0) == (True, [])    # not its master
    assert m.on_frame("n1", GroupBeat(1, 1_000_000), 1.0) == (True, [])    # not its epoch


def test_a_newer_epochs_sync_is_held_until_the_guard_lets_it_through_then_released_by_due():
    m = mastery("n2", ("n1", 2))
    m.on_frame("n1", GroupBeat(2, 5_000_000), 5.0)
    req = SyncRequest(3)
    assert m.on_frame("n3", req, 5.01) == (True, [])
    assert m.due(5.0 + T.vote_guard - 0.001) == []
    assert m.due(5.0 + T.vote_guard) == [("n3", req)]
    assert m.due(5.0 + T.vote_guard) == []
    # once held, the member acks the old epoch no more
    assert m.on_frame("n1", GroupBeat(2, 5_100_000), 5.1) == (True, [])


def test_a_release_from_the_old_master_lets_the_sync_through_at_once():
    m = mastery("n2", ("n1", 2))
    m.on_frame("n1", GroupBeat(2, 5_000_000), 5.0)
    assert m.on_frame("n1", Released(2), 5.01) == (True, [])
    assert m.on_frame("n3", SyncRequest(3), 5.02) == (False, [])


def test_startup_quiet_holds_every_sync_request():
    m = mastery("n2", ("n1", 2), started=10.0)
    assert m.on_frame("n1", SyncRequest(2), 10.01) == (True, [])
    assert m.due(10.0 + T.vote_guard) == [("n1", SyncRequest(2))]


def test_other_frames_pass_to_the_replication_core():
    m = mastery("n2", ("n1", 2))
    assert m.on_frame("n1", Batch(2, 1, 2, b""), 1.0) == (False, [])


def test_a_restarted_node_does_not_master_a_slot_a_view_of_its_earlier_life_assigned():
    # view 4 is the newest in its durable Raft log: it may have mastered (1, epoch 2) before
    m = GroupMastery("n1", 1, MEMBERS, T, 0.0, view_floor=4)
    m.follow(lambda: ("n1", 2))
    m.install("n1", 2, 1.0, view_id=3)
    m.opened(2)
    assert m.stale and not m.active(1.0) and m.tick(1.0) == []
    # a later view that keeps the slot keeps it stale: it was assigned in view 3
    m.install("n1", 2, 1.1, view_id=6)
    assert m.stale
    # a slot a later view assigns (a new epoch) it masters
    m.install("n1", 3, 1.2, view_id=7)
    assert not m.stale
    beat = m.tick(1.2)[0][1]
    m.on_frame("n2", GroupBeatAck(3, beat.stamp_us), 1.2)
    m.opened(3)
    assert m.active(1.2)
