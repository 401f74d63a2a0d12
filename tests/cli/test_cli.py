"""The ``kafka-client-quotas`` CLI, run for real against a sandbox file.

Most cases call :func:`quota_core.cli.main.main` in-process with StringIO streams; a few run
``python -m quota_core`` and the installed console script as subprocesses. Output formats
are asserted exactly: they are the interface scripts depend on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from io import StringIO
from pathlib import Path

import pytest
from hypothesis import example, HealthCheck, given, settings
from hypothesis import strategies as st

from quota_core import CLIENT_KEYS, Alteration, Entity, Op, desanitize, sanitize
from quota_core.cli.main import main
from quota_core.backends.sandbox import SandboxBackend
from tests import ROOT
from tests.cli_steps import run, sandbox_with, state
from quota_core.cli.spec import format_names

E = Entity.of

# One quota set touching every shape the text format has to get right: the default user,
# a user literally named <default>, a name that needs sanitising, integral and fractional
# values, user+client-id pairs, client ids alone, and ip entities.
SEED = {
    E(user=None): {"consumer_byte_rate": 2_000_000.0},
    E(user="<default>"): {"consumer_byte_rate": 1000.0},
    E(user="CN=a,OU=b"): {"request_percentage": 56.25, "producer_byte_rate": 4_000_000.0},
    E(user="alice"): {"producer_byte_rate": 3_000_000.0, "request_percentage": 25.0},
    E(user="alice", client_id=None): {"consumer_byte_rate": 5_000_000.0},
    E(user="alice", client_id="app"): {"producer_byte_rate": 1_048_576.0},
    E(client_id="app"): {"controller_mutation_rate": 7.5},
    E(client_id=None): {"producer_byte_rate": 500_000.0},
    E(ip=None): {"connection_creation_rate": 10.0},
    E(ip="10.0.0.12"): {"connection_creation_rate": 5.0},
}

DESCRIBE_ALL_TEXT = """\
{user=<default>}
consumer_byte_rate=2000000

{user=%3Cdefault%3E}
consumer_byte_rate=1000

{user=CN%3Da%2COU%3Db}
producer_byte_rate=4000000
request_percentage=56.25

{user=alice}
producer_byte_rate=3000000
request_percentage=25

{user=alice, client-id=<default>}
consumer_byte_rate=5000000

{user=alice, client-id=app}
producer_byte_rate=1048576

{client-id=<default>}
producer_byte_rate=500000

{client-id=app}
controller_mutation_rate=7.5

{ip=<default>}
connection_creation_rate=10

{ip=10.0.0.12}
connection_creation_rate=5
"""


@pytest.fixture
def store(tmp_path) -> str:
    return sandbox_with(tmp_path / "q.sqlite", SEED)


@pytest.fixture(autouse=True)
def _audit_log(tmp_path_factory, monkeypatch) -> Path:
    """--alter and --import append to the audit log: never to the checkout's own."""
    path = tmp_path_factory.mktemp("audit") / "audit.jsonl"
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(path))
    return path


# -- describe ------------------------------------------------------------------------------

def test_describe_everything_text(store):
    code, out, err = run("--sandbox", store, "--describe")
    assert (code, err) == (0, "")
    assert out == DESCRIBE_ALL_TEXT


@pytest.mark.parametrize("flags, expected", [
    (["--user", "<default>"], "{user=%3Cdefault%3E}\nconsumer_byte_rate=1000\n"),
    (["--names", "user=CN\\=a\\,OU\\=b"],
     "{user=CN%3Da%2COU%3Db}\nproducer_byte_rate=4000000\nrequest_percentage=56.25\n"),
    (["--user", "CN=a,OU=b"],
     "{user=CN%3Da%2COU%3Db}\nproducer_byte_rate=4000000\nrequest_percentage=56.25\n"),
    (["--defaults", "user", "--strict"], "{user=<default>}\nconsumer_byte_rate=2000000\n"),
    # Not strict: every entity with the client id `app`, whatever else it has.
    (["--names", "client-id=app"],
     "{user=alice, client-id=app}\nproducer_byte_rate=1048576\n\n"
     "{client-id=app}\ncontroller_mutation_rate=7.5\n"),
    (["--names", "client-id=app", "--strict"], "{client-id=app}\ncontroller_mutation_rate=7.5\n"),
    (["--user", "alice", "--defaults", "client-id"],
     "{user=alice, client-id=<default>}\nconsumer_byte_rate=5000000\n"),
    # Several names for one type: one filter per name, results merged and sorted.
    (["--ip", "10.0.0.12", "--defaults", "ip"],
     "{ip=<default>}\nconnection_creation_rate=10\n\n{ip=10.0.0.12}\nconnection_creation_rate=5\n"),
    (["--user", "nobody"], ""),
    (["--strict"], ""),  # an empty strict filter matches nothing, as on a broker
])
def test_describe_filters_text(store, flags, expected):
    code, out, err = run("--sandbox", store, "--describe", *flags)
    assert (code, out, err) == (0, expected, "")


def test_describe_json_has_raw_names_and_null_default(store):
    code, out, err = run("--sandbox", store, "--describe", "--output", "json",
                         "--user", "<default>", "--user", "CN=a,OU=b", "--defaults", "user")
    assert (code, err) == (0, "")
    assert json.loads(out) == [
        {"entity": {"user": None}, "quotas": {"consumer_byte_rate": 2000000}},
        {"entity": {"user": "<default>"}, "quotas": {"consumer_byte_rate": 1000}},
        {"entity": {"user": "CN=a,OU=b"},
         "quotas": {"producer_byte_rate": 4000000, "request_percentage": 56.25}},
    ]
    # Integral values are JSON integers, not 4000000.0.
    assert '"producer_byte_rate": 4000000,' in out


def test_describe_json_everything_matches_store(store):
    code, out, _ = run("--sandbox", store, "--describe", "--output", "json")
    assert code == 0
    docs = json.loads(out)
    assert {Entity.from_mapping(d["entity"]): d["quotas"] for d in docs} == SEED
    assert [Entity.from_mapping(d["entity"]) for d in docs] == sorted(SEED, key=Entity.sort_key)


# -- resolve -------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, expected", [
    (["--user", "alice", "--client-id", "app"],
     "consumer_byte_rate=5000000 {user=alice, client-id=<default>}\n"
     "controller_mutation_rate=7.5 {client-id=app}\n"
     "producer_byte_rate=1048576 {user=alice, client-id=app}\n"
     "request_percentage=25 {user=alice}\n"),
    (["--user", "bob", "--client-id", "web"],
     "consumer_byte_rate=2000000 {user=<default>}\n"
     "producer_byte_rate=500000 {client-id=<default>}\n"),
    # A user literally named <default> is an ordinary name: rung 3, not rung 6.
    (["--user", "<default>", "--client-id", "app"],
     "consumer_byte_rate=1000 {user=%3Cdefault%3E}\n"
     "controller_mutation_rate=7.5 {client-id=app}\n"
     "producer_byte_rate=500000 {client-id=<default>}\n"),
    (["--user", "CN=a,OU=b"],
     "consumer_byte_rate=2000000 {user=<default>}\n"
     "producer_byte_rate=4000000 {user=CN%3Da%2COU%3Db}\n"
     "request_percentage=56.25 {user=CN%3Da%2COU%3Db}\n"),
    (["--ip", "10.0.0.12"], "connection_creation_rate=5 {ip=10.0.0.12}\n"),
    (["--ip", "192.0.2.1"], "connection_creation_rate=10 {ip=<default>}\n"),
    # Several clients: a header per client (names sanitised too), blocks split by a blank line.
    (["--user", "alice", "--user", "CN=a,OU=b", "--client-id", "x"],
     "{user=alice, client-id=x}\n"
     "consumer_byte_rate=5000000 {user=alice, client-id=<default>}\n"
     "producer_byte_rate=3000000 {user=alice}\n"
     "request_percentage=25 {user=alice}\n"
     "\n"
     "{user=CN%3Da%2COU%3Db, client-id=x}\n"
     "consumer_byte_rate=2000000 {user=<default>}\n"
     "producer_byte_rate=4000000 {user=CN%3Da%2COU%3Db}\n"
     "request_percentage=56.25 {user=CN%3Da%2COU%3Db}\n"),
])
def test_resolve_text(store, flags, expected):
    code, out, err = run("--sandbox", store, "--resolve", *flags)
    # Each KIP-546 line is followed by one indented line: the level and who shares the quota
    # (asserted exactly in test_resolve_text_shows_level_and_bucket).
    kip = [line for line in out.splitlines(keepends=True) if not line.startswith("  level ")]
    assert (code, "".join(kip)) == (0, expected)
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "_rate=" in line or "_percentage=" in line:
            assert lines[i + 1].startswith("  level "), out
    # Assumptions (ANONYMOUS, the empty client id) are notes on stderr, never on stdout.
    assert all(line.startswith("note: ") for line in err.splitlines())
    if "--ip" not in flags:
        assert ("--client-id" in flags or "client-id=" in " ".join(flags)) == (
            "empty client id" not in err)


def test_resolve_json_schema(store):
    code, out, err = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id",
                         "app", "--output", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert {"entity", "quotas", "ladder", "bucket"} <= set(doc)
    assert doc["entity"] == {"user": "alice", "client-id": "app"}
    assert doc["assumptions"] == []
    assert doc["quotas"] == {
        "consumer_byte_rate": {"value": 5000000, "level": 2,
                               "source": {"user": "alice", "client-id": None}},
        "controller_mutation_rate": {"value": 7.5, "level": 7, "source": {"client-id": "app"}},
        "producer_byte_rate": {"value": 1048576, "level": 1,
                               "source": {"user": "alice", "client-id": "app"}},
        "request_percentage": {"value": 25, "level": 3, "source": {"user": "alice"}},
    }
    assert [s["level"] for s in doc["ladder"]] == list(range(1, 9))
    assert doc["ladder"][0]["wins"] == ["producer_byte_rate"]
    assert doc["ladder"][2] == {
        "level": 3, "pattern": "{user=U}", "entity": {"user": "alice"},
        "quotas": {"producer_byte_rate": 3000000, "request_percentage": 25},
        "wins": ["request_percentage"], "shadowed": ["producer_byte_rate"], "applies": True}
    assert set(doc["bucket"]) == set(CLIENT_KEYS)
    assert doc["bucket"]["request_percentage"]["kind"] == "user"
    assert doc["bucket"]["request_percentage"]["tags"] == {"user": "alice", "client-id": ""}
    assert doc["bucket"]["controller_mutation_rate"]["kind"] == "client-id"
    assert doc["bucket"]["producer_byte_rate"]["kind"] == "user+client-id"


def test_resolve_json_unlimited_is_null_and_assumptions_are_stated(tmp_path):
    path = str(tmp_path / "empty.sqlite")
    assert run("--sandbox", path, "--export", "json")[0] == 2  # no such sandbox file yet
    assert run("--sandbox", path, "--alter", "--user", "x", "--add",
               "producer_byte_rate=1")[0] == 0
    assert run("--sandbox", path, "--alter", "--user", "x", "--delete",
               "producer_byte_rate")[0] == 0
    code, out, err = run("--sandbox", path, "--resolve", "--client-id", "app", "--output", "json")
    assert (code, err) == (0, "")
    doc = json.loads(out)
    assert doc["entity"] == {"user": "ANONYMOUS", "client-id": "app"}
    assert len(doc["assumptions"]) == 1 and "ANONYMOUS" in doc["assumptions"][0]
    assert doc["quotas"] == {k: {"value": None, "level": None, "source": None}
                             for k in CLIENT_KEYS}
    # Unlimited: nothing to print in text; the assumption is a note on stderr.
    code, out, err = run("--sandbox", path, "--resolve", "--client-id", "app")
    assert (code, out) == (0, "") and err.startswith("note: No user was given")


def test_resolve_without_client_id_uses_the_empty_client_id(store):
    code, out, _ = run("--sandbox", store, "--resolve", "--user", "bob", "--output", "json")
    doc = json.loads(out)
    assert code == 0 and doc["entity"] == {"user": "bob", "client-id": ""}
    assert "empty client id" in doc["assumptions"][0]
    # Kafka never applies {client-id=<default>} to an empty client id (only rungs 3 and 6).
    assert doc["quotas"]["producer_byte_rate"]["level"] is None
    assert [step["level"] for step in doc["ladder"] if step["applies"]] == [3, 6]


def test_resolve_json_several_clients_is_a_list(store):
    code, out, _ = run("--sandbox", store, "--resolve", "--user", "a", "--user", "b",
                       "--output", "json")
    assert code == 0
    assert [d["entity"]["user"] for d in json.loads(out)] == ["a", "b"]


# -- alter ---------------------------------------------------------------------------------

def test_alter_prints_nothing_and_changes_the_store(store):
    before = state(store)
    code, out, err = run("--sandbox", store, "--alter", "--names", "client-id=my-client",
                         "--defaults", "user", "--add", "consumer_byte_rate=2MB",
                         "--add", "request_percentage=12.5")
    assert (code, out, err) == (0, "", "")
    after = state(store)
    assert after.pop(E(user=None, client_id="my-client")) == {
        "consumer_byte_rate": 2_000_000.0, "request_percentage": 12.5}
    assert after == before


def test_alter_delete_last_key_removes_entity(store):
    code, out, err = run("--sandbox", store, "--alter", "--user", "<default>",
                         "--delete", "consumer_byte_rate")
    assert (code, out, err) == (0, "", "")
    assert E(user="<default>") not in state(store)
    assert E(user=None) in state(store)  # the real default is another entity


def test_alter_several_names_alter_every_combination(store):
    code, _, _ = run("--sandbox", store, "--alter", "--user", "u1", "--user", "u2",
                     "--client-id", "c", "--add", "producer_byte_rate=1.5MiB")
    assert code == 0
    after = state(store)
    for u in ("u1", "u2"):
        assert after[E(user=u, client_id="c")] == {"producer_byte_rate": 1_572_864.0}


def test_validate_only_writes_nothing(store):
    before = state(store)
    code, out, err = run("--sandbox", store, "--alter", "--user", "new",
                         "--add", "producer_byte_rate=10MB", "--validate-only")
    assert (code, out) == (0, "")
    assert "nothing was changed" in err
    assert state(store) == before


def test_validate_only_json_outcome(store):
    code, out, err = run("--sandbox", store, "--alter", "--user", "new", "--output", "json",
                         "--add", "producer_byte_rate=10MB", "--validate-only")
    assert (code, err) == (0, "")
    assert json.loads(out) == {"validate_only": True, "results": [
        {"entity": {"user": "new"}, "ok": True, "error": None, "error_code": None}]}
    assert E(user="new") not in state(store)


# -- refused (exit 1) ----------------------------------------------------------------------

@pytest.mark.parametrize("flags, reason", [
    (["--user", "CN=a,OU=b", "--add", "request_percentage=0"],
     "request_percentage for {user=\"CN=a,OU=b\"}: 0 is not allowed"),  # raw, for people
    (["--user", "alice", "--add", "request_percentage=nan"],
     "request_percentage for {user=alice}: NaN is not a quota"),
    (["--user", "alice", "--add", "controller_mutation_rate=inf"],
     "controller_mutation_rate for {user=alice}: infinity is not a quota"),
    (["--user", "alice", "--add", "producer_byte_rate=1.5"],
     "producer_byte_rate for {user=alice}: 1.5 has a fraction"),
    (["--user", "alice", "--add", "producer_byte_rate=1e30"],
     "is too large for a LONG"),
    (["--user", "alice", "--add", "connection_creation_rate=5"],
     "{user=alice}: unknown quota key 'connection_creation_rate'"),
    (["--ip", "10.0.0.1", "--add", "producer_byte_rate=5"],
     "{ip=10.0.0.1}: unknown quota key 'producer_byte_rate'"),
    (["--ip", "not-an-ip.invalid", "--add", "connection_creation_rate=5"],
     "{ip=not-an-ip.invalid}: 'not-an-ip.invalid' is not an IP address"),
    (["--user", "alice", "--add", "producer_byte_rate=10", "--delete", "producer_byte_rate"],
     "producer_byte_rate for {user=alice} is both set and removed"),
    (["--names", "user=", "--add", "producer_byte_rate=10"], "Empty user not supported"),
    (["--ip", "10.0.0.1", "--user", "alice", "--add", "connection_creation_rate=5"],
     "An ip entity cannot be combined with user or client-id"),
])
def test_refused_alter_exits_1_names_the_entity_and_writes_nothing(store, flags, reason):
    before = state(store)
    code, out, err = run("--sandbox", store, "--alter", *flags)
    assert code == 1
    assert out == ""
    assert err.startswith("kafka-client-quotas: ") and reason in err
    assert state(store) == before


def test_refused_alter_of_several_entities_lists_every_problem(store):
    before = state(store)
    code, _, err = run("--sandbox", store, "--alter", "--user", "a", "--user", "b",
                       "--add", "request_percentage=-1")
    assert code == 1
    assert "{user=a}" in err and "{user=b}" in err
    assert state(store) == before


def test_describe_with_a_filter_a_broker_refuses_exits_1(store):
    code, out, err = run("--sandbox", store, "--describe", "--ip", "10.0.0.1", "--user", "a")
    assert (code, out) == (1, "")
    assert "IP filter component should not be used with user or clientId" in err


@pytest.mark.parametrize("make", ["directory", "garbage"])
def test_unusable_sandbox_exits_1(tmp_path, make):
    path = tmp_path / "store"
    if make == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"this is not a database" * 100)
    code, out, err = run("--sandbox", str(path), "--describe")
    assert (code, out) == (1, "")
    assert f"Cannot open the sandbox store {path}" in err


# -- usage errors (exit 2) -----------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    ([], "one of the arguments --describe --resolve --alter --export --import"),
    (["--describe"], "Say where the quotas live"),
    (["--describe", "--sandbox", "{store}", "--bootstrap-server", "h:9092"], "not both"),
    (["--describe", "--sandbox", "{store}", "--command-config", "x.properties"],
     "--command-config goes with --bootstrap-server"),
    (["--describe", "--sandbox", "{store}", "--names", "user=a\\"],
     "a backslash before the end at position 7 escapes nothing"),
    (["--describe", "--sandbox", "{store}", "--names", "user=a\\b"],
     "a backslash before 'b' at position 7 escapes nothing"),
    (["--describe", "--sandbox", "{store}", "--names", "group=a"], "unknown entity type 'group'"),
    (["--describe", "--sandbox", "{store}", "--names", "alice"], "'alice' is not type=name"),
    (["--describe", "--sandbox", "{store}", "--defaults", ","], "--defaults is empty"),
    (["--describe", "--sandbox", "{store}", "--add", "producer_byte_rate=1"],
     "--add and --delete go with --alter"),
    (["--resolve", "--sandbox", "{store}", "--user", "a", "--delete", "producer_byte_rate"],
     "--add and --delete go with --alter"),
    (["--describe", "--sandbox", "{store}", "--validate-only"],
     "--validate-only goes with --alter or --import"),
    (["--alter", "--sandbox", "{store}", "--user", "a"], "--alter needs --add"),
    (["--alter", "--sandbox", "{store}", "--add", "producer_byte_rate=1"], "Name the entity"),
    (["--alter", "--sandbox", "{store}", "--user", "a", "--add", "producer_byte_rate=lots"],
     "'lots' is not a byte rate"),
    (["--alter", "--sandbox", "{store}", "--user", "a", "--add", "request_percentage=half"],
     "'half' is not a number"),
    (["--alter", "--sandbox", "{store}", "--user", "a", "--add", "producer_byte_rate"],
     "is not key=value"),
    (["--alter", "--sandbox", "{store}", "--user", "a", "--delete", "producer_byte_rate=1"],
     "--delete takes key names only"),
    (["--resolve", "--sandbox", "{store}"], "Name the client to resolve"),
    (["--resolve", "--sandbox", "{store}", "--defaults", "user"], "not --defaults"),
    (["--resolve", "--sandbox", "{store}", "--ip", "10.0.0.1", "--user", "a"],
     "--ip cannot be combined with --user/--client-id"),
    (["--describe", "--resolve", "--sandbox", "{store}"], "not allowed with argument"),
    (["--describe", "--sandbox", "{store}", "--output", "xml"], "invalid choice: 'xml'"),
    (["--describe", "--sandbox", "{store}", "--timeout", "0"], "--timeout 0: give a number"),
    (["--describe", "--sandbox", "{store}", "--frobnicate"], "unrecognized arguments"),
    (["--import", "{dir}/missing.json", "--sandbox", "{store}"],
     "Cannot read {dir}/missing.json: No such file or directory"),
    (["--import", "{dir}/binary.json", "--sandbox", "{store}"], "is not UTF-8 text"),
    (["--import", "{dir}/broken.json", "--sandbox", "{store}"], "is not valid json"),
    (["--import", "{dir}/broken.yaml", "--sandbox", "{store}"], "is not valid yaml"),
    (["--import", "{dir}/bad-entry.yaml", "--sandbox", "{store}"],
     "bad-entry.yaml, line 5 (entry 2): producer_byte_rate='fast' is not a number"),
])
def test_usage_errors_exit_2(store, argv, message):
    folder = Path(store).parent
    (folder / "binary.json").write_bytes(b"\xff\xfe{\x00")
    (folder / "broken.json").write_text('{"entries": [', encoding="utf-8")
    (folder / "broken.yaml").write_text("entries: [\n  - {entity: {user: a}\n", encoding="utf-8")
    (folder / "bad-entry.yaml").write_text(
        "entries:\n- entity: {user: a}\n  quotas: {producer_byte_rate: 5}\n"
        "- entity: {user: b}\n  quotas: {producer_byte_rate: fast}\n", encoding="utf-8")
    argv = [a.format(store=store, dir=folder) for a in argv]
    before = state(store)
    code, out, err = run(*argv)
    assert code == 2
    assert out == ""
    assert message.format(dir=folder) in err
    assert err.startswith("usage: ") or err.startswith("kafka-client-quotas: error: ")
    assert state(store) == before


def test_help_goes_to_out_and_exits_0():
    code, out, err = run("--help")
    assert (code, err) == (0, "")
    assert out.startswith("usage: kafka-client-quotas") and "--validate-only" in out


# -- export / import -----------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_export_then_import_reproduces_the_store(store, tmp_path, fmt):
    code, text, err = run("--sandbox", store, "--export", fmt)
    assert (code, err) == (0, "")
    export = tmp_path / f"quotas.{fmt}"
    export.write_text(text, encoding="utf-8")
    other = str(tmp_path / "other.sqlite")
    code, out, err = run("--sandbox", other, "--import", str(export))
    assert (code, out) == (0, "")
    assert err == f"Applied {len(SEED)} of {len(SEED)} entity changes.\n"
    assert state(other) == SEED
    # Importing again changes nothing.
    assert run("--sandbox", other, "--import", str(export)) == (
        0, "", "Nothing to change: the backend already holds this quota set.\n")


def test_import_merge_keeps_and_replace_removes(store, tmp_path):
    doc = tmp_path / "one.yaml"
    doc.write_text("format: quota-console/1\nentries:\n"
                   "- entity: {user: alice}\n  quotas: {producer_byte_rate: 7}\n",
                   encoding="utf-8")
    assert run("--sandbox", store, "--import", str(doc), "--validate-only")[0] == 0
    assert state(store) == SEED
    assert run("--sandbox", store, "--import", str(doc))[0] == 0
    merged = state(store)
    assert merged[E(user="alice")] == {"producer_byte_rate": 7.0, "request_percentage": 25.0}
    assert len(merged) == len(SEED)
    assert run("--sandbox", store, "--import", str(doc), "--replace")[0] == 0
    assert state(store) == {E(user="alice"): {"producer_byte_rate": 7.0}}


# -- awkward names round-trip (hypothesis) -------------------------------------------------

AWKWARD = st.sampled_from([",", "=", "%", "\\", " ", "<default>", "<", ">", "+", "*", "~",
                           "/", "é", "名前", "\t", "\n", "\x00", "\\,", "%2C", "%3D", "-", "\"",
                           "'", "{", "}", "ANONYMOUS", "\u2028", "😀"])
NAMES = st.lists(st.one_of(AWKWARD, st.text(min_size=1, max_size=4)), min_size=1,
                 max_size=5).map("".join)
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(user=NAMES, client_id=NAMES)
@example(user=",", client_id="--")  # argparse in 3.11 drops a "--" value: found by hypothesis
def test_names_round_trip_through_names_flag_and_both_outputs(user, client_id):
    assert desanitize(sanitize(user)) == user
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "q.sqlite")
        names = format_names([("user", user), ("client-id", client_id)])
        assert run("--sandbox", path, "--alter", f"--names={names}",
                   "--add", "producer_byte_rate=4000000") == (0, "", "")
        assert state(path) == {E(user=user, client_id=client_id): {"producer_byte_rate": 4e6}}

        # Back out through the raw-name flags: JSON gives the raw name...
        code, out, _ = run("--sandbox", path, "--describe", "--output", "json",
                           f"--user={user}", f"--client-id={client_id}")
        assert code == 0
        assert json.loads(out) == [{"entity": {"user": user, "client-id": client_id},
                                    "quotas": {"producer_byte_rate": 4000000}}]
        # ... and text gives the sanitised name, which desanitises back to it.
        code, out, _ = run("--sandbox", path, "--describe", f"--names={names}")
        assert code == 0
        header = f"{{user={sanitize(user)}, client-id={sanitize(client_id)}}}"
        assert out == f"{header}\nproducer_byte_rate=4000000\n"
        assert "\n" not in header and ", client-id=" not in sanitize(user)

        # Resolve finds it at rung 1 under either spelling.
        code, out, _ = run("--sandbox", path, "--resolve", f"--user={user}",
                           f"--names={format_names([('client-id', client_id)])}",
                           "--output", "json")
        doc = json.loads(out)
        assert code == 0 and doc["entity"] == {"user": user, "client-id": client_id}
        assert doc["quotas"]["producer_byte_rate"] == {
            "value": 4000000, "level": 1, "source": {"user": user, "client-id": client_id}}
        code, out, _ = run("--sandbox", path, "--resolve", f"--user={user}",
                           f"--client-id={client_id}")
        assert code == 0 and out.startswith(f"producer_byte_rate=4000000 {header}\n  level 1, ")
        assert len(out.splitlines()) == 2


@SETTINGS
@given(user=NAMES)
def test_names_round_trip_through_raw_user_flag(user):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "q.sqlite")
        assert run("--sandbox", path, "--alter", f"--user={user}",
                   "--add", "request_percentage=56.25")[0] == 0
        assert state(path) == {E(user=user): {"request_percentage": 56.25}}
        code, out, _ = run("--sandbox", path, "--describe",
                           f"--names={format_names([('user', user)])}", "--strict")
        assert (code, out) == (0, f"{{user={sanitize(user)}}}\nrequest_percentage=56.25\n")
        line = out.splitlines()[0]
        assert desanitize(line[len("{user="):-1]) == user
        code, out, _ = run("--sandbox", path, "--describe", "--output", "json")
        assert json.loads(out)[0]["entity"] == {"user": user}


# -- real processes ------------------------------------------------------------------------

def _console_script() -> Path:
    script = Path(sys.executable).parent / "kafka-client-quotas"
    assert script.exists(), (f"{script} is missing: run `{sys.executable} -m pip install "
                             f"--no-deps -e .` to install the console script")
    return script


@pytest.mark.parametrize("command", ["module", "console-script"])
def test_real_process_describe_and_exit_codes(store, command):
    prefix = ([sys.executable, "-m", "quota_core"] if command == "module"
              else [str(_console_script())])
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}

    def proc(*argv):
        done = subprocess.run([*prefix, *argv], capture_output=True, text=True, cwd=ROOT,
                              env=env, timeout=60)
        assert "Traceback" not in done.stderr
        return done.returncode, done.stdout, done.stderr

    assert proc("--sandbox", store, "--describe") == (0, DESCRIBE_ALL_TEXT, "")
    assert proc("--sandbox", store, "--alter", "--user", "名前 x", "--add",
                "producer_byte_rate=1MiB") == (0, "", "")
    code, out, _ = proc("--sandbox", store, "--describe", "--user", "名前 x", "--output", "json")
    assert code == 0 and json.loads(out) == [
        {"entity": {"user": "名前 x"}, "quotas": {"producer_byte_rate": 1048576}}]
    code, out, err = proc("--sandbox", store, "--alter", "--user", "a", "--add",
                          "request_percentage=-5")
    assert (code, out) == (1, "") and "{user=a}" in err
    code, out, err = proc("--sandbox", store)
    assert (code, out) == (2, "") and "is required" in err
    code, out, err = proc("--describe")
    assert (code, out) == (2, "") and "Say where the quotas live" in err


# -- operator traps (from a review) ----------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--bootstrap-server", "127.0.0.1:abc", "--describe"], "'127.0.0.1:abc' is not HOST:PORT"),
    (["--bootstrap-server", "localhost", "--describe"], "'localhost' is not HOST:PORT"),
    (["--resolve", "--strict", "--user", "a"], "--strict goes with --describe."),
    (["--describe", "--replace"], "--replace goes with --import."),
    (["--export", "json", "--user", "a"], "drop the entity flags"),
    (["--describe", "--timeout", "inf"], "--timeout inf: give a number of seconds"),
    (["--resolve", "--ip", "localhost"], "--ip 'localhost' is not an IP address"),
])
def test_misleading_flags_are_usage_errors(store, argv, message):
    if "--bootstrap-server" not in argv:
        argv = ["--sandbox", store, *argv]
    code, out, err = run(*argv)
    assert code == 2 and message in err and out == ""


def test_replace_with_an_empty_document_deletes_nothing(store, tmp_path):
    before = state(store)
    empty = tmp_path / "empty.json"
    empty.write_text('{"format": "quota-console/1", "entries": []}')
    code, _, err = run("--sandbox", store, "--import", str(empty), "--replace")
    assert code == 2 and "would delete all" in err
    assert state(store) == before


def test_replace_lists_what_it_removes(store, tmp_path):
    keep = next(iter(state(store)))
    doc = tmp_path / "one.json"
    doc.write_text(json.dumps({"format": "quota-console/1", "entries": [
        {"entity": keep.as_dict(), "quotas": {"producer_byte_rate": 1}}]}))
    code, _, err = run("--sandbox", store, "--import", str(doc), "--replace")
    assert code == 0 and "--replace removes" in err
    assert state(store) == {keep: {"producer_byte_rate": 1.0}}


def test_partial_success_names_what_was_applied(tmp_path):
    path = str(tmp_path / "q.sqlite")
    # Each entity is all-or-nothing on its own: when one is refused, say what was applied.
    code, _, err = run("--sandbox", path, "--alter", "--ip", "10.0.0.1", "--ip", "10.0.0.2",
                       "--add", "connection_creation_rate=3")
    assert code == 0 and err == ""
    with SandboxBackend(path) as backend:
        outcome = backend.alter([
            Alteration(E(ip="10.0.0.3"), (Op.set("connection_creation_rate", 1.5),)),
            Alteration(E(ip="10.0.0.4"), (Op.set("connection_creation_rate", 2.0),))])
    from quota_core.cli.main import _report

    err = StringIO()
    assert _report(outcome, err) == 1
    assert err.getvalue().splitlines() == [
        "kafka-client-quotas: {ip=10.0.0.3}: connection_creation_rate cannot be a fractional value.",
        "kafka-client-quotas: {ip=10.0.0.4}: applied"]


def test_deleting_an_unset_key_warns(store):
    code, out, err = run("--sandbox", store, "--alter", "--user", "nobody", "--delete",
                         "producer_byte_rate")
    assert (code, out) == (0, "")
    assert err == "warning: {user=nobody} has no producer_byte_rate to delete (nothing to remove there).\n"


# -- polish: did-you-mean, parsed values, levels, plain output -------------------------------

@pytest.mark.parametrize("flags, message", [
    (["--add", "prodcer_byte_rate=1MB"],
     "--add prodcer_byte_rate=...: unknown quota key 'prodcer_byte_rate', did you mean "
     "producer_byte_rate?"),
    (["--add", "consumer_byterate=5"],
     "{user=alice}: unknown quota key 'consumer_byterate' for a user/client-id entity, did you "
     "mean consumer_byte_rate?"),
    (["--delete", "request_percent"],
     "unknown quota key 'request_percent' for a user/client-id entity, did you mean "
     "request_percentage?"),
])
def test_mistyped_key_suggests_the_real_one(store, flags, message):
    before = state(store)
    code, out, err = run("--sandbox", store, "--alter", "--user", "alice", *flags)
    assert (code, out) == (1, "") and message in err and len(err.splitlines()) == 1
    assert state(store) == before


class _Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_alter_shows_the_parsed_values_per_entity(store):
    code, out, err = run("--sandbox", store, "--alter", "--user", "a", "--user", "b",
                         "--add", "producer_byte_rate=10m,request_percentage=12.5",
                         "--delete", "consumer_byte_rate", "--validate-only")
    assert (code, out) == (0, "")
    assert err.splitlines()[:2] == [
        "{user=a}: producer_byte_rate=10,000,000 B/s, request_percentage=12.5 %, "
        "delete consumer_byte_rate",
        "{user=b}: producer_byte_rate=10,000,000 B/s, request_percentage=12.5 %, "
        "delete consumer_byte_rate"]
    # --alter: the same line for a person at a terminal; scripts capturing stderr see nothing.
    out_, err_ = StringIO(), _Terminal()
    assert main(["--sandbox", store, "--alter", "--user", "CN=a,OU=b", "--add",
                 "consumer_byte_rate=1.5MiB", "--output", "plain"], out=out_, err=err_) == 0
    # ... and where the change was recorded (issue 27)
    assert err_.getvalue() == ('{user="CN=a,OU=b"}: consumer_byte_rate=1,572,864 B/s\n'
                               f"audit: {os.environ['QUOTA_AUDIT_LOG']}\n")


def test_resolve_text_shows_level_and_bucket(store):
    code, out, _ = run("--sandbox", store, "--resolve", "--user", "alice", "--client-id", "app")
    assert code == 0
    assert out == (
        "consumer_byte_rate=5000000 {user=alice, client-id=<default>}\n"
        "  level 2, shared by only client id 'app' of user 'alice' (one allowance per user and "
        "client id)\n"
        "controller_mutation_rate=7.5 {client-id=app}\n"
        "  level 7, shared by every user running client id 'app' together (one allowance per "
        "client id)\n"
        "producer_byte_rate=1048576 {user=alice, client-id=app}\n"
        "  level 1, shared by only client id 'app' of user 'alice' (one allowance per user and "
        "client id)\n"
        "request_percentage=25 {user=alice}\n"
        "  level 3, shared by every client id of user 'alice' together (one allowance per "
        "user)\n")


def test_plain_output_prints_raw_names_and_units(store):
    code, out, err = run("--sandbox", store, "--describe", "--output", "plain",
                         "--user", "<default>", "--user", "CN=a,OU=b", "--defaults", "user")
    assert (code, err) == (0, "")
    assert out == ("{user=<default>}\nconsumer_byte_rate=2000000 (2 MB/s)\n\n"
                   '{user="<default>"}\nconsumer_byte_rate=1000 (1 kB/s)\n\n'
                   '{user="CN=a,OU=b"}\nproducer_byte_rate=4000000 (4 MB/s)\n'
                   "request_percentage=56.25% of a thread\n")
    code, out, _ = run("--sandbox", store, "--resolve", "--output", "plain", "--user",
                       "CN=a,OU=b", "--client-id", "x")
    assert out.splitlines()[0] == "consumer_byte_rate=2000000 (2 MB/s) {user=<default>}"
    assert 'producer_byte_rate=4000000 (4 MB/s) {user="CN=a,OU=b"}' in out


@pytest.mark.parametrize("name, text, message", [
    ("dup.yaml", "entries:\n- entity: {user: a}\n  quotas: {producer_byte_rate: 5}\n"
                 "- entity: {user: a}\n  quotas: {producer_byte_rate: 6}\n",
     "line 4 (entry 2): {user=a} appears twice (first at line 2)"),
    ("dupkey.json", '{"entries": [{"entity": {"user": "a"},\n "quotas": {"producer_byte_rate": 5,'
                    '\n "producer_byte_rate": 6}}]}',
     "line 3: 'producer_byte_rate' appears twice in one object (first at line 2)"),
    ("ip.json", '{"entries": [{"entity": {"ip": "10.1.1.1"}, "quotas": {"producer_byte_rate": 5}}]}',
     "unknown quota key 'producer_byte_rate' for an ip entity"),
])
def test_import_reads_as_strictly_as_plan(store, tmp_path, name, text, message):
    # One reader for files people edit: what `plan` refuses, --import refuses too, with the
    # line, before anything is sent (a last-wins duplicate would silently drop a value).
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    before = state(store)
    code, out, err = run("--sandbox", store, "--import", str(path))
    assert code == 2 and out == ""
    assert message in err, err
    assert state(store) == before
