"""``ui.apptest`` reads Streamlit's hidden ``global.appTest`` option (no public call says
"this is AppTest"). Pin that the option exists, is False in a plain process, and True while
AppTest runs a script, so a Streamlit upgrade that renames it fails here."""
from __future__ import annotations

from streamlit import config
from streamlit.testing.v1 import AppTest

from ui.apptest import APPTEST_OPTION, under_apptest


def test_the_hidden_option_still_exists():
    # get_option raises RuntimeError for an option Streamlit does not know.
    assert config.get_option(APPTEST_OPTION) is False
    assert under_apptest() is False


def _script():
    import streamlit as st

    from ui.apptest import under_apptest

    st.text(f"under={under_apptest()}")


def test_under_apptest_is_true_inside_an_apptest_run():
    at = AppTest.from_function(_script).run(timeout=30)
    assert [t.value for t in at.text] == ["under=True"]
