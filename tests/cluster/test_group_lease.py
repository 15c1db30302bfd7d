"""A replication group's lease and sync guard (cluster/group_lease.py), clause by clause, and a
randomized replay of the module's proof: under random delays, losses, pauses, restarts and
clock drift within rho, a group's new master never finishes its sync while the old master's
lease is unexpired."""

from __future__ import annotations

import heapq
import random

import pytest

from storage import IdSource, ManualClock, Storage

from cluster.config import Timing
from cluster.group_lease import GroupLease, SyncGuard
from cluster.replication.log import ReplicationLog
from cluster.replication.messages import GroupBeat, GroupBeatAck, Send, Synced, SyncRequest, SyncStatus
from cluster.replication.sync import SyncCoordinator

D = Timing().lease
GD = Timing().vote_guard
THREE = frozenset({"m", "a", "b"})
FIVE = frozenset({"m", "a", "b", "c", "d"})


# --- the master's side ----------------------------------------------------------------------

def _lease(members: frozenset[str] = THREE, epoch: int = 4) -> GroupLease:
    lease = GroupLease("m", members, D)
    lease.start(epoch)
    return lease


def test_the_lease_runs_from_the_newest_stamp_a_majority_acked_the_master_counted():
    lease = _lease(FIVE)
    b1 = lease.beat(10.0)
    b2 = lease.beat(10.05)
    assert b1 == GroupBeat(4, 10_000_000) and b2 == GroupBeat(4, 10_050_000)
    assert not lease.active(10.0), "nothing acked: no lease"
    lease.on_ack("a", GroupBeatAck(4, b2.stamp_us), 10.06)
    assert lease.expiry() is None, "m + a are no majority of five"
    lease.on_ack("b", GroupBeatAck(4, b1.stamp_us), 10.07)
    assert lease.expiry() == pytest.approx(10.0 + D), "m + a + b, resting on b's older stamp"
    lease.on_ack("c", GroupBeatAck(4, b2.stamp_us), 10.08)
    assert lease.expiry() == pytest.approx(10.05 + D)
    assert lease.active(10.05 + D - 0.001) and not lease.active(10.05 + D)


def test_a_paused_master_gains_nothing_from_the_acks_that_queued_up():
    lease = _lease()
    beat = lease.beat(1.0)
    # SIGSTOP at 1.0; the acks arrive while it is stopped and are read at 5.0
    assert lease.on_ack("a", GroupBeatAck(4, beat.stamp_us), 5.0)
    assert lease.expiry() == pytest.approx(1.0 + D)
    assert not lease.active(5.0), "stamps count, not arrival times"


def test_stale_acks_never_move_the_lease_back():
    lease = _lease()
    old, new = lease.beat(1.0), lease.beat(1.1)
    lease.on_ack("a", GroupBeatAck(4, new.stamp_us), 1.12)
    lease.on_ack("a", GroupBeatAck(4, old.stamp_us), 1.13)   # reordered on the way
    assert lease.expiry() == pytest.approx(1.1 + D)


def test_acks_of_another_epoch_count_for_nothing():
    lease = _lease(epoch=4)
    beat = lease.beat(1.0)
    assert not lease.on_ack("a", GroupBeatAck(3, beat.stamp_us), 1.01), "an older epoch's ack"
    assert not lease.on_ack("a", GroupBeatAck(5, beat.stamp_us), 1.01)
    assert lease.expiry() is None
    lease.start(5)
    assert not lease.on_ack("a", GroupBeatAck(5, beat.stamp_us), 1.02), "a stamp not sent in epoch 5"
    assert lease.expiry() is None


def test_an_ack_of_a_stamp_never_sent_counts_for_nothing():
    # A previous process's beat, stamped by a monotonic clock that a reboot has since reset.
    lease = _lease()
    lease.beat(1.0)
    assert not lease.on_ack("a", GroupBeatAck(4, 900_000_000), 1.01)
    assert lease.expiry() is None


def test_stamps_round_down_so_none_is_later_than_its_sending():
    lease = _lease()
    assert lease.beat(2.0000019).stamp_us == 2_000_001


def test_abdicating_is_for_good_in_that_epoch():
    lease = _lease(epoch=4)
    beat = lease.beat(1.0)
    lease.on_ack("a", GroupBeatAck(4, beat.stamp_us), 1.01)
    assert lease.active(1.02)
    lease.abdicate(4)
    assert not lease.active(1.02) and lease.expiry() is None and lease.beat(1.03) is None
    lease.start(4)
    assert lease.beat(1.04) is None and not lease.active(1.04), "the same epoch never comes back"
    lease.start(5)
    beat = lease.beat(1.05)
    lease.on_ack("b", GroupBeatAck(5, beat.stamp_us), 1.06)
    assert lease.active(1.07), "a newer epoch may be held again"


def test_a_lone_member_holds_its_group():
    lease = _lease(frozenset({"m"}))
    assert lease.active(1.0)
    assert GroupLease("m", frozenset({"m"}), D).expiry() is None, "but not before an epoch starts"


# --- the member's side ----------------------------------------------------------------------

class Follows:
    """The replica's (master, epoch), as the guard reads it."""

    def __init__(self, master: str | None, epoch: int) -> None:
        self.master, self.epoch = master, epoch

    def __call__(self) -> tuple[str | None, int]:
        return self.master, self.epoch


def _guard(master: str | None = "m", epoch: int = 4, started_at: float = 0.0) -> tuple[SyncGuard, Follows]:
    follows = Follows(master, epoch)
    return SyncGuard(GD, started_at, follows), follows


def test_a_member_acks_only_the_master_it_follows_in_the_epoch_it_adopted():
    guard, _ = _guard("m", 4)
    assert guard.on_beat(10.0, "m", 4, 123) == GroupBeatAck(4, 123)
    assert guard.on_beat(10.0, "x", 4, 124) is None, "not the master it follows"
    assert guard.on_beat(10.0, "m", 3, 125) is None, "an older epoch"
    assert guard.on_beat(10.0, "m", 5, 126) is None, "an epoch not adopted yet"


def test_a_member_that_knows_a_newer_epoch_acks_no_more():
    guard, _ = _guard("m", 4)
    guard.knows_newer(5)
    assert guard.on_beat(10.0, "m", 4, 1) is None


def test_a_newer_epochs_sync_is_held_until_gd_after_the_last_ack():
    guard, _ = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    guard.on_beat(10.05, "m", 4, 2)
    assert guard.due_at(5) == pytest.approx(10.05 + GD), "the contact is recorded with the ack"
    assert not guard.may_answer(10.05 + GD - 0.001, 5)
    assert guard.may_answer(10.05 + GD, 5)
    assert guard.self_count_from_ms(5) == 10_230, "the new master's own count, in ms rounded up"


def test_the_acks_of_an_epoch_do_not_hold_back_its_own_sync():
    # A member adopted epoch 5 from the view and acks its master; its sync request then holds
    # only for the acks of epoch 4 before.
    guard, follows = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    follows.master, follows.epoch = "c", 5
    guard.knows_newer(5)
    guard.on_beat(10.1, "c", 5, 2)
    assert guard.due_at(5) == pytest.approx(10.0 + GD), "held for epoch 4's ack: the view answered nothing"
    assert guard.due_at(6) == pytest.approx(10.1 + GD)


def test_startup_quiet():
    guard, _ = _guard(started_at=50.0)
    assert guard.due_at(5) == pytest.approx(50.0 + GD), "acks before the restart are forgotten, not gone"
    assert not guard.may_answer(50.1, 5) and guard.may_answer(50.0 + GD, 5)


def test_a_release_from_the_master_followed_in_that_epoch_lifts_the_guard():
    guard, _ = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    guard.released("m", 4)
    assert guard.may_answer(10.01, 5)
    assert guard.on_beat(10.02, "m", 4, 2) is None, "a released epoch is acked no more"


def test_a_release_from_anyone_else_lifts_nothing():
    guard, _ = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    guard.released("x", 4)                       # not the master of epoch 4
    guard.released("m", 3)                       # not the epoch we followed m in
    assert guard.due_at(5) == pytest.approx(10.0 + GD)
    assert guard.on_beat(10.01, "m", 4, 2) is not None


def test_a_release_lifts_only_its_own_epochs_acks():
    # Acked m in 4, then adopted 5 from the view, acked c, and c released 5: the acks of 4
    # still hold a sync of 6 back.
    guard, follows = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    follows.master, follows.epoch = "c", 5
    guard.on_beat(10.05, "c", 5, 2)
    guard.released("c", 5)
    assert guard.due_at(6) == pytest.approx(10.0 + GD)


def test_a_release_before_any_ack_stops_the_acks_and_lifts_nothing_older():
    guard, follows = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    follows.master, follows.epoch = "c", 5
    guard.released("c", 5)
    assert guard.on_beat(10.01, "c", 5, 2) is None
    assert guard.due_at(6) == pytest.approx(10.0 + GD)


def test_the_release_still_counts_once_the_member_follows_the_next_master():
    guard, follows = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    follows.master, follows.epoch = "c", 5       # it answered c's sync at once, through the view
    guard.released("m", 4)                       # m's release came after
    assert guard.may_answer(10.01, 6)


def test_old_acks_are_forgotten_once_they_hold_nothing_back():
    guard, follows = _guard("m", 4)
    guard.on_beat(10.0, "m", 4, 1)
    follows.master, follows.epoch = "c", 5
    guard.on_beat(11.0, "c", 5, 2)
    assert guard.due_at(5) == pytest.approx(GD), "epoch 4's ack ran out: only the start remains"


# --- the proof, replayed --------------------------------------------------------------------

class Replay:
    """One group moving from master m (epoch 1) to c (epoch 2) in a cluster of ``n``.

    Real time drives an event heap; every node reads its own clock, offset and drifting within
    rho. The network delays, reorders and drops every frame, often cuts c's requests to m (m
    keeps its members and does not hear of epoch 2) and sometimes m's beats to other members
    (they answer c at once, and c's own acks carry m's lease); m may pause; members may restart;
    members may adopt epoch 2 from the view before c's sync request reaches them; m may hand
    over (abdicate, then Released). ``violations`` lists every real time at which c had
    finished its sync while m's lease was unexpired on m's clock."""

    H = 0.05

    def __init__(self, seed: int, *, lease: float, guard: float, rho: float, self_guarded: bool = True,
                 release_abdicates: bool = True, guards_adopted: bool = True) -> None:
        rng = self.rng = random.Random(seed)
        self.self_guarded, self.release_abdicates = self_guarded, release_abdicates
        self.guards_adopted = guards_adopted
        n = rng.choice((3, 5))
        self.names = [f"n{i}" for i in range(n)]
        self.m, self.c = self.names[0], rng.choice(self.names[1:])
        self.guard_s, self.rho = guard, rho
        self.loss = rng.choice((0.0, 0.1, 0.3))
        self.max_delay = rng.choice((0.002, 0.03, 0.12))
        self.cut = {(self.c, self.m)} if rng.random() < 0.7 else set()
        self.cut |= {(self.m, name) for name in self.names[1:] if name != self.c and rng.random() < 0.3}
        self.clocks = {name: (rng.uniform(0, 1000), self._rate()) for name in self.names}
        self.lease = GroupLease(self.m, frozenset(self.names), lease)
        self.lease.start(1)
        self.follows = {name: Follows(self.m, 1) for name in self.names}
        self.guards = {name: SyncGuard(guard, self.clock(name, 0.0) - 10, self.follows[name]) for name in self.names}
        self.paused_until = 0.0
        self.held: set[str] = set()
        self.sync: SyncCoordinator | None = None
        self.synced_at: float | None = None
        self.violations: list[float] = []
        self._heap: list[tuple[float, int, object]] = []
        self._n = 0

    def _rate(self) -> float:
        lo, hi = 1 / (1 + self.rho), 1 / (1 - self.rho)
        return self.rng.choice((lo, hi, self.rng.uniform(lo, hi)))

    def clock(self, name: str, t: float) -> float:
        offset, rate = self.clocks[name]
        return offset + rate * t

    def real(self, name: str, local: float) -> float:
        offset, rate = self.clocks[name]
        return (local - offset) / rate

    def at(self, t: float, fn) -> None:
        self._n += 1
        heapq.heappush(self._heap, (t, self._n, fn))

    def send(self, t: float, sender: str, to: str, fn) -> None:
        if (sender, to) not in self.cut and self.rng.random() >= self.loss:
            self.at(t + self.rng.uniform(0, self.max_delay), lambda now: self.on_node(to, now, fn))

    def on_node(self, name: str, now: float, fn) -> None:
        if name == self.m and now < self.paused_until:
            self.at(self.paused_until, fn)   # read when it resumes
        else:
            fn(now)

    def run(self) -> "Replay":
        rng = self.rng
        switch = rng.uniform(0.05, 1.0)
        self.at(0.0, self.beat)
        if rng.random() < 0.5:
            start = rng.uniform(0, switch + 0.3)
            self.at(start, lambda now: setattr(self, "paused_until", now + rng.uniform(0.05, 0.6)))
        for name in self.names[1:]:
            if name != self.c and rng.random() < 0.4:      # it applies the view, maybe before c's request
                self.at(switch + rng.uniform(-0.02, 0.1), lambda now, n=name: self.view(n))
            if rng.random() < 0.15:
                self.at(rng.uniform(0, switch + 0.5), lambda now, n=name: self.restart(n, now))
        if rng.random() < 0.3:
            self.at(rng.uniform(0, switch), self.hand_over)
        self.at(switch, self.take_office)
        while self._heap:
            now, _, fn = heapq.heappop(self._heap)
            if now > switch + 3.0:
                break
            fn(now)
            if self.synced_at is not None and self.lease.active(self.clock(self.m, now)):
                self.violations.append(now)
        return self

    # m's side
    def beat(self, now: float) -> None:
        if now < self.paused_until:
            self.at(self.paused_until, self.beat)
            return
        beat = self.lease.beat(self.clock(self.m, now))
        if beat is None:
            return
        for name in self.names[1:]:
            self.send(now, self.m, name, lambda t, n=name, b=beat: self.member_beat(n, t, b))
        self.at(self.real(self.m, self.clock(self.m, now) + self.H), self.beat)

    def hand_over(self, now: float) -> None:
        self.on_node(self.m, now, self._release)

    def _release(self, now: float) -> None:
        if self.release_abdicates:
            self.lease.abdicate(1)
        for name in self.names[1:]:
            self.send(now, self.m, name, lambda t, n=name: self.guards[n].released(self.m, 1))

    # the members' side
    def member_beat(self, name: str, now: float, beat: GroupBeat) -> None:
        ack = self.guards[name].on_beat(self.clock(name, now), self.m, beat.epoch, beat.stamp_us)
        if ack is not None:
            self.send(now, name, self.m, lambda t: self.lease.on_ack(name, ack, self.clock(self.m, t)))

    def view(self, name: str) -> None:
        self.follows[name].master, self.follows[name].epoch = self.c, 2
        self.guards[name].knows_newer(2)

    def restart(self, name: str, now: float) -> None:
        # Its memory is gone; it comes back under the newest view it had applied (durable Raft).
        self.guards[name] = SyncGuard(self.guard_s, self.clock(name, now), self.follows[name])
        self.held.discard(name)

    def sync_request(self, name: str, now: float, frame: SyncRequest) -> None:
        if name == self.m:
            self.lease.abdicate(1)                         # abdicate, then answer: one step
            self.answer(name, now, frame)
            return
        guard = self.guards[name]
        guard.knows_newer(frame.epoch)
        adopted = self.follows[name].epoch == frame.epoch and not self.guards_adopted
        if adopted or guard.may_answer(self.clock(name, now), frame.epoch):
            self.held.discard(name)
            self.follows[name].master, self.follows[name].epoch = self.c, frame.epoch
            self.answer(name, now, frame)
        elif name not in self.held:
            self.held.add(name)
            due = self.real(name, guard.due_at(frame.epoch))
            self.at(max(due, now) + 1e-9, lambda t: self.answer_held(name, t, frame))

    def answer_held(self, name: str, now: float, frame: SyncRequest) -> None:
        self.held.discard(name)
        self.sync_request(name, now, frame)

    def answer(self, name: str, now: float, frame: SyncRequest) -> None:
        status = SyncStatus(frame.epoch, 0, 0, 1)
        self.send(now, name, self.c, lambda t: self.c_actions(t, self.sync.on_frame(name, status, self.c_ms(t))))

    # c's side
    def c_ms(self, now: float) -> int:
        return int(self.clock(self.c, now) * 1000)

    def take_office(self, now: float) -> None:
        self.view(self.c)
        own = self.guards[self.c].self_count_from_ms(2) if self.self_guarded else None
        self.sync = SyncCoordinator(self.c, 2, tuple(self.names), Storage(ManualClock(0), IdSource(1)),
                                    ReplicationLog(), configured=len(self.names), retry_ms=100,
                                    counts_self_from_ms=own)
        self.c_actions(now, self.sync.start(self.c_ms(now)))
        self.tick(now)

    def tick(self, now: float) -> None:
        if self.synced_at is None:
            self.c_actions(now, self.sync.on_tick(self.c_ms(now)))
            self.at(self.real(self.c, self.clock(self.c, now) + 0.01), self.tick)

    def c_actions(self, now: float, actions: list) -> None:
        for a in actions:
            if isinstance(a, Synced) and self.synced_at is None:
                self.synced_at = now
            elif isinstance(a, Send):
                self.send(now, self.c, a.to, lambda t, to=a.to, f=a.frame: self.sync_request(to, t, f))


TIGHT = dict(lease=0.15, rho=0.05, guard=0.15 * 1.05 / 0.95 + 0.001)   # D(1+rho) just under Gd(1-rho)


def test_a_new_master_never_syncs_while_the_old_lease_runs():
    synced = 0
    for seed in range(2000):
        replay = Replay(seed, **TIGHT).run()
        assert not replay.violations, f"seed {seed}: c synced while m's lease ran, at {replay.violations[:3]}"
        synced += replay.synced_at is not None
    assert synced > 1900, "the replays must mostly reach the new master's sync"


@pytest.mark.parametrize("broken", [
    {"guard": 0.0},                        # members answer at once
    {"guard": 0.16},                       # D(1+rho) > Gd(1-rho), by 0.6 ms
    {"self_guarded": False},               # the new master counts itself from the start
    {"release_abdicates": False},          # Released sent by a master still active
    {"guards_adopted": False},             # a request of the epoch the view already adopted passes
], ids=["no-guard", "guard-under-the-bound", "self-counted-at-once", "release-without-abdicating",
        "adopted-epoch-unguarded"])
def test_the_replay_finds_the_overlap_when_a_clause_is_broken(broken):
    assert any(Replay(seed, **{**TIGHT, **broken}).run().violations for seed in range(2000))
