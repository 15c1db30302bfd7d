"""The checker's result: counts per queue, every anomaly with enough detail to debug, the
verdict rules per ack policy, and a readable text summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

POLICIES = ("none", "one", "majority", "all")
STRICT_POLICIES = ("majority", "all")

# Categories of an extra delivery (a message delivered again). The first two are anomalies.
IN_WINDOW = "in_window"                      # handed out again inside a visibility window
AFTER_ACKED_DELETE = "after_acked_delete"    # handed out again after an acknowledged delete: a lost delete
AFTER_TIMEOUT = "after_timeout"              # legitimate: the visibility timeout had expired
AFTER_UNKNOWN_DELETE = "after_unknown_delete"  # legitimate: a delete was tried but not acknowledged (or was stale)
AFTER_VISIBILITY_CHANGE = "after_visibility_change"  # legitimate: a visibility change ended the window early
CONCURRENT = "concurrent"                    # the times cannot tell (neither definitely in nor out of the window)
RESEND = "resend"                            # another message carrying the same token: the client sent it again
AFTER_MOVE = "after_move"                    # handed out by its source after its dead-letter queue handed it out
DUPLICATE_CATEGORIES = (IN_WINDOW, AFTER_ACKED_DELETE, AFTER_TIMEOUT, AFTER_UNKNOWN_DELETE,
                        AFTER_VISIBILITY_CHANGE, CONCURRENT, RESEND, AFTER_MOVE)

# Kinds of FIFO order violation.
REORDER = "reorder"          # b's first delivery definitely before a's first delivery
BATCH_ORDER = "batch_order"  # b before a inside one receive's batch
OVERTAKE = "overtake"        # b handed out while a (earlier in the group) was definitely in flight
SEQ_INVERSION = "seq_inversion"  # a acknowledged before b was sent, yet seq(a) > seq(b)


@dataclass(frozen=True, slots=True)
class LostSend:
    queue: str
    token: str
    op_ids: tuple[str, ...]          # the acknowledged send attempt(s)
    acked_at: float
    message_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unexpected:
    queue: str
    op_id: str
    client: str
    at: float
    message_id: str | None
    token: str | None


@dataclass(frozen=True, slots=True)
class Duplicate:
    """An extra delivery: `op_id` received `message_id` again after `prev_op_id` had."""
    queue: str
    token: str | None
    message_id: str | None
    category: str
    op_id: str
    client: str
    at: tuple[float, float]          # (invoked, completed) of the receive
    prev_op_id: str | None
    prev_client: str | None
    prev_at: tuple[float, float] | None
    window_end: float | None = None  # lower bound of the earlier delivery's window end (in_window)
    delete_op_id: str | None = None  # the delete in question (after_*_delete)


@dataclass(frozen=True, slots=True)
class Recovered:
    queue: str
    token: str
    outcomes: tuple[str, ...]        # the send attempts' outcomes (unknown / failed)
    op_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OrderViolation:
    """In FIFO `queue`, group `group`: `later` (token) was handed out before/while `earlier`."""
    queue: str
    group: str
    kind: str
    earlier: str
    later: str
    earlier_op_id: str | None        # the receive that delivered `earlier` (or its send, for seq_inversion)
    later_op_id: str | None
    earlier_at: tuple[float, float] | None
    later_at: tuple[float, float] | None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class ActiveInterval:
    node: str
    start: float
    end: float
    open: bool = False               # still active when the history ends
    closed_by: str = ""              # deactivated / stopped / started / kill / end
    group: int = 0                   # the replication group it mastered


@dataclass(frozen=True, slots=True)
class MasterOverlap:
    node_a: str
    node_b: str
    start: float
    end: float
    interval_a: tuple[float, float]
    interval_b: tuple[float, float]
    group: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class Divergence:
    node: str
    digest: str
    reference_node: str | None       # the master, or None when the reference is the most common digest
    reference_digest: str
    at: float


@dataclass(slots=True)
class QueueCounts:
    queue: str
    fifo: bool = False
    attempted: int = 0         # distinct tokens some client tried to send
    acknowledged: int = 0      # ... of which at least one send attempt was ok
    lost: int = 0              # acknowledged, never received (final drain included)
    unexpected: int = 0        # deliveries of something nobody tried to send
    duplicated: int = 0        # tokens delivered more than once (any reason)
    redeliveries: dict[str, int] = field(default_factory=dict)  # extra deliveries by category
    recovered: int = 0         # not acknowledged (unknown / failed), yet received
    recovered_failed: int = 0  # ... of which every attempt had failed definitely
    unrecovered: int = 0       # not acknowledged and never received (fine: may not have happened)
    received: int = 0          # distinct tokens received
    deliveries: int = 0        # deliveries (distinct receipt handles)
    in_window: int = 0         # extra deliveries inside a visibility window
    lost_deletes: int = 0      # deliveries after an acknowledged, effective delete
    order_violations: int = 0
    ops: dict[str, dict[str, int]] = field(default_factory=dict)  # op kind -> outcome -> count

    def add(self, other: "QueueCounts") -> None:
        for k in ("attempted", "acknowledged", "lost", "unexpected", "duplicated", "recovered",
                  "recovered_failed", "unrecovered", "received", "deliveries", "in_window",
                  "lost_deletes", "order_violations"):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        for k, v in other.redeliveries.items():
            self.redeliveries[k] = self.redeliveries.get(k, 0) + v
        for kind, by in other.ops.items():
            mine = self.ops.setdefault(kind, {})
            for o, v in by.items():
                mine[o] = mine.get(o, 0) + v


@dataclass(frozen=True)
class Verdict:
    queues: dict[str, QueueCounts]
    gating: tuple[Any, ...] = ()          # node_rules.GatingViolation
    throttled: tuple[Any, ...] = ()       # node_rules.ThrottleViolation
    lost: tuple[LostSend, ...] = ()
    unexpected: tuple[Unexpected, ...] = ()
    duplicates: tuple[Duplicate, ...] = ()
    recovered: tuple[Recovered, ...] = ()
    order_violations: tuple[OrderViolation, ...] = ()
    active_intervals: tuple[ActiveInterval, ...] = ()
    two_masters: tuple[MasterOverlap, ...] = ()
    divergence: tuple[Divergence, ...] = ()
    final_master: str | None = None
    digests: dict[str, str] = field(default_factory=dict)   # node -> final digest
    history_end: float = 0.0
    # Judged during the run (cluster/checker/during.py), where the history carries what to judge.
    quiescent: tuple[Any, ...] = ()       # during.QuiescentDivergence
    quiescent_points: int = 0             # quiescent points judged
    unavailable: tuple[Any, ...] = ()     # during.Unavailable (every candidate; failures() filters by policy)
    availability_judged_s: float = 0.0    # seconds of healthy-majority time judged
    stale_lists: tuple[Any, ...] = ()     # listing.StaleList: a ListQueues that missed an acknowledged create

    @property
    def totals(self) -> QueueCounts:
        t = QueueCounts("*")
        for q in self.queues.values():
            t.add(q)
        return t

    @property
    def in_window(self) -> tuple[Duplicate, ...]:
        return tuple(d for d in self.duplicates if d.category == IN_WINDOW)

    @property
    def lost_deletes(self) -> tuple[Duplicate, ...]:
        return tuple(d for d in self.duplicates if d.category == AFTER_ACKED_DELETE)

    @property
    def moved_back(self) -> tuple[Duplicate, ...]:
        return tuple(d for d in self.duplicates if d.category == AFTER_MOVE)

    def unavailable_for(self, policy: str, queue_policies: Mapping[str, str] | None = None) -> list[Any]:
        """The unavailable windows that count under ``policy``: a queue whose policy is ``all``
        rightly waits for a slow replica, so its sends count only while every member was healthy."""
        qp = dict(queue_policies or {})
        return [u for u in self.unavailable if u.everyone or qp.get(u.queue, policy) != "all"]

    def failures(self, policy: str, strict: bool = False,
                 queue_policies: Mapping[str, str] | None = None) -> list[str]:
        """The verdict rules the history breaks under `policy` (empty: it passes).

        Under every policy: no node executes a client operation while it is not the active
        master, none executes a producer while it throttles (node_rules.py), no two masters are
        active at once (invariant 2), the members converge to one digest (invariant 4), and,
        where the history carries what to judge them by (cluster/checker/during.py), members'
        digests equal the master's at quiescent points and a healthy connected majority keeps
        answering sends. majority / all also: nothing lost or unexpected, no FIFO order
        violation, no in-window duplicate (invariant 2), no lost delete (invariant 1), and no
        ListQueues missing a queue whose creation was acknowledged before it (listing.py).
        none / one promise none of these for the data (the counts are reported).
        ``strict`` is kept for callers that pass it; it adds nothing since in-window duplicates
        and lost deletes count under majority and all by default.
        ``queue_policies``: a queue's own policy (its ack-policy tag) where it has one; the data
        rules of each queue follow its own policy."""
        queue_policies = dict(queue_policies or {})
        for p in (policy, *queue_policies.values()):
            if p not in POLICIES:
                raise ValueError(f"unknown ack policy {p!r} (expected one of {POLICIES})")
        out = []
        if self.gating:
            out.append(f"gating: {len(self.gating)} client operations executed by a node that was not the "
                       "active master")
        if executed := [t for t in self.throttled if not t.refused]:
            out.append(f"flow control: {len(executed)} producers executed while throttling")
        if refused := [t for t in self.throttled if t.refused]:
            out.append(f"flow control: {len(refused)} producers refused as throttled while not throttling")
        if self.two_masters:
            out.append(f"two active masters: {len(self.two_masters)} overlaps")
        if self.divergence:
            out.append(f"divergence: {len(self.divergence)} nodes differ from the reference digest")
        if self.quiescent:
            q = self.quiescent[0]
            out.append(f"divergence at t={q.at:.3f}: {q.node} differs from the master {q.master} at a quiescent "
                       f"point ({len(self.quiescent)} member digests differed at "
                       f"{len({x.at for x in self.quiescent})} of {self.quiescent_points} points)")
        if unavailable := self.unavailable_for(policy, queue_policies):
            u = unavailable[0]
            out.append(f"unavailable: no send succeeded in [{u.start:.3f}, {u.end:.3f}) s though "
                       f"{','.join(u.healthy)} had been connected and healthy since {u.healthy_since:.3f} s "
                       f"({len(unavailable)} such windows)")

        def promised(items: tuple[Any, ...]) -> list[Any]:
            return [x for x in items if queue_policies.get(x.queue, policy) in STRICT_POLICIES]
        if lost := promised(self.lost):
            out.append(f"lost: {len(lost)} acknowledged sends never received")
        if unexpected := promised(self.unexpected):
            out.append(f"unexpected: {len(unexpected)} deliveries of messages never sent")
        if order := promised(self.order_violations):
            out.append(f"order: {len(order)} FIFO order violations")
        if in_window := promised(self.in_window):
            out.append(f"in-window: {len(in_window)} messages handed out twice inside one visibility window")
        if lost_deletes := promised(self.lost_deletes):
            out.append(f"lost deletes: {len(lost_deletes)} messages delivered after an acknowledged delete")
        if moved_back := promised(self.moved_back):
            out.append(f"moved back: {len(moved_back)} messages handed out by their source after their dead-letter "
                       "queue handed them out")
        if stale := promised(self.stale_lists):
            s = stale[0]
            out.append(f"stale lists: {len(stale)} queues missing from a ListQueues invoked after their creation "
                       f"was acknowledged ({s.op_id} at {s.at:.3f} s missed {s.queue}, created at {s.created_at:.3f} s)")
        return out

    def ok_for(self, policy: str, strict: bool = False, queue_policies: Mapping[str, str] | None = None) -> bool:
        return not self.failures(policy, strict, queue_policies)

    def to_json(self) -> dict[str, Any]:
        return {
            "queues": {k: asdict(v) for k, v in self.queues.items()},
            "gating": [_row(x) for x in self.gating],
            "throttled": [_row(x) for x in self.throttled],
            "lost": [asdict(x) for x in self.lost],
            "unexpected": [asdict(x) for x in self.unexpected],
            "duplicates": [asdict(x) for x in self.duplicates],
            "recovered": [asdict(x) for x in self.recovered],
            "order_violations": [asdict(x) for x in self.order_violations],
            "active_intervals": [_row(x) for x in self.active_intervals],
            "two_masters": [_row(x) for x in self.two_masters],
            "divergence": [asdict(x) for x in self.divergence],
            "final_master": self.final_master,
            "digests": dict(self.digests),
            "history_end": self.history_end,
            "quiescent": [_row(x) for x in self.quiescent],
            "quiescent_points": self.quiescent_points,
            "unavailable": [_row(x) for x in self.unavailable],
            "availability_judged_s": self.availability_judged_s,
            # only where a history lists queues: one that does not reads as it always did
            **({"stale_lists": [asdict(x) for x in self.stale_lists]} if self.stale_lists else {}),
        }

    def summary(self, policy: str | None = None, limit: int = 10) -> str:
        """A few lines a person reads first: counts per queue, then each anomaly kind with up to
        `limit` examples."""
        lines: list[str] = []
        if policy is not None:
            fails = self.failures(policy)
            lines.append(f"verdict ({policy}): {'PASS' if not fails else 'FAIL'}"
                         + ("" if not fails else " - " + "; ".join(fails)))
        hdr = ("queue", "att", "ack", "lost", "unexp", "dup", "in-win", "lost-del", "recov", "order")
        rows = [hdr]
        for name in sorted(self.queues) + ["*"]:
            q = self.totals if name == "*" else self.queues[name]
            rows.append((name, str(q.attempted), str(q.acknowledged), str(q.lost), str(q.unexpected),
                         str(q.duplicated), str(q.in_window), str(q.lost_deletes), str(q.recovered),
                         str(q.order_violations) if (q.fifo or name == "*") else "-"))
        widths = [max(len(r[i]) for r in rows) for i in range(len(hdr))]
        for r in rows:
            lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        t = self.totals
        if t.redeliveries:
            lines.append("redeliveries: " + ", ".join(f"{k}={v}" for k, v in sorted(t.redeliveries.items())))
        lines.append(f"masters: {len(self.active_intervals)} active intervals, "
                     f"{len(self.two_masters)} overlaps; final master {self.final_master or '?'}")
        lines.append(f"digests: {len(self.digests)} nodes, {len(self.divergence)} divergent; "
                     f"{self.quiescent_points} quiescent points judged, {len(self.quiescent)} divergent there")
        lines.append(f"availability: {self.availability_judged_s:.1f} s judged, "
                     f"{len(self.unavailable)} windows without a successful send")

        def section(title: str, items: tuple[Any, ...], fmt: Any) -> None:
            if not items:
                return
            lines.append(f"{title} ({len(items)}):")
            for x in items[:limit]:
                lines.append("  " + fmt(x))
            if len(items) > limit:
                lines.append(f"  ... {len(items) - limit} more")

        section("lost", self.lost, lambda x: f"{x.queue} token={x.token} acked@{x.acked_at:.6f} "
                f"by {','.join(x.op_ids)} ids={','.join(x.message_ids)}")
        section("unexpected", self.unexpected, lambda x: f"{x.queue} {x.op_id} ({x.client}) @{x.at:.6f} "
                f"id={x.message_id} token={x.token}")
        section("in-window duplicates", self.in_window, _fmt_dup)
        section("lost deletes", self.lost_deletes, _fmt_dup)
        section("order violations", self.order_violations, lambda x: f"{x.queue}/{x.group} {x.kind}: "
                f"{x.later} ({x.later_op_id}) before {x.earlier} ({x.earlier_op_id}) {x.detail}")
        section("two active masters", self.two_masters, lambda x: f"{x.node_a} & {x.node_b} "
                f"[{x.start:.6f}, {x.end:.6f}) for {x.duration * 1000:.1f} ms")
        section("gating", self.gating, lambda x: f"{x.node} executed {x.action} ({x.outcome}) @{x.at:.6f} "
                "while not the active master")
        section("flow control", self.throttled, lambda x: f"{x.node} executed {x.action} @{x.at:.6f} while "
                f"throttling since {x.throttling_since:.6f}")
        section("divergent at quiescent points", self.quiescent, lambda x: f"@{x.at:.6f} {x.node}: {x.digest} != "
                f"master {x.master}: {x.master_digest}")
        section("unavailable", self.unavailable, lambda x: f"[{x.start:.6f}, {x.end:.6f}) {x.op_id} ({x.queue}) "
                f"healthy {','.join(x.healthy)} since {x.healthy_since:.6f}" + ("" if x.everyone else " (a majority)"))
        section("divergent digests", self.divergence, lambda x: f"{x.node}: {x.digest} != "
                f"{x.reference_node or 'most common'}: {x.reference_digest}")
        return "\n".join(lines)


def _fmt_dup(x: Duplicate) -> str:
    prev = f"{x.prev_op_id} ({x.prev_client}) @{x.prev_at[0]:.6f}" if x.prev_at else "?"
    s = (f"{x.queue} id={x.message_id} token={x.token}: {x.op_id} ({x.client}) "
         f"@[{x.at[0]:.6f}, {x.at[1]:.6f}] after {prev}")
    if x.window_end is not None:
        s += f", window until >= {x.window_end:.6f}"
    if x.delete_op_id:
        s += f", delete {x.delete_op_id}"
    return s


def _row(x: Any) -> dict[str, Any]:
    """A finding as JSON. Its replication group is left out when it is the first: a cluster of
    one group writes what it always wrote."""
    d = asdict(x)
    if d.get("group") == 0:
        del d["group"]
    return d
