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

from quota_core.domain.faces import lazy_face

# --- face: generated block (regroup.py phase 4 adds the names pages, ui and
# pipeline import; edit it by hand too: submodule -> the names it exports) ---
_FACE: dict[str, tuple[str, ...]] = {
    "drift": ("promotion_notes", "quota_drift"),
    "impact": ("ANY_OTHER", "apply_alteration", "clients_from_entries", "fallback",
               "parse_clients_csv"),
    "plan": ("change_kind", "check_plan_cluster", "make_plan", "plan_impact", "since_plan"),
}
# --- end of face ---

__all__, __getattr__, __dir__ = lazy_face(__name__, _FACE)
