"""The Quota health page (AppTest) on a sandbox: findings by severity with their evidence,
the fix opening Plan and Edit filled in, the empty state naming the rules and their data,
and the history rules on a real demo history."""
from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from pipeline.demo_history import HistorySpec, generate, quota_sets, write_history
from quota_core import Entity
from tests import ROOT
from tests.app_steps import texts
from tests.cli_steps import sandbox_with

E = Entity.of
APP = ROOT / "app.py"
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


def _links(at) -> list[tuple[str, dict]]:
    """Each page link of the page: (label, its query parameters)."""
    from urllib.parse import parse_qs

    out = []
    for link in at.get("page_link"):
        query = {k: v[0] for k, v in parse_qs(link.proto.query_string).items()}
        out.append((link.proto.label, query))
    return out


def run_page(page: str, query: dict) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.secrets.update({"_tests": "isolated"})
    at.session_state["operator_name"] = "jdoe"
    at.run()
    at.switch_page(page).run()
    for k, v in query.items():  # the link's address, as the browser opens it
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_fix_opens_plan_filled_in_and_plans(env):
    env(QUOTAS)
    links = _links(health())
    label, query = links[0]                       # protected-under-default's fix
    assert label == "Open in Plan"
    assert "<b>ünï</b> 100%=x" in query["fix"]
    assert "producer_byte_rate: 1000000000000000000" in query["fix"]
    at = run_page("pages/plan.py", query)
    assert at.title[0].value == "Plan from a file"
    assert at.text_area(key="pl_text").value == query["fix"]
    at.button(key="pl_plan_btn").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "1 entity to change (1 change)" in " ".join(texts(at.markdown))
    # once: what the operator types over it stays on the next run
    at.text_area(key="pl_text").input("entries: []\n").run()
    assert at.text_area(key="pl_text").value == "entries: []\n"


def test_the_fix_opens_edit_filled_in(env):
    env(QUOTAS)
    at = health()
    heads = [m.value for m in at.markdown if m.value.startswith("**")]
    assert heads[2].startswith("**never-binds**")   # 2 errors first, then never-binds
    edits = [q for label, q in _links(at) if label == "Open in Edit"]
    query = next(q for q in edits if q["entity"] == '{"client-id":"x"}')
    at = run_page("pages/edit.py", query)
    assert at.title[0].value == "Edit quotas"
    assert at.text_input(key="ed_val_producer_byte_rate").value == ""  # the fix removes it
    # a fix that is not an entry is ignored, the entity's own values shown
    at = run_page("pages/edit.py", {"entity": '{"client-id":"x"}', "fix": "[1,"})
    assert at.text_input(key="ed_val_producer_byte_rate").value == "1000000"


def test_the_empty_state_names_the_rules_and_their_data(env):
    env({E(user="a"): {"producer_byte_rate": 1e7}})
    at = health()
    assert any("No findings" in s.value for s in at.info)
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
