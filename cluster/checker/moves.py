"""Dead-letter moves in a history: a message keeps its id and token when it moves to its
dead-letter queue, so the checker judges a dead-letter queue's deliveries with its source's.

A ``redrive`` line (cluster/HISTORY.md) names a queue's dead-letter queue: its operations are
judged with the source's, as one queue (so whoever writes the history sends nothing to the
dead-letter queue directly). Two rules then follow a message across the move (cluster/HISTORY.md,
"Dead-letter moves"):

* once its dead-letter queue handed it out, the source never hands it out again (``after_move``);
* it is never lost on the way: a message whose last deliveries were none of them followed by a
  delete attempt is still stored somewhere, so the drain after the workload must receive it
  again, from the source or the dead-letter queue. If it never does, the move lost it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from cluster.checker.schema import OK, ClientOp, History

REDRIVE = "redrive"   # the line that names a queue's dead-letter queue


def dead_letter_sources(history: History) -> dict[str, str]:
    """Dead-letter queue -> its source, as the history's ``redrive`` lines name them (a queue
    that is the dead-letter queue of several is judged on its own)."""
    sources: dict[str, set[str]] = defaultdict(set)
    for e in history.node_events:
        if e.event == REDRIVE:
            sources[e.fields["dead_letter"]].add(e.fields["queue"])
    return {dlq: src.pop() for dlq, src in sources.items() if len(src) == 1}


def never_settled(sends: dict[str, list[ClientOp]], by_token: dict[str, list[Any]],
                  deletes: dict[str, list[ClientOp]]) -> list[str]:
    """The acknowledged tokens whose possibly-last deliveries (none began after one of them
    completed) were each followed by no delete attempt at all: the drain must have received such
    a message again, since nothing can have removed it."""
    out = []
    for token in sorted(sends):
        ds = by_token.get(token)
        if not ds or not any(a.outcome == OK for a in sends[token]):
            continue
        latest = max(d.t0 for d in ds)
        last = [d for d in ds if d.t1 >= latest]
        if all(not deletes.get(d.msg.receipt or "") for d in last):
            out.append(token)
    return out
