"""Issue 27 item 5, true words: the sentence templates of quota_core.domain.wording (one place),
each in a table and parsed back against the values it was made from; then the falsehoods the
issue saw, each on the page or sentence that said it:

* Edit said "now unlimited" / "before: unlimited" for {user=bob} while bob had 1 MiB/s from
  {user=<default>};
* Resolve said "0 mutations/s of 10 mutations/s (0%) on broker 3" beside "No broker sees its
  controller_mutation_rate traffic";
* Resolve said "12.4% of a thread of 50% of a thread (25%)";
* "3 buckets had its quota changed", "1 known client get".
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from quota_core import Entity, resolve
from quota_core.planning.impact import fallback
from quota_core.throttling.live import join_usage
from quota_core.throttling.story import quiet_story, story
from quota_core.domain.units import format_quota, format_rate
from quota_core.throttling.verdict import key_verdict
from quota_core.domain.wording import (against, clients_moved, inherited, inherited_short, plural,
                                       quota_before, quota_changed, verb)

MiB = 1024 * 1024
E = Entity.of
P, C, R, M = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")


# -- plurals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, word, many, text", [
    (0, "bucket", None, "0 buckets"), (1, "bucket", None, "1 bucket"),
    (3, "bucket", None, "3 buckets"), (1200, "broker", None, "1,200 brokers"),
    (1, "entity change", None, "1 entity change"), (2, "entity", "entities", "2 entities"),
])
def test_plural(n, word, many, text):
    assert plural(n, word, many) == text


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17])
def test_counted_sentences_agree_with_their_count(n):
    changed = quota_changed(n, "11 × 1 s", 11)
    m = re.match(r"^(\d+) (bucket|buckets) had (its|their) quota changed within the last rate "
                 r"window \(11 × 1 s\): .* up to 11 s after it\.$", changed)
    assert m, changed
    assert int(m.group(1)) == n and (m.group(2) == "bucket") is (n == 1)
    assert (m.group(3) == "its") is (n == 1)
    moved = clients_moved(n, 40)
    m = re.match(r"^\*\*(\d+) known (client|clients)\*\* (gets|get) a different effective "
                 r"quota \(of 40 checked\):$", moved)
    assert m, moved
    assert int(m.group(1)) == n and {m.group(2), m.group(3)} == (
        {"client", "gets"} if n == 1 else {"clients", "get"})
    assert verb(n, "is", "are") == ("is" if n == 1 else "are")


# -- a rate against its quota ---------------------------------------------------------------------
AGAINST = re.compile(r"^(?P<rate>.+?) of (?P<limit>.+?)(?: \((?P<use>\d+)%\))?$")
THREAD = re.compile(r"^(?P<rate>[\d.]+)% of a thread's time, against a quota of "
                    r"(?P<limit>[\d.]+)% of a thread(?: \((?P<use>\d+)% of the quota\))?$")


@pytest.mark.parametrize("key, rate, limit", [
    (P, 2.4 * MiB, 2 * MiB), (C, 922 * 1024, 8 * MiB), (M, 12.0, 10.0), (M, 3.5, 10.0),
    (R, 12.4, 50.0), (R, 80.0, 50.0), (R, 150.0, 200.0), (R, 0.5, 25.0),
])
def test_a_rate_against_its_quota_reads_back(key, rate, limit):
    use = rate / limit
    text = against(key, rate, limit, use)
    if key == R:
        # request_percentage is a share of one thread's time: never "x% of a thread of y% of
        # a thread (z%)".
        assert "of a thread of" not in text
        m = THREAD.match(text)
        assert m, text
        assert float(m.group("rate")) == pytest.approx(rate, rel=0.01)
        assert float(m.group("limit")) == limit
    else:
        m = AGAINST.match(text)
        assert m, text
        assert m.group("rate") == format_rate(key, rate)
        assert m.group("limit") == format_quota(key, limit)
    assert int(m.group("use")) == round(use * 100)


def test_a_rate_with_no_quota_or_no_figure():
    assert against(R, 12.4, None) == "12.4% of a thread's time, with no quota"
    assert against(P, None, MiB) == "no rate of 1 MiB/s"
    assert against(P, MiB, None) == "1 MiB/s of unlimited"


# -- inherited values: "not set" is not "unlimited" when a lower level sets it ------------------
QUOTAS = {E(user=None): {P: 1 * MiB, M: 10.0},
          E(user=None, client_id=None): {R: 25.0},
          E(user="alice"): {P: 2 * MiB},
          E(client_id="reports"): {C: 20 * MiB},
          E(client_id=None): {C: 512 * 1024}}
INHERITED = re.compile(r"^not set on this entry; (?P<who>.+) gets (?P<value>.+) from "
                       r"(?P<source>\{.*\}) \(level (?P<level>\d)\)$")


@pytest.mark.parametrize("entity, key, who, value, source, level", [
    (E(user="bob"), P, "user 'bob'", "1 MiB/s", "{user=<default>}", 6),
    (E(user="bob"), R, "user 'bob'", "25% of a thread", "{user=<default>, client-id=<default>}", 5),
    (E(user="bob", client_id="app"), P, "client id 'app' of user 'bob'", "1 MiB/s",
     "{user=<default>}", 6),
    (E(user="alice", client_id="app"), P, "client id 'app' of user 'alice'", "2 MiB/s",
     "{user=alice}", 3),
    (E(client_id="etl"), C, "client id 'etl'", "512 KiB/s", "{client-id=<default>}", 8),
    (E(user="**b*_`~$[|<"), P, "user '**b*_`~$[|<'", "1 MiB/s", "{user=**b*_`~$[|<}", 6),
    (E(user="bob"), C, "user 'bob'", None, None, None),
])
def test_a_key_not_set_says_what_the_ladder_gives_instead(entity, key, who, value, source,
                                                          level):
    got = fallback(QUOTAS if level is not None else {E(user="alice"): {key: MiB}}, entity, key)
    text = inherited(entity, key, *got)
    if level is None:
        assert got == (None, None, None)
        assert text == f"not set on this entry; nothing else limits {who}: unlimited"
        assert inherited_short(key, *got) == "not set (unlimited)"
        return
    m = INHERITED.match(text)
    assert m, text
    # Parsed back, every figure is the ladder's: the value, the entry and its level.
    assert m.group("who") == who and m.group("value") == value
    assert int(m.group("level")) == level == got[1]
    assert m.group("source") == got[2].display()
    if entity.has("user") and not entity.has("client-id"):
        # The client the sentence speaks of resolves to exactly that.
        kr = resolve(QUOTAS, entity.name("user"), "any-client").keys[key]
        assert (kr.level, kr.source.display(), format_quota(key, kr.value)) == (
            level, m.group("source"), value)
    assert "unlimited" not in text
    assert quota_before(key, None, got) == f"not set ({value} from {m.group('source')}, " \
                                           f"level {level})"
    assert quota_before(key, 3 * MiB, got) == format_quota(key, 3 * MiB)


# -- Resolve: brokers with no traffic, request_percentage ---------------------------------------
@dataclass(frozen=True)
class S:
    broker: str
    quota_type: str
    attribute: str
    user: str | None
    client_id: str | None
    value: float


def _texts(quotas, series, user, client_id, key):
    resolution = resolve(quotas, user, client_id)
    v = key_verdict(resolution, key, quotas, join_usage(series, quotas))
    quiet = quiet_story([v])
    return v, [s.text for s in story(v)] + ([quiet.text] if quiet else [])


def test_a_broker_without_traffic_gets_no_zero_of_ten():
    """Finding: "0 mutations/s of 10 mutations/s (0%) on broker 3" beside "No broker sees
    its controller_mutation_rate traffic"."""
    quotas = {E(user=None): {M: 10.0}}
    series = [S("3", "controller_mutation", "mutation-rate", "bob", None, 0.0)]
    v, texts = _texts(quotas, series, "bob", "app", M)
    assert v.brokers and v.brokers[0].rate == 0.0
    assert not [t for t in texts if "0 mutations/s of" in t or "on broker 3" in t], texts
    assert any(t.startswith("No broker reports traffic of client id 'app' of user 'bob' on "
                            "controller_mutation_rate") for t in texts), texts
    # With traffic on broker 1 and none on broker 3: only broker 1's figure.
    series.append(S("1", "controller_mutation", "mutation-rate", "bob", None, 4.0))
    _, texts = _texts(quotas, series, "bob", "app", M)
    status = [t for t in texts if " is not throttled on controller_mutation_rate" in t]
    assert status == ["Client id 'app' of user 'bob' is not throttled on controller_mutation_"
                      "rate: its bucket {user=bob} runs at 4 mutations/s of 10 mutations/s "
                      "(40%) on broker 1."], texts
    assert not [t for t in texts if "broker 3" in t], texts


def test_request_percentage_reads_as_a_share_of_a_thread():
    """Finding: "12.4% of a thread of 50% of a thread (25%)"."""
    quotas = {E(user="alice"): {R: 50.0}}
    series = [S("1", "request", "request-time", "alice", None, 12.4)]
    _, texts = _texts(quotas, series, "alice", "app", R)
    assert not [t for t in texts if "of a thread of" in t], texts
    status = [t for t in texts if "is not throttled on request_percentage" in t]
    assert status == ["Client id 'app' of user 'alice' is not throttled on request_percentage: "
                      "its bucket {user=alice} runs at 12.4% of a thread's time, against a "
                      "quota of 50% of a thread (25% of the quota) on broker 1."], texts


# -- on the pages (AppTest, the demo sandbox) ---------------------------------------------------
from tests.pages.test_app import env, open_edit, sandbox  # noqa: E402,F401  (fixtures)
from tests.app_steps import run_app, texts  # noqa: E402


def test_edit_says_what_bob_gets_from_the_default_not_unlimited(sandbox):
    """{user=bob} holds nothing; {user=<default>} gives bob's clients 1 MiB/s."""
    at = open_edit("bob")
    at.text_input(key="ed_val_producer_byte_rate").input("2MiB").run()
    said = " ".join(texts(at.caption))
    assert ("= 2,097,152 bytes/s — now not set on this entry; user 'bob' gets 1 MiB/s from "
            "{user=<default>} (level 6)") in said, said
    assert "unlimited" not in said
    at.button(key="ed_preview_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    diff = next(d.value for d in at.dataframe if "after (exact)" in d.value.columns)
    assert list(diff["before"]) == ["not set (1 MiB/s from {user=<default>}, level 6)"]
    assert not [m.value for m in at.markdown if "unlimited" in m.value]


PLAN = ("format: quota-console/1\nentries:\n- entity: {user: alice}\n"
        "  quotas: {producer_byte_rate: 1048576}\n")


def test_plan_computes_a_diff_without_a_name_and_asks_for_one_to_apply(sandbox):
    """Issue 27 item 7/8: the Plan page asked for the editor's name before a read-only diff."""
    at = run_app("pages/plan.py")  # local mode, no name typed
    at.text_area(key="pl_text").input(PLAN).run()
    at.button(key="pl_plan_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    diff = next(d.value for d in at.dataframe if "key change" in d.value.columns)
    assert ("{user=alice}", "producer_byte_rate", "change") in set(
        zip(diff["entity"], diff["key"], diff["key change"]))
    assert not [b for b in at.button if b.key == "pl_apply"]
    assert any("Type your name in the sidebar" in w for w in texts(at.warning)), texts(at.warning)
    at.sidebar.text_input(key="operator_name").input("jdoe").run()
    assert [b.key for b in at.button if b.key == "pl_apply"] == ["pl_apply"]


def test_the_cli_reads_request_percentage_the_same_way():
    from quota_core.cli.output import _live_text

    quotas = {E(user="alice"): {R: 50.0}}
    [row] = join_usage([S("1", "request", "request-time", "alice", None, 12.4)], quotas)
    assert _live_text(R, row) == ("  live 1: 12.4% of a thread's time, against a quota of 50% "
                                  "of a thread (25% of the quota), not throttled")
