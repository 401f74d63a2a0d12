"""How a package of the pure core shows its public face: one table, names loaded on use.

Each of ``quota_core.domain``, ``.throttling``, ``.analysis`` and ``.planning`` keeps a
``_FACE`` table (submodule -> the names pages, ui and pipeline import from the package) and
hands it to :func:`lazy_face`, the one definition of what the face does with it.
"""
from __future__ import annotations

import importlib
from typing import Callable, Mapping

__all__ = ["lazy_face"]


def lazy_face(package: str, table: Mapping[str, tuple[str, ...]]
              ) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` for ``package``, whose face is ``table``.

    A name loads its submodule on first use: importing one submodule (as the CLI does) loads
    no other. Not cached in the package: a test that patches the submodule's name patches the
    face's too."""
    names = sorted(name for exported in table.values() for name in exported)
    home = {name: module for module, exported in table.items() for name in exported}

    def face_getattr(name: str):
        if name in home:
            return getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def face_dir() -> list[str]:
        import sys

        return sorted(set(vars(sys.modules[package])) | set(names))

    return names, face_getattr, face_dir
