"""Every malformed field of a plan is a usage error (issue 32, finding 7).

A signed plan edited to ``"created": NaN`` made ``apply`` print "internal error (ValueError:
Out of range float…)" and exit 1. Now each field of the plan document, set to NaN, a number
beyond a double, an integer of thousands of digits, a wrong type, or removed, makes ``apply``
exit 2 (docs/interfaces.md: a malformed file the user gave) with one line naming the field; nothing is
applied.
"""
from __future__ import annotations

import json

import pytest

from quota_core import Entity
from tests.cli_steps import run, sandbox_with, state

BEFORE = {Entity.of(user="bob"): {"producer_byte_rate": 1048576.0}}
DESIRED = ("entries:\n- entity: {user: bob}\n  quotas: {producer_byte_rate: 2097152}\n"
           "- entity: {user: carol}\n  quotas: {consumer_byte_rate: 1048576}\n")

#: (path, the name the message gives it): every field plan_document writes, and some inside.
FIELDS = [
    ("format", "format"), ("created", "created"), ("source", "source"), ("prune", "prune"),
    ("cluster", "cluster"), ("cluster.cluster_id", "cluster.cluster_id"),
    ("summary", "summary"), ("summary.add", "summary.add"), ("base", "base"),
    ("base.hash", "base.hash"), ("base.entries", "base.entries"), ("after_hash", "after_hash"),
    ("changes", "changes"), ("changes.0", "changes[0]"), ("changes.0.entity", "changes[0].entity"),
    ("changes.0.entity.user", "changes[0].entity"), ("changes.0.action", "changes[0].action"),
    ("changes.0.ops", "changes[0].ops"), ("changes.0.ops.0", "changes[0].ops[0]"),
    ("changes.0.ops.0.key", "changes[0].ops[0].key"),
    ("changes.0.ops.0.value", "changes[0].ops[0].value"), ("changes.0.keys", "changes[0].keys"),
    ("unmanaged", "unmanaged"), ("impact", "impact"), ("signature", "signature"),
]
HUGE_TEXT = {"huge float": "1e400", "huge int": "9" * 5000}
#: A value of another type than the field's (a list where anything but a list belongs).
LIST_FIELDS = {"base.entries", "changes", "changes.0.ops", "changes.0.keys", "unmanaged"}
#: Fields whose absence is no malformation: a plan without impact applies; without its
#: signature it is refused (exit 1) when a key is set, which tests/changes/test_writes.py covers; one
#: that records no cluster id is refused on every cluster (exit 1, check_plan_cluster).
OPTIONAL = {"impact", "signature", "cluster.cluster_id"}


def edit(doc: dict, path: str, value) -> None:
    *parents, last = path.split(".")
    for part in parents:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    if isinstance(doc, list):
        doc[int(last)] = value
    elif value is MISSING:
        del doc[last]
    else:
        doc[last] = value


MISSING = object()


@pytest.fixture(scope="module")
def signed(tmp_path_factory) -> tuple[str, str]:
    """A signed plan (made by `plan` with QUOTA_PLAN_KEY) and its sandbox's contents."""
    d = tmp_path_factory.mktemp("signed")
    store = sandbox_with(d / "q.sqlite", BEFORE)
    (d / "want.yaml").write_text(DESIRED)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("QUOTA_PLAN_KEY", "k-32")
        code, _, err = run("plan", str(d / "want.yaml"), "--sandbox", store,
                           "--out", str(d / "plan.json"))
    assert code == 2, err
    text = (d / "plan.json").read_text()
    assert '"signature"' in text and '"impact"' in text
    return store, text


@pytest.fixture(autouse=True)
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("QUOTA_PLAN_KEY", "k-32")
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))


@pytest.mark.parametrize("variant", ["NaN", "Infinity", "huge float", "huge int",
                                     "wrong type", "missing"])
@pytest.mark.parametrize("path, name", FIELDS, ids=[f[0] for f in FIELDS])
def test_a_malformed_field_is_a_usage_error_naming_it(signed, tmp_path, path, name, variant):
    store, text = signed
    if variant == "missing" and (path in OPTIONAL or path.split(".")[-1].isdigit()):
        pytest.skip("not a field that can be missing")
    doc = json.loads(text)
    if variant in ("NaN", "Infinity"):
        edit(doc, path, float("nan") if variant == "NaN" else float("inf"))
        written = json.dumps(doc)  # bare NaN / Infinity, as json.dumps writes them
    elif variant in HUGE_TEXT:
        edit(doc, path, "@@HUGE@@")
        written = json.dumps(doc).replace('"@@HUGE@@"', HUGE_TEXT[variant])
    else:
        edit(doc, path, MISSING if variant == "missing" else
             ({"x": 1} if path in LIST_FIELDS else [1]))
        written = json.dumps(doc)
    plan = tmp_path / "plan.json"
    plan.write_text(written)
    code, out, err = run("apply", str(plan), "--sandbox", store)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1, err
    assert "internal error" not in err and "Traceback" not in err
    assert name in err, err
    assert state(store) == BEFORE


def test_the_unedited_signed_plan_applies(tmp_path):
    """The table's base: a plan as `plan` writes it applies (exit 0), so each refusal above
    is its edited field's doing."""
    store = sandbox_with(tmp_path / "q.sqlite", BEFORE)
    (tmp_path / "want.yaml").write_text(DESIRED)
    plan = tmp_path / "plan.json"
    assert run("plan", str(tmp_path / "want.yaml"), "--sandbox", store, "--out", str(plan))[0] == 2
    code, _, err = run("apply", str(plan), "--sandbox", store)
    assert code == 0, err
    assert state(store)[Entity.of(user="carol")] == {"consumer_byte_rate": 1048576.0}
