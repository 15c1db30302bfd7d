"""Failures the chaos runs provoke (docs/testing.md, "Chaos tests"), reduced to the sans-I/O cores,
so that a plain unit test guards against each."""

from __future__ import annotations

from storage.commands import CreateQueue, ReceiveMessage, SendMessage
from cluster.replication.messages import AckPolicy, SnapshotChunk
from tests.replication.test_core import NS, Cluster


def _messages(storage) -> set[str]:
    out = set()
    for _ in range(50):
        res, _ = storage.execute(ReceiveMessage(NS.key("q"), max_number_of_messages=10, visibility_timeout=600))
        if not res.messages:
            break
        out.update(m.body for m in res.messages)
    return out


def test_late_duplicate_snapshot_chunks_do_not_roll_a_replica_back():
    """`python -m tests.chaos --seed 1 --runs 14 --only 5` plays this (reset-transfer, 12,000 x 1 KB
    messages, 813 KB/s link). The sender resends its whole unacked window after resend_after_ms;
    on a slow link the resent copies arrive after the originals completed the transfer. The
    joiner then has no receiver (core.receiver is None); were core._on_chunk to start a new one
    for the resent chunk 0, a complete resent set would be taken as a second transfer:
    StorageReplaced with the snapshot as of at_seq and the log reset to at_seq, below what it has
    already acked (two transfer_finished events for one transfer, 0.6 s apart, and the master's
    "refused a frame from n1: snapshot ack without a transfer to it"). Acknowledgements counted
    for the `majority` policy would then be backed by nothing, and a failover would lose them.
    The replication core remembers the transfers it took, so resent chunks of one are refused."""
    net = Cluster(("n1", "n2", "n3"), log_limit=20_000, chunk_records=50)
    net.down = {"n3"}
    net.view("n1", 1, ("n1", "n2"))
    net.settle(3)
    net.execute("n1", CreateQueue(NS, "q"), 1)
    for i in range(2, 300):
        net.execute("n1", SendMessage(NS.key("q"), f"m{i}" + "x" * 100), i)
        net.handle("n1", net.cores["n1"].flush(net.now()))
        net.run()
    assert net.cores["n1"].log.first_seq > 1, "the log was trimmed: n3 needs a transfer"

    # n3 joins; every snapshot chunk sent to it is also kept, as a resend still in flight would be.
    chunks: list[tuple[str, str, object]] = []
    handle = net.handle

    def keep(name, actions):
        for a in actions:
            if type(getattr(a, "frame", None)) is SnapshotChunk and a.to == "n3":
                chunks.append((name, a.to, a.frame))
        handle(name, actions)
    net.handle = keep
    net.down = set()
    net.view("n1", 1)
    net.settle(10)
    net.handle = handle
    assert net.cores["n3"].last_transfer["direction"] == "received"
    assert len(net.digests()) == 1

    # n2 goes down: the majority is n1 + n3. A send is acknowledged on n3's ack.
    net.down = {"n2"}
    net.execute("n1", SendMessage(NS.key("q"), "acknowledged"), 1000, AckPolicy.MAJORITY)
    net.handle("n1", net.cores["n1"].flush(net.now()))
    net.run()
    assert 1000 in net.completed, "n3 acked the batch: the send is acknowledged"
    acked = net.cores["n3"].log.last_seq

    # The late resent copies of the chunks arrive.
    for sender, to, frame in chunks:
        net.handle(to, net.cores[to].on_frame(sender, frame, net.now()))
    net.run()
    assert net.cores["n3"].log.last_seq >= acked, (
        f"n3 went back from seq {acked}, which it acknowledged, to {net.cores['n3'].log.last_seq}")

    # n1 dies before n3 is repositioned; n2 returns; n3 (the most advanced) becomes master.
    net.down = {"n1"}
    net.view("n3", 2, ("n2", "n3"))
    net.settle(10)
    assert "acknowledged" in _messages(net.cores["n3"].storage), "an acknowledged send was lost"
