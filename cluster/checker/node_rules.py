"""Rules a node keeps on its own: judged from one node's history lines, on its own clock.

* **Gating.** A node executes a client operation only while it is the active master. Every `op`
  line (written by the node that executed the operation: the master, for forwarded requests too)
  that ended `ok` or `unknown` (both mean it ran) must start inside one of that node's active
  intervals (`activated` to `deactivated`, `stopped`, a restart or a kill). A refused operation
  (`failed`) ran nothing and is not judged.
* **Flow control.** While a node throttles producers (`throttle` on to off), it executes no
  SendMessage or SendMessageBatch; and it refuses one as throttled (ThrottlingException) only
  while it throttles.

With several replication groups both rules hold per group: an `op`, `throttle` or activity line
names its group (none named: group 0), and an operation of group g must fall inside the node's
active interval for g, and is judged against g's throttle only.

Both hold under every ack policy: gating and throttling come before the policy is even looked at.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from cluster.checker.schema import History
from cluster.checker.verdict import ActiveInterval

EXECUTED = ("ok", "unknown")
PRODUCERS = ("SendMessage", "SendMessageBatch")
# a producer refused by flow control, as the simulator and the product's `op` lines name it
THROTTLED = ("ThrottlingException", "RequestThrottled", "Throttled")
# A real node stamps an `op` line with the wall clock and its activity lines with its monotonic
# clock mapped to the wall clock: the two agree to well under a millisecond. The simulator's
# clock is exact; a stale master there executes far more than a millisecond out of office.
CLOCK_SLACK_S = 0.001


@dataclass(frozen=True, slots=True)
class GatingViolation:
    node: str
    at: float
    action: str
    outcome: str
    group: int = 0


@dataclass(frozen=True, slots=True)
class ThrottleViolation:
    node: str
    at: float
    action: str
    throttling_since: float          # -1: it was not throttling (a refusal without a throttle)
    group: int = 0

    @property
    def refused(self) -> bool:
        return self.throttling_since < 0


def gating_violations(history: History, intervals: list[ActiveInterval],
                      tolerance: float = 0.0) -> list[GatingViolation]:
    tolerance = max(tolerance, CLOCK_SLACK_S)
    spans: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for i in intervals:
        spans[(i.node, i.group)].append((i.start, float("inf") if i.open else i.end))
    starts = {n: [s for s, _ in sorted(v)] for n, v in spans.items()}
    ordered = {n: sorted(v) for n, v in spans.items()}
    out = []
    for e in history.node_events:
        if e.event != "op" or e.fields.get("outcome") not in EXECUTED:
            continue
        key = (e.node, int(e.fields.get("group", 0)))
        iv = ordered.get(key, [])
        k = bisect.bisect_right(starts.get(key, []), e.ts + tolerance) - 1
        if k >= 0 and e.ts < iv[k][1] + tolerance:
            continue
        out.append(GatingViolation(e.node, e.ts, str(e.fields.get("action")), str(e.fields.get("outcome")), key[1]))
    return out


def throttle_violations(history: History, tolerance: float = 0.0) -> list[ThrottleViolation]:
    tolerance = max(tolerance, CLOCK_SLACK_S)
    since: dict[tuple[str, int], float] = {}
    released: dict[tuple[str, int], float] = {}    # when each throttle last ended
    out = []
    events = sorted(history.node_events, key=lambda e: (e.ts, e.event != "throttle"))
    for e in events:
        if e.event == "throttle":
            key = (e.node, int(e.fields.get("group", 0)))
            if e.fields.get("on"):
                since.setdefault(key, e.ts)
            elif since.pop(key, None) is not None:
                released[key] = e.ts
        elif e.event in ("started", "stopped"):
            for key in [k for k in since if k[0] == e.node]:
                del since[key]
        elif e.event == "op" and e.fields.get("action") in PRODUCERS:
            group = int(e.fields.get("group", 0))
            s = since.get((e.node, group))
            outcome = e.fields.get("outcome")
            if outcome in EXECUTED:
                if s is not None and e.ts > s + tolerance:
                    out.append(ThrottleViolation(e.node, e.ts, str(e.fields["action"]), s, group))
            elif outcome == "failed" and e.fields.get("error") in THROTTLED and s is None \
                    and e.ts > released.get((e.node, group), float("-inf")) + tolerance:
                # (a throttle that began and ended within the slack of the refusal covers it)
                out.append(ThrottleViolation(e.node, e.ts, str(e.fields["action"]), -1.0, group))
    return out
