"""cluster/read_barrier.py: a read across replication groups (ListQueues, the dead-letter checks)
runs on its group's master only once that node's replica of every other group has applied what
that group's master held when asked, so it sees every write acknowledged before it began; with
no answer from a group's master within election-max it is refused, retryably.

Three cores of three groups, as in test_group_handover.py (whose harness this reuses).
"""

from __future__ import annotations

from storage.commands import (
    CreateQueue, ListDeadLetterSourceQueues, ListQueues, QueueKey, SendMessage, SetQueueAttributes,
    StartMessageMoveTask,
)

from cluster.errors import NotServing
from cluster.read_barrier import reads_across_groups
from cluster.replication.messages import Barrier, BarrierAt, Batch
from tests.cluster.test_group_handover import NS, GroupCores, other_than


def _names(answer) -> list[str]:
    return sorted(q.name for q in answer.result.queues)


def _lagging_replica(c: GroupCores) -> tuple[str, str, int]:
    """Group 1's master creates "late" while its link to group 0's master loses every frame:
    the third member's ack answers it, and group 0's master's replica of group 1 lacks it.
    (group 0's master, group 1's master, the seq of the create)."""
    m0, m1 = c.master(0), c.master(1)
    assert m0 != m1
    c.cut.add((m1, m0))
    token = object()
    c.handle(m1, c.cores[m1].execute(token, CreateQueue(NS, "late"), c.now, 1))
    c.run()
    assert [a.error for a in c.answers if a.token is token] == [None], "acknowledged"
    c.cut.discard((m1, m0))
    seq = c.cores[m1].groups[1].replication.log.last_seq
    assert c.cores[m0].groups[1].replication.log.last_seq < seq
    return m0, m1, seq


def test_list_queues_waits_until_the_replica_has_what_the_other_groups_master_acknowledged():
    c = GroupCores()
    c.start()
    c.execute(c.master(0), 0, CreateQueue(NS, "early"))
    c.tick(rounds=2)
    m0, m1, seq = _lagging_replica(c)
    token = object()
    c.handle(m0, c.cores[m0].execute(token, ListQueues(NS), c.now, 0))
    assert not [a for a in c.answers if a.token is token], "it waits for the barriers"
    asked = [(to, g) for s, to, g, f in c.sent if s == m0 and type(f) is Barrier]
    assert sorted(asked) == sorted([(m1, 1), (c.master(2), 2)]), "one ask per foreign group, to its master"
    c.run()
    assert (m1, m0, 1) in [(s, to, g) for s, to, g, f in c.sent if type(f) is BarrierAt and f.seq == seq]
    assert not [a for a in c.answers if a.token is token], "the replica has not applied that seq yet"
    for _ in range(40):
        c.tick()
        done = [a for a in c.answers if a.token is token]
        if done:
            break
    (answer,) = done
    assert answer.error is None and _names(answer) == ["early", "late"]
    assert c.cores[m0].groups[1].replication.log.last_seq >= seq


def test_a_read_with_no_answer_from_a_groups_master_is_refused_retryably_after_election_max():
    c = GroupCores()
    c.start()
    m0, m1 = c.master(0), c.master(1)
    c.cut |= {(m0, m1), (m1, m0)}
    token = object()
    c.handle(m0, c.cores[m0].execute(token, ListQueues(NS), c.now, 0))
    c.tick(rounds=int(c.cores[m0].timing.election_max / 0.05) - 1)
    assert not [a for a in c.answers if a.token is token]
    c.tick(rounds=2)
    (answer,) = [a for a in c.answers if a.token is token]
    assert isinstance(answer.error, NotServing) and "cannot read group 1" in str(answer.error)
    assert len([f for s, to, g, f in c.sent if s == m0 and to == m1 and type(f) is Barrier]) > 1, "asked again"
    assert not c.cores[m0].barriers.reads


def test_only_a_serving_master_answers_a_barrier_and_after_cutting_what_it_executed():
    c = GroupCores()
    c.start()
    m1 = c.master(1)
    other = other_than(c, m1)
    assert c.cores[other].frame(m1, Barrier(7), c.now, 1) == [], "not the group's master: no answer"
    before = c.cores[m1].groups[1].replication.log.last_seq
    c.cores[m1].execute(object(), CreateQueue(NS, "staged"), c.now, 1)   # staged: no end of turn yet
    assert c.cores[m1].groups[1].replication.log.last_seq == before
    out = c.cores[m1].frame(other, Barrier(7), c.now, 1)
    (at,) = [a.frame for a in out if type(a.frame) is BarrierAt]
    assert at.nonce == 7 and at.epoch == c.slots()[1][1] and at.seq == before + 1
    assert [a.frame.seq for a in out if type(a.frame) is Batch][-1] == at.seq, "the staged operation cut first"


def test_single_group_commands_and_reads_with_every_group_served_here_ask_nobody():
    c = GroupCores()
    c.start()
    m0 = c.master(0)
    c.execute(m0, 0, CreateQueue(NS, "q"))
    c.tick(rounds=2)
    c.execute(m0, 0, SendMessage(QueueKey(NS.region, NS.account, "q"), "body"))
    c.tick(rounds=2)
    assert not [f for s, to, g, f in c.sent if type(f) is Barrier]
    alone = GroupCores(groups=2, names=("n1",))
    alone.start()
    (answer,) = alone.execute("n1", 0, ListQueues(NS))
    assert answer.error is None and not [f for s, to, g, f in alone.sent if type(f) is Barrier]


def test_the_commands_that_read_other_groups():
    dlq = '{"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:d", "maxReceiveCount": "2"}'
    key = QueueKey(NS.region, NS.account, "q")
    assert reads_across_groups(ListQueues(NS))
    assert reads_across_groups(ListDeadLetterSourceQueues(key))
    assert reads_across_groups(StartMessageMoveTask(NS, "arn:aws:sqs:us-east-1:000000000000:d"))
    assert reads_across_groups(CreateQueue(NS, "q", {"RedrivePolicy": dlq}))
    assert reads_across_groups(SetQueueAttributes(key, {"RedrivePolicy": dlq}))
    assert not reads_across_groups(CreateQueue(NS, "q", {"VisibilityTimeout": "5"}))
    assert not reads_across_groups(SetQueueAttributes(key, None))
    assert not reads_across_groups(SendMessage(key, "body"))
