"""The History page and the Edit preview's what-if, on tables the real Spark job wrote.

A small demo history (pipeline.demo_history) is analysed once by ``pipeline.job.run`` on the
session's local[2] SparkSession; the pages then read those tables as they do in production.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.demo_history import HistorySpec, generate, quota_sets, write_history
from quota_core.backends.sandbox import SandboxBackend

from tests import ROOT

APP = ROOT / "app.py"


@pytest.fixture(scope="module")
def analysed(spark, tmp_path_factory):
    from pipeline.job import run

    base = tmp_path_factory.mktemp("history")
    write_history(generate(HistorySpec(hours=6, clients=4, step_s=120)), base / "history")
    run(spark, str(base / "history"), str(base / "analysis"),
        rollups_dir=str(base / "history" / "rollups"))
    return base


@pytest.fixture
def app_env(analysed, tmp_path, monkeypatch):
    store = tmp_path / "q.sqlite"
    with SandboxBackend(store) as backend:
        backend.replace_all(quota_sets()[1])  # the quotas in force at the end of the history
    monkeypatch.setenv("QUOTA_SANDBOX", str(store))
    monkeypatch.setenv("QUOTA_HISTORY_DIR", str(analysed / "history"))
    monkeypatch.setenv("QUOTA_ANALYSIS_DIR", str(analysed / "analysis"))
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    for name in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_METRICS"):
        monkeypatch.delenv(name, raising=False)


def run_page(page: str, **session) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.secrets.update({"_tests": "isolated"})
    for k, v in session.items():
        at.session_state[k] = v
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_history_page_shows_who_was_throttled(app_env):
    at = run_page("pages/history.py")
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["clients throttled"]) > 0
    charts = at.get("plotly_chart")
    assert len(charts) == 4  # top clients, top entries, heatmap, one bucket over time
    assert at.selectbox(key="hi_bucket").options
    import json

    heatmap, bucket = (json.loads(c.proto.spec)["data"] for c in charts[2:])
    assert heatmap[0]["type"] == "heatmap" and heatmap[0]["y"]
    # the chosen bucket's rate per broker and its quota, each with points
    assert len(bucket) >= 2 and all(len(trace["x"]) > 0 for trace in bucket)
    assert bucket[-1]["name"] == "quota"


def test_edit_preview_judges_a_change_against_the_history(app_env):
    at = run_page("pages/edit.py", operator_name="jdoe")
    at.text_input(key="ed_user").input("etl").run()
    # {user=etl}'s producer quota cut to 1 MB/s: the history's etl traffic would be throttled.
    at.text_input(key="ed_val_producer_byte_rate").input("1MB").run()
    at.button(key="ed_preview_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(i.value for i in at.info)
    assert "Over the recorded 6 h" in said and "would have been throttled" in said


def test_history_reads_the_rollups_only_and_any_range(app_env, analysed):
    """With the per-sample table gone the page still shows everything (it reads the hourly
    rollups); a narrower range sums fewer hours; the freshness line names the latest sample."""
    import shutil

    from quota_core.telemetry.rollup_files import load_state

    whole = run_page("pages/history.py")
    full = whole.select_slider(key="hi_range")
    hours = sorted(load_state(analysed / "history" / "rollups")["hours"])
    assert full.value == (hours[0], hours[-1]) and len(hours) >= 6
    up_to = load_state(analysed / "history" / "rollups")["up_to"]
    assert any(f"Rollups up to {up_to[:16]} UTC" in c.value for c in whole.caption), [
        c.value for c in whole.caption]
    seconds = {m.label: m.value for m in whole.metric}["time over quota (broker-seconds)"]
    gone = analysed / "analysis" / "windows"
    kept = analysed / "windows-aside"
    shutil.move(gone, kept)
    try:
        at = run_page("pages/history.py")
        assert len(at.get("plotly_chart")) == 4
        assert {m.label: m.value for m in at.metric}["time over quota (broker-seconds)"] == seconds
        at.select_slider(key="hi_range").set_value((hours[-2], hours[-1])).run()
        assert not at.exception, [e.value for e in at.exception]
        narrow = {m.label: m.value for m in at.metric}["time over quota (broker-seconds)"]
        assert narrow != seconds
    finally:
        shutil.move(kept, gone)


def test_edit_what_if_reads_six_columns(analysed):
    from ui.history import WHAT_IF_COLUMNS, windows

    got = windows(str(analysed / "analysis"), 0.0, WHAT_IF_COLUMNS)
    assert list(got.columns) == list(WHAT_IF_COLUMNS) and len(got) > 0


def test_sizing_table_is_rounded_in_mib_and_now_is_the_clusters(app_env):
    # Issue 15: `9.099977605729402 mutations/s`, MB/s, and a "now" that was the history's.
    import re

    from quota_core.domain.entities import entity_from_json
    from quota_core.domain.units import format_quota

    closed = run_page("pages/history.py")  # sizing merges sketches: only when opened
    assert not [d for d in closed.dataframe if "suggested" in d.value.columns]
    at = run_page("pages/history.py", hi_sizing=True)
    (table,) = [d.value for d in at.dataframe if "suggested" in d.value.columns]
    assert len(table)
    held = SandboxBackend(Path(__import__("os").environ["QUOTA_SANDBOX"])).describe()
    for entry, key, now, suggested in zip(table["entry"], table["key"], table["now"],
                                          table["suggested"]):
        entity = next(e for e in held if e.display() == entry) if any(
            e.display() == entry for e in held) else None
        value = None if entity is None else held[entity].get(key)
        assert now == ("not set" if value is None else format_quota(key, value))
        assert " MB/s" not in suggested and " kB/s" not in suggested
        number = re.match(r"[\d.]+", suggested).group(0)
        assert len(number.replace(".", "").lstrip("0")) <= 3 or "." not in number, suggested


def test_update_now_while_another_job_writes_the_folder_names_it(app_env, analysed,
                                                                monkeypatch):
    """Issue 28: the page starts no second job on a folder another analysis holds (the demo's
    ``--follow``, one by hand); it shows the one line naming the holder instead."""
    import ui.history
    from quota_core.telemetry.folder_lock import holding

    def no_second_job(*args, **kw):  # pragma: no cover - the test fails if called
        raise AssertionError("a second job was started")

    monkeypatch.setattr(ui.history.subprocess, "Popen", no_second_job)
    at = run_page("pages/history.py")
    with holding(analysed / "analysis", ["analyze", "--usage", "history", "--follow"]):
        at.button(key="hi_run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [e.value.replace("\\", "") for e in at.error]  # markdown escapes, as shown
    [line] = [t for t in shown if "is being written by another analysis" in t]
    assert "analyze --usage history --follow" in line and "(pid " in line, line
