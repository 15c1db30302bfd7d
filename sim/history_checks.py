"""Checks of a finished run's history beyond the checker's (cluster/checker): the same views
everywhere, and what a power cut may lose under the journal's fsync policy."""

from __future__ import annotations

import dataclasses
from typing import Any

from cluster.checker.schema import ClientOp, NodeEvent, Record
from cluster.checker.verdict import AFTER_ACKED_DELETE, IN_WINDOW


def view_failures(records: list[Record]) -> list[str]:
    """"Same views everywhere" (cluster/HISTORY.md): one view_id always carries the same members,
    master and epoch, and per node view ids only grow (from each start)."""
    seen: dict[int, tuple] = {}
    last: dict[str, int] = {}
    bad: list[str] = []
    for r in records:
        if not isinstance(r, NodeEvent):
            continue
        if r.event == "started":
            last.pop(r.node, None)
        elif r.event == "view":
            vid = r.fields["view_id"]
            content = (tuple(r.fields["members"]), r.fields["master"], r.fields["epoch"])
            if seen.setdefault(vid, content) != content:
                bad.append(f"views: view {vid} is {content} on {r.node} at {r.ts:.6f}, {seen[vid]} elsewhere")
            if vid <= last.get(r.node, 0):
                bad.append(f"views: {r.node} went from view {last[r.node]} to {vid} at {r.ts:.6f}")
            last[r.node] = vid
    return bad[:1] + ([f"views: {len(bad) - 1} more view inconsistencies"] if len(bad) > 1 else [])


POWER_CUT_MARGIN_MS = 5     # thread hops and the answer's way back, beyond interval + fsync
REPLY_MAX_S = 0.0021        # World.reply: an answer's way to its client, at most


def relax_for_power_cuts(verdict: Any, records: list[Record], cuts: list[float],
                         window_s: float) -> tuple[Any, int]:
    """What fsync = interval / never allow a power cut to lose, taken out of the verdict.

    A write acknowledged at ``t`` is on the disks of a majority by ``t + window_s`` (interval:
    the interval plus an fsync; never: no bound, ``inf``), so a power cut at ``c`` may lose
    what was acknowledged in ``[c - window_s, c]``, and nothing earlier or later. Excused: a
    lost send acknowledged in that window; a lost delete or an in-window redelivery whose
    earlier delivery (or delete) completed in that window and whose redelivery came after the cut;
    a FIFO order violation whose deliveries straddle a cut; a list that missed a queue whose
    creation was acknowledged in that window. Unexpected messages, divergence,
    gating and two masters are never excused. Returns the new verdict and how many were excused."""
    done = {r.op_id: r.completed for r in records if isinstance(r, ClientOp) and r.completed is not None}

    def in_window(t: float | None) -> float | None:
        """The cut that may have lost something acknowledged at ``t``."""
        if t is None:
            return None
        # an answer decided before the cut may reach its client up to REPLY_MAX_S after it
        return next((c for c in cuts if c - window_s <= t <= c + REPLY_MAX_S), None)

    lost = [x for x in verdict.lost if in_window(x.acked_at) is None]

    def excused_dup(d: Any) -> bool:
        # the earlier delivery (a receive: its receipt and window) may be what the cut lost, and
        # for a lost delete, the delete itself (a delete made with the receipt of a lost receive
        # is a no-op the node rightly acknowledges)
        cut = [in_window(d.prev_at[1] if d.prev_at else None)]
        if d.category == AFTER_ACKED_DELETE:
            cut.append(in_window(done.get(d.delete_op_id)))
        elif d.category != IN_WINDOW:
            return False
        return any(c is not None and d.at[1] >= c for c in cut)

    dups = [d for d in verdict.duplicates if not excused_dup(d)]

    def excused_order(o: Any) -> bool:
        ts = [t for at in (o.earlier_at, o.later_at) if at for t in at]
        return bool(ts) and any(min(ts) <= c <= max(ts) for c in cuts)

    order = [o for o in verdict.order_violations if not excused_order(o)]
    stale = [x for x in verdict.stale_lists if in_window(x.created_at) is None]
    n = (len(verdict.lost) - len(lost)) + (len(verdict.duplicates) - len(dups)) \
        + (len(verdict.order_violations) - len(order)) + (len(verdict.stale_lists) - len(stale))
    return dataclasses.replace(verdict, lost=tuple(lost), duplicates=tuple(dups), order_violations=tuple(order),
                               stale_lists=tuple(stale)), n
