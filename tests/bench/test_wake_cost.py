"""bench/wake_cost.py and the replication benchmark's count of loop sleeps: the cost of a
wake-up is only worth something if each cold piece really followed a sleep and its hot twin did
not, and a loop's sleeps are only counted right if the count follows a real process."""

from __future__ import annotations

import subprocess
import sys

from bench.process_cpu import loop_sleeps
from bench.wake_cost import _cycles, measure


def test_each_cycle_sleeps_once_and_then_runs_a_cold_and_a_hot_piece():
    calls: list[str] = []
    cold, hot, sleeps = _cycles(lambda: calls.append("piece"), 20, 0.001)
    assert len(cold) == len(hot) == 20 and len(calls) == 40
    assert 0.9 <= sleeps <= 1.5, sleeps       # one sleep per cycle, the pieces themselves never sleep
    assert all(c >= 0 for c in cold + hot)


def test_measure_reports_the_penalty_per_sleep_of_the_real_piece():
    m = measure(cycles=40, sleep_s=0.001)
    assert m["sleeps_per_cycle"] >= 0.9, m
    assert m["hot_us_per_piece"] > 0 and m["cold_us_per_piece"] > 0
    assert m["penalty_us_per_wake"] is not None


def test_loop_sleeps_counts_the_main_threads_voluntary_switches():
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys, time\n[time.sleep(0.002) for _ in range(40)]\nprint('slept', flush=True)\n"
                              "sys.stdin.readline()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "slept"
        n = loop_sleeps(child.pid)
        assert n is not None and n >= 40, n
    finally:
        child.stdin.close()
        child.wait(10)
    assert loop_sleeps(child.pid) is None    # gone: no count rather than a stale one
