"""Stopping a child started in its own process group (``start_new_session=True``).

Tests and benchmarks start servers (Streamlit, an OpenID provider, Spark's master and worker)
that start children of their own; signalling the group stops those too, so nothing is left
listening after the test.
"""
from __future__ import annotations

import os
import signal
import subprocess

__all__ = ["stop_process_group"]


def stop_process_group(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM to ``proc``'s whole group; SIGKILL if it is still running after ``grace_s``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:  # it ended between poll() and killpg()
        proc.wait(10)
