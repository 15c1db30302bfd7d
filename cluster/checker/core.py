"""The checker: a history in, a Verdict out. Pure Python, deterministic, no Spark.

Timing model. Every client operation is known only by its interval [invoked, completed] on the
shared clock; the server applied it at some unknown instant inside. A delivery's visibility
window starts at that instant. The checker flags an anomaly only when it holds for *every*
placement of those instants (no false positives from timing), and counts the undecidable cases
separately (`concurrent`). `tolerance` (seconds) widens that uncertainty further, for clocks
that are not shared.

The rules, in full, are in cluster/HISTORY.md ("What the checker concludes").
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from cluster.checker.during import quiescent_divergence, unavailability
from cluster.checker.listing import stale_lists
from cluster.checker.moves import dead_letter_sources, never_settled
from cluster.checker.node_rules import gating_violations, throttle_violations
from cluster.checker.schema import (DELETE, MESSAGE_OPS, OK, RECEIVE, SEND, UNKNOWN, ClientOp,
                                    History, ReceivedMessage, load_dir)
from cluster.checker.verdict import (AFTER_ACKED_DELETE, AFTER_MOVE, AFTER_TIMEOUT, AFTER_UNKNOWN_DELETE,
                                     AFTER_VISIBILITY_CHANGE, BATCH_ORDER, CONCURRENT, IN_WINDOW, OVERTAKE,
                                     REORDER, RESEND, SEQ_INVERSION, ActiveInterval, Divergence, Duplicate,
                                     LostSend, MasterOverlap, OrderViolation, QueueCounts, Recovered,
                                     Unexpected, Verdict)

DEFAULT_VISIBILITY_TIMEOUT = 30.0
INF = float("inf")


@dataclass(frozen=True, slots=True)
class Delivery:
    op: ClientOp
    index: int              # position in the receive's batch
    msg: ReceivedMessage
    token: str | None
    key: str                # the message's identity: its id, else "token:" + token
    vt: float               # visibility timeout in seconds
    t0: float               # the receive's invocation
    t1: float               # ... and completion

    def sort_key(self) -> tuple[float, float, str, int]:
        return (self.t0, self.t1, self.op.op_id, self.index)


def check_dir(path: str | os.PathLike[str], **kw: float) -> Verdict:
    """Load every JSON-lines history under `path` and check it."""
    return check(load_dir(path), **kw)


def check(history: History, default_visibility_timeout: float = DEFAULT_VISIBILITY_TIMEOUT,
          tolerance: float = 0.0) -> Verdict:
    # a dead-letter queue is judged with its source (cluster/checker/moves.py)
    sources = dead_letter_sources(history)
    by_queue: dict[str, list[ClientOp]] = defaultdict(list)
    for op in history.ops:
        if op.op in MESSAGE_OPS:
            by_queue[sources.get(op.queue, op.queue)].append(op)
    queues: dict[str, QueueCounts] = {}
    lost: list[LostSend] = []
    unexpected: list[Unexpected] = []
    dups: list[Duplicate] = []
    recovered: list[Recovered] = []
    order: list[OrderViolation] = []
    for qname in sorted(by_queue):
        qc = _QueueCheck(qname, by_queue[qname], default_visibility_timeout, tolerance,
                         frozenset(q for q, src in sources.items() if src == qname))
        qc.run()
        queues[qname] = qc.counts
        lost += qc.lost
        unexpected += qc.unexpected
        dups += qc.dups
        recovered += qc.recovered
        order += qc.order
    end = history.end
    intervals = active_intervals(history, end)
    overlaps = master_overlaps(intervals, tolerance)
    final_master, digests, divergence = digest_divergence(history, intervals)
    points, quiescent = quiescent_divergence(history)
    judged_s, unavailable = unavailability(history)
    return Verdict(queues, tuple(gating_violations(history, intervals, tolerance)),
                   tuple(throttle_violations(history, tolerance)),
                   tuple(lost), tuple(unexpected), tuple(dups), tuple(recovered), tuple(order),
                   tuple(intervals), tuple(overlaps), tuple(divergence), final_master, digests, end,
                   tuple(quiescent), points, tuple(unavailable), round(judged_s, 6),
                   tuple(stale_lists(history, tolerance)))


# --- queues -------------------------------------------------------------------------------

def _seq_key(s: str | None) -> tuple[int, int | str] | None:
    if s is None:
        return None
    return (0, int(s)) if s.isdigit() else (1, s)


class _QueueCheck:
    def __init__(self, queue: str, ops: list[ClientOp], default_vt: float, tol: float,
                 dead_letter: frozenset[str] = frozenset()) -> None:
        self.queue = queue
        self.dead_letter = dead_letter   # the queues judged with this one: its moved messages
        self.ops = ops
        self.default_vt = default_vt
        self.tol = tol
        self.fifo = queue.endswith(".fifo")
        self.counts = QueueCounts(queue, fifo=self.fifo)
        self.lost: list[LostSend] = []
        self.unexpected: list[Unexpected] = []
        self.dups: list[Duplicate] = []
        self.recovered: list[Recovered] = []
        self.order: list[OrderViolation] = []

    def run(self) -> None:
        c = self.counts
        sends: dict[str, list[ClientOp]] = defaultdict(list)
        receives: list[ClientOp] = []
        # receipt -> deletes / visibility changes that name it
        self.deletes: dict[str, list[ClientOp]] = defaultdict(list)
        self.changes: dict[str, list[ClientOp]] = defaultdict(list)
        self.maybe_receives: list[ClientOp] = []   # outcome unknown: may have taken messages
        id_to_token: dict[str, str] = {}
        for op in self.ops:
            by = c.ops.setdefault(op.op, {})
            by[op.outcome] = by.get(op.outcome, 0) + 1
            if op.op == SEND:
                if op.token is None:
                    continue
                sends[op.token].append(op)
                if op.outcome == OK and op.message_id is not None:
                    id_to_token[op.message_id] = op.token
            elif op.op == RECEIVE:
                if op.outcome == OK:
                    receives.append(op)
                elif op.outcome == UNKNOWN:
                    self.maybe_receives.append(op)
            elif op.receipt is not None:
                (self.deletes if op.op == DELETE else self.changes)[op.receipt].append(op)
        self.sends = sends
        self.maybe_receives.sort(key=lambda o: o.ts)
        self.maybe_starts = [o.ts for o in self.maybe_receives]
        self.maybe_latest_end: list[float] = []
        latest = -INF
        for o in self.maybe_receives:
            latest = max(latest, o.end)
            self.maybe_latest_end.append(latest)

        # Deliveries; a receipt seen twice is one delivery reported twice (a retried FIFO receive
        # with the same ReceiveRequestAttemptId gets the same handles back).
        seen_receipts: set[tuple[str, str]] = set()
        by_key: dict[str, list[Delivery]] = defaultdict(list)
        by_token: dict[str, list[Delivery]] = defaultdict(list)
        for op in receives:
            for i, m in enumerate(op.messages):
                token = m.token if m.token is not None else id_to_token.get(m.message_id or "")
                if token is None or token not in sends:
                    c.unexpected += 1
                    self.unexpected.append(Unexpected(self.queue, op.op_id, op.client, op.ts, m.message_id, m.token))
                    continue
                key = m.message_id if m.message_id is not None else "token:" + token
                if m.receipt is not None:
                    if (key, m.receipt) in seen_receipts:
                        continue
                    seen_receipts.add((key, m.receipt))
                vt = m.visibility_timeout if m.visibility_timeout is not None else (
                    op.visibility_timeout if op.visibility_timeout is not None else self.default_vt)
                d = Delivery(op, i, m, token, key, vt, op.ts, op.end)
                by_key[key].append(d)
                by_token[token].append(d)
                c.deliveries += 1
        for ds in by_key.values():
            ds.sort(key=Delivery.sort_key)
        for ds in by_token.values():
            ds.sort(key=Delivery.sort_key)
        self.by_key = by_key
        self.by_token = by_token

        # Jepsen's total-queue counts.
        c.attempted = len(sends)
        for token in sorted(sends):
            attempts = sends[token]
            oks = [a for a in attempts if a.outcome == OK]
            got = token in by_token
            c.received += got
            if oks:
                c.acknowledged += 1
                if not got:
                    c.lost += 1
                    self.lost.append(LostSend(self.queue, token, tuple(a.op_id for a in oks),
                                              min(a.end for a in oks),
                                              tuple(a.message_id for a in oks if a.message_id is not None)))
            elif got:
                c.recovered += 1
                if all(a.outcome != UNKNOWN for a in attempts):
                    c.recovered_failed += 1
                self.recovered.append(Recovered(self.queue, token, tuple(a.outcome for a in attempts),
                                                tuple(a.op_id for a in attempts)))
            else:
                c.unrecovered += 1
        if self.dead_letter:
            for token in never_settled(sends, by_token, self.deletes):
                oks = [a for a in sends[token] if a.outcome == OK]
                c.lost += 1
                self.lost.append(LostSend(self.queue, token, tuple(a.op_id for a in oks), min(a.end for a in oks),
                                          tuple(a.message_id for a in oks if a.message_id is not None)))

        # Duplicates, classified.
        for token in sorted(by_token):
            ds = by_token[token]
            if len(ds) < 2:
                continue
            c.duplicated += 1
            first_key = ds[0].key
            for key in sorted({d.key for d in ds}, key=lambda k: (k != first_key, k)):
                kd = by_key[key]
                if key != first_key:
                    self._dup(kd[0], RESEND, ds[0])
                for i in range(1, len(kd)):
                    self._classify(kd[i], kd[:i], kd)
        if self.fifo:
            self._fifo()

    # -- windows -----------------------------------------------------------------------------

    def _window_end(self, x: Delivery, before: float, ignore_deletes: bool = False) -> float | None:
        """A lower bound of the end of x's visibility window, considering the deletes of x's
        receipt and the visibility changes that can have moved it, invoked before `before`; None
        when a delete may have ended it (then the message is not 'in flight' in x's window any
        more)."""
        base = x.t0 + x.vt
        r = x.msg.receipt
        if r is None:
            return base
        for d in () if ignore_deletes else self.deletes.get(r, ()):
            if d.ts < before:
                return None
        if self.fifo:
            return self._fifo_window_end(x, base, before)
        # Standard queues, as SQS answers: a change through any handle of the message, the
        # current or a superseded one, moves the window the message is in; an ok change to a
        # message no longer in flight does nothing. In time order: a change may have set the end
        # to (its instant + its timeout); an ok one certainly did when the window was certainly
        # still open when it completed and no other change overlaps it (nothing can have come
        # after it unseen): then it alone bounds the end, an extension included. A change through
        # an earlier handle acted on x's window only if it came after x's receive: one that
        # overlaps that receive may have come first, found the message visible, and done nothing.
        cvs = sorted((cv for cv in self._changes_of(x) if cv.ts < before), key=lambda c: (c.ts, c.end))
        lo = base
        tol = self.tol
        for i, cv in enumerate(cvs):
            cand = cv.ts + (cv.visibility_timeout or 0.0)
            alone = all(o.end < cv.ts - tol or o.ts > cv.end + tol for j, o in enumerate(cvs) if j != i)
            after_x = cv.receipt == r or cv.ts > x.t1 + tol
            if cv.outcome == OK and alone and after_x and cv.end + tol < lo:
                lo = cand
            else:
                lo = min(lo, cand)
        return lo

    def _changes_of(self, x: Delivery) -> list[ClientOp]:
        """Visibility changes that may have acted on x's window: through x's handle, or through a
        handle of an earlier delivery of the same message, invoked late enough to act after x."""
        receipts = {d.msg.receipt for d in self.by_key.get(x.key, ()) if d.msg.receipt is not None and d.t0 <= x.t1}
        receipts.add(x.msg.receipt)
        return [cv for r in sorted(receipts) for cv in self.changes.get(r, ()) if cv.end >= x.t0]

    def _fifo_window_end(self, x: Delivery, base: float, before: float) -> float:
        """FIFO queues keep their handles strict (only the current handle of a message in flight
        changes it; storage/engine.py): a change of x's receipt moves x's window, an ok one
        certainly did."""
        cvs = [cv for cv in self.changes.get(x.msg.receipt or "", ()) if cv.ts < before]
        if not cvs:
            return base
        oks = [cv for cv in cvs if cv.outcome == OK]
        # The window ends at (last applied change's instant + its timeout), or at base if none
        # applied. An ok change was applied; one definitely followed by an ok change is not last.
        lo = INF if oks else base
        for cv in cvs:
            if any(o.ts > cv.end for o in oks):
                continue
            lo = min(lo, cv.ts + (cv.visibility_timeout or 0.0))
        return lo

    def _in_window(self, x: Delivery, y: Delivery) -> float | None:
        """The window end if y definitely fell inside x's window (or x inside y's), else None."""
        tol = self.tol
        ends = []
        if x.t0 <= y.t1 + tol:        # x may have come first
            w = self._window_end(x, y.t1 + tol)
            if w is None or not (y.t1 + tol < w):
                return None
            ends.append(w)
        if y.t0 <= x.t1 + tol:        # y may have come first
            w = self._window_end(y, x.t1 + tol)
            if w is None or not (x.t1 + tol < w):
                return None
            ends.append(w)
        return min(ends) if ends else None

    def _effective_delete(self, x: Delivery, all_ds: list[Delivery]) -> ClientOp | None:
        """An acknowledged delete of x's receipt that certainly removed the message: nobody
        else can have received it between x and the delete (a stale handle deletes nothing).
        Nobody: no recorded delivery in between, and either x's window was certainly still open
        when the delete completed or no receive of unknown outcome overlaps that stretch."""
        r = x.msg.receipt
        if r is None:
            return None
        for d in self.deletes.get(r, ()):
            if d.outcome != OK or d.completed is None:
                continue
            if any(z is not x and z.msg.receipt != r and z.t1 > x.t0 and z.t0 < d.end for z in all_ds):
                continue
            w = self._window_end(x, d.end, ignore_deletes=True)
            if w is None or d.end + self.tol >= w:
                if self.dead_letter:
                    continue   # a receive that moved the message answered nothing: no record shows it
                k = bisect_left(self.maybe_starts, d.end)
                if k and self.maybe_latest_end[k - 1] > x.t0:
                    continue
            return d
        return None

    def _classify(self, y: Delivery, earlier: list[Delivery], all_ds: list[Delivery]) -> None:
        tol = self.tol
        if self.dead_letter and y.op.queue == self.queue:
            for x in earlier:
                if x.op.queue != self.queue and x.t1 + tol < y.t0:
                    self._dup(y, AFTER_MOVE, x)
                    return
        for x in earlier:
            d = self._effective_delete(x, all_ds)
            if d is not None and d.end + tol < y.t0:
                self._dup(y, AFTER_ACKED_DELETE, x, delete_op=d)
                return
        for x in earlier:
            w = self._in_window(x, y)
            if w is not None:
                self._dup(y, IN_WINDOW, x, window_end=w)
                return
        prev = earlier[-1]
        r = prev.msg.receipt
        if r is not None:
            for d in self.deletes.get(r, ()):
                if d.ts < y.t1:
                    self._dup(y, AFTER_UNKNOWN_DELETE, prev, delete_op=d)
                    return
            changes = self.changes.get(r, ()) if self.fifo else self._changes_of(prev)
            if any(cv.ts < y.t1 for cv in changes):
                self._dup(y, AFTER_VISIBILITY_CHANGE, prev)
                return
        if y.t0 - tol >= prev.t1 + prev.vt:
            self._dup(y, AFTER_TIMEOUT, prev)
        else:
            self._dup(y, CONCURRENT, prev)

    def _dup(self, y: Delivery, cat: str, x: Delivery | None, window_end: float | None = None,
             delete_op: ClientOp | None = None) -> None:
        c = self.counts
        c.redeliveries[cat] = c.redeliveries.get(cat, 0) + 1
        if cat == IN_WINDOW:
            c.in_window += 1
        elif cat == AFTER_ACKED_DELETE:
            c.lost_deletes += 1
        self.dups.append(Duplicate(
            self.queue, y.token, y.msg.message_id, cat, y.op.op_id, y.op.client, (y.t0, y.t1),
            x.op.op_id if x else None, x.op.client if x else None, (x.t0, x.t1) if x else None,
            window_end, delete_op.op_id if delete_op else None))

    # -- FIFO --------------------------------------------------------------------------------

    def _fifo(self) -> None:
        """Order within each message group; see HISTORY.md for the rules."""
        groups: dict[str, list[str]] = defaultdict(list)
        for token in sorted(self.sends):
            g = next((a.group for a in self.sends[token] if a.group is not None), None)
            if g is None:
                g = next((d.msg.group for d in self.by_token.get(token, ()) if d.msg.group is not None), None)
            if g is not None:
                groups[g].append(token)
        for g in sorted(groups):
            self._group(g, groups[g])
        self.counts.order_violations = len(self.order)

    def _group(self, g: str, tokens: list[str]) -> None:
        sends, by_token = self.sends, self.by_token
        acked: dict[str, float] = {}
        invoked: dict[str, float] = {}
        seq: dict[str, tuple[int, int | str]] = {}
        ack_op: dict[str, str] = {}
        for t in tokens:
            attempts = sends[t]
            invoked[t] = min(a.ts for a in attempts)
            oks = [a for a in attempts if a.outcome == OK]
            if oks:
                first = min(oks, key=lambda a: a.end)
                acked[t] = first.end
                ack_op[t] = first.op_id
            s = next((_seq_key(a.seq) for a in oks if a.seq is not None), None)
            if s is None:
                s = next((_seq_key(d.msg.seq) for d in by_token.get(t, ()) if d.msg.seq is not None), None)
            if s is not None:
                seq[t] = s
        first = {t: by_token[t][0] for t in tokens if t in by_token}
        found: set[tuple[str, str, str]] = set()

        def add(kind: str, a: str, b: str, da: Delivery | None, db: Delivery | None, detail: str = "",
                a_op: str | None = None) -> None:
            if (kind, a, b) in found:
                return
            found.add((kind, a, b))
            self.order.append(OrderViolation(
                self.queue, g, kind, a, b, a_op if a_op is not None else (da.op.op_id if da else None),
                db.op.op_id if db else None, (da.t0, da.t1) if da else None, (db.t0, db.t1) if db else None,
                detail))

        def before(a: str, b: str) -> bool:
            """a must come before b in the group: a acknowledged before b was first invoked, or
            a's sequence number is smaller."""
            if a in acked and acked[a] < invoked[b]:
                return True
            return a in seq and b in seq and seq[a] < seq[b]

        # Real-time precedence: tokens sorted by acknowledgement.
        by_ack = sorted(acked, key=lambda t: (acked[t], t))
        ack_times = [acked[t] for t in by_ack]
        # seq_inversion: a acked before b invoked, yet seq(a) > seq(b).
        best: tuple[tuple[int, int | str], str] | None = None
        pref_seq: list[tuple[tuple[int, int | str], str] | None] = []
        for t in by_ack:
            if t in seq and (best is None or seq[t] > best[0]):
                best = (seq[t], t)
            pref_seq.append(best)
        for b in tokens:
            k = bisect_left(ack_times, invoked[b])
            if k and b in seq:
                m = pref_seq[k - 1]
                if m is not None and m[0] > seq[b] and m[1] != b:
                    add(SEQ_INVERSION, m[1], b, None, None,
                        f"seq {m[0][1]} acknowledged before {b} was sent with seq {seq[b][1]}",
                        a_op=ack_op.get(m[1]))

        # reorder: b's first delivery definitely before a's first delivery, for a before b.
        # Prefix maxima of the invocation of earlier tokens' first deliveries.
        def prefix_latest(order_: list[str]) -> list[tuple[float, str] | None]:
            out: list[tuple[float, str] | None] = []
            cur: tuple[float, str] | None = None
            for t in order_:
                if t in first and (cur is None or first[t].t0 > cur[0]):
                    cur = (first[t].t0, t)
                out.append(cur)
            return out

        pre_ack = prefix_latest(by_ack)
        by_seq = sorted(seq, key=lambda t: (seq[t], t))
        seq_keys = [seq[t] for t in by_seq]
        pre_seq = prefix_latest(by_seq)
        for b in tokens:
            fb = first.get(b)
            if fb is None:
                continue
            cands = []
            k = bisect_left(ack_times, invoked[b])
            if k:
                cands.append(pre_ack[k - 1])
            if b in seq:
                k = bisect_left(seq_keys, seq[b])
                if k:
                    cands.append(pre_seq[k - 1])
            for cand in cands:
                if cand is None or cand[1] == b:
                    continue
                a = cand[1]
                if fb.t1 + self.tol < first[a].t0:
                    add(REORDER, a, b, first[a], fb,
                        f"first delivery of {b} completed at {fb.t1:.6f}, of {a} invoked at {first[a].t0:.6f}")
                    break

        # batch_order: inside one receive, b listed before a.
        per_op: dict[str, list[Delivery]] = defaultdict(list)
        all_group: list[Delivery] = []
        for t in tokens:
            for d in by_token.get(t, ()):
                per_op[d.op.op_id].append(d)
                all_group.append(d)
        for op_id in sorted(per_op):
            ds = sorted(per_op[op_id], key=lambda d: d.index)
            for i in range(len(ds)):
                for j in range(i + 1, len(ds)):
                    if ds[i].token != ds[j].token and before(ds[j].token, ds[i].token):  # type: ignore[arg-type]
                        add(BATCH_ORDER, ds[j].token, ds[i].token, ds[j], ds[i],  # type: ignore[arg-type]
                            f"positions {ds[j].index} and {ds[i].index} of {op_id}")

        # overtake: b handed out (in another receive) while a, before b, was definitely in flight.
        all_group.sort(key=Delivery.sort_key)
        starts = [d.t0 for d in all_group]
        for x in all_group:
            a = x.token
            horizon = x.t0 + x.vt
            r = x.msg.receipt
            if r is not None:
                for cv in self.changes.get(r, ()):
                    horizon = max(horizon, cv.end + (cv.visibility_timeout or 0.0))
                # A delete invoked before y completed ends the question (a y starting later
                # completes later): scan no further than the first delete.
                for d in self.deletes.get(r, ()):
                    horizon = min(horizon, d.ts)
            k = bisect_left(starts, x.t1 + self.tol)
            while k < len(all_group) and starts[k] < horizon:
                y = all_group[k]
                k += 1
                if y.op is x.op or y.token == a or y.t0 <= x.t1 + self.tol:
                    continue
                if not before(a, y.token):  # type: ignore[arg-type]
                    continue
                w = self._window_end(x, y.t1 + self.tol)
                if w is not None and y.t1 + self.tol < w:
                    add(OVERTAKE, a, y.token, x, y,  # type: ignore[arg-type]
                        f"{a} in flight until >= {w:.6f}")


# --- masters and digests ------------------------------------------------------------------

def active_intervals(history: History, end: float | None = None) -> list[ActiveInterval]:
    """(node, from, to, group) for every period a node was the active master of a replication
    group: from `activated` to the node's next `deactivated` / `stopped` of that group, or its
    next `started` (it was killed: the interval ends at the last kill recorded by the nemesis
    before that, else at the `started`), or a nemesis `kill` of it, or the end of the history
    (open). A line without a `group` is of group 0, the only group of a one-group cluster; a
    `stopped`, `started` or kill ends the node's intervals of every group."""
    end = history.end if end is None else end
    per_node: dict[str, list[tuple[float, int, str, int | None]]] = defaultdict(list)
    for e in history.node_events:
        ev = e.event
        if ev == "activated" or ev == "deactivated":
            per_node[e.node].append((e.ts, 1, ev, int(e.fields.get("group", 0))))
        elif ev == "started" or ev == "stopped":
            per_node[e.node].append((e.ts, 1, ev, None))
    for n in history.nemesis:
        if n.action == "kill":
            per_node[n.node].append((n.ts, 0, "kill", None))
    out: list[ActiveInterval] = []
    for node in sorted(per_node):
        start: dict[int, float] = {}
        for ts, _, ev, group in sorted(per_node[node], key=lambda x: x[:3]):
            if ev == "activated":
                start.setdefault(group, ts)   # type: ignore[arg-type]
                continue
            for g in ([group] if group is not None else sorted(start)):
                if g in start:
                    out.append(ActiveInterval(node, start.pop(g), ts, False, ev, g))
        for g in sorted(start):
            out.append(ActiveInterval(node, start[g], max(end, start[g]), True, "end", g))
    out.sort(key=lambda i: (i.start, i.node, i.group))
    return out


def master_overlaps(intervals: Iterable[ActiveInterval], tolerance: float = 0.0) -> list[MasterOverlap]:
    """Pairs of intervals of different nodes, for one replication group, that overlap by more
    than `tolerance`. Back-to-back intervals (one ends exactly when the next starts) do not
    overlap; two nodes mastering different groups at once is what groups are for."""
    iv = sorted(intervals, key=lambda i: (i.start, i.node))
    out = []
    for i, a in enumerate(iv):
        for b in iv[i + 1:]:
            if b.start >= a.end:
                break
            if a.node == b.node or a.group != b.group:
                continue
            s, e = max(a.start, b.start), min(a.end, b.end)
            if e - s > tolerance:
                out.append(MasterOverlap(a.node, b.node, s, e, (a.start, a.end), (b.start, b.end), a.group))
    return out


def digest_divergence(history: History, intervals: list[ActiveInterval]
                      ) -> tuple[str | None, dict[str, str], list[Divergence]]:
    """Each node's last digest against the master's. The master is the node still active at the
    end; else the master most digest records name; else the last node activated. Without a
    digest from the master, the reference is the most common digest. With several replication
    groups a node's digest covers all of them (every member holds every group), and the master
    meant is group 0's."""
    intervals = [i for i in intervals if i.group == 0]
    last: dict[str, tuple[float, str, str | None]] = {}
    for d in history.digests:
        last[d.node] = (d.ts, d.digest, d.master)
    digests = {n: v[1] for n, v in sorted(last.items())}
    open_ = sorted({i.node for i in intervals if i.open})
    master: str | None = open_[0] if len(open_) == 1 else None
    if master is None:
        named: dict[str, int] = defaultdict(int)
        for v in last.values():
            if v[2]:
                named[v[2]] += 1
        if named:
            master = max(sorted(named), key=lambda n: named[n])
    if master is None and intervals:
        master = max(intervals, key=lambda i: i.start).node
    if not digests:
        return master, digests, []
    if master is not None and master in digests:
        ref_node: str | None = master
        ref = digests[master]
    else:
        ref_node = None
        counts: dict[str, int] = defaultdict(int)
        for v in digests.values():
            counts[v] += 1
        ref = max(sorted(counts), key=lambda k: counts[k])
    div = [Divergence(n, dg, ref_node, ref, last[n][0]) for n, dg in digests.items() if dg != ref]
    return master, digests, div
