"""Bucket membership (quota_core.domain.membership): the one bucket Kafka puts a client in per key,
checked against ClientQuotaManager.DefaultQuotaCallback.quotaMetricTags case by case; and
finding 1 of issue 15: a client is never blamed for a bucket it is not in."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from quota_core import Entity
from quota_core.throttling.live import client_buckets, join_usage, other_buckets, throttled_rows
from quota_core.domain.membership import Membership, bucket_tags

MiB = 1024 * 1024
P = "producer_byte_rate"
E = Entity.of


@dataclass(frozen=True)
class S:  # the shape of quota_core.telemetry.QuotaSeries
    broker: str
    quota_type: str
    attribute: str
    user: str | None
    client_id: str | None
    value: float


MIXED = {E(user="alice", client_id="checkout-api"): {P: 8 * MiB},    # level 1
         E(user="alice"): {P: 2 * MiB},                              # level 3
         E(user="bob", client_id=None): {P: 3 * MiB},                # level 2
         E(user=None, client_id="shared-tool"): {P: 5 * MiB},        # level 4
         E(client_id="mobile"): {P: 1 * MiB}}                        # level 7


@pytest.mark.parametrize("quotas, user, client_id, tags", [
    # Mixed kinds: the first rung holding the key decides; none: the client id alone.
    (MIXED, "alice", "checkout-api", ("alice", "checkout-api")),     # 1: both tags
    (MIXED, "alice", "batch-export", ("alice", None)),               # 3: user only
    (MIXED, "bob", "anything", ("bob", "anything")),                 # 2: both tags
    (MIXED, "carol", "shared-tool", ("carol", "shared-tool")),       # 4: both tags
    (MIXED, "carol", "mobile", (None, "mobile")),                    # 7: client id only
    (MIXED, "carol", "other", (None, "other")),                      # none: Kafka's client id
    (MIXED, "alice", "", ("alice", None)),                           # empty tag dropped
    # One kind only: every client gets that shape, even one no entry limits.
    ({E(user="alice"): {P: 1.0}}, "bob", "app", ("bob", None)),
    ({E(user=None): {P: 1.0}}, "bob", "app", ("bob", None)),         # 6
    ({E(user="a", client_id="b"): {P: 1.0}}, "x", "y", ("x", "y")),
    ({E(user=None, client_id=None): {P: 1.0}}, "x", "y", ("x", "y")),  # 5
    ({E(client_id=None): {P: 1.0}}, "x", "y", (None, "y")),          # 8
    ({}, "x", "y", (None, "y")),                                     # no quota at all
    # Another key's entries do not count.
    ({E(user="alice"): {"consumer_byte_rate": 1.0}, E(client_id="c"): {P: 1.0}},
     "alice", "c", (None, "c")),
])
def test_the_bucket_a_client_is_in(quotas, user, client_id, tags):
    assert bucket_tags(quotas, P, user, client_id) == tags


def test_levels_5_and_6_give_pair_and_user_buckets_in_mixed_sets():
    quotas = {E(user=None, client_id=None): {P: 1.0}, E(client_id="c"): {P: 2.0}}
    assert bucket_tags(quotas, P, "u", "c") == ("u", "c")            # 5 before 7
    quotas = {E(user=None): {P: 1.0}, E(client_id="c"): {P: 2.0}}
    assert bucket_tags(quotas, P, "u", "c") == ("u", None)           # 6 before 7


def test_old_shape_buckets_hold_nobody():
    m = Membership(MIXED)
    assert m.current(P, ("alice", None))           # alice's client ids without their own
    assert m.current(P, ("alice", "checkout-api"))
    assert not m.current(P, ("alice", "batch-export"))  # nobody: batch-export is in {alice}
    assert m.current(P, (None, "checkout-api"))   # carol's: no rung applies, Kafka's tags
    assert m.current(P, (None, "mobile"))
    # With {user=<default>} every user is in a user bucket: no client-id bucket holds anyone.
    m = Membership({**MIXED, E(user=None): {P: 4 * MiB}})
    assert not m.current(P, (None, "mobile")) and not m.current(P, (None, "other"))


# -- finding 1: a client with its own entry beside a throttled shared bucket -------------------
QUOTAS = {E(user="alice", client_id="checkout-api"): {P: 8 * MiB},
          E(user="alice"): {P: 2 * MiB}}
SERIES = [S("b1", "produce", "byte-rate", "alice", "checkout-api", 0.9 * MiB),
          S("b1", "produce", "byte-rate", "alice", None, 2.4 * MiB),
          S("b1", "produce", "throttle-time", "alice", None, 180.0)]


def test_own_bucket_only_and_the_shared_one_as_another_bucket():
    rows = join_usage(SERIES, QUOTAS)
    mine = client_buckets(rows, "alice", "checkout-api", QUOTAS)
    assert [(r.user, r.client_id, r.throttled) for r in mine] == \
        [("alice", "checkout-api", False)]
    others = other_buckets(rows, "alice", "checkout-api", QUOTAS)
    assert [(r.user, r.client_id, r.throttled) for r in others] == [("alice", None, True)]
    # batch-export is in {user=alice}: throttled there, and checkout-api is its other bucket.
    assert [(r.user, r.throttled) for r in client_buckets(rows, "alice", "batch-export",
                                                          QUOTAS)] == [("alice", True)]


def test_cli_resolve_metrics_json_reports_only_the_own_bucket(tmp_path):
    """--resolve --metrics … --output json for (alice, checkout-api): not throttled, one
    bucket, and {user=alice} listed apart as another bucket (was: throttled, both)."""
    from quota_core.cli import output
    from quota_core import resolve

    rows = join_usage(SERIES, QUOTAS)
    doc = json.loads(output.format_resolutions([resolve(QUOTAS, "alice", "checkout-api")],
                                               "json", rows, QUOTAS))
    live = doc["quotas"][P]["live"]
    assert live["throttled"] is False
    assert [b["bucket"] for b in live["brokers"]] == [{"user": "alice",
                                                        "client-id": "checkout-api"}]
    assert live["bucket"] == {"user": "alice", "client-id": "checkout-api"}
    assert [(b["bucket"], b["throttled"]) for b in live["other_buckets"]] == \
        [({"user": "alice", "client-id": None}, True)]
    text = output.format_resolutions([resolve(QUOTAS, "alice", "checkout-api")], "text",
                                     rows, QUOTAS)
    own = [line for line in text.splitlines() if line.startswith("  live ")]
    assert own and all("throttled" not in line.replace("not throttled", "") for line in own)


def test_throttled_marks_an_old_shape_bucket():
    # After {user=alice} was removed: pairs and client ids, so no client is in {user=alice}.
    quotas = {E(user="alice", client_id="checkout-api"): {P: 8 * MiB},
              E(client_id="x"): {P: 1 * MiB}}
    rows = join_usage([S("b1", "produce", "byte-rate", "alice", None, 3 * MiB),
                       S("b1", "produce", "throttle-time", "alice", None, 500.0)], quotas)
    [row] = throttled_rows(rows)
    assert row.current is False
    from quota_core.cli.output import format_throttled

    assert "no client is in this bucket now" in format_throttled([row], "plain")
    assert json.loads(format_throttled([row], "json"))[0]["current"] is False


# -- the same through the CLI, scraping a metrics endpoint (a tiny real HTTP server) -----------
PROMETHEUS = """\
kafka_server_produce_byte_rate{user="alice",client_id="checkout-api"} 943718.4
kafka_server_produce_byte_rate{user="alice"} 2516582.4
kafka_server_produce_throttle_time{user="alice"} 180.0
"""


@pytest.fixture
def endpoint():
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = PROMETHEUS.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_cli_resolve_metrics_on_a_client_beside_a_throttled_shared_bucket(tmp_path, endpoint):
    from tests.cli_steps import run, sandbox_with

    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
                         "checkout-api", "--metrics", f"b1={endpoint}", "--output", "json")
    assert code == 0, err
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is False
    assert [b["bucket"] for b in live["brokers"]] == [{"user": "alice",
                                                        "client-id": "checkout-api"}]
    code, out, err = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
                         "batch-export", "--metrics", f"b1={endpoint}", "--output", "json")
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is True
    assert [b["bucket"] for b in live["brokers"]] == [{"user": "alice", "client-id": None}]


def test_current_matches_trying_every_known_name():
    """The shortcut in Membership.current (try one unknown name) against trying them all."""
    import itertools
    import random

    from quota_core.domain import ladder

    rng = random.Random(7)
    users, clients = ["a", "b"], ["x", "y"]
    for _ in range(300):
        quotas = {}
        for r in ladder.LADDER:
            if rng.random() < 0.4:
                quotas[r.entity_for(rng.choice(users), rng.choice(clients))] = {P: 1.0}
        m = Membership(quotas)
        everyone = list(itertools.product(users + ["fresh"], clients + ["fresh", ""]))
        held = {m.tags(P, u, c) for u, c in everyone}
        for tags in [(u, None) for u in users] + [(None, c) for c in clients] + \
                [(u, c) for u in users for c in clients]:
            assert m.current(P, tags) is (tags in held), (quotas, tags)


def test_edit_preview_does_not_judge_a_bucket_its_clients_leave():
    """Edit/Plan previews at today's rates: removing {user=alice} for a client-id default
    empties alice's user bucket (her clients move to client-id buckets): not "freed"."""
    from quota_core.throttling.live import traffic_impact
    from ui.render import traffic_rows

    before = {E(user="alice"): {P: 1 * MiB}}
    after = {E(client_id=None): {P: 1 * MiB}}
    series = [S("b1", "produce", "byte-rate", "alice", None, 3 * MiB),
              S("b1", "produce", "throttle-time", "alice", None, 900.0)]
    [change] = traffic_impact(before, after, series)
    assert change.verdict == "clients move to another bucket"
    assert traffic_rows([change])[0]["verdict"] == "clients move to another bucket"


def test_cli_text_lists_the_other_bucket_apart():
    from quota_core.cli import output
    from quota_core import resolve

    rows = join_usage(SERIES, QUOTAS)
    text = output.format_resolutions([resolve(QUOTAS, "alice", "checkout-api")], "plain",
                                     rows, QUOTAS)
    lines = [line for line in text.splitlines() if line.startswith("  ")]
    assert any(line.startswith("  live b1:") and line.endswith("not throttled") for line in lines)
    [other] = [line for line in lines if "another bucket" in line]
    assert other.startswith("  another bucket {user=alice} on b1:")
    assert "throttled 180 ms" in other and other.endswith(": not this client's")
