"""Open a backend from what a user typed: a sandbox path, or bootstrap servers + config."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .backend import QuotaBackend
from .errors import ConfigError

__all__ = ["open_backend"]


def open_backend(sandbox: str | Path | None = None, bootstrap_servers: str | None = None,
                 command_config: str | Path | None = None,
                 client_properties: dict[str, str] | None = None,
                 timeout_s: float | None = None,
                 progress: Callable[[str], None] | None = None) -> QuotaBackend:
    """A :class:`SandboxBackend` for ``sandbox``, else a Kafka backend for ``bootstrap_servers``.

    ``progress`` is called with a line of text while a wait for the cluster lasts longer
    than about 2 s (the CLI prints it on stderr), and when a lost answer is being settled."""
    if sandbox and bootstrap_servers:
        raise ConfigError("Give either a sandbox file or bootstrap servers, not both.")
    if sandbox:
        from .sandbox import SandboxBackend

        return SandboxBackend(sandbox)
    if not bootstrap_servers:
        raise ConfigError("No backend given: pass --bootstrap-server HOST:PORT for a Kafka "
                          "cluster, or --sandbox PATH for a local sandbox file.")
    try:
        from .kafka_backend import KafkaBackend
    except ImportError as exc:  # kafka-python missing, or the module not there yet
        raise ConfigError(f"The Kafka backend is not available ({exc}). Install the project "
                          f"(pip install -e .) or use --sandbox PATH.") from exc
    kwargs: dict = {} if timeout_s is None else {"timeout_s": timeout_s}
    if progress is not None:
        kwargs["progress"] = progress
    if command_config:
        return KafkaBackend.from_command_config(bootstrap_servers, command_config, **kwargs)
    return KafkaBackend(bootstrap_servers, client_properties, **kwargs)
