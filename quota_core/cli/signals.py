"""SIGINT and SIGTERM as a clean stop for the long-running commands (``collect``,
``serve-metrics``, ``analyze --follow``): they set an event the command watches, and the
handlers they replaced are put back when it ends."""
from __future__ import annotations

import signal
import threading

__all__ = ["restore_signals", "stop_on_signals"]

_STOPPING = (signal.SIGINT, signal.SIGTERM)


def stop_on_signals(stop: threading.Event) -> dict:
    """SIGINT and SIGTERM set ``stop`` instead of killing the run; returns the previous
    handlers, for :func:`restore_signals`."""
    return {sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in _STOPPING}


def restore_signals(previous: dict) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
