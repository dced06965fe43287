"""An exclusive lock on a run directory, held for the life of a run.

Two runs writing one ``results.jsonl`` would answer every question twice and interleave
their lines, so [`run_evaluation`][] holds
this lock from before it reads the directory until it returns, and a second run on the
same directory is refused at once with an [`AdaptiveRAGError`][].

How the lock is taken, by platform:

- POSIX (Linux, macOS): ``fcntl.flock`` on ``run.lock`` in the directory. The operating
  system releases it when the process ends in any way, ``SIGKILL`` included, so a crashed
  run leaves no stale lock; ``run.lock`` itself stays (it holds the last holder's process
  id, for the error message) and is reused. ``flock`` locks belong to an open file, so a
  second run in the same process (another thread) is refused too. On network file
  systems ``flock`` is only as good as the server's lock support (NFSv4 has it).
- Windows: ``msvcrt.locking`` on one byte of ``run.lock``, also released when the
  process ends.
- Any other platform: ``run.lock.pid`` created with ``O_EXCL`` and removed when the run
  ends. A run killed there leaves that file behind; the error names it, so it can be
  deleted once no run is alive.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import TracebackType
from typing import Literal, TypeAlias

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["LOCK_FILE", "RunDirLock", "run_dir_holder"]

LOCK_FILE = "run.lock"
"""The lock file of a run directory (``flock`` / ``msvcrt`` lock)."""
_PID_LOCK_FILE = "run.lock.pid"
_MSVCRT_OFFSET = 1 << 20  # the locked byte, past the process id written at the start

_Backend: TypeAlias = Literal["flock", "msvcrt", "exclusive-file"]

_BACKEND: _Backend
if sys.platform == "win32":  # pragma: no cover - not run on the test machines
    import msvcrt

    _BACKEND = "msvcrt"
else:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - every POSIX CPython has fcntl
        _BACKEND = "exclusive-file"
    else:
        _BACKEND = "flock"


def _read_pid(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    first = text.split("\n", 1)[0].strip()
    return first if first.isdigit() else None


def _busy_error(out: Path, lock_path: Path, backend: _Backend) -> AdaptiveRAGError:
    pid = _read_pid(lock_path)
    holder = "another run" if pid is None else f"another run (process {pid})"
    stale = ""
    if backend == "exclusive-file":
        stale = (
            f" If no run is alive any more (a run killed on this platform leaves the file), "
            f"delete {lock_path}."
        )
    msg = (
        f"The run directory {out} is in use: {holder} holds its lock {lock_path}. "
        "Expected a directory no other run is writing to (two runs would answer every "
        "question twice). Fix: wait for that run to finish (then run again to resume), or "
        f"pick another output directory (--out).{stale}"
    )
    return AdaptiveRAGError(msg)


class RunDirLock:
    """The exclusive lock of one run directory; use it as a context manager.

    Example::

        with RunDirLock("runs/dragin"):
            ...  # only this run writes to runs/dragin

    Args:
        out_dir: The run directory (created when missing).
    """

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.out_dir = Path(out_dir)
        self._backend: _Backend = _BACKEND
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """The lock file."""
        name = _PID_LOCK_FILE if self._backend == "exclusive-file" else LOCK_FILE
        return self.out_dir / name

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock, or refuse at once when another run holds it.

        Raises:
            AdaptiveRAGError: Another run (or another open of the lock in this process)
                holds the directory, or this object already holds it.
        """
        if self._fd is not None:
            msg = f"RunDirLock({str(self.out_dir)!r}) is already held by this object."
            raise AdaptiveRAGError(msg)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.path
        if self._backend == "exclusive-file":
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                raise _busy_error(self.out_dir, path, self._backend) from None
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _lock(fd)
            except OSError:
                os.close(fd)
                raise _busy_error(self.out_dir, path, self._backend) from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        except OSError:  # the process id is only for messages
            pass
        self._fd = fd

    def release(self) -> None:
        """Give the lock back (nothing happens when it is not held)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._backend == "exclusive-file":
            os.close(fd)
            self.path.unlink(missing_ok=True)
            return
        try:
            _unlock(fd)
        finally:
            os.close(fd)  # closing alone releases a flock lock too

    def __enter__(self) -> RunDirLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def _lock(fd: int) -> None:
    """Take a non-blocking exclusive lock on ``fd``; ``OSError`` when it is held."""
    if sys.platform == "win32":  # pragma: no cover - Windows only
        os.lseek(fd, _MSVCRT_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        os.lseek(fd, 0, os.SEEK_SET)
    else:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _unlock(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover - Windows only
        os.lseek(fd, _MSVCRT_OFFSET, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)


def run_dir_holder(out_dir: str | os.PathLike[str]) -> AdaptiveRAGError | None:
    """Check, without taking it for longer than the check, whether a run holds a directory.

    Args:
        out_dir: The run directory (it need not exist).

    Returns:
        The error a run starting now would get, or ``None`` when the directory is free.
    """
    lock = RunDirLock(out_dir)
    path = lock.path
    if lock._backend == "exclusive-file":
        return _busy_error(lock.out_dir, path, lock._backend) if path.exists() else None
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:  # no lock file: no run ever held the directory
        return None
    try:
        _lock(fd)
    except OSError:
        return _busy_error(lock.out_dir, path, lock._backend)
    else:
        _unlock(fd)
    finally:
        os.close(fd)
    return None
