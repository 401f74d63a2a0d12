"""Progress lines for a long apply (issue 32: a 100k import ran for minutes without a word).

An apply of at least :data:`PROGRESS_MIN_ENTITIES` entities says each step as it starts
(waiting for the lease, checking, recording the intents, sending, reading back, recording the
outcomes) and, while a step lasts, repeats it every :data:`PROGRESS_EVERY_S` seconds from a
timer thread, with the time so far. Smaller applies say nothing. The lines go to a callback
(the CLI writes them on stderr), so stdout stays what it was.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["PROGRESS_MIN_ENTITIES", "PROGRESS_EVERY_S", "ApplyProgress"]

#: The fewest entities whose apply reports progress.
PROGRESS_MIN_ENTITIES = 1000
#: How often a step that lasts is repeated ("still ...").
PROGRESS_EVERY_S = 5.0


class ApplyProgress:
    """Says the steps of an apply of ``total`` entities to ``emit`` (nothing when ``emit`` is
    None or ``total`` is under ``min_entities``). Use as a context manager: the timer stops
    when the block ends."""

    def __init__(self, emit: Callable[[str], None] | None, total: int, *,
                 every_s: float = PROGRESS_EVERY_S,
                 min_entities: int = PROGRESS_MIN_ENTITIES) -> None:
        self.total = total
        self._emit = emit if emit is not None and total >= min_entities else None
        self._every_s = every_s
        self._started = time.monotonic()
        self._step = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self._emit is not None

    def _say(self, text: str) -> None:
        with self._lock:
            emit = self._emit
            if emit is None:
                return
            try:
                emit(f"{text} ({time.monotonic() - self._started:.1f} s so far)")
            except Exception:  # noqa: BLE001 - a broken progress sink must not stop the apply
                self._emit = None

    def step(self, text: str) -> None:
        """A new step starts: say it now, and again every ``every_s`` while it lasts."""
        if self._emit is None:
            return
        self._step = text
        self._say(f"applying {self.total:,} entity changes: {text}")
        if self._thread is None:
            self._thread = threading.Thread(target=self._tick, name="apply-progress",
                                            daemon=True)
            self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(self._every_s):
            if self._emit is None:
                return
            self._say(f"applying {self.total:,} entity changes: still {self._step}")

    def done(self, text: str) -> None:
        """The last line (stops the timer first)."""
        self.close()
        if self._emit is not None:
            self._emit(f"applied {self.total:,} entity changes: {text} in "
                       f"{time.monotonic() - self._started:.1f} s")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> "ApplyProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
