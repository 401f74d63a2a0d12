"""Issue 15's loose ends in AppTest: the connection card says what the stale banner says;
Throttled now leaves "throttle ms" blank when the broker reports none; Resolve's answer cards
say who shares a bucket with the same membership model as the story."""
from __future__ import annotations

import time

from tests.app_steps import run_app, texts
from tests.pages.test_app import env, sandbox  # noqa: F401  (fixtures)
from tests.pages.test_app_live import _wait_for, endpoint  # noqa: F401  (fixture)
from tests.core.test_membership import endpoint as _membership_endpoint

#: A real metrics endpoint (tests/core/test_membership.py's), under its own name here.
metrics_endpoint = _membership_endpoint


def test_the_connection_card_turns_amber_when_the_cluster_stops_answering(sandbox):  # noqa: F811
    from ui.registry import registry

    at = run_app()
    assert any("13 quota entries" in t for t in texts(at.sidebar.success))
    assert not any("not answering" in t for t in texts(at.sidebar.warning))
    spec = at.session_state["_quota_page_context"].spec
    reg = registry()
    before = time.time()
    # What the background watch records when the cluster stops answering (Registry._watch).
    reg._record(spec.key, None)
    reg._record(spec.key, "Cannot reach 127.0.0.1:9")
    try:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        # The banner and the card say the same: no green card beside "has not answered".
        assert any("has not answered since" in t for t in texts(at.main.warning))
        assert not any("13 quota entries" in t for t in texts(at.sidebar.success))
        [card] = [t for t in texts(at.sidebar.warning) if "13 quota entries" in t]
        since = time.strftime("%H:%M:%S", time.localtime(reg.health(spec).last_ok))
        assert f"not answering since {since}" in card, card
        # The card's "described" time is the banner's "read at" (it was a caption drawn once,
        # saying "described 0 s ago" beside a banner saying 10 s).
        ctx = at.session_state["_quota_page_context"]
        read = time.strftime("%H:%M:%S", time.localtime(ctx.snapshot.loaded_at))
        assert f"described {read} (" in card, card
        assert any(f"as read at {read}" in t for t in texts(at.main.warning))
        assert reg.health(spec).last_ok >= before - 1
    finally:
        reg._record(spec.key, None)
    at.run()
    assert any("13 quota entries" in t for t in texts(at.sidebar.success))
    assert not any("not answering" in t for t in texts(at.sidebar.warning))


def test_the_card_is_never_plain_green_while_a_broker_has_left_the_metadata(sandbox):  # noqa: F811
    from ui.registry import registry

    at = run_app()
    spec = at.session_state["_quota_page_context"].spec
    reg = registry()
    # What the background watch records (Registry._watch): the cluster's metadata named three
    # brokers, then only two (broker 2 stopped, or fenced after a crash).
    reg._record(spec.key, None, ("1", "2", "3"))
    before = time.time()
    reg._record(spec.key, None, ("1", "3"))
    try:
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert not any("13 quota entries" in t for t in texts(at.sidebar.success))
        [card] = [t for t in texts(at.sidebar.warning) if "13 quota entries" in t]
        since = time.strftime("%H:%M:%S", time.localtime(dict(reg.health(spec).missing)["2"]))
        assert reg.health(spec).missing[0][1] >= before - 1
        assert f"broker 2 is missing from the cluster's metadata since {since}" in card, card
        assert "2 brokers (of 3)" in card, card
        # Still missing at the next answer: the time it was first found absent stays.
        reg._record(spec.key, None, ("1", "3"))
        assert dict(reg.health(spec).missing)["2"] <= before + 5
        # A failed answer keeps what was known of the brokers.
        reg._record(spec.key, "Cannot reach 127.0.0.1:9")
        assert reg.health(spec).node_ids == ("1", "3") and reg.health(spec).missing
        reg._record(spec.key, None, ("1", "2", "3"))  # back: green again
        at.run()
        assert not reg.health(spec).missing
        assert any("13 quota entries" in t and "3 brokers" in t
                   for t in texts(at.sidebar.success))
        assert not any("missing from" in t for t in texts(at.sidebar.warning))
    finally:  # a sandbox has no brokers: leave its connection as the watch would
        with reg._lock:
            reg._health.pop(spec.key, None)
        reg._record(spec.key, None)


def test_throttle_ms_is_blank_when_the_broker_reports_none(sandbox, endpoint):  # noqa: F811
    at = run_app("pages/throttled.py")
    _wait_for(at, lambda a: a.dataframe)
    shown = at.dataframe[0].value
    ms = dict(zip(shown["user"], shown["throttle ms"]))
    # ANONYMOUS's bucket reports NaN (no throttle-time): blank, never "None" or "nan".
    assert ms["ANONYMOUS"] == ""
    assert ms["alice"] == "80 ms"
    assert "None" not in set(map(str, shown["throttle ms"]))


def _cards(at) -> dict[str, str]:
    """{key: the answer card's "shared by" words}, unescaped."""
    import re
    from html import unescape

    (html,) = [h for h in texts(at.html) if 'class="qc-answers"' in h]
    return {k: unescape(w) for k, w in re.findall(
        r'data-key="([a-z_]+)".*?shared by ([^<]*)</div>', html, re.S)}


def test_answer_cards_name_who_an_entry_takes_out_of_a_shared_bucket(sandbox):  # noqa: F811
    from quota_core import resolve
    from localkafka.demo import demo_quotas
    from quota_core.throttling.story import client_story
    from quota_core.throttling.verdict import verdicts

    at = run_app(query={"user": "alice", "client_id": "batch-export"})
    cards = _cards(at)
    # batch-export is in {user=alice} for produce; checkout-api has its own entry, so it is
    # not among the sharers: the card says so, as the story does.
    assert cards["producer_byte_rate"] == ("every client id of user 'alice' except "
                                           "'checkout-api' (in a bucket of its own)")
    resolution = resolve(demo_quotas(), "alice", "batch-export")
    [v] = verdicts(resolution, ["producer_byte_rate"], demo_quotas())
    [share] = [s.text for s in client_story(v) if s.kind == "share"]
    assert cards["producer_byte_rate"] in share
    # No exception: the old words stay.
    assert cards["request_percentage"] == "all of the user's clients"
    assert cards["consumer_byte_rate"] == "this user + client id"
    at = run_app(query={"user": "alice", "client_id": "checkout-api"})
    assert _cards(at)["producer_byte_rate"] == "this user + client id"


def test_cli_resolve_metrics_reports_the_quota_window(tmp_path, metrics_endpoint):
    """--resolve --metrics: JSON gives the window the verdict used (num, size_s, source) and
    keeps its keys; text names it once, even for several clients."""
    import json

    from tests.cli_steps import run, sandbox_with
    from tests.core.test_membership import QUOTAS

    store = sandbox_with(tmp_path / "q.sqlite", QUOTAS)
    base = ("--sandbox", store, "--resolve", "--user", "alice", "--client-id", "checkout-api",
            "--metrics", f"b1={metrics_endpoint}")
    code, out, err = run(*base, "--output", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["window"] == {"num": 11, "size_s": 1,
                             "source": "Kafka's defaults: the sandbox has no brokers",
                             "throttle_memory_s": 60.0}  # issue 27: metrics.* 2 x 30 s
    assert {"entity", "assumptions", "quotas", "ladder", "bucket"} <= set(doc)
    code, out, err = run(*base, "--client-id", "batch-export", "--output", "plain")
    assert code == 0, err
    assert out.count("quota window") == 1, out
    assert "quota window 11 × 1 s (Kafka's defaults: the sandbox has no brokers)" in out
    # Without --metrics there is no verdict on live figures: no window.
    code, out, err = run(*base[:-2], "--output", "json")
    assert code == 0 and "window" not in json.loads(out), err


def test_another_bucket_names_a_client_id_the_brokers_know_from_another_quota_type():
    """batch-export is in {user=alice} for produce (no tag names it), but its fetch bucket is
    its own pair (level 2): the verdict names it among {user=alice}'s client ids."""
    from quota_core import resolve
    from localkafka.demo import demo_quotas
    from quota_core.throttling.live import join_usage
    from quota_core.throttling.verdict import verdicts
    from tests.core.test_membership import S

    MiB = 1024 * 1024
    quotas = demo_quotas()
    series = [S("b1", "produce", "byte-rate", "alice", "checkout-api", 0.9 * MiB),
              S("b1", "produce", "byte-rate", "alice", None, 2.4 * MiB),
              S("b1", "produce", "throttle-time", "alice", None, 180.0),
              S("b1", "fetch", "byte-rate", "alice", "batch-export", 1.0 * MiB)]
    rows = join_usage(series, quotas)
    [v] = verdicts(resolve(quotas, "alice", "checkout-api"), ["producer_byte_rate"], quotas,
                   rows)
    [other] = v.others
    assert other.tags == ("alice", None) and other.throttled
    assert "'batch-export'" in other.members
    # Only this key's rows: nobody is named (the old behaviour).
    [v] = verdicts(resolve(quotas, "alice", "checkout-api"), ["producer_byte_rate"], quotas,
                   [r for r in rows if r.key == "producer_byte_rate"])
    assert "'batch-export'" not in v.others[0].members


def test_keys_without_traffic_are_one_sentence():
    from quota_core import resolve
    from localkafka.demo import demo_quotas
    from quota_core.throttling.story import quiet_story
    from quota_core.throttling.verdict import verdicts

    quotas = demo_quotas()
    found = verdicts(resolve(quotas, "alice", "checkout-api"),
                     ["producer_byte_rate", "consumer_byte_rate"], quotas, [])
    quiet = quiet_story(found)
    assert quiet.claims["throttled"] is False
    assert quiet.claims["keys"] == ("producer_byte_rate", "consumer_byte_rate")
    assert quiet.text == ("No broker reports traffic of client id 'checkout-api' of user "
                          "'alice' on producer_byte_rate ({user=alice, client-id=checkout-api}) "
                          "or consumer_byte_rate ({user=alice, client-id=checkout-api}): it is "
                          "not throttled there.")
    assert quiet_story(verdicts(resolve(quotas, "alice", "checkout-api"),
                                ["producer_byte_rate"], quotas, None)) is None


def test_cli_resolve_text_names_who_an_entry_takes_out_of_the_bucket(tmp_path):
    from localkafka.demo import demo_quotas
    from tests.cli_steps import run, sandbox_with

    store = sandbox_with(tmp_path / "q.sqlite", demo_quotas())
    code, out, err = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
                         "batch-export", "--output", "plain")
    assert code == 0, err
    lines = out.splitlines()
    at = lines.index(next(x for x in lines if x.startswith("producer_byte_rate=")))
    assert lines[at + 1] == ("  level 3, shared by every client id of user 'alice' except "
                             "'checkout-api' (in a bucket of its own)"), out
    # No exception: the old words.
    at = lines.index(next(x for x in lines if x.startswith("request_percentage=")))
    assert lines[at + 1] == ("  level 3, shared by every client id of user 'alice' together "
                             "(one allowance per user)"), out
