"""Resolve tells one story (issue 15, point 2), in the real browser: the issue's
contradiction case on a sandbox with the demo quota set and a real metrics endpoint (a tiny
``http.server`` on 127.0.0.1 serving the JMX exporter's text).

checkout-api has its own 8 MiB/s entry (level 1) and runs at 11 % of it; alice's other client
ids (batch-export, which the brokers also report in its own fetch bucket) share {user=alice}
2 MiB/s (level 3), which is throttled. The page must say checkout-api is not throttled, label
{user=alice} as another bucket checkout-api is not in, name batch-export, never say that
checkout-api waits, and never say {user=alice} "never applies to alice".
"""
from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from localkafka.demo import demo_quotas
from quota_core.backends.sandbox import SandboxBackend
from tests.pages.test_app_live import _line
from tests.browser.test_browser import expect, page, serve_app, settle, shot  # noqa: F401

pytestmark = pytest.mark.browser
MiB = 1024 * 1024

BODY = "\n".join([
    _line("kafka_quota_byte_rate", "alice", "checkout-api", 0.11 * 8 * MiB),
    _line("kafka_quota_throttle_time_ms", "alice", "checkout-api", 0.0),
    _line("kafka_quota_byte_rate", "alice", None, 2.4 * MiB),
    _line("kafka_quota_throttle_time_ms", "alice", None, 180.0),
]) + "\n" + "\n".join(
    # batch-export also consumes: {user=alice, client-id=<default>} (level 2) gives it a
    # fetch bucket of its own, so the brokers' metrics name it.
    line.replace('quota_type="produce"', 'quota_type="fetch"') for line in (
        _line("kafka_quota_byte_rate", "alice", "batch-export", 1.0 * MiB),
        _line("kafka_quota_throttle_time_ms", "alice", "batch-export", 0.0))) + "\n"


class _Metrics(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = BODY.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def metrics_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_resolve_tells_one_story_for_a_client_beside_a_throttled_shared_bucket(
        page, metrics_url, tmp_path):  # noqa: F811
    store = tmp_path / "quotas.sqlite"
    with SandboxBackend(store) as backend:
        backend.replace_all(demo_quotas())
    app = serve_app({"QUOTA_SANDBOX": str(store), "QUOTA_METRICS": f"b1={metrics_url}",
                     "QUOTA_LIVE_EVERY": "1"}, tmp_path)
    url = next(app)
    try:
        page.goto(url + "/resolve?user=alice&client_id=checkout-api")
        main = page.get_by_test_id("stMain")
        expect(main.get_by_role("heading", name="Resolve & explain")).to_be_visible(timeout=60_000)
        me = "Client id 'checkout-api' of user 'alice'"
        expect(main.get_by_text(f"{me} is not throttled on producer_byte_rate",
                                exact=False)).to_be_visible(timeout=30_000)
        settle(page)
        text = main.inner_text()
        # checkout-api: not throttled, at 11 % of its own bucket.
        assert re.search(re.escape(me) + r" is not throttled on producer_byte_rate: its bucket "
                         r"\{user=alice, client-id=checkout-api\} runs at [\d.]+ KiB/s of "
                         r"8 MiB/s \(11%\) on b1", text), text
        # {user=alice}: another bucket, throttled, that checkout-api is not in; batch-export
        # named among its client ids.
        [other] = [s for s in text.splitlines()
                   if "another bucket, {user=alice}" in s and "producer_byte_rate" in s]
        assert "it is throttled" in other and "'batch-export'" in other, other
        assert f"{me} is not in it for producer_byte_rate" in other, other
        # No sentence says checkout-api waits: every "waits" is about another bucket.
        for line in text.splitlines():
            if "waits" in line:
                assert "another bucket" in line and "checkout-api' of user 'alice' is not in" \
                    in line, line
        # Set back: {user=alice} does not apply to checkout-api, and still to the others.
        assert not re.search(r"\{user=alice\} 2 MiB/s[^\n]*never applies to alice", text), text
        assert "{user=alice} 2 MiB/s does not apply to client id 'checkout-api' of alice" in text
        # The keys without traffic in one sentence, not one green box each; the own bucket's
        # figures once (no second sentence repeating them).
        assert text.count(f"{me} is not throttled") == 1, text
        assert re.search(r"No broker reports traffic of client id 'checkout-api' of user "
                         r"'alice' on consumer_byte_rate .*controller_mutation_rate", text), text
        assert "over the last 0 min" not in text
        # "In plain words": who shares and what to change sit under their key's bullet (they
        # were a run of un-keyed "It has this allowance to itself" lines after the list).
        expect(main.locator(".qc-key-story")).to_have_count(4)
        # The whole page in one picture: Streamlit's main area scrolls inside the viewport.
        page.set_viewport_size({"width": 1500, "height": 3800})
        expect(main.locator(".js-plotly-plot").first).to_be_visible()
        settle(page)
        shot(page, "resolve-one-story.png")
    finally:
        app.close()
