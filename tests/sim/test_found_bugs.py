"""What the simulator found in the protocol code (docs/simulator.md lists each bug found).

A seed's scenario is pinned to the rare paths it drew when it found its bug (``rare=``): paths
added since draw from their own generators, but whether a seed plays them is drawn anew, and
they change its faults. (Timing changes in the cores can still move a seed off its path; the
tests say what each one found.)"""

from __future__ import annotations

import json

from cluster.replication.log import ReplicationLog
from cluster.replication.master import MasterReplicator
from cluster.replication.messages import Ack, AckPolicy, Complete
from sim import generate, simulate
from storage import IdSource, ManualClock, Storage
from storage.commands import CreateQueue, Namespace, SendMessage


def _completed(actions) -> set[int]:
    return {op for a in actions if isinstance(a, Complete) for op in a.op_ids}


def test_an_operation_without_mutations_waits_for_what_came_before_it():
    """A FIFO send retried with the same dedup id is a no-op whose answer names a
    message that only the master may hold; it must not be acknowledged before that message is."""
    ns = Namespace()
    s = Storage(ManualClock(), IdSource(1))
    _, m1 = s.execute(CreateQueue(ns, "q.fifo", {"FifoQueue": "true"}))
    _, m2 = s.execute(SendMessage(ns.key("q.fifo"), "b", group_id="g", deduplication_id="d"))
    retry, m3 = s.execute(SendMessage(ns.key("q.fifo"), "b", group_id="g", deduplication_id="d"))
    assert m3 == [] and retry.message_id, "the retry is deduplicated: nothing to replicate"
    master = MasterReplicator("n1", 1, ("n1", "n2", "n3"), ReplicationLog(), policy=AckPolicy.MAJORITY)
    for r in ("n2", "n3"):
        master.replicas[r].positioned = True
        master.replicas[r].connected = True
    out = master.submit(1, m1 + m2) + master.flush(0)
    out += master.submit(2, m3)
    assert not _completed(out), "neither is replicated anywhere yet"
    assert _completed(master.on_frame("n2", Ack(1, 1), 1)) == {1, 2}
    assert _completed(master.submit(3, [])) == {3}, "with everything before it committed: at once"
    assert _completed(master.submit(4, [], AckPolicy.NONE)) == {4}


def test_a_restarted_empty_member_does_not_split_the_views():
    """A member restarted with empty memory that voted, with an empty Raft log, for a candidate
    lacking a committed view, and counted in the new master's sync quorum without holding what
    it had acknowledged, would split the views. Raft state is durable (sim/raft.py Durable, the
    product's state-dir) and an amnesiac member counts in no sync quorum until caught up."""
    r = simulate(generate(83, duration=20.0, crash_policy="any", rare=("busy", "lease")))
    assert r.ok, r.failures


def test_a_restarted_raft_member_keeps_its_term_vote_and_log():
    from cluster.config import Timing
    from sim.raft import RaftNode, RequestVote, VoteReply

    sent: list = []
    timing = Timing()

    def node(restore=None) -> RaftNode:
        return RaftNode("a", ["a", "b", "c"], timing, 0.0, send=lambda to, m: sent.append((to, m)),
                        changed=lambda: None, apply=lambda r: None, restore=restore)

    a = node()
    a.term, a.voted_for, a.log, a.commit = 3, "b", [(1, "v1"), (3, "v2")], 2
    again = node(a.durable())
    assert (again.term, again.voted_for, again.log, again.commit) == (3, "b", [(1, "v1"), (3, "v2")], 2)
    late = 10.0
    again.on_message("c", RequestVote(3, 2, 3), late)
    assert sent == [], "it voted for b in term 3 before the restart (pysyncobj answers only a yes)"
    again.on_message("c", RequestVote(4, 1, 1), late)
    assert sent == [] and again.term == 4, "c lacks the committed entry the journal kept"
    again.on_message("c", RequestVote(5, 2, 3), late)
    assert sent == [("c", VoteReply(5, True))], "and it votes for a candidate with that entry"


def test_a_lost_fetch_answer_does_not_graft_entries_onto_a_divergent_tail():
    """A syncing master fetches from its own last entry (inclusive) to prove it is on the
    truth's history. When that answer is lost and the next one arrives first, a retry that asks
    from the entry after it appends entries onto a deposed master's divergent tail, and an
    acknowledged send is lost (seed 990, a 30%-lossy network)."""
    r = simulate(generate(990, rare=()))
    assert r.ok, r.failures


def test_a_truth_holder_restarted_mid_sync_is_not_taken_for_the_truth():
    """The truth holder of a master-change sync is killed and restarted empty while the new
    master pulls its snapshot; were the stale position still to name it, its empty state would
    replace the master's, again and again (16 acknowledged sends lost, no convergence; seed
    920). A dropped link forgets the member's answer and the decision is made again; a member
    that restarted empty refuses transfer requests."""
    r = simulate(generate(920, rare=("lease", "tail")))
    assert r.ok, r.failures


def test_a_snapshot_asked_for_before_the_view_arrives_is_not_dropped():
    """The new master asks the truth holder for its snapshot, and the holder begins sending
    before membership delivers the view naming that master. Were installing the view to drop
    the transfer, with its first chunk lost (10% frame loss) nobody would resend it and the
    master would never serve: no convergence after the faults (seed 26490, 3 nodes, policy
    none). The holder keeps a transfer to the master its new view names, and a syncing master
    asks again when its transfer stalls."""
    sc = generate(26490, nodes=None, policy=None, rare=("busy",))
    assert (sc.nodes, sc.policy) == (3, "none")
    r = simulate(sc)
    assert r.ok, r.failures


def test_a_finished_transfer_whose_acks_were_lost_completes():
    """A member restarted empty takes the master's whole snapshot, but its acks are lost (10%
    frame loss). The master resends the window; the member never takes a finished transfer
    twice, and were it to answer nothing, the master would resend for ever and never stream to
    it: it would diverge for good (seed 27331, 5 nodes, policy majority). It acks again."""
    sc = generate(27331, nodes=None, policy=None, rare=("busy", "tail"))
    assert (sc.nodes, sc.policy) == (5, "majority")
    r = simulate(sc)
    assert r.ok, r.failures


def test_a_replica_that_awaits_a_transfer_gets_no_batches_when_it_reconnects():
    """MasterReplicator.replica_connected must not stream from acked+1 to a replica that awaits
    a transfer: a member holding a deposed master's divergent tail would take the entries after
    it and claim the master's position over a divergent state. It asks for the transfer again."""
    log = ReplicationLog()
    master = MasterReplicator("n3", 10, ("n1", "n2", "n3"), log, policy=AckPolicy.MAJORITY)
    s = Storage(ManualClock(), IdSource(1))
    _, m = s.execute(CreateQueue(Namespace(), "q", {}))
    master.submit(1, m)
    master.flush(0)
    r = master.replicas["n2"]
    r.positioned, r.needs_transfer, r.connected = True, True, True   # the sync found it divergent
    master.replica_disconnected("n2", 10)
    out = master.replica_connected("n2", 20, fresh=True)
    assert not [a for a in out if type(a).__name__ == "Send"], out
    assert [type(a).__name__ for a in out] == ["NeedsTransfer"], "the transfer goes on (or starts again)"


def test_seed_216_a_divergent_tail_is_not_extended_by_a_reconnecting_master():
    """Seed 216 (3 nodes, majority, journal fsync=always, rare path `tail`), its faults cut to
    the seven that still fail: n2's tail of epoch 6 (235-239) is found divergent by n3's sync in
    epoch 10, whose transfer to n2 is cut short (lossy, then n3 isolated by the chain); when
    the link comes back n3, still the replication core's master of epoch 10, reconnects n2
    and streams from seq 1: n2 acks 239 for seqs it holds by number and applies 240-246 onto
    its own tail. Its log says (10, 246); n3's sync in epoch 11 counts it as holding 246, and
    its state differs from the master's at every quiescent point after."""
    from dataclasses import replace

    sc = generate(216, nodes=None, policy=None)
    keep = tuple(f for f in sc.faults if f.at in (3.096, 8.367, 13.572, 16.558, 18.849, 20.978, 23.64))
    assert len(keep) == 7
    r = simulate(replace(sc, faults=keep))
    assert r.ok, r.failures


def test_seed_24_a_drain_that_still_receives_does_not_give_up():
    """Seed 24 (3 nodes, majority, rare path `busy`): the grown FIFO queue (~1,300 messages)
    took the drain longer than 60 s, ten a round; it gave up with 162 messages still held by
    every member, and the checker counted them lost. The drain gives up only once nothing
    arrives for that long (sim/world.py DRAIN_MAX_US)."""
    sc = generate(24, duration=60.0, rare=("busy",))
    assert "busy" in sc.rare
    r = simulate(sc)
    assert r.ok, r.failures


def test_an_amnesiac_master_that_cannot_sync_hands_leadership_on_and_the_run_passes():
    """A master restarted with empty memory into a bridge wins Raft there, but its sync needs a
    member beyond the bridge (an amnesiac's own position counts in no quorum): nobody would
    serve while the members on the other side, healthy and holding everything, could elect
    nobody. It hands leadership to a member that answered intact. Scenario changes move seeds
    off such a path, so this takes the first of seeds 0-39 where the rule fires and checks that
    the run passes."""
    for seed in range(40):
        r = simulate(generate(seed, duration=60.0))
        lines = [json.loads(x) for x in r.history.splitlines()]
        handed = [e for e in lines if e.get("event") == "hand_on"]
        if handed:
            assert r.ok, (seed, r.failures)
            steps = {(e["node"], e["term"]) for e in lines if e.get("event") == "step_down"}
            assert all((e["node"], e["term"]) in steps for e in handed), "each hand-on steps down"
            return
    raise AssertionError("no seed of 0-39 reached an amnesiac master's hand-on")


def test_seed_100057_a_change_that_may_have_preceded_a_receive_does_not_bound_its_window():
    """Seed 100057 (journal, fsync interval): a ChangeMessageVisibility through an earlier,
    expired handle overlapped the next receive. The checker took it as certainly applied to the
    new window and reported a third receive as an in-window duplicate; the store had run the
    change first, on a visible message (a no-op, as SQS does). The checker's fault, not the
    store's (tests/checker/test_anomalies.py has the history in small)."""
    r = simulate(generate(100057, duration=60.0))
    assert r.ok, r.failures
