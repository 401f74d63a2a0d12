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


def test_collect_all_clusters_writes_each_cluster_with_its_name(tmp_path):
    """collect --all-clusters: a collector per cluster, each into its history_dir (else
    --to DIR/NAME), every row with its cluster; a cluster without metrics still snapshots."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import pandas as pd

    fixture = (REPO / "tests" / "fixtures" / "metrics" / "ours.txt").read_bytes()

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(fixture)))
            self.end_headers()
            self.wfile.write(fixture)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    E = Entity.of
    sandbox_with(tmp_path / "staging.sqlite", {E(user="alice"): {"producer_byte_rate": 1024.0}})
    sandbox_with(tmp_path / "prod.sqlite", {E(user="bob"): {"consumer_byte_rate": 2048.0}})
    cfg = tmp_path / "fleet.toml"
    cfg.write_text('[clusters.staging]\nsandbox = "staging.sqlite"\n'
                   f'metrics = ["1=http://127.0.0.1:{server.server_address[1]}/metrics"]\n\n'
                   '[clusters.prod]\nsandbox = "prod.sqlite"\nhistory_dir = "prod-history"\n',
                   encoding="utf-8")
    log = tmp_path / "stderr"
    try:
        with open(log, "w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "quota_core", "collect", "--config",
                                     str(cfg), "--all-clusters", "--to", str(tmp_path / "h"),
                                     "--every", "0.3", "--timeout", "2"], stderr=err, cwd=REPO,
                                    env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                list((tmp_path / "h" / "staging" / "usage").rglob("*.parquet"))
                and list((tmp_path / "prod-history" / "quotas").rglob("*.parquet"))):
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
        server.shutdown()
    assert code == 0, log.read_text()
    usage = pd.read_parquet(tmp_path / "h" / "staging" / "usage")
    assert len(usage) and set(usage.cluster) == {"staging"}
    staging = pd.read_parquet(tmp_path / "h" / "staging" / "quotas")
    prod = pd.read_parquet(tmp_path / "prod-history" / "quotas")
    assert set(staging.cluster) == {"staging"} and set(prod.cluster) == {"prod"}
    assert '"bob"' in prod.entity.iloc[0] and not (tmp_path / "h" / "prod").exists()
    said = log.read_text()
    assert "collect: cluster prod: scraping no endpoint" in said, said
