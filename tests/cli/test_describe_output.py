"""``--describe`` output (quota_core.cli.output.write_describe): the JSON that orjson encodes is,
byte for byte, what ``json.dumps(doc, ensure_ascii=False, indent=2)`` printed before, and the
text forms are what the line-by-line formatting printed, for hard names and values, over
chunk boundaries, on every kind of stream."""
from __future__ import annotations

import io
import json
import math
import os

import pytest
from hypothesis import given, settings, strategies as st

from quota_core.cli import output
from quota_core.cli.output import format_describe, write_describe
from quota_core.domain.entities import Entity
from quota_core.domain.keys import json_number

HARD_NAMES = ["alice", "<default>", "%3Cdefault%3E", "CN=etl,OU=data", "a=b", "a,b", "100%",
              "with space", " leading", "trailing ", "<b>bold</b>&amp;<script>", 'say "hi"',
              "back\\slash", "line\nbreak\ttab\x01\x1f\x7f", "é中文😀", "\u2028\u2029",
              "*", "a+b~c", "-", ".", "{user=x}", "x" * 300]
HARD_VALUES = [1048576.0, 0.5, 12.5, 1e-05, 1e16, 1e20, 2.0**63, -(2.0**63),
               2.0**63 - 1024, 5e-324, -0.0, 0.1 + 0.2, math.nan, math.inf, -math.inf]


def _hard_set() -> dict:
    quotas = {Entity.of(user=None): {"consumer_byte_rate": 2048.0},
              Entity.of(user=None, client_id=None): {"request_percentage": 12.5},
              Entity.of(client_id=None): {"producer_byte_rate": 1.0},
              Entity.of(ip=None): {"connection_creation_rate": 10.0},
              Entity.of(ip="192.0.2.1"): {"connection_creation_rate": 2.5}}
    for i, name in enumerate(HARD_NAMES):
        v = HARD_VALUES[i % len(HARD_VALUES)]
        quotas[Entity.of(user=name)] = {"producer_byte_rate": v}
        quotas[Entity.of(client_id=name)] = {"request_percentage": v, "consumer_byte_rate": 7.0,
                                             "producer_byte_rate": 3.0}
        quotas[Entity.of(user=name, client_id=None)] = {"controller_mutation_rate": v}
        quotas[Entity.of(user=None, client_id=name)] = {"producer_byte_rate": float(i)}
    return quotas


def _json_dumps(quotas) -> str:
    """What --describe --output json printed before orjson: the reference."""
    return json.dumps([{"entity": e.as_dict(),
                        "quotas": {k: json_number(v) for k, v in sorted(quotas[e].items())}}
                       for e in sorted(quotas, key=Entity.sort_key)],
                      ensure_ascii=False, indent=2) + "\n"


def _lines(quotas, fmt: str) -> str:
    """What --describe printed as text / plain before: the reference."""
    blocks = []
    for e in sorted(quotas, key=Entity.sort_key):
        lines = [output.entity_text(e, fmt)] + [f"{k}={output._value(k, v, fmt)}"
                                                for k, v in sorted(quotas[e].items())]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def test_json_of_hard_names_and_values_is_what_json_dumps_printed():
    quotas = _hard_set()
    text = format_describe(quotas, "json")
    assert text == _json_dumps(quotas)
    doc = json.loads(text)
    assert {"entity": {"user": "<default>"}, "quotas": {"producer_byte_rate": 0.5}} in doc
    assert {"entity": {"user": None}, "quotas": {"consumer_byte_rate": 2048}} in doc
    assert '"request_percentage": 1e-05' in text and '"NaN"' in text and '"-Infinity"' in text


@pytest.mark.parametrize("fmt", ["text", "plain"])
def test_text_of_hard_names_is_what_it_was(fmt):
    quotas = _hard_set()
    assert format_describe(quotas, fmt) == _lines(quotas, fmt)


@pytest.mark.parametrize("fmt", ["json", "text", "plain"])
@pytest.mark.parametrize("size", [0, 1, output._CHUNK, output._CHUNK + 1, 2 * output._CHUNK + 7])
def test_every_chunk_boundary(fmt, size):
    quotas = {Entity.of(user=f"user-{i:05d}" if i % 3 else f"ü {i}"):
              {"producer_byte_rate": float(i), **({"request_percentage": i / 7} if i % 5 == 0
                                                  else {})}
              for i in range(size)}
    expected = _json_dumps(quotas) if fmt == "json" else _lines(quotas, fmt)
    assert format_describe(quotas, fmt) == expected


def test_empty_json_is_an_empty_list():
    assert format_describe({}, "json") == json.dumps([], indent=2) + "\n" == "[]\n"


@pytest.mark.parametrize("make", [
    lambda path: open(path, "w", encoding="utf-8"),                        # buffered
    lambda path: io.TextIOWrapper(io.FileIO(path, "w"), encoding="utf-8",  # python -u: raw
                                  write_through=True),
    lambda path: open(path, "w", encoding="utf-16"),                       # not UTF-8: as text
])
def test_streams_get_the_same_bytes_in_order(tmp_path, make):
    quotas = _hard_set()
    path = tmp_path / "out"
    stream = make(path)
    stream.write("before\n")  # written first, must stay first
    write_describe(quotas, "json", stream)
    stream.write("after\n")
    stream.close()
    encoding = stream.encoding
    assert path.read_bytes().decode(encoding) == "before\n" + _json_dumps(quotas) + "after\n"


def test_a_pipe_gets_the_whole_document(tmp_path):
    """Through a real pipe (what `kafka-client-quotas ... | jq` reads), larger than its buffer."""
    quotas = {Entity.of(user=f"u{i}"): {"producer_byte_rate": float(i)} for i in range(5000)}
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child writes, as the CLI would, and exits
        os.close(read_end)
        try:
            with io.TextIOWrapper(io.FileIO(write_end, "w"), encoding="utf-8",
                                  write_through=True) as stream:
                write_describe(quotas, "json", stream)
        finally:
            os._exit(0)
    os.close(write_end)
    with io.FileIO(read_end, "r") as reader:
        data = reader.readall()
    os.waitpid(pid, 0)
    assert data.decode() == _json_dumps(quotas)


names = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), min_size=1,
                                     max_size=20))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(names, names, st.booleans(),
                          st.dictionaries(st.sampled_from(["producer_byte_rate",
                                                           "consumer_byte_rate",
                                                           "request_percentage"]),
                                          st.floats(), min_size=1, max_size=3)),
                max_size=12))
def test_any_quota_set_prints_as_json_dumps_printed_it(rows):
    quotas = {}
    for user, client_id, both, values in rows:
        entity = Entity.of(user=user, client_id=client_id) if both else Entity.of(user=user)
        quotas[entity] = values
    assert format_describe(quotas, "json") == _json_dumps(quotas)
    assert format_describe(quotas, "text") == _lines(quotas, "text")


def _nested_key(e: Entity) -> tuple:
    """Entity.sort_key as it was (one (type, default?, name) tuple a part): the reference."""
    from quota_core.domain.entities import _TYPE_ORDER

    return tuple((_TYPE_ORDER[t], n is not None, n or "") for t, n in e.parts)


entities = st.one_of(
    st.builds(lambda u: Entity.of(user=u), names),
    st.builds(lambda c: Entity.of(client_id=c), names),
    st.builds(lambda i: Entity.of(ip=i), names),
    st.builds(lambda u, c: Entity.of(user=u, client_id=c), names, names))


@settings(max_examples=300, deadline=None)
@given(st.lists(entities, max_size=25))
def test_the_flat_sort_key_orders_as_the_nested_one_did(items):
    """Entity.sort_key is flat (compared faster when describe sorts 100,000s): every pair
    compares as under the nested key."""
    assert sorted(items, key=Entity.sort_key) == sorted(items, key=_nested_key)
    for a in items[:8]:
        for b in items[:8]:
            assert (a.sort_key() < b.sort_key()) == (_nested_key(a) < _nested_key(b))
