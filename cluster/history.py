"""The per-node history log: one JSON object per line. The schema is documented in HISTORY.md."""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from cluster.checker.schema import Record

# One encoder for every line: json.dumps with options builds a new one per call, which was most
# of the cost of a client operation's line on a busy master.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


class HistoryWriter:
    """Appends history lines to one file; safe to call from several threads. Nodes write their
    events (``write``), clients and the nemesis typed records (``write_record``): one format,
    one writer. Each line is flushed at once, so a process killed with SIGKILL leaves every line
    it wrote (the OS keeps what was flushed), unless the caller passes ``flush=False`` and calls
    ``flush()`` itself: the master's per-operation `op` lines do, once per event-loop turn (a
    write system call per operation cost ~5% of a busy master's CPU), so a SIGKILL can lose the
    op lines of that one turn."""

    def __init__(self, path: str | os.PathLike[str], node: str = "") -> None:
        self.path = path
        self.node = node
        self._lock = threading.Lock()
        self._f: TextIO | None = open(path, "a", encoding="utf-8")

    def write(self, event: str, ts: float, flush: bool = True, **fields: Any) -> None:
        """One of this node's events (the schema's `NodeEvent`)."""
        record = {"ts": round(ts, 6), "node": self.node, "event": event}
        record.update(fields)
        self._line(_ENCODER.encode(record), flush)

    def write_record(self, record: "Record") -> None:
        """A typed record of the schema (a client operation, a digest, a nemesis action)."""
        from cluster.checker.schema import to_line
        self._line(to_line(record), True)

    def _line(self, line: str, flush: bool) -> None:
        with self._lock:
            if self._f is not None:
                self._f.write(line + "\n")
                if flush:
                    self._f.flush()

    def flush(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.flush()

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None

    def __enter__(self) -> "HistoryWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_history(path: str) -> list[dict[str, Any]]:
    """Every complete line of a history file (a torn last line from a killed node is skipped)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out
