"""DescribeClientQuotas answers read from their bytes (quota_core.backends.kafka_decode) give
exactly what kafka-python's own decoder gave, turned into a QuotaSet the way the backend did
before (one Entity.from_pairs per entry, float values): for both versions, hard names, long
names and counts (multi-byte varints), tagged fields, and answers a broker could not mean.
The real-broker comparison is in tests/backends/test_describe_kafka.py."""
from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings, strategies as st

from quota_core.backends import kafka_wire  # noqa: F401  (registers kafka-python lazily)
from quota_core.backends.kafka_decode import decode_quotas, read_answer
from quota_core.domain.entities import Entity
from quota_core.errors import EntityError

from kafka.protocol.admin.client_quotas import DescribeClientQuotasResponse as Response

Entry = Response.EntryData

HARD_NAMES = ["alice", "<default>", "CN=etl,OU=data", "a=b", "a,b", "100%", "with space",
              " leading", "trailing ", "<b>bold</b>&amp;", 'say "hi"', "back\\slash",
              "line\nbreak\ttab\x01", "é中文😀", "\u2028\u2029", "*", "a+b~c", "x" * 127,
              "y" * 128, "z" * 300, "ü" * 200]


def _encode(entries, version: int, error_code: int = 0, message: str | None = None) -> bytes:
    """An answer's body as a broker sends it, by kafka-python's encoder."""
    return bytes(Response(throttle_time_ms=7, error_code=error_code, error_message=message,
                          entries=None if entries is None else [
                              Entry(entity=[Entry.EntityData(entity_type=t, entity_name=n)
                                            for t, n in parts],
                                    values=[Entry.ValueData(key=k, value=v) for k, v in values])
                              for parts, values in entries],
                          version=version).encode(version=version))


def _reference(body: bytes, version: int) -> dict:
    """The QuotaSet as KafkaBackend.describe built it before: kafka-python's objects."""
    response = Response[version].decode(body)
    quotas = {}
    for entry in response.entries or ():
        entity = Entity.from_pairs((e.entity_type, e.entity_name) for e in entry.entity)
        values = {v.key: float(v.value) for v in entry.values}
        if values:
            quotas[entity] = values
    return quotas


def _ours(body: bytes, version: int) -> dict:
    answer = read_answer(bytearray(body), 0, version)
    assert (answer.throttle_time_ms, answer.error_code) == (7, 0)
    return answer.quotas()


def _same(a: dict, b: dict) -> bool:
    """Equal QuotaSets, NaN equal to NaN, and the same entities in the same order."""
    if list(a) != list(b):
        return False
    return all(list(a[e]) == list(b[e]) and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a[e].values(), b[e].values()))
        for e in a)


def _hard_entries():
    entries = [([("user", None)], [("consumer_byte_rate", 2048.0)]),
               ([("client-id", None), ("user", None)], [("request_percentage", 12.5)]),
               ([("ip", None)], [("connection_creation_rate", 30.0)]),
               ([("ip", "192.0.2.10")], [("connection_creation_rate", 5.0)]),
               ([("user", "no-values")], [])]
    for i, name in enumerate(HARD_NAMES):
        entries.append(([("user", name)], [("producer_byte_rate", 1024.0 + i)]))
        entries.append(([("user", name), ("client-id", name + "-app")],
                        [("producer_byte_rate", 1e20), ("consumer_byte_rate", 0.5),
                         ("request_percentage", math.nan), ("controller_mutation_rate", math.inf)]))
        entries.append(([("client-id", name)], [("producer_byte_rate", -0.0)]))
    return entries


@pytest.mark.parametrize("version", [0, 1])
def test_hard_names_decode_as_kafka_python_decodes_them(version):
    body = _encode(_hard_entries(), version)
    ours, theirs = _ours(body, version), _reference(body, version)
    assert len(ours) == len(_hard_entries()) - 1  # the entry without values is left out
    assert _same(ours, theirs)
    # Type and key strings are shared by every entry (one object each, not one per entry).
    keys = [k for values in ours.values() for k in values if k == "producer_byte_rate"]
    assert len({id(k) for k in keys}) == 1


@pytest.mark.parametrize("version", [0, 1])
def test_many_entries_need_multi_byte_counts(version):
    entries = [([("user", f"u{i}")], [("producer_byte_rate", float(i))]) for i in range(20_000)]
    body = _encode(entries, version)
    assert _same(_ours(body, version), _reference(body, version))


@pytest.mark.parametrize("version", [0, 1])
def test_no_entries_and_null_entries(version):
    assert _ours(_encode([], version), version) == {}
    assert _ours(_encode(None, version), version) == {}


@pytest.mark.parametrize("version", [0, 1])
def test_the_error_head_is_read(version):
    answer = read_answer(_encode(None, version, 35, "no such filter"), 0, version)
    assert (answer.error_code, answer.error_message) == (35, "no such filter")


def test_tagged_fields_at_every_level_are_skipped():
    """Version 1 lets a broker add tagged fields after any struct; unknown ones are skipped
    (kafka-python cannot encode them, so the bytes are written out here)."""
    tags = bytes([2, 5, 3]) + b"xyz" + bytes([9, 1]) + b"q"  # two tags: 5 -> xyz, 9 -> q
    body = (struct.pack(">ih", 0, 0) + bytes([0])         # throttle, error, null message
            + bytes([2])                                   # one entry
            + bytes([2]) + bytes([5]) + b"user" + bytes([2]) + b"a" + tags   # entity part
            + bytes([2]) + bytes([2]) + b"k" + struct.pack(">d", 2.5) + tags  # one value
            + tags                                         # the entry's own
            + tags)                                        # the answer's
    assert _ours_raw(body) == {Entity.of(user="a"): {"k": 2.5}}


def _ours_raw(body: bytes) -> dict:
    return read_answer(body, 0, 1).quotas()


@pytest.mark.parametrize("version", [0, 1])
def test_a_cut_answer_is_an_error_not_a_wrong_set(version):
    body = _encode(_hard_entries(), version)
    for cut in (len(body) - 1, len(body) // 2, 12):
        with pytest.raises((ValueError, IndexError, struct.error)):
            read_answer(body[:cut], 0, version).quotas()


@pytest.mark.parametrize("parts, message", [
    ([("group", "g")], "Unknown entity type 'group'"),
    ([("user", "")], "Empty user not supported"),
    ([("user", "a"), ("user", "b")], "given twice"),
    ([("ip", "10.0.0.1"), ("user", "a")], "ip entity cannot be combined"),
])
@pytest.mark.parametrize("version", [0, 1])
def test_entities_no_broker_accepts_raise_entity_error(version, parts, message):
    body = _encode([(parts, [("producer_byte_rate", 1.0)])], version)
    with pytest.raises(EntityError, match=message):
        _ours(body, version)


def test_a_name_that_is_not_utf8_is_named_as_such():
    flexible = (struct.pack(">ih", 0, 0) + bytes([0, 2, 2, 5]) + b"user" + bytes([3]) + b"a\xff"
                + bytes([0, 2, 2]) + b"k" + struct.pack(">d", 1.0) + bytes([0, 0, 0]))
    classic = (struct.pack(">ihhiih", 0, 0, -1, 1, 1, 4) + b"user" + struct.pack(">h", 2)
               + b"a\xff" + struct.pack(">ih", 1, 1) + b"k" + struct.pack(">d", 1.0))
    for body, version in ((flexible, 1), (classic, 0)):
        with pytest.raises(EntityError, match="lone surrogate"):
            read_answer(body, 0, version).quotas()


names = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), min_size=1,
                                     max_size=40))
values = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=150, deadline=None)
@given(version=st.sampled_from([0, 1]),
       rows=st.lists(st.tuples(names, names, st.booleans(),
                               st.dictionaries(st.sampled_from(
                                   ["producer_byte_rate", "consumer_byte_rate",
                                    "request_percentage", "controller_mutation_rate"]),
                                   values, max_size=4)), max_size=30))
def test_any_answer_decodes_as_kafka_python_decodes_it(version, rows):
    entries = [(([("user", u), ("client-id", c)] if both else [("user", u)]), list(v.items()))
               for u, c, both, v in rows]
    body = _encode(entries, version)
    assert _same(_ours(body, version), _reference(body, version))


def test_decode_quotas_takes_bytes_or_a_bytearray():
    body = _encode([([("user", "a")], [("k", 1.0)])], 1)
    answer = read_answer(body, 0, 1)
    assert decode_quotas(bytearray(body), answer.entries_at, True) == \
        decode_quotas(body, answer.entries_at, True) == {Entity.of(user="a"): {"k": 1.0}}
