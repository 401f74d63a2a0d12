"""One JSON codec for entities, one formatter for numbers, NaN kept apart from "not set"."""
from __future__ import annotations

import math
import sqlite3

import pytest
from hypothesis import given, strategies as st

from quota_core import Alteration, Entity, EntityError, Op
from quota_core.changes.audit import AuditRecord
from ui.browse import display_frame, export_csv, frame_quotas, quota_frame
from quota_core.domain.entities import entity_from_json, entity_to_json
from quota_core.backends.sandbox import SandboxBackend
from quota_core.domain.serialization import to_document

names = st.one_of(st.none(), st.text(min_size=1).filter(lambda s: "\x00" not in s))


@given(user=names, client_id=names)
def test_entity_json_round_trips_every_name(user, client_id):
    entity = Entity.of(user=user, client_id=client_id)
    text = entity_to_json(entity)
    assert entity_from_json(text) == entity
    # The same form as the export document's entries.
    assert entity_from_json(to_document({entity: {"producer_byte_rate": 1.0}})["entries"][0]
                            ["entity"]) == entity


def test_entity_json_is_canonical_and_readable():
    e = Entity.of(user="<default>", client_id=None)
    assert entity_to_json(e) == '{"user":"<default>","client-id":null}'
    assert entity_to_json(Entity.of(user="名前 a=b,c%")) == '{"user":"名前 a=b,c%"}'


def test_older_pair_form_is_read():
    assert entity_from_json('[["user","alice"],["client-id",null]]') == \
        Entity.of(user="alice", client_id=None)


@pytest.mark.parametrize("text", ['"alice"', "[1, 2]", "{", '{"team":"x"}', "{}"])
def test_bad_entity_json_is_an_entity_error(text):
    with pytest.raises(EntityError):
        entity_from_json(text)


def test_audit_reads_records_written_in_the_older_form():
    record = AuditRecord.from_dict({"id": "1", "ts": "t", "actor": "a", "cluster": {},
                                    "entity": [["user", "bob"]], "entity_text": "{user=bob}",
                                    "action": "alter", "ops": [], "before": {}, "after": {}})
    assert record.entity_obj() == Entity.of(user="bob")


def test_sandbox_migrates_older_keys_on_its_first_write(tmp_path):
    path = tmp_path / "old.sqlite"
    with SandboxBackend(path) as sandbox:
        sandbox.init()
    with sqlite3.connect(path) as conn:  # a file written before the codec was unified
        conn.execute("INSERT INTO quotas VALUES (?, ?, ?)",
                     ('[["user","a b"],["client-id",null]]', "producer_byte_rate", "1024.0"))
    e = Entity.of(user="a b", client_id=None)
    with SandboxBackend(path) as sandbox:
        assert sandbox.describe() == {e: {"producer_byte_rate": 1024.0}}
        assert sandbox.alter([Alteration(e, (Op("consumer_byte_rate", 5.0),))]).ok
        assert sandbox.describe() == {e: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 5.0}}
    with sqlite3.connect(path) as conn:
        stored = {row[0] for row in conn.execute("SELECT entity FROM quotas")}
    assert stored == {entity_to_json(e)}


def test_browse_keeps_a_nan_quota_apart_from_not_set():
    nan_entity, plain = Entity.of(user="nan"), Entity.of(user="plain")
    quotas = {nan_entity: {"producer_byte_rate": math.nan}, plain: {"consumer_byte_rate": 5.0}}
    frame = quota_frame(quotas)
    back = frame_quotas(frame)
    assert set(back[nan_entity]) == {"producer_byte_rate"}
    assert math.isnan(back[nan_entity]["producer_byte_rate"])
    assert back[plain] == {"consumer_byte_rate": 5.0}
    shown = display_frame(frame).set_index("user")
    assert "NaN" in shown.loc["nan", "producer_byte_rate"]
    assert shown.loc["plain", "producer_byte_rate"] == ""
    csv = export_csv(frame)
    assert "NaN" in csv.splitlines()[1] + csv.splitlines()[2]
