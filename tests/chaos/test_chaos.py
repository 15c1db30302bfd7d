"""Every chaos scenario once, on its short schedule (the part ``make test`` runs).

The thirteen scenarios run on five clusters (tests/chaos/scenarios.py SHORT_SUITE): the
partition stories of three nodes in a row on one cluster (flapping last), those of five on
another, kill -9 and SIGSTOP of the master on a third, the two state transfer stories on a
fourth, healing in between, so that cluster start-up and the final drain are paid five times,
not thirteen. A failing run prints the checker's verdict, its own
broken expectations and the folder (under pytest's tmp_path) holding every node log and
history, the clients' histories, the nemesis log, the digests, ``verdict.txt`` and
``result.json``. ``make chaos`` runs the scenarios one by one on many seeded long schedules
(``python -m tests.chaos``; ``GROUPS=3`` on clusters of replication groups).

The partition stories of three nodes run on a cluster of three replication groups, each member
mastering one: an isolated member's group lease fences it as the master's lease does, and the
groups of the members the master still hears keep office. The other clusters have one group.
"""

from __future__ import annotations

import pytest

from tests.chaos.runner import run_scenario
from tests.chaos.scenarios import SHORT_SUITE

pytestmark = pytest.mark.slow


# The other xdist worker runs tests/cluster's LAN-timed clusters (elections after 0.2 s of
# silence); these nodes run with CHAOS_TIMING, made for a starved scheduler, so they yield.
NICE = 5
GROUPS = {"partitions": 3}


@pytest.mark.parametrize("name", SHORT_SUITE)
def test_scenario(name: str, tmp_path) -> None:
    res = run_scenario(name, tmp_path / name, seed=1, policy="majority", long=False, nice=NICE,
                       groups=GROUPS.get(name, 1))
    print(res.message())
    assert res.ok, res.message()
