"""The fleet in the real browser (issue 29), on two real clusters at once: the session's
single broker as "staging" and its 3-broker cluster as "prod" (no new cluster is started),
plus a "dead" cluster on a closed port. Opens /fleet, a cross-cluster Resolve and Drift, and
takes screenshots of each (``shots/``, or ``QUOTA_TEST_SHOTS``)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.backends.kafka import KafkaBackend
from tests import ROOT
from tests.browser.test_browser import _free_port, _make_exactly, expect, page, serve_app, settle  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.kafka]
MiB = 1024 * 1024
E = Entity.of
SHOTS = Path(os.environ.get("QUOTA_TEST_SHOTS")
             or ROOT / "shots")
STAGING = {E(user="alice"): {"producer_byte_rate": 4 * MiB},
           E(user="alice", client_id="checkout-api"): {"producer_byte_rate": 8 * MiB},
           E(user="svc-canary"): {"request_percentage": 25.0}}
PROD = {E(user="alice"): {"producer_byte_rate": 2 * MiB},
        E(user="alice", client_id="checkout-api"): {"producer_byte_rate": 8 * MiB}}


def shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / name), full_page=True)


@pytest.fixture
def fleet_url(kafka_broker, kafka_cluster, tmp_path):
    sets = ((kafka_broker.bootstrap, STAGING), (kafka_cluster.bootstrap, PROD))
    for bootstrap, quotas in sets:
        with KafkaBackend(bootstrap) as backend:
            _make_exactly(backend, quotas)
    config = tmp_path / "fleet.toml"
    config.write_text(
        f'[clusters.staging]\nlabel = "Staging"\nbootstrap_servers = "{kafka_broker.bootstrap}"\n'
        f'metrics = ["{kafka_broker.metrics_url}"]\n\n'
        f'[clusters.prod]\nlabel = "Prod"\nbootstrap_servers = "{kafka_cluster.bootstrap}"\n'
        f'read_only = true\n\n'
        f'[clusters.dead]\nbootstrap_servers = "127.0.0.1:{_free_port()}"\n')
    try:
        yield from serve_app({"QUOTA_CONFIG": str(config), "QUOTA_KAFKA_TIMEOUT": "4"},
                             tmp_path)
    finally:
        for bootstrap, _ in sets:  # leave the shared clusters clean
            with KafkaBackend(bootstrap) as backend:
                _make_exactly(backend, {})


def test_fleet_page_and_resolve_on_every_cluster(page, fleet_url):  # noqa: F811
    started = time.monotonic()
    page.goto(f"{fleet_url}/fleet")
    settle(page)
    table = page.get_by_test_id("stTable")
    expect(table).to_contain_text("unreachable since", timeout=20_000)
    expect(table).not_to_contain_text("checking…")
    rows = {name: table.locator("tbody tr", has_text=name) for name in ("Staging", "Prod")}
    for row in rows.values():
        expect(row.first).to_contain_text("reachable since")
    expect(rows["Prod"].first).to_contain_text("3")  # brokers
    expect(rows["Staging"].first).not_to_contain_text("unreachable")
    took = time.monotonic() - started
    assert took < 20, took
    expect(page).to_have_url(f"{fleet_url}/fleet?cluster=staging")
    shot(page, "fleet.png")

    page.goto(f"{fleet_url}/resolve?cluster=prod&user=alice&client_id=checkout-api&every=1")
    settle(page)
    every = page.get_by_test_id("stTable")
    expect(every).to_contain_text("Staging")
    expect(every.locator("tbody tr", has_text="Staging").first).to_contain_text(
        "8 MiB/s — {user=alice, client-id=checkout-api} (level 1)")
    expect(every.locator("tbody tr", has_text="Prod").first).to_contain_text("8 MiB/s")
    expect(every.locator("tbody tr", has_text="dead").first).to_contain_text("unreachable")
    shot(page, "resolve-every-cluster.png")

    page.goto(f"{fleet_url}/drift?a=staging&b=prod")
    settle(page)
    expect(page.get_by_text("2 differences")).to_be_visible()
    expect(page.get_by_text("Cluster 'prod' is read-only")).to_be_visible()
    expect(page.get_by_test_id("stTable")).to_contain_text("only on staging")
    shot(page, "drift.png")

    # prod -> staging: staging may be written; the promotion opens Plan bound to staging.
    page.goto(f"{fleet_url}/drift?a=prod&b=staging")
    settle(page)
    page.get_by_role("button", name="Plan this promotion").click()
    settle(page)
    expect(page).to_have_url(f"{fleet_url}/plan?cluster=staging&from_cluster=prod")
    page.get_by_role("button", name="Plan", exact=True).click()
    settle(page)
    expect(page.get_by_text("Promotion:")).to_be_visible()
    expect(page.get_by_role("heading", name="Changes")).to_be_visible()
    page.wait_for_timeout(1000)  # the diff's grid paints its canvas
    shot(page, "promotion-plan.png")
