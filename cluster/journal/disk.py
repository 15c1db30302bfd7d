"""The directory a journal lives in: the ``Disk`` operations it needs, and ``OsDisk`` (real files).

The protocol is small so that a simulator can implement it with crash semantics. What a crash
keeps, which every implementation must allow and the journal must survive:

* a file's bytes up to its last ``sync`` are kept; bytes written (or a ``truncate``) after it may
  be kept, lost, or kept in part (torn);
* a file's creation (``write_new``, or ``append`` to a missing file), ``rename`` and ``remove``
  are durable only after the next ``sync_dir``; before it a crash may undo them.

Errors are ``JournalIOError`` (an OSError naming the file), whatever the implementation.
"""

from __future__ import annotations

import errno
import fcntl
import os
from contextlib import contextmanager
from typing import Iterator, Protocol

LOCK_NAME = "LOCK"
_fdatasync = getattr(os, "fdatasync", os.fsync)   # macOS has no fdatasync


class JournalIOError(OSError):
    """An operation on a journal file failed (ENOSPC, EIO, EFBIG...); ``filename`` names the file."""


class JournalLocked(RuntimeError):
    """Another journal (a running node, or a tool) holds the directory's lock."""

    def __init__(self, where: str, pid: int | None):
        self.where = where
        self.pid = pid
        held = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"the journal in {where} is in use by {held} (its LOCK file is locked); "
                         f"stop that node or tool first")


class Disk(Protocol):
    """One directory of journal files, named by plain file names (no paths)."""

    where: str      # a human description (the directory's path), for messages

    def list(self) -> list[str]:
        """The names of the files present (any lock file of the implementation excluded)."""

    def read(self, name: str) -> bytes:
        """The whole content of ``name``."""

    def size(self, name: str) -> int:
        ...

    def write_new(self, name: str, data: bytes, reserve: int = 0) -> None:
        """Create ``name`` (it must not exist) holding ``data``. Not durable before ``sync(name)``
        and ``sync_dir()``. ``reserve``: the file may be given zeros after ``data`` up to that
        size (a hint: appends still go right after the data, and ``size`` and ``truncate`` count
        the data only); readers see the zeros."""

    def append(self, name: str, data: bytes) -> None:
        """Add ``data`` at the end of ``name``, creating it if missing. Not durable before
        ``sync(name)`` (and ``sync_dir()`` for a created file)."""

    def sync(self, name: str) -> None:
        """Make the bytes and size of ``name`` durable (fsync)."""

    def sync_dir(self) -> None:
        """Make every creation, rename and removal so far durable (fsync of the directory)."""

    def rename(self, src: str, dst: str) -> None:
        """Atomically rename ``src`` to ``dst``, replacing it. Durable after ``sync_dir()``."""

    def remove(self, name: str) -> None:
        """Delete ``name``; a missing file is not an error. Durable after ``sync_dir()``."""

    def truncate(self, name: str, size: int) -> None:
        """Cut ``name`` to ``size`` bytes; later appends go after them. Durable after ``sync(name)``."""

    def release(self, name: str) -> None:
        """Drop any handle kept open for ``name`` (its content is unchanged; this is no sync)."""

    def close(self) -> None:
        """Release every handle, and the directory's lock where there is one."""


class OsDisk:
    """A ``Disk`` over a real directory, which it locks for its lifetime.

    The lock is an ``fcntl.flock`` on ``LOCK`` (holding the owner's pid, for the message another
    process gets). flock belongs to an open file description, so a second OsDisk on the same
    directory is refused even inside the same process. Files being appended to keep their
    descriptor open, which saves an open() per batch and lets the fsync that follows report a
    write-back error on the same descriptor that wrote the data.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True):
        self.where = os.path.abspath(os.fspath(path))
        self._fds: dict[str, int] = {}
        # files created with reserved space: where their data ends (appends go there)
        self._ends: dict[str, int] = {}
        with self._io("open the directory", ""):
            if create:
                os.makedirs(self.where, exist_ok=True)
            elif not os.path.isdir(self.where):
                raise FileNotFoundError(errno.ENOENT, "no such directory", self.where)
        self._lock_fd: int | None = self._lock()

    def __enter__(self) -> OsDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self, name: str) -> str:
        return os.path.join(self.where, name)

    @contextmanager
    def _io(self, what: str, name: str) -> Iterator[None]:
        try:
            yield
        except JournalIOError:
            raise
        except OSError as e:
            raise JournalIOError(e.errno, f"cannot {what}: {e.strerror}", self._path(name)) from e

    def _lock(self) -> int:
        path = self._path(LOCK_NAME)
        with self._io("open the lock file", LOCK_NAME):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid: int | None = int(os.pread(fd, 32, 0).decode().strip())
            except (OSError, ValueError):
                pid = None
            os.close(fd)
            raise JournalLocked(self.where, pid) from None
        except OSError as e:
            os.close(fd)
            raise JournalIOError(e.errno, f"cannot lock: {e.strerror}", path) from e
        with self._io("write the lock file", LOCK_NAME):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return fd

    def list(self) -> list[str]:
        with self._io("list the directory", ""):
            return sorted(n for n in os.listdir(self.where) if n != LOCK_NAME)

    def read(self, name: str) -> bytes:
        with self._io("read", name), open(self._path(name), "rb") as f:
            return f.read()

    def size(self, name: str) -> int:
        end = self._ends.get(name)
        if end is not None:
            return end
        with self._io("stat", name):
            return os.stat(self._path(name)).st_size

    def _write(self, fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]

    def write_new(self, name: str, data: bytes, reserve: int = 0) -> None:
        with self._io("create", name):
            if reserve <= len(data):
                fd = os.open(self._path(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
                self._fds[name] = fd
                self._write(fd, data)
                return
            fd = os.open(self._path(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            self._fds[name] = fd
            self._write(fd, data)
            self._ends[name] = len(data)
        try:
            os.posix_fallocate(fd, 0, reserve)
        except OSError:
            pass    # a hint: no room to reserve (or no support) only means slower syncs

    # append and sync run once per group commit: a plain try costs nothing where ``_io`` (a
    # generator-based context manager) cost microseconds each

    def append(self, name: str, data: bytes) -> None:
        end = self._ends.get(name)
        if end is not None:
            self._append_at(name, end, data)
            return
        try:
            fd = self._fds.get(name)
            if fd is None:
                fd = os.open(self._path(name), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
                self._fds[name] = fd
            written = os.write(fd, data)
            if written != len(data):     # a short write: the rest, as _write does
                self._write(fd, memoryview(data)[written:])
        except JournalIOError:
            raise
        except OSError as e:
            raise JournalIOError(e.errno, f"cannot write: {e.strerror}", self._path(name)) from e

    def _append_at(self, name: str, end: int, data: bytes) -> None:
        try:
            fd = self._fds.get(name)
            if fd is None:
                fd = os.open(self._path(name), os.O_WRONLY | os.O_CLOEXEC)
                self._fds[name] = fd
            view = memoryview(data)
            while view:
                n = os.pwrite(fd, view, end)
                end += n
                view = view[n:]
        except OSError as e:
            raise JournalIOError(e.errno, f"cannot write: {e.strerror}", self._path(name)) from e
        finally:
            self._ends[name] = end

    def sync(self, name: str) -> None:
        try:
            fd = self._fds.get(name)
            if fd is not None:
                _fdatasync(fd)
                return
            fd = os.open(self._path(name), os.O_RDONLY | os.O_CLOEXEC)
            try:
                _fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise JournalIOError(e.errno, f"cannot fsync: {e.strerror}", self._path(name)) from e

    def sync_dir(self) -> None:
        with self._io("fsync the directory", ""):
            fd = os.open(self.where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        self.release(src)
        self.release(dst)
        self._ends.pop(src, None)
        self._ends.pop(dst, None)
        with self._io(f"rename to {dst}", src):
            os.rename(self._path(src), self._path(dst))

    def remove(self, name: str) -> None:
        self.release(name)
        self._ends.pop(name, None)
        with self._io("remove", name):
            try:
                os.remove(self._path(name))
            except FileNotFoundError:
                pass

    def truncate(self, name: str, size: int) -> None:
        with self._io(f"truncate to {size} bytes", name):
            os.truncate(self._path(name), size)
        if name in self._ends:
            self._ends[name] = size   # no reserve left; its descriptor still writes at offsets

    def release(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            with self._io("close", name):
                os.close(fd)

    def close(self) -> None:
        for name in list(self._fds):
            try:
                self.release(name)
            except JournalIOError:
                pass    # closing is best effort: what matters was fsynced (or reported) before
        if self._lock_fd is not None:
            os.close(self._lock_fd)     # closing the description releases the flock
            self._lock_fd = None
