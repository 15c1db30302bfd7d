"""Which replication group holds a queue: ``(region, account, name) -> group``, decided in Raft.

With ``[cluster] groups = G >= 2`` every queue lives in one group for its life. The group is
chosen once, when the name is first created, by a placement committed through Raft next to the
views (``_DirectoryLog`` in cluster/runtime.py, the ``PlaceEntry`` of sim/raft.py). Every member
applies the committed placements in log order with ``apply_place``, which is deterministic, so
every member holds the same directory:

* a key already placed keeps its group: two members that ask for one new name at once both
  commit a placement, and the second one applied returns the first one's group;
* a new key goes to the group with the fewest placed keys, ties to the lowest id. Thirty
  names created one after another into three groups land ten in each, where a uniform hash
  leaves the largest group over 1.3 times the smallest in most draws.

Placements are never removed. A deleted queue keeps its group, where its tombstone lives, and a
re-create of the name goes back there. Removing a placement once the tombstone clears would race
a CreateQueue of the same name that a member has already routed by the old placement, and no
cheap form of that removal is safe. The cost is one entry per distinct name ever created, on
every member, for the cluster's life. For a 27-character name: 80 bytes in Raft's journal until
it compacts (the pickled command), under 50 in Raft's snapshot (region and account are written
once, not per key) and about 170 in memory (80 beside the name's own string);
``test_the_cost_of_a_placement`` holds these bounds. A million names: some 170 MB of memory on
each member and a 40 MB snapshot. A cluster with G = 1 has no directory and writes no placement
to Raft.

The record (``to_record``) is builtins only, so pysyncobj can snapshot it and nothing but
builtins is ever unpickled from it.
"""

from __future__ import annotations

import sys
from typing import Any

# (region, account, queue name): a queue's identity within the cluster
Key = tuple[str, str, str]


def _check_key(key: Any) -> Key:
    """``key`` as a Key, or ValueError: a committed entry may come from a peer of another version."""
    if type(key) not in (tuple, list) or len(key) != 3 or not all(type(part) is str for part in key):
        raise ValueError(f"a queue key is (region, account, name), not {key!r}")
    return (key[0], key[1], key[2])


class Directory:
    """The placements applied so far, and how many keys each group holds."""

    __slots__ = ("_group_of", "_counts")

    def __init__(self) -> None:
        self._group_of: dict[Key, int] = {}
        self._counts: dict[int, int] = {}

    def apply_place(self, key: Key, groups: int) -> int:
        """Apply one committed placement of ``key`` among ``groups`` groups; its group."""
        key = _check_key(key)
        placed = self._group_of.get(key)
        if placed is not None:
            return placed
        if type(groups) is not int or groups < 1:
            raise ValueError(f"a placement needs at least one group, not {groups!r}")
        counts = self._counts
        group = min(range(groups), key=lambda g: (counts.get(g, 0), g))
        self.learn(key, group)
        return group

    def learn(self, key: Key, group: int) -> None:
        """Record a placement decided by ``apply_place`` elsewhere (a snapshot, another thread's
        directory). Placements are never moved, so a different group for a placed key is refused."""
        key = _check_key(key)
        if type(group) is not int or group < 0:
            raise ValueError(f"a group is a number from 0, not {group!r}")
        placed = self._group_of.get(key)
        if placed is not None:
            if placed != group:
                raise ValueError(f"{key!r} is placed in group {placed}, not {group}")
            return
        # Regions and accounts repeat across every key: one string object each, not one per key.
        region, account, name = key
        self._group_of[(sys.intern(region), sys.intern(account), name)] = group
        self._counts[group] = self._counts.get(group, 0) + 1

    def group_of(self, key: Key) -> int | None:
        """The group of a placed key; None for a key never placed."""
        return self._group_of.get(key)

    def counts(self, groups: int) -> tuple[int, ...]:
        """How many keys each of groups 0 .. ``groups`` - 1 holds."""
        return tuple(self._counts.get(g, 0) for g in range(groups))

    def __len__(self) -> int:
        return len(self._group_of)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Directory) and self._group_of == other._group_of

    def to_record(self) -> tuple[tuple[str, str, str, int], ...]:
        """``((region, account, name, group), ...)`` in placement order: builtins only."""
        return tuple((region, account, name, group) for (region, account, name), group in self._group_of.items())

    @classmethod
    def from_record(cls, record: Any) -> "Directory":
        d = cls()
        for region, account, name, group in record:
            d.learn((region, account, name), group)
        return d
