"""Names and URL parameters shown as text (issue 16, point 6), the CSV formula rule, the Edit
form's words and the ladder's quoted names (issue 15): the plain functions and the pages."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from quota_core import Alteration, Entity, alteration_problems, diff_alteration, parse_quota_value
from ui.browse import export_csv, quota_frame
from quota_core.domain.csvsafe import spreadsheet_cell
from quota_core.errors import QuotaError
from quota_core.backends.sandbox import SandboxBackend
from tests.app_steps import run_app, texts
from tests.pages.test_app import env, ladder, sandbox  # noqa: F401  (fixtures)
from ui.form_words import form_message
from ui.text import WORD_JOINER, code, md, unmd

HOSTILE = [
    "nobody ![t](http://127.0.0.1:8799/beacon) [Re-authenticate](http://127.0.0.1:8799/phish)",
    "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "**bold** _it_ ~~s~~ `c`",
    "# heading", "1. list", "- item", "> quote", "| a | b |", "$x^2$", ":material/home:",
    ":red[red]", "www.example.com", "mail@example.com", "&lt;escaped&amp;", "back\\slash\\*",
    "=HYPERLINK(\"http://x\")", "CN=etl,OU=data", "<default>", "``two`` `one`", "`", " ",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_md_shows_the_text_and_nothing_else(text):
    shown = md(text)
    assert unmd(shown) == text
    # No markup can start: every special character is escaped, no autolink pattern is whole.
    assert not re.search(r"(?<!\\)[\[\]<>!*_`#|$~&:]", shown.replace(WORD_JOINER, "")
                         .replace("\\\\", "")) or all(
        shown[m.start() - 1] == "\\" for m in re.finditer(r"[\[\]<>!*_`#|$~&]", shown))
    assert "://" not in shown.replace("\\", "") and "www." not in shown.lower().replace("\\", "")


@given(st.text(max_size=40).filter(lambda s: len(s.splitlines()) <= 1 and s.splitlines() == [s]
                                   and WORD_JOINER not in s))
def test_md_round_trips_any_line(text):
    assert unmd(md(text)) == text


@pytest.mark.parametrize("text", ["{user=alice}", "a`b", "``x``", "`edge", "http://x/y",
                                  ":material/home:"])
def test_code_spans_hold_any_name(text):
    span = code(text)
    fence = re.match(r"`+", span).group(0)
    assert span.endswith(fence) and fence * 1 not in span[len(fence):-len(fence)].strip()
    assert span[len(fence):-len(fence)].strip(" ").replace(WORD_JOINER, "") == text
    assert ":material/" not in span


def test_spreadsheet_cells():
    for dangerous in ("=1+1", "+cmd|calc!A1", "-2+3", "@SUM(1)", "\tx", "\rx"):
        assert spreadsheet_cell(dangerous) == "'" + dangerous
    for safe in ("alice", "", "{user=alice}", "1048576", "a=b", 5):
        assert spreadsheet_cell(safe) == safe


def test_browse_says_so_by_the_export_button(sandbox):
    at = run_app("pages/browse.py")
    assert any("get a leading ' so that a spreadsheet shows them as text" in c
               for c in texts(at.caption))


def test_browse_csv_export_neutralises_formulas():
    names = ['=HYPERLINK("http://x")', "+cmd|calc!A1", "@SUM(1)", "-2+3", "\tx", "plain"]
    quotas = {Entity.of(user=n): {"producer_byte_rate": 1024.0} for n in names}
    rows = list(csv.DictReader(io.StringIO(export_csv(quota_frame(quotas)))))
    users = sorted(r["user"] for r in rows)
    assert users == sorted(["'" + n for n in names[:-1]] + ["plain"])
    assert all(not r["user"].startswith(("=", "+", "-", "@", "\t", "\r")) for r in rows)


# -- the Edit form's words ------------------------------------------------------------------
def _form_errors(key: str, text: str) -> list[str]:
    try:
        value = parse_quota_value(key, text)
    except QuotaError as exc:
        return [form_message(key, str(exc))]
    change = diff_alteration(Entity.of(user="alice"), {}, {key: value})
    return [form_message(key, p.message) for p in alteration_problems(change)]


@pytest.mark.parametrize("key, text, said", [
    ("producer_byte_rate", "-5", "To make it unlimited, clear the field."),
    ("request_percentage", "inf", "To make it unlimited, clear the field."),
    ("producer_byte_rate", "1e400", "the most a broker stores for producer_byte_rate is "
                                    "9,223,372,036,854,775,807 bytes/s"),
    ("request_percentage", "1e400", "the largest number a broker stores is about 1.8e308"),
])
def test_form_messages_in_form_words(key, text, said):
    (message,) = _form_errors(key, text)
    assert said in message
    assert "--delete" not in message and "LONG" not in message and "INT" not in message
    assert "double" not in message


def test_the_cli_keeps_its_words():
    (message,) = [p.message for p in alteration_problems(Alteration.of(
        Entity.of(user="alice"), {"producer_byte_rate": -5.0}))]
    assert "(--delete producer_byte_rate)" in message  # the CLI's message is unchanged


def test_edit_form_error_for_minus_5_and_1e400(sandbox):
    from tests.pages.test_app import open_edit

    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("-5").run()
    at.text_input(key="ed_val_consumer_byte_rate").input("1e400").run()
    errors = " ".join(texts(at.error))
    assert "-5 is not allowed" in errors and "clear the field" in errors
    assert "--delete" not in errors and "LONG" not in errors, errors


# -- the ladder quotes names that could misread ------------------------------------------------
def test_ladder_quotes_names_that_could_misread(sandbox):
    at = run_app(query={"user": "CN=etl,OU=data", "client_id": "etl-loader"})
    html = ladder(at)
    assert 'user=<span class="qc-name">&quot;CN=etl,OU=data&quot;</span>' in html
    assert 'client-id=<span class="qc-name">etl-loader</span>' in html  # plain: as is


# -- names and URL parameters through the pages (AppTest; the browser: test_browser_hostile) --
PAYLOAD = "nobody ![t](http://127.0.0.1:8799/beacon) [Re-authenticate](http://127.0.0.1:8799/x)"


def _markup(at) -> list[str]:
    """Markdown sources that would make an image or a link (an unescaped ``](`` or a bare
    URL), anywhere on the page, the sidebar included."""
    bodies = [e.value for e in list(at.markdown) + list(at.caption) + list(at.error)
              + list(at.warning) + list(at.info) + list(at.success)]
    bodies = [re.sub(r"(`+).*?\1", "", b) for b in bodies]  # code spans make no markup
    return [b for b in bodies if re.search(r"(?<!\\)\]\(|https?://", b)]


def test_resolve_query_is_shown_as_text(sandbox):
    at = run_app(query={"user": PAYLOAD, "client_id": "x"})
    assert not _markup(at)
    assert any(PAYLOAD in t for t in texts(at.markdown)), texts(at.markdown)


def test_browse_and_edit_names_are_shown_as_text(sandbox):
    with SandboxBackend(sandbox) as backend:
        assert backend.alter([Alteration.of(Entity.of(user=PAYLOAD),
                                            {"producer_byte_rate": 1024.0})]).ok
    at = run_app("pages/browse.py", query={"user_mode": "exact", "user": PAYLOAD})
    at.dataframe[0]  # the row is there
    assert not _markup(at)
    from tests.pages.test_app import open_edit

    at = open_edit(PAYLOAD)
    assert not _markup(at)
    assert any(PAYLOAD in t for t in texts(at.markdown))


# -- History's sizing table (the page itself: tests/pages/test_history_page.py, on Spark's tables) --
def test_sizing_rows_round_up_in_page_units_and_now_is_the_clusters():
    import pandas as pd

    from quota_core.domain.entities import entity_to_json
    from ui.history import sizing_rows

    alice, gone = Entity.of(user="alice"), Entity.of(user="gone")
    sizing = pd.DataFrame({
        "source": [entity_to_json(alice), entity_to_json(alice), entity_to_json(gone)],
        "key": ["controller_mutation_rate", "producer_byte_rate", "producer_byte_rate"],
        "current_quota": [5.0, 1e6, 1e6], "suggested_quota": [9.099977605729402, 1500000.3,
                                                             2.0 * 1024 * 1024],
        "clients": [2, 3, 1]})
    quotas = {alice: {"controller_mutation_rate": 12.0, "producer_byte_rate": 2 * 1024 * 1024}}
    rows = sizing_rows(sizing, quotas)
    assert [(r["now"], r["suggested"]) for r in rows] == [
        ("12 mutations/s", "9.1 mutations/s"),    # the cluster's 12, not the history's 5
        ("2 MiB/s", "1.44 MiB/s"),                # rounded *up*, in MiB/s (not 1.5 MB/s)
        ("not set", "2 MiB/s")]
    assert [r["now"] for r in sizing_rows(sizing, None)] == ["not connected"] * 3


# -- the stale banner's words (the watch itself: test_browser_hostile's broker stop) ----------
def test_stale_notice_says_since_when():
    from ui.registry import Health, Snapshot, stale_notice

    snap = Snapshot({}, None, None, loaded_at=1000.0, took_s=0.1)
    assert stale_notice(snap, Health(last_ok=1010.0)) is None  # it answers: no banner
    assert stale_notice(None, Health(1010.0, 1012.0, "x")) is None  # nothing shown
    notice = stale_notice(snap, Health(1010.0, 1012.0, "Cannot reach 127.0.0.1:9"), now=1030.0)
    assert "has not answered since" in notice and "(20 s ago)" in notice
    assert "quota set as read at" in notice and "(30 s ago): it may be stale" in notice
    assert notice.endswith("(Cannot reach 127.0.0.1:9)")


def test_audit_csv_export_neutralises_formulas_too(sandbox):
    from quota_core.changes.audit import records_csv
    from quota_core.domain.csvsafe import spreadsheet_csv
    from tests.changes.test_audit import _record

    records = [_record(actor='=HYPERLINK("http://x")'), _record(actor="@SUM(1)")]
    rows = list(csv.DictReader(io.StringIO(spreadsheet_csv(records_csv(records)))))
    assert [r["actor"] for r in rows] == ['\'=HYPERLINK("http://x")', "'@SUM(1)"]
    # a delete op ("-consumer_byte_rate" last) is not at a cell's start: left as it is
    assert rows[0]["ops"] == "producer_byte_rate=2048, -consumer_byte_rate"
    import os

    from quota_core.changes.audit import AuditLog

    log = AuditLog(Path(os.environ["QUOTA_AUDIT_LOG"]))
    for record in records:
        log.append(record)
    at = run_app("pages/audit.py")
    assert [b.label for b in at.get("download_button")][0] == "Export CSV"
    assert any("get a leading '" in c for c in texts(at.caption))


def test_md_note_keeps_the_cores_code_and_emphasis_only():
    from ui.text import md_note

    note = ("`{client-id=mobile-gateway}` 512 KiB/s never applies to dave: `{user=<default>}` "
            "at level 6 sets producer_byte_rate first (1 MiB/s), so dave gets *more* than "
            "this entry's cap.")
    shown = md_note(note)
    assert shown.startswith("`{client-id=mobile-gateway}` 512 KiB/s never applies to dave")
    assert "*more*" in shown and unmd(shown) == note
    hostile = f"`{{user={PAYLOAD}}}` never applies to {PAYLOAD}: x"
    assert not re.search(r"(?<!\\)\]\(", re.sub(r"(`+).*?\1", "", md_note(hostile)))
