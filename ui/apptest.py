"""Whether this script run is Streamlit's ``AppTest`` (the one place that asks).

Streamlit has no public call for it: ``AppTest`` sets the hidden config option
``global.appTest``. It is read here only, and ``tests/pages/test_apptest_option.py`` pins that the
option still exists and is set under ``AppTest`` (so a Streamlit upgrade that renames it fails
a test rather than turning every AppTest page run into a hand-over to ``app.py``).
"""
from __future__ import annotations

__all__ = ["under_apptest", "APPTEST_OPTION"]

#: The hidden option ``streamlit.testing.v1.AppTest`` sets to True while it runs a script.
APPTEST_OPTION = "global.appTest"


def under_apptest() -> bool:
    """True while ``AppTest`` runs the script; False in a real server (or if unknown)."""
    # st.get_option does not see this hidden option; the config module does.
    try:
        from streamlit import config

        return bool(config.get_option(APPTEST_OPTION))
    except Exception:  # noqa: BLE001 - unknown option: not under AppTest
        return False
