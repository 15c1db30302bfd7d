"""The flow-control judge (sim/flow_control.py) on hand-built observations of a master: the lags
of the replicas it counts at each core tick, and its releases."""

from __future__ import annotations

from sim.flow_control import FlowControlCheck, Lag

BATCHES, MS = 30, 300


def lag(batches: int = 0, ms: int = 0, fresh: int = 0) -> list[Lag]:
    return [Lag("n2", batches, fresh, ms)]


def test_a_master_that_throttles_when_a_replica_lags_beyond_the_time_bound_passes():
    check = FlowControlCheck(BATCHES, MS)
    check.ticked("n1", 1.00, False, lag(ms=250))
    check.ticked("n1", 1.05, True, lag(ms=301))      # engaged at the tick that saw it
    check.ticked("n1", 1.10, True, lag(ms=200))      # within the bound, not within half: held
    check.released("n1", 1.12, lag(ms=100))          # within half of both: released
    check.ticked("n1", 1.15, False, lag(ms=40))
    assert check.failures == []
    assert check.over_ms == 1


def test_a_master_that_does_not_throttle_past_the_time_bound_fails():
    # the lag counted in seconds (0 s) never reaches 300
    check = FlowControlCheck(BATCHES, MS)
    check.ticked("n1", 1.05, False, lag(ms=418))
    assert check.failures == ["throttling: n1 does not throttle producers at 1.050000 s while n2 lags 418 ms "
                              "(bound 300)"]


def test_the_batch_bound_counts_too_but_not_the_batches_cut_in_this_millisecond():
    check = FlowControlCheck(BATCHES, MS)
    check.ticked("n1", 1.00, False, lag(batches=31, fresh=1))   # the tick's own flush cut one
    assert check.failures == []
    check.ticked("n1", 1.05, False, lag(batches=31))
    assert check.failures == ["throttling: n1 does not throttle producers at 1.050000 s while n2 lags 31 "
                              "batches (bound 30)"]


def test_a_release_while_a_replica_lags_beyond_half_a_bound_fails():
    check = FlowControlCheck(BATCHES, MS)
    check.released("n1", 2.0, lag(batches=3, ms=151))
    assert check.failures == ["throttling: n1 stopped throttling producers at 2.000000 s while n2 lags 151 ms "
                              "(half the bound is 150)"]


def test_a_release_on_losing_the_master_role_passes():
    check = FlowControlCheck(BATCHES, MS)
    check.released("n1", 2.0, None)
    check.ticked("n1", 2.05, False, None)
    assert check.failures == []


def test_a_throttle_held_two_ticks_with_every_replica_within_half_fails():
    check = FlowControlCheck(BATCHES, MS)
    check.ticked("n1", 3.00, True, lag(ms=100))      # the release may come in the next decision
    assert check.failures == []
    check.ticked("n1", 3.05, True, lag(ms=120))
    assert check.failures == ["throttling: n1 still throttles producers at 3.050000 s with every replica "
                              "within half the bounds since its last tick"]


def test_only_counted_replicas_matter_and_a_non_master_never_throttles():
    check = FlowControlCheck(BATCHES, MS)
    check.ticked("n1", 1.0, False, [])               # every replica unreachable: nothing slowed
    assert check.failures == []
    check.ticked("n2", 1.0, True, None)
    assert check.failures == ["throttling: n2 throttles producers at 1.000000 s without being the master"]
