"""Same seed, same history, byte for byte, in this process and in another one with another hash
seed (nothing may depend on set iteration order or the wall clock)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from sim import generate, simulate

SEED = 11
DURATION = 8.0


def _digest(history: str) -> str:
    return hashlib.sha256(history.encode()).hexdigest()


def test_same_seed_gives_the_same_history_byte_for_byte():
    a = simulate(generate(SEED, duration=DURATION))
    b = simulate(generate(SEED, duration=DURATION))
    assert a.history == b.history
    assert a.stats["ops"] > 50 and a.stats["lines"] > 100, "a run that does something"
    assert a.scenario.faults, "with faults in it"


def test_another_process_with_another_hash_seed_gives_the_same_history():
    here = _digest(simulate(generate(SEED, duration=DURATION)).history)
    code = (f"import hashlib; from sim import generate, simulate; "
            f"print(hashlib.sha256(simulate(generate({SEED}, duration={DURATION})).history.encode()).hexdigest())")
    for hash_seed in ("1", "4242"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == here, f"PYTHONHASHSEED={hash_seed} changed the history"


def test_different_seeds_give_different_scenarios_and_histories():
    a, b = generate(1, duration=DURATION), generate(2, duration=DURATION)
    assert a.dumps() != b.dumps()
    assert simulate(a).history != simulate(b).history


def test_a_scenario_round_trips_through_json():
    from sim.scenario import Scenario

    sc = generate(5, nodes=None, policy=None, bugs=("early-ack",))
    again = Scenario.from_json(sc.to_json())
    assert again == sc and again.dumps() == sc.dumps()
