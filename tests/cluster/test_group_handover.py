"""cluster/group_core.py's handover and resignation, and cluster/node_core.py's routing of them,
with several replication groups: a group master hands its group over (an operator's
``step-down --group``, or the Raft leader's balance step), releases it once the target holds
its whole log, and the leader's next view moves the group; a master whose group lease lapsed
while Raft still reaches it resigns the group.

Three cores of three groups exchange stream frames (each with its group, as an EM2 bundle's
item carries it) through an in-order queue; Raft's side is played by the test, as in
test_node_core.py.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from storage import IdSource, ManualClock, Storage
from storage.commands import CreateQueue, Namespace

from cluster.config import Timing
from cluster.errors import NotServing
from cluster.membership import FOLLOWER, LEADER, ProposeView, RaftSample, Record
from cluster.node_actions import Answer, FlushDue, ToRaft
from cluster.node_core import CoreSettings, NodeCore
from cluster.replication.messages import HandOver, Released, Resign, Send

NS = Namespace("us-east-1", "000000000000")
NAMES = ("n1", "n2", "n3")
TIMING = Timing(rebalance_quiet=1.0)


class GroupCores:
    def __init__(self, groups: int = 3, timing: Timing = TIMING, names: tuple[str, ...] = NAMES) -> None:
        self.names = names
        self.clock = ManualClock(1_000_000)
        self.now = 100.0
        self.cores: dict[str, NodeCore] = {}
        self.queue: deque[tuple[str, str, int, Any]] = deque()
        self.cut: set[tuple[str, str]] = set()        # (from, to) stream links that lose every frame
        self.sent: list[tuple[str, str, int, Any]] = []
        self.records: list[tuple[str, Record]] = []
        self.answers: list[Answer] = []
        settings = CoreSettings(timing=timing, groups=groups)
        for i, n in enumerate(names):
            self.cores[n] = NodeCore(n, names, settings, Storage(self.clock, IdSource(i + 1)),
                                     lambda i=i: Storage(self.clock, IdSource(i + 100)), incarnation=i + 1,
                                     started=self.now)
        self.leader = "n1"
        self.term = 1

    def handle(self, name: str, actions: list[Any]) -> list[Any]:
        flush = False
        for a in actions:
            t = type(a)
            if t is Send:
                self.sent.append((name, a.to, a.group, a.frame))
                if (name, a.to) not in self.cut:
                    self.queue.append((name, a.to, a.group, a.frame))
            elif t is ToRaft:
                if type(a.action) is ProposeView:
                    for n, c in self.cores.items():
                        self.handle(n, c.view_committed(a.action.view, self.now))
            elif t is FlushDue:
                flush = True
            elif t is Record:
                self.records.append((name, a))
            elif t is Answer:
                self.answers.append(a)
        if flush:
            self.handle(name, self.cores[name].flush(self.now))
        return actions

    def run(self) -> None:
        while self.queue:
            sender, to, group, frame = self.queue.popleft()
            self.handle(to, self.cores[to].frame(sender, frame, self.now, group))

    def tick(self, rounds: int = 1, seconds: float = 0.05) -> None:
        """Time passes; the Raft leader's followers keep acking it meanwhile."""
        for _ in range(rounds):
            self.now += seconds
            self.clock.advance(int(seconds * 1000))
            self.ack()
            for n, c in self.cores.items():
                self.handle(n, c.tick(self.now))
            self.run()

    def ack(self) -> None:
        leader = self.leader
        for p in self.names:
            if p != leader:
                self.handle(p, self.cores[p].leader_contact(leader, self.now))
                self.handle(leader, self.cores[leader].lease_acked(p, self.term, self.now, self.now))

    def start(self) -> None:
        """Links up, n1 leads Raft, and every group's master serves."""
        self.tick(rounds=6)
        for n, c in self.cores.items():
            self.handle(n, c.raft_sample(RaftSample(self.now, self.term, LEADER if n == self.leader else FOLLOWER,
                                                    self.leader, frozenset(self.names))))
        for _ in range(80):
            self.tick()
            if all(self.serving(g) for g in range(len(self.slots()))):
                return
        raise AssertionError(f"not every group served: {self.slots()}")

    def slots(self) -> tuple[tuple[str, int], ...]:
        return self.cores["n1"].view.groups

    def master(self, group: int) -> str:
        return self.slots()[group][0]

    def serving(self, group: int) -> str | None:
        on = [n for n, c in self.cores.items() if c.serving(self.now, group)]
        assert len(on) <= 1, f"two masters of group {group}: {on}"
        return on[0] if on else None

    def execute(self, name: str, group: int, command: Any) -> list[Answer]:
        return [a for a in self.handle(name, self.cores[name].execute(object(), command, self.now, group))
                if type(a) is Answer]

    def events(self, event: str) -> list[tuple[str, dict]]:
        return [(n, r.fields) for n, r in self.records if r.event == event]


def other_than(c: GroupCores, *names: str) -> str:
    return next(n for n in c.names if n not in names)


def test_a_step_down_of_one_group_abdicates_at_once_releases_it_and_the_view_moves_it():
    c = GroupCores()
    c.start()
    g = next(g for g in range(3) if c.master(g) != c.leader)    # a master that is not the Raft leader
    master, epoch = c.slots()[g]
    to = other_than(c, master, c.leader)
    c.execute(master, g, CreateQueue(NS, "first"))    # the target has yet to ack it
    c.handle(master, c.cores[master].step_down(c.now, to, group=g))
    assert not c.events("released")
    assert c.serving(g) is None, "abdicated: nothing more executes there"
    (answer,) = c.execute(master, g, CreateQueue(NS, "q"))
    assert isinstance(answer.error, NotServing)     # the retryable 503
    assert "handing the group over" in str(answer.error)
    assert c.events("handover") == [(master, {"epoch": epoch, "to": to, "group": g})]
    c.tick(rounds=20)
    assert c.events("released") == [(master, {"epoch": epoch, "to": to, "group": g})]
    released = [(s, t) for s, t, gr, f in c.sent if type(f) is Released and gr == g]
    assert sorted(released) == [(master, m) for m in NAMES if m != master], "to every member"
    assert (master, c.leader, g, Resign(epoch, to)) in c.sent, "and the Raft leader learns of it"
    assert c.slots()[g][0] == to and c.slots()[g][1] > epoch
    assert c.serving(g) == to
    token = object()
    c.handle(to, c.cores[to].execute(token, CreateQueue(NS, "q"), c.now, g))
    c.tick(rounds=2)
    assert [a.error for a in c.answers if a.token is token] == [None]


def test_a_step_down_naming_no_target_hands_the_group_to_a_caught_up_replica():
    c = GroupCores()
    c.start()
    g = next(g for g in range(3) if c.master(g) == c.leader)    # the Raft leader's own group
    c.handle(c.leader, c.cores[c.leader].step_down(c.now, None, group=g))
    c.tick(rounds=20)
    (_, fields), = c.events("released")
    assert fields["to"] != c.leader and c.master(g) == fields["to"] and c.serving(g) == fields["to"]


def test_a_step_down_is_refused_by_a_node_that_is_not_the_groups_master_or_names_no_member():
    c = GroupCores()
    c.start()
    master = c.master(0)
    other = other_than(c, master)
    assert c.cores[other].step_down(c.now, None, group=0) == []
    assert c.cores[master].step_down(c.now, master, group=0) == []
    assert c.cores[master].step_down(c.now, "n9", group=0) == []
    assert c.cores[master].step_down(c.now, None, group=7) == []
    assert c.serving(0) == master


def test_a_handover_whose_target_never_catches_up_resumes_after_the_fallback_and_an_election():
    c = GroupCores()
    c.start()
    g = next(g for g in range(3) if c.master(g) != c.leader)
    master, epoch = c.slots()[g]
    to = other_than(c, master, c.leader)
    c.execute(master, g, CreateQueue(NS, "q"))
    c.cut.add((master, to))      # the target hears no more of the stream
    c.execute(master, g, CreateQueue(NS, "q2"))
    c.handle(master, c.cores[master].step_down(c.now, to, group=g))
    t = TIMING
    c.tick(rounds=int((t.leader_fallback + t.election_max) / 0.05) - 2)
    assert c.serving(g) is None and not c.events("released")
    c.tick(rounds=4)
    assert c.events("handover_failed") == [(master, {"epoch": epoch, "to": to, "group": g})]
    assert c.slots()[g] == (master, epoch) and c.serving(g) == master, "it resumes in its epoch"


def test_a_step_down_that_breaks_balance_is_undone_by_the_leaders_handover_after_the_quiet_period():
    c = GroupCores(groups=4)
    c.start()
    loads = {n: [m for m, _ in c.slots()].count(n) for n in NAMES}
    idle = min(NAMES, key=lambda n: (loads[n], n != c.leader))
    busy = max(NAMES, key=lambda n: loads[n])
    g = next(g for g in range(4) if c.master(g) == idle)
    c.handle(idle, c.cores[idle].step_down(c.now, busy, group=g))
    c.tick(rounds=10)
    assert c.master(g) == busy
    c.tick(rounds=int(TIMING.rebalance_quiet / 0.05) + 30)
    (_, asked), = [(n, f) for n, f in c.events("handover_requested")]
    assert asked["to"] == idle and asked["master"] == busy
    if busy != c.leader:      # the request went over the stream
        assert (c.leader, busy, asked["group"], HandOver(asked["epoch"], idle)) in c.sent
    assert c.master(asked["group"]) == idle and c.serving(asked["group"]) == idle
    assert sorted([m for m, _ in c.slots()].count(n) for n in NAMES) == [1, 1, 2]


def test_a_handover_request_of_an_older_epoch_is_ignored():
    c = GroupCores()
    c.start()
    g = next(g for g in range(3) if c.master(g) != c.leader)
    master, epoch = c.slots()[g]
    c.handle(c.leader, [Send(master, HandOver(epoch - 1, c.leader), g)])
    c.run()
    assert not c.events("handover") and c.serving(g) == master


def test_a_master_that_reaches_raft_but_not_its_members_resigns_and_the_group_moves():
    c = GroupCores(groups=5, names=("n1", "n2", "n3", "n4", "n5"))
    c.start()
    g = next(g for g in range(5) if c.master(g) != c.leader)
    master, epoch = c.slots()[g]
    for n in c.names:         # its stream reaches the Raft leader alone: no majority acks its beats
        if n not in (master, c.leader):
            c.cut.add((master, n))
            c.cut.add((n, master))
    c.tick(rounds=int(TIMING.leader_fallback / 0.05) + 8)
    assert (master, {"epoch": epoch, "to": None, "group": g}) in c.events("resign")
    assert (master, c.leader, g, Resign(epoch)) in c.sent
    new, new_epoch = c.slots()[g]
    assert new != master and new_epoch > epoch


def test_a_resign_from_a_member_the_view_does_not_name_is_ignored():
    c = GroupCores()
    c.start()
    g = 0
    master, epoch = c.slots()[g]
    impostor = other_than(c, master, c.leader) if master != c.leader else other_than(c, master)
    view = c.cores[c.leader].view
    c.handle(impostor, [Send(c.leader, Resign(epoch), g), Send(c.leader, Resign(epoch, impostor), g)])
    c.run()
    c.tick(rounds=4)
    assert c.cores[c.leader].view == view
