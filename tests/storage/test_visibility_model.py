"""Model-based test of visibility and FIFO group semantics.

A reference model that is slow and obviously right (lists scanned in full on every call) runs
beside the real engine; hypothesis drives both with sends, receives, deletes, visibility changes
and the passage of time, and every answer and every count must agree. The model states what
AWS's recorded answers show (LocalStack's AWS-validated FIFO tests, named in storage/model.py)
plus our choice where AWS promises nothing: a standard queue hands out its oldest visible messages
first (our choice); a FIFO queue serves a group only while its oldest message is visible, takes
the group's visible run up to its first message in flight, and serves groups in order of the
time their oldest message became visible. On a standard queue a visibility change through any
handle of a message in flight (a superseded one too) takes effect, and on a message not in flight
it succeeds and changes nothing (AWS's recorded answers); a FIFO queue takes only the current
handle of a message in flight and refuses the others (our choice: AWS's answer is unknown).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from storage import IdSource, ManualClock, SqsError, Storage
from storage.commands import (
    ChangeMessageVisibility, CreateQueue, DeleteMessage, GetQueueAttributes, Namespace, ReceiveMessage,
    SendMessage,
)

NS = Namespace()
VT_MS = 5_000


@dataclass
class ModelMessage:
    body: str
    group: str | None
    visible_at: int
    receipt: str | None = None
    received: int = 0
    handles: tuple[str, ...] = ()   # every handle a receive issued for it, the current last


class Model:
    def __init__(self, fifo: bool):
        self.fifo = fifo
        self.messages: list[ModelMessage] = []   # send order

    def in_flight(self, m: ModelMessage, now: int) -> bool:
        return m.received > 0 and m.visible_at > now

    def receivable(self, now: int, n: int) -> list[ModelMessage]:
        if not self.fifo:
            return [m for m in self.messages if m.visible_at <= now][:n]
        groups: dict[str, list[ModelMessage]] = {}
        for m in self.messages:
            groups.setdefault(m.group, []).append(m)
        heads = [msgs for msgs in groups.values() if msgs[0].visible_at <= now]
        heads.sort(key=lambda msgs: (msgs[0].visible_at, self.messages.index(msgs[0])))
        out: list[ModelMessage] = []
        for msgs in heads:
            for m in msgs:
                if m.visible_at > now:
                    break
                if len(out) == n:
                    return out
                out.append(m)
        return out

    def counts(self, now: int) -> tuple[int, int]:
        visible = sum(1 for m in self.messages if m.visible_at <= now)
        return visible, len(self.messages) - visible


class VisibilityMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.storage = Storage(self.clock, IdSource(3))
        self.std = self.storage.execute(CreateQueue(NS, "std", {"VisibilityTimeout": "5"}))[0].queue
        self.fifo = self.storage.execute(CreateQueue(NS, "f.fifo", {
            "FifoQueue": "true", "ContentBasedDeduplication": "true", "VisibilityTimeout": "5"}))[0].queue
        self.models = {self.std: Model(False), self.fifo: Model(True)}
        self.sent = 0

    def queue(self, fifo: bool):
        return self.fifo if fifo else self.std

    @rule(fifo=st.booleans(), group=st.sampled_from("xy"))
    def send(self, fifo, group):
        self.sent += 1
        body = f"m{self.sent}"
        q = self.queue(fifo)
        self.storage.execute(SendMessage(q, body, group_id=group if fifo else None))
        self.models[q].messages.append(ModelMessage(body, group if fifo else None, self.clock.now_ms()))

    @rule(fifo=st.booleans(), n=st.integers(1, 10), vt=st.sampled_from((None, 0, 1, 3)))
    def receive(self, fifo, n, vt):
        q = self.queue(fifo)
        model = self.models[q]
        now = self.clock.now_ms()
        expected = model.receivable(now, n)
        result, _ = self.storage.execute(ReceiveMessage(q, max_number_of_messages=n, visibility_timeout=vt))
        assert [m.body for m in result.messages] == [m.body for m in expected]
        for got, m in zip(result.messages, expected):
            assert got.receipt_handle != m.receipt, "a receive must issue a fresh handle"
            m.receipt = got.receipt_handle
            m.handles += (got.receipt_handle,)
            m.received += 1
            m.visible_at = now + (VT_MS if vt is None else vt * 1000)

    def handles(self, fifo: bool) -> list[ModelMessage]:
        return [m for m in self.models[self.queue(fifo)].messages if m.receipt]

    @precondition(lambda self: self.handles(False) or self.handles(True))
    @rule(fifo=st.booleans(), data=st.data())
    def delete(self, fifo, data):
        candidates = self.handles(fifo)
        if not candidates:
            return
        m = data.draw(st.sampled_from(candidates))
        q = self.queue(fifo)
        now = self.clock.now_ms()
        expired = fifo and m.visible_at <= now
        try:
            self.storage.execute(DeleteMessage(q, m.receipt))
        except SqsError as err:
            assert expired and err.code == "InvalidParameterValue", err
            return
        assert not expired, "FIFO must refuse a handle whose visibility timeout passed"
        self.models[q].messages.remove(m)

    @precondition(lambda self: self.handles(False) or self.handles(True))
    @rule(fifo=st.booleans(), seconds=st.sampled_from((0, 1, 4, 10)), data=st.data())
    def change_visibility(self, fifo, seconds, data):
        candidates = self.handles(fifo)
        if not candidates:
            return
        m = data.draw(st.sampled_from(candidates))
        handle = data.draw(st.sampled_from(m.handles))   # the current one or a superseded one
        q = self.queue(fifo)
        now = self.clock.now_ms()
        in_flight = self.models[q].in_flight(m, now)
        if fifo:
            # FIFO keeps its handles strict (AWS's answer is unknown there): only the current
            # handle of a message in flight changes it.
            try:
                self.storage.execute(ChangeMessageVisibility(q, handle, seconds))
            except SqsError as err:
                if handle != m.receipt:
                    assert err.code == "InvalidParameterValue", err
                else:
                    assert not in_flight and err.code == "AWS.SimpleQueueService.MessageNotInflight", err
                return
            assert in_flight and handle == m.receipt, "only the current handle of a message in flight"
        else:
            self.storage.execute(ChangeMessageVisibility(q, handle, seconds))
        if in_flight:
            m.visible_at = now + seconds * 1000

    @rule(ms=st.sampled_from((1, 999, 1000, 2500, 5000, 11_000)))
    def advance(self, ms):
        self.clock.advance(ms)

    @invariant()
    def counts_agree(self):
        now = self.clock.now_ms()
        for q, model in self.models.items():
            attrs = self.storage.execute(GetQueueAttributes(q, ("All",)))[0].attributes
            got = (int(attrs["ApproximateNumberOfMessages"]),
                   int(attrs["ApproximateNumberOfMessagesNotVisible"]))
            assert got == model.counts(now)


TestVisibilityModel = VisibilityMachine.TestCase
TestVisibilityModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])


def test_fifo_head_made_visible_is_served_while_a_later_message_is_in_flight():
    """LocalStack's AWS-validated test_fifo_message_group_visibility_after_terminate_visibility_timeout:
    the head of a group made visible again (timeout 0) is received again, with other groups'
    messages, while a later message of its group stays in flight (and is not handed out)."""
    clock = ManualClock()
    s = Storage(clock, IdSource(1))
    q = s.execute(CreateQueue(NS, "g.fifo", {"FifoQueue": "true", "ContentBasedDeduplication": "true"}))[0].queue
    for body, group in (("g1-m1", "g1"), ("g1-m2", "g1"), ("g2-m1", "g2")):
        s.execute(SendMessage(q, body, group_id=group))
        clock.advance(1)
    first, second = s.execute(ReceiveMessage(q, max_number_of_messages=2))[0].messages
    s.execute(ChangeMessageVisibility(q, first.receipt_handle, 0))
    again = s.execute(ReceiveMessage(q, max_number_of_messages=3))[0].messages
    assert [m.body for m in again] == ["g2-m1", "g1-m1"]
