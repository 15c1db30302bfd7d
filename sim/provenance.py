"""Entry provenance, judged during a run: every entry a member holds is what its written epoch's
master wrote at its seq.

The cores record each entry a master writes (``cluster.decisions.wrote``, while the simulator
records). An entry must keep the epoch it was written in wherever it goes: resent to a replica,
fetched by a syncing master, sent as a transfer's tail, replayed from a journal. One relabelled
newer makes a shorter log look the most advanced at the next sync, which then takes it for the
truth and drops committed operations; the digests may agree again long before anything shows.
The check looks at every Batch frame a member sends (``frame``, from sim/net.py) and at each
member's log as it grows (``scan``, each new entry once), so a relabelled copy is caught as it
is made, not only if its consequence reaches the end of the run.
"""

from __future__ import annotations

from typing import Any

from cluster import decisions
from cluster.replication.log import ReplicationLog

MAX_REPORTED = 5


class ProvenanceCheck:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.entries_checked = 0
        self.frames_checked = 0
        # (member, group) -> (its log as last seen, the highest seq looked at in it)
        self._seen: dict[tuple[str, int], tuple[ReplicationLog, int]] = {}

    def frame(self, now_s: float, src: str, dst: str, batch: Any, group: int = 0) -> None:
        """A Batch a member sends (the stream, a resend, a fetch's answer, a transfer's tail)
        carries what its written epoch's master wrote at its seq: a relabelled copy is caught as
        it leaves, whether or not anyone keeps it (a syncing master that sees its own last
        entry relabelled takes a transfer instead, and no log ever holds the copy)."""
        self.frames_checked += 1
        self._judge(group, batch.written_epoch, batch.seq, batch.mutations, now_s, f"{src} sent {dst}")

    def scan(self, now_s: float, nodes: dict[str, Any]) -> None:
        """Look at every entry that appeared in a member's log since the last scan."""
        for name, node in nodes.items():
            for group in node.core.groups:
                log = group.replication.log
                key = (name, group.index)
                seen_log, seen_seq = self._seen.get(key, (None, 0))
                if seen_log is not log or log.last_seq < seen_seq:
                    seen_seq = 0        # a new log (a restart), or one reset behind what was seen
                start = max(seen_seq + 1, log.first_seq)
                for e in log.since(start, log.last_seq - start + 1):
                    self.entries_checked += 1
                    self._judge(group.index, e.written_epoch, e.seq, e.mutations, now_s, f"{name} holds")
                self._seen[key] = (log, log.last_seq)

    def _judge(self, group: int, epoch: int, seq: int, mutations: bytes, now_s: float, who: str) -> None:
        made = decisions.written(epoch, seq, group)
        if made != mutations and len(self.failures) < MAX_REPORTED:
            what = "wrote nothing" if made is None else "wrote other mutations"
            self.failures.append(f"provenance: {who} seq {seq} as written in epoch {epoch}, "
                                 f"where that epoch's master {what} (at {now_s:.6f} s)")
