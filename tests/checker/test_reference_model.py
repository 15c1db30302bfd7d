"""Property: histories produced by a correct single-node queue always pass the checker.

The reference model below is a tiny SQS queue (standard or FIFO) with the semantics the storage
layer implements: visibility windows, stale receipt handles that delete nothing, FIFO groups that
block while any of their messages is in flight, FIFO deduplication of retried sends. Each client
operation takes effect at one instant inside its [invoked, completed] interval; intervals of
different clients overlap. Some operations end `unknown` (they may or may not have taken effect)
or `failed` (they did not). After the run, a drain receives and deletes everything left.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cluster.checker import (ClientOp, DigestRecord, History, NodeEvent, ReceivedMessage, check, parse_lines,
                             to_line)


@dataclass
class Msg:
    mid: str
    token: str
    group: str | None
    seq: int
    visible_at: float = 0.0
    receipt: str | None = None
    deleted: bool = False


class Model:
    def __init__(self, fifo: bool) -> None:
        self.fifo = fifo
        self.msgs: dict[str, Msg] = {}      # insertion order = send order
        self.dedup: dict[str, str] = {}
        self.seq = 0
        self.n = 0

    def send(self, token: str, group: str | None) -> Msg:
        if self.fifo and token in self.dedup:
            return self.msgs[self.dedup[token]]
        self.seq += 1
        m = Msg(f"m{self.seq}", token, group, self.seq)
        self.msgs[m.mid] = m
        if self.fifo:
            self.dedup[token] = m.mid
        return m

    def _live(self) -> list[Msg]:
        return [m for m in self.msgs.values() if not m.deleted]

    def receive(self, n: int, vt: float, now: float) -> list[Msg]:
        live = self._live()
        if not self.fifo:
            taken = [m for m in live if m.visible_at <= now][:n]
        else:
            blocked = {m.group for m in live if m.visible_at > now}
            taken = []
            order: list[str] = []
            for m in live:
                if m.group not in order:
                    order.append(m.group)  # type: ignore[arg-type]
            for g in order:
                if g in blocked:
                    continue
                for m in live:
                    if m.group != g:
                        continue
                    if m.visible_at > now or len(taken) >= n:
                        break
                    taken.append(m)
        for m in taken:
            self.n += 1
            m.receipt = f"rh{self.n}"
            m.visible_at = now + vt
        return taken

    def _by_receipt(self, receipt: str) -> Msg | None:
        return next((m for m in self.msgs.values() if m.receipt == receipt and not m.deleted), None)

    def delete(self, receipt: str, now: float) -> bool:
        m = self._by_receipt(receipt)
        if m is None:
            return True                      # stale or already deleted: succeeds, deletes nothing
        if self.fifo and m.visible_at <= now:
            return False                     # FIFO: expired handle
        m.deleted = True
        return True

    def change(self, receipt: str, vt: float, now: float) -> bool:
        m = self._by_receipt(receipt)
        if m is None or m.visible_at <= now:
            return False
        m.visible_at = now + vt
        return True


STEP = st.tuples(
    st.sampled_from(["send", "send", "recv", "recv", "delete", "cv"]),
    st.integers(0, 2),                         # client
    st.integers(0, 12).map(lambda k: k / 8),   # gap before this op takes effect
    st.integers(0, 4).map(lambda k: k / 8),    # how long before that it was invoked
    st.integers(0, 4).map(lambda k: k / 8),    # how long after that it completed
    st.sampled_from(["ok"] * 6 + ["unknown", "unknown", "failed"]),
    st.booleans(),                             # an unknown op took effect?
    st.integers(0, 1000),                      # choice of token / receipt / group
    st.integers(0, 4),                         # a visibility timeout, s
)


def simulate(fifo: bool, steps: list[tuple], model: Model | None = None) -> History:
    q = "q.fifo" if fifo else "q"
    model = Model(fifo) if model is None else model
    recs: list = [NodeEvent(0.0, "n1", "activated", {"reason": "elected"})]
    receipts: list[str] = []          # handles clients saw
    retryable: list[tuple[str, str | None]] = []   # (token, group) whose send was not acknowledged
    now = 1.0
    k = 0
    for kind, client, gap, lead, lag, outcome, applied, choice, vt in steps:
        now += gap + 1 / 64
        k += 1
        t0, t1 = now - lead, now + lag
        cl = f"c{client}"
        effect = outcome == "ok" or (outcome == "unknown" and applied)
        op_id = f"{cl}-{k}"
        if kind == "send":
            if retryable and choice % 4 == 0:
                token, group = retryable[choice % len(retryable)]
            else:
                token, group = f"t{k}", (f"g{choice % 3}" if fifo else None)
            out = model.send(token, group) if effect else None
            if outcome != "ok":
                retryable.append((token, group))
            recs.append(ClientOp(t0, "n1", cl, op_id, "send", q, outcome, t1, token=token, group=group,
                                 dedup=token if fifo else None,
                                 message_id=out.mid if out and outcome == "ok" else None,
                                 seq=str(out.seq) if out and fifo and outcome == "ok" else None))
        elif kind == "recv":
            vt = max(vt, 1)
            got = model.receive(1 + choice % 3, vt, now) if effect else []
            msgs = ()
            if outcome == "ok":
                msgs = tuple(ReceivedMessage(m.mid, m.token, m.receipt, m.group, str(m.seq) if fifo else None)
                             for m in got)
                receipts += [m.receipt for m in got]  # type: ignore[misc]
            recs.append(ClientOp(t0, "n1", cl, op_id, "receive", q, outcome, t1, visibility_timeout=float(vt),
                                 max_messages=1 + choice % 3, messages=msgs))
        elif receipts:
            r = receipts[choice % len(receipts)]
            if kind == "delete":
                res = model.delete(r, now) if effect else False
            else:
                res = model.change(r, float(vt), now) if effect else False
            if outcome == "ok" and not res:
                outcome = "failed"            # the model refused it (expired / not in flight)
            recs.append(ClientOp(t0, "n1", cl, op_id, "delete" if kind == "delete" else "change_visibility",
                                 q, outcome, t1, receipt=r,
                                 visibility_timeout=None if kind == "delete" else float(vt)))
    # Heal and drain: every window has expired by now.
    now += 100
    while True:
        k += 1
        got = model.receive(10, 1000.0, now)
        recs.append(ClientOp(now, "n2", "drain", f"drain-{k}", "receive", q, "ok", now + 0.01,
                             visibility_timeout=1000.0, messages=tuple(
                                 ReceivedMessage(m.mid, m.token, m.receipt, m.group, str(m.seq) if fifo else None)
                                 for m in got), phase="drain"))
        if not got:
            break
        for m in got:
            k += 1
            assert model.delete(m.receipt, now + 0.02)  # type: ignore[arg-type]
            recs.append(ClientOp(now + 0.02, "n2", "drain", f"drain-{k}", "delete", q, "ok", now + 0.03,
                                 receipt=m.receipt, phase="drain"))
        now += 1
    recs += [DigestRecord(now + 1, "n1", "same", "n1"), DigestRecord(now + 1, "n2", "same", "n1")]
    return History.of(recs)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(STEP, min_size=1, max_size=60))
def test_correct_queue_histories_pass(fifo, steps):
    h = simulate(fifo, steps)
    v = check(h)
    assert v.ok_for("all", strict=True), v.summary("all")
    assert v.lost == () and v.unexpected == () and v.order_violations == () and v.in_window == ()
    t = v.totals
    assert t.attempted == t.acknowledged + t.recovered + t.unrecovered
    # The JSON-lines form checks the same.
    again = History.of(parse_lines(to_line(r) for r in h.records()))
    assert again == h


def test_model_produces_the_interesting_cases():
    """The generator reaches redeliveries of every legitimate kind (else the property is weak)."""
    import random
    rnd = random.Random(7)
    seen: set[str] = set()
    for _ in range(200):
        steps = [(
            rnd.choice(["send", "send", "recv", "recv", "delete", "cv"]), rnd.randint(0, 2), rnd.randint(0, 12) / 8,
            rnd.randint(0, 4) / 8, rnd.randint(0, 4) / 8, rnd.choice(["ok"] * 6 + ["unknown", "unknown", "failed"]),
            rnd.random() < 0.5, rnd.randint(0, 1000), rnd.randint(0, 4)) for _ in range(60)]
        v = check(simulate(rnd.random() < 0.5, steps))
        assert v.ok_for("all", strict=True), v.summary("all")
        seen |= set(v.totals.redeliveries)
        seen |= {"recovered"} if v.totals.recovered else set()
    assert {"after_timeout", "after_unknown_delete", "after_visibility_change", "recovered"} <= seen, seen


# --- teeth: the same generator over planted bugs; the checker must notice --------------------

class Buggy(Model):
    def __init__(self, fifo: bool, bug: str) -> None:
        super().__init__(fifo)
        self.bug = bug
        self.sends = 0

    def send(self, token: str, group: str | None) -> Msg:
        m = super().send(token, group)
        self.sends += 1
        if self.bug == "drop_send" and self.sends % 5 == 3:
            m.deleted = True                  # acknowledged, never stored
        return m

    def delete(self, receipt: str, now: float) -> bool:
        if self.bug == "forget_delete":
            return True
        return super().delete(receipt, now)

    def receive(self, n: int, vt: float, now: float) -> list[Msg]:
        if self.bug == "ignore_inflight":
            saved = {m.mid: m.visible_at for m in self.msgs.values()}
            for m in self.msgs.values():
                m.visible_at = 0.0
            got = super().receive(n, vt, now)
            for m in self.msgs.values():
                if m not in got:
                    m.visible_at = saved[m.mid]
            return got
        if self.bug == "fifo_no_block" and self.fifo:
            live = [m for m in self._live() if m.visible_at <= now][:n]
            for m in live:
                self.n += 1
                m.receipt, m.visible_at = f"rh{self.n}", now + vt
            return live
        got = super().receive(n, vt, now)
        if self.bug == "reverse_batch":
            got.reverse()
        return got


def _found(bug: str, fifo: bool, predicate, seeds: int = 300) -> int:
    import random
    for seed in range(seeds):
        rnd = random.Random(seed)
        steps = [(rnd.choice(["send", "send", "recv", "recv", "delete", "cv"]), rnd.randint(0, 2),
                  rnd.randint(0, 12) / 8, rnd.randint(0, 4) / 8, rnd.randint(0, 4) / 8,
                  rnd.choice(["ok"] * 6 + ["unknown", "unknown", "failed"]), rnd.random() < 0.5,
                  rnd.randint(0, 1000), rnd.randint(0, 4)) for _ in range(40)]
        v = check(simulate(fifo, steps, Buggy(fifo, bug)))
        if predicate(v):
            return seed
    raise AssertionError(f"planted bug {bug} not found in {seeds} seeds")


def test_teeth_lost_send():
    _found("drop_send", False, lambda v: v.lost and not v.ok_for("majority"))


def test_teeth_lost_delete():
    _found("forget_delete", False, lambda v: v.lost_deletes and not v.ok_for("majority", strict=True))


def test_teeth_in_window_duplicate():
    _found("ignore_inflight", False, lambda v: v.in_window)


def test_teeth_fifo_overtake():
    _found("fifo_no_block", True, lambda v: any(o.kind == "overtake" for o in v.order_violations)
           and not v.ok_for("majority"))


def test_teeth_fifo_batch_order():
    _found("reverse_batch", True, lambda v: any(o.kind == "batch_order" for o in v.order_violations))
