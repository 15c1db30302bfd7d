"""Rules judged during a run, not only at its end: from what the harness knew at the time and
wrote into the history as nemesis lines (the simulator writes both; a history without them is
not judged by these rules).

* **Quiescent digests** (``quiescent`` lines). When no fault is active, every link is up and the
  stream is idle (every replica acked the master's last seq, nothing staged, no transfer), every
  member's digest equals the master's. The line carries ``{"master": m, "digests": {node:
  digest}}``; each member that differs is a ``divergence at t=...`` failure under every policy
  (an idle stream leaves nothing to excuse, whatever the ack policy). This sees state that
  diverged and was drained away before the end, which the final digests cannot.
* **Availability** (``health`` lines). A ``health`` line starts a stretch in which the nodes in
  ``healthy`` are up, not paused or catching up, and connected to each other on both planes
  without loss, duplication or extra latency; ``judged`` says whether that stretch counts (the
  healthy set is a majority and holds the master if there is one: a master that is itself the
  slow one keeps office through Raft, and the stream's stalls are then flow control's and the
  operator's business). Once a judged stretch has lasted ``AVAILABILITY_BOUND``, a send invoked
  in it that sees no send anywhere (to a queue of its group) answered within the bound is an
  ``unavailable`` failure.
  An answer is a success, or a refusal with an SQS error that is not a 503 or throttling: a
  queue that a power cut under ``fsync = never`` lost answers ``NonExistentQueue``, and the
  cluster that says so is available (the loss is the durability rules' business).
  Sends to a queue whose policy is ``all`` are judged only while every member is healthy: such a
  queue rightly waits for a slow replica. Time in which any node throttles producers is not
  judged (flow control refuses on purpose: node_rules.py judges that it does so rightly).
* **Replication groups.** With several groups each group has its own master. A quiescent line
  then carries ``{"groups": [{"group": g, "master": m, "digests": {...}}, ...]}``, one record per
  group, each judged as above. A health line names in ``groups`` the groups whose master the
  healthy set holds (or that have none), and a send is judged only while its queue's group is
  named there: a failed member pauses only the groups it mastered. A queue's group comes from
  the `placed` node lines (``{"queue": name, "group": g}``; none: group 0), and a throttle
  excuses only sends to its own group's queues.

The bound: 2 s (a client's timeout: an attempt to a node that went away counts as unknown only
then, and the client moves on) + ``leader_fallback`` 1.0 s (the old master's Raft-level step-down)
+ ``election_max`` 0.4 s (an election), with cluster.config.Timing's defaults. A failover, the
sync and the first view take well under that in every clean seed measured; a cluster that does
not answer a single write for that long while a connected majority is healthy is stuck.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Any

from cluster.checker.schema import FAILED, OK, SEND, History

QUIESCENT = "quiescent"
HEALTH = "health"
AVAILABILITY_BOUND = 2.0 + 1.0 + 0.4


@dataclass(frozen=True, slots=True)
class QuiescentDivergence:
    at: float
    node: str
    digest: str
    master: str
    master_digest: str
    group: int = 0


@dataclass(frozen=True, slots=True)
class Unavailable:
    """No send succeeded in ``[start, end)`` though ``op_id`` (to ``queue``) tried at ``start``,
    while ``healthy`` had been connected and healthy since ``healthy_since``."""
    start: float
    end: float
    op_id: str
    queue: str
    healthy: tuple[str, ...]
    healthy_since: float
    everyone: bool               # every member was healthy (then `all` queues are judged too)
    group: int = 0               # the queue's replication group


# Refusals that say the cluster is not serving (the client retries them); any other error is an
# answer (see the module docstring).
NOT_AN_ANSWER = ("ServiceUnavailable", "ThrottlingException")


def _detail(detail: str | None) -> dict[str, Any]:
    try:
        d = json.loads(detail or "{}")
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def quiescent_divergence(history: History) -> tuple[int, list[QuiescentDivergence]]:
    """(points judged, members that differed from their group's master at one of them)."""
    points = 0
    out: list[QuiescentDivergence] = []
    for r in history.nemesis:
        if r.action != QUIESCENT:
            continue
        d = _detail(r.detail)
        judged = False
        for rec in d["groups"] if isinstance(d.get("groups"), list) else [d]:
            if not isinstance(rec, dict):
                continue
            master, digests, group = rec.get("master"), rec.get("digests") or {}, int(rec.get("group", 0))
            if master not in digests:
                continue
            judged = True
            ref = digests[master]
            out += [QuiescentDivergence(r.ts, n, dg, master, ref, group)
                    for n, dg in sorted(digests.items()) if dg != ref]
        points += judged
    return points, out


def queue_groups(history: History) -> dict[str, int]:
    """Each queue's replication group, from the `placed` node lines (a queue is placed once, for
    its life)."""
    out: dict[str, int] = {}
    for e in history.node_events:
        if e.event == "placed":
            out.setdefault(str(e.fields.get("queue")), int(e.fields.get("group", 0)))
    return out


def _throttling(history: History, end: float) -> list[tuple[float, float, int]]:
    """Intervals in which some node throttled the producers of a group."""
    since: dict[tuple[str, int], float] = {}
    out: list[tuple[float, float, int]] = []
    for e in history.node_events:
        if e.event == "throttle":
            key = (e.node, int(e.fields.get("group", 0)))
            on = bool(e.fields.get("on"))
            if on and key not in since:
                since[key] = e.ts
            elif not on and key in since:
                out.append((since.pop(key), e.ts, key[1]))
        elif e.event in ("started", "stopped"):
            for key in [k for k in since if k[0] == e.node]:
                out.append((since.pop(key), e.ts, key[1]))
    out += [(t, end, key[1]) for key, t in since.items()]
    return sorted(out)


def unavailability(history: History, queue_policies: dict[str, str] | None = None,
                   policy: str | None = None, bound: float = AVAILABILITY_BOUND
                   ) -> tuple[float, list[Unavailable]]:
    """(seconds judged, unavailable windows). ``policy`` / ``queue_policies``: the cluster's and
    the queues' own; sends to an ``all`` queue are judged only while everyone is healthy. Without
    ``policy`` every send is judged as a non-``all`` one (the caller filters by ``everyone``)."""
    lines = [r for r in history.nemesis if r.action == HEALTH]
    if not lines:
        return 0.0, []
    end = history.end
    qp = dict(queue_policies or {})
    qg = queue_groups(history)
    sends = [op for op in history.ops if op.op == SEND]      # ordered by invocation
    send_ts = [op.ts for op in sends]
    # answers per group: one group's answers say nothing of another's master
    oks: dict[int, list[float]] = {}
    for op in sends:
        if op.completed is not None and (
                op.outcome == OK or (op.outcome == FAILED and op.error and not op.error.startswith(NOT_AN_ANSWER))):
            oks.setdefault(qg.get(op.queue, 0), []).append(op.completed)
    for v in oks.values():
        v.sort()
    throttled = _throttling(history, end)
    judged_s = 0.0
    out: list[Unavailable] = []
    for i, r in enumerate(lines):
        d = _detail(r.detail)
        if not d.get("judged"):
            continue
        stop = lines[i + 1].ts if i + 1 < len(lines) else end
        start = r.ts + bound
        if stop <= start:
            continue
        judged_s += stop - start
        healthy = tuple(d.get("healthy") or ())
        everyone = bool(d.get("everyone"))
        groups = d.get("groups")
        judged_groups = None if not isinstance(groups, list) else {int(g) for g in groups}
        after: dict[str, float] = {}
        for j in range(bisect.bisect_left(send_ts, start), bisect.bisect_right(send_ts, stop - bound)):
            op = sends[j]
            t = op.ts
            if t < after.get(op.queue, -1.0):
                continue
            group = qg.get(op.queue, 0)
            if judged_groups is not None and group not in judged_groups:
                continue
            if not everyone and policy is not None and qp.get(op.queue, policy) == "all":
                continue
            answered = oks.get(group, ())
            k = bisect.bisect_left(answered, t)
            if k < len(answered) and answered[k] <= t + bound:
                continue
            if any(a < t + bound and t < b and g == group for a, b, g in throttled):
                continue
            out.append(Unavailable(t, t + bound, op.op_id, op.queue, healthy, r.ts, everyone, group))
            after[op.queue] = t + bound
    return judged_s, out
