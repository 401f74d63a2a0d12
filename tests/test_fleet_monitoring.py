"""serve-metrics --all-clusters: every series labelled cluster="NAME", a dead cluster served
as down without holding the others back (issue 29)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from io import StringIO
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from quota_core import Entity
from quota_core.cli.main import main
from quota_core.telemetry.exporter import with_cluster
from tests.cli_steps import sandbox_with

REPO = Path(__file__).resolve().parent.parent


def test_with_cluster_merges_families_and_puts_the_cluster_first():
    def fam(value: float, *labels: str) -> GaugeMetricFamily:
        f = GaugeMetricFamily("x_ratio", "doc", labels=["broker", "user"])
        f.add_metric(list(labels), value)
        return f

    empty = GaugeMetricFamily("y_entries", "nothing here", labels=["broker"])
    merged = with_cluster({"staging": [fam(1.0, "1", "ünï"), empty], "prod": [fam(2.0, "2", "a")]})
    assert [m.name for m in merged] == ["x_ratio", "y_entries"]
    assert [(s.labels, s.value) for s in merged[0].samples] == [
        ({"cluster": "staging", "broker": "1", "user": "ünï"}, 1.0),
        ({"cluster": "prod", "broker": "2", "user": "a"}, 2.0)]
    assert merged[1].samples == []


def test_all_clusters_labels_every_series_and_serves_a_dead_cluster_as_down(tmp_path):
    E = Entity.of
    sandbox_with(tmp_path / "staging.sqlite", {E(user="alice"): {"producer_byte_rate": 1024.0}})
    sandbox_with(tmp_path / "prod.sqlite", {E(user="alice"): {"producer_byte_rate": 2048.0},
                                            E(ip="10.0.0.1"): {"connection_creation_rate": 3}})
    with socket.socket() as closed:  # nothing listens there: a cluster that is down
        closed.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed.getsockname()[1]}"
    cfg = tmp_path / "fleet.toml"
    cfg.write_text('[clusters.staging]\nsandbox = "staging.sqlite"\n\n'
                   '[clusters.prod]\nsandbox = "prod.sqlite"\n\n'
                   f'[clusters.gone]\nbootstrap_servers = "{dead}"\n', encoding="utf-8")
    log = tmp_path / "stderr"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "quota_core", "serve-metrics",
                                 "--config", str(cfg), "--all-clusters", "--listen",
                                 "127.0.0.1:0", "--timeout", "1"], stderr=err, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        url = _served_url(log, proc)
        text = urllib.request.urlopen(url, timeout=20).read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0, log.read_text()
    got = {f.name: f.samples for f in text_string_to_metric_families(text)}
    assert all("cluster" in s.labels for samples in got.values() for s in samples)
    assert [(s.labels["cluster"], s.labels["entry"], s.value)
            for s in got["kafka_client_quota_configured_bytes_per_second"]] == [
        ("staging", "{user=alice}", 1024.0), ("prod", "{user=alice}", 2048.0)]
    assert {s.labels["cluster"]: s.value for s in got["quota_console_quota_entries"]} == {
        "staging": 1.0, "prod": 2.0, "gone": 0.0}
    assert {s.labels["cluster"]: s.value for s in got["quota_console_cluster_up"]} == {
        "staging": 1.0, "prod": 1.0, "gone": 0.0}
    said = log.read_text()
    assert said.count("serve-metrics: cannot read the quota set, serving the last one read: "
                      "cluster gone: ") == 1, said


def test_all_clusters_with_one_cluster_flag_is_a_usage_error(tmp_path):
    cfg = tmp_path / "fleet.toml"
    cfg.write_text('[clusters.a]\nsandbox = "a.sqlite"\n', encoding="utf-8")
    out, err = StringIO(), StringIO()
    assert main(["serve-metrics", "--config", str(cfg), "--all-clusters", "--cluster", "a"],
                out, err) == 2
    assert "drop --cluster" in err.getvalue()


def _served_url(log: Path, proc: subprocess.Popen) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if line.startswith("serve-metrics: serving "):
                return line.split()[2].rstrip(";")
        assert proc.poll() is None, log.read_text()
        time.sleep(0.1)
    raise AssertionError(f"serve-metrics never said where it serves: {log.read_text()}")
