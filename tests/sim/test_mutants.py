"""The simulator finds one-line mutants of the cores (sim/mutants.py).

Each mutant is a real change of a core's source, applied to a copy of the packages in a temporary
directory and run in a child process: the search goes from seed 0 upward and stops at the first
failing seed (deterministic, so a mutant found early costs a few seeds), within ``BOUND``. The
seed that found it must pass on the clean copy: the failure is the mutant's doing.

Not searched here: ``SLOW`` (found, but after more seeds than this suite affords) and
``NOT_FOUND`` (no failing seed within ``BOUND``: the simulator's known blind spots, each with
why). ``python -m sim.mutants`` runs them all; docs/simulator.md has the measured table.
Each of those is killed by a unit test instead (``UNIT_TESTS``), checked here on a copy of the
tree with the mutant applied, so that every mutant fails this suite. Every mutant's text must
still apply, those included."""

from __future__ import annotations

import pytest

from sim.mutants import (
    BOUND, BY_NAME, DROPPED, MUTANTS, NOT_FOUND, SLOW, UNIT_TESTS, clean_failures, first_failing, run_unit_test,
    source_of,
)

SEARCHED = [m.name for m in MUTANTS if m.name not in SLOW and m.name not in NOT_FOUND]


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_mutant_still_applies(name):
    # the exact text occurs once: a refactor that moved it fails here, not silently
    source_of(BY_NAME[name])


@pytest.mark.parametrize("name", SEARCHED)
def test_mutant_is_found_within_the_bound(name):
    m = BY_NAME[name]
    found = first_failing(m, BOUND)
    assert found is not None, f"{name} ({m.breaks}): no failing seed among the first {BOUND}"
    seed, failures = found
    clean = clean_failures(seed)   # from a copy of the same tree, run the same way
    assert not clean, f"seed {seed} fails without {name} too: {clean}"


def test_the_lists_name_mutants():
    assert set(SLOW) <= set(BY_NAME) and set(NOT_FOUND) <= set(BY_NAME)
    assert not set(SLOW) & set(NOT_FOUND)
    assert not {m.name for m, _ in DROPPED} & set(BY_NAME)
    assert len(SEARCHED) >= 10


@pytest.mark.parametrize("name", sorted(UNIT_TESTS))
def test_a_unit_test_kills_each_mutant_not_searched_here(name):
    r = run_unit_test(BY_NAME[name], UNIT_TESTS[name])
    assert r.returncode == 1, f"{UNIT_TESTS[name]} with {name} applied: exit {r.returncode}\n{r.stdout[-2000:]}"


def test_every_mutant_not_searched_here_has_its_unit_test():
    assert set(SLOW) | set(NOT_FOUND) <= set(UNIT_TESTS) <= set(BY_NAME)
