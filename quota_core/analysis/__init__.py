"""The usage history and the quota it suggests.

Questions over the analysed windows (:mod:`.history`) and the hourly rollups
(:mod:`.history_rollups`), rate distributions as KLL sketches (:mod:`.rate_sketch`), and the
one rule that sizes a quota from a measured rate (:mod:`.sizing`).

Pure: may import the standard library, pandas and datasketches, :mod:`quota_core.errors`,
:mod:`quota_core.domain`, :mod:`quota_core.throttling` and itself (import-linter contracts
pure-core and core-packages).

The face: pages, ui and pipeline import the names of :data:`__all__` from here, never a
submodule (tests/project/test_layers.py checks it); code inside quota_core imports the submodules.
A name loads its submodule on first use, so the face costs nothing to import.
"""
from __future__ import annotations

from quota_core.domain.faces import lazy_face

# --- face: generated block (regroup.py phase 4 adds the names pages, ui and
# pipeline import; edit it by hand too: submodule -> the names it exports) ---
_FACE: dict[str, tuple[str, ...]] = {
    "history": ("client_label", "duration_text", "throttle_heatmap", "throttled_by_broker",
                "what_if"),
    "history_rollups": ("as_samples", "bucket_days", "bucket_hours", "CLIENT_COLUMNS",
                        "client_wait", "clients", "entries", "freshness", "HEAT_COLUMNS",
                        "hour_label", "sizing", "sketch_rows", "split_range", "summarize",
                        "SUMMARY_COLUMNS"),
    "quota_sizing": ("whole_number_keys",),
    "rate_sketch": ("K", "RANK_ERROR"),
}
# --- end of face ---

__all__, __getattr__, __dir__ = lazy_face(__name__, _FACE)
