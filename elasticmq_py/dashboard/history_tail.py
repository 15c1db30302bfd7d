"""The last cluster events of a node's history log (cluster/HISTORY.md), for the dashboard.

The node already writes its elections, views, syncs and transfers to its history file; the
dashboard reads them back from there rather than keeping a second record. Each call reads only
what was appended since the last one (at most ``MAX_READ`` bytes: a busy master appends an ``op``
line per client call, which is skipped without being parsed), and keeps the last ``keep`` events.
"""

from __future__ import annotations

import json
import os
from collections import deque
from typing import Any

MAX_READ = 4 * 1024 * 1024
# Per-operation and per-second lines: the dashboard shows those as rates, not as events.
SKIPPED = ('"event":"op"', '"event":"replication"', '"event":"client_op"')


class HistoryTail:
    def __init__(self, path: str, keep: int = 50) -> None:
        self.path = path
        self.events: deque[dict[str, Any]] = deque(maxlen=keep)
        self._offset = 0
        self._partial = b""
        self._inode: int | None = None

    def read(self) -> list[dict[str, Any]]:
        """The last events, oldest first (empty when the file cannot be read)."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self._inode or st.st_size < self._offset:
                    # a new or truncated file: start again
                    self._inode, self._offset, self._partial = st.st_ino, 0, b""
                    self.events.clear()
                if st.st_size - self._offset > MAX_READ:
                    # too far behind: what was skipped is older than anything kept
                    self._offset, self._partial = st.st_size - MAX_READ, b""
                    self.events.clear()
                    f.seek(self._offset)
                    f.readline()              # the rest of a line cut in the middle
                    self._offset = f.tell()
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except OSError:
            return list(self.events)
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()      # a line still being written, or b""
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if not line or any(s in line for s in SKIPPED):
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue      # a torn line left by a killed node
            if isinstance(event, dict) and "event" in event:
                self.events.append(event)
        return list(self.events)
