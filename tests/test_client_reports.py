"""quota_core.telemetry.client_reports: what the telemetry plugin's series say, per client instance.

Pure: Prometheus text in the shape the plugin + JMX exporter serve (a real scrape is checked
in tests/test_client_telemetry_kafka.py), records out.
"""
from __future__ import annotations

from pathlib import Path

from quota_core.telemetry import parse_metrics
from quota_core.telemetry.client_reports import (ClientReport, client_reports, client_samples,
                                                 telemetry_collected)

SAMPLE = (Path(__file__).resolve().parent / "fixtures" / "metrics"
          / "client-telemetry-sample.txt").read_text()
QUOTA_ONLY = Path(__file__).resolve().parent / "fixtures" / "metrics" / "ours.txt"  # no plugin


def test_each_instance_is_one_report_with_its_labels_decoded():
    java, rdkafka = client_reports(client_samples(SAMPLE), 2)
    assert java == ClientReport(
        instance_id="AAAAAAAAAAAAAAAAAAAAAQ", client_id="batch-export", principal="User:alice",
        software_name="apache-kafka-java", software_version="4.3.1", node_id=2,
        last_push_age_s=0.8, produce_throttle_ms_avg=480.0, produce_throttle_ms_max=950.0,
        fetch_throttle_ms_avg=None, fetch_throttle_ms_max=None,
        request_latency_ms_avg={2: 12.5, 3: 7.0})
    # a JMX-quoted client id round-trips; no principal label -> None; NaN -> not reported
    assert rdkafka.client_id == "weird:client*1"
    assert rdkafka.principal is None
    assert rdkafka.software_name == "librdkafka" and rdkafka.software_version == "2.12.1"
    assert rdkafka.fetch_throttle_ms_avg is None and rdkafka.fetch_throttle_ms_max == 0.0
    assert rdkafka.produce_throttle_ms_avg is None and dict(rdkafka.request_latency_ms_avg) == {}
    assert rdkafka.last_push_age_s == 1.5


def test_bootstrap_and_coordinator_pseudo_nodes_are_not_brokers():
    (java, _) = client_reports(client_samples(SAMPLE), 2)
    assert sorted(java.request_latency_ms_avg) == [2, 3]  # "node--1" (bootstrap) dropped


def test_the_endpoint_parser_keeps_the_plugin_samples_apart():
    parsed = parse_metrics(SAMPLE, "b2", by_node_id=True)
    assert list(parsed) == [] and parsed.node_id == "2"
    assert telemetry_collected(parsed.client_samples)
    assert [r.instance_id for r in client_reports(parsed.client_samples, int(parsed.node_id))] == [
        "AAAAAAAAAAAAAAAAAAAAAQ", "BBBBBBBBBBBBBBBBBBBBBQ"]


def test_families_or_samples_both_read():
    from prometheus_client.parser import text_string_to_metric_families

    assert client_reports(text_string_to_metric_families(SAMPLE), 2) == client_reports(
        client_samples(SAMPLE), 2)


def test_an_endpoint_without_the_plugin_collects_nothing():
    text = QUOTA_ONLY.read_text()
    parsed = parse_metrics(text, "b1")
    assert len(parsed) > 0
    assert not telemetry_collected(parsed.client_samples)
    assert client_reports(parsed.client_samples, 1) == []
    # the plugin loaded, no client pushing yet: collected, and no reports
    idle = "# TYPE kafka_client_telemetry_plugin_instances gauge\nkafka_client_telemetry_plugin_instances 0.0\n"
    assert telemetry_collected(client_samples(idle)) and client_reports(client_samples(idle), 1) == []
