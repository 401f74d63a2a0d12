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

from ..errors import UnreadableFile
from ..fleet import ClusterConfig, Fleet, fleet_from_mapping, fleet_of_one, parse_fleet
from .base import QuotaBackend

__all__ = ["load_fleet", "read_fleet_file", "open_cluster_backend", "CONFIG_ENV",
           "MAX_CONFIG_BYTES"]

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
    from .open import open_backend

    props = dict(cluster.properties)
    if cluster.command_config and props and not cluster.sandbox:
        # both: the file's properties, then the inline ones over them
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
