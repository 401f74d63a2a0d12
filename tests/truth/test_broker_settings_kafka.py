"""The broker settings on real brokers: the extra cluster of tests/settings_fixtures.py runs a
custom ``client.quota.callback.class`` (compiled there) with ``quota.window.num=5`` on two
nodes; node 2 has its own ``num.io.threads``. The console reads every broker's settings,
warns naming the class (CLI and pages), and its arithmetic uses 5 windows, not 11."""
from __future__ import annotations

import json

import pytest

from quota_core.domain.alterations import Alteration, Op
from quota_core.backends.kafka import KafkaBackend
from quota_core.domain.entities import Entity
from quota_core.throttling.throttle import estimate_throttle
from tests.app_steps import run_app, texts
from tests.cli_steps import run
from tests.settings_fixtures import CALLBACK_CLASS, settings_cluster  # noqa: F401  (fixture)
from tests.pages.test_app import env  # noqa: F401  (fixture)

pytestmark = pytest.mark.kafka

MiB = 1024 * 1024
P = "producer_byte_rate"


def _metrics(cluster) -> str:
    return ",".join(cluster.metrics_urls)


@pytest.fixture(scope="module")
def quota_set(settings_cluster):
    """alice's own entry, 1 MiB/s: stored and described, though the callback ignores it."""
    with KafkaBackend(settings_cluster.bootstrap) as backend:
        entity = Entity.of(user="alice", client_id="app")
        backend.alter([Alteration(entity, (Op.set(P, MiB),))])
        yield backend


def test_every_brokers_settings_are_read(settings_cluster, quota_set):
    settings = quota_set.broker_settings()
    assert [b.node_id for b in settings.brokers] == ["1", "2"] and not settings.unread
    for b in settings.brokers:
        assert b.callback == CALLBACK_CLASS
        assert (b.value("quota.window.num"), b.sources["quota.window.num"]) == \
            ("5", "server.properties")
        assert b.value("quota.window.size.seconds") == "1"
        assert b.sources["quota.window.size.seconds"] == "Kafka's default"
        assert b.value("controller.quota.window.num") == "11"
        assert (b.value("max.connection.creation.rate"),
                b.sources["max.connection.creation.rate"]) == ("1000", "server.properties")
        assert b.value("message.max.bytes") == "1048588"
        assert b.value("num.network.threads") == "2"
    assert settings.custom_callback and settings.callback_label == CALLBACK_CLASS
    window = settings.window()
    assert (window.samples, window.sample_s) == (5, 1)
    # node 2 runs its own num.io.threads: a rolling change half done, named
    [d] = settings.disagreements()
    assert (d.name, d.brokers) == ("num.io.threads", ("2",))
    assert (settings.node("1").value("num.io.threads"),
            settings.node("2").value("num.io.threads")) == ("4", "3")


@pytest.mark.parametrize("mode", [("--describe",), ("--resolve", "--user", "alice",
                                                      "--client-id", "app"),
                                  ("--throttled", "--metrics", None)])
def test_the_cli_names_the_custom_callback_on_stderr_and_exits_as_before(settings_cluster,
                                                                         quota_set, mode):
    args = tuple(_metrics(settings_cluster) if a is None else a for a in mode)
    code, out, err = run("--bootstrap-server", settings_cluster.bootstrap, *args)
    assert code == 0, err
    [line] = [x for x in err.splitlines() if "client.quota.callback.class" in x]
    assert line.startswith("kafka-client-quotas: warning: ")
    assert f"client.quota.callback.class={CALLBACK_CLASS}" in line
    assert "describe output does not decide enforcement here" in line
    [line] = [x for x in err.splitlines() if "disagree" in x]
    assert "num.io.threads: 4 on broker 1, 3 on broker 2" in line and \
        line.endswith("look at broker 2."), err
    if mode[0] == "--describe":
        assert "alice" in out       # the output itself is unchanged


def test_the_cli_live_verdict_uses_the_clusters_window(settings_cluster, quota_set):
    code, out, err = run("--bootstrap-server", settings_cluster.bootstrap, "--resolve",
                         "--user", "alice", "--client-id", "app", "--metrics",
                         _metrics(settings_cluster), "--output", "json")
    assert code == 0, err
    window = json.loads(out)["window"]
    assert (window["num"], window["size_s"]) == (5, 1)
    assert window["source"] == "brokers 1 and 2"


def test_resolving_an_ip_names_the_brokers_connection_cap(settings_cluster, quota_set):
    code, out, err = run("--bootstrap-server", settings_cluster.bootstrap, "--resolve",
                         "--ip", "192.0.2.7")
    assert code == 0, err
    [line] = [x for x in err.splitlines() if "max.connection.creation.rate" in x]
    assert "1,000/s on brokers 1 and 2" in line
    code, out, err = run("--bootstrap-server", settings_cluster.bootstrap, "--resolve",
                         "--user", "alice", "--client-id", "app")
    assert "max.connection.creation.rate" not in err    # a user's quotas are not capped by it


def _connect(env, cluster) -> None:
    env.setenv("QUOTA_BOOTSTRAP_SERVERS", cluster.bootstrap)


def test_resolve_warns_marks_the_ladder_and_estimates_with_five_windows(settings_cluster,
                                                                        quota_set, env):
    _connect(env, settings_cluster)
    at = run_app("pages/resolve.py", query={"user": "alice", "client_id": "app"})
    warned = [t for t in texts(at.warning) if "client.quota.callback.class" in t]
    assert len(warned) == 1 and CALLBACK_CLASS in warned[0], texts(at.warning)
    assert any("num.io.threads: 4 on broker 1, 3 on broker 2" in t for t in texts(at.warning))
    assert any(t.startswith("Kafka's default callback: not what decides here")
               and CALLBACK_CLASS in t for t in texts(at.caption)), texts(at.caption)
    # By hand: twice the quota is delayed one measured window, (5 - 1) × 1 s, not 10 s.
    at.text_input(key=f"rs_obs_{P}").input("2MiB").run()
    assert not at.exception
    expected = estimate_throttle(P, 2 * MiB, MiB, window=quota_set.quota_window()).throttle_ms
    assert expected == 4_000
    assert any(f"throttled ≈ {expected:,} ms per request" in t for t in texts(at.error)), \
        texts(at.error)
    assert any("quota window 5 × 1 s" in t for t in texts(at.caption)), texts(at.caption)


@pytest.mark.parametrize("page", ["pages/throttled.py", "pages/edit.py"])
def test_throttled_now_and_edit_warn_naming_the_class(settings_cluster, quota_set, env, page):
    _connect(env, settings_cluster)
    env.setenv("QUOTA_METRICS", _metrics(settings_cluster))
    at = run_app(page, operator="ops")
    warned = [t for t in texts(at.warning) if "client.quota.callback.class" in t]
    assert len(warned) == 1 and CALLBACK_CLASS in warned[0], texts(at.warning)
    assert any("num.io.threads: 4 on broker 1, 3 on broker 2" in t for t in texts(at.warning))


def test_every_broker_of_the_shared_cluster_is_read_from_one_bootstrap_address(kafka_cluster):
    """Bootstrapped from node 2 alone, the console still asks each of the three brokers for
    its own settings (a broker answers DescribeConfigs for its own node id only)."""
    with KafkaBackend(kafka_cluster.node(2).bootstrap) as backend:
        settings = backend.broker_settings()
    assert [b.node_id for b in settings.brokers] == ["1", "2", "3"] and not settings.unread
    assert {b.value("num.io.threads") for b in settings.brokers} == {"4"}
    window = settings.window()
    assert (window.samples, window.sample_s, window.source) == (11, 1, "brokers 1, 2 and 3")
    assert settings.notes() == [] and settings.disagreements() == []


def test_the_collectors_snapshot_carries_the_window_the_cli_uses(settings_cluster, quota_set):
    """Issue 28: the snapshot History's Spark job reads carries quota.window.num=5 per broker,
    so its estimate is the CLI's (4,000 ms at twice the quota, not 10,000); the Spark side of
    it: tests/pipeline/test_snapshot_window.py."""
    from quota_core.telemetry.collector import Collector
    from quota_core.telemetry.schema import windows_from_rows

    collector = Collector([], quota_set.describe, sink=None, scrape=None,
                          settings=quota_set.broker_settings)
    collector.snapshot(0.0)
    found = windows_from_rows(collector._snapshots)
    cli = quota_set.quota_window()
    for broker in ("1", "2"):
        window = found.of(broker)
        assert (window.samples, window.sample_s) == (cli.samples, cli.sample_s) == (5, 1)
        assert estimate_throttle(P, 2 * MiB, MiB, window=window).throttle_ms == \
            estimate_throttle(P, 2 * MiB, MiB, window=cli).throttle_ms == 4_000
