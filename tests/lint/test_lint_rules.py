"""Each lint rule as a table of cases (pure: quota sets, broker settings and small usage frames
in, findings out), plus the table's own invariants."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from quota_core import Entity
from quota_core.throttling.brokers import BrokerSettings, ClusterSettings
from quota_core.lint.model import EXEMPT
from quota_core.lint import (RULES, SEVERITIES, LintInput, LintOptions, parse_protected,
                             protected_from_config, run_lint, super_users)
from quota_core.lint.usage import p99, sized

E = Entity.of
WEIRD = ["CN=etl,OU=data", "ünï cødé", "a=b", "100%", "two words", "<b>x</b>", "<default>"]
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def lint(quotas, rule, *, settings=None, protected=(), usage=None, **options):
    inp = LintInput(quotas, "test", settings or ClusterSettings.defaults(), list(protected),
                    usage, "test history" if usage is not None else None,
                    LintOptions(**options))
    report = run_lint(inp)
    return [f for f in report.findings if f.rule == rule], report


def brokers(*values: dict) -> ClusterSettings:
    return ClusterSettings(tuple(BrokerSettings(str(i + 1), v) for i, v in enumerate(values)))


def samples(rows, hours=1, step_s=60):
    """Usage rows (user, client_id, quota_type, rate, throttle_ms) repeated every step over
    ``hours`` hours, ending at T0 + hours."""
    out = []
    for i in range(int(hours * 3600 // step_s)):
        ts = T0 + timedelta(seconds=i * step_s)
        for user, client, qt, rate, throttle in rows:
            r = rate(i) if callable(rate) else rate
            t = throttle(i) if callable(throttle) else throttle
            out.append((ts, "1", qt, user, client, float(r), t, float(step_s)))
    return pd.DataFrame(out, columns=["ts", "broker", "quota_type", "user", "client_id", "rate",
                                      "throttle_ms", "interval_s"])


# -- the table ---------------------------------------------------------------------------------
def test_one_table_ids_unique_and_severities_known():
    ids = [r.id for r in RULES]
    assert ids == list(dict.fromkeys(ids)) and len(ids) == 10
    assert {r.severity for r in RULES} <= set(SEVERITIES)
    assert set(ids) == {"protected-under-default", "stale", "churning-principals", "never-binds",
                        "too-small", "cannot-bind", "chronic", "brokers-disagree",
                        "client-ignores-throttle", "no-telemetry-subscription"}


def test_rules_without_their_data_are_named_not_run():
    _, report = lint({E(user="a"): {"producer_byte_rate": 1e6}}, "stale")
    skipped = dict(report.skipped)
    assert set(skipped) == {"stale", "churning-principals", "chronic", "brokers-disagree",
                            "client-ignores-throttle", "no-telemetry-subscription"}
    assert "--history" in skipped["stale"]


# -- protected-under-default ------------------------------------------------------------------
@pytest.mark.parametrize("quotas, protected, entity, key, named, not_named", [
    # {user=<default>} binds the protected user admin
    ({E(user=None): {"producer_byte_rate": 1e6}}, ["admin"], E(user=None),
     "producer_byte_rate", ["'admin'"], []),
    # admin has its own entry for that key: not bound, not named; bob is
    ({E(user=None): {"producer_byte_rate": 1e6}, E(user="admin"): {"producer_byte_rate": 9e9}},
     ["admin", "bob"], E(user=None), "producer_byte_rate", ["'bob'"], ["'admin'"]),
    # a protected client id under {client-id=<default>}
    ({E(client_id=None): {"request_percentage": 50.0}}, ["client-id:connect-1"],
     E(client_id=None), "request_percentage", ["'connect-1'"], []),
    # a glob matches the names the entries hold
    ({E(user=None, client_id=None): {"consumer_byte_rate": 1e6},
      E(user="svc-a", client_id="x"): {"producer_byte_rate": 1.0}},
     ["svc-*"], E(user=None, client_id=None), "consumer_byte_rate", ["'svc-a'"], []),
])
def test_protected_under_default(quotas, protected, entity, key, named, not_named):
    found, _ = lint(quotas, "protected-under-default",
                    protected=[parse_protected(p, "--protected") for p in protected])
    mine = [f for f in found if f.entity == entity and f.key == key]
    assert len(mine) == 1 and mine[0].severity == "error"
    for n in named:
        assert n in mine[0].evidence
    for n in not_named:
        assert n not in mine[0].evidence
    assert mine[0].as_dict()["entity"] == entity.as_dict()
    # the fix exempts each named principal with an entry of its own, other keys kept
    assert all(held[key] >= 1100 for held in mine[0].fix_quotas.values())


def test_protected_named_by_a_pair_entry_only_for_that_client_is_still_bound_elsewhere():
    quotas = {E(user=None): {"producer_byte_rate": 1e6},
              E(user="admin", client_id="a"): {"producer_byte_rate": 9e9}}
    found, _ = lint(quotas, "protected-under-default",
                    protected=[parse_protected("admin", "--protected")])
    assert [f.entity for f in found] == [E(user=None)]
    assert found[0].fix_quotas == {E(user="admin"): {"producer_byte_rate": EXEMPT}}


def test_super_users_are_protected_and_the_exemption_keeps_the_entry_s_other_keys():
    settings = brokers({"super.users": "User:admin;User:ANONYMOUS;Group:ops",
                        "num.io.threads": "4", "num.network.threads": "3"})
    assert [p.pattern for p in super_users(settings)[0]] == ["admin", "ANONYMOUS"]
    quotas = {E(user=None): {"request_percentage": 50.0},
              E(user="admin"): {"consumer_byte_rate": 5e6}}
    found, _ = lint(quotas, "protected-under-default", settings=settings)
    assert len(found) == 1 and "(super.users)" in found[0].evidence
    assert found[0].fix_quotas[E(user="admin")] == {"consumer_byte_rate": 5e6,
                                                    "request_percentage": 700.0}  # 4+3 threads


def test_well_known_clients_only_when_seen_in_the_history():
    quotas = {E(client_id=None): {"producer_byte_rate": 1e6}}
    found, _ = lint(quotas, "protected-under-default")
    assert found == []
    usage = samples([(None, "connect-worker-1", "produce", 10.0, None)])
    found, _ = lint(quotas, "protected-under-default", usage=usage)
    assert len(found) == 1 and "well-known: Kafka Connect" in found[0].evidence
    assert list(found[0].fix_quotas) == [E(user=None, client_id="connect-worker-1")]


@pytest.mark.parametrize("name", WEIRD)
def test_protected_names_are_opaque(name):
    quotas = {E(user=None): {"producer_byte_rate": 1e6}}
    found, _ = lint(quotas, "protected-under-default",
                    protected=[parse_protected(name, "--protected")])
    # a glob metacharacter-free name matches itself exactly, <default> the name, not the default
    assert list(found[0].fix_quotas) == [E(user=name)]
    assert repr(name) in found[0].evidence


def test_protected_from_config():
    got = protected_from_config({"QUOTA_LINT_PROTECTED": "a*, client-id:b\nc"},
                                {"lint": {"protected": ["x", "client-id:y*"]}})
    assert [(p.kind, p.pattern, p.source) for p in got] == [
        ("user", "x", "[lint] protected"), ("client-id", "y*", "[lint] protected"),
        ("user", "a*", "QUOTA_LINT_PROTECTED"), ("client-id", "b", "QUOTA_LINT_PROTECTED"),
        ("user", "c", "QUOTA_LINT_PROTECTED")]


# -- never-binds ------------------------------------------------------------------------------
@pytest.mark.parametrize("quotas, dead", [
    ({E(user=None): {"producer_byte_rate": 1e6}, E(client_id="x"): {"producer_byte_rate": 2e6,
                                                                     "consumer_byte_rate": 1.0}},
     [(E(client_id="x"), "producer_byte_rate")]),
    ({E(user="u"): {"producer_byte_rate": 1e6}}, []),
    ({E(user=None): {"request_percentage": 5.0}, E(client_id=None): {"request_percentage": 9.0}},
     [(E(client_id=None), "request_percentage")]),
])
def test_never_binds(quotas, dead):
    found, _ = lint(quotas, "never-binds")
    assert [(f.entity, f.key) for f in found] == dead
    for f in found:
        assert f.key not in f.fix_quotas[f.entity]
        assert {k: v for k, v in quotas[f.entity].items() if k != f.key} == \
            f.fix_quotas[f.entity]


# -- too-small --------------------------------------------------------------------------------
@pytest.mark.parametrize("key, value, settings, fires, need, throttle_ms", [
    ("producer_byte_rate", 50_000, None, True, 95_327, 10_972),     # 550,000 < 1,048,588
    ("producer_byte_rate", 95_327, None, False, None, None),         # 1,048,597 >= it
    ("consumer_byte_rate", 10_000, None, True, 95_327, 94_859),
    ("producer_byte_rate", 100_000, {"message.max.bytes": "2000000"}, True, 181_819, 10_000),
    ("producer_byte_rate", 50_000, {"quota.window.num": "30", "quota.window.size.seconds": "1"},
     False, None, None),
    ("request_percentage", 0.01, None, False, None, None),             # byte rates only
    ("controller_mutation_rate", 0.5, None, False, None, None),
])
def test_too_small(key, value, settings, fires, need, throttle_ms):
    found, _ = lint({E(user="u"): {key: float(value), "request_percentage": 50.0}}, "too-small",
                    settings=brokers(settings) if settings else None)
    assert bool(found) == fires
    if fires:
        f = found[0]
        assert (f.entity, f.key) == (E(user="u"), key)
        assert f.fix_quotas[E(user="u")] == {key: float(need), "request_percentage": 50.0}
        assert f"({throttle_ms:,} ms)" in f.evidence
        assert ("read from 1 brokers" if settings else "Kafka's defaults") in f.evidence


# -- cannot-bind ------------------------------------------------------------------------------
@pytest.mark.parametrize("value, settings, fires, cap", [
    (1101.0, None, True, 1100.0),           # 8 + 3 threads (Kafka's defaults)
    (1100.0, None, False, None),
    (800.0, {"num.io.threads": "4", "num.network.threads": "2"}, True, 600.0),
    (600.0, {"num.io.threads": "4", "num.network.threads": "2"}, False, None),
])
def test_cannot_bind(value, settings, fires, cap):
    found, _ = lint({E(client_id="c"): {"request_percentage": value}}, "cannot-bind",
                    settings=brokers(settings) if settings else None)
    assert bool(found) == fires
    if fires:
        assert found[0].fix_quotas == {E(client_id="c"): {"request_percentage": cap}}


# -- brokers-disagree -------------------------------------------------------------------------
@pytest.mark.parametrize("values, disagree", [
    ([{"num.io.threads": "8"}, {"num.io.threads": "8"}], []),
    ([{"num.io.threads": "8"}, {"num.io.threads": "3"}, {"num.io.threads": "8"}],
     ["num.io.threads"]),
    ([{"quota.window.num": "11", "message.max.bytes": "1"}, {"quota.window.num": "5",
                                                             "message.max.bytes": "2"}],
     ["quota.window.num", "message.max.bytes"]),
])
def test_brokers_disagree(values, disagree):
    found, report = lint({}, "brokers-disagree", settings=brokers(*values))
    assert [f.key for f in found] == disagree
    assert "brokers-disagree" in dict(report.ran)
    for f in found:
        assert f.entity is None and f.fix_quotas == {} and "broker 2" in f.evidence


# -- stale ------------------------------------------------------------------------------------
def test_stale():
    usage = samples([("alice", "app", "produce", 10.0, None)], hours=24 * 8, step_s=3600)
    late = usage["ts"] > T0 + timedelta(days=2)
    usage.loc[late & (usage["user"] == "alice"), "user"] = "alice"  # alice stays
    old = samples([("bob", "b-app", "produce", 10.0, None)], hours=24, step_s=3600)
    quotas = {E(user="alice"): {"producer_byte_rate": 1e6},
              E(user="bob"): {"producer_byte_rate": 1e6},
              E(user="alice", client_id="gone"): {"producer_byte_rate": 1e6},
              E(user=None): {"producer_byte_rate": 1e6}}
    found, _ = lint(quotas, "stale", usage=pd.concat([usage, old]), stale_days=7)
    assert {f.entity: f.severity for f in found} == {E(user="bob"): "info",
                                                     E(user="alice", client_id="gone"): "info"}
    bob = next(f for f in found if f.entity == E(user="bob"))
    assert "last seen 2025-01-01 23:00 UTC" in bob.evidence and bob.fix_quotas == {
        E(user="bob"): {}}
    gone = next(f for f in found if f.entity != E(user="bob"))
    assert "never in the recorded history" in gone.evidence


def test_stale_does_not_judge_a_history_shorter_than_its_days():
    usage = samples([("alice", "app", "produce", 10.0, None)], hours=24)
    found, report = lint({E(user="bob"): {"producer_byte_rate": 1e6}}, "stale", usage=usage)
    assert found == [] and "less than --stale-days 7" in dict(report.skipped)["stale"]


# -- churning-principals ----------------------------------------------------------------------
def test_churning_principals():
    rows = [(f"session-{i}", "orders", "produce", 100.0 * (i + 1), None) for i in range(12)]
    rows += [(f"s-{i}", "calm", "produce", 1.0, None) for i in range(3)]
    usage = samples(rows)
    keyed = {E(user="session-0"): {"producer_byte_rate": 5e5},
             E(user="session-1"): {"producer_byte_rate": 5e5, "consumer_byte_rate": 1.0}}
    found, _ = lint(keyed, "churning-principals", usage=usage)
    assert [(f.entity, f.key) for f in found] == [(E(client_id="orders"), "producer_byte_rate")]
    assert "12 distinct users" in found[0].evidence and "2 have" in found[0].evidence
    assert "the other 10 get 10 no quota" in found[0].evidence
    assert found[0].fix_quotas == {E(client_id="orders"): {"producer_byte_rate": 5e5}}
    # {user=<default>} sets the key: {client-id=orders} would never bind, so the pair entry
    found, _ = lint({**keyed, E(user=None): {"producer_byte_rate": 7e5}},
                    "churning-principals", usage=usage)
    assert found[0].entity == E(user=None, client_id="orders")
    assert found[0].fix_quotas[found[0].entity] == {"producer_byte_rate": 5e5}
    # nobody keyed by user: nothing to miss; fewer users than --churn-users: quiet
    assert lint({E(user=None): {"producer_byte_rate": 7e5}}, "churning-principals",
                usage=usage)[0] == []
    assert lint(keyed, "churning-principals", usage=usage, churn_users=13)[0] == []


# -- chronic ----------------------------------------------------------------------------------
HOT = (lambda i: 3e6 if i % 2 else 1e6, lambda i: 500.0 if i % 2 else None)   # throttled 50 %
WARM = (lambda i: 3e6 if i % 20 == 0 else 1e6,
        lambda i: 500.0 if i % 20 == 0 else None)                            # throttled 5 %
CALM = (1e6, None)                                                          # never throttled


def test_chronic():
    usage = samples([("hot", None, "produce", *HOT), ("warm", None, "produce", *WARM)])
    quotas = {E(user=None): {"producer_byte_rate": 2e6, "consumer_byte_rate": 1e9}}
    found, _ = lint(quotas, "chronic", usage=usage)
    assert [(f.entity, f.key) for f in found] == [(E(user=None), "producer_byte_rate")]
    assert "hot · any client id 50 %" in found[0].evidence
    assert "warm" not in found[0].evidence
    # 1 of 2 users throttled: not most, so hot gets an entry of its own, sized from its p99
    # (3e6); the default stays
    assert "only 1 of 2 users under {user=<default>} is throttled" in found[0].evidence
    assert found[0].fix_quotas == {E(user="hot"): {"producer_byte_rate": SIZED_3M}}
    found, _ = lint(quotas, "chronic", usage=usage, chronic_pct=60)
    assert found == []
    # throttled under an older, lower quota, and the entry already gives the p99: quiet
    raised = {E(user=None): {"producer_byte_rate": 3e6}}
    assert lint(raised, "chronic", usage=usage)[0] == []


def _users(hot: int, calm: int, qt="produce", heavy=3e6):
    """``hot`` users throttled half the time (the first at ``heavy`` B/s when throttled),
    ``calm`` users never."""
    rows = [(f"h{i}", None, qt, (lambda j, r=(heavy if i == 0 else 3e6):
                                 r if j % 2 else 1e6), HOT[1]) for i in range(hot)]
    return samples(rows + [(f"c{i}", None, qt, *CALM) for i in range(calm)])


#: The fixes' quotas: a p99 of 3e6 B/s (2.861 MiB/s) rounded up to 2.87 MiB/s, one of
#: 36.9e6 (35.19 MiB/s) to 35.2 MiB/s: quota_core.domain.units.round_up_quota, History's rounding too
#: (issue 28 moved these from decimal digits, 3e6 and 36.9e6, to the one definition).
SIZED_3M, SIZED_36_9M = 3_009_414.0, 36_909_876.0


@pytest.mark.parametrize("quotas, usage, entity, evidence, fix", [
    # one heavy client of nine under {user=<default>}: its own entry at its p99, never the
    # default raised to 35.2 MiB/s for every user (issue 27)
    ({E(user=None): {"consumer_byte_rate": 2 * 2**20, "producer_byte_rate": 2e6}},
     _users(1, 8, "fetch", heavy=36_900_000), E(user=None),
     "only 1 of 9 users under {user=<default>} is throttled, so the default stays",
     {E(user="h0"): {"consumer_byte_rate": SIZED_36_9M}}),
    # 7 of 9 throttled: most, so the default is raised (the other key kept), and says how many
    ({E(user=None): {"consumer_byte_rate": 1e9, "producer_byte_rate": 2e6}}, _users(7, 2),
     E(user=None), "; 7 of 9 users under {user=<default>} are throttled; the largest",
     {E(user=None): {"consumer_byte_rate": 1e9, "producer_byte_rate": SIZED_3M}}),
    # exactly half is not most: entries of their own, the default kept
    ({E(user=None): {"producer_byte_rate": 2e6}}, _users(2, 2), E(user=None),
     "only 2 of 4 users under {user=<default>} are throttled",
     {E(user="h0"): {"producer_byte_rate": SIZED_3M}, E(user="h1"): {"producer_byte_rate": SIZED_3M}}),
    # {client-id=<default>}: the principal is the client id
    ({E(client_id=None): {"producer_byte_rate": 2e6}},
     samples([(None, "hot-app", "produce", *HOT)] +
             [(None, f"app{i}", "produce", *CALM) for i in range(3)]),
     E(client_id=None), "only 1 of 4 client ids under {client-id=<default>} is throttled",
     {E(client_id="hot-app"): {"producer_byte_rate": SIZED_3M}}),
    # a user's own entry binds one principal: raised to its p99, as before
    ({E(user="etl"): {"producer_byte_rate": 2e6}}, samples([("etl", None, "produce", *HOT)]),
     E(user="etl"), "the fix sets it to that (the sizing hint)",
     {E(user="etl"): {"producer_byte_rate": SIZED_3M}}),
    # {user=<default>, client-id=reporting}: its users are the principals; 2 of 2 throttled
    ({E(user=None, client_id="reporting"): {"consumer_byte_rate": 1e6}},
     samples([("bob", "reporting", "fetch", 3e6, 200.0), ("carol", "reporting", "fetch",
                                                          2e6, 100.0)]),
     E(user=None, client_id="reporting"), "2 of 2 users under {user=<default>, "
     "client-id=reporting} are throttled",
     {E(user=None, client_id="reporting"): {"consumer_byte_rate": SIZED_3M}}),
])
def test_chronic_never_loosens_a_default_to_fit_one(quotas, usage, entity, evidence, fix):
    found, _ = lint(quotas, "chronic", usage=usage)
    keys = {k for q in fix.values() for k in q if quotas.get(entity, {}).get(k) != q[k]}
    assert [(f.entity, {f.key}) for f in found] == [(entity, keys)]
    assert evidence in found[0].evidence, found[0].evidence
    assert found[0].fix_quotas == fix


def test_chronic_own_entries_skip_a_principal_the_default_now_fits():
    """A default raised since (it gives the heavy one's p99 now): no finding."""
    quotas = {E(user=None): {"producer_byte_rate": 4e6}}
    assert lint(quotas, "chronic", usage=_users(1, 8))[0] == []


@pytest.mark.parametrize("key, value, expected", [
    ("producer_byte_rate", 10_848_520.2, 10_905_191.0),  # 10.4 MiB/s, as History shows it
    ("producer_byte_rate", 3e6, SIZED_3M), ("producer_byte_rate", 3 * 2**20, 3 * 2**20),
    ("request_percentage", 131.697, 132.0), ("request_percentage", 0.01234, 0.0124),
])
def test_sizing_rounds_up_to_three_digits(key, value, expected):
    assert sized(key, value) == expected and sized(key, value) >= value


def test_p99_is_linear_between_ranks():
    assert p99(list(range(101))) == 99.0 and p99([1.0, 2.0]) == pytest.approx(1.99)
