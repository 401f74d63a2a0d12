"""Issue 32 finding 6, names are text everywhere: Resolve's notes turned ``*`` and backticks in
stored names into italics and code (``{user=**PWNBOLD**}`` showed as ``{user=PWNBOLD*}``).

Every page is rendered in AppTest on a sandbox whose names hold ``*``, ``_``, backticks,
``~``, ``$``, ``[``, ``|`` and ``<`` (with a live metrics endpoint reporting their buckets,
an audit record and a plan naming them). Then every body the page gives Streamlit's markdown
(``st.markdown``, captions, alerts, headings, widget and link labels) is rendered with
markdown-it-py (CommonMark + GFM strikethrough and tables, as Streamlit's renderer reads
them), and every ``st.html`` body with the standard HTML parser: wherever a page quotes a
name, the text a person reads holds the name exactly as stored. ``$`` (KaTeX in Streamlit,
unknown to markdown-it) must be escaped outside code spans.

The browser check of the same (Chromium, no link or image from a name) is
tests/browser/test_browser_hostile.py.
"""
from __future__ import annotations

import json
import re
import threading
from html import unescape
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest
from markdown_it import MarkdownIt
from streamlit.testing.v1.element_tree import (AlertBase, Block, Expander, HeadingBase, Html,
                                               Markdown, PageLink, Widget)

from quota_core import Alteration, Entity
from quota_core.backends.sandbox import SandboxBackend
from quota_core.changes.audit import AuditLog
from quota_core.changes.workflow import apply_change
from localkafka.demo import demo_quotas
from tests.app_steps import run_app
from tests.pages.test_app import MiB, env  # noqa: F401  (fixture)
from ui.text import WORD_JOINER

#: One name with every character the issue lists, and one that is a code span as a whole.
NAMES = ("**PWN**_i_`c`~~s~~$x$[l](http://e.test)|t|<b>x</b>", "`code`")
P = "producer_byte_rate"
_MD = MarkdownIt("commonmark").enable(["strikethrough", "table"])


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def html_text(html: str) -> str:
    """What a browser shows of ``html``: its text, tags dropped, entities read."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    return "".join(parser.parts).replace(WORD_JOINER, "")


def markdown_text(body: str) -> str:
    """What Streamlit shows of a markdown ``body``: rendered, then its text."""
    return html_text(_MD.render(body))


_CODE_SPAN = re.compile(r"(`+)(?!`).*?(?<!`)\1(?!`)", re.S)


def bodies(at) -> list[tuple[str, str]]:
    """Every (kind, body) the page hands to markdown or to st.html, in the whole tree."""
    out = []

    def walk(node):
        if isinstance(node, Html):
            out.append(("html", node.value))
        elif isinstance(node, (Markdown, AlertBase, HeadingBase)):
            out.append(("markdown", node.value))
        elif isinstance(node, PageLink):
            out.append(("markdown", node.value))
        elif isinstance(node, (Widget, Expander)) and getattr(node, "label", None):
            out.append(("markdown", node.label))
        if isinstance(node, Block):
            for child in node.children.values():
                walk(child)

    walk(at._tree)
    return out


def assert_names_shown_raw(at, where: str) -> int:
    """Each body that quotes a name shows it exactly; returns how many bodies quote one."""
    quoted = 0
    for kind, body in bodies(at):
        if kind == "html":
            shown = html_text(body)
            quotes = [n for n in NAMES if n in unescape(body) or n in shown]
        else:
            shown = markdown_text(body)
            raw = body.replace("\\", "").replace(WORD_JOINER, "")
            quotes = [n for n in NAMES if n.replace("\\", "") in raw]
            if quotes and any("$" in n for n in quotes):
                rest = _CODE_SPAN.sub("", body)
                assert not re.search(r"(?<!\\)\$", rest), (where, body)
        for name in quotes:
            assert name in shown, (where, kind, name, body, shown)
        quoted += bool(quotes)
    return quoted


def _metrics_body() -> bytes:
    """Each name's user bucket throttled at 99 % of its 2 MiB/s, and its pair bucket with
    client id app at a quarter of 1 MiB/s (user tags URL-encoded, as Kafka's Sanitizer does)."""
    def label(value: str) -> str:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    lines = []
    for name in NAMES:
        user = label(quote(name, safe=""))
        lines += [f'kafka_quota_byte_rate{{quota_type="produce",user="{user}"}} {1.98 * MiB}',
                  f'kafka_quota_throttle_time_ms{{quota_type="produce",user="{user}"}} 120.0',
                  f'kafka_quota_byte_rate{{quota_type="produce",user="{user}",'
                  f'client_id="app"}} {0.25 * MiB}']
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture
def hostile(env, tmp_path):
    quotas = demo_quotas()
    for name in NAMES:
        quotas[Entity.of(user=name)] = {P: 2 * MiB}
        quotas[Entity.of(user=name, client_id="app")] = {P: 1 * MiB}
        quotas[Entity.of(client_id=name)] = {P: 512 * 1024}  # dead: {user=<default>} first
    store = tmp_path / "hostile.sqlite"
    with SandboxBackend(store) as backend:
        backend.replace_all(quotas)
        audit = AuditLog(tmp_path / "audit.jsonl")
        entity = Entity.of(user=NAMES[0])
        apply_change(backend, Alteration.of(entity, {P: 3 * MiB}), quotas[entity],
                     actor=NAMES[1], cluster={"kind": "sandbox"}, audit=audit)
    body = _metrics_body()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env.setenv("QUOTA_SANDBOX", str(store))
    env.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    env.setenv("QUOTA_METRICS", f"b1=http://127.0.0.1:{server.server_address[1]}/metrics")
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    try:
        yield store
    finally:
        server.shutdown()
        server.server_close()


def _rerun_until(at, done, tries: int = 20):
    import time

    for _ in range(tries):
        if done(at):
            return at
        time.sleep(0.25)
        at.run()
    return at


def test_every_page_shows_stored_names_as_written(hostile):
    quoted = {}
    # Resolve: the answer, the plain words, the set-back notes ({user=N} is set back for
    # (N, app) by its own entry), the live panel (the user bucket throttled beside it).
    for name in NAMES:
        at = run_app("pages/resolve.py", query={"user": name, "client_id": "app"})
        at = _rerun_until(at, lambda a: any("qc-sentence" in h.value for h in a.html))
        notes = [h.value for h in at.html if 'class="qc-notes"' in h.value]
        assert notes and name in html_text(notes[0]), notes
        quoted[f"resolve {name}"] = assert_names_shown_raw(at, f"resolve {name}")
    # Edit, on the hostile entity, with a change typed and previewed.
    at = run_app("pages/edit.py", operator="jdoe")
    at.text_input(key="ed_user").input(NAMES[0]).run()
    at.text_input(key="ed_val_producer_byte_rate").input("4MiB").run()
    at.button(key="ed_preview_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    quoted["edit"] = assert_names_shown_raw(at, "edit")
    # Plan: a file naming them.
    at = run_app("pages/plan.py", operator="jdoe")
    at.text_area(key="pl_text").input(json.dumps({"format": "quota-console/1", "entries": [
        {"entity": {"user": n}, "quotas": {P: MiB}} for n in NAMES]})).run()
    at.button(key="pl_plan_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    quoted["plan"] = assert_names_shown_raw(at, "plan")
    # Throttled now, Browse, Quota health, History, Audit.
    for page in ("pages/throttled.py", "pages/browse.py", "pages/health.py",
                 "pages/history.py", "pages/audit.py"):
        at = run_app(page, operator=NAMES[1])
        if page.endswith("throttled.py"):
            at = _rerun_until(at, lambda a: any(d.value is not None for d in a.dataframe))
        assert not at.exception, [e.value for e in at.exception]
        quoted[page] = assert_names_shown_raw(at, page)
    # The check looked at sentences that quote the names, where the pages have them.
    assert all(quoted[f"resolve {n}"] >= 3 for n in NAMES), quoted
    assert quoted["edit"] and quoted["pages/health.py"], quoted


@pytest.mark.parametrize("name", NAMES)
def test_the_check_catches_a_name_left_as_markup(name):
    """The checker itself: a name put in markdown or in a note unescaped is caught."""
    from quota_core import resolve
    from quota_core.domain.shadows import shadow_notes
    from ui.story import note_html
    from ui.text import code, md

    assert name not in markdown_text(f"user {name} is throttled")
    assert name in markdown_text(f"user {md(name)} is throttled")
    assert name in markdown_text(f"entry {code(name)}")
    quotas = {Entity.of(user=name): {P: 2 * MiB}, Entity.of(user=name, client_id="app"): {P: MiB}}
    [note] = shadow_notes(resolve(quotas, name, "app"))
    # Read back as markup (what Resolve did before), the name is lost; from the parts it holds.
    from ui.text import md_note
    assert name not in markdown_text(md_note(note)) or name == "`code`"
    from quota_core.domain.shadows import shadow_note_parts
    [parts] = shadow_note_parts(resolve(quotas, name, "app"))
    assert f"{{user={name}}}" in html_text(note_html(parts))
