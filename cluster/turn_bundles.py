"""A loop turn's frames per peer, for a node of several replication groups, sans-I/O.

With ``[cluster] groups`` >= 2 a node sends each peer one EM2 bundle per turn of its loop,
whatever G is (cluster/replication/wire.py): the MAC, the ZeroMQ send and the receiver's wake-up
are paid once per peer and turn, not once per group or frame. The runtime (cluster/replicated.py)
adds every frame the node core sends in a turn, as a ``(group, frame)`` item, and at the end of
the turn (its flush, or the next loop iteration) ``take``s one item list per peer to send. The
ids of the forwarded requests in a peer's bundle come with it: a bundle that cannot leave fails
them at once (``NodeCore.forward_unsent``) rather than after the forward timeout.
"""

from __future__ import annotations

from typing import Any


class TurnBundles:
    __slots__ = ("_items", "_ids")

    def __init__(self) -> None:
        self._items: dict[str, list[tuple[int, Any]]] = {}   # peer -> this turn's (group, frame)
        self._ids: dict[str, list[int]] = {}                 # peer -> the forwarded request ids in them

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, to: str, group: int, frame: Any, ids: tuple[int, ...] = ()) -> bool:
        """Add a frame for ``to``; True when it is the turn's first (the end of the turn is
        then to be arranged)."""
        first = not self._items
        items = self._items.get(to)
        if items is None:
            items = self._items[to] = []
        items.append((group, frame))
        if ids:
            self._ids.setdefault(to, []).extend(ids)
        return first

    def take(self) -> list[tuple[str, list[tuple[int, Any]], list[int]]]:
        """The turn's bundles, (peer, items, forwarded ids), in the order the peers came; empty after."""
        items, ids = self._items, self._ids
        self._items, self._ids = {}, {}
        return [(to, bundle, ids.get(to, [])) for to, bundle in items.items()]
