"""One writer per output folder: the analysis job holds a lock on each folder it writes (its
``--out`` and its rollups) for its whole life, and says who holds it.

The lock is ``fcntl.flock`` on a file beside the folder, ``.<name>.lock`` in its parent (the
job renames a finished ``--out`` into place, so a file inside it would go with the old
folder). The holder writes one line into it: its pid, when it started and its command. A
second job finds the lock taken, reads that line, and stops with
:class:`FolderBusy` (exit 1) naming the holder; the History page reads the same line
(:func:`holder`) before it starts a job. The kernel drops the lock when the holder exits, so
a crashed job leaves no stale lock (the file and its last line stay, unlocked).
"""
from __future__ import annotations

import fcntl
import os
import shlex
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from quota_core.errors import BackendError

__all__ = ["FolderBusy", "lock_path", "holder", "busy_message", "holding", "holding_all"]


class FolderBusy(BackendError):
    """Another job is writing the folder (exit 1): the message names it."""


def lock_path(folder: str | Path) -> Path:
    path = Path(folder).resolve()
    return path.parent / f".{path.name}.lock"


def _holder_line(folder: Path, argv: Sequence[str]) -> str:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return f"pid {os.getpid()}, started {started}: {shlex.join(argv)}"


def holder(folder: str | Path) -> str | None:
    """The line of the job that holds ``folder``'s lock now, None when none does."""
    path = lock_path(folder)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path) or "another job (its line is not written yet)"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def busy_message(folder: str | Path, line: str) -> str:
    return (f"{folder} is being written by another analysis ({line}); wait for it to finish "
            f"or stop it, then run again.")


@contextmanager
def holding(folder: str | Path, argv: Sequence[str]) -> Iterator[None]:
    """Hold ``folder``'s lock for the block, with this job's line in it; :class:`FolderBusy`
    at once when another job holds it. A folder whose parent does not exist is not locked
    (the job itself says what is wrong with it)."""
    path = lock_path(folder)
    if not path.parent.is_dir():
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(busy_message(folder, _read(path) or "its line is not written "
                                                                  "yet")) from None
        os.ftruncate(fd, 0)
        os.write(fd, (_holder_line(Path(folder), argv) + "\n").encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def holding_all(folders: Sequence[str | Path], argv: Sequence[str]) -> Iterator[None]:
    """:func:`holding` for each folder (in one order, duplicates once)."""
    seen = sorted({str(Path(f).resolve()) for f in folders})
    with ExitStack() as stack:
        for folder in seen:
            stack.enter_context(holding(folder, argv))
        yield
