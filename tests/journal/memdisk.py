"""An in-memory ``Disk`` with the protocol's crash semantics, for tests: ``crash()`` keeps each
file's synced bytes and the directory as of the last ``sync_dir``; ``fail`` injects errors; ``ops``
records every call in order. ``SlowSyncDisk`` takes 5 ms a sync; ``Sink`` collects a journal
writer's callbacks."""

from __future__ import annotations

import errno
import threading
import time
from typing import Callable

from cluster.journal.disk import JournalIOError


class _File:
    def __init__(self, data: bytes = b""):
        self.data = bytearray(data)
        self.synced = b""


class MemDisk:
    where = "mem:/journal"

    def __init__(self) -> None:
        self.names: dict[str, _File] = {}
        self.durable_names: dict[str, _File] = {}
        self.ops: list[tuple[str, str]] = []
        self.fail: Callable[[str, str], OSError | None] | None = None
        self.closed = False

    def _op(self, op: str, name: str = "") -> None:
        self.ops.append((op, name))
        err = self.fail(op, name) if self.fail else None
        if err is not None:
            raise JournalIOError(err.errno, f"cannot {op}: {err.strerror}", f"{self.where}/{name}")

    def _get(self, name: str) -> _File:
        try:
            return self.names[name]
        except KeyError:
            raise JournalIOError(errno.ENOENT, "no such file", f"{self.where}/{name}") from None

    def list(self) -> list[str]:
        return sorted(self.names)

    def read(self, name: str) -> bytes:
        return bytes(self._get(name).data)

    def size(self, name: str) -> int:
        return len(self._get(name).data)

    def write_new(self, name: str, data: bytes, reserve: int = 0) -> None:
        # ``reserve`` is a hint (cluster/journal/disk.py): nothing is reserved here
        self._op("write_new", name)
        assert name not in self.names, name
        self.names[name] = _File(data)

    def append(self, name: str, data: bytes) -> None:
        self._op("append", name)
        self.names.setdefault(name, _File()).data += data

    def sync(self, name: str) -> None:
        self._op("sync", name)
        f = self._get(name)
        f.synced = bytes(f.data)

    def sync_dir(self) -> None:
        self._op("sync_dir")
        self.durable_names = dict(self.names)

    def rename(self, src: str, dst: str) -> None:
        self._op("rename", src)
        self.names[dst] = self.names.pop(src)

    def remove(self, name: str) -> None:
        self._op("remove", name)
        self.names.pop(name, None)

    def truncate(self, name: str, size: int) -> None:
        self._op("truncate", name)
        del self._get(name).data[size:]

    def release(self, name: str) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def crash(self) -> None:
        """Power loss: only what was synced survives (unsynced bytes are all lost here)."""
        self.names = dict(self.durable_names)
        for f in self.names.values():
            f.data = bytearray(f.synced)
        self.fail = None
        self.closed = False


class SlowSyncDisk(MemDisk):
    def sync(self, name: str) -> None:
        time.sleep(0.005)
        super().sync(name)


class Sink:
    """Collects the writer's callbacks (made on its thread)."""

    def __init__(self, disk: MemDisk | None = None):
        self.durable: list[int] = []
        self.errors: list[BaseException] = []
        self.cond = threading.Condition()
        self.disk = disk

    def on_durable(self, token: int) -> None:
        if self.disk is not None:
            self.disk.ops.append(("durable", str(token)))
        with self.cond:
            self.durable.append(token)
            self.cond.notify_all()

    def on_error(self, exc: BaseException) -> None:
        with self.cond:
            self.errors.append(exc)
            self.cond.notify_all()

    def wait(self, pred, timeout: float = 5.0) -> None:
        with self.cond:
            assert self.cond.wait_for(pred, timeout), f"timed out: durable={self.durable[-3:]} errors={self.errors}"
