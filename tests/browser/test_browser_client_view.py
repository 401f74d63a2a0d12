"""What a client reports itself (KIP-714, issue 30) in the real browser, on the real 3-broker
cluster: a confluent-kafka (librdkafka) producer over its produce quota on broker 2 pushes its
metrics under a short-interval subscription (made with ``kafka-client-quotas telemetry
subscribe``); the brokers' client-telemetry plugin shows them on their metrics endpoints, and
Resolve's live panel and Throttled now show the client instance beside the broker's verdict.
Screenshots land in ``artifacts/screenshots/`` and ``shots/`` (or ``QUOTA_TEST_SHOTS``)."""
from __future__ import annotations

import os
import re
import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest

from quota_core import Alteration, Entity, Op
from quota_core.backends.base import checked_alter
from tests import ROOT
from tests.browser.test_browser import SHOTS, expect, page, serve_app, settle, shot  # noqa: F401
from tests.cli_steps import run

pytestmark = [pytest.mark.browser, pytest.mark.kafka]
KiB = 1024
P = "producer_byte_rate"
QUOTA = 100 * KiB
USER = "ANONYMOUS"  # PLAINTEXT: every client's principal
TAG = uuid.uuid4().hex[:6]
CLIENT = f"bcv-librdkafka-{TAG}"
TOPIC = f"{CLIENT}-t"
SUBSCRIPTION = f"bcv-{TAG}"
ENTRY = Entity.of(user=USER, client_id=CLIENT)
COPIES = Path(os.environ.get("QUOTA_TEST_SHOTS") or ROOT / "shots")


def _shot(pg, name: str) -> None:
    shot(pg, name)
    COPIES.mkdir(parents=True, exist_ok=True)
    shutil.copy(SHOTS / name, COPIES / name)


def _fits(grid) -> None:
    """Every column of the table in view: the instance id is not cut off at the right edge."""
    scroller = grid.locator(".dvn-scroller").first
    width, room = scroller.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width <= room, (width, room)


def _produce(bootstrap: str, stop: threading.Event) -> None:
    """A librdkafka producer at twice its quota, all to broker 2, pushing its metrics."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": CLIENT, "linger.ms": 20,
                         "enable.metrics.push": True})
    payload = b"x" * KiB
    while not stop.is_set():
        start = time.monotonic()
        for _ in range(20):  # 200 KiB/s
            try:
                producer.produce(TOPIC, payload)
            except BufferError:
                break
        while (left := 0.1 - (time.monotonic() - start)) > 0 and not stop.is_set():
            producer.poll(left)
    producer.flush(10)


@pytest.fixture
def over_quota(kafka_cluster):
    """The quota, the subscription and the producer over the quota; all removed afterwards."""
    from confluent_kafka.admin import NewTopic
    from quota_core.backends.kafka import KafkaBackend
    from quota_core.telemetry.scrape import fetch_text

    cluster = kafka_cluster
    try:
        plugin = "kafka_client_telemetry_" in fetch_text(cluster.nodes[0].metrics_url, 5.0)
    except Exception:  # noqa: BLE001 - no agent on the broker: no plugin seen
        plugin = False
    if not plugin:
        pytest.skip("the brokers do not load the client-telemetry plugin")
    bs = cluster.bootstrap
    admin = cluster.admin()
    for f in admin.create_topics([NewTopic(TOPIC, num_partitions=1,
                                           replica_assignment=[[2]])]).values():
        f.result(30)
    backend = KafkaBackend(bs, timeout_s=15)
    assert checked_alter(backend, [Alteration(ENTRY, (Op.set(P, QUOTA),))]).ok
    code, _, err = run("telemetry", "subscribe", SUBSCRIPTION, "--metrics",
                       "org.apache.kafka.producer.", "--match", f"client_id={CLIENT}",
                       "--interval-ms", "1000", "--bootstrap-server", bs)
    assert code == 0, err
    time.sleep(1.0)  # the subscription and the quota reach every broker's metadata image
    stop = threading.Event()
    load = threading.Thread(target=_produce, args=(bs, stop), daemon=True)
    load.start()
    try:
        yield cluster
    finally:
        stop.set()
        load.join(20)
        run("telemetry", "unsubscribe", SUBSCRIPTION, "--bootstrap-server", bs)
        checked_alter(backend, [Alteration(ENTRY, (Op.remove(P),))])
        backend.close()
        for f in admin.delete_topics([TOPIC]).values():
            f.result(30)


def test_the_live_panel_and_throttled_now_show_what_the_client_reports(page, over_quota,  # noqa: F811
                                                                       tmp_path):
    started = time.monotonic()
    cluster = over_quota
    metrics = ",".join(n.metrics_url for n in cluster.nodes)
    app = serve_app({"QUOTA_BOOTSTRAP_SERVERS": cluster.bootstrap,
                     "QUOTA_CONNECTION_LABEL": "Local 3-broker cluster",
                     "QUOTA_METRICS": metrics, "QUOTA_LIVE_EVERY": "1"}, tmp_path)
    url = next(app)
    try:
        page.goto(f"{url}/?user={USER}&client_id={CLIENT}")
        settle(page)
        main = page.get_by_test_id("stMain")
        expect(main.get_by_text("Live: what the brokers measure")).to_be_visible()
        expect(main.get_by_text("What the clients report")).to_be_visible(timeout=30_000)
        expect(main).to_contain_text(re.compile(
            r"the broker throttles this bucket on broker 2, and the client reports waiting"),
            timeout=30_000)
        grid = main.get_by_test_id("stDataFrame").filter(has_text=CLIENT).first
        expect(grid).to_contain_text("confluent-kafka-python")
        expect(grid).to_contain_text(re.compile(r"\d+ ms"))
        expect(grid).to_contain_text(re.compile(r"\d+ s ago"))
        # A producer in the consumer_byte_rate bucket does not fetch (not "fix your
        # subscription"), and its produce wait under request_percentage is named as
        # producer_byte_rate's (not "look at other quotas"); no sentence shows raw backticks.
        expect(main).to_contain_text("the clients push produce throttle times but none for "
                                     "fetch: they do not fetch here")
        expect(main).to_contain_text(re.compile(
            r"waiting \d+ ms per request, from its producer_byte_rate quota, which the broker "
            r"throttles now; this key does not throttle it"))
        expect(main).not_to_contain_text("`")
        # consumer_byte_rate and controller_mutation_rate: no throttle pushed, and the same
        # instance as above; their sentences say so, no repeated table.
        expect(main.get_by_test_id("stDataFrame").filter(
            has_text="confluent-kafka-python")).to_have_count(2)
        _fits(grid)
        page.wait_for_timeout(500)
        _shot(page, "client-view-resolve.png")

        page.goto(f"{url}/throttled")
        settle(page)
        expect(main.get_by_role("heading", name="Throttled now")).to_be_visible()
        expect(main.get_by_text("What the clients report")).to_be_visible(timeout=20_000)
        expect(main).to_contain_text("the client reports waiting")
        grid = main.get_by_test_id("stDataFrame").filter(has_text="confluent-kafka-python").first
        expect(grid).to_contain_text(CLIENT)
        expect(grid).to_contain_text(re.compile(r"\d+ ms"))
        _fits(grid)
        page.wait_for_timeout(500)
        _shot(page, "client-view-throttled.png")
    finally:
        app.close()
    took = time.monotonic() - started
    assert took < 40, took
