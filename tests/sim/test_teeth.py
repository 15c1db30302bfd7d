"""Each planted bug (cluster/plantable.py) is found within a bounded number of seeds, and the seed
that finds it passes without the bug: the failure is the bug's doing.

Each bug is a one-line change of a decision in a core: the replication core's (early-ack,
skip-sync, accept-stale-epoch), the node core's (abandon-as-success, minority-answers,
batches-unthrottled) and the election core's (no-pre-vote). These are 20-second scenarios with
strict checking (in-window duplicates and lost deletes count)."""

from __future__ import annotations

import pytest

from cluster.plantable import PLANTABLE_BUGS
from sim import generate, simulate

DURATION = 20.0
# ack-before-fsync is found last: seed 38 until its scenario played the `turn` rare path, 59 since
BOUND = 64

EXPECTED = {
    # what each bug breaks first, as the checker reports it
    "early-ack": ("lost", "lost deletes", "in-window", "order"),
    "skip-sync": ("lost", "lost deletes", "in-window", "order", "divergence"),
    "accept-stale-epoch": ("divergence", "lost", "order", "in-window", "lost deletes"),
    "abandon-as-success": ("lost", "lost deletes", "in-window", "order"),
    "minority-answers": ("gating",),
    "batches-unthrottled": ("flow control",),
    "no-pre-vote": ("terms", "pre-vote", "heal", "disruption"),
    "ack-before-fsync": ("lost", "lost deletes", "order", "durability"),
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
