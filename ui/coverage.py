"""The warning a page shows for every broker of the cluster that no metrics endpoint covers:
each broker enforces on its own, so its throttling is invisible, never silently all clear."""
from __future__ import annotations

import streamlit as st

from quota_core.throttling import unwatched, unwatched_sentence

from ui.page_context import connected_cluster
from ui.text import md

__all__ = ["unwatched_warnings"]


def unwatched_warnings(frame) -> list[str]:
    """One warning per broker of the connected cluster that no answering endpoint of ``frame``
    covers; returns the node ids (empty for a sandbox, which has no brokers)."""
    cluster = connected_cluster()
    if cluster is None or not cluster.node_ids:
        return []
    # A broker whose endpoint stopped answering is named with its error (ui.live.Down.label),
    # once: not again here.
    known = {down.node for down in frame.down if down.node}
    missing = [n for n in unwatched(cluster.node_ids, frame.brokers) if n not in known]
    failed = [down.name for down in frame.down if not down.node]
    for node in missing:
        sentence = unwatched_sentence(node, failed)
        st.warning(md(sentence[0].upper() + sentence[1:] + "."), icon=":material/visibility_off:")
    return missing
