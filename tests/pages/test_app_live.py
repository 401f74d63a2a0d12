"""Throttled now in AppTest against a real metrics endpoint: a tiny ``http.server`` on
127.0.0.1 that serves the JMX exporter's text (the form of tests/fixtures/metrics/ours.txt),
then stops answering. Issue 15: blind is never green; counts that add up; the bar full at
100 %; the "Resolve →" link."""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.app_steps import run_app, texts
from tests.pages.test_app import MiB, env, sandbox  # noqa: F401  (fixtures)

PAGE = "pages/throttled.py"


def _line(metric: str, user: str | None, client_id: str | None, value: float) -> str:
    tags = {"quota_type": "produce"}
    if user is not None:
        tags["user"] = user
    if client_id is not None:
        tags["client_id"] = client_id
    return metric + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(tags.items())) + "} " + \
        repr(value)


#: Three buckets at 93-105 % of their quota (the demo quota set), two of them throttled:
#: {user=alice, client-id=checkout-api} 8 MiB/s (level 1), {user=alice} 2 MiB/s (level 3,
#: alice's other client ids), {user=<default>} 1 MiB/s for ANONYMOUS (level 6).
BODY = "\n".join([
    _line("kafka_quota_byte_rate", "alice", "checkout-api", 8.4 * MiB),
    _line("kafka_quota_throttle_time_ms", "alice", "checkout-api", 450.0),
    _line("kafka_quota_byte_rate", "alice", None, 2.0 * MiB),
    _line("kafka_quota_throttle_time_ms", "alice", None, 80.0),
    _line("kafka_quota_byte_rate", "ANONYMOUS", None, 0.95 * MiB),
    _line("kafka_quota_throttle_time_ms", "ANONYMOUS", None, float("nan")),
]) + "\n"


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
def endpoint(env):
    """A real metrics endpoint on 127.0.0.1; ``stop()`` makes it refuse connections."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    env.setenv("QUOTA_METRICS", f"b1=http://127.0.0.1:{port}/metrics")
    env.setenv("QUOTA_LIVE_EVERY", "0.5")

    class Handle:
        address = f"127.0.0.1:{port}"

        @staticmethod
        def stop():
            server.shutdown()
            server.server_close()

    try:
        yield Handle
    finally:
        try:
            server.shutdown()
            server.server_close()
        except OSError:
            pass


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _wait_for(at, what, seconds=20.0):
    deadline = time.monotonic() + seconds
    while True:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        if what(at):
            return
        assert time.monotonic() < deadline, (texts(at.error), metrics(at))
        time.sleep(0.5)


def test_counts_partition_the_rows_shown_and_the_bar_is_full_at_100(sandbox, endpoint):
    at = run_app(PAGE)
    _wait_for(at, lambda a: a.dataframe)
    shown = at.dataframe[0].value
    assert len(shown) == 3
    counts = metrics(at)
    # Before: "at or above 80% of quota: 0" beside three buckets at 93-105 % (the throttled
    # ones were subtracted). Now the two counts partition the rows shown.
    assert counts["throttled now"] == "2"
    assert counts["not throttled, at or above 80% of quota"] == "1"
    assert int(counts["throttled now"]) + \
        int(counts["not throttled, at or above 80% of quota"]) == len(shown)
    assert not at.main.success
    config = json.loads(at.dataframe[0].proto.columns)
    assert config["use"]["type_config"]["max_value"] == 100  # full at 100 %, not at 200 %
    # The resolve link follows the names, so it is in view on a 1,400 px screen, and it
    # opens Resolve by its name.
    assert list(config) and at.dataframe[0].proto.column_order[:5] == \
        ["broker", "type", "user", "client id", "resolve"]
    assert "./resolve?user=alice&client_id=checkout-api" in list(shown["resolve"])


def test_an_endpoint_that_stops_answering_is_never_all_clear(sandbox, endpoint):
    at = run_app(PAGE)
    _wait_for(at, lambda a: a.dataframe)
    endpoint.stop()
    _wait_for(at, lambda a: a.error)
    (error,) = [e for e in texts(at.error) if endpoint.address in e]
    assert re.search(r"^Cannot read the metrics of 127.0.0.1:\d+, last successful scrape at "
                     r"\d\d:\d\d:\d\d \(\d+ s ago\)\. Cannot reach", error), error
    assert set(metrics(at).values()) == {"unknown"}
    assert not at.main.success
    assert any("Counts are unknown while " + endpoint.address in w for w in texts(at.warning))
    assert not any(c.value.startswith("Metrics as of") for c in at.caption)


def test_an_endpoint_that_never_answered(sandbox, endpoint):
    # Today's demo case: the endpoint refuses connections. Before: "Metrics as of … (2 s
    # ago)", counts 0/0/0 and a green "No bucket is throttled or near its quota".
    endpoint.stop()
    at = run_app(PAGE)
    _wait_for(at, lambda a: a.metric)
    assert any(endpoint.address in e and "no successful scrape since the console started" in e
               for e in texts(at.error)), texts(at.error)
    assert set(metrics(at).values()) == {"unknown"}
    assert not at.main.success
    assert not any("No bucket is throttled" in t for t in texts(at.main.success))


def test_cli_throttled_with_one_endpoint_down_exits_1(tmp_path, endpoint):
    # The CLI beside the page (issue 15, point 3): one endpoint down is a failure, exit 1,
    # one line naming it, and the other endpoint's buckets still printed.
    import socket

    from localkafka.demo import demo_quotas
    from tests.cli_steps import run, sandbox_with

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    store = sandbox_with(tmp_path / "q.sqlite", demo_quotas())
    code, out, err = run("--sandbox", store, "--throttled", "--output", "json", "--metrics",
                         f"b1=http://{endpoint.address}/metrics,"
                         f"down=http://127.0.0.1:{closed}/metrics")
    assert code == 1, err
    assert f"127.0.0.1:{closed}" in err and len(err.strip().splitlines()) == 1, err
    rows = json.loads(out)
    assert {(r["bucket"].get("user"), r["bucket"].get("client-id")) for r in rows} >= {
        ("alice", "checkout-api")}
    code, out, err = run("--sandbox", store, "--throttled", "--metrics",
                         f"b1=http://{endpoint.address}/metrics")
    assert code == 0, err  # all endpoints answer: done


def test_a_bucket_whose_quota_changed_in_the_last_window_is_marked(sandbox, endpoint):
    # Issue 15, point 4: raise {user=alice} from the Edit page, then Throttled now marks its
    # bucket (still throttled on the traffic the broker's window holds) and says why.
    from tests.pages.test_app import open_edit

    at = open_edit("alice")
    at.text_input(key="ed_val_producer_byte_rate").input("4MiB").run()
    at.button(key="ed_preview_btn").click().run()
    at.checkbox(key="ed_confirm").check().run()
    at.button(key="ed_apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (settle,) = [t for t in texts(at.info) if t.startswith("Throttling should end")]
    # The sandbox has no brokers: Kafka's window (11 x 1 s), plus the 80 ms the broker gives
    # {user=alice} now.
    assert re.match(r"Throttling should end within about 11 s: .*quota window 11 × 1 s.*"
                    r"plus the 0\.1 s delay", settle), settle
    page = run_app(PAGE)
    _wait_for(page, lambda a: a.dataframe)
    shown = page.dataframe[0].value
    marked = dict(zip(zip(shown["user"], shown["client id"]), shown["quota changed"]))
    # Only {user=alice} (level 3) changed; checkout-api's own entry (level 1) did not.
    assert re.fullmatch(r"\d+ s ago", marked[("alice", "")]), marked
    assert marked[("alice", "checkout-api")] == "" and marked[("ANONYMOUS", "")] == ""
    assert any("1 bucket had its quota changed within the last rate window" in t
               for t in texts(page.info))
