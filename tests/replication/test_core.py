"""ReplicationCore, one member's whole protocol, over an in-memory network (no sockets, no loop).

Each test drives real cores the way the runtime does: views in, frames delivered in order over
the shared frame network (tests/replication/network.py), ticks; then checks what only the
composition can get wrong: the master serves only after its sync, a joiner behind the log gets a
transfer and then the stream, a deposed master's unacknowledged tail is reset, a replica that
restarts empty is re-positioned, and the master keeps completing operations while a transfer runs.
"""

from __future__ import annotations

import pytest

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import CreateQueue, Namespace, SendMessage

from cluster.replication.core import (
    Abandoned, ReplicationCore, Serving, StorageReplaced, TransferSettings,
)
from cluster.replication.log import ReplicationLog
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy, Complete, Send, SnapshotChunk
from tests.replication.network import FrameNet

NS = Namespace("us-east-1", "000000000000")
NAMES = ("n1", "n2", "n3")


class Cluster:
    """Real cores on the shared frame network; a test sets ``down``, installs views, settles."""

    def __init__(self, names, *, log_limit: int = 64 * 1024 * 1024, chunk_records: int = 2_000) -> None:
        self.clock = ManualClock(1_000_000)
        self.cores: dict[str, ReplicationCore] = {}
        self.frames = FrameNet(NAMES, self._receive)
        self.completed: set[int] = set()
        self.abandoned = 0
        self.serving: list[tuple[str, bool, int]] = []
        self.log_limit = log_limit
        self.chunk_records = chunk_records
        self._ids = 0
        for n in names:
            self.add(n)

    @property
    def down(self) -> frozenset[str]:
        return self.frames.down

    @down.setter
    def down(self, names) -> None:
        self.frames.down = names

    def add(self, name: str, amnesiac: bool = False) -> ReplicationCore:
        self._ids += 1
        seed = self._ids
        core = ReplicationCore(name, Storage(self.clock, IdSource(seed)),
                               lambda: Storage(self.clock, IdSource(seed + 100)),
                               log=ReplicationLog(self.log_limit), configured=3, amnesiac=amnesiac,
                               limits=Limits(resend_after_ms=200),
                               transfer=TransferSettings(chunk_records=self.chunk_records, window=4,
                                                         resend_after_ms=200))
        self.cores[name] = core
        return core

    def now(self) -> int:
        return self.clock.now_ms()

    def handle(self, name: str, actions) -> None:
        for a in actions:
            if isinstance(a, Send):
                self.frames.send(name, a.to, a.frame)
            elif isinstance(a, Complete):
                self.completed.update(a.op_ids)
            elif isinstance(a, Abandoned):
                self.abandoned += 1
            elif isinstance(a, Serving):
                self.serving.append((name, a.on, a.epoch))
            elif isinstance(a, StorageReplaced):
                assert self.cores[name].storage is a.storage

    def _receive(self, sender: str, to: str, frame) -> None:
        self.handle(to, self.cores[to].on_frame(sender, frame, self.now()))

    def view(self, master: str, epoch: int, members=NAMES) -> None:
        for n in members:
            if n not in self.down:
                self.handle(n, self.cores[n].install_view(master, epoch, members, self.now()))
        for n in members:
            for m in members:
                if n != m and n not in self.down and m not in self.down:
                    self.handle(n, self.cores[n].on_peer(m, True, self.now()))

    def run(self, steps: int = 10_000, lose=None) -> None:
        self.frames.run(steps, lose)

    def settle(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            self.run()
            for n, c in self.cores.items():
                if n not in self.down:
                    self.handle(n, c.flush(self.now()))
            self.run()
            self.clock.advance(250)
            for n, c in self.cores.items():
                if n not in self.down:
                    self.handle(n, c.on_tick(self.now()))

    def execute(self, master: str, command, op_id: int, policy: AckPolicy | None = None) -> None:
        core = self.cores[master]
        _, muts = core.storage.execute(command)
        self.handle(master, core.submit(op_id, muts, policy))

    def digests(self, names=None) -> set[str]:
        return {self.cores[n].storage.digest() for n in (names or self.cores) if n not in self.down}


def _serving_with_queue() -> "Cluster":
    """Three members, n1 serving epoch 1, queue "q" created everywhere."""
    net = Cluster(NAMES)
    net.view("n1", 1)
    net.settle(3)
    net.execute("n1", CreateQueue(NS, "q"), 1)
    net.settle(3)
    return net


def _fill_past_the_log(net: "Cluster") -> None:
    """Queue "q" and 598 sends through n1, flushed one by one: a small log is trimmed."""
    net.execute("n1", CreateQueue(NS, "q"), 1)
    for i in range(2, 600):
        net.execute("n1", SendMessage(NS.key("q"), f"m{i}" + "x" * 100), i)
        net.handle("n1", net.cores["n1"].flush(net.now()))
        net.run()


def test_a_master_serves_only_after_syncing_with_a_majority():
    net = Cluster(NAMES)
    net.down = {"n2", "n3"}
    net.view("n1", 1, ("n1",))
    net.settle(3)
    assert not net.cores["n1"].serving, "alone, n1 is no majority of 3 configured members"
    net.down = set()
    net.view("n1", 1, NAMES)
    net.settle(3)
    assert net.cores["n1"].serving and net.serving == [("n1", True, 1)]
    net.execute("n1", CreateQueue(NS, "q"), 1)
    for i in range(2, 40):
        net.execute("n1", SendMessage(NS.key("q"), f"m{i}"), i)
    net.settle(3)
    assert net.completed == set(range(1, 40))
    assert len(net.digests()) == 1


def test_a_joiner_behind_the_log_gets_a_transfer_while_the_master_keeps_serving():
    net = Cluster(NAMES, log_limit=20_000, chunk_records=1)   # one 64-message group per chunk: ~10 chunks
    net.down = {"n3"}
    net.view("n1", 1, ("n1", "n2"))
    net.settle(3)
    _fill_past_the_log(net)
    assert net.cores["n1"].log.first_seq > 1, "the log was trimmed: a joiner cannot replay it"
    net.down = set()
    net.view("n1", 1, NAMES)
    before = len(net.completed)
    for i in range(600, 650):   # the master keeps completing operations during the transfer
        net.execute("n1", SendMessage(NS.key("q"), f"during {i}"), i)
        net.handle("n1", net.cores["n1"].flush(net.now()))
        net.run(20)
    net.settle(20)
    assert len(net.completed) - before == 50
    last = net.cores["n3"].last_transfer
    assert last is not None and last["direction"] == "received" and last["records"] > 600
    assert net.cores["n1"].last_transfer["direction"] == "sent"
    assert len(net.digests()) == 1
    assert net.cores["n3"].log.last_seq == net.cores["n1"].log.last_seq


def test_a_deposed_masters_unacknowledged_tail_is_reset_by_transfer():
    net = _serving_with_queue()
    # n1 is cut off and executes operations nobody acknowledges
    net.down = {"n1"}
    for i in range(2, 10):
        net.execute("n1", SendMessage(NS.key("q"), f"lost {i}"), i)
        net.handle("n1", net.cores["n1"].flush(net.now()))
    assert not net.completed & set(range(2, 10))
    net.view("n2", 2, ("n2", "n3"))
    net.settle(5)
    assert net.cores["n2"].serving
    net.execute("n2", SendMessage(NS.key("q"), "kept"), 100)
    net.settle(3)
    assert 100 in net.completed
    # n1 comes back: its view changes (its waiting ops are abandoned), and it is reset
    net.down = set()
    net.view("n2", 2, NAMES)
    net.settle(10)
    assert net.abandoned >= 1
    assert net.cores["n1"].last_transfer is not None, "the divergent member was reset by transfer"
    assert len(net.digests()) == 1
    bodies = {m.body for q in [net.cores["n1"].storage] for m in _messages(q)}
    assert "kept" in bodies and not any(b.startswith("lost") for b in bodies)


def test_a_replica_restarted_empty_is_repositioned_and_catches_up():
    net = Cluster(NAMES)
    net.view("n1", 1)
    net.settle(3)
    net.execute("n1", CreateQueue(NS, "q"), 1)
    for i in range(2, 20):
        net.execute("n1", SendMessage(NS.key("q"), f"m{i}"), i)
    net.settle(3)
    # n3 restarts with empty memory before anybody noticed a disconnection
    fresh = net.add("n3")
    net.handle("n3", fresh.install_view("n1", 1, NAMES, net.now()))
    net.execute("n1", SendMessage(NS.key("q"), "after the restart"), 50)
    net.settle(10)
    assert net.cores["n3"].log.last_seq == net.cores["n1"].log.last_seq
    assert len(net.digests()) == 1


def test_planted_bugs_are_named_and_checked():
    with pytest.raises(ValueError):
        ReplicationCore("n1", Storage(ManualClock(0)), lambda: Storage(ManualClock(0)), bugs=frozenset({"typo"}))
    core = ReplicationCore("n1", Storage(ManualClock(0)), lambda: Storage(ManualClock(0)),
                           bugs=frozenset({"skip-sync"}), configured=3)
    actions = core.install_view("n1", 1, NAMES, 0)
    assert core.serving and Serving(True, 1) in actions, "skip-sync serves without asking anyone"


def _messages(storage: Storage):
    return [m for rec in storage.iter_snapshot() if type(rec).__name__ == "MessagesRestored" for m in rec.messages]


def test_a_restarted_replica_keeps_its_transfer_when_the_view_arrives_late():
    # A node restarted empty hears from the master (which never saw it leave the view) before
    # membership delivers the view; the transfer starts at once. When the view then arrives it
    # names the very master and epoch the transfer comes from: dropping the half-restored
    # staging there made every such transfer start over (chaos reset-transfer saw it).
    net = Cluster(NAMES, log_limit=20_000, chunk_records=1)   # one 64-message group per chunk: ~10 chunks
    net.view("n1", 1)
    net.settle(3)
    _fill_past_the_log(net)
    assert net.cores["n1"].log.first_seq > 1
    fresh = net.add("n3")
    net.handle("n1", net.cores["n1"].on_peer("n3", False, net.now()))
    net.handle("n1", net.cores["n1"].on_peer("n3", True, net.now()))
    net.handle("n3", fresh.on_peer("n1", True, net.now()))
    for _ in range(200):
        net.run(1)
        if fresh.receiver is not None and fresh.receiver.expected >= 2:
            break
    assert fresh.receiver is not None and fresh.receiver.expected >= 2, "the transfer is under way"
    transfer_id = fresh.receiver.transfer_id
    net.handle("n3", fresh.install_view("n1", 1, NAMES, net.now()))
    assert fresh.receiver is not None and fresh.receiver.transfer_id == transfer_id
    net.settle(20)
    last = fresh.last_transfer
    assert last is not None and last["direction"] == "received"
    assert net.cores["n1"].last_transfer["records"] == last["records"]
    assert (("n1", 1, transfer_id) in fresh._finished_transfers), "the first pass finished, none other began"
    assert len(net.digests()) == 1


def test_a_member_restarted_empty_does_not_count_in_the_sync_quorum():
    # A member restarted empty must not count in majorities: "kept" is acknowledged by the
    # majority {n1, n2} while n3 is cut off. n1 then restarts empty and n2 goes away: n3 and the
    # empty n1 are a majority of members, but neither holds "kept". n3 must not serve before n2
    # answers.
    net = _serving_with_queue()
    net.down = {"n3"}
    net.execute("n1", SendMessage(NS.key("q"), "kept"), 2)
    net.settle(3)
    assert 2 in net.completed, "acknowledged by n1 and n2"
    net.add("n1", amnesiac=True)            # restarted: its Raft journal says it was a member
    net.down = {"n2"}
    net.view("n3", 2, ("n1", "n3"))
    net.settle(5)
    n3 = net.cores["n3"]
    assert not n3.serving, "an empty restarted member's position is no evidence of what was acknowledged"
    assert net.cores["n1"].amnesiac
    net.down = set()
    net.view("n3", 2, NAMES)
    net.settle(10)
    assert n3.serving
    assert "kept" in {m.body for m in _messages(n3.storage)}
    assert not net.cores["n1"].amnesiac, "brought up to date by the serving master"
    assert len(net.digests()) == 1


def test_a_whole_cluster_restarted_empty_may_start_once_everyone_answers():
    net = Cluster(())
    for n in NAMES:
        net.add(n, amnesiac=True)
    net.down = {"n2"}
    net.view("n1", 1, ("n1", "n3"))
    net.settle(3)
    assert not net.cores["n1"].serving, "n2 may still hold what the others lost"
    net.down = set()
    net.view("n1", 1, NAMES)
    net.settle(3)
    assert net.cores["n1"].serving and not net.cores["n1"].amnesiac
    net.execute("n1", CreateQueue(NS, "q"), 1)
    net.settle(3)
    assert 1 in net.completed and not any(c.amnesiac for c in net.cores.values())


def test_a_syncing_master_appends_nothing_before_its_own_last_entry_is_verified():
    from cluster.replication.log import Entry
    from cluster.replication.messages import Batch, Fetch, SyncStatus
    from cluster.replication.sync import SyncCoordinator
    from storage.codec import encode_many

    clock = ManualClock(0)
    store, log = Storage(clock, IdSource(1)), ReplicationLog()
    _, m1 = store.execute(CreateQueue(NS, "q"))
    log.append(Entry(1, 1, encode_many(m1), 0))   # ours: seq 1 written in epoch 1 (a deposed tail)
    sync = SyncCoordinator("n1", 5, NAMES, store, log, configured=3, retry_ms=100)
    sync.start(0)
    out = sync.on_frame("n2", SyncStatus(5, 3, 4, 1), 0)
    assert out == [Send("n2", Fetch(5, 1, 256))], "fetch from our own last entry, inclusive"
    truth = Storage(clock, IdSource(9))
    _, t1 = truth.execute(CreateQueue(NS, "q"))
    # the answer for seq 1 is lost; seq 2 (written in epoch 4 on the truth's history) arrives
    assert sync.on_frame("n2", Batch(5, 2, 4, encode_many(t1)), 0) == []
    assert log.last_seq == 1, "nothing appended onto an unverified entry"
    assert sync.on_tick(500) == [Send("n2", Fetch(5, 1, 256))], "the retry asks for our entry again"
    out = sync.on_frame("n2", Batch(5, 1, 4, encode_many(t1)), 600)
    assert [type(a).__name__ for a in out] == ["TransferFrom"], "seq 1 differs: take the snapshot"


def test_a_holder_keeps_its_transfer_to_the_new_master_when_the_view_comes_after_the_request():
    # The simulator, seed 26490: the new master n2 asks n3 (its sync's truth) for a snapshot,
    # and n3 starts sending before membership delivers the view naming n2. Installing that view
    # dropped the transfer; its lost first chunk was never resent and n2 never served.
    from cluster.replication.messages import SyncRequest, TransferRequest

    net = _serving_with_queue()
    n3 = net.cores["n3"]
    net.handle("n3", n3.on_frame("n2", SyncRequest(2), net.now()))
    net.handle("n3", n3.on_frame("n2", TransferRequest(2), net.now()))
    sender = n3.senders.get("n2")
    assert sender is not None and sender.epoch == 2
    net.handle("n3", n3.install_view("n2", 2, NAMES, net.now()))
    assert n3.senders.get("n2") is sender, "the view names the master the transfer is for"
    # any other view ends it
    net.handle("n3", n3.install_view("n1", 3, NAMES, net.now()))
    assert n3.senders == {}


def test_a_syncing_master_asks_again_for_a_snapshot_that_stalls():
    from cluster.replication.messages import SnapshotChunk, TransferRequest

    net = Cluster(NAMES, log_limit=20_000)
    net.view("n1", 1)
    net.settle(3)
    net.down = {"n2"}
    _fill_past_the_log(net)                 # n2 misses it all; n1's log no longer starts at 1
    net.settle(2)
    net.down = {"n3"}
    net.view("n2", 2, ("n1", "n2"))         # n2 must take n1's snapshot before it may serve
    n2 = net.cores["n2"]
    for _ in range(100):
        if n2.sync.state == "transferring":
            break
        net.run(1)
    assert n2.sync.state == "transferring" and not n2.serving
    # every chunk is lost, and the holder forgets its sender
    net.run(lose=lambda sender, to, frame: isinstance(frame, SnapshotChunk))
    assert "n2" in net.cores["n1"].senders
    net.cores["n1"].senders.clear()
    retry = net.cores["n2"].sync.transfer_retry_ms
    net.clock.advance(retry - 1)
    tick = net.cores["n2"].on_tick(net.now())
    assert not any(isinstance(a, Send) and isinstance(a.frame, TransferRequest) for a in tick), (
        "not before the retry time")
    net.handle("n2", tick)
    net.clock.advance(1)
    tick = net.cores["n2"].on_tick(net.now())
    assert [a.to for a in tick if isinstance(a, Send) and isinstance(a.frame, TransferRequest)] == ["n1"]
    net.handle("n2", tick)
    net.settle(20)
    assert net.cores["n2"].serving
    assert len(net.digests(["n1", "n2"])) == 1


def test_a_finished_transfer_whose_acks_were_lost_is_acked_again():
    # The simulator, seed 27331: the joiner took the whole snapshot, but its acks were lost.
    # The master resent the window and the joiner, rightly never taking a finished transfer
    # twice, answered nothing: the master resent for ever and never streamed to it.
    from cluster.replication.messages import SnapshotAck

    net = Cluster(NAMES, log_limit=20_000, chunk_records=1)
    net.down = {"n3"}
    net.view("n1", 1, ("n1", "n2"))
    net.settle(3)
    _fill_past_the_log(net)
    net.down = set()
    net.view("n1", 1, NAMES)
    n1, n3 = net.cores["n1"], net.cores["n3"]
    # n3's acks are lost once it has taken the snapshot
    net.run(lose=lambda sender, to, frame: (isinstance(frame, SnapshotAck) and sender == "n3"
                                            and n3.last_transfer is not None))
    assert n3.last_transfer is not None and n3.last_transfer["direction"] == "received"
    assert "n3" in n1.senders, "the master still waits for the acks"
    net.settle(20)                           # the resent window is acked this time
    assert "n3" not in n1.senders and n1.last_transfer["direction"] == "sent"
    net.execute("n1", SendMessage(NS.key("q"), "after the transfer"), 900)
    net.settle(5)
    assert 900 in net.completed
    assert len(net.digests()) == 1 and n3.log.last_seq == n1.log.last_seq


def _n3_behind_then_n1_down() -> "Cluster":
    """n1 serving epoch 1 sends m2..m5 while n3 is down; then n1 goes down and n3 is back."""
    net = _serving_with_queue()
    net.down = {"n3"}
    for i in range(2, 6):
        net.execute("n1", SendMessage(NS.key("q"), f"m{i}"), i)
    net.settle(3)
    net.down = {"n1"}
    return net


def test_a_new_master_behind_the_truth_fetches_what_it_lacks_with_the_epochs_it_was_written_in():
    # Fetched entries keep their written epoch: the new master's own last entry then checks out
    # against the truth's copy of it (sync.py, step 3), and the log it serves from says truly in
    # which epoch each entry was written, as the next sync's (last_epoch, last_seq) order needs.
    net = _n3_behind_then_n1_down()
    assert net.completed >= set(range(2, 6)) and net.cores["n3"].log.last_seq < net.cores["n2"].log.last_seq
    truth = [(e.seq, e.written_epoch) for e in net.cores["n2"].log.since(1, 100)]
    net.view("n3", 2, ("n2", "n3"))
    net.settle(5)
    n3 = net.cores["n3"]
    assert n3.serving
    assert n3.last_transfer is None, "its last entry is on the truth's history: a fetch, not a snapshot"
    assert [(e.seq, e.written_epoch) for e in n3.log.since(1, 100)] == truth
    assert len(net.digests(("n2", "n3"))) == 1


def test_a_view_change_ends_a_members_transfer_to_the_previous_views_syncing_master():
    # n1, deposed with a divergent tail, is master again in epoch 3 and asks n2 (the truth) for
    # its snapshot. Before the transfer ends, a view of epoch 4 comes: that transfer belongs to
    # a view that has ended, and its chunks (of epoch 3) would be refused by n1's receiver of
    # epoch 4, resent for nothing and holding n2's fuzzy read of the state until a new request.
    net = Cluster(NAMES, chunk_records=1)
    net.view("n1", 1)
    net.settle(3)
    net.execute("n1", CreateQueue(NS, "q"), 1)
    net.settle(3)
    net.down = {"n1"}
    for i in range(2, 10):
        net.execute("n1", SendMessage(NS.key("q"), f"lost {i}"), i)
        net.handle("n1", net.cores["n1"].flush(net.now()))
    net.view("n2", 2, ("n2", "n3"))
    net.settle(5)
    for i in range(100, 400):
        net.execute("n2", SendMessage(NS.key("q"), f"kept {i}" + "x" * 100), i)
    net.settle(5)
    net.down = set()
    net.view("n1", 3)
    for _ in range(20):
        if "n1" in net.cores["n2"].status(net.now())["transfers_out"]:
            break
        net.frames.step()
    assert "n1" in net.cores["n2"].status(net.now())["transfers_out"], "n1's sync asked n2 for its snapshot"
    assert net.cores["n1"].status(net.now())["sync"] is not None
    net.view("n1", 4)
    assert net.cores["n2"].status(net.now())["transfers_out"] == [], "released with the view of epoch 3"
    net.settle(20)
    assert net.cores["n1"].serving and net.cores["n1"].epoch == 4
    assert len(net.digests()) == 1


def test_a_replica_caught_up_by_a_new_master_holds_each_entry_with_the_epoch_it_was_written_in():
    # The new master streams what a replica lacks from its log: an entry written in an earlier
    # epoch must keep that epoch, or the replica's log looks newer than it is at the next sync
    # ((last_epoch, last_seq) order) and may be taken for the truth over a longer one.
    net = _n3_behind_then_n1_down()
    net.view("n2", 2, ("n2", "n3"))
    net.settle(5)
    assert net.cores["n2"].serving
    held = lambda n: [(e.seq, e.written_epoch) for e in net.cores[n].log.since(1, 100)]
    assert held("n3") == held("n2") and {epoch for _, epoch in held("n3")} == {1}


def test_a_member_streamed_to_drops_a_transfer_its_master_no_longer_sends():
    # A same-epoch view dropped n3 while the first chunk of its transfer was on the way, and the
    # master released that transfer; n3 took the chunk afterwards, then was added back and
    # streamed to as a prefix. Nothing will ever finish that receiver: the stream says so (a
    # master never streams to a member it transfers to), and its staging must not stay.
    net = _serving_with_queue()
    n3 = net.cores["n3"]
    chunk = SnapshotChunk(1, 7, 0, n3.log.last_seq, 1, encode_many([]), False)
    net.handle("n3", n3.on_frame("n1", chunk, net.now()))
    assert n3.status(net.now())["transfer_in"] == "n1", "a transfer from n1 under way"
    net.execute("n1", SendMessage(NS.key("q"), "after"), 2)
    net.settle(3)
    assert n3.status(net.now())["transfer_in"] is None
    assert len(net.digests()) == 1
