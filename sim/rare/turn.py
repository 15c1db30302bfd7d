"""The `turn` rare path: a transfer's last chunk built in the turn of a client's operation
(sim/scenario.py ``_turn``). The joiner's frames that start or advance a transfer reach the
master in the turn of its next client operation; once a last chunk was built in such a turn, the
members take no batch past the position it names, and the master is isolated as in `handoff`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cluster.replication.messages import Batch, SnapshotAck, SyncStatus

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.node import SimNode
    from sim.world import World


class Turn:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # the joiner's frames held for a master's operation

    def arm(self, f: Fault, step: int, joiner: str) -> None:
        """The joiner is back: its stream frames that start or advance a transfer (SyncStatus,
        SnapshotAck) wait, once they have arrived, for the receiver's next turn with a client's
        operation (``op``), at most ``cap_ms``, and so does whatever arrives after them on
        that link (FIFO): they sat in the socket until the loop read it with a request."""
        w = self.world
        held: dict[str, list[tuple[Any, int]]] = {o: [] for o in w.names if o != joiner}
        holds = {o: 0 for o in held}    # per receiver: how many times frames began to be held
        wait = (f, step, joiner, held, holds)
        self.wait = wait
        w.at(w.now + int(f.params["wait_s"] * 1e6), self._give_up, wait)

    def hold(self, node: SimNode, sender: str, msg: Any) -> bool:
        """sim/node.py, as a stream frame reaches ``node``: whether this path holds it."""
        w = self.world
        wait = self.wait
        if wait is None or sender != wait[2] or w.healed:
            return False
        q = wait[3][node.name]
        if not q and type(msg) not in (SyncStatus, SnapshotAck):
            return False
        if not q:
            wait[4][node.name] += 1
            w.at(w.now + wait[0].params["cap_ms"] * 1000, self._release, wait, node.name,
                 wait[4][node.name])
        q.append((msg, w.net.links[(sender, node.name)].gen))
        return True

    def _deliver(self, wait: tuple, dst: str) -> None:
        """The frames held for ``dst`` are read now (those of a connection reset meanwhile, or of
        an incarnation of ``dst`` that died, are lost)."""
        w = self.world
        joiner, q = wait[2], wait[3][dst]
        frames, q[:] = list(q), []
        node = w.nodes.get(dst)
        for msg, gen in frames:
            if node is None or not node.alive or w.net.links[(joiner, dst)].gen != gen:
                continue
            node.read_held(joiner, msg)

    def _release(self, wait: tuple, dst: str, hold: int) -> None:
        """No operation came within ``cap_ms`` of the hold's first frame: its frames are read now."""
        if self.wait is wait and wait[4][dst] == hold and wait[3][dst]:
            self._deliver(wait, dst)

    def op(self, node: SimNode) -> None:
        """sim/node.py, right after ``node`` executed a client's operation (its turn goes on):
        the joiner's frames held for it arrive now. If that built the last chunk of a transfer
        to the joiner, members take no batch past the position it names, and once the joiner
        holds the transfer the master is isolated (the "handoff" path's "end" step)."""
        w = self.world
        wait = self.wait
        if wait is None or w.healed or not wait[3].get(node.name):
            return
        f, step, joiner = wait[:3]
        rc = node.core.groups[0].replication
        staged = rc.master_core.status(w.now_ms)["staged_ops"] if rc.master_core is not None else 0
        if not staged:
            return      # an operation that changed nothing: wait for one that did
        w.reach.counts["turn_aligned"] += 1
        self._deliver(wait, node.name)
        sender = rc.senders.get(joiner)
        if sender is None or sender.end_seq is None or not rc.serving:
            return
        self.wait = None
        end = sender.end_seq
        w.reach.counts["turn_last_chunks"] += 1
        gate = lambda msg: type(msg) is not Batch or msg.seq <= end  # noqa: E731
        for o in w.names:
            if o != node.name:
                w.net.gates[(node.name, o)] = gate
        w.nemesis.note(node.name, "handoff_gate", {"joiner": joiner, "mark": "turn", "at_seq": end, "staged": staged})
        w.health.check()
        w.rare.handoff.watch(f, step, joiner, (node.name, end, ()), 0)

    def _give_up(self, wait: tuple) -> None:
        w = self.world
        if self.wait is not wait:
            return
        self.wait = None
        for dst in wait[3]:
            self._deliver(wait, dst)
        w.rare.handoff.next(wait[0], wait[1])
