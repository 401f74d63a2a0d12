"""The quota model and the ladder: what a quota set is, and who each entry applies to.

Entities and keys (:mod:`.entities`, :mod:`.keys`, :mod:`.limits`), byte-rate units
(:mod:`.units`), alterations and their validation (:mod:`.alterations`, :mod:`.validation`,
with Java's text rules in :mod:`.java_text`), describe filters (:mod:`.filters`), quota files
(:mod:`.serialization`), the precedence ladder and resolution (:mod:`.ladder`,
:mod:`.resolution`, :mod:`.bulk`, :mod:`.membership`, :mod:`.shadows`, :mod:`.explain`), and
the sentence pieces and CSV rule the pages share (:mod:`.wording`, :mod:`.csvsafe`).

Pure: may import the standard library, :mod:`quota_core.errors` and itself (import-linter
contracts pure-core and core-packages).

The face: pages, ui and pipeline import the names of :data:`__all__` from here, never a
submodule (tests/project/test_layers.py checks it); code inside quota_core imports the submodules.
A name loads its submodule on first use, so the face costs nothing to import.
"""
from __future__ import annotations

from quota_core.domain.faces import lazy_face

# --- face: generated block (regroup.py phase 4 adds the names pages, ui and
# pipeline import; edit it by hand too: submodule -> the names it exports) ---
_FACE: dict[str, tuple[str, ...]] = {
    "bulk": ("bulk_resolve_buckets",),
    "client_metrics": ("DEFAULT_SUBSCRIPTION", "Subscription", "subscription_from_input"),
    "csvsafe": ("FORMULA_NOTE", "spreadsheet_cell", "spreadsheet_csv"),
    "entities": ("CLIENT_ID", "ClusterInfo", "DEFAULT_TEXT", "display_name", "Entity",
                 "entity_from_json", "entity_to_json", "ENTITY_TYPES", "IP", "QuotaSet", "USER"),
    "filters": ("EntityFilter", "FilterComponent"),
    "fleet": ("ClusterConfig", "Fleet"),
    "keys": ("format_value", "keys_for", "QUOTA_KEYS"),
    "ladder": ("ABSENT", "DEFAULT", "LADDER", "level_of", "NAME", "Rung", "rung", "source_entity"),
    "membership": ("kind_of_tags", "Membership", "Tags"),
    "resolution": ("Resolution", "resolve_values"),
    "serialization": ("dumps", "from_document", "to_document"),
    "shadows": ("dead_keys", "shadow_note_parts"),
    "units": ("format_bytes", "format_editable", "format_exact", "format_quota", "format_rate",
              "round_up_quota"),
    "validation": ("client_name_problems",),
    "wording": ("client_wait_history", "clients_moved", "inherited", "NO_CLIENT_HISTORY_TEXT",
                "plural", "quota_before", "quota_changed", "read_only_refused",
                "TELEMETRY_NOT_COLLECTED", "verb"),
}
# --- end of face ---

__all__, __getattr__, __dir__ = lazy_face(__name__, _FACE)
