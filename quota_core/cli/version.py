"""The version the CLI reports (``--version``): one definition.

The installed distribution's metadata (``importlib.metadata``), else, for a checkout run
without installing it, ``[project] version`` in the checkout's ``pyproject.toml``.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["DISTRIBUTION", "package_version"]

#: The distribution name in pyproject.toml.
DISTRIBUTION = "quota-console"


def package_version() -> str:
    """The version string, e.g. ``0.1.0``; ``unknown`` if neither source says."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        pass
    import tomllib

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return "unknown"
    return str(project.get("version") or "unknown")
