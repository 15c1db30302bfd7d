"""Mutants of the cores: proof that the simulator has teeth.

Each mutant is a one-line change of a decision in a core (cluster/), the kind of slip a person
makes: an ordering of (epoch, seq) turned round, a fence that compares with the wrong epoch, a
commit that counts one copy short, a snapshot position taken at the wrong moment. None of them is
a flag in the product: applying one copies the packages the simulator imports (``PACKAGES``) to a
temporary directory, checks that the old text occurs exactly once in its file (so a refactor
that moves the text fails loudly instead of testing nothing), replaces it, and runs the simulator
in a child process with that copy first on ``sys.path``. The search stops at the first failing
seed; the caller then checks that the same seed passes on clean code (the failure is the
mutant's doing).

    python -m sim.mutants                       # every mutant: first failing seed of 0..299
    python -m sim.mutants --rate 100 NAME ...   # how many of seeds 0..99 find each
    python -m sim.mutants --check               # only: does every mutant's text still apply?

tests/sim/test_mutants.py runs the same search for every mutant within ``BOUND`` seeds
(docs/simulator.md has the measured table). Add a mutant here when a core gains a
decision.
"""

from __future__ import annotations

import argparse
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cluster", "storage", "sim")
BOUND = 300
# The scenarios the search runs: random cluster sizes (3 or 5) and ack policies, crash policy
# `any`, the rare paths and the journal as each seed draws them. 30 simulated seconds: long
# enough for failover chains (a fault window of 20 s or more), ~0.45 CPU-seconds a seed.
SETTINGS = {"nodes": None, "policy": None, "crash_policy": "any", "duration": 30.0}
# A mutant of the replication groups' seams plays the same, with the number of groups drawn per
# seed (1 to 4; a seed of one group plays it too, where it changes nothing).
GROUP_SETTINGS = {**SETTINGS, "groups": None}


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str        # relative to the repository root
    old: str         # must occur exactly once in the file
    new: str
    breaks: str      # what it should break, in words
    groups: bool = False   # searched with the groups drawn per seed (GROUP_SETTINGS)

    @property
    def settings(self) -> dict:
        return GROUP_SETTINGS if self.groups else SETTINGS


MUTANTS: tuple[Mutant, ...] = (
    # -- cluster/replication/master.py ---------------------------------------------------------
    Mutant("commit-one-copy-short", "cluster/replication/master.py",
           "return acked[need] if len(acked) > need else 0",
           "return acked[need - 1] if len(acked) > need else 0",
           "an operation completes when one copy fewer than its policy asks holds its batch"),
    Mutant("master-copy-before-fsync", "cluster/replication/master.py",
           "local = self.log.last_seq if self.local_durable is None else self.local_durable",
           "local = self.log.last_seq",
           "with a journal, the master's own copy counts before its fsync"),
    Mutant("position-unknown-is-prefix", "cluster/replication/master.py",
           "if is_prefix_of(pos, self.log):",
           "if is_prefix_of(pos, self.log) is not False:",
           "a replica whose last entry the master trimmed is streamed to as if its log were a prefix"),
    Mutant("resend-rewrites-epoch", "cluster/replication/master.py",
           "        return [Send(r.name, Batch(self.epoch, e.seq, e.written_epoch, e.mutations)) for e in entries]\n\n"
           "    def durable",
           "        return [Send(r.name, Batch(self.epoch, e.seq, self.epoch, e.mutations)) for e in entries]\n\n"
           "    def durable",
           "resent entries claim the current epoch as the one they were written in"),
    # a reconnected replica is repositioned only if it awaits no transfer, and otherwise
    # streamed to from its ack (as if the check before it did not exist)
    Mutant("reconnect-streams-awaiting-transfer", "cluster/replication/master.py",
           "        if r.needs_transfer:\n"
           "            # Nothing streams to a replica awaiting a transfer: its log may be a deposed\n"
           "            # master's tail, which takes our entries by seq alone and would then claim our\n"
           "            # position over a divergent state (the simulator, seed 216). The core resumes the\n"
           "            # transfer, or starts one if its sender is gone.\n"
           "            r.connected = True\n"
           "            r.last_progress_ms = now_ms\n"
           "            return [NeedsTransfer(name)]\n"
           "        if fresh and r.positioned:\n",
           "        if fresh and r.positioned and not r.needs_transfer:\n",
           "a replica awaiting a transfer (a divergent tail) is streamed to when it reconnects"),
    Mutant("lag-in-seconds", "cluster/replication/master.py",
           "return now_ms - oldest.created_ms if oldest is not None else 0",
           "return (now_ms - oldest.created_ms) // 1000 if oldest is not None else 0",
           "a replica's lag is counted in seconds, not milliseconds: the time bound never throttles"),
    # -- cluster/replication/sync.py -----------------------------------------------------------
    Mutant("sync-orders-by-seq", "cluster/replication/sync.py",
           "return (self.last_epoch, self.last_seq)",
           "return (self.last_seq, self.last_epoch)",
           "the sync takes the longest log for the truth, not the one of the newest epoch"),
    Mutant("sync-quorum-of-view", "cluster/replication/sync.py",
           "self.quorum = majority(max(len(self.members), configured))",
           "self.quorum = majority(len(self.members))",
           "the sync waits for a majority of the view, not of the configured members"),
    Mutant("sync-counts-amnesiacs", "cluster/replication/sync.py",
           "counted = sum(1 for n in self.positions if n not in uncounted)",
           "counted = len(self.positions)",
           "members restarted with empty memory count in the sync's majority"),
    Mutant("prefix-ignores-epoch-at-same-seq", "cluster/replication/sync.py",
           "    if pos.last_seq == log.last_seq:\n        return pos.last_epoch == log.last_epoch",
           "    if pos.last_seq == log.last_seq:\n        return True",
           "a member whose log ends at the master's seq but in another epoch counts as a prefix"),
    Mutant("sync-appends-unverified", "cluster/replication/sync.py",
           "if frame.seq != log.last_seq + 1 or not self._verified:",
           "if frame.seq != log.last_seq + 1:",
           "a syncing master appends fetched entries before it has verified its own last entry"),
    # -- cluster/replication/replica.py --------------------------------------------------------
    Mutant("status-reports-current-epoch", "cluster/replication/replica.py",
           "return SyncStatus(epoch, log.last_seq, log.last_epoch, log.first_seq)",
           "return SyncStatus(epoch, log.last_seq, epoch, log.first_seq)",
           "a member reports the epoch it is in, not the one its last entry was written in"),
    Mutant("fetch-rewrites-epoch", "cluster/replication/replica.py",
           "return [Batch(epoch, e.seq, e.written_epoch, e.mutations) for e in entries]",
           "return [Batch(epoch, e.seq, epoch, e.mutations) for e in entries]",
           "entries fetched by a syncing master claim the current epoch as the one they were written in"),
    Mutant("replica-rejoins-older-sync", "cluster/replication/replica.py",
           "if frame.epoch < self.epoch or (frame.epoch == self.epoch and self.master not in (None, sender)):",
           "if frame.epoch < self.epoch - 1 or (frame.epoch == self.epoch and self.master not in (None, sender)):",
           "a replica answers (and follows) the sync of a master one epoch older than its own"),
    # -- cluster/replication/log.py ------------------------------------------------------------
    Mutant("log-get-off-by-one", "cluster/replication/log.py",
           "return self._entries[seq - self._entries[0].seq]",
           "return self._entries[seq - self._entries[0].seq - 1]",
           "the log's lookup returns the entry before the one asked for"),
    Mutant("log-since-skips-one", "cluster/replication/log.py",
           "start = seq - self._entries[0].seq\n",
           "start = seq - self._entries[0].seq + 1\n",
           "the log's range read starts one entry late"),
    # -- cluster/replication/transfer.py -------------------------------------------------------
    Mutant("transfer-tail-starts-late", "cluster/replication/transfer.py",
           "self._tail_from = self.at_seq + 1",
           "self._tail_from = self.at_seq + 2",
           "a transfer's tail (the log's entries since its read began) leaves out the first one"),
    Mutant("transfer-position-at-read-start", "cluster/replication/transfer.py",
           "return self._chunk(encode_many(mutations), last=True, at=(log.last_seq, log.last_epoch))",
           "return self._chunk(encode_many(mutations), last=True)",
           "a transfer's last chunk names where its read began, not the end of the tail it carried: "
           "the joiner holds effects of entries its log lacks"),
    Mutant("transfer-cut-skipped", "cluster/replication/transfer.py",
           "            out += self._cut_staged(now_ms)\n",
           "            pass\n",
           "a transfer names its position without having the master's executed operations cut into "
           "the log first: the joiner holds effects of operations no entry up to there carries"),
    Mutant("transfer-done-at-log-end", "cluster/replication/transfer.py",
           "return [TransferDone(self.replica, self.end_seq, self.sent_records",
           "return [TransferDone(self.replica, self._log.last_seq, self.sent_records",
           "the master streams to a transferred replica from its log's end, not the snapshot's position"),
    Mutant("transfer-first-chunk-is-last", "cluster/replication/transfer.py",
           "self._read_all = len(batch) < self.chunk_records",
           "self._read_all = len(batch) <= self.chunk_records",
           "a transfer's read ends after its first chunk of records: the rest of the state is never sent"),
    Mutant("receiver-takes-chunk-after-gap", "cluster/replication/transfer.py",
           "if chunk.index != self.expected:",
           "if chunk.index < self.expected:",
           "a joiner restores a chunk that arrives after a lost one"),
    # -- cluster/replication/core.py -----------------------------------------------------------
    Mutant("amnesiac-caught-up-at-once", "cluster/replication/core.py",
           "if frame.serving_seq == 0:",
           "if frame.serving_seq >= 0:",
           "a member restarted empty counts in sync quorums again as soon as a master positions it"),
    Mutant("view-keeps-any-transfer", "cluster/replication/core.py",
           "if to == master and master != self.name and s.epoch == epoch}",
           "if to == master and master != self.name}",
           "a member keeps sending an older epoch's snapshot to the master of a new view"),
    # -- cluster/lease.py, cluster/election.py, cluster/membership.py --------------------------
    Mutant("vote-guard-in-ms", "cluster/lease.py",
           "return now - self.last_contact >= self.guard",
           "return now - self.last_contact >= self.guard / 1000",
           "the vote guard is read as milliseconds: a follower votes right after its leader's contact"),
    Mutant("lease-newest-ack", "cluster/lease.py",
           "return acked[need - 1]",
           "return acked[0]",
           "the lease rests on the newest ack of any one follower, not of a majority"),
    Mutant("lease-longer-than-guard", "cluster/membership.py",
           "self.lease = LeaseTracker(self.self_name, self.timing.lease)",
           "self.lease = LeaseTracker(self.self_name, self.timing.leader_fallback)",
           "the lease lasts leader_fallback, longer than the vote guard: a new master is elected inside it"),
    Mutant("leader-grants-pre-vote", "cluster/election.py",
           "granted = (state.role != LEADER\n                       and now",
           "granted = (True\n                       and now",
           "a leader grants pre-votes: a node cut off from the others but the leader stands"),
    Mutant("pre-vote-raises-voter-term", "cluster/election.py",
           "return [Send(sender, PreVoteReply(message.term, granted, message.round, state.term))]",
           "return ([AdoptTerm(message.term)] if granted else []) + [Send(sender, PreVoteReply(message.term, granted, message.round, state.term))]",
           "a voter that grants a pre-vote adopts its term, as it would a vote request's"),
    Mutant("fence-skipped", "cluster/election.py",
           "if leading and term > state.term and term > self._passed_term:",
           "if leading and term > state.term + 1 and term > self._passed_term:",
           "a leader lets a vote request of the next term through without first stopping to serve"),
    Mutant("stale-view-activates", "cluster/membership.py",
           "if v is None or v.master != self.self_name or v.epoch != self.term:",
           "if v is None or v.master != self.self_name:",
           "a leader re-elected in a later term is active on the view of its earlier term"),
    # -- cluster/node_core.py ------------------------------------------------------------------
    Mutant("gating-cache-kept", "cluster/node_core.py",
           "        self._active_until = float(\"-inf\")\n        for a in self.membership.handle(event):",
           "        for a in self.membership.handle(event):",
           "gating keeps its cached yes until the lease's expiry after a membership event ended activity"),
    Mutant("forward-dedupe-forgets", "cluster/node_core.py",
           "        ids.add(request_id)\n",
           "",
           "a forwarded request delivered twice is executed twice"),
    # -- cluster/group_core.py -----------------------------------------------------------------
    Mutant("held-ack-unclamped", "cluster/group_core.py",
           "part = Ack(ack.epoch, min(ack.seq, seq)) if ack.seq > seq else ack",
           "part = ack",
           "a journaled replica holds back all of an ack until all of it is durable: its master hears an fsync late"),
    Mutant("durable-part-dropped", "cluster/group_core.py",
           "                self._keep_part(to, part)\n",
           "",
           "a journal report in the turn of a newer ack leaves what it made durable for the next report"),
    Mutant("durable-part-displaced", "cluster/group_core.py",
           "and waiting.seq <= durable < a.frame.seq:",
           "and waiting.seq < durable < a.frame.seq:",
           "a new batch's ack in the turn of a journal report displaces the report's part, which waits an fsync"),
    Mutant("durable-part-kept-behind", "cluster/group_core.py",
           "if waiting is not None and (waiting.epoch != part.epoch or waiting.seq > part.seq):",
           "if waiting is not None:",
           "a second journal report in one turn leaves its durable part behind the first's"),
    Mutant("durable-after-reset", "cluster/group_core.py",
           "if seq is None or self._resets_pending or self.replication.durable_seq is None:",
           "if seq is None or self.replication.durable_seq is None:",
           "a write of the history a transfer replaced counts as durable in the new one"),
    # -- cluster/compaction.py, cluster/journal/ -----------------------------------------------
    Mutant("compaction-position-at-end", "cluster/compaction.py",
           "return Snapshot(at_seq, at_epoch, log.last_seq, tuple(blobs))",
           "return Snapshot(log.last_seq, log.last_epoch, log.last_seq, tuple(blobs))",
           "a compaction snapshot claims the log's end when the read finished, not where it began"),
    Mutant("journal-roll-unsynced", "cluster/journal/journal.py",
           "            self._disk.truncate(prev, self._sizes[prev])\n            self._disk.sync(prev)\n",
           "            self._disk.truncate(prev, self._sizes[prev])\n",
           "a segment roll leaves the closed segment's tail unsynced"),
    # -- replication groups: cluster/group_lease.py, cluster/group_mastery.py, cluster/node_core.py ----
    Mutant("group-guard-skipped", "cluster/group_lease.py",
           "return max([self.started_at, *held]) + self.guard",
           "return max([self.started_at, *held])",
           "a member answers a new group master's sync at once after acking the old one's beat, while "
           "the old master's lease still runs: two active masters of one group", groups=True),
    Mutant("beat-acked-after-newer-epoch", "cluster/group_lease.py",
           "if epoch < self._acks_from or (master, epoch) != self.following():",
           "if (master, epoch) != self.following():",
           "a member that knows of a newer epoch of the group still acks the old master's beats, "
           "renewing a lease the new master's sync took no account of", groups=True),
    Mutant("old-group-master-answers-without-abdicating", "cluster/group_mastery.py",
           "                self._abdicate(self.epoch)     # give the older epoch up, then answer\n",
           "                pass\n",
           "an old group master asked by a newer epoch's sync answers it and stays active", groups=True),
    Mutant("restart-remasters-old-epoch", "cluster/group_mastery.py",
           "            if view_id <= self.view_floor:",
           "            if view_id < 0:",
           "a restarted node masters again the epoch a view of its earlier life gave it, writing a "
           "second entry at a (epoch, seq) a member may hold", groups=True),
    Mutant("route-wrong-group", "cluster/node_core.py",
           "        g = self.groups[group]\n        if g.serving_now(now):\n            return LOCAL",
           "        g = self.groups[(group + 1) % len(self.groups)]\n        if g.serving_now(now):\n"
           "            return LOCAL",
           "a member routes a request by another group's master: it runs in the wrong group or is "
           "refused", groups=True),
    Mutant("throttle-whole-node", "cluster/group_core.py",
           "        if self.throttling and isinstance(command, _PRODUCERS) \\",
           "        if any(g.throttling for g in self.node.groups) and isinstance(command, _PRODUCERS) \\",
           "a group whose replicas keep up refuses its producers because another group throttles",
           groups=True),
    Mutant("handover-without-abdicate", "cluster/group_handover.py",
           "        self._abdicate(now)\n        out.append(Record(now, \"handover\"",
           "        pass\n        out.append(Record(now, \"handover\"",
           "a group master handing its group over keeps executing while it catches the target up",
           groups=True),
    Mutant("read-barrier-skipped", "cluster/read_barrier.py",
           "        if not foreign:\n            return False",
           "        if True:\n            return False",
           "a read across groups runs on this node's replicas at once, without the other groups' barriers",
           groups=True),
    # -- moves between groups: cluster/moves.py --------------------------------------------------
    Mutant("offer-before-commit", "cluster/moves.py",
           "for move_id in self._offer_gate.release(committed_seq):",
           "for move_id in self._offer_gate.release(logged_seq):",
           "a source master offers a move its group has not committed: a failover of the source puts "
           "the message back in its queue while the destination holds a copy", groups=True),
    Mutant("forget-before-accepted-commit", "cluster/moves.py",
           "for move_id in self._forget_gate.release(committed_seq):",
           "for move_id in self._forget_gate.release(logged_seq):",
           "a source master tells the destination to forget a move before its acceptance is committed: "
           "a new source master offers it again to a destination that no longer remembers it", groups=True),
)

BY_NAME = {m.name: m for m in MUTANTS}

# Mutants written, then dropped as equivalent: no run of the model can tell them from the code.
DROPPED: tuple[tuple[Mutant, str], ...] = (
    (Mutant("replica-accepts-older-epoch", "cluster/replication/replica.py",
           "if (sender != self.master or getattr(frame, \"epoch\", None) != self.epoch) \\",
           "if (sender != self.master or getattr(frame, \"epoch\", None) > self.epoch) \\",
           "a replica's fence refuses only newer epochs: its master's frames of an older epoch apply"),
     "one master per epoch, and FIFO links: the master of the replica's view never sends it a "
     "frame of an older epoch after one of its current epoch, so the fence's epoch test only "
     "ever refuses frames that the sender test refuses too"),
    (Mutant("reconnect-repositions-awaiting-transfer", "cluster/replication/master.py",
           "        if r.needs_transfer:\n            # Nothing streams",
           "        if r.needs_transfer and not fresh:\n            # Nothing streams",
           "a replica awaiting a transfer is repositioned, not left to its transfer, when it reconnects"),
     "every reconnection that the runtime reports is fresh, and a fresh one repositions: the "
     "master asks the member where its log ends (SyncRequest) and checks the answer as it did "
     "before the transfer (is_prefix_of, by the epoch its last entry was written in), so a "
     "divergent member is found divergent again and its transfer goes on (its sender survives a "
     "dropped link); a member whose transfer finished meanwhile answers the snapshot's position, "
     "a prefix, rightly streamed to. Pinned to the `relink` rare path (seeds 1, 2, 10, 11 and 16, "
     "where reconnect-streams-awaiting-transfer diverges), every such reconnection was answered "
     "'not a prefix': this mutant does not reproduce that slip, reconnect-streams-awaiting-transfer "
     "does"),
    (Mutant("view-epoch-may-go-back", "cluster/membership.py",
           "return proposed.view_id == current.view_id + 1 and proposed.epoch >= current.epoch",
           "return proposed.view_id == current.view_id + 1",
           "a view of an older epoch is installed after a newer one"),
     "views are committed in Raft's log order, whose terms never go back, and a view's epoch is "
     "its proposer's term: a view of an older epoch cannot follow a newer one"),
)

# The first failing seed of 0..BOUND-1 of each mutant, as `python -m sim.mutants NAME` finds it.
# tests/sim/test_mutants.py runs each mutant at its seed alone (it must fail) and the clean code at
# every one of them (it must pass), so the suite proves what the search found without paying for
# it. A change to the simulator or the cores can move a finding seed: search again and update.
FOUND_AT: dict[str, int] = {
    "commit-one-copy-short": 4,
    "master-copy-before-fsync": 230,
    "position-unknown-is-prefix": 81,
    "resend-rewrites-epoch": 0,
    "reconnect-streams-awaiting-transfer": 72,
    "lag-in-seconds": 3,
    "sync-orders-by-seq": 23,
    "sync-quorum-of-view": 173,
    "sync-counts-amnesiacs": 44,
    "prefix-ignores-epoch-at-same-seq": 34,
    "sync-appends-unverified": 25,
    "status-reports-current-epoch": 0,
    "fetch-rewrites-epoch": 0,
    "replica-rejoins-older-sync": 0,
    "log-get-off-by-one": 5,
    "log-since-skips-one": 0,
    "transfer-tail-starts-late": 16,
    "transfer-position-at-read-start": 28,
    "transfer-cut-skipped": 24,
    "transfer-done-at-log-end": 9,
    "transfer-first-chunk-is-last": 0,
    "receiver-takes-chunk-after-gap": 46,
    "amnesiac-caught-up-at-once": 177,
    "view-keeps-any-transfer": 1,
    "vote-guard-in-ms": 0,
    "lease-newest-ack": 38,
    "lease-longer-than-guard": 0,
    "leader-grants-pre-vote": 22,
    "pre-vote-raises-voter-term": 0,
    "fence-skipped": 0,
    "stale-view-activates": 34,
    "gating-cache-kept": 2,
    "held-ack-unclamped": 0,
    "durable-part-dropped": 163,
    "durable-part-displaced": 81,
    "durable-part-kept-behind": 32,
    "forward-dedupe-forgets": 104,
    "durable-after-reset": 2,
    "compaction-position-at-end": 9,
    "journal-roll-unsynced": 9,
    "group-guard-skipped": 1,
    "restart-remasters-old-epoch": 0,
    "route-wrong-group": 0,
    "throttle-whole-node": 13,
}

# Not found within BOUND seeds when measured: name -> why, as far as we know. These are the simulator's known blind spots, not equivalent mutants: each changes
# what a run could observe.
NOT_FOUND: dict[str, str] = {
    "beat-acked-after-newer-epoch":
        "the extra acks matter only when a member learns the newer epoch from a held sync request or "
        "the view while the old master still reaches it and the new master's sync counts that member "
        "before its guard ran from those acks: no seed of 300 cut the links that way",
    "old-group-master-answers-without-abdicating":
        "the old master must get the new master's sync request while the Raft leader deems it "
        "unreachable (a one-way cut from it to the leader, the leader the new master) and answer "
        "in a quorum with the new master while its lease rests on a third member's acks",
    "handover-without-abdicate":
        "a master that serves on while it catches the target up breaks no invariant: it gives its "
        "epoch up for good in the step that finds the target caught up, before Released leaves, "
        "so no member skips its guard while it serves; what suffers is the handover itself, whose "
        "catch-up chases a log that keeps growing (and refusals of the retryable kind it should give)",
    "read-barrier-skipped":
        "a replica applies another group's batch within a round trip of its master's answer, and the "
        "simulated clients list queues only after a create's answer came back to them: a stale list "
        "needs a replica's link slower than the client's round trip, which no seed of 300 plays",
    "offer-before-commit":
        "the batch that holds the outbox entry leaves before the offer, on the same in-order link, so "
        "the destination's master holds the entry as a replica of the source group; a failover loses "
        "it only if the source's old master crashes before a majority acked it and its new master's "
        "sync counts a majority without the destination's master (five members, that one cut off right "
        "then): no seed of 300 plays that",
    "forget-before-accepted-commit":
        "as for offer-before-commit: the batch that holds the acceptance reaches the destination's "
        "master before the forget, and a new source master misses it only if its sync's majority "
        "leaves out that member while the old master crashed with the acceptance uncommitted",
}


# Unit tests that kill mutants as well, and must for every one in NOT_FOUND: with them, `make test`
# fails for every mutant, found by the simulator within its bound or not, and the ones found only
# late in the search are pinned by a test of their own too. tests/sim/test_mutants.py applies each
# mutant to a copy of the tree and runs its test there, which must fail (the suite itself runs it
# on the clean tree, where it passes).
UNIT_TESTS: dict[str, str] = {
    "master-copy-before-fsync":
        "tests/cluster/test_node_core_journal.py::"
        "test_majority_means_on_disk_on_a_majority_the_master_counting_only_once_durable",
    "position-unknown-is-prefix":
        "tests/replication/test_stream.py::"
        "test_a_replica_whose_last_entry_the_master_trimmed_gets_a_transfer_not_the_stream",
    "sync-quorum-of-view":
        "tests/replication/test_core.py::test_a_master_serves_only_after_syncing_with_a_majority",
    "durable-part-displaced":
        "tests/cluster/test_node_core_journal.py::"
        "test_a_newer_batch_in_the_turn_of_a_journal_report_does_not_displace_what_the_report_made_durable",
    "durable-part-dropped":
        "tests/cluster/test_node_core_journal.py::"
        "test_a_journal_report_in_the_turn_of_a_newer_ack_still_acks_what_it_made_durable",
    # pinned seeds of the simulator: no unit test of the cores reaches these two
    "amnesiac-caught-up-at-once":
        "tests/sim/test_rare.py::test_a_master_lost_before_wiped_members_caught_up_loses_nothing",
    "forward-dedupe-forgets":
        "tests/sim/test_rare.py::test_a_forwarded_request_sent_again_after_a_reconnection_is_served_once",
    "beat-acked-after-newer-epoch":
        "tests/cluster/test_group_lease.py::test_a_member_that_knows_a_newer_epoch_acks_no_more",
    "old-group-master-answers-without-abdicating":
        "tests/cluster/test_group_mastery.py::"
        "test_an_old_master_asked_by_a_newer_epochs_sync_gives_the_group_up_before_it_answers",
    "handover-without-abdicate":
        "tests/cluster/test_group_handover.py::"
        "test_a_step_down_of_one_group_abdicates_at_once_releases_it_and_the_view_moves_it",
    "read-barrier-skipped":
        "tests/cluster/test_read_barrier.py::"
        "test_list_queues_waits_until_the_replica_has_what_the_other_groups_master_acknowledged",
    "offer-before-commit":
        "tests/cluster/test_moves.py::test_an_entry_is_offered_only_once_its_batch_is_committed",
    "forget-before-accepted-commit":
        "tests/cluster/test_moves.py::"
        "test_the_destination_answers_only_once_the_adopt_is_committed_and_the_source_forgets_after_its_commit",
}
# what a unit test's copy of the tree needs besides PACKAGES
UNIT_TEST_PACKAGES = ("elasticmq_py", "tests")


class MutantDoesNotApply(AssertionError):
    pass


def source_of(m: Mutant, root: Path = ROOT) -> str:
    """``m.path``'s text under ``root`` with ``m`` applied."""
    text = (root / m.path).read_text()
    n = text.count(m.old)
    if n != 1:
        raise MutantDoesNotApply(f"mutant {m.name}: its text occurs {n} times in {m.path}, not once "
                                 f"(the code changed: update the mutant in sim/mutants.py)\n{m.old}")
    return text.replace(m.old, m.new)


def export(into: Path, rev: str | None = None, root: Path = ROOT,
           packages: tuple[str, ...] = PACKAGES) -> Path:
    """Copy ``packages`` into ``into``: from the working tree, or (``rev``) from a git revision,
    which other people's edits in progress cannot disturb."""
    if rev is None:
        for pkg in packages:
            shutil.copytree(root / pkg, into / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, *packages], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def apply(m: Mutant, tree: Path) -> None:
    """Apply ``m`` to an exported tree, in place."""
    target = tree / m.path
    target.write_text(source_of(m, tree))
    py_compile.compile(str(target), doraise=True)   # a mutant must be code, not a syntax error


def run_unit_test(m: Mutant | None, nodeid: str, root: Path = ROOT) -> subprocess.CompletedProcess:
    """pytest ``nodeid`` on a copy of the working tree with ``m`` applied (None: clean). Exit
    status 1 is a failing test; 4 and 5 mean the test was not found."""
    with tempfile.TemporaryDirectory(prefix="mutant-unit-") as tmp:
        tree = export(Path(tmp), root=root, packages=PACKAGES + UNIT_TEST_PACKAGES)
        if m is not None:
            apply(m, tree)
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", nodeid],
                              cwd=tree, capture_output=True, text=True, timeout=600)


def scenario_kwargs(settings: dict) -> dict:
    return {k: v for k, v in settings.items() if k in ("nodes", "policy", "crash_policy", "duration", "groups")}


# The child process: the simulator from the copy on sys.path[0], one JSON line per seed. It is
# source, not an import of this module, so that a copy taken from a revision without this file
# runs too.
CHILD = """
import json, sys
args = json.loads(sys.argv[1])
sys.path.insert(0, args["root"])
import cluster
from pathlib import Path
assert str(Path(cluster.__file__).resolve()).startswith(str(Path(args["root"]).resolve())), cluster.__file__
from sim import generate, simulate
for seed in args["seeds"]:
    try:
        failures = list(simulate(generate(seed, **args["settings"])).failures)
    except Exception as e:   # a core's own assertion (or a crash) is a finding too
        failures = [f"exception: {type(e).__name__}: {e}"]
    print(json.dumps({"seed": seed, "failures": failures}), flush=True)
    if failures and args["stop"]:
        break
"""


def run_mutant(m: Mutant | None, seeds: range | list[int], *, settings: dict | None = None,
               stop_at_first: bool = True, rev: str | None = None,
               timeout: float | None = None) -> list[tuple[int, list[str]]]:
    """Run ``seeds`` against mutant ``m`` (None: the clean code, the same way) in a child
    process on a copy of the packages; (seed, failures) for each seed run. ``settings``: the
    mutant's own by default (SETTINGS for the clean code)."""
    if settings is None:
        settings = m.settings if m is not None else SETTINGS
    with tempfile.TemporaryDirectory(prefix=f"mutant-{m.name if m else 'clean'}-") as tmp:
        tree = export(Path(tmp), rev)
        if m is not None:
            apply(m, tree)
        arg = json.dumps({"root": str(tree), "seeds": list(seeds), "settings": scenario_kwargs(settings),
                          "stop": stop_at_first})
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([sys.executable, "-c", CHILD, arg], cwd=tree, env=env, capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"mutant {m.name if m else 'clean'}: the child failed ({proc.returncode}):\n"
                               f"{proc.stderr[-4000:]}")
        out = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        return [(d["seed"], d["failures"]) for d in out]


def first_failing(m: Mutant, bound: int = BOUND, start: int = 0, **kw) -> tuple[int, list[str]] | None:
    for seed, failures in run_mutant(m, range(start, bound), **kw):
        if failures:
            return seed, failures
    return None


def clean_failures(seed: int, **kw) -> list[str]:
    """What the clean code fails at ``seed`` (run as the mutants are, from a copy)."""
    return run_mutant(None, [seed], **kw)[0][1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.mutants", description=__doc__.split("\n\n")[0])
    p.add_argument("names", nargs="*", help="mutants to run (default: all)")
    p.add_argument("--bound", type=int, default=BOUND, help="seeds 0..BOUND-1 (default %(default)s)")
    p.add_argument("--start", type=int, default=0, help="search from this seed on (default 0)")
    p.add_argument("--rate", type=int, default=0, metavar="N",
                   help="run all of seeds 0..N-1 and count the failing ones, instead of stopping at the first")
    p.add_argument("--check", action="store_true", help="only check that every mutant applies")
    p.add_argument("--no-clean", action="store_true", help="do not rerun the finding seed on clean code")
    p.add_argument("--rev", default=None, help="take the packages from this git revision (default: the working tree)")
    a = p.parse_args(argv)
    chosen = [BY_NAME[n] for n in a.names] if a.names else list(MUTANTS)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="mutants-check-") as tmp:
        tree = export(Path(tmp), a.rev)
        for m in chosen:
            try:
                source_of(m, tree)
            except MutantDoesNotApply as e:
                print(e)
                bad += 1
    if a.check or bad:
        print(f"{len(chosen) - bad} of {len(chosen)} mutants apply")
        return 1 if bad else 0
    for m in chosen:
        t0 = time.monotonic()
        if a.rate:
            res = run_mutant(m, range(a.rate), stop_at_first=False, rev=a.rev)
            hits = [s for s, f in res if f]
            first = hits[0] if hits else None
            kinds = sorted({f.split(":")[0] for s, fs in res for f in fs})
            print(json.dumps({"mutant": m.name, "first": first, "hits": len(hits), "of": a.rate,
                              "kinds": kinds, "s": round(time.monotonic() - t0, 1)}), flush=True)
            continue
        found = first_failing(m, a.bound, a.start, rev=a.rev)
        clean = None
        if found is not None and not a.no_clean:
            clean = not clean_failures(found[0], rev=a.rev, settings=m.settings)
        print(json.dumps({"mutant": m.name, "first": found[0] if found else None,
                          "failure": found[1][0][:160] if found else None, "clean_passes": clean,
                          "s": round(time.monotonic() - t0, 1)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
