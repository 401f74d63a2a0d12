"""quota_core.client_metrics and ``telemetry``'s command line, without a cluster.

Malformed names, prefixes, regexes and intervals are usage errors: exit 2 and one line, before
anything is sent. What reaches the broker is checked against a real one in
tests/test_client_telemetry_kafka.py.
"""
from __future__ import annotations

import io

import pytest

from quota_core.cli import main as cli
from quota_core.cli.exits import EXIT_CODES
from quota_core.client_metrics import (DEFAULT_SUBSCRIPTION, Subscription, alter_ops,
                                       check_interval, check_name, parse_match, parse_metrics,
                                       subscription_from_configs)
from quota_core.errors import UsageError


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["telemetry", *args], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("args, words", [
    (("subscribe", "s", "--metrics", "a b"), "--metrics prefix 'a b'"),
    (("subscribe", "s", "--metrics", "a,,b"), "--metrics prefix ''"),
    (("subscribe", "s", "--metrics", ""), "--metrics prefix ''"),
    (("subscribe", "s", "--metrics", "a", "--interval-ms", "99"), "--interval-ms 99"),
    (("subscribe", "s", "--metrics", "a", "--interval-ms", "3600001"), "--interval-ms 3600001"),
    (("subscribe", "s", "--metrics", "a", "--interval-ms", "1e3"), "--interval-ms '1e3'"),
    (("subscribe", "s", "--metrics", "a", "--match", "client_id=("), "not a regular expression"),
    (("subscribe", "s", "--metrics", "a", "--match", "client_id=a,b"), "without ','"),
    (("subscribe", "s", "--metrics", "a", "--match", "user=alice"), "KEY one of client_id"),
    (("subscribe", "s", "--metrics", "a", "--match", "client_id"), "KEY one of client_id"),
    (("subscribe", "s", "--metrics", "a", "--match", "client_id=a", "--match", "client_id=b"),
     "given twice"),
    (("subscribe", "", "--metrics", "a"), "subscription name ''"),
    (("subscribe", "tab\there", "--metrics", "a"), "control characters"),
    (("subscribe", "x" * 256, "--metrics", "a"), "at most 255"),
    (("subscribe", "s"), "give --metrics"),
    (("subscribe", "--metrics", "a"), "give a NAME"),
    (("unsubscribe", ""), "subscription name ''"),
    (("subscribe", "s", "--metrics", "a", "--bogus"), "unrecognized arguments: --bogus"),
    (("frobnicate",), "invalid choice"),
    (("subscribe", "s", "--metrics", "a", "--sandbox", "q.sqlite"), "needs a Kafka cluster"),
    (("list",), "needs a Kafka cluster"),
])
def test_malformed_input_is_one_line_and_exit_2(args, words):
    code, out, err = run(*args, "--bootstrap-server", "127.0.0.1:1") if args[0] not in (
        "frobnicate",) and "--sandbox" not in args and args != ("list",) else run(*args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("kafka-client-quotas telemetry"), err
    assert words in err


def test_telemetry_exits_as_the_main_command():
    assert EXIT_CODES["telemetry"] == EXIT_CODES["main"]


def test_metrics_and_match_parse_in_order_without_duplicates():
    assert parse_metrics("org.apache.kafka.producer.,*,org.apache.kafka.producer.") == (
        "org.apache.kafka.producer.", "*")
    assert parse_match(["client_id=batch-.*", "client_source_port=9\\d{3}"]) == {
        "client_id": "batch-.*", "client_source_port": "9\\d{3}"}
    assert check_name("ops team/α") == "ops team/α"  # names are opaque text
    assert check_interval(100) == 100 and check_interval(3_600_000) == 3_600_000
    with pytest.raises(UsageError):
        check_interval(True)


def test_ops_make_the_resource_exactly_the_subscription_and_read_back():
    sub = Subscription("s", ("a.", "b."), {"client_id": "x.*", "client_software_name": "y"}, 2500)
    assert alter_ops(sub) == [("metrics", "a.,b."), ("interval.ms", "2500"),
                              ("match", "client_id=x.*,client_software_name=y")]
    assert subscription_from_configs("s", dict(alter_ops(sub))) == sub
    bare = Subscription("t", ("*",))
    assert alter_ops(bare)[2] == ("match", None)  # no match: back to Kafka's default (all)
    # as kafka-client-metrics.sh --describe prints an unset match and Kafka's default interval
    assert subscription_from_configs("t", {"metrics": "*", "match": "", "interval.ms": None}) == bare


def test_the_default_subscription_is_throttle_latency_and_connections_at_30s():
    d = DEFAULT_SUBSCRIPTION
    assert d.interval_ms == 30_000 and dict(d.match) == {}
    for wanted in ("produce.throttle.time", "fetch.throttle.time", "node.request.latency",
                   "connection."):
        assert any(wanted in p for p in d.metrics), wanted
    assert all(parse_metrics(p) == (p,) for p in d.metrics)
    assert d.as_dict() == {"name": "quota-console-default", "metrics": list(d.metrics),
                           "match": {}, "interval_ms": 30_000}


def test_a_broker_advertising_no_telemetry_api_collects_nothing():
    """KIP-714: a broker advertises GetTelemetrySubscriptions (71) only with a plugin loaded.
    (The real broker of the session has the plugin: tests/test_client_telemetry_kafka.py.)"""
    from types import SimpleNamespace

    from quota_core.backends.kafka_client_metrics import telemetry_collected

    def backend(api_versions):
        return SimpleNamespace(_manager=SimpleNamespace(
            broker_version_data=SimpleNamespace(api_versions=api_versions)))

    assert telemetry_collected(backend({48: (0, 1), 49: (0, 1), 71: (0, 0), 72: (0, 0)}))
    assert not telemetry_collected(backend({48: (0, 1), 49: (0, 1)}))
    assert not telemetry_collected(backend(None))
