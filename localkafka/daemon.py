"""A long-lived local broker shared across commands (``make kafka-up``, ``make run``).

The broker's workdir (default ``<repo>/.cache/local-broker``) doubles as its state
directory: ``state.json`` there records pid, bootstrap, metrics URL, SASL flag and users,
so a later command can find, reuse or stop the broker started by an earlier one.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .broker import LocalBroker
from .errors import LocalBrokerError
from .jars import REPO_ROOT

DEFAULT_DIR = REPO_ROOT / ".cache" / "local-broker"


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Serialise up/down on one directory (e.g. two make targets racing)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def running_broker(directory: Path | str = DEFAULT_DIR) -> LocalBroker | None:
    """The broker recorded in ``directory`` if its JVM is alive and answers, else None."""
    broker = LocalBroker.attach(directory)
    if broker is not None and broker.running() and broker.answers():
        return broker
    return None


def ensure_running(
    directory: Path | str = DEFAULT_DIR,
    sasl: bool = False,
    port: int | None = None,
    timeout: float = 90,
    progress: Callable[[str], None] = lambda msg: None,
) -> tuple[str, bool]:
    """Return ``(bootstrap, started_now)``, starting a detached broker only if none answers.

    A live broker of the other flavour (SASL vs PLAINTEXT) or on another port is an
    error rather than silently replaced: something may be using it.
    """
    directory = Path(directory).resolve()
    with _locked(directory):
        existing = LocalBroker.attach(directory)
        if existing is not None and existing.running():
            if existing.sasl != sasl or (port and existing.port != port):
                raise LocalBrokerError(
                    f"a {'SASL' if existing.sasl else 'PLAINTEXT'} broker is already running on "
                    f"{existing.bootstrap} from {directory}; stop it first (python -m localkafka down)")
            if existing.answers():
                return existing.bootstrap, False
            progress(f"broker pid {existing.pid} is alive but not answering; restarting it")
            existing.stop()
        broker = LocalBroker(directory, sasl=sasl, port=port, detached=True)
        progress(f"starting {'SASL' if sasl else 'PLAINTEXT'} Kafka broker in {directory}")
        broker.start(timeout=timeout)
        progress(f"broker pid {broker.pid} ready on {broker.bootstrap}, metrics on {broker.metrics_url} "
                 f"(log: {broker.log_path})")
        return broker.bootstrap, True


def stop_running(directory: Path | str = DEFAULT_DIR) -> bool:
    """Stop the broker recorded in ``directory``; True if one was running."""
    directory = Path(directory).resolve()
    with _locked(directory):
        broker = LocalBroker.attach(directory)
        if broker is None:
            return False
        was_running = broker.running()
        broker.stop()  # also removes the state file of a broker that died on its own
        return was_running
