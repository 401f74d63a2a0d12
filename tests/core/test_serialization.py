"""JSON / YAML export and import of a whole quota set."""
from __future__ import annotations

import json
import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from quota_core import Alteration, Entity, Op, ParseError
from quota_core.domain.serialization import (FORMAT, dumps, from_document, import_plan, loads,
                                             to_document)
from quota_core.domain.validation import entry_problems

E = Entity.of

AWKWARD = st.sampled_from([",", "=", "%", "\\", " ", "<default>", "null", "~", "true", "1.5",
                           "- x", "#", ":", "'", "\"", "\n", "\t", "é", "名前", "\x00", "\x85",
                           "\u2028", "\ufeff", "😀", "&a", "*b", "!tag", "{}", "[]", "? "])
NAMES = st.one_of(st.none(), st.lists(st.one_of(AWKWARD, st.text(min_size=1, max_size=3)),
                                      min_size=1, max_size=4).map("".join))
VALUES = st.one_of(st.integers(1, 2**31 - 1).map(float),  # valid for every key, mostly
                   st.integers(1, 2**31 - 1).map(float),
                   st.integers(1, 2**63 - 1).map(float),
                   st.floats(min_value=1e-9, allow_nan=False),
                   st.just(math.nan))


@st.composite
def entities(draw):
    if draw(st.integers(0, 9)) == 0:
        return E(ip=draw(NAMES | st.sampled_from(["192.0.2.10", "2001:db8::1"])))
    shape = draw(st.sampled_from(["user", "client", "both"]))
    kwargs = {}
    if shape in ("user", "both"):
        kwargs["user"] = draw(NAMES)
    if shape in ("client", "both"):
        kwargs["client_id"] = draw(NAMES)
    return E(**kwargs)


CLIENT_KEYS = st.dictionaries(st.sampled_from(["producer_byte_rate", "consumer_byte_rate",
                                              "request_percentage",
                                              "controller_mutation_rate"]), VALUES, min_size=1)
IP_KEYS = st.dictionaries(st.just("connection_creation_rate"), VALUES, min_size=1)
# Each entity with keys its type can have (the reader refuses others, as a broker does).
QUOTA_SETS = st.lists(entities().flatmap(lambda e: st.tuples(
    st.just(e), IP_KEYS if e.is_ip else CLIENT_KEYS)), max_size=8,
    unique_by=lambda pair: pair[0]).map(dict)


def same(a, b) -> bool:
    """Quota sets equal, NaN equal to NaN."""
    return {e: {k: repr(float(v)) for k, v in q.items()} for e, q in a.items()} == \
        {e: {k: repr(float(v)) for k, v in q.items()} for e, q in b.items()}


@settings(max_examples=60, deadline=None)
@given(quotas=QUOTA_SETS)
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_round_trip(fmt, quotas):
    """Every quota set a cluster can hold is exported exactly; the strict reader reads back
    every valid one, and refuses the others (NaN, infinity, a fraction of a byte, a host name
    for an ip) with the validator's message, as every reader of a quota file does."""
    text = dumps(quotas, fmt)
    exported = from_document(json.loads(text) if fmt == "json" else yaml.safe_load(text))
    assert same(exported, quotas)
    problems = [p for e, q in sorted(quotas.items(), key=lambda eq: Entity.sort_key(eq[0]))
                for p in entry_problems(e, dict(sorted(q.items())))]
    if problems:
        with pytest.raises(ParseError) as info:
            loads(text, fmt)
        assert str(info.value).endswith(problems[0].message)
        return
    back = loads(text, fmt)
    assert same(back, quotas)
    assert list(back) == sorted(quotas, key=Entity.sort_key)
    assert dumps(back, fmt) == text  # stable


def test_document_shape_raw_names_null_default_integral_values():
    quotas = {E(user="CN=a,OU=b", client_id=None): {"producer_byte_rate": 4e6,
                                                   "request_percentage": 56.25},
              E(user="<default>"): {"consumer_byte_rate": 1000.0},
              E(user=None): {"consumer_byte_rate": 2000.0}}
    doc = to_document(quotas)
    assert doc == {"format": FORMAT, "entries": [
        {"entity": {"user": None}, "quotas": {"consumer_byte_rate": 2000}},
        {"entity": {"user": "<default>"}, "quotas": {"consumer_byte_rate": 1000}},
        {"entity": {"user": "CN=a,OU=b", "client-id": None},
         "quotas": {"producer_byte_rate": 4000000, "request_percentage": 56.25}}]}
    assert isinstance(doc["entries"][2]["quotas"]["producer_byte_rate"], int)
    assert json.loads(dumps(quotas, "json")) == doc
    assert yaml.safe_load(dumps(quotas, "yaml")) == doc
    assert '"producer_byte_rate": 4000000,' in dumps(quotas, "json")


@pytest.mark.parametrize("name", ["\x85", "a\x85b", "\u2028", "x\n y ", " <default> "])
def test_yaml_keeps_line_break_characters_in_names(name):
    """PyYAML folds a raw NEL (U+0085) in a single-quoted scalar into a space."""
    quotas = {E(user=name, client_id=name): {"producer_byte_rate": 1.0}}
    assert loads(dumps(quotas, "yaml"), "yaml") == quotas


def test_large_values_survive_exactly():
    quotas = {E(user="u"): {"producer_byte_rate": float(2**63 - 1), "consumer_byte_rate": 2.0**60 + 2**8}}
    for fmt in ("json", "yaml"):
        assert loads(dumps(quotas, fmt), fmt) == quotas


def test_handwritten_yaml():
    text = """
format: quota-console/1
entries:
  - entity: {user: alice, client-id: null}
    quotas: {producer_byte_rate: 1048576, request_percentage: 12.5}
  - entity: {user: "<default>"}
    quotas: {consumer_byte_rate: 1.0e+6}
  - entity: {ip: ~}
    quotas: {connection_creation_rate: 10}
"""
    # (PyYAML reads YAML 1.1: 1e6 without a dot would be a string, refused as not a number.)
    assert loads(text, "yaml") == {
        E(user="alice", client_id=None): {"producer_byte_rate": 1048576.0, "request_percentage": 12.5},
        E(user="<default>"): {"consumer_byte_rate": 1e6},
        E(ip=None): {"connection_creation_rate": 10.0}}


# -- import_plan ---------------------------------------------------------------------------

CURRENT = {E(user="a"): {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0},
           E(user="b"): {"producer_byte_rate": 3.0},
           E(user=None): {"request_percentage": math.nan}}


@pytest.mark.parametrize("desired, replace, plan", [
    # Nothing differs.
    (CURRENT, False, []),
    (CURRENT, True, []),
    ({E(user=None): {"request_percentage": math.nan}}, False, []),  # NaN equals NaN here
    # Merge: set what the file has, leave the rest.
    ({E(user="a"): {"producer_byte_rate": 5.0}}, False,
     [Alteration(E(user="a"), (Op.set("producer_byte_rate", 5.0),))]),
    ({E(user="c"): {"consumer_byte_rate": 7.0}}, False,
     [Alteration(E(user="c"), (Op.set("consumer_byte_rate", 7.0),))]),
    # Replace: also remove keys and entities the file does not have.
    ({E(user="a"): {"producer_byte_rate": 5.0}}, True,
     [Alteration(E(user=None), (Op.remove("request_percentage"),)),
      Alteration(E(user="a"), (Op.set("producer_byte_rate", 5.0), Op.remove("consumer_byte_rate"))),
      Alteration(E(user="b"), (Op.remove("producer_byte_rate"),))]),
    ({}, False, []),
    ({}, True, [Alteration(E(user=None), (Op.remove("request_percentage"),)),
                Alteration(E(user="a"), (Op.remove("consumer_byte_rate"), Op.remove("producer_byte_rate"))),
                Alteration(E(user="b"), (Op.remove("producer_byte_rate"),))]),
])
def test_import_plan(desired, replace, plan):
    assert import_plan(CURRENT, desired, replace=replace) == plan


@settings(max_examples=60, deadline=None)
@given(current=QUOTA_SETS, desired=QUOTA_SETS, replace=st.booleans())
def test_import_plan_reaches_the_target(current, desired, replace):
    from quota_core import apply_ops

    state = {e: dict(q) for e, q in current.items()}
    plan = import_plan(current, desired, replace=replace)
    assert len({a.entity for a in plan}) == len(plan)  # never the same entity twice
    for alteration in plan:
        after = apply_ops(state.get(alteration.entity, {}), alteration.ops)
        state.pop(alteration.entity, None)
        if after:
            state[alteration.entity] = after
    target = dict(desired) if replace else {**current, **{
        e: {**current.get(e, {}), **q} for e, q in desired.items()}}
    assert same(state, {e: q for e, q in target.items() if q})
    assert import_plan(state, desired, replace=replace) == []


# -- malformed documents -------------------------------------------------------------------

@pytest.mark.parametrize("text, fmt, message", [
    ('{"entries": [', "json", "q.json is not valid json: "),
    ("entries: [\n  - {entity: {user: a}\n", "yaml", "q.json is not valid yaml: "),
    ("[1, 2]", "json", "q.json is not a quota export: expected an object with an 'entries' list"),
    ("", "yaml", "q.json is not a quota export"),
    ('{"entries": {}}', "json", "q.json is not a quota export"),
    ('{"entries": [42]}', "json", "q.json, line 1 (entry 1): expected {'entity': {...}, 'quotas': {...}}."),
    ('{"entries": [{"entity": {"user": "a"}, "quotas": {"producer_byte_rate": 1}}, '
     '{"entity": "b", "quotas": {}}]}', "json", "q.json, line 1 (entry 2): expected {'entity'"),
    ('{"entries": [{"entity": {"user": "a"}}]}', "json", "q.json, line 1 (entry 1): expected {'entity'"),
    ('{"entries": [{"entity": {"group": "a"}, "quotas": {}}]}', "json",
     "q.json, line 1 (entry 1): Unknown entity type 'group'"),
    ('{"entries": [{"entity": {"user": ""}, "quotas": {}}]}', "json",
     "q.json, line 1 (entry 1): Empty user not supported"),
    ('{"entries": [{"entity": {}, "quotas": {}}]}', "json",
     "q.json, line 1 (entry 1): An empty entity is not a quota entity"),
    ('{"entries": [{"entity": {"user": 5}, "quotas": {}}]}', "json",
     "q.json, line 1 (entry 1): The user name must be a string, not 5."),
    ('{"entries": [{"entity": {"ip": "1.2.3.4", "user": "a"}, "quotas": {}}]}', "json",
     "q.json, line 1 (entry 1): An ip entity cannot be combined with user or client-id"),
    ('{"entries": [{"entity": {"user": "a"}, "quotas": {}}, {"entity": {"user": "b"}, "quotas": {}},'
     ' {"entity": {"user": "a"}, "quotas": {}}]}', "json",
     "q.json, line 1 (entry 3): {user=a} appears twice"),
    ('{"entries": [{"entity": {"user": "a"}, "quotas": {"producer_byte_rate": "1MB"}}]}', "json",
     "q.json, line 1 (entry 1): producer_byte_rate='1MB' is not a number."),
    ('{"entries": [{"entity": {"user": "a"}, "quotas": {"producer_byte_rate": true}}]}', "json",
     "q.json, line 1 (entry 1): producer_byte_rate=True is not a number."),
    ("entries:\n- entity: {user: a}\n  quotas: {producer_byte_rate: 5}\n"
     "- entity: {user: b}\n  quotas: {consumer_byte_rate: null}\n", "yaml",
     "q.json, line 5 (entry 2): consumer_byte_rate=None is not a number."),
    ("{}", "toml", "Unknown import format 'toml': use json or yaml."),
])
def test_malformed_documents(text, fmt, message):
    with pytest.raises(ParseError) as info:
        loads(text, fmt, source="q.json")
    assert message in str(info.value)


def test_from_document_default_source_and_unknown_export_format():
    with pytest.raises(ParseError, match=r"^the document, entry 1: "):
        from_document({"entries": [None]})
    with pytest.raises(ParseError, match="Unknown export format 'xml'"):
        dumps({}, "xml")


def test_non_finite_values_stay_strict_json(tmp_path):
    """Brokers accept NaN and +infinity; our JSON must still parse with a strict parser."""
    import io
    import json
    import math

    from quota_core import Alteration, Entity, Op
    from quota_core.cli.main import main
    from quota_core.backends.sandbox import SandboxBackend

    path = tmp_path / "q.sqlite"
    with SandboxBackend(path) as store:
        assert store.alter([Alteration(Entity.of(user="n"), (
            Op.set("request_percentage", math.nan),
            Op.set("controller_mutation_rate", math.inf)))]).ok

    def strict(text):
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))

    for argv in (["--describe", "--output", "json"], ["--export", "json"],
                 ["--resolve", "--user", "n", "--output", "json"]):
        out = io.StringIO()
        assert main(["--sandbox", str(path), *argv], out=out, err=io.StringIO()) == 0
        assert "NaN" in out.getvalue()
        strict(out.getvalue())
    out = io.StringIO()
    main(["--sandbox", str(path), "--export", "json"], out=out, err=io.StringIO())
    again = from_document(json.loads(out.getvalue()))  # the export holds what the cluster does
    assert math.isnan(again[Entity.of(user="n")]["request_percentage"])
    assert again[Entity.of(user="n")]["controller_mutation_rate"] == math.inf
    # ... and no quota file may (issue 32): the strict reader refuses it, naming the line.
    with pytest.raises(ParseError, match=r"^the document, line \d+ \(entry 1\): "
                                         r"controller_mutation_rate for \{user=n\}: infinity"):
        loads(out.getvalue())


def test_yaml_exponent_without_a_dot_gets_a_hint():
    text = "entries:\n- entity: {user: a}\n  quotas: {producer_byte_rate: 1e6}\n"
    with pytest.raises(ParseError) as info:
        loads(text, "yaml")
    assert str(info.value) == (
        "the document, line 3 (entry 1): producer_byte_rate='1e6' is not a number. (YAML reads "
        "1e6 as "
        "text, and quotes make any number text: write 1000000 or 1.0e+6.)")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=150, deadline=None)
@given(_JSON, st.sampled_from([None, 1]))
def test_the_json_reader_with_lines_reads_what_json_reads(doc, indent):
    """The line-keeping JSON reader (import files) reads each value as :mod:`json` does: keys
    and scalars through the public ``JSONDecoder.raw_decode``, not ``json.decoder`` internals."""
    from quota_core.domain import serialization

    text = json.dumps(doc, indent=indent, ensure_ascii=bool(indent))
    assert serialization._json_tree(text, "t.json") == json.loads(text)


def test_the_json_reader_uses_no_private_json_module():
    import inspect

    from quota_core.domain import serialization

    source = inspect.getsource(serialization)
    assert "json.decoder" not in source and "json.scanner" not in source
