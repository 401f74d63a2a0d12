"""The Prometheus exporter without a broker: labels, cardinality, the CLI's errors, promtool.

The live half (a real Prometheus scraping the console while ProducerPerformance is throttled
by a real broker) is tests/test_monitoring_prometheus.py.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from io import StringIO
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from quota_core import Alteration, Entity, Op
from quota_core.cli.main import main
from quota_core.live import join_usage
from quota_core.telemetry import QuotaSeries
from quota_core.telemetry.exporter import (SERIES_PER_BUCKET, Health, families, parse_listen,
                                           series_count)

REPO = Path(__file__).resolve().parent.parent
MONITORING = REPO / "monitoring"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def _series(broker, user, client_id, rate, throttle=float("nan"), quota_type="produce"):
    attribute = "byte-rate" if quota_type in ("produce", "fetch") else "request-time"
    return [QuotaSeries(broker, quota_type, attribute, user, client_id, None, rate),
            QuotaSeries(broker, quota_type, "throttle-time", user, client_id, None, throttle)]


def _samples(fams) -> dict[str, list]:
    return {f.name: f.samples for f in fams}


def test_the_default_user_and_a_user_named_default_stay_apart_in_every_label():
    quotas = {Entity.of(user=None): {"producer_byte_rate": 1000.0},
              Entity.of(user="<default>"): {"producer_byte_rate": 4000.0}}
    # Two user buckets on broker "2": the literal "<default>" user (its own entry, level 3) and
    # bob (the default entry, level 6), who runs at twice his quota and is throttled.
    series = _series("2", "<default>", None, 1000.0) + _series("2", "bob", None, 2000.0, 250.0)
    got = _samples(families(join_usage(series, quotas), quotas, Health()))
    limits = {s.labels["user"]: s for s in got["kafka_client_quota_limit_bytes_per_second"]}
    assert limits["%3Cdefault%3E"].labels["entry"] == "{user=%3Cdefault%3E}"
    assert (limits["%3Cdefault%3E"].labels["level"], limits["%3Cdefault%3E"].value) == ("3", 4000.0)
    assert limits["bob"].labels["entry"] == "{user=<default>}"
    assert (limits["bob"].labels["level"], limits["bob"].value) == ("6", 1000.0)
    assert limits["bob"].labels["client_id"] == "" and limits["bob"].labels["broker"] == "2"
    util = {s.labels["user"]: s.value for s in got["kafka_client_quota_utilisation_ratio"]}
    assert util == {"%3Cdefault%3E": 0.25, "bob": 2.0}
    throttled = {s.labels["user"]: s.value for s in got["kafka_client_quota_throttled"]}
    assert throttled == {"%3Cdefault%3E": 0.0, "bob": 1.0}
    seconds = {s.labels["user"]: s.value for s in got["kafka_client_quota_throttle_time_seconds"]}
    assert seconds == {"%3Cdefault%3E": 0.0, "bob": 0.25}
    configured = {s.labels["user"]: (s.labels["entry"], s.value)
                  for s in got["kafka_client_quota_configured_bytes_per_second"]}
    assert configured == {"<default>": ("{user=<default>}", 1000.0),
                          "%3Cdefault%3E": ("{user=%3Cdefault%3E}", 4000.0)}


def test_a_bucket_nobody_is_in_any_more_is_not_exported():
    # {user=alice} exists, so alice's clients are in a user bucket; a lingering pair bucket of
    # hers (from before the entry) is nobody's figure: no series for it.
    quotas = {Entity.of(user="alice"): {"producer_byte_rate": 100.0}}
    rows = join_usage(_series("1", "alice", None, 50.0) + _series("1", "alice", "old", 0.0),
                      quotas)
    assert {(r.user, r.client_id, r.current) for r in rows} == {("alice", None, True),
                                                                ("alice", "old", False)}
    got = _samples(families(rows, quotas, Health()))
    assert [s.labels["client_id"] for s in got["kafka_client_quota_throttled"]] == [""]


def test_series_count_for_a_10000_bucket_cluster_is_what_the_docs_say():
    """docs/monitoring.md: 10 brokers each reporting the produce buckets of 1,000 users (10,000 buckets,
    all limited and measured) under 1,000 entries of one key: 5 × 10,000 + 1,000 + 10
    endpoints + 10 brokers + 3 = 51,023 series."""
    quotas = {Entity.of(user=f"u{i}"): {"producer_byte_rate": 1000.0} for i in range(1000)}
    series = [s for b in range(1, 11) for i in range(1000)
              for s in _series(str(b), f"u{i}", None, 500.0)]
    rows = join_usage(series, quotas)
    assert len(rows) == 10_000 and all(r.current and r.quota for r in rows)
    health = Health({f"b{i}:7071": True for i in range(1, 11)},
                    {str(i): True for i in range(1, 11)}, 1.0)
    count = series_count(families(rows, quotas, health))
    assert count == SERIES_PER_BUCKET * 10_000 + 1000 + 10 + 10 + 3 == 51_023
    page = (REPO / "docs" / "monitoring.md").read_text()
    assert "51,023" in page
    assert "5 × buckets + entries × keys + endpoints + brokers + 3" in page


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:9464", ("127.0.0.1", 9464)), ("9464", ("127.0.0.1", 9464)),
    (":0", ("127.0.0.1", 0)), ("[::1]:9464", ("::1", 9464)), ("0.0.0.0:80", ("0.0.0.0", 80)),
])
def test_listen_takes_any_host_and_defaults_to_loopback(text, expected):
    assert parse_listen(text) == expected


HOST_RULE = ("a host is a name of dot-separated labels of 1 to 63 ASCII letters, digits or "
             "hyphens (253 characters at most), an IPv4 address, or an IPv6 address in brackets")


@pytest.mark.parametrize("listen, words", [
    ("127.0.0.1:http", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("127.0.0.1:70000", "the port must be a number from 0 to 65535 in ASCII digits"),
    ("::1:9464", f"'::1' is not a host name or address (an IPv6 address goes in brackets): "
                 f"{HOST_RULE}"),
    ("[nope]:9464", f"'nope' is not a host name or address (it is not an IPv6 address): "
                    f"{HOST_RULE}"),
])
def test_a_malformed_listen_is_a_usage_error_naming_it(tmp_path, listen, words):
    out, err = StringIO(), StringIO()
    code = main(["serve-metrics", "--sandbox", str(tmp_path / "q.db"), "--listen", listen],
                out, err)
    assert code == 2
    assert err.getvalue() == (f"kafka-client-quotas serve-metrics: error: --listen {listen!r}: "
                              f"{words}; give HOST:PORT, e.g. 127.0.0.1:9464 (or [::1]:9464; a "
                              f"port alone listens on 127.0.0.1).\n")


@pytest.mark.parametrize("flags, words", [
    (["--metrics", "ftp://b1/metrics"], "--metrics 'ftp://b1/metrics': "),
    (["--metrics", "http://b1/m", "--metrics-template", "http://{host}:1/m"], "name the same endpoints: give one"),
    (["--scrape-timeout", "0"], "--scrape-timeout 0: give a number of seconds greater than 0."),
    (["--bootstrap-server", "127.0.0.1:9"], "Say whose quotas to serve"),
])
def test_other_usage_errors_exit_2_before_connecting(tmp_path, flags, words):
    out, err = StringIO(), StringIO()
    code = main(["serve-metrics", "--sandbox", str(tmp_path / "q.db"), *flags], out, err)
    assert code == 2 and words in err.getvalue() and "Traceback" not in err.getvalue()
    assert err.getvalue().startswith("kafka-client-quotas serve-metrics: error: ")


def test_an_address_in_use_is_a_runtime_failure_naming_it(tmp_path):
    from quota_core.backends.sandbox import SandboxBackend

    with SandboxBackend(tmp_path / "q.db") as sandbox:
        sandbox.init()
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        out, err = StringIO(), StringIO()
        code = main(["serve-metrics", "--sandbox", str(tmp_path / "q.db"), "--listen",
                     f"127.0.0.1:{port}"], out, err)
    assert code == 1
    assert err.getvalue().startswith(f"kafka-client-quotas serve-metrics: error: Cannot listen "
                                     f"on 127.0.0.1:{port} (")
    assert "give another address (HOST:PORT)" in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_without_metrics_it_serves_the_configured_values_and_stops_on_sigterm(tmp_path):
    from quota_core.backends.sandbox import SandboxBackend

    path = tmp_path / "q.db"
    with SandboxBackend(path) as sandbox:
        assert sandbox.alter([
            Alteration(Entity.of(user=None), (Op.set("producer_byte_rate", 1024),)),
            Alteration(Entity.of(user="<default>", client_id="a b"),
                       (Op.set("request_percentage", 50),))]).ok
    log = tmp_path / "stderr"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "quota_core", "serve-metrics", "--sandbox",
                                 str(path), "--listen", "127.0.0.1:0"], stderr=err, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO),
                                     "QUOTA_LINT_PROTECTED": "svc-reports"})
    try:
        url = _served_url(log, proc)
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0, log.read_text()
    got = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert [(s.labels["entry"], s.labels["user"], s.value)
            for s in got["kafka_client_quota_configured_bytes_per_second"]] == [
        ("{user=<default>}", "<default>", 1024.0)]
    assert [(s.labels["entry"], s.labels["user"], s.labels["client_id"], s.value)
            for s in got["kafka_client_quota_configured_percent"]] == [
        ("{user=%3Cdefault%3E, client-id=a%20b}", "%3Cdefault%3E", "a%20b", 50.0)]
    assert got["quota_console_quota_entries"][0].value == 2.0
    assert 0 <= got["quota_console_quota_set_age_seconds"][0].value < 60
    # The lint findings as a gauge: the default user entry binds the protected svc-reports.
    assert [(s.labels["rule"], s.labels["severity"], s.labels["entry"], s.labels["key"], s.value)
            for s in got["quota_console_lint_finding"]
            if s.labels["rule"] == "protected-under-default"] == [
        ("protected-under-default", "error", "{user=<default>}", "producer_byte_rate", 1.0)]


def test_collect_serve_is_one_process_collecting_and_serving(tmp_path):
    from quota_core.backends.sandbox import SandboxBackend

    path = tmp_path / "q.db"
    with SandboxBackend(path) as sandbox:
        assert sandbox.alter([Alteration(Entity.of(client_id=None),
                                         (Op.set("consumer_byte_rate", 2048),))]).ok
    with socket.socket() as closed:  # a port nothing listens on: an endpoint that is down
        closed.bind(("127.0.0.1", 0))
        down = f"127.0.0.1:{closed.getsockname()[1]}"
    log = tmp_path / "stderr"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "quota_core", "collect", "--sandbox",
                                 str(path), "--metrics", f"http://{down}/metrics", "--to",
                                 str(tmp_path / "history"), "--every", "1", "--timeout", "1",
                                 "--serve", "127.0.0.1:0"], stderr=err, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        url = _served_url(log, proc)
        text = urllib.request.urlopen(url, timeout=10).read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0, log.read_text()
    got = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert [(s.labels, s.value) for s in got["quota_console_endpoint_up"]] == [
        ({"endpoint": down}, 0.0)]
    assert [(s.labels["entry"], s.labels["client_id"], s.value)
            for s in got["kafka_client_quota_configured_bytes_per_second"]] == [
        ("{client-id=<default>}", "<default>", 2048.0)]
    assert "collect: scraping" in log.read_text()
    assert log.read_text().count(f"serve-metrics: {down} does not answer: ") == 1


def test_collect_refuses_a_malformed_serve_address_as_a_usage_error(tmp_path):
    out, err = StringIO(), StringIO()
    code = main(["collect", "--sandbox", str(tmp_path / "q.db"), "--metrics",
                 "http://127.0.0.1:9/metrics", "--to", str(tmp_path / "h"), "--serve",
                 "127.0.0.1:port"], out, err)
    assert code == 2
    assert err.getvalue().startswith("kafka-client-quotas collect: error: --serve "
                                     "'127.0.0.1:port': the port must be a number")


def _served_url(log: Path, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("serve-metrics: serving "):
                return line.split()[2].rstrip(";")
        assert proc.poll() is None, log.read_text()
        time.sleep(0.1)
    raise AssertionError(f"serve-metrics never said where it serves: {log.read_text()}")


def test_promtool_checks_the_rules_and_every_rule_has_a_passing_unit_test():
    check = subprocess.run([PROMTOOL, "check", "rules", str(MONITORING / "quota-alerts.yml")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    import yaml

    count = sum(len(g["rules"]) for g in yaml.safe_load(
        (MONITORING / "quota-alerts.yml").read_text())["groups"])
    assert count == 7 and f"SUCCESS: {count} rules found" in check.stdout
    tests = sorted(MONITORING.glob("*test*.yml"))
    run = subprocess.run([PROMTOOL, "test", "rules", *map(str, tests)], capture_output=True,
                         text=True, timeout=60, cwd=MONITORING)
    assert run.returncode == 0 and "SUCCESS" in run.stdout, run.stdout + run.stderr
    import yaml

    rules = [r["alert"] for g in yaml.safe_load((MONITORING / "quota-alerts.yml").read_text())
             ["groups"] for r in g["rules"]]
    tested = {case["alertname"] for t in tests for test in yaml.safe_load(t.read_text())["tests"]
              for case in test["alert_rule_test"] if case.get("exp_alerts")}
    assert set(rules) == tested, f"rules without a firing test: {set(rules) - tested}"


def test_the_dashboard_has_its_panels_at_the_top_level():
    board = json.loads((MONITORING / "grafana-quotas.json").read_text())
    assert "dashboard" not in board and len(board["panels"]) >= 3
    titles = [p["title"] for p in board["panels"]]
    assert any("brokers" in t for t in titles) and "Top throttled entries" in titles
    assert all(t["expr"] for p in board["panels"] for t in p["targets"])


def test_the_dashboard_has_a_cluster_variable_every_query_follows():
    """serve-metrics --all-clusters labels every series cluster="NAME": each query selects
    the clusters picked, and keeps them apart where it aggregates."""
    board = json.loads((MONITORING / "grafana-quotas.json").read_text())
    (var,) = [v for v in board["templating"]["list"] if v["name"] == "cluster"]
    assert var["includeAll"] and var["multi"] and var["allValue"] == ".*"
    for panel in board["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            names = re.findall(r"\b(?:kafka_client_quota|quota_console)_[a-z_]+\b", expr)
            assert names and expr.count('cluster=~"$cluster"') == len(names), expr
            assert " by (" not in expr or re.search(r" by \(cluster[,)]", expr), expr


def test_a_quota_set_that_cannot_be_read_is_kept_its_age_grows_and_it_is_said_once():
    from quota_core.errors import ConnectionFailed
    from quota_core.telemetry.exporter import QuotaExporter

    quotas = {Entity.of(user="alice"): {"producer_byte_rate": 100.0}}
    answers: list = [quotas, ConnectionFailed("broker-1:9092 does not answer"),
                     ConnectionFailed("broker-1:9092 does not answer"), quotas]
    now, lines = [0.0], []

    def describe():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    exporter = QuotaExporter(describe, clock=lambda: now[0], log=lines.append)
    exporter.read_quotas()
    ages = []
    for t in (100.0, 700.0, 800.0):
        now[0] = t
        got = _samples(exporter.scrape())
        ages.append(got["quota_console_quota_set_age_seconds"][0].value)
        assert [s.value for s in got["kafka_client_quota_configured_bytes_per_second"]] == [100.0]
    assert ages == [100.0, 700.0, 0.0]
    assert lines == ["serve-metrics: cannot read the quota set, serving the last one read: "
                     "broker-1:9092 does not answer", "serve-metrics: the quota set is read again"]
