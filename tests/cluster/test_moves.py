"""The move driver (cluster/moves.py): dead-letter moves between two replication groups, exactly
once, over a channel that loses, repeats and delays frames, through failovers of either group.

The harness: groups A (the source queue) and B (its dead-letter queue), each a master ``Storage``
joined to the other's by ``StoragesCatalogue``, a log of the batches its master executed and a
majority-committed seq that the schedule advances. Each master runs a ``MoveDriver``. A failover
makes a new master on another node from the committed batches plus some of the uncommitted tail
(what its sync found on a majority), in a new epoch; the deposed master may go on for a while as
a zombie whose commits never advance, and its frames still in flight arrive late. Links are FIFO
per pair of nodes (ZeroMQ over one connection) but drop and repeat frames, and which link
delivers next is drawn, so frames of different senders overtake each other. A's view of B's
master lags.

Checked on every frame sent: nothing is offered before its outbox entry is committed, nothing is
forgotten before its acceptance is committed, nothing is answered accepted before the adopt is
committed. Checked once the schedule settles: every message sent to the source is, exactly
once, in the source or the dead-letter queue (or went with a deleted dead-letter queue), and
both groups' move state is empty.
"""

from __future__ import annotations

import json
import random
from collections import Counter, deque

import pytest

from storage import IdSource, ManualClock, Storage
from storage.catalogue import StoragesCatalogue
from storage.errors import SqsError
from storage.codec import decode_many
from storage.commands import (
    AdoptMoved, CreateQueue, DeleteQueue, MoveItem, Namespace, ReceiveMessage, ReturnOutbox, SendMessage,
    SetQueueAttributes,
)
from storage.keys import key_names
from storage.mutations import MessageAdded, MessageOutboxed, MoveAdopted, OutboxAccepted, QueueDeleted
from storage.outbox import REFUSED_NO_QUEUE

from cluster.moves import Destination, Execute, MoveDriver, _Gate
from cluster.replication.messages import (
    MoveAccepted, MoveForget, MoveForgot, MoveOffer, MoveRefused, Rejected, Send,
)
from cluster.replication.wire import WireCodec

START_MS = 1_700_000_000_000
NS = Namespace()
NODES = (("a1", "a2", "a3"), ("b1", "b2", "b3"))
RETRY = 0.2


PLANTED = {"offer-before-commit": "_offer_gate", "forget-before-accepted-commit": "_forget_gate"}


class _Uncommitted(_Gate):
    """A gate that opens once the log holds a thing, committed or not."""

    def release(self, committed_seq: int):
        return super().release(float("inf"))


class Master:
    """One mastership of a group: its node, epoch, storage, log and driver."""

    def __init__(self, group: int, node: str, epoch: int, storage: Storage, log: list, committed: int,
                 master_of) -> None:
        self.group, self.node, self.epoch = group, node, epoch
        self.storage, self.log, self.committed = storage, log, committed
        self.driver = MoveDriver(group, epoch, master_of, retry=RETRY)
        self.zombie_steps = 0

    def run(self, command):
        result, mutations = self.storage.execute(command)
        if mutations:
            self.log.append(list(mutations))
        return result

    def committed_mutations(self, kind: type) -> list:
        return [m for batch in self.log[:self.committed] for m in batch if type(m) is kind]


class Schedule:
    def __init__(self, seed: int, *, failovers: bool = True, delete_dlq: bool = False,
                 loss: float = 0.1, dup: float = 0.1, planted: str | None = None) -> None:
        self.rng = random.Random(seed)
        self.planted = planted
        self.clock = ManualClock(START_MS)
        self.loss, self.dup = loss, dup
        self.failovers, self.delete_dlq = failovers, delete_dlq
        self._ids = 0
        self.storages = [self._storage(), self._storage()]
        StoragesCatalogue.join(self.storages)
        self.masters = [self._master(g, NODES[g][0], 1, self.storages[g], [], 0) for g in (0, 1)]
        self.zombies: list[Master] = []
        self.views = [None, None]     # each group's view of the other's master: (node, epoch)
        self.links: dict[tuple[str, str], deque] = {}
        self.sent_offers = 0
        a, b = self.masters
        self.dlq = b.run(CreateQueue(NS, "dlq", {})).queue
        self.src = a.run(CreateQueue(NS, "src", {})).queue
        a.run(SetQueueAttributes(self.src, {"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": self.dlq.arn, "maxReceiveCount": 1})}))
        for m in self.masters:
            m.committed = len(m.log)
        self.see_views()

    def _storage(self) -> Storage:
        self._ids += 1
        return Storage(self.clock, IdSource(self._ids))

    def _master(self, group: int, node: str, epoch: int, storage: Storage, log: list, committed: int) -> Master:
        m = Master(group, node, epoch, storage, log, committed, self._master_of(group))
        if self.planted is not None:
            # the mutant of the design: that gate opens at the log's last seq, not the commit
            setattr(m.driver, PLANTED[self.planted], _Uncommitted())
        return m

    def _master_of(self, group: int):
        other = 1 - group

        def master_of(dst_arn: str) -> Destination | None:
            view = self.views[group]
            return None if view is None else Destination(other, *view)
        return master_of

    def see_views(self) -> None:
        for g in (0, 1):
            m = self.masters[1 - g]
            self.views[g] = (m.node, m.epoch)

    @property
    def now(self) -> float:
        return self.clock.now_ms() / 1000

    # -- the drivers' actions --------------------------------------------------------------------

    def act(self, m: Master, actions: list) -> None:
        for a in actions:
            if type(a) is Execute:
                result = m.run(a.command)
                m.driver.executed(a.command, result)
            elif type(a) is Send:
                self.check_sent(m, a.frame)
                self.send(m.node, a.to, a.group, a.frame)
            else:
                raise AssertionError(f"unexpected action {a!r}")

    def check_sent(self, m: Master, frame) -> None:
        """The gates, as seen from the log of the master that sent ``frame`` (a planted mutant
        is left to the verdict)."""
        t = type(frame)
        if self.planted is not None:
            return
        if t is MoveOffer:
            self.sent_offers += 1
            outboxed = {x.move_id for x in m.committed_mutations(MessageOutboxed)}
            for item in decode_many(frame.items, expect=MoveItem):
                assert item.move_id in outboxed, "offered before its outbox entry was committed"
        elif t is MoveForget:
            accepted = {i for x in m.committed_mutations(OutboxAccepted) for i in x.move_ids}
            assert set(frame.move_ids) <= accepted, "forgotten before its acceptance was committed"
        elif t is MoveAccepted:
            adopted = {x.move_id for x in m.committed_mutations(MoveAdopted)}
            assert set(frame.move_ids) <= adopted, "answered accepted before the adopt was committed"

    def send(self, sender: str, to: str, group: int, frame) -> None:
        if self.rng.random() < self.loss:
            return
        link = self.links.setdefault((sender, to), deque())
        link.append((group, frame))
        if self.rng.random() < self.dup:
            link.append((group, frame))

    def deliver(self) -> bool:
        busy = [k for k, q in self.links.items() if q]
        if not busy:
            return False
        sender, to = self.rng.choice(sorted(busy))
        group, frame = self.links[(sender, to)].popleft()
        for m in [self.masters[group]] + self.zombies:
            if m.group == group and m.node == to:
                self.act(m, m.driver.frame(sender, frame))
                break
        return True

    # -- the schedule ----------------------------------------------------------------------------

    def tick(self, m: Master) -> None:
        self.act(m, m.driver.tick(self.now, len(m.log), m.committed, m.storage))

    def fail_over(self, group: int, keep: int | None = None) -> None:
        """A new master of ``group`` holding the first ``keep`` batches: by default every
        committed one and some of the rest."""
        old = self.masters[group]
        if keep is None:
            keep = old.committed + self.rng.randint(0, len(old.log) - old.committed)
        log = [list(b) for b in old.log[:keep]]
        storage = self._storage()
        for batch in log:
            storage.apply_many(batch)
        self.storages[group] = storage
        StoragesCatalogue.join(self.storages)
        node = self.rng.choice([n for n in NODES[group] if n != old.node])
        self.zombies = [z for z in self.zombies if z.node != node or z.group != group]
        new = self._master(group, node, old.epoch + 1, storage, log, old.committed)
        self.masters[group] = new
        if self.rng.random() < 0.5:
            old.zombie_steps = self.rng.randint(1, 40)
            self.zombies.append(old)

    def client(self, step: int) -> None:
        a, b = self.masters
        r = self.rng.random()
        if step < 150 and r < 0.4:
            a.run(SendMessage(self.src, f"m{step}"))
        elif r < 0.8:
            a.run(ReceiveMessage(self.src, max_number_of_messages=self.rng.randint(1, 10), visibility_timeout=0))
        elif self.delete_dlq and r < 0.85:
            # a failover may have lost the last delete or create: the commands say what holds now
            try:
                if self.rng.random() < 0.1:
                    b.run(DeleteQueue(self.dlq))
                else:
                    b.run(CreateQueue(NS, "dlq", {}))
            except SqsError:
                pass   # no such queue to delete, or deleted less than 60 s ago

    def step(self, i: int) -> None:
        rng = self.rng
        r = rng.random()
        if r < 0.25:
            self.client(i)
        elif r < 0.45:
            self.tick(rng.choice(self.masters + self.zombies))
        elif r < 0.55:
            m = rng.choice(self.masters)
            m.committed = rng.randint(m.committed, len(m.log))
        elif r < 0.8:
            self.deliver()
        elif r < 0.9:
            ms = rng.choice((10, 50, 200, 1000, 20_000))
            self.clock.advance(ms)
        elif r < 0.95:
            if rng.random() < 0.5:
                self.see_views()
        elif self.failovers and r < 0.98:
            self.fail_over(rng.randrange(2))
        for z in self.zombies:
            z.zombie_steps -= 1
        self.zombies = [z for z in self.zombies if z.zombie_steps > 0]

    def settle(self) -> None:
        """No more faults: views current, every frame delivered, everything committed, until
        nothing moves (``verdict`` says whether that is everything done)."""
        self.loss = self.dup = 0.0
        self.zombies = []
        self.see_views()
        for _ in range(200):
            for m in self.masters:
                m.committed = len(m.log)
                self.tick(m)
            while self.deliver():
                pass
            for m in self.masters:
                m.committed = len(m.log)
            a, b = self.masters
            if not (a.storage.outbox_pending() or a.storage.outbox_accepted() or b.storage.moves_in()) \
                    and not any(self.links.values()):
                return
            self.clock.advance(int(RETRY * 1000))

    # -- the verdict -----------------------------------------------------------------------------

    def verdict(self) -> None:
        a, b = self.masters
        for m in (a, b):
            replayed = Storage(ManualClock(0), IdSource(0))
            for batch in m.log:
                replayed.apply_many(batch)
            assert replayed.digest() == m.storage.digest()
        src_qid = a.storage._by_key[key_names(self.src)].qid
        sent = [x.message.message_id for batch in a.log for x in batch
                if type(x) is MessageAdded and x.qid == src_qid]
        # A queue holds a message id once, so a second adoption of one message hides in the
        # dead-letter queue's count: the log shows it.
        adoptions = Counter(x.message.message_id for batch in b.log for x in batch if type(x) is MessageAdded)
        assert not [mid for mid, n in adoptions.items() if n > 1], "a message was adopted twice"
        gone = self.deleted_with_dlq(b)
        held = Counter(mid for m in (a, b) for q in m.storage._queues.values() for mid in q.messages)
        assert not [mid for mid, n in held.items() if n > 1], "a message is in two queues"
        assert held == Counter(mid for mid in sent if mid not in gone), "a message was lost or invented"
        assert not a.storage.outbox_pending() and not a.storage.outbox_accepted() and not b.storage.moves_in(), \
            "the moves did not settle"

    @staticmethod
    def deleted_with_dlq(b: Master) -> set[str]:
        """The messages that were in a dead-letter queue when it was deleted."""
        replay = Storage(ManualClock(0), IdSource(0))
        gone: set[str] = set()
        for batch in b.log:
            for mut in batch:
                if type(mut) is QueueDeleted:
                    q = replay._queues.get(mut.qid)
                    if q is not None:
                        gone |= set(q.messages)
                replay.apply(mut)
        return gone


def play(seed: int, steps: int = 400, **kw) -> Schedule:
    s = Schedule(seed, **kw)
    for i in range(steps):
        s.step(i)
    s.settle()
    s.verdict()
    return s


# --- properties over seeded schedules ---------------------------------------------------------------

@pytest.mark.parametrize("block", range(4))
def test_every_dead_lettered_message_lands_once_through_loss_repeats_and_failovers(block):
    offers = 0
    for seed in range(block * 100, block * 100 + 100):
        offers += play(seed).sent_offers
    assert offers > 100   # the schedules do move messages


@pytest.mark.parametrize("block", range(2))
def test_a_deleted_and_recreated_dead_letter_queue_refuses_or_adopts_each_move_once(block):
    for seed in range(block * 100, block * 100 + 100):
        play(10_000 + seed, delete_dlq=True)


def test_without_failovers_nothing_is_lost_or_doubled_by_the_channel_alone():
    for seed in range(50):
        play(20_000 + seed, failovers=False, loss=0.3, dup=0.3)


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_the_schedules_find_each_gate_opened_before_the_commit(planted):
    """The verdict alone (the per-frame gate checks off) finds both mutants of the design's move
    protocol: a failover then leaves a message adopted twice."""
    for seed in range(100):
        try:
            play(seed, planted=planted)
        except AssertionError as e:
            assert str(e).startswith("a message was adopted twice")
            return
    raise AssertionError(f"{planted} went unnoticed in 100 seeds")


# --- one move, step by step ---------------------------------------------------------------------------

def one_move(seed: int = 1):
    s = Schedule(seed, failovers=False, loss=0.0, dup=0.0)
    a, b = s.masters
    a.run(SendMessage(s.src, "poison"))
    a.run(ReceiveMessage(s.src, visibility_timeout=0))
    a.run(ReceiveMessage(s.src))
    (item,) = a.storage.outbox_pending()
    return s, a, b, item


def offered(seed: int = 1):
    """``one_move`` with the entry committed and offered: the offer taken off the channel."""
    s, a, b, item = one_move(seed)
    a.committed = len(a.log)
    s.tick(a)
    (offer,) = frames(s)
    return s, a, b, item, offer


def frames(s: Schedule) -> list:
    out = [f for q in s.links.values() for _, f in q]
    s.links.clear()
    return out


def test_an_entry_is_offered_only_once_its_batch_is_committed():
    s, a, b, item = one_move()
    s.tick(a)
    assert frames(s) == []
    a.committed = len(a.log)
    s.tick(a)
    (offer,) = frames(s)
    assert (offer.src_group, offer.src_epoch, offer.dst_epoch) == (0, 1, 1)
    assert decode_many(offer.items, expect=MoveItem) == [item]


def test_the_destination_answers_only_once_the_adopt_is_committed_and_the_source_forgets_after_its_commit():
    s, a, b, item, offer = offered()
    s.act(b, b.driver.frame("a1", offer))
    assert b.storage.moves_in() == [item.move_id]
    s.tick(b)
    assert frames(s) == []
    b.committed = len(b.log)
    s.tick(b)
    (accepted,) = frames(s)
    assert accepted == MoveAccepted((item.move_id,))
    s.act(a, a.driver.frame("b1", accepted))
    assert a.storage.outbox_accepted() == [(item.move_id, s.dlq.arn)]
    s.tick(a)
    assert frames(s) == []
    a.committed = len(a.log)
    s.tick(a)
    (forget,) = frames(s)
    assert forget == MoveForget(0, 1, (item.move_id,))
    s.act(b, b.driver.frame("a1", forget))
    assert b.storage.moves_in() == []
    s.tick(b)
    assert frames(s) == []
    b.committed = len(b.log)
    s.tick(b)
    (forgot,) = frames(s)
    assert forgot == MoveForgot((item.move_id,))
    s.act(a, a.driver.frame("b1", forgot))
    assert a.storage.outbox_accepted() == [] and a.storage.outbox_pending() == []


def test_an_unanswered_offer_is_sent_again_after_the_retry_period():
    s, a, b, item, offer = offered()
    s.clock.advance(100)
    s.tick(a)
    assert frames(s) == []
    s.clock.advance(100)
    s.tick(a)
    assert frames(s) == [offer]


def test_a_repeated_offer_is_adopted_once_and_answered_accepted_again():
    s, a, b, item, offer = offered()
    s.act(b, b.driver.frame("a1", offer))
    b.committed = len(b.log)
    s.tick(b)
    assert frames(s) == [MoveAccepted((item.move_id,))]
    s.act(b, b.driver.frame("a1", offer))
    s.tick(b)
    assert frames(s) == [MoveAccepted((item.move_id,))]
    assert sum(type(x) is MoveAdopted for batch in b.log for x in batch) == 1


def test_offers_from_a_deposed_source_master_or_to_another_destination_epoch_are_dropped():
    s, a, b, item, offer = offered()
    adopt = [Execute(AdoptMoved((item,)))]
    assert MoveDriver(1, 1, lambda arn: None).frame("a1", offer) == adopt
    assert MoveDriver(1, 2, lambda arn: None).frame("a1", offer) == []   # sent to B's master of epoch 1
    s.act(b, b.driver.frame("a2", MoveForget(0, 2, ())))
    assert b.driver.frame("a1", offer) == []                             # A's master of epoch 2 spoke


def test_a_refusal_returns_the_message_and_is_final_within_the_destination_master():
    s, a, b, item = one_move()
    b.run(DeleteQueue(s.dlq))
    a.committed, b.committed = len(a.log), len(b.log)
    s.tick(a)
    (offer,) = frames(s)
    s.act(b, b.driver.frame("a1", offer))
    b.committed = len(b.log)
    s.tick(b)
    (refused,) = frames(s)
    assert refused == MoveRefused(1, item.move_id, REFUSED_NO_QUEUE)
    s.clock.advance(61_000)
    b.run(CreateQueue(NS, "dlq", {}))
    b.committed = len(b.log)
    s.act(b, b.driver.frame("a1", offer))     # a late copy of the offer: refused again
    s.tick(b)
    assert frames(s) == [refused]
    assert b.storage.moves_in() == []
    s.act(a, a.driver.frame("b1", refused))
    assert a.storage.outbox_pending() == []
    assert [mid for q in a.storage._queues.values() for mid in q.messages] == [item.message.message_id]


def test_a_refusal_counts_only_from_the_destination_master_the_source_offers_to_now():
    s, a, b, item, offer = offered()
    refused = MoveRefused(1, item.move_id, REFUSED_NO_QUEUE)
    s.views[0] = ("b2", 2)
    assert a.driver.frame("b1", refused) == []        # the source moved on from B's master of epoch 1
    s.clock.advance(200)
    s.tick(a)
    (again,) = frames(s)
    assert (again.dst_epoch, again.items) == (2, offer.items)
    assert a.driver.frame("b2", MoveRefused(2, item.move_id, REFUSED_NO_QUEUE)) \
        == [Execute(ReturnOutbox(item.move_id, REFUSED_NO_QUEUE))]


def test_a_new_master_resumes_from_its_storage_alone():
    s, a, b, item, offer = offered()
    s.act(b, b.driver.frame("a1", offer))
    b.committed = len(b.log)
    s.fail_over(1)           # B's new master: the adopt is in its storage, its driver knows nothing
    s.zombies.clear()
    s.see_views()
    b2 = s.masters[1]
    s.clock.advance(200)
    s.tick(a)
    (again,) = frames(s)
    assert again.dst_epoch == 2
    s.act(b2, b2.driver.frame("a1", again))
    b2.committed = len(b2.log)
    s.tick(b2)
    assert frames(s) == [MoveAccepted((item.move_id,))]
    assert sum(type(x) is MoveAdopted for batch in b2.log for x in batch) == 1


def test_a_source_master_lost_with_its_uncommitted_acceptance_is_answered_accepted_again():
    s, a, b, item, offer = offered()
    s.act(b, b.driver.frame("a1", offer))
    b.committed = len(b.log)
    s.tick(b)
    (accepted,) = frames(s)
    s.act(a, a.driver.frame("b1", accepted))
    s.tick(a)
    assert frames(s) == []                       # no forget before the acceptance is committed
    s.fail_over(0, keep=a.committed)
    s.zombies.clear()
    a2 = s.masters[0]
    assert a2.storage.outbox_pending() == [item]
    s.tick(a2)
    (again,) = frames(s)
    s.act(b, b.driver.frame(a2.node, again))
    s.tick(b)
    assert frames(s) == [accepted]
    assert sum(type(x) is MoveAdopted for batch in b.log for x in batch) == 1


def test_a_destination_master_lost_with_its_uncommitted_adopt_adopts_the_offer_again_once():
    s, a, b, item, offer = offered()
    s.act(b, b.driver.frame("a1", offer))
    s.tick(b)
    assert frames(s) == []                       # no answer before the adopt is committed
    s.fail_over(1, keep=b.committed)
    s.zombies.clear()
    s.see_views()
    b2 = s.masters[1]
    assert b2.storage.moves_in() == []
    s.clock.advance(200)
    s.tick(a)
    (again,) = frames(s)
    s.act(b2, b2.driver.frame("a1", again))
    b2.committed = len(b2.log)
    s.tick(b2)
    assert frames(s) == [MoveAccepted((item.move_id,))]
    assert sum(type(x) is MoveAdopted for batch in b2.log for x in batch) == 1


def test_an_undecodable_offer_is_rejected():
    d = MoveDriver(1, 1, lambda arn: None)
    (r,) = d.frame("a1", MoveOffer(0, 1, 1, b"\x01\x00garbage"))
    assert type(r) is Rejected and r.sender == "a1"


def test_offers_are_cut_into_frames_of_at_most_256_items():
    s = Schedule(3, failovers=False, loss=0.0, dup=0.0)
    a = s.masters[0]
    for i in range(300):
        a.run(SendMessage(s.src, f"m{i}"))
    for _ in range(30):
        a.run(ReceiveMessage(s.src, max_number_of_messages=10, visibility_timeout=0))
    for _ in range(30):
        a.run(ReceiveMessage(s.src, max_number_of_messages=10))
    assert len(a.storage.outbox_pending()) == 300
    a.committed = len(a.log)
    s.tick(a)
    (first,) = frames(s)
    assert len(decode_many(first.items, expect=MoveItem)) == 256
    s.tick(a)
    (second,) = frames(s)
    assert len(decode_many(second.items, expect=MoveItem)) == 44


# --- the wire ------------------------------------------------------------------------------------------

def test_move_frames_cross_the_wire_with_their_items():
    s, a, b, item, offer = offered()
    sent = [offer, MoveAccepted((item.move_id,)), MoveRefused(3, item.move_id, REFUSED_NO_QUEUE),
            MoveForget(0, 1, (item.move_id, "other")), MoveForgot(())]
    one = WireCodec("c", "secret", "a1"), WireCodec("c", "secret", "b1")
    for f in sent:
        assert one[1].decode(one[0].encode(f, "b1")) == ("a1", f)
    two = WireCodec("c", "secret", "a1", groups=2), WireCodec("c", "secret", "b1", groups=2)
    items = tuple((1, f) for f in sent)
    assert two[1].decode_bundle(two[0].encode_bundle(items, "b1")) == ("a1", items)
    (decoded,) = decode_many(offer.items, expect=MoveItem)
    assert decoded == item and type(decoded.message.attributes) is dict

