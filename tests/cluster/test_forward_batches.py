"""cluster/forward_batches.py: a turn's forwards and answers, one frame per peer, driven directly.
The runtime's use of it over real sockets is tests/cluster/test_replicated.py's."""

from __future__ import annotations

from cluster.forward_batches import ForwardBatcher
from cluster.replication.messages import BATCHES_READ, Forward, ForwardBatch, ForwardReplies, ForwardReply

ALL = lambda rid: True  # noqa: E731   the core still waits for every request


def test_until_a_peer_reads_batches_each_request_and_answer_is_its_own_frame():
    """What a build without the batch frames sends and reads: nothing else goes to such a peer."""
    member, master = ForwardBatcher(), ForwardBatcher()
    member.forward("n1", Forward(1, b"a"))
    member.forward("n1", Forward(2, b"b"))
    assert member.pending
    sent = member.take(ALL)
    assert sent == [("n1", Forward(1, b"a"), (1,)), ("n1", Forward(2, b"b"), (2,))] and not member.pending
    # the master serves them as always, and tells the member once in the turn that it reads batches
    assert [master.received("n2", f) for _, f, _ in sent] == [[Forward(1, b"a")], [Forward(2, b"b")]]
    master.reply("n2", 1, b"A")
    master.reply("n2", 2, b"B")
    assert master.take(ALL) == [("n2", ForwardReply(BATCHES_READ, b""), ()),
                                ("n2", ForwardReply(1, b"A"), ()), ("n2", ForwardReply(2, b"B"), ())]


def test_once_told_a_member_batches_its_turn_and_the_master_answers_in_one_frame():
    member, master = ForwardBatcher(), ForwardBatcher()
    assert member.received("n1", ForwardReply(BATCHES_READ, b"")) == [], "not an answer to anything"
    for rid in (3, 4, 5):
        member.forward("n1", Forward(rid, b"r%d" % rid))
    member.forward("n3", Forward(6, b"elsewhere"))   # another master (of another view) is told nothing yet
    sent = member.take(ALL)
    assert sent == [("n1", ForwardBatch(((3, b"r3"), (4, b"r4"), (5, b"r5"))), (3, 4, 5)),
                    ("n3", Forward(6, b"elsewhere"), (6,))]
    # the master reads each item as the Forward it stands for, in order, and learns the member reads batches
    assert master.received("n2", sent[0][1]) == [Forward(3, b"r3"), Forward(4, b"r4"), Forward(5, b"r5")]
    assert not master.pending, "a member that batches is not told again"
    master.reply("n2", 4, b"R4")
    master.reply("n2", 3, b"R3")
    (answers,) = master.take(ALL)
    assert answers == ("n2", ForwardReplies(((4, b"R4"), (3, b"R3"))), ())
    assert member.received("n1", answers[1]) == [ForwardReply(4, b"R4"), ForwardReply(3, b"R3")]
    assert master.take(ALL) == [], "nothing is sent twice"


def test_a_batch_from_a_peer_shows_it_reads_them():
    b = ForwardBatcher()
    assert b.received("n2", ForwardBatch(())) == []
    b.forward("n2", Forward(1, b"x"))
    b.reply("n2", 9, b"y")
    assert b.take(ALL) == [("n2", ForwardBatch(((1, b"x"),)), (1,)), ("n2", ForwardReplies(((9, b"y"),)), ())]
    c = ForwardBatcher()
    c.received("n1", ForwardReplies(((1, b"z"),)))
    c.forward("n1", Forward(2, b"w"))
    assert c.take(ALL) == [("n1", ForwardBatch(((2, b"w"),)), (2,))], "even one request goes as a batch"


def test_a_request_the_core_failed_within_the_turn_is_not_sent():
    """A lost link or a new master fails a request before the turn ends: its client was told,
    and the master must not run it after that."""
    b = ForwardBatcher()
    b.readers.add("n1")
    for rid in (1, 2, 3):
        b.forward("n1", Forward(rid, b"r"))
    b.forward("n3", Forward(4, b"r"))
    assert b.take(lambda rid: rid == 2) == [("n1", ForwardBatch(((2, b"r"),)), (2,))]
    b.forward("n1", Forward(5, b"r"))
    assert b.take(lambda rid: False) == [] and not b.pending
