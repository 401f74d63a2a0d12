"""Read the fleet's configuration (the I/O half of :mod:`quota_core.fleet`) and open a
cluster of it.

Where the fleet comes from, first match wins:

1. ``--config PATH`` (``config_path``);
2. the ``QUOTA_CONFIG`` environment variable;
3. ``[clusters.*]`` tables in ``secrets`` (the dashboard passes ``st.secrets``);
4. today's single settings (``QUOTA_*`` variables, ``[kafka]`` / ``[sandbox]`` in
   ``secrets``) as a fleet of one, named ``default``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

import argparse

from ..errors import UnreadableFile, UsageError
from ..fleet import (ClusterConfig, Fleet, fleet_from_mapping, fleet_of_one, parse_fleet,
                     valid_name)
from .base import QuotaBackend
from .open import open_cluster

__all__ = ["load_fleet", "read_fleet_file", "open_cluster_backend", "CONFIG_ENV",
           "MAX_CONFIG_BYTES", "select_cluster", "fleet_of_args", "valid_cluster_name"]

#: The environment variable naming the fleet file.
CONFIG_ENV = "QUOTA_CONFIG"
#: A fleet file larger than this is refused (a typo'd path to a big file, not a config).
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def read_fleet_file(path: str | os.PathLike, how: str = "--config") -> Fleet:
    """The fleet in the TOML file at ``path``; a usage error naming it when it cannot be
    read (``how`` says where the path came from: ``--config`` or ``QUOTA_CONFIG``)."""
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            raise UnreadableFile(f"{how} {path}: is a folder, not a file. Give the fleet's "
                                 f"TOML file.")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise UnreadableFile(f"{how} {path}: larger than {MAX_CONFIG_BYTES // 1024 // 1024}"
                                 f" MiB, not a fleet file. Check the path.")
        raw = p.read_bytes()
    except FileNotFoundError:
        raise UnreadableFile(f"{how} {path}: no such file. Check the path.") from None
    except OSError as exc:
        raise UnreadableFile(f"{how} {path}: cannot be read ({exc.strerror or exc}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableFile(f"{how} {path}: not UTF-8 text (byte {exc.start}). A fleet file "
                             f"is TOML, in UTF-8.") from None
    return parse_fleet(text, source=str(path), base_dir=str(p.resolve().parent))


def load_fleet(config_path: str | None = None, env: Mapping[str, str] = os.environ,
               secrets: Mapping[str, Any] | None = None) -> Fleet:
    """The fleet, from the first place that has one (see the module's docstring). An empty
    fleet (no cluster) when nothing is configured at all."""
    if config_path:
        return read_fleet_file(config_path, "--config")
    if env.get(CONFIG_ENV):
        return read_fleet_file(env[CONFIG_ENV], CONFIG_ENV)
    if secrets and secrets.get("clusters") is not None:
        return fleet_from_mapping(secrets, source="secrets.toml", base_dir=os.getcwd())
    return fleet_of_one(env, secrets)


def open_cluster_backend(cluster: ClusterConfig, *, timeout_s: float | None = None,
                         progress: Callable[[str], None] | None = None) -> QuotaBackend:
    """The backend of one cluster of the fleet: its sandbox, or its Kafka cluster with its
    command-config file or inline properties."""
    return open_cluster(cluster, timeout_s=timeout_s, progress=progress)


def fleet_of_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> Fleet:
    """The fleet the flags name: ``--config``, else ``$QUOTA_CONFIG``, else today's
    ``QUOTA_*`` settings as a fleet of one (a fleet already read rides on ``args._fleet``)."""
    fleet = getattr(args, "_fleet", None)
    if fleet is None:
        fleet = load_fleet(getattr(args, "config", None), os.environ if env is None else env)
        args._fleet = fleet
    return fleet


def select_cluster(args: argparse.Namespace, env: Mapping[str, str] | None = None, *,
                   metrics: bool = False) -> ClusterConfig | None:
    """Fill the store flags from the fleet: with ``--cluster NAME``, ``--config PATH``, or
    ``$QUOTA_CONFIG`` (when neither ``--bootstrap-server`` nor ``--sandbox`` is given), the
    chosen cluster's bootstrap servers or sandbox, its command config, and with ``metrics``
    its ``metrics`` / ``metrics_template`` where those flags were not given. The cluster
    rides on ``args.fleet_cluster`` (:func:`open_backend_from` opens it, properties and
    all). None, and nothing changed, when no fleet is in play.

    ``--cluster`` or ``--config`` with ``--bootstrap-server`` / ``--sandbox`` /
    ``--command-config`` is a usage error."""
    env = os.environ if env is None else env
    if getattr(args, "fleet_cluster", None) is not None:
        return args.fleet_cluster
    name, config = getattr(args, "cluster", None), getattr(args, "config", None)
    direct = [flag for flag, value in (("--bootstrap-server", args.bootstrap_server),
                                       ("--sandbox", args.sandbox),
                                       ("--command-config", args.command_config)) if value]
    if name is not None or config:
        if direct:
            which = "--cluster" if name is not None else "--config"
            raise UsageError(f"{which} and {direct[0]} both say where the quotas live: give "
                             f"one. A cluster of the fleet file has its own store and client "
                             f"settings.")
    elif direct or not env.get("QUOTA_CONFIG"):
        return None  # today's flags, or nothing (the command says what is missing)
    if name is not None and not valid_cluster_name(name):
        raise UsageError(f"--cluster {name!r}: a cluster name is letters, digits, '_', '.' "
                         f"and '-', starting with a letter or digit.")
    cluster = fleet_of_args(args, env).select(name)
    args.fleet_cluster = cluster
    args.bootstrap_server = cluster.bootstrap_servers
    args.sandbox = cluster.sandbox
    args.command_config = cluster.command_config
    if metrics and hasattr(args, "metrics"):
        explicit = args.metrics or getattr(args, "metrics_template", None)
        if not explicit:
            if cluster.metrics:
                args.metrics = cluster.metrics_arg
            elif cluster.metrics_template and hasattr(args, "metrics_template"):
                args.metrics_template = cluster.metrics_template
    return cluster


def valid_cluster_name(name: str) -> bool:
    return valid_name(name)


