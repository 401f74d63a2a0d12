"""The differential of verdicts on a real broker (issue 15): several real clients under a quota
set with pair, user, client-id and default entries; for every client the console's verdict
(throttled or not, which entry, which bucket) must agree with the client's own throttle
figures: Kafka's ProducerPerformance (``produce-throttle-time-max``) and confluent-kafka
(librdkafka's ``throttle_cb``). The bucket the console puts each client in must be the one
the broker reports its traffic in.

Two quota sets run in the suite (alice/checkout-api with an entry of its own at low use beside
a throttled shared {user=alice}, as in the issue; then pair-default, default-user pair and
user-default entries). More seeded random sets: ``QUOTA_DIFFERENTIAL_SEEDS=5`` (each adds a
set, about 70 s each: the broker's throttle-time averages linger for a minute, so the sets are
spaced). Figures land in ``artifacts/verdict_differential.json``.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from quota_core import Entity, resolve
from quota_core.throttling.live import join_usage
from quota_core.domain.membership import Membership
from quota_core.telemetry import scrape
from quota_core.throttling.verdict import key_verdict
from tests import ROOT
from tests.truth.test_live_kafka import client_metric, confluent_producer, make_exactly

pytestmark = pytest.mark.kafka

KiB = 1024
P = "producer_byte_rate"
SECONDS = 16        # each client's run
SCRAPE_AT = 13      # past the broker's 10 s rate window
ARTIFACTS = ROOT / "artifacts"
RESULTS: dict[str, object] = {"sets": []}


@dataclass(frozen=True)
class Client:
    user: str
    client_id: str
    rate_kib: int
    java: bool = False  # Kafka's ProducerPerformance, else a confluent-kafka producer


E = Entity.of
SET_A = ("issue case: own entry beside a shared user entry; client-id entry shared by users",
         {E(user="alice", client_id="checkout-api"): 256,     # 1: its own, at low use
          E(user="alice"): 64,                                # 3: alice's other client ids
          E(client_id="mobile"): 48},                         # 7: every user of "mobile"
         [Client("alice", "checkout-api", 40, java=True),     # 16 %: not throttled
          Client("alice", "batch-export", 320),               # {user=alice}: throttled
          Client("carol", "mobile", 200),                     # {client-id=mobile}: throttled
          Client("bob", "mobile", 20),                        # the same bucket: throttled too
          Client("svc-reports", "reports", 40)])              # no level: unlimited
SET_B = ("defaults: pair-default, default-user pair, user default",
         {E(user="bob", client_id=None): 16,                  # 2: each of bob's client ids
          E(user=None, client_id="checkout-api"): 256,        # 4: checkout-api of any user
          E(user=None): 128},                                 # 6: every user their own
         [Client("alice", "checkout-api", 40, java=True),     # level 4: not throttled
          Client("alice", "batch-export", 320),               # {user=alice} via 6: throttled
          Client("carol", "mobile", 320, java=True),          # her own user bucket: throttled
          Client("bob", "mobile", 40),                        # (bob, mobile) via 2: throttled
          Client("svc-reports", "reports", 40)])              # her own user bucket: 31 %


def random_set(seed: int):
    """A seeded quota set over the roster whose every bucket is far from its quota (under 40 %
    or over 250 %), so the broker's verdict is not a coin toss."""
    from quota_core.domain import ladder

    rng = random.Random(seed)
    tag = f"s{seed}"
    roster = [Client("alice", f"checkout-api.{tag}", 40, java=True),
              Client("alice", f"batch-export.{tag}", rng.choice([40, 320])),
              Client("carol", f"mobile.{tag}", rng.choice([40, 200])),
              Client("bob", f"mobile.{tag}", 20),
              Client("svc-reports", f"reports.{tag}", rng.choice([20, 200]))]
    for _ in range(500):
        entries: dict[Entity, int] = {}
        for r in ladder.LADDER:
            if rng.random() < 0.4:
                c = rng.choice(roster)
                entries[r.entity_for(c.user, c.client_id)] = 0
        members = Membership({e: {P: 1.0} for e in entries})
        totals: dict[tuple, int] = {}
        for c in roster:
            totals[members.tags(P, c.user, c.client_id)] = \
                totals.get(members.tags(P, c.user, c.client_id), 0) + c.rate_kib
        # Each entry's value: far above or far below every bucket total it decides.
        decides: dict[Entity, list[int]] = {}
        for c in roster:
            source = resolve({e: {P: 1.0} for e in entries}, c.user, c.client_id).keys[P].source
            if source is not None:
                decides.setdefault(source, []).append(totals[members.tags(P, c.user,
                                                                          c.client_id)])
        ok = True
        for entity in list(entries):
            seen = decides.get(entity)
            if not seen:
                entries[entity] = rng.choice([16, 512])
            elif rng.random() < 0.5 and min(seen) * 0.4 >= 8:
                entries[entity] = int(min(seen) * 0.4)
            elif max(seen) * 2.5 <= 2048:
                entries[entity] = int(max(seen) * 3)
            else:
                ok = False
        java = roster[0]
        quotas = {e: {P: v * KiB} for e, v in entries.items()}
        limit = resolve(quotas, java.user, java.client_id).keys[P].value
        if limit is not None and limit < 3 * java.rate_kib * KiB:
            roster[0] = Client(java.user, java.client_id, java.rate_kib, java=False)
        expected = set()
        for c in roster:
            bucket_limit = resolve(quotas, c.user, c.client_id).keys[P].value
            total = totals[members.tags(P, c.user, c.client_id)] * KiB
            expected.add(bucket_limit is not None and total > bucket_limit)
        if ok and entries and expected == {True, False}:  # both outcomes, every set
            return (f"seed {seed}", entries, roster)
    raise AssertionError(f"no usable quota set for seed {seed}")


SEEDS = int(os.environ.get("QUOTA_DIFFERENTIAL_SEEDS", "0") or 0)
SETS = [SET_A, SET_B] + [random_set(1000 + i) for i in range(SEEDS)]


@pytest.fixture(scope="module")
def cluster(kafka_sasl_broker, tmp_path_factory):
    from confluent_kafka.admin import NewTopic
    from quota_core.backends.kafka import KafkaBackend

    tmp = tmp_path_factory.mktemp("verdicts")
    props = kafka_sasl_broker.write_command_config(tmp / "admin.properties", "admin")
    backend = KafkaBackend.from_command_config(kafka_sasl_broker.bootstrap, props)
    topic = f"verdicts-{uuid.uuid4().hex[:8]}"
    admin = kafka_sasl_broker.admin("admin")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    found = backend.describe()
    yield kafka_sasl_broker, backend, topic, tmp
    make_exactly(backend, found)
    backend.close()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "verdict_differential.json").write_text(json.dumps(RESULTS, indent=2))


def test_the_quota_window_is_read_from_the_broker(cluster):
    broker, backend, _, _ = cluster
    window = backend.quota_window()
    assert (window.samples, window.sample_s) == (11, 1)   # localkafka leaves Kafka's defaults
    assert window.source == "broker 1"                    # read, not assumed


def test_a_window_other_than_kafkas_defaults_is_read(tmp_path):
    """A broker started with quota.window.num=5 and quota.window.size.seconds=2: the console
    reads those (not the defaults), and its throttle arithmetic uses them."""
    from localkafka import LocalBroker
    from quota_core.backends.kafka import KafkaBackend
    from quota_core.throttling.throttle import estimate_throttle

    broker = LocalBroker(tmp_path / "b", overrides={"quota.window.num": "5",
                                                    "quota.window.size.seconds": "2"})
    try:
        broker.start(timeout=float(os.environ.get("LOCALKAFKA_START_TIMEOUT", "120")))
        with KafkaBackend(broker.bootstrap) as backend:
            window = backend.quota_window()
    finally:
        broker.stop()
    assert (window.samples, window.sample_s, window.source) == (5, 2, "broker 1")
    assert window.measured_ms == (8_000, 10_000)
    # Twice the quota: one measured window of delay, (5 - 1) × 2 s.
    assert estimate_throttle(P, 2.0, 1.0, window=window).throttle_ms == 8_000


def java_producer(broker, tmp: Path, topic: str, c: Client, records: int) -> subprocess.Popen:
    """Kafka's ProducerPerformance as ``c.user``: ``records`` of 1 KiB at ``c.rate_kib``."""
    from localkafka import tool_argv

    props = broker.write_command_config(tmp / f"{c.user}-{c.client_id}.properties", c.user)
    return subprocess.Popen(tool_argv(
        "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
        "--num-records", str(records), "--record-size", "1024", "--throughput",
        str(c.rate_kib), "--producer.config", str(props), "--producer-props",
        f"bootstrap.servers={broker.bootstrap}", f"client.id={c.client_id}", "acks=1",
        "--print-metrics"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _records(c: Client, roster: list[Client], quotas) -> int:
    """A Java client runs about SECONDS + 2 s: at its rate, or throttled to its bucket's
    quota (the broker keeps the bucket's average at the quota), by its share of it."""
    members = Membership(quotas)
    tags = members.tags(P, c.user, c.client_id)
    total = sum(x.rate_kib for x in roster if members.tags(P, x.user, x.client_id) == tags)
    limit = resolve(quotas, c.user, c.client_id).keys[P].value
    if limit is None or total * KiB <= limit:
        return c.rate_kib * SECONDS
    share = limit / KiB * c.rate_kib / total
    return int(share * (SECONDS + 2))


def _run(broker, topic, tmp, roster: list[Client], quotas):
    """Start every client: (Java processes, confluent-kafka threads with their throttles)."""
    procs, threads = [], []
    for c in roster:
        if c.java:
            procs.append((c, java_producer(broker, tmp, topic, c,
                                           _records(c, roster, quotas))))
        else:
            throttles: list[float] = []
            threads.append((c, throttles, confluent_producer(
                broker, topic, c.user, c.client_id, c.rate_kib, SECONDS, throttles)))
    return procs, threads


@pytest.mark.parametrize("name, entries, roster", SETS, ids=[s[0].split(":")[0] for s in SETS])
def test_console_verdicts_agree_with_the_clients(cluster, name, entries, roster):
    broker, backend, topic, tmp = cluster
    if SETS.index((name, entries, roster)) >= 2:
        time.sleep(50)  # the broker's throttle-time averages of the last set fade (2 × 30 s)
    quotas = {e: {P: v * KiB} for e, v in entries.items()}
    make_exactly(backend, quotas)
    quotas = backend.describe()
    window = backend.quota_window()
    procs, threads = _run(broker, topic, tmp, roster, quotas)
    try:
        time.sleep(SCRAPE_AT)
        rows = join_usage(scrape(broker.metrics_url, "b1"), quotas)
    finally:
        outputs = {}
        for c, proc in procs:
            try:
                outputs[c] = proc.communicate(timeout=120)[0]
            except subprocess.TimeoutExpired:
                proc.kill()
                outputs[c] = proc.communicate()[0]
        for _, _, thread in threads:
            thread.join(60)

    client_saw: dict[Client, tuple[bool, float]] = {}
    for c, proc in procs:
        assert proc.returncode == 0, outputs[c][-2000:]
        worst = client_metric(outputs[c], "produce-throttle-time-max", c.client_id)
        client_saw[c] = (worst == worst and worst > 0, worst)
    for c, throttles, _ in threads:
        client_saw[c] = (bool(throttles), max(throttles, default=0.0))

    verdicts = []
    for c in roster:
        resolution = resolve(quotas, c.user, c.client_id)
        v = key_verdict(resolution, P, quotas, rows, window)
        saw, figure = client_saw[c]
        # The client's figure covers its whole run (its worst throttle): the console's
        # "throttled now" or "throttled recently" (issue 27: one read can catch a throttled
        # client's rate far under its quota as the broker's rate window rolls over).
        console = bool(v.throttled or v.recent)
        verdicts.append({
            "client": [c.user, c.client_id], "kind": "java" if c.java else "librdkafka",
            "rate_kib": c.rate_kib, "level": v.level,
            "entry": None if v.entry is None else v.entry.display(),
            "bucket": list(v.bucket), "console_throttled": console,
            "console_now": v.throttled, "client_throttled": saw, "client_figure_ms": figure,
            "bucket_rate": [b.rate for b in v.brokers or ()],
            "limit": v.limit, "agree": console == saw})
    # The broker's buckets with traffic are exactly the buckets the console puts them in.
    users = {c.user for c in roster}
    active = {(r.user, r.client_id) for r in rows if r.quota_type == "produce"
              and r.rate and r.rate > 1024 and (r.user in users or r.user is None)
              and (r.client_id is None or any(r.client_id == c.client_id for c in roster))}
    expected = {tuple(v["bucket"]) for v in verdicts}
    RESULTS["sets"].append({"name": name, "entries": {e.display(): v for e, v in entries.items()},
                            "window": window.as_dict(), "verdicts": verdicts,
                            "broker_buckets": sorted(map(list, active), key=str)})
    assert active == expected, (active, expected)
    disagree = [v for v in verdicts if not v["agree"]]
    assert not disagree, json.dumps(verdicts, indent=1)
    # Both outcomes are exercised in every set.
    assert {v["console_throttled"] for v in verdicts} == {True, False}, verdicts
