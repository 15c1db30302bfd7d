"""Queues split across replication groups (storage/catalogue.py): the cross-group checks and
reads answer exactly as one storage holding every queue.

``Twin`` runs each command twice: on one ``Storage`` that holds every queue, and on the group
that holds the command's queue among storages joined by ``StoragesCatalogue``; ListQueues runs
on every group. Both answers must be equal, or both errors the same (code, status, message),
and a rejected command changes no storage. Every group's mutations are applied to a replica
that has no catalogue, and each test ends with every replica on its master's digest: what a
cross-group check decided is carried by the mutations, never re-read.

Each scenario runs under every placement of its queues on the groups (both ways round for
each pair), so each cross-group path and each local one is taken. The SQS behaviour itself
(codes, wordings, paging) is what test_redrive.py and test_queue_actions.py pin to their AWS
sources; here the single storage is the reference.
"""

from __future__ import annotations

import itertools
import json

import pytest

from storage import IdSource, ManualClock, SqsError, Storage
from storage.catalogue import StoragesCatalogue
from storage.commands import (
    CreateQueue, DeleteQueue, GetQueueAttributes, ListDeadLetterSourceQueues, ListMessageMoveTasks, ListQueues,
    Namespace, QueueKey, SetQueueAttributes, StartMessageMoveTask,
)
from storage.keys import parse_arn
from storage.mutations import QueueCreated
from storage.results import StartMessageMoveTaskResult
from tests.storage.queue_env import NS, OTHER_ACCOUNT, OTHER_REGION, START_MS, fifo, redrive, walk

GROUPS = 3


def placements(names: tuple[str, ...], groups: int = GROUPS) -> list[dict[str, int]]:
    """Every way of putting ``names`` into ``groups`` groups (``groups ** len(names)`` of them)."""
    return [dict(zip(names, gs)) for gs in itertools.product(range(groups), repeat=len(names))]


def ids(placement: dict[str, int]) -> str:
    return ",".join(f"{n}@{g}" for n, g in placement.items())


class Twin:
    """One storage with every queue beside ``GROUPS`` storages joined by a catalogue; a queue
    named n lives in group ``placement[n]``, whatever its account or region."""

    def __init__(self, placement: dict[str, int]):
        self.placement = placement
        self.clock = ManualClock(START_MS)
        self.single = Storage(self.clock, IdSource(7))
        self.groups = [Storage(self.clock, IdSource(100 + g)) for g in range(GROUPS)]
        self.replicas = [Storage(self.clock, IdSource(900 + g)) for g in range(GROUPS)]
        StoragesCatalogue.join(self.groups)

    def group_of(self, command) -> int | None:
        """The group that executes ``command``: its queue's, or None for a read of every group."""
        if isinstance(command, CreateQueue):
            return self.placement[command.name]
        if isinstance(command, StartMessageMoveTask):
            return self.placement[parse_arn(command.source_arn).name]
        if isinstance(command, ListQueues):
            return None
        return self.placement[command.queue.name]

    def run(self, command):
        """Run on both sides; return the single storage's answer (or raise its error)."""
        g = self.group_of(command)
        expected, error = _outcome(self.single, command)
        before = [s.digest() for s in self.groups]
        for at in (range(GROUPS) if g is None else (g,)):
            got, got_error = _outcome(self.groups[at], command)
            if error is not None:
                assert got_error is not None, f"group {at} accepted what one storage refused: {error.message}"
                assert (got_error.code, got_error.status, got_error.message) == \
                    (error.code, error.status, error.message)
                assert [s.digest() for s in self.groups] == before, "a rejected command changed a group"
                continue
            assert got_error is None, f"group {at} refused what one storage accepted: {got_error.message}"
            result, mutations = got
            self.replicas[at].apply_many(mutations)
            assert [type(m) for m in mutations] == [type(m) for m in expected[1]]   # qids differ
            if isinstance(result, StartMessageMoveTaskResult):   # its handle holds a fresh uuid
                assert isinstance(expected[0], StartMessageMoveTaskResult)
            else:
                assert result == expected[0]
        if error is not None:
            raise error
        return expected[0]

    def fails(self, command, code: str) -> SqsError:
        with pytest.raises(SqsError) as info:
            self.run(command)
        assert info.value.code == code
        return info.value

    def create(self, name: str, attributes=None, ns: Namespace = NS) -> QueueKey:
        return self.run(CreateQueue(ns, name, dict(attributes or {}), {})).queue

    def assert_converged(self) -> None:
        for g in range(GROUPS):
            assert self.replicas[g].digest() == self.groups[g].digest(), f"group {g}'s replica diverged"


def _outcome(storage: Storage, command):
    try:
        return storage.execute(command), None
    except SqsError as err:
        return None, err


@pytest.fixture
def twin_of():
    made = []

    def make(placement):
        made.append(Twin(placement))
        return made[-1]
    yield make
    for t in made:
        t.assert_converged()


# =============================================================================================
# The RedrivePolicy target check of CreateQueue and SetQueueAttributes
# =============================================================================================

@pytest.mark.parametrize("placement", placements(("dlq", "src", "late")), ids=ids)
def test_redrive_target_in_any_group(twin_of, placement):
    t = twin_of(placement)
    dlq = t.create("dlq")
    src = t.create("src", {"RedrivePolicy": redrive(dlq, 4)})
    policy = t.run(GetQueueAttributes(src, ("RedrivePolicy",))).attributes["RedrivePolicy"]
    assert json.loads(policy)["deadLetterTargetArn"] == dlq.arn
    late = t.create("late")
    t.run(SetQueueAttributes(late, {"RedrivePolicy": redrive(dlq, 2)}))
    t.run(SetQueueAttributes(late, {"RedrivePolicy": ""}))


@pytest.mark.parametrize("placement", placements(("dlq", "dlq.fifo", "src", "src.fifo")), ids=ids)
def test_redrive_target_type_is_checked_in_any_group(twin_of, placement):
    t = twin_of(placement)
    dlq = t.create("dlq")
    fifo_dlq = t.create("dlq.fifo", fifo())
    t.fails(CreateQueue(NS, "src.fifo", fifo({"RedrivePolicy": redrive(dlq)})), "InvalidParameterValue")
    t.fails(CreateQueue(NS, "src", {"RedrivePolicy": redrive(fifo_dlq)}), "InvalidParameterValue")
    src = t.create("src")
    t.fails(SetQueueAttributes(src, {"RedrivePolicy": redrive(fifo_dlq)}), "InvalidParameterValue")
    t.create("src.fifo", fifo({"RedrivePolicy": redrive(fifo_dlq)}))


@pytest.mark.parametrize("placement", placements(("dlq", "allowed", "intruder")), ids=ids)
def test_redrive_allow_policy_of_a_target_in_any_group(twin_of, placement):
    t = twin_of(placement)
    allowed = NS.key("allowed")
    dlq = t.create("dlq", {"RedriveAllowPolicy": json.dumps(
        {"redrivePermission": "byQueue", "sourceQueueArns": [allowed.arn]})})
    t.create("allowed", {"RedrivePolicy": redrive(dlq)})
    t.fails(CreateQueue(NS, "intruder", {"RedrivePolicy": redrive(dlq)}), "InvalidParameterValue")
    intruder = t.create("intruder")
    t.run(SetQueueAttributes(dlq, {"RedriveAllowPolicy": json.dumps({"redrivePermission": "denyAll"})}))
    t.fails(SetQueueAttributes(intruder, {"RedrivePolicy": redrive(dlq)}), "InvalidParameterValue")
    t.fails(SetQueueAttributes(allowed, {"RedrivePolicy": redrive(dlq, 9)}), "InvalidParameterValue")
    t.run(SetQueueAttributes(dlq, {"RedriveAllowPolicy": json.dumps({"redrivePermission": "allowAll"})}))
    t.run(SetQueueAttributes(intruder, {"RedrivePolicy": redrive(dlq)}))


@pytest.mark.parametrize("placement", placements(("dlq", "src")), ids=ids)
def test_redrive_target_missing_deleted_or_in_another_account(twin_of, placement):
    t = twin_of(placement)
    t.fails(CreateQueue(NS, "src", {"RedrivePolicy": redrive(NS.key("dlq"))}), "InvalidParameterValue")
    dlq = t.create("dlq")
    t.run(DeleteQueue(dlq))
    t.fails(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}), "InvalidParameterValue")
    theirs = t.create("dlq", ns=OTHER_ACCOUNT)
    t.fails(CreateQueue(NS, "src", {"RedrivePolicy": redrive(theirs)}), "InvalidParameterValue")
    t.fails(CreateQueue(NS, "src", {"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": "dummy", "maxReceiveCount": 3})}), "InvalidParameterValue")
    assert t.run(ListQueues(NS)).queues == ()


# =============================================================================================
# ListQueues
# =============================================================================================

NAMES = tuple(f"q{i:02d}" for i in range(12))


def spread(names, shift: int = 0) -> dict[str, int]:
    """``names`` dealt round the groups, starting at group ``shift``."""
    return {n: (i + shift) % GROUPS for i, n in enumerate(names)}


@pytest.mark.parametrize("shift", range(GROUPS))
@pytest.mark.parametrize("page_size", [1, 3, 4, 7, 12, 13])
def test_list_queues_pages_across_groups(twin_of, shift, page_size):
    t = twin_of({**spread(NAMES, shift), "other-prefix": shift, "lone": (shift + 1) % GROUPS})
    for name in reversed(NAMES):
        t.create(name)
    t.create("other-prefix")
    pages = walk(t, lambda token: ListQueues(NS, "q", page_size, token))
    seen = [n for page in pages for n in page]
    assert seen == list(NAMES)
    assert len(pages) == max(1, -(-len(NAMES) // page_size))
    assert len(t.run(ListQueues(NS)).queues) == len(NAMES) + 1


@pytest.mark.parametrize("shift", range(GROUPS))
def test_list_queues_across_groups_survives_deletes_between_pages(twin_of, shift):
    names = NAMES[:9]
    t = twin_of(spread(names, shift))
    for name in names:
        t.create(name)
    first = t.run(ListQueues(NS, max_results=3))
    t.run(DeleteQueue(first.queues[0]))                  # an already-listed queue goes away
    t.run(DeleteQueue(NS.key(names[5])))                  # and one not yet listed, in another group
    rest = walk(t, lambda token: ListQueues(NS, None, 3, token or first.next_token))
    seen = [k.name for k in first.queues] + [n for page in rest for n in page]
    assert seen == [n for n in names if n != names[5]]
    assert [k.name for k in t.run(ListQueues(NS)).queues] == [n for n in names[1:] if n != names[5]]


@pytest.mark.parametrize("placement", placements(("home", "abroad", "theirs")), ids=ids)
def test_list_queues_across_groups_keeps_namespaces_and_prefixes_apart(twin_of, placement):
    t = twin_of(placement)
    t.create("home")
    t.create("abroad", ns=OTHER_REGION)
    t.create("theirs", ns=OTHER_ACCOUNT)
    assert t.run(ListQueues(NS)).queues == (NS.key("home"),)
    assert t.run(ListQueues(OTHER_REGION)).queues == (OTHER_REGION.key("abroad"),)
    assert t.run(ListQueues(OTHER_ACCOUNT)).queues == (OTHER_ACCOUNT.key("theirs"),)
    assert t.run(ListQueues(NS, "ho")).queues == (NS.key("home"),)
    assert t.run(ListQueues(NS, "ab")).queues == ()
    t.fails(ListQueues(NS, max_results=1, next_token="garbage"), "InvalidParameterValue")
    t.fails(ListQueues(NS, max_results=0), "InvalidParameterValue")


# =============================================================================================
# ListDeadLetterSourceQueues
# =============================================================================================

@pytest.mark.parametrize("placement", placements(("dlq", "src-a", "src-b", "other")), ids=ids)
def test_list_dead_letter_source_queues_in_any_group(twin_of, placement):
    t = twin_of(placement)
    dlq = t.create("dlq")
    other = t.create("other")
    t.create("src-b", {"RedrivePolicy": redrive(dlq)})
    t.create("src-a", {"RedrivePolicy": redrive(dlq)})
    assert [k.name for k in t.run(ListDeadLetterSourceQueues(dlq)).queues] == ["src-a", "src-b"]
    assert t.run(ListDeadLetterSourceQueues(other)).queues == ()
    for size in (1, 2):
        first = t.run(ListDeadLetterSourceQueues(dlq, size))
        t.run(ListDeadLetterSourceQueues(dlq, size, first.next_token))
    t.run(SetQueueAttributes(other, {"RedrivePolicy": redrive(dlq)}))
    t.run(DeleteQueue(NS.key("src-b")))
    assert [k.name for k in t.run(ListDeadLetterSourceQueues(dlq)).queues] == ["other", "src-a"]
    t.fails(ListDeadLetterSourceQueues(dlq, 1, "not-a-token"), "InvalidParameterValue")


# =============================================================================================
# StartMessageMoveTask: the source is a dead-letter queue, the destination exists and matches
# =============================================================================================

@pytest.mark.parametrize("placement", placements(("dlq", "src", "dest")), ids=ids)
def test_move_task_checks_read_every_group(twin_of, placement):
    t = twin_of(placement)
    dlq = t.create("dlq")
    t.fails(StartMessageMoveTask(NS, dlq.arn), "InvalidParameterValue")        # nothing names it yet
    src = t.create("src", {"RedrivePolicy": redrive(dlq)})
    t.fails(StartMessageMoveTask(NS, dlq.arn, NS.key("dest").arn), "ResourceNotFoundException")
    dest = t.create("dest")
    t.fails(StartMessageMoveTask(NS, dlq.arn, dlq.arn), "InvalidParameterValue")
    t.run(DeleteQueue(dest))
    t.fails(StartMessageMoveTask(NS, dlq.arn, dest.arn), "ResourceNotFoundException")
    t.clock.advance(60_000)                                                      # past the tombstone
    t.create("dest")
    t.run(StartMessageMoveTask(NS, dlq.arn, dest.arn))
    t.run(DeleteQueue(src))                                  # the only queue naming it goes
    t.fails(StartMessageMoveTask(NS, dlq.arn), "InvalidParameterValue")


@pytest.mark.parametrize("placement", placements(("dlq.fifo", "src.fifo", "plain")), ids=ids)
def test_move_task_destination_type_is_checked_in_any_group(twin_of, placement):
    t = twin_of(placement)
    dlq = t.create("dlq.fifo", fifo())
    t.create("src.fifo", fifo({"RedrivePolicy": redrive(dlq)}))
    plain = t.create("plain")
    t.fails(StartMessageMoveTask(NS, dlq.arn, plain.arn), "InvalidParameterValue")
    t.run(StartMessageMoveTask(NS, dlq.arn, NS.key("src.fifo").arn, 5))
    (task,) = t.groups[placement["dlq.fifo"]].execute(ListMessageMoveTasks(NS, dlq.arn))[0].results
    assert (task.status, task.destination_arn) == ("RUNNING", NS.key("src.fifo").arn)


# =============================================================================================
# The catalogue is asked only on a local miss, and a single storage never asks
# =============================================================================================

class Spy:
    """A catalogue of one queue that counts the lookups and the scans made of it."""

    def __init__(self, queue=None):
        self.queue = queue
        self.lookups = 0
        self.scans = 0

    def queue_by_arn(self, arn):
        self.lookups += 1
        return self.queue if self.queue is not None and self.queue.arn == arn else None

    def queues(self):
        self.scans += 1          # a generator: this runs only when someone iterates
        yield from ([self.queue] if self.queue is not None else [])


def test_a_local_hit_never_asks_the_catalogue():
    s = Storage(ManualClock(START_MS), IdSource(1))
    s.catalogue = spy = Spy()
    dlq = s.execute(CreateQueue(NS, "dlq", {}, {}))[0].queue
    src = s.execute(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}, {}))[0].queue
    s.execute(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 7)}))
    s.execute(StartMessageMoveTask(NS, dlq.arn, src.arn))
    assert (spy.lookups, spy.scans) == (0, 0)
    s.execute(ListQueues(NS))
    s.execute(ListDeadLetterSourceQueues(dlq))
    assert (spy.lookups, spy.scans) == (0, 2)      # the lists read every group, by design


def test_a_local_miss_asks_the_catalogue_once():
    other = Storage(ManualClock(START_MS), IdSource(2))
    dlq = other.execute(CreateQueue(NS, "dlq", {}, {}))[0].queue
    s = Storage(ManualClock(START_MS), IdSource(1))
    s.catalogue = spy = Spy(other._queue_by_arn(dlq.arn))
    _, (created,) = s.execute(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}, {}))
    assert isinstance(created, QueueCreated) and (spy.lookups, spy.scans) == (1, 0)
    s.execute(CreateQueue(NS, "ghost-src", {}, {}))
    with pytest.raises(SqsError):
        s.execute(SetQueueAttributes(NS.key("ghost-src"), {"RedrivePolicy": redrive(NS.key("ghost"))}))
    assert (spy.lookups, spy.scans) == (2, 0)


# =============================================================================================
# StoragesCatalogue itself
# =============================================================================================

def test_storages_catalogue_reads_the_other_groups_only():
    clock = ManualClock(START_MS)
    storages = [Storage(clock, IdSource(g)) for g in range(3)]
    StoragesCatalogue.join(storages)
    keys = [storages[g].execute(CreateQueue(NS, f"q{g}", {}, {}))[0].queue for g in range(3)]
    cat = storages[1].catalogue
    assert cat.queue_by_arn(keys[0].arn).key == keys[0]
    assert cat.queue_by_arn(keys[2].arn).key == keys[2]
    assert cat.queue_by_arn(keys[1].arn) is None             # its own group's queue is not "other"
    assert cat.queue_by_arn("arn:aws:sqs:us-east-1:000000000000:nope") is None
    assert sorted(q.key.name for q in cat.queues()) == ["q0", "q2"]
    storages[2] = fresh = Storage(clock, IdSource(9))         # a group's storage replaced in place
    assert cat.queue_by_arn(keys[2].arn) is None
    fresh.execute(CreateQueue(NS, "q2", {}, {}))
    assert cat.queue_by_arn(keys[2].arn).key == keys[2]
    assert [s.catalogue is not None for s in storages] == [True, True, False]
