"""Open a backend from what a user typed: a sandbox path, or bootstrap servers + config."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .base import QuotaBackend
from ..errors import ConfigError, UsageError

if TYPE_CHECKING:
    from ..fleet import ClusterConfig

__all__ = ["open_backend", "add_backend_arguments", "open_backend_from", "NumberAction",
           "require_sandbox_file", "open_cluster", "add_fleet_arguments"]

#: How long to wait for an unreachable cluster, unless --timeout says otherwise.
DEFAULT_TIMEOUT_S = 10.0


class NumberAction(argparse.Action):
    """A ``type=float`` flag that refuses ``--flag=--`` as a usage error (exit 2).

    Python 3.11's argparse hands ``--flag=--`` over as ``[]``, without calling ``type``: a
    list where every check expects a number (a TypeError, an "internal error", before)."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        if not isinstance(values, (int, float)):
            parser.error(f"argument {option_string}: expected a number, not '--'")
        setattr(namespace, self.dest, values)


def add_backend_arguments(parser: argparse.ArgumentParser, *,
                          all_clusters: str | None = None) -> None:
    """The flags :func:`open_backend_from` reads, as one group: the same words and help in
    every command that reads or changes quotas. ``all_clusters``: the help of an
    ``--all-clusters`` flag, for the commands that run on every cluster of the fleet."""
    g = parser.add_argument_group("where the quotas live (one of)")
    add_fleet_arguments(g)
    if all_clusters:
        g.add_argument("--all-clusters", action="store_true", help=all_clusters)
    g.add_argument("--bootstrap-server", metavar="HOST:PORT", help="a Kafka cluster")
    g.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties (security.protocol, sasl.*, ssl.*)")
    g.add_argument("--sandbox", metavar="PATH", help="a local sandbox store (SQLite file)")
    g.add_argument("--timeout", type=float, action=NumberAction, default=DEFAULT_TIMEOUT_S,
                   metavar="SECONDS",
                   help=f"give up on an unreachable cluster after this long (default "
                        f"{DEFAULT_TIMEOUT_S:g})")


def add_fleet_arguments(group) -> None:
    """``--config PATH`` and ``--cluster NAME``: a cluster of the fleet file (issue 29)."""
    group.add_argument("--config", metavar="PATH",
                       help="the fleet's TOML file, [clusters.NAME] tables (default: "
                            "$QUOTA_CONFIG)")
    group.add_argument("--cluster", metavar="NAME",
                       help="the cluster NAME of the fleet file (needed when it names "
                            "several)")


def require_sandbox_file(path: str | Path) -> None:
    """A command that only reads quotas never creates a sandbox: a missing file is a usage
    error (exit 2), the same words for ``--describe``, ``serve-metrics`` and the others."""
    if not Path(path).exists():
        raise UsageError(f"No sandbox file at {path}: it is created by --alter, --import or "
                         f"--init. Check the path.")


def open_backend_from(args: argparse.Namespace,
                      progress: Callable[[str], None] | None = None) -> QuotaBackend:
    """:func:`open_backend` for the flags of :func:`add_backend_arguments` (the cluster of
    the fleet that :func:`select_cluster` chose, when it chose one)."""
    cluster = getattr(args, "fleet_cluster", None)
    if cluster is not None:
        return open_cluster(cluster, timeout_s=args.timeout, progress=progress)
    return open_backend(args.sandbox, args.bootstrap_server, args.command_config,
                        timeout_s=args.timeout, progress=progress)


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
        from .kafka import KafkaBackend
    except ImportError as exc:  # kafka-python missing, or the module not there yet
        raise ConfigError(f"The Kafka backend is not available ({exc}). Install the project "
                          f"(pip install -e .) or use --sandbox PATH.") from exc
    kwargs: dict = {} if timeout_s is None else {"timeout_s": timeout_s}
    if progress is not None:
        kwargs["progress"] = progress
    if command_config:
        return KafkaBackend.from_command_config(bootstrap_servers, command_config, **kwargs)
    return KafkaBackend(bootstrap_servers, client_properties, **kwargs)


def open_cluster(cluster: "ClusterConfig", *, timeout_s: float | None = None,
                 progress: Callable[[str], None] | None = None) -> QuotaBackend:
    """The backend of one cluster of the fleet: its sandbox, or its Kafka cluster with its
    command-config file and inline properties (the inline ones over the file's)."""
    props = dict(cluster.properties)
    if cluster.command_config and props and not cluster.sandbox:
        from .files import PROPERTIES_LIMIT, read_bytes_file
        from .kafka_config import property_lines
        from ..errors import UnreadableConfig

        raw = read_bytes_file(Path(cluster.command_config), "command_config file",
                              PROPERTIES_LIMIT, UnreadableConfig)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
        props = {**{k: v for _n, k, v in property_lines(text)}, **props}
        return open_backend(None, cluster.bootstrap_servers, None, client_properties=props,
                            timeout_s=timeout_s, progress=progress)
    return open_backend(cluster.sandbox, cluster.bootstrap_servers, cluster.command_config,
                        client_properties=props or None, timeout_s=timeout_s,
                        progress=progress)
