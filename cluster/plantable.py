"""Known bugs the simulator can plant in the node's cores, to prove it finds each of them.

Every entry is a one-line change of a decision in a core, switched on by name. They are never set
in production: the cores take them only from the simulator (``sim run --bug NAME``), and refuse a
name they do not know. tests/sim/test_teeth.py checks that each one is found within a bounded
number of seeds, and that the seed that finds it passes without it.
"""

from __future__ import annotations

PLANTABLE_BUGS: dict[str, str] = {
    # cluster/replication/core.py
    "early-ack": "complete operations at once, as if every policy were `none`",
    "skip-sync": "a new master serves without the master-change sync",
    "accept-stale-epoch": "replicas apply batches from a deposed master's epoch",
    # cluster/election.py
    "no-pre-vote": "stand for election whenever the election timer runs out, without a pre-vote",
    # cluster/node_core.py
    "minority-answers": "gate client operations on the replication layer only, not on the lease",
    # cluster/group_core.py
    "abandon-as-success": "answer operations abandoned on a view change or lost quorum as successes",
    "batches-unthrottled": "flow control slows SendMessage but not SendMessageBatch",
    "ack-before-fsync": "with a journal, replicas ack and the master answers before their fsync",
}


def check_bugs(bugs: frozenset[str] | set[str] | tuple[str, ...]) -> frozenset[str]:
    unknown = set(bugs) - set(PLANTABLE_BUGS)
    if unknown:
        raise ValueError(f"unknown planted bugs {sorted(unknown)}")
    return frozenset(bugs)
