"""ui.browse: the Browse table's rows, filters, levels, search, sort and exports."""
from __future__ import annotations

import csv
import io
import json

import pytest

from quota_core import Entity, EntityFilter, FilterComponent, filter_quotas
from ui.browse import (DEFAULT_LABEL, LEVELS, BrowseFilter, TypeMatch, at_levels, display_frame,
                       entity_level, export_csv, export_json, filter_frame, frame_quotas,
                       level_counts, quota_frame, natural_key, quota_rows, sort_frame)
from localkafka.demo import demo_quotas
from quota_core.errors import FilterError
from quota_core.domain.serialization import from_document

E = Entity.of


@pytest.fixture(scope="module")
def quotas():
    q = demo_quotas()
    q[E(user="bob", client_id="checkout-api")] = {"producer_byte_rate": 3_000_000.0}
    q[E(client_id="<default>")] = {"consumer_byte_rate": 1_000.0}
    return q


@pytest.fixture(scope="module")
def frame(quotas):
    return quota_frame(quotas)


# -- the ladder level an entry's shape fills -------------------------------------------------
@pytest.mark.parametrize("entity, level", [
    (E(user="alice", client_id="app"), "1"),
    (E(user="alice", client_id=None), "2"),
    (E(user="alice"), "3"),
    (E(user=None, client_id="app"), "4"),
    (E(user=None, client_id=None), "5"),
    (E(user=None), "6"),
    (E(client_id="app"), "7"),
    (E(client_id=None), "8"),
    (E(user="<default>"), "3"),          # a name, not the default
    (E(client_id="<default>"), "7"),
    (E(ip="10.0.0.1"), "ip"),
    (E(ip=None), "ip"),
])
def test_entity_level(entity, level):
    assert entity_level(entity) == level


def test_frame_levels_match_entity_level(frame):
    assert [entity_level(e) for e in frame["_entity"]] == list(frame["level"].astype(str))


# -- filters agree with describe (filter_quotas) ---------------------------------------------
ANY, DEF = TypeMatch("any"), TypeMatch("default")


def exact(name):
    return TypeMatch("exact", name)


DESCRIBE_CASES = [
    (BrowseFilter(), EntityFilter.all()),
    (BrowseFilter(user=ANY), EntityFilter.contains([FilterComponent.any("user")])),
    (BrowseFilter(user=ANY, strict=True), EntityFilter.contains_only([FilterComponent.any("user")])),
    (BrowseFilter(user=DEF), EntityFilter.contains([FilterComponent.default("user")])),
    (BrowseFilter(user=DEF, strict=True),
     EntityFilter.contains_only([FilterComponent.default("user")])),
    (BrowseFilter(user=exact("alice")), EntityFilter.contains([FilterComponent.exact("user", "alice")])),
    (BrowseFilter(user=exact("<default>")),
     EntityFilter.contains([FilterComponent.exact("user", "<default>")])),
    (BrowseFilter(client_id=exact("checkout-api"), user=ANY),
     EntityFilter.contains([FilterComponent.any("user"),
                            FilterComponent.exact("client-id", "checkout-api")])),
    (BrowseFilter(client_id=DEF, strict=True),
     EntityFilter.contains_only([FilterComponent.default("client-id")])),
    (BrowseFilter(client_id=exact("<default>"), strict=True),
     EntityFilter.contains_only([FilterComponent.exact("client-id", "<default>")])),
    (BrowseFilter(ip=ANY), EntityFilter.contains([FilterComponent.any("ip")])),
    (BrowseFilter(ip=DEF), EntityFilter.contains([FilterComponent.default("ip")])),
    (BrowseFilter(ip=exact("10.0.0.12")), EntityFilter.contains([FilterComponent.exact("ip", "10.0.0.12")])),
    (BrowseFilter(strict=True), EntityFilter.contains_only([])),  # matches nothing
]


@pytest.mark.parametrize("spec, describe", DESCRIBE_CASES, ids=[str(d) for _, d in DESCRIBE_CASES])
def test_filter_matches_describe(quotas, frame, spec, describe):
    assert spec.entity_filter() == describe
    assert spec.describe_equivalent
    got = set(filter_frame(frame, spec)["_entity"])
    assert got == set(filter_quotas(quotas, describe))


@pytest.mark.parametrize("spec, expected", [
    # absent: what describe cannot say
    (BrowseFilter(user=exact("alice"), client_id=TypeMatch("absent")), {E(user="alice")}),
    (BrowseFilter(user=TypeMatch("absent"), client_id=DEF), {E(client_id=None)}),
    (BrowseFilter(user=DEF, client_id=TypeMatch("absent"), ip=TypeMatch("absent")),
     {E(user=None)}),
])
def test_absent(frame, spec, expected):
    assert not spec.describe_equivalent
    assert set(filter_frame(frame, spec)["_entity"]) == expected


@pytest.mark.parametrize("spec, message", [
    (BrowseFilter(user=ANY, ip=ANY), "IP filter component should not be used with user"),
    (BrowseFilter(user=exact("")), "The exact match for user has no name"),
])
def test_filter_errors_like_a_broker(frame, spec, message):
    with pytest.raises(FilterError, match=message):
        filter_frame(frame, spec)


def test_unknown_mode():
    with pytest.raises(FilterError, match="Unknown match mode 'some'"):
        TypeMatch("some")


@pytest.mark.parametrize("search, expected", [
    ("ALICE", {E(user="alice", client_id="checkout-api"), E(user="alice", client_id=None),
               E(user="alice")}),
    ("checkout", {E(user="alice", client_id="checkout-api"),
                  E(user="bob", client_id="checkout-api")}),
    ("10.0.0", {E(ip="10.0.0.12")}),
    ("<default>", {E(user="<default>"), E(client_id="<default>")}),  # names only
    ("cn=etl,ou", {E(user="CN=etl,OU=data")}),
    ("nobody-has-this", set()),
])
def test_search(frame, search, expected):
    assert set(filter_frame(frame, BrowseFilter(search=search))["_entity"]) == expected


def test_search_combines_with_type_filters(frame):
    got = filter_frame(frame, BrowseFilter(user=exact("alice"), search="checkout"))
    assert list(got["_entity"]) == [E(user="alice", client_id="checkout-api")]


def test_levels_and_counts(frame, quotas):
    counts = level_counts(frame)
    assert list(counts) == list(LEVELS)
    assert sum(counts.values()) == len(quotas)
    assert counts["3"] == 4 and counts["7"] == 2 and counts["ip"] == 2
    only = at_levels(frame, ["1", "ip"])
    assert set(only["level"].astype(str)) == {"1", "ip"}
    assert len(at_levels(frame, [])) == len(frame)
    spec = BrowseFilter(levels=("8",))
    assert list(filter_frame(frame, spec)["_entity"]) == [E(client_id=None)]


# -- display: the default is not the name "<default>" ----------------------------------------
def test_display_tells_default_from_literal_name(frame):
    shown = display_frame(frame)
    by_entity = dict(zip(frame["_entity"], shown.to_dict("records")))
    assert by_entity[E(user=None)]["user"] == DEFAULT_LABEL
    assert by_entity[E(user="<default>")]["user"] == "<default>"
    assert by_entity[E(client_id="<default>")]["client-id"] == "<default>"
    assert by_entity[E(client_id=None)]["client-id"] == DEFAULT_LABEL
    assert by_entity[E(user=None)]["client-id"] == ""  # absent


def test_display_units_and_exact(frame):
    shown = display_frame(frame)
    row = shown[frame["_entity"] == E(user="alice", client_id="checkout-api")].iloc[0]
    assert row["producer_byte_rate"] == "8 MiB/s"
    assert row["producer_byte_rate (exact)"] == 8 * 1024 * 1024
    assert row["consumer_byte_rate"] == ""
    bob = shown[frame["_entity"] == E(user="bob", client_id="checkout-api")].iloc[0]
    assert bob["producer_byte_rate"] == "3 MB/s"
    assert bob["producer_byte_rate (exact)"] == 3_000_000


# -- sort ------------------------------------------------------------------------------------
def test_sort_numeric_with_unset_last(frame):
    s = sort_frame(frame, "producer_byte_rate", descending=True)
    values = list(s["producer_byte_rate"])
    set_values = [v for v in values if v == v]
    assert set_values == sorted(set_values, reverse=True)
    assert all(v != v for v in values[len(set_values):])


def test_sort_names_default_first(frame):
    s = sort_frame(frame, "user")
    kinds = list(s["_user_kind"])
    assert kinds == sorted(kinds)
    named = [n for n, k in zip(s["_user"], kinds) if k == 2]
    assert named == sorted(named, key=natural_key)


def test_names_sort_naturally():
    quotas = {Entity.of(user=n): {"producer_byte_rate": 1.0}
              for n in ("svc-10", "svc-2", "Svc-3", "svc-1", "svc-02", "alpha")}
    s = sort_frame(quota_frame(quotas), "user")
    assert list(s["user"]) == ["alpha", "svc-1", "svc-02", "svc-2", "Svc-3", "svc-10"]
    assert list(quota_frame(quotas)["user"]) == list(s["user"])  # the default order too


def test_sort_unknown_column(frame):
    with pytest.raises(KeyError, match="Cannot sort by 'nope'"):
        sort_frame(frame, "nope")


# -- rows and exports ------------------------------------------------------------------------
def test_quota_rows_are_plain(quotas):
    rows = quota_rows(quotas)
    assert len(rows) == len(quotas)
    row = next(r for r in rows if r["entity"] == "{user=%3Cdefault%3E}")
    assert row == {"entity": "{user=%3Cdefault%3E}", "level": "3",
                   "parts": {"user": "<default>"}, "quotas": {"producer_byte_rate": 102400.0}}
    default_row = next(r for r in rows if r["entity"] == "{user=<default>}")
    assert default_row["parts"] == {"user": None}


def test_export_json_round_trips_through_the_cli_format(frame, quotas):
    doc = json.loads(export_json(frame))
    assert doc["format"] == "quota-console/1"
    assert from_document(doc) == quotas
    assert frame_quotas(frame) == quotas


def test_export_csv(frame, quotas):
    rows = list(csv.DictReader(io.StringIO(export_csv(frame))))
    assert len(rows) == len(quotas)
    literal = next(r for r in rows if r["entity"] == '{user="<default>"}')
    assert literal["user"] == "<default>" and literal["level"] == "3"
    assert literal["producer_byte_rate"] == "102400" and literal["consumer_byte_rate"] == ""
    default = next(r for r in rows if r["entity"] == "{user=<default>, client-id=<default>}")
    assert default["request_percentage"] == "25"
    assert any(r["entity"] == '{user="CN=etl,OU=data"}' for r in rows)  # raw, quoted


def test_empty_set():
    frame = quota_frame({})
    assert len(frame) == 0
    assert level_counts(frame) == {lv: 0 for lv in LEVELS}
    assert len(filter_frame(frame, BrowseFilter(search="x", user=ANY))) == 0
    assert json.loads(export_json(frame))["entries"] == []


def test_big_set_filters_fast():
    import time

    quotas = {E(user=f"u{i}", client_id=f"c{i % 997}"): {"producer_byte_rate": float(i + 1)}
              for i in range(100_000)}
    frame = quota_frame(quotas)
    started = time.perf_counter()
    got = filter_frame(frame, BrowseFilter(client_id=exact("c5"), search="u1"))
    display_frame(got)
    level_counts(got)
    assert time.perf_counter() - started < 1.0
    assert set(got["_client-id"]) == {"c5"}


@pytest.mark.parametrize("search", ["", "alice", "no-such-name"])
def test_charts_match_validated_plotly_figures(frame, search):
    # ui.charts builds its figures from specs in plotly's own form, with numpy statistics:
    # they must be exactly what plotly's validated figures hold.
    import plotly.graph_objects as go
    import plotly.io as pio

    from ui.charts import _byte_rate_box_spec, _level_bar_spec, byte_rate_box, level_bar

    shown = filter_frame(frame, BrowseFilter(search=search))
    for spec, fast in ((_level_bar_spec(level_counts(shown)), level_bar(level_counts(shown))),
                       (_byte_rate_box_spec(shown), byte_rate_box(shown))):
        validated = json.loads(pio.to_json(go.Figure(spec), validate=False))
        assert json.loads(pio.to_json(fast, validate=False)) == validated
