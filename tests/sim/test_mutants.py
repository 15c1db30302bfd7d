"""The simulator finds one-line mutants of the cores (sim/mutants.py).

Each mutant is a real change of a core's source, applied to a copy of the packages in a temporary
directory and run in a child process. ``python -m sim.mutants`` searches from seed 0 upward for
the first failing seed of each; ``FOUND_AT`` keeps what it found. Here each mutant runs at that
seed alone, which must fail, and the clean code runs at every such seed, which must pass: together
they prove each mutant is found within ``BOUND`` seeds and that the failure is the mutant's doing,
without paying the search. A change that moves a finding seed fails here with the command that
finds the new one.

Each mutant with no finding seed (``NOT_FOUND``: the simulator's known blind spots) is killed by
a unit test instead (``UNIT_TESTS``), checked here on a copy of the tree with the mutant applied,
so that every mutant fails this suite. Every mutant's text must still apply."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.mutants import (
    BOUND, BY_NAME, DROPPED, FOUND_AT, MUTANTS, NOT_FOUND, UNIT_TESTS, run_mutant, run_unit_test, source_of,
)


@pytest.mark.parametrize("name", [m.name for m in MUTANTS])
def test_mutant_still_applies(name):
    # the exact text occurs once: a refactor that moved it fails here, not silently
    source_of(BY_NAME[name])


@pytest.mark.parametrize("name", sorted(FOUND_AT))
def test_mutant_is_found_at_its_seed(name):
    m, seed = BY_NAME[name], FOUND_AT[name]
    assert 0 <= seed < BOUND
    [(ran, failures)] = run_mutant(m, [seed])
    assert ran == seed
    assert failures, (f"{name} ({m.breaks}) no longer fails at seed {seed}: find its first failing seed "
                      f"with `python -m sim.mutants {name}` and update FOUND_AT")


@pytest.mark.slow
def test_the_clean_code_passes_every_finding_seed():
    seeds = sorted(set(FOUND_AT.values()))
    failing = {seed: failures for seed, failures in run_mutant(None, seeds, stop_at_first=False) if failures}
    assert not failing, f"seeds that fail without any mutant, so find nothing: {failing}"


def test_the_lists_name_mutants():
    assert set(FOUND_AT) | set(NOT_FOUND) == set(BY_NAME)
    assert not set(FOUND_AT) & set(NOT_FOUND)
    assert set(UNIT_TESTS) <= set(BY_NAME)
    assert not {m.name for m, _ in DROPPED} & set(BY_NAME)


@pytest.mark.parametrize("name", sorted(UNIT_TESTS))
def test_a_unit_test_kills_the_mutant(name):
    r = run_unit_test(BY_NAME[name], UNIT_TESTS[name])
    assert r.returncode == 1, f"{UNIT_TESTS[name]} with {name} applied: exit {r.returncode}\n{r.stdout[-2000:]}"


def test_every_mutant_the_simulator_misses_has_its_unit_test():
    assert set(NOT_FOUND) <= set(UNIT_TESTS)


def test_the_simulator_page_lists_every_mutant_at_its_seed():
    page = (Path(__file__).resolve().parents[2] / "docs" / "simulator.md").read_text()
    rows = dict(re.findall(r"^\| `([\w-]+)` \|[^|]*\|[^|]*\| (\d+) \|", page, re.MULTILINE))
    assert {name: int(seed) for name, seed in rows.items()} == FOUND_AT, "docs/simulator.md's table is stale"
