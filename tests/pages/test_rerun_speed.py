"""Reruns that redo only what changed (issue 19, item 3): the work a rerun keeps from the last
one is counted here, never timed (benchmarks/bench_browser.py has the figures)."""
from __future__ import annotations

import random

import pytest

from quota_core.domain.entities import Entity
from quota_core.domain.membership import Membership
from ui.browse import ALL_KEYS
from ui.membership import SharedMembership

E = Entity.of


def random_set(seed: int, n: int = 400) -> dict:
    """Every ladder shape, a few names (so many entries share them), an ip or two, and
    keys held by mixed shapes."""
    rnd = random.Random(seed)
    users = ["alice", "bob", "carol", "<default>", "svc-1", "svc-2"]
    clients = ["app", "api", "batch", "<default>", "", "x=1,y"]
    makers = [lambda u, c: E(user=u, client_id=c), lambda u, c: E(user=u, client_id=None),
              lambda u, c: E(user=u), lambda u, c: E(user=None, client_id=c),
              lambda u, c: E(user=None, client_id=None), lambda u, c: E(user=None),
              lambda u, c: E(client_id=c), lambda u, c: E(client_id=None),
              lambda u, c: E(ip=f"10.0.0.{rnd.randrange(9)}")]
    quotas: dict = {}
    for _ in range(n):
        entity = rnd.choice(makers)(rnd.choice(users) + str(rnd.randrange(8)),
                                    rnd.choice(clients) + str(rnd.randrange(8)))
        keys = rnd.sample(ALL_KEYS[:3], rnd.randrange(1, 3))
        quotas[entity] = {k: float(rnd.randrange(1, 9) * 1024) for k in keys}
    return quotas


@pytest.mark.parametrize("seed", range(6))
def test_shared_membership_names_the_same_buckets_as_the_core(seed):
    quotas = random_set(seed)
    core, shared = Membership(quotas), SharedMembership(quotas)
    shared.warm(ALL_KEYS)
    users = {e.name("user") for e in quotas if e.has("user")} - {None}
    clients = {e.name("client-id") for e in quotas if e.has("client-id")} - {None}
    asked = 0
    for key in ALL_KEYS:
        for tags in ([(u, None) for u in users | {"nobody"}]
                     + [(None, c) for c in clients | {"no-such-app"}]
                     + [("alice1", "app1"), (None, None)]):
            assert shared.excepted(key, tags) == core.excepted(key, tags), (key, tags)
            assert shared.sharers(key, tags) == core.sharers(key, tags)
            asked += bool(core.excepted(key, tags))
    assert asked  # some buckets do have names taken out of them


def test_a_long_list_of_names_taken_out_of_a_bucket_is_cut_short():
    # {user=<default>, client-id=app-N} takes app-N out of alice's {user=<default>} bucket:
    # 25 of them are counted, 10 named (a 100,000-entry set named 29,000 on every keystroke).
    quotas = {E(user=None): {"producer_byte_rate": 1024.0}}
    quotas |= {E(user=None, client_id=f"app-{i:02d}"): {"producer_byte_rate": 2048.0}
               for i in range(25)}
    for members in (Membership(quotas), SharedMembership(quotas)):
        text = members.sharers("producer_byte_rate", ("alice", None))
        assert text == ("every client id of user 'alice' except "
                        + ", ".join(f"'app-{i:02d}'" for i in range(10))
                        + " and 15 more (in a bucket of their own)")
    from quota_core import explain_key, resolve

    sentence = explain_key(resolve(quotas, "alice", "web"), "producer_byte_rate", quotas)
    assert "'app-09' and 15 more, in a bucket of their own" in sentence
    assert "'app-10'" not in sentence


# -- the pages: what a rerun does not redo ----------------------------------------------------
from tests.pages.test_identity import sandbox  # noqa: E402,F401  the demo quotas in a sandbox


def counting(monkeypatch, owner, name: str) -> list:
    """Count the calls of ``owner.name`` (it still runs)."""
    calls: list = []
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)
    return calls


def test_a_resolve_rerun_indexes_nothing_again(sandbox, monkeypatch):
    # The cards, the verdicts and each sentence built their own Membership (an index of the
    # whole set per key: ~1.6 s at 100,000 entries) on every keystroke; now one per snapshot.
    from tests.app_steps import run_app, texts

    at = run_app(query={"user": "alice", "client_id": "checkout-api"})
    built = counting(monkeypatch, Membership, "__init__")
    at.text_input(key="rs_client").input("batch-export").run()
    assert not at.exception
    assert at.query_params["client_id"] == "batch-export"
    # it answered, naming the client id an entry takes out of alice's bucket
    assert any("of user 'alice' (except client ids 'checkout-api', in a bucket of its own)"
               in t for t in texts(at.markdown))
    assert built == []


def test_browse_draws_its_figures_without_a_chart_library(sandbox):
    # Plain HTML bars and a table by default; Plotly's charts one toggle away.
    from tests.app_steps import run_app
    from ui.browse import level_counts, quota_frame
    from localkafka.demo import demo_quotas

    at = run_app("pages/browse.py")
    html = " ".join(h.proto.body for h in at.get("html"))
    assert not at.get("plotly_chart")
    counts = level_counts(quota_frame(demo_quotas()))
    for level, n in counts.items():
        assert f'data-level="{level}"' in html and f">{n:,}</td>" in html
    assert html.count('class="qc-rate-row"') > 0
    at.toggle(key="br_plotly").set_value(True).run()
    assert len(at.get("plotly_chart")) == 2 and "qc-level-bars" not in " ".join(
        h.proto.body for h in at.get("html"))


def test_a_scrape_round_is_joined_with_the_quotas_once(monkeypatch):
    import quota_core.throttling.live as live
    from ui.live import Frame, usage_rows

    joined = counting(monkeypatch, live, "join_usage")
    quotas = {E(user="alice"): {"producer_byte_rate": 1024.0}}
    frame = Frame(1.0, ())
    assert usage_rows(frame, quotas) == usage_rows(frame, quotas)
    assert len(joined) == 1
    usage_rows(frame, dict(quotas))  # another quota set (a new snapshot): joined again
    usage_rows(Frame(2.0, ()), quotas)  # the next scrape: joined again
    assert len(joined) == 3


def test_a_live_chart_is_not_built_again_while_its_data_is_the_same():
    from datetime import datetime

    from ui.charts import rate_vs_quota

    points = [(datetime(2026, 1, 1, 12, 0, s), "1", 100.0 * s, 1000.0, 0.0) for s in range(5)]
    first = rate_vs_quota(points, "producer_byte_rate", "t")
    assert rate_vs_quota(list(points), "producer_byte_rate", "t") is first
    assert rate_vs_quota(points + [(datetime(2026, 1, 1, 12, 0, 9), "1", 1.0, 1000.0, 0.0)],
                         "producer_byte_rate", "t") is not first
