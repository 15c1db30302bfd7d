"""cluster/replication/log.py: a log bounded in bytes, and the pins a state transfer holds."""

from __future__ import annotations

from cluster.replication.log import Entry, ReplicationLog


def fill(log: ReplicationLog, n: int, size: int = 100) -> None:
    for _ in range(n):
        log.append(Entry(log.last_seq + 1, 1, b"x" * size, 0))


def test_the_oldest_entries_go_once_the_log_is_over_its_bound():
    log = ReplicationLog(limit_bytes=1_000)
    fill(log, 25)
    assert log.size_bytes <= 1_000 and (log.first_seq, log.last_seq) == (16, 25)
    assert log.get(15) is None and log.get(16).seq == 16


def test_a_pin_keeps_its_entries_past_the_bound_until_released():
    log = ReplicationLog(limit_bytes=1_000, pinned_limit_bytes=5_000)
    fill(log, 10)
    holder = object()
    log.pin(holder, 5)
    fill(log, 20)
    assert log.first_seq == 5 and log.last_seq == 30, "the pinned entries stay"
    log.unpin(holder)
    assert log.first_seq == 21 and log.size_bytes <= 1_000, "released: trimmed to the bound at once"


def test_a_pin_holds_no_more_than_its_own_bound():
    """A transfer that stalls must not hold the master's memory without bound."""
    log = ReplicationLog(limit_bytes=1_000, pinned_limit_bytes=3_000)
    holder = object()
    log.pin(holder, 1)
    fill(log, 100)
    assert log.size_bytes <= 3_000 and log.first_seq == 71


def test_the_oldest_pin_counts():
    log = ReplicationLog(limit_bytes=500, pinned_limit_bytes=10_000)
    a, b = object(), object()
    fill(log, 5)
    log.pin(a, 3)
    log.pin(b, 5)
    fill(log, 20)
    assert log.first_seq == 3
    log.unpin(a)
    assert log.first_seq == 5
    log.unpin(b)
    assert log.first_seq == 21
