"""One validator for every reader of a quota file (issue 32, finding 2 and finding 8).

``lint FILE`` used to call seven invalid files clean (exit 0, "0 findings") that ``plan`` and
``--import`` refuse. Now every reader runs the same parse and the same checks
(:func:`quota_core.backends.files.read_quota_path` / ``read_quota_upload``, the strict reader
and :func:`quota_core.domain.validation.entry_problems`) and refuses every bad file with the same
one-line message; each exits as docs/interfaces.md says. ``apply`` reads a plan, not a quota
file: a plan whose changes set the same bad values is refused with the same message.
``analyze`` refuses before a Spark session starts.
"""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest

import pipeline.session
from pipeline.analyze import cli_main as analyze_main
from quota_core import Entity
from quota_core.backends.files import read_quota_path, read_quota_upload
from quota_core.errors import ParseError
from quota_core.planning.plan import Plan, _entity_change, plan_document, quota_set_hash
from quota_core.domain.serialization import YAML_MAX_CHARS, yaml_max_chars
from tests.cli_steps import run, sandbox_with, state

ALICE = "{user=alice}"

#: Every bad file: (name, text, the problem (entity, quotas) it holds, the message's end).
BAD_FILES = [
    ("nan.json", '{"entries": [\n {"entity": {"user": "alice"},\n'
                 '  "quotas": {"producer_byte_rate": NaN}}]}\n',
     {"user": "alice"}, {"producer_byte_rate": float("nan")},
     f"producer_byte_rate for {ALICE}: NaN is not a quota. Give a number greater than 0."),
    ("inf.json", '{"entries": [\n {"entity": {"user": "alice"},\n'
                 '  "quotas": {"request_percentage": Infinity}}]}\n',
     {"user": "alice"}, {"request_percentage": float("inf")},
     f"request_percentage for {ALICE}: infinity is not a quota. To make it unlimited, remove "
     f"the key from the entry."),
    ("nan.yaml", "entries:\n- entity: {user: alice}\n  quotas:\n    consumer_byte_rate: .nan\n",
     {"user": "alice"}, {"consumer_byte_rate": float("nan")},
     f"consumer_byte_rate for {ALICE}: NaN is not a quota. Give a number greater than 0."),
    ("inf.yaml", "entries:\n- entity: {user: alice}\n  quotas:\n"
                 "    controller_mutation_rate: .inf\n",
     {"user": "alice"}, {"controller_mutation_rate": float("inf")},
     f"controller_mutation_rate for {ALICE}: infinity is not a quota. To make it unlimited, "
     f"remove the key from the entry."),
    ("zero.yaml", "entries:\n- entity: {user: alice}\n  quotas:\n    producer_byte_rate: 0\n",
     {"user": "alice"}, {"producer_byte_rate": 0.0},
     f"producer_byte_rate for {ALICE}: 0 is not allowed; a quota must be greater than 0. To "
     f"make it unlimited, remove the key from the entry."),
    ("negative.json", '{"entries": [{"entity": {"user": "alice"}, '
                      '"quotas": {"consumer_byte_rate": -5}}]}',
     {"user": "alice"}, {"consumer_byte_rate": -5.0},
     f"consumer_byte_rate for {ALICE}: -5 is not allowed; a quota must be greater than 0. To "
     f"make it unlimited, remove the key from the entry."),
    ("bad-ip.yaml", "entries:\n- entity: {ip: 999.1.1.1}\n  quotas:\n"
                    "    connection_creation_rate: 5\n",
     {"ip": "999.1.1.1"}, {"connection_creation_rate": 5.0},
     "{ip=999.1.1.1}: '999.1.1.1' is not an IP address. Give an IPv4 or IPv6 address such as "
     "192.0.2.10. (A broker accepts a host name it can resolve, but it resolves the name once, "
     "when the quota is set, so the quota silently stays on the old address if DNS changes; "
     "describe shows the name, not the address it limits.)"),
]
READERS = ["lint", "plan", "import", "apply", "analyze", "plan page upload"]
#: docs/interfaces.md: lint, any error 1 (a malformed file is 1); plan, any error 1; the main command
#: (--import), apply and analyze: a usage error 2; the page shows the message.
EXIT = {"lint": 1, "plan": 1, "import": 2, "apply": 2, "analyze": 2}


@pytest.fixture(autouse=True)
def no_spark(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a Spark session was started")

    monkeypatch.setattr(pipeline.session, "get_session", refuse)


@pytest.fixture
def store(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("QUOTA_AUDIT_LOG", str(tmp_path / "audit.jsonl"))
    return sandbox_with(tmp_path / "q.sqlite", {Entity.of(user="bob"): {"producer_byte_rate": 1e6}})


def bad_plan(path: Path, entity: dict, quotas: dict) -> Path:
    """A plan file whose one change sets ``quotas`` on ``entity``, with consistent hashes (as
    someone who edits a plan and recomputes them would write it)."""
    change = _entity_change(Entity.from_mapping(entity), {}, quotas)
    plan = Plan({}, (change,), {}, source="edited", base_hash=quota_set_hash({}))
    path.write_text(json.dumps(plan_document(plan)))
    return path


def read(reader: str, path: Path, store: str, tmp_path: Path) -> tuple[int | None, str]:
    """(exit code, what the reader said) for one reader of ``path``."""
    if reader == "plan page upload":
        try:
            read_quota_upload(path.read_bytes(), str(path))  # the page: the upload's name
        except ParseError as exc:
            return None, f"{exc}\n"
        return None, ""
    if reader == "analyze":
        (tmp_path / "history").mkdir(exist_ok=True)
        out, err = StringIO(), StringIO()
        code = analyze_main(["--usage", str(tmp_path / "history"), "--out",
                             str(tmp_path / "out"), "--quotas", str(path)], out, err)
        return code, err.getvalue()
    argv = {"lint": ["lint", str(path)],
            "plan": ["plan", str(path), "--sandbox", store],
            "import": ["--sandbox", store, "--import", str(path)],
            "apply": ["apply", str(path), "--sandbox", store]}[reader]
    code, out, err = run(*argv)
    assert out == ""
    return code, err


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name, text, entity, quotas, problem", BAD_FILES,
                         ids=[b[0] for b in BAD_FILES])
def test_every_reader_refuses_every_bad_file_with_the_same_message(
        tmp_path, store, reader, name, text, entity, quotas, problem):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ParseError) as info:
        read_quota_path(path)
    message = str(info.value)  # "<path>, line N (entry 1): <problem>"
    assert message.startswith(f"{path}, line ") and message.endswith(problem)
    if reader == "apply":
        path = bad_plan(tmp_path / "plan.json", entity, quotas)
        message = f"{path}, change 1: {problem} Make a new plan"
    code, said = read(reader, path, store, tmp_path)
    assert code == EXIT.get(reader), said
    assert said.count("\n") == 1, said  # one line
    assert message in said, said
    if reader not in ("apply", "plan page upload"):
        assert said.endswith(f"{message}\n")  # the same message, after the command's prefix
    assert state(store) == {Entity.of(user="bob"): {"producer_byte_rate": 1e6}}  # untouched


def test_lint_still_lints_a_valid_file(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text("entries:\n- entity: {user: alice}\n  quotas: {producer_byte_rate: 1048576}\n")
    code, out, err = run("lint", str(path))
    assert code == 0 and "lint: 0 findings" in err, err


def test_the_plan_page_shows_the_readers_message(tmp_path, monkeypatch, store):
    """The page's Plan button reads the pasted text through read_quota_upload."""
    from tests.app_steps import run_app, texts

    for var in ("QUOTA_BOOTSTRAP_SERVERS", "QUOTA_READ_ONLY", "QUOTA_EDITORS",
                "QUOTA_USER_HEADER", "QUOTA_METRICS", "QUOTA_TRUST_PROXY_HEADER",
                "QUOTA_IDENTITY_CLAIM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QUOTA_SANDBOX", store)
    monkeypatch.setenv("QUOTA_LOCAL_MODE", "1")
    at = run_app("pages/plan.py", operator="jdoe")
    at.text_area(key="pl_text").input(BAD_FILES[2][1]).run()
    at.button(key="pl_plan_btn").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert texts(at.error) == [f"pasted text, line 4 (entry 1): {BAD_FILES[2][4]}"]


# -- finding 8: large YAML ---------------------------------------------------------------------
def test_yaml_over_the_cap_is_refused_by_every_reader_naming_size_cap_and_fix(tmp_path, store):
    """A YAML file just over the cap is refused before it is parsed (so this is fast); the
    message names its size, the cap and the fix (JSON)."""
    assert yaml_max_chars() == YAML_MAX_CHARS  # this venv's PyYAML has libyaml
    path = tmp_path / "big.yaml"
    head = "entries:\n- entity: {user: alice}\n  quotas: {producer_byte_rate: 1048576}\n"
    path.write_text(head + "#" * (YAML_MAX_CHARS + 1 - len(head) - 1) + "\n")
    expected = (f"{path} is 16.0 MiB of YAML, over the 16 MiB a YAML quota file may be (a "
                f"larger one takes more than a few seconds to read). Convert it to JSON, which "
                f"may be up to 64 MiB: python3 -c 'import json, sys, yaml; ")
    for reader in ("lint", "plan", "import", "analyze", "plan page upload"):
        code, said = read(reader, path, store, tmp_path)
        assert code == EXIT.get(reader) and said.count("\n") == 1, (reader, said)
        assert expected in said, (reader, said)
    # At the cap exactly, it is read (and parsed: one entry and a long comment).
    path.write_text(head + "#" * (YAML_MAX_CHARS - len(head) - 1) + "\n")
    assert len(read_quota_path(path).quotas) == 1


def test_yaml_is_read_in_one_pass_without_a_node_graph(tmp_path, monkeypatch):
    """libyaml's events, no node graph: PyYAML's composer (which cost 17x JSON's time, and
    90 s for 100k entries) is never called, and the entries read are those written. The
    speed itself is a benchmark's business, not a unit test's."""
    import yaml

    from quota_core.domain.serialization import dumps, read_quota_file

    def no_graph(*args, **kwargs):
        raise AssertionError("the YAML reader built PyYAML's node graph")

    for loader in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        monkeypatch.setattr(loader, "get_single_node", no_graph)
        monkeypatch.setattr(loader, "get_single_data", no_graph)
    quotas = {Entity.of(user=f"user-{i}", client_id=f"app-{i}"): {"producer_byte_rate": 1e6 + i,
                                                                   "request_percentage": 50.0}
              for i in range(300)}
    assert read_quota_file(dumps(quotas, "yaml"), "yaml", "q.yaml").quotas == quotas
