"""SIGINT and SIGTERM as a clean stop for the long-running commands (``collect``,
``serve-metrics``, ``analyze --follow``): they set an event the command watches, and the
handlers they replaced are put back when it ends. During a write (``--alter``, ``--import``,
``apply``), SIGTERM raises :class:`Terminated` instead, as Ctrl-C raises KeyboardInterrupt,
so the write path closes the audit intents it opened (issue 32) before the process ends."""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

__all__ = ["restore_signals", "stop_on_signals", "Terminated", "sigterm_raises"]


class Terminated(BaseException):
    """SIGTERM arrived during a write (a BaseException, as KeyboardInterrupt: no
    ``except Exception`` swallows it)."""


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (main thread only; elsewhere
    signals cannot be handled and the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Terminated("stopped by SIGTERM")

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)

_STOPPING = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals(stop: threading.Event) -> dict:
    """SIGINT and SIGTERM set ``stop`` instead of killing the run; returns the previous
    handlers, for :func:`restore_signals`."""
    return {sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in _STOPPING}


def restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
