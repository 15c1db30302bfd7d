"""Forwarded requests and their answers, one frame per peer per turn of the loop, sans-I/O.

The node core forwards each client request as its own ``Forward`` and a master answers each
with its own ``ForwardReply`` (cluster/forwards.py, cluster/node_core.py). Sent one by one,
each pays a MAC, a ZeroMQ send (with its CURVE box) and a wake-up of the receiving loop.
Sent per turn, the master's extra CPU per forwarded send is 1.5-4 µs rather than 19-28, the
forwarder's 39-41 µs rather than 53-62 (bench/forward_bench.py, 2 cores, four runs each). So
the runtime (cluster/replicated.py) hands those frames to a ``ForwardBatcher`` instead and, at
the end of the turn that produced them, sends
what ``take`` returns: for each peer one ``ForwardBatch`` of the turn's requests and one
``ForwardReplies`` of its answers. A received batch is unpacked (``received``) into the
``Forward`` and ``ForwardReply`` frames it stands for, which the core reads as always, so every
decision about them (exactly once per request id, which master may answer, every failure) stays
the core's and the simulator's, and the core never sees a batch.

Mixed builds (a rolling upgrade). A build that predates the batch frames refuses them, so a
member sends batches only to a peer that has shown it reads them: by sending a batch itself, or
a ``ForwardReply`` of id ``BATCHES_READ``, which a master sends a member that forwarded it plain
``Forward`` frames (an older build drops it as the answer to a request it never sent). Until
then both directions travel as single frames, as an older build sends and reads them.
"""

from __future__ import annotations

from typing import Any, Callable

from cluster.replication.messages import BATCHES_READ, Forward, ForwardBatch, ForwardReplies, ForwardReply

_TELL = ForwardReply(BATCHES_READ, b"")


class ForwardBatcher:
    def __init__(self) -> None:
        self.readers: set[str] = set()       # peers known to read ForwardBatch and ForwardReplies
        self._requests: dict[str, list[tuple[int, bytes]]] = {}   # peer -> this turn's forwards
        self._answers: dict[str, list[tuple[int, bytes]]] = {}    # peer -> this turn's replies
        self._tell: dict[str, None] = {}      # peers that forwarded plain frames to us this turn, in order

    @property
    def pending(self) -> bool:
        """Something waits for the end of the turn."""
        return bool(self._requests or self._answers or self._tell)

    def forward(self, to: str, frame: Forward) -> None:
        self._requests.setdefault(to, []).append((frame.request_id, frame.payload))

    def reply(self, to: str, request_id: int, payload: bytes) -> None:
        self._answers.setdefault(to, []).append((request_id, payload))

    def received(self, sender: str, frame: Any) -> list[Any]:
        """The ``Forward`` or ``ForwardReply`` frames a forwarding frame from ``sender`` stands for,
        in their order, for the node core."""
        t = type(frame)
        if t is ForwardBatch:
            self.readers.add(sender)
            return [Forward(rid, payload) for rid, payload in frame.items]
        if t is ForwardReplies:
            self.readers.add(sender)
            return [ForwardReply(rid, payload) for rid, payload in frame.items]
        if t is ForwardReply and frame.request_id == BATCHES_READ:
            self.readers.add(sender)
            return []
        if t is Forward and sender not in self.readers:
            self._tell[sender] = None
        return [frame]

    def take(self, waiting: Callable[[int], bool]) -> list[tuple[str, Any, tuple[int, ...]]]:
        """The turn's frames: (peer, frame, the ids of the requests this member forwards in it).
        A request ``waiting`` no longer waits for (the core failed it within the turn: its link
        was lost, its master changed) is not sent."""
        out: list[tuple[str, Any, tuple[int, ...]]] = []
        readers = self.readers
        for peer in self._tell:
            if peer not in readers:
                out.append((peer, _TELL, ()))
        for peer, items in self._requests.items():
            items = [item for item in items if waiting(item[0])]
            if not items:
                continue
            if peer in readers:
                out.append((peer, ForwardBatch(tuple(items)), tuple(rid for rid, _ in items)))
            else:
                out.extend((peer, Forward(rid, payload), (rid,)) for rid, payload in items)
        for peer, items in self._answers.items():
            if peer in readers:
                out.append((peer, ForwardReplies(tuple(items)), ()))
            else:
                out.extend((peer, ForwardReply(rid, payload), ()) for rid, payload in items)
        self._requests.clear()
        self._answers.clear()
        self._tell.clear()
        return out
