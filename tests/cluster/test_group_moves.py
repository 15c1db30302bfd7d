"""cluster/group_moves.py: each group's serving master runs the move driver, so a dead-letter move
into a queue of another group reaches it, once, through the cores' frames (cluster/moves.py has
the driver's own tests, through loss and failovers).

The cores of test_group_handover.py exchange the stream's frames; the placement of each queue
is given to every core as Raft would commit it.
"""

from __future__ import annotations

import json

from storage.commands import CreateQueue, ReceiveMessage, SendMessage

from cluster.node_core import NodeCore
from cluster.replication.messages import MoveAccepted, MoveForgot, MoveOffer
from tests.cluster.test_group_handover import NS, GroupCores


def _run(c: GroupCores, group: int, command):
    """``command`` on the group's master, answered once its ack policy is met."""
    token = object()
    c.handle(c.master(group), c.cores[c.master(group)].execute(token, command, c.now, group))
    c.tick(rounds=2)
    (answer,) = [a for a in c.answers if a.token is token]
    assert answer.error is None, answer.error
    return answer.result


def _pair(c: GroupCores, dead_group: int, source_group: int):
    """A dead-letter queue in one group and its source (maxReceiveCount 1) in another."""
    for name, group in (("dead", dead_group), ("src", source_group)):
        for n, core in c.cores.items():
            c.handle(n, core.placed((NS.region, NS.account, name), group, c.now))
    dead = _run(c, dead_group, CreateQueue(NS, "dead")).queue
    c.tick(rounds=4)   # every replica of the dead-letter queue's group holds it
    policy = json.dumps({"deadLetterTargetArn": dead.arn, "maxReceiveCount": 1})
    return dead, _run(c, source_group, CreateQueue(NS, "src", {"RedrivePolicy": policy})).queue


def _moved_once(c: GroupCores, dead_group: int, source_group: int) -> None:
    dead, src = _pair(c, dead_group, source_group)
    sent = _run(c, source_group, SendMessage(src, "to the dead letters")).message_id
    first = _run(c, source_group, ReceiveMessage(src, visibility_timeout=0))
    assert [m.message_id for m in first.messages] == [sent]
    assert _run(c, source_group, ReceiveMessage(src)).messages == ()     # it left through the outbox
    c.tick(rounds=20)
    for core in c.cores.values():
        s, d = core.groups[source_group].storage, core.groups[dead_group].storage
        assert s.message_count() == 0 and s.outbox_count() == 0 and d.moves_in() == []
    got = _run(c, dead_group, ReceiveMessage(dead, max_number_of_messages=10))
    assert [(m.message_id, m.body) for m in got.messages] == [(sent, "to the dead letters")]


def test_a_dead_letter_move_into_another_group_lands_once_and_both_groups_forget_it():
    c = GroupCores(groups=2)
    c.start()
    assert c.master(0) != c.master(1)
    _moved_once(c, 0, 1)
    kinds = [type(f) for _, _, _, f in c.sent]
    assert kinds.count(MoveOffer) == 1 and kinds.count(MoveAccepted) == 1 and kinds.count(MoveForgot) == 1


def test_a_node_that_masters_both_groups_moves_without_the_network():
    c = GroupCores(groups=2, names=("n1",))
    c.start()
    _moved_once(c, 1, 0)
    assert not [f for _, _, _, f in c.sent if type(f) in (MoveOffer, MoveAccepted, MoveForgot)]


def test_one_group_runs_no_driver():
    c = GroupCores(groups=1)
    c.start()
    core: NodeCore = c.cores[c.leader]
    c.tick(rounds=4)
    assert core.groups[0].moves.driver is None
