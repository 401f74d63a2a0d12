"""The dashboard over a fleet (issue 29), in AppTest on sandbox clusters: the cluster picker
and ``?cluster=``, an unknown cluster, the Fleet page with a dead cluster, read-only refusal,
Resolve on every cluster, and Drift with its promotion into Plan."""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.backends.sandbox import SandboxBackend
from quota_core.changes.audit import AuditLog
from quota_core.domain.fleet import ClusterConfig
from tests import ROOT
from tests.app_steps import run_app, table_rows, texts
from ui.fleet import over_fleet, pick_cluster, unknown_cluster

MiB = 1024 * 1024
E = Entity.of
ENV_VARS = ("QUOTA_SANDBOX", "QUOTA_BOOTSTRAP_SERVERS", "QUOTA_COMMAND_CONFIG", "QUOTA_CONFIG",
            "QUOTA_CONNECTION_LABEL", "QUOTA_READ_ONLY", "QUOTA_EDITORS", "QUOTA_USER_HEADER",
            "QUOTA_TRUST_PROXY_HEADER", "QUOTA_IDENTITY_CLAIM", "QUOTA_CACHE_TTL",
            "QUOTA_KAFKA_TIMEOUT", "QUOTA_METRICS", "QUOTA_METRICS_TEMPLATE")

STAGING = {E(user="alice"): {"producer_byte_rate": 2 * MiB},
           E(user="alice", client_id="checkout-api"): {"consumer_byte_rate": 4 * MiB},
           E(client_id="batch"): {"request_percentage": 50.0}}
PROD = {E(user="alice"): {"producer_byte_rate": 1 * MiB},
        E(user="bob"): {"producer_byte_rate": 3 * MiB}}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fleet(monkeypatch, tmp_path) -> dict:
    """Secrets with a fleet of two sandboxes (prod read-only) and one dead Kafka cluster."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    paths = {}
    for name, quotas in (("staging", STAGING), ("prod", PROD)):
        paths[name] = tmp_path / f"{name}.sqlite"
        with SandboxBackend(paths[name]) as backend:
            backend.replace_all(quotas)
    return {"clusters": {
        "staging": {"sandbox": str(paths["staging"])},
        "prod": {"sandbox": str(paths["prod"]), "read_only": True, "label": "Production"},
    }, "kafka": {"timeout_seconds": 2}}


def with_dead(secrets: dict) -> dict:
    clusters = dict(secrets["clusters"])
    clusters["dead"] = {"bootstrap_servers": f"127.0.0.1:{_closed_port()}"}
    return {**secrets, "clusters": clusters}


def alerts(at) -> list[str]:
    return texts(at.error) + texts(at.warning) + texts(at.info)


# -- pure: the choice of cluster, and reading many at once --------------------------------------
@pytest.mark.parametrize("asked, remembered, expected", [
    (None, None, ("staging", None)),             # the first cluster
    (None, "prod", ("prod", None)),              # this session's pick
    ("prod", "staging", ("prod", None)),         # the address wins
    ("nope", "staging", (None, unknown_cluster("nope", ["staging", "prod"]))),
])
def test_pick_cluster(asked, remembered, expected):
    assert pick_cluster(["staging", "prod"], asked, remembered) == expected


def test_over_fleet_bounds_a_slow_cluster_by_the_timeout():
    clusters = [ClusterConfig("fast", sandbox="/x"), ClusterConfig("slow", sandbox="/y"),
                ClusterConfig("broken", sandbox="/z")]

    def work(c):
        if c.name == "slow":
            time.sleep(3)
        if c.name == "broken":
            raise RuntimeError("refused")
        return c.name

    started = time.monotonic()
    got = {c.name: (r, e) for c, r, e in over_fleet(clusters, work, 0.5)}
    assert time.monotonic() - started < 1.5
    assert got == {"fast": ("fast", None), "broken": (None, "RuntimeError: refused"),
                   "slow": (None, "no answer within 0.5 s")}


# -- the picker and the address ---------------------------------------------------------------
def test_picker_and_address_show_the_named_cluster(fleet):
    at = run_app("pages/browse.py", secrets=fleet, query={"cluster": "prod"})
    picker = at.sidebar.selectbox(key="fleet_cluster")
    assert picker.value == "prod"
    assert at.query_params["cluster"] == ["prod"] or at.query_params["cluster"] == "prod"
    card = " ".join(texts(at.sidebar.success))
    assert "Production" in card and "2 quota entries" in card
    picker.select("staging").run()
    assert not at.exception
    assert "3 quota entries" in " ".join(texts(at.sidebar.success))
    assert "staging" in str(at.query_params["cluster"])


def test_unknown_cluster_names_the_known_ones_and_shows_no_data(fleet):
    at = run_app("pages/browse.py", secrets=fleet, query={"cluster": "nope"})
    shown = " ".join(alerts(at))
    assert "'nope'" in shown and "Known clusters: staging, prod." in shown
    assert not at.sidebar.success  # no cluster's card: nothing connected
    assert not at.dataframe


def test_a_read_only_cluster_refuses_edit_and_plan(fleet):
    for page in ("pages/edit.py", "pages/plan.py"):
        at = run_app(page, secrets=fleet, query={"cluster": "prod"}, operator="jdoe")
        assert "cluster 'prod' is read-only (read_only = true in the fleet's configuration): " \
               "nothing was written." in " ".join(texts(at.error))
        assert [b.key for b in at.button] == ["refresh_snapshot"]  # no Plan, no Apply
    at = run_app("pages/edit.py", secrets=fleet, query={"cluster": "staging"}, operator="jdoe")
    assert not any("read-only" in t for t in texts(at.error))


def test_editors_are_per_cluster(fleet):
    fleet["clusters"]["staging"]["editors"] = ["someone-else"]
    at = run_app("pages/edit.py", secrets=fleet, query={"cluster": "staging"}, operator="jdoe")
    assert any("jdoe" in t for t in texts(at.warning)), texts(at.warning)


# -- the Fleet page -------------------------------------------------------------------------------
def test_fleet_page_rows_with_a_dead_cluster(fleet):
    started = time.monotonic()
    at = run_app("pages/fleet.py", secrets=with_dead(fleet))
    assert time.monotonic() - started < 20
    (table,) = at.table
    rows = {r["cluster"]: r for r in table_rows(table)}
    assert set(rows) == {"staging", "prod", "dead"}
    assert rows["staging"]["state"].startswith("reachable since ")
    assert rows["staging"]["quota entries"] == "3" and rows["prod"]["quota entries"] == "2"
    assert rows["staging"]["brokers"] == "—" or rows["staging"]["brokers"].isdigit()
    assert rows["prod"]["read-only"] == "yes"
    assert rows["staging"]["throttled now"] == "unknown (no metrics configured)"
    assert rows["dead"]["state"].startswith("unreachable since ")
    assert rows["dead"]["why"] and rows["dead"]["quota entries"] == "—"
    assert rows["dead"]["throttled now"] == "—"


# -- Resolve on every cluster ---------------------------------------------------------------------
def test_resolve_on_every_cluster(fleet):
    at = run_app("pages/resolve.py", secrets=fleet,
                 query={"cluster": "staging", "user": "alice", "client_id": "checkout-api",
                        "every": "1"})
    (rows,) = [d for d in at.table if "cluster" in d.value.columns]
    by = {r["cluster"]: r for r in table_rows(rows)}
    assert by["staging"]["producer_byte_rate"] == "2 MiB/s — {user=alice} (level 5)" or \
        by["staging"]["producer_byte_rate"].startswith("2 MiB/s — {user=alice}")
    assert by["Production"]["producer_byte_rate"].startswith("1 MiB/s — {user=alice}")
    assert by["staging"]["consumer_byte_rate"].startswith(
        "4 MiB/s — {user=alice, client-id=checkout-api}")
    assert by["Production"]["consumer_byte_rate"] == "unlimited (no entry)"
    assert "Differs between the clusters: producer_byte_rate, consumer_byte_rate." in \
        texts(at.caption)


# -- Drift and the promotion ------------------------------------------------------------------------
def test_drift_and_plan_this_promotion(fleet):
    fleet["clusters"]["prod"]["read_only"] = False
    at = run_app("pages/drift.py", secrets=fleet, operator="jdoe")
    at.selectbox(key="dr_b").select("prod").run()
    at.selectbox(key="dr_a").select("staging").run()
    assert (at.query_params["a"], at.query_params["b"]) in (("staging", "prod"),
                                                            (["staging"], ["prod"]))
    (table,) = at.table
    rows = {(r["entity"], r["key"]): r for r in table_rows(table)}
    assert rows[("{user=alice}", "producer_byte_rate")]["staging"] == "2 MiB/s"
    assert rows[("{user=alice}", "producer_byte_rate")]["prod"] == "1 MiB/s"
    assert rows[("{user=bob}", "producer_byte_rate")][""] == "only on prod"
    assert len(rows) == 4
    at.button(key="dr_promote").click().run()
    assert not at.exception, [e.value for e in at.exception]
    # AppTest reruns the page it was switched to: follow the switch to Plan by hand.
    assert (at.query_params["cluster"], at.query_params["from_cluster"]) in (
        ("prod", "staging"), (["prod"], ["staging"]))
    at.switch_page("pages/plan.py").run()
    assert any("Promotion:" in t for t in texts(at.markdown)), texts(at.markdown)
    at.button(key="pl_plan_btn").click().run()
    (diff,) = [d for d in at.dataframe if "after" in d.value.columns]
    changes = {(r["entity"], r["key"]): r["after"] for r in diff.value.to_dict("records")}
    assert changes == {("{user=alice}", "producer_byte_rate"): "2 MiB/s",
                       ("{user=alice, client-id=checkout-api}", "consumer_byte_rate"): "4 MiB/s",
                       ("{client-id=batch}", "request_percentage"): "50% of a thread",
                       ("{user=bob}", "producer_byte_rate"): "not set"}
    # Applied to prod (the cluster the plan is bound to), prod holds staging's set.
    at.checkbox(key="pl_confirm").check().run()
    at.button(key="pl_apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    with SandboxBackend(fleet["clusters"]["prod"]["sandbox"]) as prod:
        assert prod.describe() == STAGING
    # The audit records name the fleet's cluster; the Fleet page shows who changed it last.
    records = AuditLog(os.environ["QUOTA_AUDIT_LOG"]).read()
    assert {r.cluster.get("name") for r in records} == {"prod"}
    assert {r.extra.get("promoted_from") for r in records} == {"staging"}
    at = run_app("pages/fleet.py", secrets=fleet)
    rows = {r["cluster"]: r for r in table_rows(at.table[0])}
    assert rows["prod"]["by"] == "jdoe" and rows["staging"]["by"] == "—"


# -- make run ARGS="--fleet": the file it writes ------------------------------------------------
def test_run_fleet_writes_a_fleet_file_the_console_reads(tmp_path):
    import importlib.util

    from quota_core.domain.fleet import parse_fleet

    script = ROOT / "scripts" / "run_dashboard.py"
    spec = importlib.util.spec_from_file_location("run_dashboard_fleet", script)
    rd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rd)
    runs = {"staging": ("Staging (1 broker)", rd.LocalRun(
                "127.0.0.1:9092", ["http://127.0.0.1:9404/metrics"], tmp_path / "s.properties",
                [1], None)),
            "prod": ("Prod (3 brokers)", rd.LocalRun(
                "127.0.0.1:9192,127.0.0.1:9193", [], tmp_path / "p.properties", [1, 2, 3], None))}
    fleet = parse_fleet(rd.fleet_toml(runs, history={"prod": tmp_path / "h"}),
                        source="fleet-demo.toml", base_dir=str(tmp_path))
    assert fleet.names() == ["staging", "prod"]
    # the demo history is prod's alone: staging shows none rather than prod's
    assert (fleet.clusters["prod"].history_dir, fleet.clusters["staging"].history_dir) == \
        (str(tmp_path / "h"), None)
    assert fleet.clusters["staging"].metrics == ("http://127.0.0.1:9404/metrics",)
    assert fleet.clusters["prod"].command_config == str(tmp_path / "p.properties")
    assert fleet.clusters["prod"].display_name == "Prod (3 brokers)"
    # staging differs from prod in a few entries: something to show on Drift
    from localkafka.demo import demo_quotas
    from quota_core.planning.drift import quota_drift

    assert 3 <= len(quota_drift("staging", rd.staging_quotas(), "prod", demo_quotas())) <= 8


def test_throttled_now_reads_the_picked_clusters_metrics_only(fleet, monkeypatch):
    # console-wide endpoints are not the fleet cluster's: it has none of its own
    monkeypatch.setenv("QUOTA_METRICS", "http://127.0.0.1:9/metrics")
    at = run_app("pages/throttled.py", secrets=fleet, query={"cluster": "staging"})
    assert any("Cluster 'staging' has no metrics endpoints" in t for t in texts(at.info)), \
        texts(at.info)


def test_without_a_fleet_file_the_one_cluster_is_default(fleet, monkeypatch):
    monkeypatch.setenv("QUOTA_SANDBOX", fleet["clusters"]["staging"]["sandbox"])
    at = run_app("pages/browse.py", query={"cluster": "nope"})
    assert any("Known clusters: default." in t for t in alerts(at)), alerts(at)
    assert not at.sidebar.success
    at = run_app("pages/browse.py")  # no fleet: no picker, and the address is left alone
    assert "cluster" not in at.query_params
    assert not [s for s in at.sidebar.selectbox if s.key == "fleet_cluster"]
    assert "3 quota entries" in " ".join(texts(at.sidebar.success))


def test_throttled_count_is_never_a_false_all_clear():
    from ui.fleet import throttled_count
    from ui.live import Down, Frame

    assert throttled_count(None, {}) == "unknown (no scrape yet)"
    partial = Frame(0.0, (), {"h:1": "refused"}, (Down("h:1", "refused", None),))
    assert throttled_count(partial, {}) == "unknown (1 of the metrics endpoints not read)"
    assert throttled_count(Frame(0.0, ()), {}) == "0"


def test_drift_with_a_dead_cluster_names_it(fleet):
    at = run_app("pages/drift.py", secrets=with_dead(fleet))
    at.selectbox(key="dr_b").select("dead").run()
    errors = " ".join(texts(at.error))
    assert "Cluster 'dead' cannot be read: Cannot reach the Kafka cluster" in errors, errors
    assert not at.table


def test_a_malformed_fleet_file_is_named_not_a_traceback(fleet, monkeypatch, tmp_path):
    bad = tmp_path / "fleet.toml"
    bad.write_text('[clusters.prod]\nbootstrap_servers = "a:1"\nbootstrap_server = "b:1"\n')
    monkeypatch.setenv("QUOTA_CONFIG", str(bad))
    at = run_app("pages/fleet.py")
    shown = " ".join(alerts(at))
    assert "The fleet's configuration cannot be used" in shown and "bootstrap_server" in shown


def test_history_is_the_picked_clusters_own(fleet, monkeypatch, tmp_path):
    monkeypatch.setenv("QUOTA_HISTORY_DIR", str(tmp_path / "console-history"))
    fleet["clusters"]["staging"]["history_dir"] = str(tmp_path / "staging-history")
    at = run_app("pages/history.py", secrets=fleet, query={"cluster": "staging"})
    shown = " ".join(alerts(at) + texts(at.caption) + texts(at.markdown))
    assert "staging-history" in shown and "console-history" not in shown, shown
    # prod has no history_dir: the console-wide history is not shown under its name
    at = run_app("pages/history.py", secrets=fleet, query={"cluster": "prod"})
    shown = " ".join(alerts(at) + texts(at.caption) + texts(at.markdown))
    assert "console-history" not in shown, shown
    assert "No usage history for cluster `prod`: give it its own `history_dir`" in shown, shown


HOSTILE = ("**PWN**_`c`$x$[l](http://e.test)|t|<b>x</b>", "<default>", "a=b,c%20 d")


def test_drift_shows_hostile_names_as_written(fleet):
    """Entity names are opaque text on the Drift page: markup, a user literally named
    `<default>`, `=`, `,` and `%` come back exactly, each in its own row."""
    with SandboxBackend(fleet["clusters"]["staging"]["sandbox"]) as backend:
        backend.replace_all({**STAGING, **{E(user=name): {"consumer_byte_rate": (n + 1) * MiB}
                                           for n, name in enumerate(HOSTILE)}})
    at = run_app("pages/drift.py", secrets=fleet, query={"a": "staging", "b": "prod"})
    assert not at.exception, [e.value for e in at.exception]
    shown = [str(r["entity"]) for t in at.table for r in table_rows(t)]
    for name in HOSTILE:
        assert E(user=name).display() in shown, (name, shown)
