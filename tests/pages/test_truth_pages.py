"""Issue 27, "no all-clear while blind": every page rendered (AppTest) while a metrics endpoint
is dead, on a sandbox (here, fast) and on the 3-broker cluster with a stopped broker
(test_truth_cluster.py). No element of the main area reads as an all-clear (no st.success, no
green sentence box, no "not throttled there"), and every broker appears once, by node id.

The sandbox case: two real endpoints on 127.0.0.1 that export their node ids (1 and 2);
broker 2's answers once, then stops. Before: Resolve said in a green box "No broker reports
traffic of client id 'batch-export' … it is not throttled there", and its grid had a column
for "broker 127.0.0.1:PORT" beside the brokers read.
"""
from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.app_steps import run_app, texts
from tests.pages.test_app import MiB, env, sandbox  # noqa: F401  (fixtures)

#: The pages an operator opens, with the query Resolve is asked (clients with and without
#: traffic on the broker read).
PAGES = [("pages/resolve.py", {"user": "alice", "client_id": "batch-export"}),
         ("pages/resolve.py", {"user": "alice", "client_id": "checkout-api"}),
         ("pages/throttled.py", None), ("pages/browse.py", None), ("pages/history.py", None),
         ("pages/health.py", None), ("pages/edit.py", None), ("pages/plan.py", None),
         ("pages/audit.py", None)]
#: What an all-clear reads as, in any element's text.
ALL_CLEAR = ("it is not throttled there", "No bucket is throttled or near its quota.",
             "so none throttles it")
#: The "ok" tone of a sentence box (ui/story.py): green.
GREEN = "background:#e8f5e9"


def _body(node: str, lines: list[str]) -> bytes:
    return ("\n".join([f'kafka_server_app_info_start_time_ms{{node_id="{node}"}} 1.7e12',
                       *lines]) + "\n").encode()


def serve(body):
    """A metrics endpoint on 127.0.0.1 serving ``body`` (bytes, or a one-item list whose item
    a test replaces to change what it serves)."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            now = body[0] if isinstance(body, list) else body
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(now)))
            self.end_headers()
            self.wfile.write(now)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main_texts(at) -> list[str]:
    """Every text the main area shows: alerts, markdown, captions, HTML blocks, metrics,
    dataframe columns and cells."""
    out = texts(at.main.markdown) + texts(at.main.caption) + [h for h in texts(at.main.html)]
    for kind in ("error", "warning", "info", "success"):
        out += texts(getattr(at.main, kind))
    out += [f"{m.label}: {m.value}" for m in at.main.metric]
    for frame in at.main.dataframe:
        value = frame.value
        data = getattr(value, "data", value)  # a Styler holds its frame in .data
        out += [str(c) for c in data.columns]
        out += [str(v) for v in data.astype(str).to_numpy().ravel()]
    return out


def assert_never_all_clear(at, where: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.main.success, (where, texts(at.main.success))
    shown = main_texts(at)
    for text in shown:
        assert GREEN not in text.replace(" ", ""), (where, text)
        for phrase in ALL_CLEAR:
            assert phrase not in text, (where, phrase, text)


def assert_brokers_once(at, where: str, nodes: dict[str, str]) -> None:
    """``nodes``: node id -> the host:port of its (stopped) endpoint. The address appears only
    as "broker N (host:port)", never as a broker of its own; no grid has a column for it."""
    shown = main_texts(at)
    for node, address in nodes.items():
        for text in shown:
            for m in re.finditer(re.escape(address), text):
                before = text[:m.start()]
                if before.endswith(("http://", "https://")):
                    continue  # the endpoint's URL, in the reason it cannot be read
                assert before.endswith(f"broker {node} ("), (where, text)
    for frame in at.main.dataframe:
        data = getattr(frame.value, "data", frame.value)
        columns = [c for c in map(str, data.columns) if c.startswith("broker ")]
        assert all(re.fullmatch(r"broker \d+", c) for c in columns), (where, columns)
        assert len(columns) == len(set(columns))


@pytest.fixture
def two_brokers(sandbox, env):  # noqa: F811
    """Broker 1 answers (alice's {user=alice} bucket at 40 % of 2 MiB/s); broker 2 answers once
    (so its node id is known), then refuses connections."""
    one = serve(_body("1", ['kafka_server_produce_byte_rate{user="alice"} '
                            f"{0.4 * 2 * MiB}"]))
    two = serve(_body("2", []))
    urls = [f"http://127.0.0.1:{s.server_address[1]}/metrics" for s in (one, two)]
    env.setenv("QUOTA_METRICS", ",".join(urls))
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    try:
        yield one, two
    finally:
        for s in (one, two):
            try:
                s.shutdown()
                s.server_close()
            except OSError:
                pass


def _wait(what, seconds=15.0):
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_no_page_is_green_while_an_endpoint_is_dead_on_a_sandbox(two_brokers):
    one, two = two_brokers
    address = f"127.0.0.1:{two.server_address[1]}"
    run_app("pages/throttled.py")  # starts the live feed
    _wait(lambda: any(f.brokers == ("1", "2") for f in live_frames()))
    two.shutdown()
    two.server_close()
    _wait(lambda: bool(live_frames()) and bool(live_frames()[-1].down))
    for page, query in PAGES:
        at = run_app(page, query=query)
        where = f"{page} {query or ''}"
        assert_never_all_clear(at, where)
        assert_brokers_once(at, where, {"2": address})
        if page == "pages/throttled.py":
            # "The rows below" only when rows are shown (issue 27).
            warned = " ".join(texts(at.main.warning))
            assert "Counts are unknown while" in warned, warned
            assert ("The rows below" in warned) == bool(at.main.dataframe), warned
        if page == "pages/resolve.py":
            # Resolve names broker 2 as not read, and says "unknown", never "not throttled".
            sentences = " ".join(t for t in texts(at.main.html) if "qc-sentence" in t)
            assert "Broker 2 could not be read: whether it is throttled there is unknown." \
                in sentences, sentences
    # Edit's preview at today's rates names the broker it cannot judge.
    from tests.pages.test_app import open_edit

    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("1MiB").run()
    at.button(key="ed_preview_btn").click().run()
    assert_never_all_clear(at, "edit preview")
    assert_brokers_once(at, "edit preview", {"2": address})
    assert any(w.startswith("Broker 2 could not be read: the preview at today's rates")
               for w in texts(at.main.warning)), texts(at.main.warning)
    # bob's traffic would be on broker 2 only: the brokers read report none of it, and the
    # preview still names broker 2 (before, it said nothing about the live figures).
    at = open_edit("bob")
    at.text_input(key="ed_val_producer_byte_rate").input("2MiB").run()
    at.button(key="ed_preview_btn").click().run()
    assert_never_all_clear(at, "edit preview, no traffic read")
    assert any(w.startswith("Broker 2 could not be read: the preview at today's rates")
               for w in texts(at.main.warning)), texts(at.main.warning)


def live_frames():
    """The rounds of the live feed the pages read (the one LiveFeed of this process for the
    configured endpoints)."""
    import os

    from ui.live import _feed

    return _feed(os.environ["QUOTA_METRICS"]).history()


def test_throttled_now_tells_recently_from_now(sandbox, env, monkeypatch):  # noqa: F811
    """Issue 27, point 3, on the page: {user=bob} (1 MiB/s from {user=<default>}) over its
    quota, then at 50 % of it while the broker still reports a 121 ms throttle: "throttled
    recently (ended about N s ago)", counted apart, never "throttled now"."""
    hot = _body("1", [f'kafka_server_produce_byte_rate{{user="bob"}} {1.3 * MiB}',
                      'kafka_server_produce_throttle_time{user="bob"} 300.0'])
    body = [hot]
    server = serve(body)
    monkeypatch.setattr("quota_core.throttling.live.CONFIRM_S", 0.5)  # rounds come every 0.5 s here
    env.setenv("QUOTA_METRICS", f"http://127.0.0.1:{server.server_address[1]}/metrics")
    env.setenv("QUOTA_LIVE_EVERY", "0.5")
    try:
        at = run_app("pages/throttled.py")
        _wait(lambda: any(f.series for f in live_frames()))
        body[0] = _body("1", [f'kafka_server_produce_byte_rate{{user="bob"}} {0.5 * MiB}',
                              'kafka_server_produce_throttle_time{user="bob"} 121.0'])
        _wait(lambda: any(s.value == 0.5 * MiB for s in live_frames()[-1].series))
        at.run()
        # Not yet: a round under 90 % right after one over it could be a dip
        # (quota_core.throttling.live.hold); "recently" once it has stayed under for CONFIRM_S.
        counts = {m.label: m.value for m in at.main.metric}
        assert (counts["throttled now"], counts["throttled recently"]) == ("1", "0"), counts

        def recently():
            at.run()
            counts = {m.label: m.value for m in at.main.metric}
            return (counts["throttled now"], counts["throttled recently"]) == ("0", "1")

        _wait(recently, 10)
        [state] = list(at.main.dataframe[0].value["state"])
        assert re.fullmatch(r"throttled recently \(ended about \d+ s ago\)", state), state
        assert_never_all_clear(at, "throttled now, recently")
    finally:
        server.shutdown()
        server.server_close()


def test_the_grid_total_is_never_a_sum_over_the_brokers_read_alone():
    """Resolve's grid while broker 2 was stopped said "in total: 0% of a thread" beside
    "broker 2: not read": the total is unknown then, or a lower bound."""
    from quota_core.throttling.spreads import spread
    from ui.spread import spread_grid

    class Figure:
        def __init__(self, broker, rate):
            self.broker, self.rate, self.quota = broker, rate, 2 * MiB
            self.throttle_ms, self.throttled = None, False

    none_read = spread("producer_byte_rate", [], ["1", "3"], quota=2 * MiB, unread=["2"])
    some_read = spread("producer_byte_rate", [Figure("1", MiB)], ["1", "3"], unread=["2"])
    all_read = spread("producer_byte_rate", [Figure("1", MiB)], ["1", "2", "3"])
    grid = spread_grid([("a", none_read), ("b", some_read), ("c", all_read)])
    assert list(grid["in total"]) == ["unknown", "at least 1 MiB/s", "1 MiB/s"]
    assert list(grid["broker 2"]) == ["not read", "not read", "no traffic"]
