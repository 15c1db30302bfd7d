"""Wasted work, judged as it happens: what no checker of the outcome can see.

Two slips cost only time. Nothing is lost, the digests agree, every operation completes, and yet
the cluster does work for nothing or waits for nothing:

* **A frame of an ended view.** A member that has installed a view of epoch E sends nothing
  tagged with an older epoch: the master of E refuses it (its fences compare epochs), so the
  frame, and whatever the member did to make it (a snapshot read chunk by chunk), is wasted. A
  transfer kept across a view change keeps sending such chunks until it finishes.
  Acks are the exception (``Ack``, ``SnapshotAck``): each answers the master of its epoch, which
  may not have learnt of the new view yet and then takes it. An ack the journal held for an
  fsync that returned after the view changed goes out so, and a chunk of a finished transfer
  sent again is acked again so (5 of seeds 0-299 of the mutant search, 24 and 211 among
  them); a master that has moved on refuses them, which their sender cannot know.
* **An ack held longer than its journal needs.** A replica holds back an ack until its journal
  holds what it acks (``GroupCore.flush``). When the journal reports, the part it now holds goes
  to the master in that turn. Holding it for the next report instead adds a whole fsync to every
  operation that waits for this replica (`majority`, `all`).
"""

from __future__ import annotations

from typing import Any

from cluster.replication.messages import Ack, SnapshotAck

MAX_REPORTED = 5
# answers that may rightly carry an older epoch than the sender's view (see above)
_HELD_BY_JOURNAL = (Ack, SnapshotAck)


class WasteCheck:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.frames_checked = 0
        self.reports_checked = 0
        # member -> (its node, for this incarnation only; epoch, master, the seq its master must
        # hear by the next flush)
        self._owed: dict[str, tuple[Any, int, str, int]] = {}
        # (sender, receiver) -> the last ack sent: (epoch, seq)
        self._acked: dict[tuple[str, str], tuple[int, int]] = {}

    def frame(self, now_s: float, src: str, sender: Any, msg: Any, group: int = 0) -> None:
        """A frame of ``group`` that ``src`` (its node: ``sender``) sends."""
        epoch = getattr(msg, "epoch", None)
        if epoch is None:
            return
        self.frames_checked += 1
        view_epoch = sender.core.groups[group].replication.epoch
        if type(msg) is Ack:
            self._acked[(src, msg.epoch)] = msg.seq if (prev := self._acked.get((src, msg.epoch))) is None \
                else max(prev, msg.seq)
        if view_epoch is not None and epoch < view_epoch and type(msg) not in _HELD_BY_JOURNAL:
            self._fail(f"waste: {src} sent {type(msg).__name__}(epoch {epoch}) while in the view of "
                       f"epoch {view_epoch} (its master refuses it) at {now_s:.6f} s")

    def journal_report(self, node: Any, held: Ack | None, durable_before: int | None) -> None:
        """``node``'s journal reported (``GroupCore.persisted``); ``held`` was the ack it held back
        for its master before the report, ``durable_before`` its durable seq then."""
        rep = node.core.groups[0].replication
        durable = rep.durable_seq
        if held is None or durable is None or durable_before is None or durable <= durable_before \
                or held.seq <= durable_before or held.epoch != rep.epoch or rep.role != "replica":
            return
        need = min(held.seq, durable)
        prev = self._owed.get(node.name)
        if prev is not None and prev[:3] == (node, rep.epoch, rep.master):
            need = max(need, prev[3])
        self._owed[node.name] = (node, rep.epoch, rep.master, need)

    def flushed(self, now_s: float, node: Any) -> None:
        """``node``'s loop ended a turn (``NodeCore.flush``): what its journal's reports owed its
        master must have gone out by now."""
        owed = self._owed.pop(node.name, None)
        if owed is None or owed[0] is not node:
            return      # none, or owed by an incarnation that crashed before its turn ended
        _, epoch, master, need = owed
        rep = node.core.groups[0].replication
        if rep.epoch != epoch or rep.master != master or rep.role != "replica":
            return      # a view change between the report and the flush: nothing is owed to it now
        self.reports_checked += 1
        sent = self._acked.get((node.name, epoch))
        if sent is None or sent < need:
            self._fail(f"waste: {node.name}'s journal holds {master}'s log up to seq {need} of epoch {epoch}, "
                       f"and the turn that learnt it acked {'nothing' if sent is None else f'only up to {sent}'} "
                       f"(held for the next fsync) at {now_s:.6f} s")

    def _fail(self, line: str) -> None:
        if len(self.failures) < MAX_REPORTED:
            self.failures.append(line)
