"""CreateQueues waiting for their queue's placement (several replication groups), sans-I/O.

A CreateQueue of a name that no group holds runs nowhere until Raft commits the name's placement
(cluster/directory.py). The node core keeps such a request here under its queue's key, and asks
the Raft leader for the placement once per key however many requests wait for it. While none is
committed it asks again every ``retry`` seconds: the leader may have changed, or the ``Place``
frame been lost with its link, and a repeat of a placed name commits nothing new. After
``timeout`` seconds the requests are given up and refused, retryably: a client is never left
waiting on a placement that no reachable leader can commit.
"""

from __future__ import annotations

from typing import Any

from cluster.directory import Key


class PlacementWaits:
    """Per key: when its waiters are given up, when it is asked for again, and its waiters."""

    __slots__ = ("retry", "timeout", "_waiting")

    def __init__(self, retry: float, timeout: float) -> None:
        self.retry = retry
        self.timeout = timeout
        self._waiting: dict[Key, tuple[float, float, list[Any]]] = {}

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def add(self, key: Key, token: Any, now: float) -> bool:
        """``token`` waits for ``key``'s placement; True if it is the first, so the placement is
        to be asked for now."""
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting[2].append(token)
            return False
        self._waiting[key] = (now + self.timeout, now + self.retry, [token])
        return True

    def take(self, key: Key) -> list[Any]:
        """The tokens that waited for ``key``, which is placed now."""
        waiting = self._waiting.pop(key, None)
        return waiting[2] if waiting is not None else []

    def keys(self) -> list[Key]:
        return list(self._waiting)

    def due(self, now: float) -> tuple[list[Key], list[Any]]:
        """The keys to ask for again now, and the tokens given up (their keys are forgotten)."""
        ask: list[Key] = []
        given_up: list[Any] = []
        for key, (deadline, ask_at, tokens) in list(self._waiting.items()):
            if now >= deadline:
                del self._waiting[key]
                given_up += tokens
            elif now >= ask_at:
                self._waiting[key] = (deadline, now + self.retry, tokens)
                ask.append(key)
        return ask, given_up
