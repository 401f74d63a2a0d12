"""Issue 15's loose ends in AppTest: the connection card says what the stale banner says;
Throttled now leaves "throttle ms" blank when the broker reports none; Resolve's answer cards
say who shares a bucket with the same membership model as the story."""
from __future__ import annotations

import time

from tests.app_steps import run_app, texts
from tests.test_app import env, sandbox  # noqa: F401  (fixtures)
from tests.test_app_live import _wait_for, endpoint  # noqa: F401  (fixture)


def test_the_connection_card_turns_amber_when_the_cluster_stops_answering(sandbox):  # noqa: F811
    from ui.session import registry

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
        assert reg.health(spec).last_ok >= before - 1
    finally:
        reg._record(spec.key, None)
    at.run()
    assert any("13 quota entries" in t for t in texts(at.sidebar.success))
    assert not any("not answering" in t for t in texts(at.sidebar.warning))


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
    from quota_core.demo import demo_quotas
    from quota_core.story import client_story
    from quota_core.verdict import verdicts

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
