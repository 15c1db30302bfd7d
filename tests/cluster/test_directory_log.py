"""cluster/runtime.py's _DirectoryLog: queue placements committed through real pysyncobj.

Three MembershipNodes in this process, on one loop, each with its own pysyncobj thread and
authenticated Raft links on localhost; no stream, no storage."""

from __future__ import annotations

import asyncio
import pickle
import socket
import statistics
import time
from pathlib import Path

from cluster.config import Address, ClusterConfig, NodeConfig, NodeSpec, Timing
from cluster.directory import Directory
from cluster.membership import LEADER
from cluster.runtime import MembershipNode, _DirectoryLog
from tests.cluster.scripted_raft import SECRET, eventually, run

NAMES = ("n1", "n2", "n3")
# An AppendEntries period far above a placement's commit: a placement that waited for the next
# period would take 100 ms on average.
SLOW_BEATS = Timing(heartbeat=0.2, lease=0.25, vote_guard=0.3, election_min=0.7, election_max=1.0)


class Events:
    """What the loop hears from Raft; only the directory's events are kept."""

    def __init__(self) -> None:
        self.placements: list[tuple[float, tuple, int]] = []
        self.restored: list[tuple] = []
        self.role = None

    def raft_sample(self, sample) -> None:
        self.role = sample.role

    def placed(self, key, group) -> None:
        self.placements.append((time.monotonic(), key, group))

    def directory_restored(self, record) -> None:
        self.restored.append(record)

    def groups_of(self) -> list[tuple[tuple, int]]:
        return [(k, g) for _, k, g in self.placements]

    def lease_acked(self, *_a) -> None: ...
    def leader_contact(self, *_a) -> None: ...
    def view_committed(self, _view) -> None: ...
    def fence(self, _term) -> None: ...
    def member_changed(self, *_a) -> None: ...
    def raft_stats(self, _stats) -> None: ...


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cluster(timing: Timing) -> ClusterConfig:
    return ClusterConfig("dir", SECRET, tuple(NodeSpec(n, Address("127.0.0.1", _free_port()),
                                                       Address("127.0.0.1", _free_port())) for n in NAMES),
                         timing=timing)


async def _start(cluster: ClusterConfig, groups: int, state: Path | None = None,
                 names: tuple[str, ...] = NAMES) -> tuple[dict[str, MembershipNode], dict[str, Events]]:
    events = {n: Events() for n in names}
    nodes = {n: MembershipNode(NodeConfig(n, cluster, state_dir=str(state / n) if state else None), events[n],
                               groups=groups) for n in names}
    for m in nodes.values():
        m.start()
    return nodes, events


async def _stop(nodes: dict[str, MembershipNode]) -> None:
    loop = asyncio.get_running_loop()
    for m in nodes.values():
        await loop.run_in_executor(None, m.stop)


async def _leader(events: dict[str, Events]) -> str:
    await eventually(lambda: any(e.role == LEADER for e in events.values()), 10, "a Raft leader")
    return next(n for n, e in events.items() if e.role == LEADER)


def key(i: int) -> tuple[str, str, str]:
    return ("us-east-1", "000000000000", f"q{i}")


@run
async def test_placements_commit_on_every_member_balanced_and_without_waiting_for_a_heartbeat(tmp_path):
    cluster = _cluster(SLOW_BEATS)
    nodes, events = await _start(cluster, groups=3, state=tmp_path)
    try:
        leader = await _leader(events)
        mine = events[leader]
        took = []
        for i in range(30):
            start = time.monotonic()
            nodes[leader].propose_place(key(i))
            await eventually(lambda: len(mine.placements) == i + 1, 5, f"placement {i} committed")
            took.append(mine.placements[-1][0] - start)
        assert statistics.median(took) < SLOW_BEATS.heartbeat / 4, took
        # two members asking for one new name at once: both placements commit, and agree
        nodes[leader].propose_place(key(30))
        nodes[leader].propose_place(key(30))
        await eventually(lambda: all(len(e.placements) == 32 for e in events.values()), 5, "every member has all")
        placed = mine.groups_of()
        assert placed[-2:] == [(key(30), 0), (key(30), 0)]
        assert all(e.groups_of() == placed for e in events.values())
        d = Directory()
        for k, g in placed:
            d.learn(k, g)
        assert d.counts(3) == (11, 10, 10)
    finally:
        await _stop(nodes)

    # Restarted from their state-dirs, the members replay the placements from Raft's journal.
    nodes, events = await _start(cluster, groups=3, state=tmp_path)
    try:
        await eventually(lambda: all(e.groups_of() == placed for e in events.values()), 10, "the replay")
    finally:
        await _stop(nodes)


@run
async def test_one_group_registers_the_views_alone_and_a_proposed_placement_is_dropped():
    nodes, events = await _start(_cluster(Timing()), groups=1, names=("n1",))
    try:
        n1 = nodes["n1"]
        so = n1._so
        assert so._SyncObj__consumers == [n1._views]
        assert so._methodToID == {(id(n1._views), "install_v0"): 0}, "the view keeps method id 0"
        n1.propose_place(key(0))
        await asyncio.sleep(0.1)
        assert events["n1"].placements == []
    finally:
        await _stop(nodes)
    nodes, _ = await _start(_cluster(Timing()), groups=3, names=("n1",))
    try:
        n1 = nodes["n1"]
        assert n1._so._SyncObj__consumers == [n1._views, n1._directory]
        assert n1._so._methodToID[(id(n1._views), "install_v0")] == 0
        assert n1._so._methodToID[(id(n1._directory), "place_v0")] == 1
    finally:
        await _stop(nodes)


def test_the_consumer_applies_places_and_its_snapshot_is_the_record():
    seen, restored = [], []
    log = _DirectoryLog(lambda k, g: seen.append((k, g)), restored.append)
    assert [log.place(list(key(i)), 2, _doApply=True) for i in range(3)] == [0, 1, 0]
    assert log.place(key(1), 2, _doApply=True) == 1
    assert log.place(("r", "a"), 2, _doApply=True) is None, "a malformed entry is refused, not raised"
    assert log.place(key(9), 0, _doApply=True) is None
    assert seen == [(key(0), 0), (key(1), 1), (key(2), 0), (key(1), 1)]
    data = pickle.loads(pickle.dumps(log._serialize()))     # pysyncobj's dump, then a load
    assert data == {"record": log.directory.to_record()}
    other = _DirectoryLog(lambda k, g: None, restored.append)
    other._deserialize(data)
    assert other.directory == log.directory and restored == [log.directory.to_record()]
