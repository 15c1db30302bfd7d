"""The `replay` rare path: forwarded requests delivered again after a reconnection
(sim/scenario.py ``_replay``). A member's stream connection to the master breaks in the instant
a receive it forwarded was answered, and when it is back the member sends again what it sent in
the last moments: the request arrives twice, after the messages it took are visible again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.commands import ReceiveMessage

from cluster.replication.messages import Forward

from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.node import SimNode
    from sim.world import World


class Replay:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # a step waiting for a forwarded receive's answer
        self.replaying: set[tuple[str, str]] = set()   # stream connections stalled by it

    def step(self, f: Fault, step: int) -> None:
        """Step ``step``: keep the stream frames sent (``Network.recent``) and wait, at most
        ``wait_s``, for the master to answer a forwarded receive (``check``)."""
        w = self.world
        if w.healed:
            return
        w.net.recent = {}
        wait = (f, step)
        self.wait = wait
        w.at(w.now + int(f.params["wait_s"] * 1e6), self._give_up, wait)

    def check(self, node: SimNode, sender: str, request_id: int, command: Any, result: Any) -> None:
        """sim/node.py, after the serving master ``node`` answered a request that ``sender``
        forwarded, while a replay step waits: a receive that returned messages, with a
        visibility timeout that ends before the step's stall does, breaks the forwarder's
        connection to the master. When it is back the forwarder sends again (first) what it sent
        since ``back_ms`` before that request: the request arrives twice, after the messages it
        took are visible again, and its client's delete of them, sent meanwhile, after the copy."""
        w = self.world
        wait = self.wait
        if wait is None or w.healed or w.master() is not node:
            return
        f, step = wait
        stall = f.params["stall_s"][step]
        if type(command) is not ReceiveMessage or command.visibility_timeout is None \
                or command.visibility_timeout >= stall or not getattr(result, "messages", None):
            return
        link = (sender, node.name)
        sent = next((ts for ts, m in w.net.recent.get(link, ()) if type(m) is Forward
                     and m.request_id == request_id), None)
        if sent is None:
            return
        self.wait = None
        w.last_fault_at = w.now
        again = w.net.reconnect(sender, node.name, int(stall * 1e6), sent - f.params["back_ms"][step] * 1000)
        w.net.recent = None
        self.replaying.add(link)
        w.reach.counts["replay_stalls"] += 1
        w.reach.counts["replay_frames"] += len(again)
        w.reach.counts["replay_forwards"] += sum(1 for m in again if type(m) is Forward)
        w.nemesis.note(sender, "reconnect", {"link": list(link), "stall_s": stall, "sent_again": len(again),
                                             "request_id": request_id, "replay_step": step})
        w.health.check()
        w.at(w.now + int(stall * 1e6), self._back, f, step, link)

    def _back(self, f: Fault, step: int, link: tuple[str, str]) -> None:
        w = self.world
        self.replaying.discard(link)
        w.health.check()
        self._next(f, step)

    def _give_up(self, wait: tuple) -> None:
        w = self.world
        if self.wait is not wait:
            return
        self.wait = None
        w.net.recent = None
        self._next(*wait)

    def _next(self, f: Fault, step: int) -> None:
        w = self.world
        if step + 1 < len(f.params["stall_s"]) and not w.healed:
            w.at(w.now + int(f.params["gap_s"][step] * 1e6), self.step, f, step + 1)
