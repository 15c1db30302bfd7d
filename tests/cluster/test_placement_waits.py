"""cluster/node_core.py's rule for which group runs a client request (``request_group``), and
cluster/placement_waits.py: a CreateQueue of a name no group holds waits in the core for its
placement (``place``), the Raft leader asked once per name and again every ``place_retry``, until
Raft commits it (``Placed``) or ``place_timeout`` passes (``PlaceFailed``). Both runtimes only
carry these actions out (cluster/replicated.py, sim/node.py).
"""

from __future__ import annotations

from typing import Any

from storage import IdSource, ManualClock, Storage

from cluster.config import Timing
from cluster.membership import LEADER, RaftSample, Record
from cluster.node_actions import PlaceFailed, Placed, ProposePlacement, ToRaft
from cluster.node_core import CoreSettings, NodeCore
from cluster.replication.messages import Place, Send

from tests.cluster.test_group_handover import GroupCores

NAMES = ("n1", "n2", "n3")
KEY = ("us-east-1", "000000000000", "fresh")
OTHER = ("us-east-1", "000000000000", "other")


def _core(groups: int = 3, leader: bool = True) -> NodeCore:
    clock = ManualClock(1_000_000)
    core = NodeCore("n1", NAMES, CoreSettings(timing=Timing(), groups=groups), Storage(clock, IdSource(1)),
                    lambda: Storage(clock, IdSource(2)), incarnation=1, started=100.0)
    if leader:
        core.raft_sample(RaftSample(100.0, 1, LEADER, "n1", frozenset(NAMES)))
    return core


def _asks(actions: list[Any]) -> list[tuple[str, str, str]]:
    return [a.action.key for a in actions if type(a) is ToRaft and type(a.action) is ProposePlacement]


def _outcomes(actions: list[Any]) -> list[Any]:
    return [a for a in actions if type(a) in (Placed, PlaceFailed)]


def test_a_request_runs_in_its_queues_group_else_in_group_0_and_a_new_name_waits():
    core = _core()
    core.placed(OTHER, 2, 100.0)
    assert core.request_group(OTHER) == 2 and core.request_group(OTHER, creates=True) == 2
    assert core.request_group(None) == 0, "no queue named (ListQueues): group 0"
    assert core.request_group(KEY) == 0, "a queue no group holds: group 0's master answers QueueDoesNotExist"
    assert core.request_group(KEY, creates=True) is None, "a CreateQueue of a new name waits for its placement"
    one = _core(groups=1)
    assert one.request_group(KEY, creates=True) == 0 and one.request_group(None) == 0


def test_several_waiters_of_one_name_ask_once_and_are_all_placed():
    core = _core()
    first = core.place(KEY, "a", 100.0)
    assert _asks(first) == [KEY]
    assert core.place(KEY, "b", 100.1) == [], "asked already"
    assert _asks(core.place(OTHER, "c", 100.1)) == [OTHER], "another name is asked for on its own"
    out = core.placed(KEY, 1, 100.2)
    assert [type(a) for a in out] == [Record, Placed, Placed]
    assert _outcomes(out) == [Placed("a", 1), Placed("b", 1)]
    assert core.place(KEY, "d", 100.3) == [Placed("d", 1)], "a known name is placed at once"
    assert core.placed(KEY, 1, 100.4) == [], "a repeat of the commit changes nothing"


def test_an_unanswered_ask_is_repeated_then_given_up():
    core = _core()
    t = core.settings
    assert (t.place_retry, t.place_timeout) == (0.25, 5.0)
    core.place(KEY, "a", 100.0)
    assert _asks(core.tick(100.2)) == [], "not before place_retry"
    assert _asks(core.tick(100.25)) == [KEY]
    assert _asks(core.tick(100.3)) == [] and _asks(core.tick(100.5)) == [KEY]
    core.place(KEY, "b", 102.0)
    outcomes = []
    now = 100.5
    while now < 106.0:
        now = round(now + 0.05, 2)
        out = core.tick(now)
        outcomes += [(now, a) for a in _outcomes(out)]
        if outcomes:
            assert _asks(out) == []
    assert outcomes == [(105.0, PlaceFailed("a")), (105.0, PlaceFailed("b"))], \
        "given up place_timeout after the first waiter came, every waiter of the name at once"
    assert _asks(core.tick(106.0)) == [], "a name given up is asked for no more"
    assert core.request_group(KEY, creates=True) is None and _asks(core.place(KEY, "c", 106.0)) == [KEY], \
        "a new CreateQueue of the name waits afresh"


def test_a_placement_before_the_deadline_ends_the_wait():
    core = _core()
    core.place(KEY, "a", 100.0)
    core.tick(100.3)
    assert _outcomes(core.placed(KEY, 2, 101.0)) == [Placed("a", 2)]
    for k in range(1, 120):
        out = core.tick(101.0 + k * 0.05)
        assert _asks(out) == [] and _outcomes(out) == []


def test_a_restored_directory_places_the_waiters_it_names():
    core = _core()
    core.place(KEY, "a", 100.0)
    core.place(OTHER, "b", 100.0)
    out = core.directory_restored((KEY + (2,),))
    assert out == [Placed("a", 2)]
    assert _outcomes(core.tick(105.0)) == [PlaceFailed("b")]


def test_a_follower_asks_the_raft_leader_over_the_stream_and_none_while_no_leader_is_known():
    c = GroupCores()
    c.start()
    out = c.cores["n2"].place(KEY, "a", c.now)
    assert [(a.to, a.frame) for a in out if type(a) is Send] == [("n1", Place(KEY))]
    alone = _core(leader=False)
    assert alone.place(KEY, "a", 100.0) == [], "no leader to ask: the next tick's ask may find one"
    assert _outcomes(alone.tick(105.0)) == [PlaceFailed("a")]
