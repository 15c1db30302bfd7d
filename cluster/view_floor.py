"""The newest view a member has applied, kept in its state-dir across restarts.

With replication groups a group's epoch changes only when a view moves the group, so a master
that restarts quickly can find the view still naming it in the epoch it mastered before, with a
log it may no longer hold whole; mastering that epoch again could write a second entry at an
(epoch, seq) some member holds. A node therefore masters no slot that a view it applied in an
earlier life assigned (cluster/group_mastery.py, ``view_floor``). This file is how it knows: the
id of every view with groups is written here, durably, before the node installs the view, and
read at start. Views change seldom (a failover, a join, a rebalance), so the fsync each costs is
nothing next to the stream's.
"""

from __future__ import annotations

import os

FILE = "view-floor"


def read(state_dir: str) -> int:
    """The newest view id recorded (0: none, a first start)."""
    try:
        with open(os.path.join(state_dir, FILE), encoding="ascii") as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return 0


def record(state_dir: str, view_id: int) -> None:
    """Make ``view_id`` the recorded one, durably: written aside, fsynced, renamed over."""
    path = os.path.join(state_dir, FILE)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{view_id}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(state_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
