"""`make run` decides between a configured cluster and the local broker by the app's own rules."""
import importlib.util
from pathlib import Path

import pytest

from tests import ROOT

SCRIPT = ROOT / "scripts" / "run_dashboard.py"


@pytest.fixture(scope="module")
def run_dashboard():
    spec = importlib.util.spec_from_file_location("run_dashboard", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("env, toml, expected", [
    ({}, None, None),
    ({"QUOTA_BOOTSTRAP_SERVERS": "h:1"}, None, "QUOTA_BOOTSTRAP_SERVERS=h:1"),
    ({"QUOTA_SANDBOX": "/tmp/x.sqlite"}, None, None),           # a sandbox is not a cluster
    ({}, '[kafka]\nbootstrap_servers = "a:1"\n', "[kafka] in {path}"),
    ({}, '[sandbox]\npath = "/tmp/x.sqlite"\n', None),
])
def test_configured_cluster(run_dashboard, tmp_path, env, toml, expected):
    path = tmp_path / "secrets.toml"
    if toml is not None:
        path.write_text(toml)
    expected = expected and expected.format(path=path)
    assert run_dashboard.configured_cluster(env, path) == expected


def test_unreadable_secrets_stop_with_the_reason(run_dashboard, tmp_path):
    path = tmp_path / "secrets.toml"
    path.write_text("[kafka\n")
    with pytest.raises(SystemExit, match="cannot read"):
        run_dashboard.configured_cluster({}, path)


# ------------------------------------------------------------------ how many brokers (issue 18)
from datetime import datetime, timedelta, timezone  # noqa: E402

from localkafka.demo import BROKER_MEMORY, OTHER_MEMORY, demo_brokers, demo_quotas  # noqa: E402
from quota_core.domain.entities import entity_from_json  # noqa: E402

GiB = 2**30
NEED = 3 * BROKER_MEMORY + OTHER_MEMORY


@pytest.mark.parametrize("mem, cpus, count, why", [
    (24 * GiB, 2, 3, "24.0 GiB of memory available (3 brokers and the rest need 5 GiB), 2 cores"),
    (NEED, 8, 3, "5.0 GiB of memory available (3 brokers and the rest need 5 GiB), 8 cores"),
    (NEED - 1, 8, 1, "5.0 GiB of memory available, 3 brokers and the rest need 5 GiB"),
    (3 * GiB, 2, 1, "3.0 GiB of memory available, 3 brokers and the rest need 5 GiB"),
    (24 * GiB, 1, 1, "1 core, 3 brokers need at least 2"),
    (24 * GiB, None, 1, "1 core, 3 brokers need at least 2"),
    (None, 4, 1, "the memory available is unknown (no /proc/meminfo)"),
])
def test_the_demo_starts_three_brokers_when_the_machine_holds_them(mem, cpus, count, why):
    assert demo_brokers(mem, cpus) == (count, why)


def test_falling_back_to_one_broker_is_said_on_stderr(run_dashboard, capsys):
    assert run_dashboard.broker_count(None, mem=2 * GiB, cpus=2) == 1
    err = capsys.readouterr().err
    assert err.startswith("run_dashboard: one broker, not three: 2.0 GiB of memory available")
    assert "--brokers 3" in err
    assert run_dashboard.broker_count(None, mem=8 * GiB, cpus=2) == 3
    assert "run_dashboard: 3 brokers: 8.0 GiB" in capsys.readouterr().err
    assert run_dashboard.broker_count(1, mem=8 * GiB, cpus=2) == 1  # --brokers decides


def test_mem_available_reads_the_kernels_estimate(run_dashboard, tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684096 kB\nMemFree:  1 kB\n"
                       "MemAvailable:   24221348 kB\n")
    assert run_dashboard.mem_available(meminfo) == 24221348 * 1024
    meminfo.write_text("MemTotal:       24684096 kB\n")  # a kernel before 3.14
    assert run_dashboard.mem_available(meminfo) is None
    assert run_dashboard.mem_available(tmp_path / "missing") is None
    assert run_dashboard.mem_available() is not None  # this machine's (Linux)


# ------------------------------------------------------------------ the demo history (issue 18)
def test_the_demo_history_ends_now_on_the_clusters_brokers_under_the_seeded_quotas(
        run_dashboard, kafka_cluster, tmp_path):
    """Before: dated January 2025, on brokers broker-0..2 that no demo cluster has, under
    quotas of its own (its sizing "now" disagreed with the live quota). Now: it ends within
    minutes of now, its brokers are the cluster's node ids (as the scrape labels them), and
    the quota set in force at its end is the one ``make run`` seeded."""
    from quota_core.backends.open import open_backend

    metadata = kafka_cluster.admin().list_topics(timeout=20)
    node_ids = run_dashboard.node_ids_of(kafka_cluster)
    assert sorted(node_ids) == sorted(metadata.brokers) == [1, 2, 3]
    with open_backend(sandbox=tmp_path / "demo.sqlite") as backend:
        run_dashboard.seed_if_empty(backend, "the test sandbox")
        quotas = backend.describe()
    assert quotas == demo_quotas()

    before = datetime.now(timezone.utc)
    history = run_dashboard.make_history(node_ids, quotas)
    usage = history.usage
    last, first = usage["ts"].max(), usage["ts"].min()
    assert before - timedelta(minutes=3) <= last <= datetime.now(timezone.utc)
    assert timedelta(hours=47) < last - first < timedelta(hours=48)
    assert set(usage["broker"]) == {"1", "2", "3"}
    # The quota set in force at the end (the latest snapshot) is the seeded one.
    snapshots = history.quotas
    latest = snapshots[snapshots["ts"] == snapshots["ts"].max()]
    assert {(entity_from_json(e), k): v for e, k, v in latest[["entity", "key", "value"]]
            .itertuples(index=False)} == {(e, k): v for e, q in demo_quotas().items()
                                          for k, v in q.items()}
    assert history.versions[-1][1] == demo_quotas()
    # The demo load's clients where the live load puts them: alice's batch-export on the
    # broker that leads its topic only, svc-reports' ingest on every broker.
    batch = usage[(usage["user"] == "alice") & (usage["quota_type"] == "produce")
                  & usage["client_id"].isna()]
    assert set(batch["broker"]) == {"2"}
    ingest = usage[(usage["user"] == "svc-reports") & (usage["quota_type"] == "produce")]
    assert set(ingest["broker"]) == {"1", "2", "3"}


def test_the_generator_command_line_takes_the_end_and_the_broker_ids(tmp_path, capsys):
    import pandas as pd

    from pipeline.demo_history import main

    assert main(["--out", str(tmp_path / "h"), "--hours", "2", "--step-s", "600", "--clients",
                 "1", "--end", "now", "--broker-ids", "1,2,3"]) == 0
    usage = pd.read_parquet(tmp_path / "h" / "usage")
    assert set(usage["broker"]) == {"1", "2", "3"}
    assert datetime.now(timezone.utc) - usage["ts"].max() < timedelta(minutes=11)
    with pytest.raises(SystemExit) as exc:
        main(["--out", str(tmp_path / "x"), "--end", "yesterday-ish"])
    assert exc.value.code == 2
    assert "'yesterday-ish' is not 'now' or an ISO-8601 time" in capsys.readouterr().err


@pytest.mark.parametrize("nodes, line", [
    ([1, 2, 3], "alice and bob throttled on broker 2 only, svc-reports over its quota in total "
                "and under it on each of brokers 1, 2, 3, others under"),
    ([1], "alice, bob and svc-reports over their quotas on broker 1, the only one (on three "
          "brokers svc-reports would be under on each), others under"),
])
def test_the_load_is_told_as_it_runs_on_this_many_brokers(run_dashboard, nodes, line):
    assert run_dashboard.load_story(nodes) == line


def test_every_brokers_endpoint_is_configured_unlabelled(run_dashboard):
    """One endpoint per broker, from `localkafka up`'s lines, and no LABEL=: the scrape then
    labels each by its node id (before: one endpoint, labelled "local")."""
    from quota_core.telemetry.collector import parse_endpoints
    from ui.settings import metrics_endpoints

    out = ("metrics http://127.0.0.1:39703/metrics\nmetrics http://127.0.0.1:39191/metrics\n"
           "metrics http://127.0.0.1:35353/metrics\n"
           "127.0.0.1:39607,127.0.0.1:44845,127.0.0.1:34635\n")
    bootstrap, urls = run_dashboard.read_up(out)
    assert bootstrap == "127.0.0.1:39607,127.0.0.1:44845,127.0.0.1:34635"
    assert len(urls) == 3
    setting = run_dashboard.metrics_setting(urls)
    assert metrics_endpoints({"QUOTA_METRICS": setting}, {}) == setting
    endpoints = parse_endpoints(setting)  # as the app reads QUOTA_METRICS
    assert [e.url for e in endpoints] == urls
    assert not any(e.named for e in endpoints)  # so each broker is named by its node id


def test_the_demos_spark_jobs_stay_on_loopback(run_dashboard):
    env: dict[str, str] = {}
    run_dashboard.loopback_spark(env)
    assert env == {"SPARK_LOCAL_IP": "127.0.0.1"}
    env = {"SPARK_LOCAL_IP": "10.1.2.3"}  # the user's own choice stands
    run_dashboard.loopback_spark(env)
    assert env == {"SPARK_LOCAL_IP": "10.1.2.3"}
