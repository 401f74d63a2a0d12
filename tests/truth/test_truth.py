"""Issue 27: one rule for a live verdict, and "now" means now (docs/interfaces.md, "Live
verdicts"). Pure tables plus the CLI against real endpoints on 127.0.0.1 (one answering, one
refusing)."""
from __future__ import annotations

import json
import socket
from types import SimpleNamespace as F

import pytest

from quota_core import Entity
from quota_core.throttling.coverage import unread_brokers
from quota_core.throttling.live import BucketUsage, NOW_SHARE, live_verdict, recent_verdict
from tests.cli_steps import run, sandbox_with
from tests.pages.test_truth_pages import _body, serve

MiB = 1024 * 1024
P = "producer_byte_rate"


@pytest.mark.parametrize("read, unread, verdict", [
    ([True, False], [], True),             # any broker read shows it: throttled
    ([True], ["3"], True),                 # ... even with a broker not read
    ([False, False], ["3"], None),         # none read shows it, one not read: unknown
    ([], ["127.0.0.1:9"], None),           # nothing read at all (the only endpoint dead)
    ([False, False, False], [], False),    # every broker read, none throttles: not throttled
    ([], [], False),                       # no broker reports the bucket, all read
])
def test_the_one_rule(read, unread, verdict):
    assert live_verdict([F(throttled=t) for t in read], unread) is verdict


@pytest.mark.parametrize("cluster, answered, failed, unread", [
    # Issue 27: broker 2's endpoint stopped; it answered before, so its node id is known:
    # named once, "2", never also as "127.0.0.1:44377".
    ("123", "13", [("127.0.0.1:44377", "2")], ("2",)),
    # Its node id unknown, but it is the one broker no answering endpoint covers: "2".
    ("123", "13", [("127.0.0.1:44377", None)], ("2",)),
    # Two endpoints dead, two brokers not covered: the brokers, by node id.
    ("123", "1", [("h:1", None), ("h:2", None)], ("2", "3")),
    # A broker with no endpoint given and a dead endpoint that is not it: both, each once.
    ("123", "12", [], ("3",)),
    ("12", "12", [("h:9", None)], ("h:9",)),
    ("123", "1", [("h:9", None)], ("2", "3", "h:9")),
    # A sandbox has no broker list: the dead endpoint by host:port.
    ("", "", [("127.0.0.1:9", None)], ("127.0.0.1:9",)),
])
def test_brokers_not_read_once_each(cluster, answered, failed, unread):
    assert unread_brokers(tuple(cluster), tuple(answered), failed) == unread


def row(rate: float | None, throttle: float | None, quota: float | None = 1 * MiB,
        quota_type: str = "produce") -> BucketUsage:
    return BucketUsage("1", quota_type, P, "bob", None, rate, throttle, quota,
                       None if quota is None else 3, None)


@pytest.mark.parametrize("figures, now, recent", [
    (row(1.2 * MiB, None), True, False),          # over quota: the next request waits
    (row(1.0 * MiB, 120.0), True, False),          # held at its quota while throttled
    (row(NOW_SHARE * MiB, 120.0), True, False),    # at the threshold: still now
    # Issue 27: bob raised to 2 MiB/s runs at 70 % of it, and the broker still reports a
    # 121 ms throttle: an average over earlier metric samples, not a throttle now.
    (row(0.7 * 2 * MiB, 121.0, 2 * MiB), False, True),
    (row(0.0, 500.0), False, True),                # gone quiet after a throttle
    (row(0.5 * MiB, None), False, False),          # never throttled
    (row(3 * MiB, 300.0, None), False, True),      # the quota was removed since
    (row(None, 300.0), True, False),               # no rate exported: cannot tell, say now
])
def test_now_and_recently(figures, now, recent):
    assert (figures.throttled, figures.recent) == (now, recent)
    assert recent_verdict([figures]) is recent
    assert live_verdict([figures]) is now


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def broker_one():
    """Broker 1's endpoint: bob's {user=bob} bucket at 70 % of 2 MiB/s with a 121 ms
    throttle left over; alice's at 40 % of hers, never throttled."""
    server = serve(_body("1", [
        f'kafka_server_produce_byte_rate{{user="bob"}} {0.7 * 2 * MiB}',
        'kafka_server_produce_throttle_time{user="bob"} 121.0',
        f'kafka_server_produce_byte_rate{{user="alice"}} {0.4 * MiB}']))
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()
    server.server_close()


QUOTAS = {Entity.of(user="bob"): {P: 2 * MiB}, Entity.of(user="alice"): {P: 1 * MiB},
          Entity.of(user=None): {P: 1 * MiB}}


def test_cli_resolve_is_unknown_while_an_endpoint_is_dead(tmp_path, broker_one, monkeypatch):
    monkeypatch.setattr("quota_core.throttling.live.CONFIRM_S", 0.1)  # bob's bucket looks recent
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    dead = f"127.0.0.1:{_closed_port()}"
    code, out, err = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
                         "app", "--metrics", f"{broker_one},http://{dead}/metrics",
                         "--output", "json")
    assert code == 1, err  # an endpoint given could not be read, after the JSON
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is None and live["unread"] == [dead], live
    assert live["recent"] is False
    code, out, err = run("--sandbox", store, "--resolve", "--user", "carol", "--client-id",
                         "app", "--metrics", f"{broker_one},http://{dead}/metrics")
    assert code == 1 and f"{dead} not read: throttled or not is unknown" in out, out
    # Every endpoint read: not throttled, exit 0.
    code, out, err = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
                         "app", "--metrics", broker_one, "--output", "json")
    assert code == 0, err
    live = json.loads(out)["quotas"][P]["live"]
    assert live["throttled"] is False and live["unread"] == []


def test_cli_says_throttled_recently_not_now(tmp_path, broker_one, monkeypatch):
    # The CLI reads a "recent" bucket again CONFIRM_S later (quota_core.throttling.live.hold); this
    # endpoint's figures never change, so a short wait proves the same.
    monkeypatch.setattr("quota_core.throttling.live.CONFIRM_S", 0.1)
    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    code, out, err = run("--sandbox", store, "--resolve", "--user", "bob", "--client-id",
                         "app", "--metrics", broker_one, "--output", "json")
    assert code == 0, err
    doc = json.loads(out)
    live = doc["quotas"][P]["live"]
    assert (live["throttled"], live["recent"]) == (False, True), live
    assert doc["window"]["throttle_memory_s"] == 60.0
    code, out, err = run("--sandbox", store, "--throttled", "--metrics", broker_one,
                         "--output", "json")
    assert code == 0, err
    [bob] = [r for r in json.loads(out) if r["bucket"]["user"] == "bob"]
    assert (bob["throttled"], bob["recent"]) == (False, True)
    code, out, err = run("--sandbox", store, "--throttled", "--metrics", broker_one)
    assert "throttled recently, not now" in out, out
    code, out, err = run("--sandbox", store, "--resolve", "--user", "bob", "--client-id",
                         "app", "--metrics", broker_one)
    assert "throttled recently, not now" in out, out


def test_one_read_under_the_threshold_is_a_dip_not_the_end():
    """Seen on 4.3.1 brokers: a client held at its quota reads at 30-80 % of it for up to
    about 2 s as the broker's rate window rolls over. A read CONFIRM_S apart that shows it
    throttled now keeps it "now" (quota_core.throttling.live.hold); two reads under 90 % make it
    "recently"."""
    from quota_core.throttling.live import hold

    dip, now, calm = row(0.6 * MiB, 603.0), row(1.05 * MiB, 549.0), row(0.5 * MiB, 549.0)
    [held] = hold([dip], [now])
    assert (held.throttled, held.recent) == (True, False)
    [kept] = hold([dip], [calm])
    assert (kept.throttled, kept.recent) == (False, True)
    assert hold([now], [calm]) == [now]


def test_the_spread_is_unknown_while_a_broker_is_not_read():
    """Resolve's grid sentence: "Not throttled on the brokers read … Broker 2 could not be read",
    never a plain "not throttled" (and its tone is not the green of an all-clear)."""
    from quota_core.throttling.spreads import spread
    from ui.story import _tone

    sp = spread(P, [row(0.4 * MiB, None)], ["1"], unread=["2"])
    assert sp.throttled is None
    s = sp.sentence()
    assert s.text.startswith("Not throttled on the brokers read: ") and s.text.endswith(
        "Broker 2 could not be read: its figures are unknown."), s.text
    assert _tone(s) == "unknown"
    assert _tone(spread(P, [row(0.4 * MiB, None)], ["1"]).sentence()) == "ok"
