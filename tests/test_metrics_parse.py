"""quota_core.telemetry reads client-quota series from Prometheus text, whichever rule set made it.

The fixtures under ``tests/fixtures/metrics`` are real scrapes of a localkafka broker (Kafka
4.3.1, SASL/SCRAM, jmx_prometheus_javaagent 1.0.1), one run per rules file, each with the same
script: SCRAM users ``CN=etl,OU=data``, ``space user``, ``<default>`` (a real name),
``star*user``, ``pct%user``; quotas ``{user=CN=etl,OU=data, client-id=weird:client*1}`` and
``{client-id=only:client*}`` producer 50000 B/s, ``{user=space user}`` producer+consumer
50000 B/s, ``{user=<default>}`` request_percentage 0.01, ``{user=star*user, client-id=<default>}``
controller_mutation_rate 1, ``{ip=127.0.0.1}`` connection_creation_rate 1000; then 1.5 MB from
each of nine (user, client id) producers, a consumer, and three 20-partition topic creations.
"""
from __future__ import annotations

import http.server
import math
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quota_core.entities import sanitize
from quota_core.errors import BackendError, MetricsError, QuotaError
from quota_core.telemetry.rules import NODE_ID_LABEL, NODE_ID_METRIC
from quota_core.telemetry import (ATTRIBUTES, QUOTA_TYPES, RULES, QuotaSeries, fetch_text,
                                  jmx_unquote, parse_metrics, scrape)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "metrics"
RULES_FILE = Path(__file__).resolve().parent.parent / "scripts" / "kafka" / "jmx-quota-rules.yaml"
NAN = math.nan


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# -- real scrapes: what each rule set's text reads back as --------------------------------------
REAL = [
    # fixture, quota_type, attribute, user, client_id, ip, value
    ("ours.txt", "produce", "byte-rate", "CN=etl,OU=data", "weird:client*1", None, 50953.398968588845),
    ("ours.txt", "produce", "throttle-time", "CN=etl,OU=data", "weird:client*1", None, 14876.0),
    ("ours.txt", "produce", "byte-rate", "space user", None, None, 50871.84047931099),
    ("ours.txt", "produce", "throttle-time", "space user", None, None, 26466.333333333332),
    ("ours.txt", "produce", "byte-rate", None, "only:client*", None, 51087.336655071915),
    ("ours.txt", "produce", "throttle-time", None, "only:client*", None, 14877.0),
    ("ours.txt", "produce", "byte-rate", None, "plain-client", None, 51435.49455750119),
    ("ours.txt", "produce", "throttle-time", None, "plain-client", None, NAN),
    ("ours.txt", "produce", "throttle-time", None, 'quote"q\\back', None, NAN),
    ("ours.txt", "produce", "throttle-time", None, "new\nline", None, NAN),
    ("ours.txt", "produce", "throttle-time", None, "<default>", None, NAN),
    ("ours.txt", "produce", "byte-rate", None, "CN=etl,OU=data", None, 0.0),
    ("ours.txt", "request", "throttle-time", "<default>", None, None, 1000.0),
    ("ours.txt", "request", "request-time", "pct%user", None, None, 0.02852178450545318),
    ("ours.txt", "request", "throttle-time", "ANONYMOUS", None, None, NAN),
    ("ours.txt", "controller_mutation", "tokens", "admin", "rdkafka", None, 1.0145709240540253e20),
    ("ours.txt", "connection", "connection-accept-rate", None, None, "127.0.0.1", 0.0),
    ("ours-later.txt", "fetch", "throttle-time", "space user", None, None, 9443.0),
    ("ours-later.txt", "fetch", "byte-rate", "space user", None, None, 0.0),
    ("ours-later.txt", "controller_mutation", "mutation-rate", "star*user", "mut:ator", None, 1.0156924483266467),
    ("ours-later.txt", "controller_mutation", "tokens", "star*user", "mut:ator", None, -19.927000000000003),
    ("ours-later.txt", "controller_mutation", "throttle-time", "star*user", "mut:ator", None, NAN),
    ("ours-later.txt", "controller_mutation", "mutation-rate", "ANONYMOUS", "1", None, 0.028364770954474542),
    ("jmx_exporter.txt", "produce", "byte-rate", "CN=etl,OU=data", "weird:client*1", None, 50977.298311444654),
    ("jmx_exporter.txt", "produce", "throttle-time", "space user", None, None, 26451.333333333332),
    ("jmx_exporter.txt", "produce", "byte-rate", None, "only:client*", None, 52141.239685281136),
    ("jmx_exporter.txt", "produce", "throttle-time", None, 'quote"q\\back', None, NAN),
    ("jmx_exporter.txt", "request", "throttle-time", "<default>", None, None, 1000.0),
    ("jmx_exporter.txt", "controller_mutation", "mutation-rate", "admin", "rdkafka", None, 0.022159682673344117),
    ("confluent.txt", "produce", "byte-rate", "CN=etl,OU=data", "weird:client*1", None, 51357.905679992444),
    ("confluent.txt", "produce", "throttle-time", "CN=etl,OU=data", "weird:client*1", None, 14875.0),
    ("confluent.txt", "produce", "byte-rate", "space user", None, None, 50106.961733517746),
    ("confluent.txt", "produce", "throttle-time", None, "new\nline", None, NAN),
    ("confluent.txt", "request", "request-time", "CN=etl,OU=data", None, None, 0.06110413223140496),
    ("confluent.txt", "request", "throttle-time", "<default>", None, None, 1000.0),
]


@pytest.mark.parametrize("fixture,quota_type,attribute,user,client_id,ip,value", REAL)
def test_real_scrape_reads_back_raw(fixture, quota_type, attribute, user, client_id, ip, value):
    found = [s for s in parse_metrics(_fixture(fixture), "b1")
             if (s.quota_type, s.attribute, s.user, s.client_id, s.ip)
             == (quota_type, attribute, user, client_id, ip)]
    assert len(found) == 1, found
    assert found[0].broker == "b1"
    assert _same(found[0].value, value), found[0]


@pytest.mark.parametrize("fixture,count", [
    ("ours.txt", 32), ("ours-later.txt", 45), ("jmx_exporter.txt", 31), ("confluent.txt", 28),
    # jmx_exporter's KRaft example bakes the tags into metric names: nothing can be read.
    ("jmx_exporter_kraft.txt", 0),
])
def test_only_quota_series_are_read(fixture, count):
    series = parse_metrics(_fixture(fixture), "b1")
    assert len(series) == count  # jvm_*, BrokerTopicMetrics, app-info, queue-size... ignored
    assert all(s.attribute in ATTRIBUTES[s.quota_type] for s in series)


def test_the_three_rule_sets_name_the_same_buckets():
    """Three broker runs of the same script: the same produce/request buckets, whatever the names."""
    def buckets(fixture):
        return {(s.quota_type, s.attribute, s.user, s.client_id)
                for s in parse_metrics(_fixture(fixture), "b") if s.quota_type in ("produce", "request")}
    ours = buckets("ours.txt")
    assert len(ours) == 28
    assert buckets("jmx_exporter.txt") == ours
    assert buckets("confluent.txt") == ours


# -- awkward names round-trip, as Kafka and each exporter would write them -------------------------
def _jmx_sanitize(value: str) -> str:
    """Kafka's ``Sanitizer.jmxSanitize``: ObjectName.quote unless ``[\\w-%. \\t]*`` (ASCII \\w)."""
    if re.fullmatch(r"[\w\-%. \t]*", value, re.ASCII):
        return value
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("*", "\\*")
               .replace("?", "\\?").replace("\n", "\\n"))
    return f'"{escaped}"'


def _label(value: str) -> str:
    """A label value in the Prometheus text format (the exporter escapes \\, " and newline)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _line(rule_set: str, user: str | None, client_id: str | None, value: str = "1.5") -> str:
    """One produce byte-rate sample for a bucket, as ``rule_set`` exports it from Kafka's MBean."""
    tags = {}
    if user is not None:
        tags["user"] = _jmx_sanitize(sanitize(user))
    if client_id is not None:
        tags["client"] = _jmx_sanitize(client_id)
    names = {"ours": ("kafka_quota_byte_rate", {"quota_type": "produce"}, "user", "client_id"),
             "jmx_exporter": ("kafka_server_quota_byte_rate", {"resource": "Produce"}, "user", "clientId"),
             "confluent": ("kafka_server_produce_byte_rate", {}, "user", "client_id")}
    metric, fixed, user_label, client_label = names[rule_set]
    labels = dict(fixed)
    if "user" in tags:
        labels[user_label] = tags["user"]
    if "client" in tags:
        labels[client_label] = tags["client"]
    body = ",".join(f"{k}={_label(v)}" for k, v in labels.items())
    return f"# TYPE {metric} gauge\n{metric}{{{body}}} {value}\n"


AWKWARD = ["CN=etl,OU=data", "ünï-用户", "a=b", "a,b", "100%", "%41", "sp ace", "tab\there",
           "<default>", "star*", "c:d", 'quote"d', "back\\slash", "q?", "new\nline", "+plus",
           "~tilde", "-dash", "a b+c%20d", '"quoted"', "\\n"]


@pytest.mark.parametrize("rule_set", ["ours", "jmx_exporter", "confluent"])
@pytest.mark.parametrize("name", AWKWARD)
def test_awkward_names_round_trip(rule_set, name):
    for user, client_id in ((name, name), (name, None), (None, name), ("alice", name), (name, "app")):
        [series] = parse_metrics(_line(rule_set, user, client_id), "b1")
        assert (series.user, series.client_id) == (user, client_id)
        assert (series.quota_type, series.attribute, series.ip, series.value) == ("produce", "byte-rate", None, 1.5)


_names = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x85\u2028\u2029")
                 | st.sampled_from("\n\t\\\"*?%+=,:<>"), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(rule_set=st.sampled_from(["ours", "jmx_exporter", "confluent"]),
       user=st.none() | _names, client_id=st.none() | _names)
@example(rule_set="ours", user="%", client_id="\\")
def test_any_name_round_trips(rule_set, user, client_id):
    if user is None and client_id is None:
        assert parse_metrics(_line(rule_set, None, None), "b1") == []  # no tags: not a bucket
        return
    [series] = parse_metrics(_line(rule_set, user, client_id), "b1")
    assert (series.user, series.client_id) == (user, client_id)


def test_the_ip_tag_is_unquoted_too():
    text = ('kafka_connection_accept_rate{ip="\\"::1\\"",quota_type="connection"} 2.0\n'
            'kafka_connection_accept_rate{ip="10.0.0.12",quota_type="connection"} 0.5\n')
    assert parse_metrics(text, "b1") == [
        QuotaSeries("b1", "connection", "connection-accept-rate", None, None, "::1", 2.0),
        QuotaSeries("b1", "connection", "connection-accept-rate", None, None, "10.0.0.12", 0.5)]


# -- what is not a bucket, and the legacy jmx_exporter form ---------------------------------------
@pytest.mark.parametrize("line", [
    'kafka_connection_accept_rate{quota_type="connection"} 3.0',                 # no ip: per listener
    'kafka_quota_byte_rate{quota_type="produce"} 1.0',                           # no bucket tags
    'kafka_quota_byte_rate{quota_type="produce",user="",client_id=""} 1.0',      # empty = absent
    'kafka_server_quota_byte_rate{resource="Produce"} 1.0',
    'kafka_server_quota_throttle_time{clientId="x",resource="app-info"} 1.0',    # not a quota MBean type
    'kafka_server_quota_start_time_ms{clientId="1",resource="app-info"} 1.7E12',
    'kafka_server_quota_byte_rate{resource="Request",user="a"} 1.0',             # Request has no byte-rate
    'kafka_quota_byte_rate{quota_type="nonsense",user="a"} 1.0',
    'kafka_server_request_exempt_request_time 0.0',
    'kafka_server_produce_queue_size 2.0',
    'jvm_threads_current 87.0',
])
def test_aggregates_and_unrelated_series_are_not_buckets(line):
    assert parse_metrics(line + "\n", "b1") == []


def test_an_empty_tag_is_an_absent_tag():
    text = 'kafka_quota_throttle_time_ms{quota_type="fetch",user="",client_id="c"} NaN\n'
    [series] = parse_metrics(text, "b1")
    assert (series.quota_type, series.user, series.client_id) == ("fetch", None, "c")
    assert math.isnan(series.value)  # NaN throttle: not throttled lately, not an error


def test_legacy_jmx_exporter_pair_buckets_are_read():
    # jmx_exporter's example before 2023 caught pair buckets with its client-id-only rule.
    text = ('kafka_server_quota_byte_rate{clientId="\\"weird:client\\\\*1\\"",'
            'resource="Produce, user=CN%3Detl%2COU%3Ddata"} 5.0\n')
    assert parse_metrics(text, "b1") == [
        QuotaSeries("b1", "produce", "byte-rate", "CN=etl,OU=data", "weird:client*1", None, 5.0)]


def test_empty_text_is_no_series():
    assert parse_metrics("", "b1") == []


# -- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,reason", [
    ('kafka_quota_byte_rate{user="a" 1.0\n', "could not convert string to float: '{user=\"a\"'"),
    ("<html><body>Not found</body></html>\n", "invalid metric name:<html><body>Not found</body></html>"),
    ('kafka_quota_byte_rate{quota_type="produce",user="a"} lots\n', "could not convert string to float: 'lots'"),
])
def test_malformed_text_raises_a_clear_error(text, reason):
    with pytest.raises(MetricsError) as info:
        parse_metrics(text, "broker-1")
    first = text.splitlines()[0]
    assert str(info.value) == (f"The metrics from broker-1 are not Prometheus text ({reason}; it starts "
                               f"{first!r}): point the scrape at the JMX exporter's /metrics endpoint.")
    assert isinstance(info.value, BackendError) and isinstance(info.value, QuotaError)


@pytest.mark.parametrize("quoted,message", [
    ('"unterminated', "The tag value '\"unterminated' opens a JMX quote but does not close it; "
                      "the exporter's rules must copy the MBean's tag value whole."),
    ('"bad\\x"', "The tag value '\"bad\\\\x\"' has the escape \\x, which JMX quoting never writes "
                 "(only \\\\ \\\" \\* \\? \\n)."),
    ('"a*b"', "The tag value '\"a*b\"' has an unescaped '*' inside its JMX quotes, which "
              "ObjectName.quote never writes."),
    ('"trail\\"', "The tag value '\"trail\\\\\"' has a trailing backslash, which JMX quoting never "
                  "writes (only \\\\ \\\" \\* \\? \\n)."),
])
def test_bad_jmx_quoting_is_an_error(quoted, message):
    with pytest.raises(MetricsError) as info:
        parse_metrics(f'kafka_quota_byte_rate{{quota_type="produce",client_id={_label(quoted)}}} 1\n', "b1")
    assert str(info.value) == message


@pytest.mark.parametrize("tag,raw", [
    ("plain-client", "plain-client"), ('"weird:client\\*1"', "weird:client*1"), ('""', ""),
    ('"a\\nb"', "a\nb"), ('"q\\?"', "q?"), ('"\\"x\\""', '"x"'), ('"back\\\\slash"', "back\\slash"),
    ('"CN=etl,OU=data"', "CN=etl,OU=data"), ('"ünï"', "ünï"),
])
def test_jmx_unquote(tag, raw):
    assert jmx_unquote(tag) == raw


# -- the table and the rules file agree -----------------------------------------------------------
def test_every_metric_in_our_rules_file_has_a_row_and_back():
    config = yaml.safe_load(RULES_FILE.read_text())
    # The client-telemetry plugin's MBeans (kafka.client domain) are exported in the exporter's
    # default format (no name): read by quota_core.telemetry.client_reports, not by these rows.
    client = [r for r in config["rules"] if r["pattern"].startswith("kafka.client<")]
    assert len(client) == 1 and "name" not in client[0] and client[0]["type"] == "GAUGE"
    config["rules"] = [r for r in config["rules"] if r not in client]
    exported = {rule["name"] for rule in config["rules"]}
    # The quota series, and the one gauge that says which broker the endpoint is.
    assert exported == {r.metric for r in RULES if r.rule_set == "quota-console"} | {NODE_ID_METRIC}
    for rule in config["rules"]:
        if rule["name"] == NODE_ID_METRIC:
            assert set(rule["labels"]) == {NODE_ID_LABEL}
            continue
        assert rule["labels"]["quota_type"] in QUOTA_TYPES
        assert rule["pattern"].startswith("kafka.server<type=")
    assert {r.rule_set for r in RULES} == {"quota-console", "jmx_exporter", "confluent"}
    for row in RULES:
        assert (row.quota_type is None) != (row.type_label is None), row
        assert row.quota_type is None or row.attribute in ATTRIBUTES[row.quota_type], row


# -- fetch_text: a real HTTP server on 127.0.0.1 --------------------------------------------------
class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's naming
        routes = {"/metrics": (200, _fixture("ours.txt").encode()), "/latin1": (200, b"x{a=\"\xe9\"} 1\n")}
        status, body = routes.get(self.path, (404, b"no such page"))
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_scrape_reads_a_served_endpoint(server):
    assert fetch_text(f"{server}/metrics") == _fixture("ours.txt")
    series = scrape(f"{server}/metrics", "broker-1")
    assert len(series) == 32 and {s.broker for s in series} == {"broker-1"}
    # Unnamed, and the fixture exports no node id: the URL's host:port, as --metrics labels it.
    assert scrape(f"{server}/metrics")[0].broker == server.split("://", 1)[1]


def test_fetch_errors_name_the_url_and_the_fix(server):
    with pytest.raises(MetricsError) as info:
        fetch_text(f"{server}/nope")
    assert str(info.value) == (f"The metrics endpoint {server}/nope answered HTTP 404 Not Found: "
                               "use the exporter's /metrics path.")
    with pytest.raises(MetricsError, match=r"sent text that is not UTF-8 \('utf-8' codec"):
        fetch_text(f"{server}/latin1")
    with pytest.raises(MetricsError) as info:
        fetch_text("file:///etc/passwd")
    assert str(info.value) == ("'file:///etc/passwd' is not an http(s) URL: give the endpoint as "
                               "http://HOST:PORT/metrics.")


def test_an_unreachable_endpoint_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}/metrics"
    with pytest.raises(MetricsError) as info:
        fetch_text(url, timeout=2)
    assert str(info.value) == (
        f"Cannot reach the metrics endpoint {url} ([Errno 111] Connection refused): check that the "
        "broker runs the Prometheus JMX exporter agent on that host and port (`python -m localkafka "
        "status` prints a local broker's metrics URL).")
    assert info.value.context == {"url": url}


def test_a_silent_endpoint_times_out():
    with socket.socket() as s:  # listens (the kernel completes the handshake) but never answers
        s.bind(("127.0.0.1", 0))
        s.listen()
        url = f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
        with pytest.raises(MetricsError) as info:
            fetch_text(url, timeout=0.3)
    assert str(info.value).startswith(f"The metrics endpoint {url} did not answer within 0.3 s; check that")
    assert str(info.value).endswith(", or raise the timeout.")


# -- which broker an endpoint is ------------------------------------------------------------------
_NODE_TEXT = ('kafka_quota_byte_rate{quota_type="produce",user="alice",client_id="c1"} 5.0\n'
              'kafka_server_app_info_start_time_ms{node_id="2"} 1.7e12\n')


def test_series_carry_the_node_id_the_endpoint_exports_unless_the_user_named_it():
    assert [s.broker for s in parse_metrics(_NODE_TEXT, "127.0.0.1:7071", by_node_id=True)] == ["2"]
    assert [s.broker for s in parse_metrics(_NODE_TEXT, "east-1", by_node_id=False)] == ["east-1"]
    without = _NODE_TEXT.splitlines()[0] + "\n"  # another rule set: no app-info gauge
    assert [s.broker for s in parse_metrics(without, "127.0.0.1:7071", by_node_id=True)] == ["127.0.0.1:7071"]


def test_an_endpoint_is_named_by_the_user_only_with_label_equals_url():
    from quota_core.telemetry.collector import parse_endpoints

    given, plain = parse_endpoints("east=http://10.0.0.1:7071/metrics,http://10.0.0.2:7071/metrics")
    assert (given.label, given.named) == ("east", True)
    assert (plain.label, plain.named) == ("10.0.0.2:7071", False)
