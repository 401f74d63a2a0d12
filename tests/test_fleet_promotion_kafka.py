"""A promotion between the two real clusters of the session (the single broker and the
3-broker cluster): what a sandbox cannot show, the brokers' Kafka version and their quota
callback, read from each cluster for the preview. Nothing is written."""
from __future__ import annotations

import json

import pytest

from quota_core.backends.open import open_backend
from quota_core.cli.promote import side_of
from tests.cli_steps import run

pytestmark = pytest.mark.kafka


def test_the_preview_reads_both_clusters_versions_and_callbacks(kafka_broker, kafka_cluster,
                                                                 tmp_path):
    with open_backend(bootstrap_servers=kafka_broker.bootstrap, timeout_s=20) as one, \
            open_backend(bootstrap_servers=kafka_cluster.bootstrap, timeout_s=20) as three:
        single, triple = side_of("single", one), side_of("three", three)
        three_id = three.identity()
    # the same Kafka build on both: a version each (ApiVersions), the same, no callback
    assert single.version and single.version == triple.version, (single.version, triple.version)
    assert (single.callbacks, triple.callbacks) == ({}, {})
    assert single.settings_unread is None and triple.settings_unread is None

    cfg = tmp_path / "fleet.toml"
    cfg.write_text(f'[clusters.single]\nbootstrap_servers = "{kafka_broker.bootstrap}"\n\n'
                   f'[clusters.three]\nbootstrap_servers = "{kafka_cluster.bootstrap}"\n',
                   encoding="utf-8")
    code, out, err = run("plan", "--config", str(cfg), "--from-cluster", "single",
                         "--cluster", "three", "--output", "json", "--timeout", "20")
    assert code in (0, 2), err
    doc = json.loads(out)
    assert doc["cluster"]["cluster_id"] == three_id and doc["cluster"]["name"] == "three"
    promotion = doc["promotion"]
    assert promotion["from"]["broker_version"] == promotion["to"]["broker_version"] \
        == single.version
    assert promotion["from"]["kind"] == "kafka" and promotion["notes"] == []
