"""The client requests a member forwarded to the master, sans-I/O: each is in flight until the
master's reply comes back, or fails with the reason its client is told.

The node core (cluster/node_core.py) decides whether to forward at all (``NodeCore.route``) and
composes this table: it hands it each request it forwards, the replies from the stream, and what
ends a request's chance of an answer (the master of the view changed, the link to it was lost,
the node stopped, too much time passed). A request that reached the master may have run there,
so its failure says ``sent``: its client learns "outcome unknown", not "retry safely".
"""

from __future__ import annotations

import itertools
from typing import Any

from cluster.node_actions import Action, ForwardAnswered, ForwardFailed
from cluster.replication.messages import Forward, ForwardReply, Send

FORWARD_TIMEOUT_S = 30.0      # a long poll waits up to 20 s on the master; beyond this, given up on


class Forwards:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[Any, str, float]] = {}   # request id -> (token, master, since)

    def __len__(self) -> int:
        return len(self._waiting)

    def send(self, token: Any, master: str, payload: Any, now: float) -> Send:
        """Forward the client request ``token`` to ``master``: the frame to send."""
        rid = next(self._ids)
        self._waiting[rid] = (token, master, now)
        return Send(master, Forward(rid, payload))

    def waiting_for(self, request_id: int) -> bool:
        """Whether request ``request_id`` still waits for its answer: nothing answered or failed it."""
        return request_id in self._waiting

    def answered(self, sender: str, reply: ForwardReply, out: list[Action]) -> None:
        """The stream brought ``reply`` from ``sender``: only the master a request went to answers it."""
        entry = self._waiting.get(reply.request_id)
        if entry is not None and entry[1] == sender:
            del self._waiting[reply.request_id]
            out.append(ForwardAnswered(entry[0], reply.payload))

    def unsent(self, request_id: int) -> list[Action]:
        """The runtime could not even queue the Forward frame: the master never saw the request."""
        entry = self._waiting.pop(request_id, None)
        if entry is None:
            return []
        token, master, _ = entry
        return [ForwardFailed(token, f"no connection to the master {master}", sent=False)]

    def master_changed(self, master: str, out: list[Action]) -> None:
        """A view with another master was installed: requests sent to any other will not be answered."""
        for rid, (token, to, _) in list(self._waiting.items()):
            if to != master:
                del self._waiting[rid]
                out.append(ForwardFailed(token, f"the master changed from {to} to {master}", sent=True))

    def masters_changed(self, masters: frozenset[str], out: list[Action]) -> None:
        """A view of several groups was installed: a member that masters none of them answers none
        of the requests forwarded to it. A dead master never would, and its link would take the
        connection timeout to be given up; one that moved a group but keeps another answers for
        that group with a refusal, so its requests stay."""
        for rid, (token, to, _) in list(self._waiting.items()):
            if to not in masters:
                del self._waiting[rid]
                out.append(ForwardFailed(token, f"{to} masters no replication group any more", sent=True))

    def link_lost(self, peer: str, out: list[Action]) -> None:
        for rid, (token, master, _) in list(self._waiting.items()):
            if master == peer:
                del self._waiting[rid]
                out.append(ForwardFailed(token, f"the connection to the master {peer} was lost", sent=True))

    def expire(self, now: float, out: list[Action]) -> None:
        for rid, (token, master, since) in list(self._waiting.items()):
            if now - since >= FORWARD_TIMEOUT_S:
                del self._waiting[rid]
                out.append(ForwardFailed(token, f"the master {master} did not answer within "
                                                f"{FORWARD_TIMEOUT_S:.0f} s", sent=True))

    def stop(self, reason: str, out: list[Action]) -> None:
        for token, _, _ in self._waiting.values():
            out.append(ForwardFailed(token, reason, sent=True))
        self._waiting.clear()
