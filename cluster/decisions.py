"""Decision coverage: how often each protocol decision of the cores ran, and how often a plausible
alternative would have decided differently.

A decision point is a line of a core that decides something the protocol's safety or liveness
rests on: which member the sync takes for the truth, whether a replica's fence lets a frame in,
how far the master counts a batch committed, the log position a state transfer names. Next to
each such line the core computes, only while recording is on, what a plausible one-line bug
would have decided there (``POINTS`` names that alternative), and notes whether the two differ.
The alternative is computed, never used: recording changes no decision.

A point that ran but whose alternative never differed has not been tested by that run: a
mutant that makes exactly that change would pass it. A point no scenario reaches is a missing
scenario. The simulator records every seed (``recording``), and ``sim run`` adds up a sweep.

While recording, the master also notes what it writes: each new log entry's (epoch, seq) and
mutations (``wrote``). An entry keeps the epoch it was written in wherever it goes: resent,
fetched by a syncing master, a transfer's tail, a journal's replay. One relabelled newer makes a
shorter log look the most advanced at the next sync, which can then drop committed operations;
the simulator holds every member's log to what each epoch's master wrote (sim/provenance.py).

Off by default. Each point costs production one check of the module flag ``ON``
(``if decisions.ON:``); everything else happens only behind it. The counts are plain module
state, for one thread: the simulator runs a seed in one thread, and the product never turns
recording on.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

ON = False

# name -> (the decision, and the plausible alternative counted against it)
POINTS: dict[str, str] = {
    # replication: the master-change sync (cluster/replication/sync.py)
    "sync.most_advanced": "the truth is the member with the highest (last_epoch, last_seq); "
                          "alternative: ordered by (last_seq, last_epoch)",
    "sync.quorum": "amnesiac answers count towards the sync's majority only if every member answered; "
                   "alternative: they count like any other",
    "sync.fetch_verify": "a fetched copy of our last entry with another written_epoch means our tail is not "
                         "the truth's (transfer); alternative: the seq alone is compared",
    "sync.hand_on": "an amnesiac master short of a sync quorum hands leadership on only once every member "
                    "it reaches has answered; alternative: as soon as it lacks the quorum",
    "sync.divergent": "a member is a prefix of the synced log if it holds our entry at its last seq; "
                      "alternative: a member no longer than us is a prefix (seq only)",
    "log.lookup": "a seq behind the log's first entry is not held (None); "
                  "alternative: only the upper bound is checked (a trimmed seq indexes from the end)",
    # replication: the master's stream (master.py)
    "master.commit_count": "a batch is committed once the master's copy and `required` replicas hold it; "
                           "alternative: one copy fewer",
    "master.own_copy": "with a journal the master's own copy counts once it is durable; "
                       "alternative: once it is in memory",
    "master.position": "a replica (re)positioned streams on only if its log is a prefix of ours; "
                       "alternative: a replica no longer than us is a prefix (seq only)",
    "master.awaiting_transfer": "a reconnected replica that awaits a transfer is sent nothing; "
                                "alternative: streamed from its acked seq",
    "master.throttle_reachable": "only connected, caught-up replicas slow producers; "
                                 "alternative: every replica does",
    # replication: a replica (replica.py)
    "replica.epoch_fence": "a frame from another master or epoch is refused; "
                           "alternative: a frame of an older epoch is let in",
    "replica.sync_fence": "a SyncRequest of an older epoch is refused; alternative: adopted",
    "replica.duplicate": "a batch at or below the applied seq is a duplicate (re-acked); "
                         "alternative: only one below it",
    # replication: state transfer (transfer.py, core.py)
    "transfer.snapshot_position": "a transfer carries the log's entries since its read began and names the "
                                  "log's end; alternative: it names where the read began (the joiner holds "
                                  "effects its log lacks)",
    "transfer.chunk_order": "a chunk other than the next one is not applied (the sender resends); "
                            "alternative: a later chunk is applied",
    "transfer.taken_twice": "a chunk of a transfer already taken is re-acked, not taken again; "
                            "alternative: taken again",
    "transfer.empty_holder": "a member that restarted empty and holds nothing refuses to send its snapshot; "
                             "alternative: it refuses whenever it is amnesiac",
    # the election core and the lease (election.py, lease.py, membership.py)
    "election.vote_guard": "a vote request within the guard of leader contact is dropped; "
                           "alternative: delivered",
    "election.leader_fence": "a leader holds a higher-term vote request until its loop stopped serving; "
                             "alternative: delivered at once",
    "election.pre_vote_contact": "a pre-vote is refused while a leader was heard within the election timeout; "
                                 "alternative: granted",
    "election.pre_vote_log": "a pre-vote needs the asker's (last_term, last_index) at least ours; "
                             "alternative: the logs are not compared",
    "election.pre_vote_count": "a node stands once a majority (itself included) granted its pre-vote; "
                               "alternative: one grant fewer",
    "lease.expiry": "the lease runs from the send stamps a majority acked; "
                    "alternative: from when those acks arrived",
    "membership.accept_view": "a committed view is installed only with the next id and an epoch not going "
                              "back; alternative: a second view with the current id is installed too",
    # the node core (node_core.py), the group core (group_core.py) and compaction (compaction.py)
    "node.gating": "a master serves only while the membership core says it is active; "
                   "alternative: once its sync is done",
    "group.durable_ack": "a replica acks only what its journal holds durably; alternative: what it applied",
    "group.durable_part": "a journal report in the turn of a waiting ack (a newer one the journal lacks, or an "
                         "earlier report's) sends the part it made durable of the held ack; alternative: leaves "
                         "it for the next report",
    "node.forward_once": "a forwarded request delivered twice is served once; alternative: every copy",
    "node.forward_lead": "a member forwards only to a master that led it within an election timeout; "
                         "alternative: to any connected master",
    "compaction.snapshot_position": "a compaction snapshot starts at the log position its read began at; "
                                    "alternative: the position when the read ended",
}

_counts: dict[str, list[int]] = {}
_written: dict[tuple[int, int, int], bytes] = {}     # (group, epoch, seq) -> the mutations its master wrote


def note(point: str, differs: bool) -> None:
    """The decision ``point`` ran; ``differs``: its alternative would have decided otherwise."""
    c = _counts.get(point)
    if c is None:
        c = _counts[point] = [0, 0]
    c[0] += 1
    if differs:
        c[1] += 1


def wrote(epoch: int, seq: int, mutations: bytes, group: int = 0) -> None:
    """The master of ``epoch`` (of replication ``group``) made a new log entry at ``seq``."""
    _written.setdefault((group, epoch, seq), mutations)


def written(epoch: int, seq: int, group: int = 0) -> bytes | None:
    """What the master of ``epoch`` (of ``group``) wrote at ``seq`` since the last ``reset``
    (None: nothing)."""
    return _written.get((group, epoch, seq))


def counts() -> dict[str, tuple[int, int]]:
    """What was noted since the last ``reset``: point -> (ran, differed)."""
    return {k: (v[0], v[1]) for k, v in sorted(_counts.items())}


def reset() -> None:
    _counts.clear()
    _written.clear()


@contextmanager
def recording() -> Iterator[dict[str, tuple[int, int]]]:
    """Record while the block runs; the dict it gives is filled with ``counts()`` at the end.
    Not reentrant: the block owns the module's counts."""
    global ON
    out: dict[str, tuple[int, int]] = {}
    reset()
    ON = True
    try:
        yield out
    finally:
        ON = False
        out.update(counts())
        reset()


def merge(into: dict[str, list[int]], more: dict[str, tuple[int, int]] | dict[str, list[int]]) -> dict[str, list[int]]:
    """Add one run's counts to a sweep's total."""
    for k, (ran, differed) in more.items():
        c = into.setdefault(k, [0, 0])
        c[0] += ran
        c[1] += differed
    return into
