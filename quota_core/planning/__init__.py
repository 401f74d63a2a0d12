"""What a change does, before it is made.

The per-key diff of one entity and the clients a change moves (:mod:`.impact`), and the plan
that brings a cluster's quota set to a desired file, the document ``apply`` executes
(:mod:`.plan`). The write itself is :mod:`quota_core.changes`.

Pure: may import the standard library, :mod:`quota_core.errors`, :mod:`quota_core.domain`,
:mod:`quota_core.throttling` and itself (import-linter contracts pure-core and core-packages).

The face: pages, ui and pipeline import the names of :data:`__all__` from here, never a
submodule (tests/project/test_layers.py checks it); code inside quota_core imports the submodules.
A name loads its submodule on first use, so the face costs nothing to import.
"""
from __future__ import annotations

import importlib

# --- face: generated block (regroup.py phase 4 adds the names pages, ui and
# pipeline import; edit it by hand too: submodule -> the names it exports) ---
_FACE: dict[str, tuple[str, ...]] = {
    "drift": ("promotion_notes", "quota_drift"),
    "impact": ("ANY_OTHER", "apply_alteration", "clients_from_entries", "fallback",
               "parse_clients_csv"),
    "plan": ("change_kind", "check_plan_cluster", "make_plan", "plan_impact", "since_plan"),
}
# --- end of face ---

__all__ = sorted(name for names in _FACE.values() for name in names)
_HOME = {name: module for module, names in _FACE.items() for name in names}


def __getattr__(name: str):
    # Loaded on first use: importing one submodule (as the CLI does) loads no other. Not
    # cached here: a test that patches the submodule's name patches the face's too.
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
