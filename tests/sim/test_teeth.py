"""Each planted bug (cluster.replication.core.PLANTABLE_BUGS) is found within a bounded number of
seeds, and the seed that finds it passes without the bug: the failure is the bug's doing.

The bound leaves room: over 40-seed samples the three bugs failed 37%, 17% and 17% of the seeds
of these 20-second scenarios (strict checking: in-window duplicates and lost deletes count)."""

from __future__ import annotations

import pytest

from cluster.plantable import PLANTABLE_BUGS
from sim import generate, simulate

DURATION = 20.0
BOUND = 40

EXPECTED = {
    # what each bug breaks first, as the checker reports it
    "early-ack": ("lost", "lost deletes", "in-window", "order"),
    "skip-sync": ("lost", "lost deletes", "in-window", "order", "divergence"),
    "accept-stale-epoch": ("divergence", "lost", "order", "in-window", "lost deletes"),
}


def first_failing(bug: str) -> tuple[int, list[str]] | None:
    for seed in range(BOUND):
        r = simulate(generate(seed, duration=DURATION, bugs=(bug,)), strict=True)
        if not r.ok:
            return seed, r.failures
    return None


@pytest.mark.parametrize("bug", sorted(PLANTABLE_BUGS))
def test_planted_bug_is_found_within_the_bound(bug):
    found = first_failing(bug)
    assert found is not None, f"{bug}: no failing seed among the first {BOUND}"
    seed, failures = found
    assert any(f.startswith(EXPECTED[bug]) for f in failures), failures
    clean = simulate(generate(seed, duration=DURATION), strict=True)
    assert clean.ok, f"seed {seed} fails without {bug} too: {clean.failures}"


def test_every_plantable_bug_has_a_test():
    assert set(EXPECTED) == set(PLANTABLE_BUGS)
