"""The Quota health page (AppTest) on a sandbox: findings by severity with their evidence,
the fix opening Plan and Edit filled in, the empty state naming the rules and their data,
and the history rules on a real demo history."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.demo_history import HistorySpec, generate, quota_sets, write_history
from quota_core import Entity
from tests.app_steps import texts
from tests.cli_steps import sandbox_with

E = Entity.of
APP = Path(__file__).resolve().parent.parent / "app.py"
QUOTAS = {
    E(user=None): {"producer_byte_rate": 50_000.0, "request_percentage": 5_000.0},
    E(client_id="x"): {"producer_byte_rate": 1e6},
    E(user="<b>ünï</b> 100%=x"): {"consumer_byte_rate": 2e6},
}


@pytest.fixture
def env(tmp_path, monkeypatch):
    def use(quotas, history=None, protected="<b>ünï</b> 100%=x"):
        monkeypatch.setenv("QUOTA_SANDBOX", sandbox_with(tmp_path / "q.sqlite", quotas))
        monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
        monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
        monkeypatch.setenv("QUOTA_LINT_PROTECTED", protected)
        for name in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_METRICS", "QUOTA_ANALYSIS_DIR"):
            monkeypatch.delenv(name, raising=False)
        if history:
            monkeypatch.setenv("QUOTA_HISTORY_DIR", str(history))
        else:
            monkeypatch.delenv("QUOTA_HISTORY_DIR", raising=False)
    return use


def health() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.secrets.update({"_tests": "isolated"})
    at.session_state["operator_name"] = "jdoe"
    at.run()
    at.switch_page("pages/health.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_findings_by_severity_with_evidence(env):
    env(QUOTAS)
    at = health()
    assert [s.value for s in at.subheader] == ["Errors (2)", "Warnings (3)"]
    assert {m.label: m.value for m in at.metric} == {"Errors": "2", "Warnings": "3", "Info": "0"}
    shown = " ".join(texts(at.markdown))
    # the protected user's raw name in the evidence, as text (no HTML, no link)
    assert "'<b>ünï</b> 100%=x' (QUOTA_LINT_PROTECTED)" in shown
    assert "one batch of that size alone is throttled about 11.0 s" in shown
    assert all("<b>" not in m.value or "\\<b\\>" in m.value for m in at.markdown)


def test_the_fix_opens_plan_filled_in_and_plans(env):
    env(QUOTAS)
    at = health()
    at.button(key="he_plan_0").click().run()     # protected-under-default's fix
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Plan from a file"
    text = at.text_area(key="pl_text").value
    assert "<b>ünï</b> 100%=x" in text and "producer_byte_rate: 1000000000000000000" in text
    # AppTest goes back to its own page on the next run (a browser stays on Plan): plan the
    # text the fix filled in, on the Plan page
    at.switch_page("pages/plan.py").run()
    at.text_area(key="pl_text").input(text).run()
    at.button(key="pl_plan_btn").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "1 entity to change (1 change)" in " ".join(texts(at.markdown))


def test_the_fix_opens_edit_filled_in(env):
    env(QUOTAS)
    at = health()
    heads = [m.value for m in at.markdown if m.value.startswith("**")]
    assert heads[2].startswith("**never-binds**")   # 2 errors first, then never-binds
    at.button(key="he_edit_2").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Edit quotas"
    assert at.query_params["entity"] in ('{"client-id":"x"}', ['{"client-id":"x"}'])
    assert at.text_input(key="ed_val_producer_byte_rate").value == ""  # the fix removes it


def test_the_empty_state_names_the_rules_and_their_data(env):
    env({E(user="a"): {"producer_byte_rate": 1e7}})
    at = health()
    assert any("No findings" in s.value for s in at.success)
    rules = at.dataframe[0].value
    status = dict(zip(rules["rule"], rules["ran"]))
    assert status["never-binds"] == "ran" and status["chronic"] == "not run"
    why = dict(zip(rules["rule"], rules["on what / why not"]))
    assert "1 entries of" in why["never-binds"] and "--history" in why["stale"]


def test_history_rules_on_the_page(env, tmp_path):
    history = tmp_path / "history"
    write_history(generate(HistorySpec(hours=12, clients=2, step_s=600)), history)
    env(quota_sets()[1], history)
    at = health()
    shown = " ".join(texts(at.markdown))
    assert "**chronic**" in " ".join(m.value for m in at.markdown)
    assert "bob · reporting" in shown and "the sizing hint" in shown
