"""The Health page's plumbing: the lint input from the page context (the quota set the page
shows, the brokers' settings, the protected patterns of ``[lint] protected`` /
``QUOTA_LINT_PROTECTED``, the configured usage history), and rendering the report.

A finding's fix opens Plan (its fragment in the paste box) or, when it writes one entry, Edit
(the entity and its values filled in), by a link with the fix in ``?fix=`` (:func:`fix_links`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import streamlit as st

from quota_core.domain import entity_to_json
from quota_core.lint import (NEEDS, RULES, SEVERITIES, LintInput, LintReport, protected_from_config,
                             run_lint)
from quota_core.domain import dumps

from ui.settings import history_dir
from ui.story import cluster_settings
from ui.text import code, md

__all__ = ["lint_report", "render_report", "fix_links"]
_TITLES = {"error": "Errors", "warning": "Warnings", "info": "Info"}
_ICONS = {"error": ":material/error:", "warning": ":material/warning:",
          "info": ":material/info:"}


@st.cache_data(show_spinner="Reading the usage history…", max_entries=2)
def _usage(history: str, version: float, days: float):
    from quota_core.lint.history_files import read_usage

    return read_usage(history, days)


def _version(folder: Path) -> float:
    days = sorted(p for p in folder.glob("date=*"))
    return max((f.stat().st_mtime for f in days[-1].iterdir()), default=0.0) if days else 0.0


def lint_report(ctx, secrets: dict) -> tuple[LintReport, LintInput, str | None]:
    """Lint the page's quota set; the third value says why the history was not read."""
    from quota_core.errors import QuotaError
    from quota_core.lint import LintOptions

    options = LintOptions()
    usage = source = problem = None
    chosen = getattr(ctx, "cluster", None)  # a fleet's cluster reads its own history
    from ui.history import shares_console_history

    history = (Path(chosen.history_dir) if chosen is not None and chosen.history_dir
               else history_dir(dict(os.environ), secrets)
               if shares_console_history(chosen, getattr(ctx, "fleet", None)) else None)
    if history is not None:
        try:
            usage = _usage(str(history), _version(history / "usage"),
                           max(options.stale_days, options.chronic_days))
            source = str(history)
        except QuotaError as exc:
            problem = str(exc)
    inp = LintInput(ctx.snapshot.quotas, ctx.spec.label, cluster_settings(ctx.backend),
                    protected_from_config(dict(os.environ), secrets), usage, source, options)
    return run_lint(inp), inp, problem


def fix_links(fix_quotas) -> dict[str, dict[str, str]]:
    """Where a fix opens, as page-link query parameters: Plan with the fragment in its paste
    box (``?fix=`` YAML), and for a fix of one entry Edit with the entity and its values
    (``?entity=…&fix=`` the entry as JSON). Links, not a switch from a button, so the page
    opens as a click in the menu does: the sidebar keeps what was typed there."""
    from quota_core.domain import to_document

    doc = to_document(fix_quotas)
    links = {"pages/plan.py": {"fix": dumps(fix_quotas, "yaml")}}
    if len(fix_quotas) == 1:
        entity = next(iter(fix_quotas))
        links["pages/edit.py"] = {"entity": entity_to_json(entity),
                                  "fix": json.dumps(doc["entries"][0], ensure_ascii=False,
                                                    separators=(",", ":"))}
    return links


def _finding(i: int, f, can_edit: bool) -> None:
    with st.container(border=True):
        where = "the brokers" if f.entity is None else code(f.entity.display())
        st.markdown(f"**{f.rule}** · {where}" + (f" · {code(f.key)}" if f.key else ""))
        st.markdown(md(f.evidence))
        if not f.fix_quotas:
            return
        cols = st.columns([1, 1, 4])
        if can_edit:
            for col, (target, query) in zip(cols, fix_links(f.fix_quotas).items()):
                edit = target == "pages/edit.py"
                col.page_link(target, label="Open in Edit" if edit else "Open in Plan",
                              icon=":material/edit:" if edit else ":material/difference:",
                              query_params=query)
        with cols[2].expander("The fix (a desired-file fragment)"):
            st.code(json.dumps(f.fix, ensure_ascii=False, indent=2), language="json")


def render_report(report: LintReport, can_edit: bool, history_problem: str | None) -> None:
    counts = report.counts()
    c = st.columns(len(SEVERITIES))
    for col, severity in zip(c, SEVERITIES):
        col.metric(_TITLES[severity], counts.get(severity, 0))
    if history_problem:
        st.warning(md(f"The usage history could not be read: {history_problem}"),
                   icon=":material/history_toggle_off:")
    if not report.findings:
        # Information, never a green all-clear: the rules see only what they read (issue 27).
        st.info("No findings: nothing here will hurt a client, as far as these rules see.",
                   icon=":material/health_and_safety:")
    for severity in SEVERITIES:
        mine = [f for f in report.findings if f.severity == severity]
        if not mine:
            continue
        st.subheader(f"{_TITLES[severity]} ({len(mine)})")
        for f in mine:
            _finding(report.findings.index(f), f, can_edit)
    if not can_edit and report.findings:
        st.caption("Editing is off here: apply a fix with `kafka-client-quotas plan FILE` "
                   "(the fragment is a desired file).")
    with st.expander("Which rules ran, on what data", expanded=not report.findings):
        ran, skipped = dict(report.ran), dict(report.skipped)
        st.dataframe([{"rule": r.id, "severity": r.severity,
                       "ran": "ran" if r.id in ran else "not run",
                       "on what / why not": ran.get(r.id) or skipped.get(r.id),
                       "needs": NEEDS[r.needs]} for r in RULES], hide_index=True,
                     key="he_rules")
