"""The dashboard's queue table: one page of a node's queues, filtered and sorted, plus totals.

A node may hold tens of thousands of queues; the page never carries more than ``MAX_LIMIT`` rows,
and the totals summarise all of them. The counts are this node's own storage (a replica's copy
on a replica), as ``/metrics`` reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from storage.commands import QueueKey

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
SORTS = ("name", "visible", "inflight", "delayed", "total")


@dataclass(frozen=True, slots=True)
class QueueQuery:
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    filter: str = ""         # a substring of the queue name, case-insensitive
    sort: str = "name"       # the count sorts put the largest first

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> "QueueQuery":
        """From the route's query parameters; raises ValueError for a value it cannot use."""
        def number(key: str, default: int, lo: int, hi: int) -> int:
            raw = params.get(key)
            if raw in (None, ""):
                return default
            try:
                n = int(raw)
            except ValueError:
                raise ValueError(f"{key} must be an integer, not {raw!r}") from None
            if not lo <= n <= hi:
                raise ValueError(f"{key} must be between {lo} and {hi}")
            return n

        sort = params.get("sort") or "name"
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}")
        return cls(number("offset", 0, 0, 10**9), number("limit", DEFAULT_LIMIT, 1, MAX_LIMIT),
                   (params.get("filter") or "").strip().lower(), sort)


def queue_page(stats: Mapping[QueueKey, tuple[int, int, int]], dlqs: Mapping[QueueKey, QueueKey],
               q: QueueQuery, base_url: str) -> dict[str, Any]:
    """``stats``: (visible, in flight, delayed) per queue; ``dlqs``: source -> dead-letter queue."""
    sources: dict[QueueKey, int] = {}
    for target in dlqs.values():
        sources[target] = sources.get(target, 0) + 1
    visible = inflight = delayed = 0
    for v, i, d in stats.values():
        visible += v
        inflight += i
        delayed += d
    keys = [k for k in stats if q.filter in k.name.lower()] if q.filter else list(stats)
    by_name = lambda k: (k.name, k.region, k.account)  # noqa: E731
    if q.sort == "name":
        keys.sort(key=by_name)
    else:
        column = {"visible": (0,), "inflight": (1,), "delayed": (2,), "total": (0, 1, 2)}[q.sort]
        keys.sort(key=by_name)
        keys.sort(key=lambda k: sum(stats[k][c] for c in column), reverse=True)   # stable: ties by name
    rows = []
    for key in keys[q.offset:q.offset + q.limit]:
        v, i, d = stats[key]
        dlq = dlqs.get(key)
        rows.append({"name": key.name, "region": key.region, "account": key.account, "fifo": key.is_fifo,
                     "url": f"{base_url}/{key.account}/{key.name}", "visible": v, "inflight": i, "delayed": d,
                     "dlq": None if dlq is None else {"name": dlq.name, "exists": dlq in stats,
                                                      "same_namespace": (dlq.region, dlq.account) == (key.region, key.account)},
                     "dlq_for": sources.get(key, 0)})
    return {"total_queues": len(stats), "matched": len(keys), "offset": q.offset, "limit": q.limit,
            "filter": q.filter, "sort": q.sort,
            "totals": {"visible": visible, "inflight": inflight, "delayed": delayed,
                       "with_dlq": len(dlqs), "dlqs": len(sources)},
            "queues": rows}
