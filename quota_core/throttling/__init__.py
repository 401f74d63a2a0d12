"""Why a client is throttled, now: Kafka's throttle arithmetic and what brokers report.

The throttle arithmetic (:mod:`.throttle`), each broker's quota settings (:mod:`.brokers`),
which brokers the console watches (:mod:`.coverage`), broker metrics joined with the ladder
(:mod:`.live`), one verdict per client and key (:mod:`.verdict`) and Resolve's story told
from it (:mod:`.story`), one bucket across brokers (:mod:`.spread`), and when throttling
ends after a change (:mod:`.settle`).

Pure: may import the standard library, :mod:`quota_core.errors`, :mod:`quota_core.domain`
and itself (import-linter contracts pure-core and core-packages).

The face: pages, ui and pipeline import the names of :data:`__all__` from here, never a
submodule (tests/project/test_layers.py checks it); code inside quota_core imports the submodules.
A name loads its submodule on first use, so the face costs nothing to import.
"""
from __future__ import annotations

from quota_core.domain.faces import lazy_face

# --- face: generated block (regroup.py phase 4 adds the names pages, ui and
# pipeline import; edit it by hand too: submodule -> the names it exports) ---
_FACE: dict[str, tuple[str, ...]] = {
    "brokers": ("ClusterSettings", "read_settings"),
    "client_view": ("bucket_views", "ClientSide", "ClientView", "view_for_verdict"),
    "coverage": ("endpoint_address", "endpoints_from_template", "unread_brokers", "unwatched",
                 "unwatched_sentence"),
    "live": ("broker_name", "clients_seen", "CONFIRM_S", "finite", "gather", "hold", "join_usage",
             "KEY_OF_TYPE", "throttled_rows"),
    "settle": ("after_change", "changed_lately", "recent_changes"),
    "spreads": ("broker_order", "brokers_text", "bucket_spreads", "judged_spread", "Spread",
                "spread"),
    "story": ("bucket_details", "client_story", "is_blind", "is_quiet", "others_story",
              "quiet_story", "Sentence", "STATUS", "unknown_story"),
    "throttle": ("DEFAULT_WINDOW", "estimate_throttle", "rate_window_ms"),
    "verdict": ("key_verdict", "tags_entity"),
}
# --- end of face ---

__all__, __getattr__, __dir__ = lazy_face(__name__, _FACE)
