"""The broker settings that change an answer, on a page: a custom quota callback and brokers
that disagree, named (the sentences are :meth:`quota_core.throttling.brokers.ClusterSettings.notes`)."""
from __future__ import annotations

import streamlit as st

from ui.story import cluster_settings
from ui.text import md

__all__ = ["settings_warnings"]

_ICONS = {"callback": ":material/extension:", "disagree": ":material/call_split:",
          "unread": ":material/help:"}


def settings_warnings(backend):
    """One warning per note about the cluster's broker settings; returns the settings, so the
    page takes its quota window from the same read."""
    settings = cluster_settings(backend)
    for note in settings.notes():
        st.warning(md(note.text), icon=_ICONS.get(note.kind, ":material/info:"))
    return settings
