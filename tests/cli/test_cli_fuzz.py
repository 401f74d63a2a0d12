"""Malformed invocations never print a traceback: one line, the documented exit code, nothing
written.

Thousands of generated command lines and import files run through
:func:`quota_core.cli.main.main` in-process (sandbox files in tmp, no broker), plus a few real
subprocess runs: invalid UTF-8 bytes in argv, and a SIGINT while the CLI waits. Run with
``FUZZ_REPORT=1`` to print the counts (inputs tried, tracebacks).
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from quota_core import Entity
from quota_core.cli.main import main
from quota_core.domain.resolution import resolve_ip
from quota_core.backends.sandbox import SandboxBackend
from quota_core.domain.validation import canonical_ip

from tests import ROOT

E = Entity.of
COUNTS = {"argv": 0, "import files": 0, "tracebacks": 0, "internal errors": 0}


def run(*argv: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    code = main(list(argv), out=out, err=err)
    if "Traceback" in err.getvalue() + out.getvalue():
        COUNTS["tracebacks"] += 1
    if "internal error" in err.getvalue():
        COUNTS["internal errors"] += 1
    return code, out.getvalue(), err.getvalue()


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / "q.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all({E(user="alice"): {"producer_byte_rate": 1024.0},
                             E(user="alice", client_id="app"): {"request_percentage": 50.0},
                             E(client_id=None): {"consumer_byte_rate": 2e6},
                             E(ip="::ffff:10.0.0.9"): {"connection_creation_rate": 7.0},
                             E(ip="10.0.0.1"): {"connection_creation_rate": 5.0},
                             E(ip=None): {"connection_creation_rate": 9.0}})
    return path


# -- item 8: IPv4-mapped addresses, 1e400, empty and malformed names ---------------------------

@pytest.mark.parametrize("name, canonical", [
    ("::ffff:1.2.3.4", "::ffff:1.2.3.4"),       # the dotted form is canonical (RFC 5952 §5)
    ("::FFFF:102:304", "::ffff:1.2.3.4"),       # whatever Python version prints it
    ("0:0:0:0:0:ffff:1.2.3.4", "::ffff:1.2.3.4"),
    ("1.2.3.4", "1.2.3.4"), ("0:0::1", "::1"), ("::1.2.3.4", "::102:304"), ("x", None),
])
def test_canonical_ip(name, canonical):
    assert canonical_ip(name) == canonical


def test_dotted_mapped_address_is_accepted(tmp_path):
    path = str(tmp_path / "q.sqlite")
    assert run("--sandbox", path, "--alter", "--ip", "::ffff:1.2.3.4", "--add",
               "connection_creation_rate=3")[0] == 0
    code, _, err = run("--sandbox", path, "--alter", "--ip", "::ffff:102:304", "--add",
                       "connection_creation_rate=3")
    assert code == 1 and "write the address '::ffff:102:304' as '::ffff:1.2.3.4'" in err


@pytest.mark.parametrize("query, stored, expected", [
    # Java's InetAddress.getByName("::ffff:1.2.3.4") is the Inet4Address 1.2.3.4: a broker
    # limits the IPv4 client by an entry in either spelling (ClientQuotaMetadataManager).
    ("10.0.0.9", "::ffff:10.0.0.9", 7.0),
    ("::ffff:10.0.0.9", "::ffff:10.0.0.9", 7.0),
    ("::ffff:a00:9", "::ffff:10.0.0.9", 7.0),
    ("::ffff:10.0.0.1", "10.0.0.1", 5.0),
    ("10.0.0.2", None, 9.0),  # the ip default
])
def test_resolve_ip_either_spelling(store, query, stored, expected):
    code, out, err = run("--sandbox", str(store), "--resolve", "--ip", query, "--output", "json")
    assert code == 0, err
    assert ('"connection_creation_rate"' in out) and str(expected).rstrip("0").rstrip(".") in out
    with SandboxBackend(store) as backend:
        got = resolve_ip(backend.describe(), query).keys["connection_creation_rate"]
    assert got.value == expected
    assert (got.source.name("ip") if got.level == 1 else None) == stored


@pytest.mark.parametrize("add, message", [
    ("producer_byte_rate=1e400", "producer_byte_rate=1e400: that number is too large for a LONG"),
    ("request_percentage=1e400", "request_percentage=1e400: that number is too large for any quota"),
    ("producer_byte_rate=1e400MiB", "that number is too large for a LONG"),
    ("request_percentage=inf", "infinity is not a quota"),  # written as infinity: is infinity
])
def test_1e400_is_too_large_not_infinity(tmp_path, add, message):
    code, out, err = run("--sandbox", str(tmp_path / "q.sqlite"), "--alter", "--user", "a",
                         "--add", add)
    assert (code, out) == (1, "") and message in err and err.count("\n") == 1
    assert not (tmp_path / "q.sqlite").exists()


@pytest.mark.parametrize("mode", ["alter", "import"])
def test_empty_and_malformed_names_get_the_same_exit_code(tmp_path, mode):
    codes = {}
    for label, name in (("empty", ""), ("undecodable", "caf\udce9"), ("surrogate", "\ud800")):
        if mode == "alter":
            code, _, err = run("--sandbox", str(tmp_path / "q.sqlite"), "--alter", "--user",
                               name, "--add", "producer_byte_rate=1")
        else:
            doc = tmp_path / f"{label}.json"
            doc.write_text(json.dumps({"entries": [{"entity": {"user": name},
                                                    "quotas": {"producer_byte_rate": 1}}]}))
            code, _, err = run("--sandbox", str(tmp_path / "q.sqlite"), "--import", str(doc))
        assert err.count("\n") == 1, err
        codes[label] = code
    assert set(codes.values()) == ({1} if mode == "alter" else {2}), codes
    assert not (tmp_path / "q.sqlite").exists()


# -- the fuzz: generated command lines and import files, in-process -------------------------

SURROGATE = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
TEXT = st.one_of(
    st.text(max_size=12),
    st.builds(lambda a, s: a + s, st.text(max_size=4), st.text(SURROGATE, min_size=1, max_size=2)),
    st.sampled_from(["", "user=", "user", "user=a,client-id=b", "client-id=\\,x", "ip=::1",
                     "user=a\\", "=", ",", "\\", "1e400", "-1e400", "1e400MiB", "nan", "inf",
                     "-1", "0", "10MB", "1.5", "2" * 400, "producer_byte_rate=1e400",
                     "request_percentage=nan", "producer_byte_rate", "connection_creation_rate=5",
                     "::ffff:1.2.3.4", "::ffff:102:304", "10.0.0.1", "fe80::1%eth0", "<default>",
                     "user,client-id", "ip", "json", "yaml", "text", "users", "clients", "ips",
                     "-", "--", "/dev/zero", "/nonexistent/x.json"]))
FLAGS = ["--names", "--defaults", "--user", "--client-id", "--ip", "--add", "--delete",
         "--output", "--timeout", "--above", "--export", "--command-config",
         "--entity-type", "--entity-name", "--add-config", "--delete-config", "--client"]
SWITCHES = ["--strict", "--validate-only", "--replace", "--entity-default", "--user-defaults",
            "--client-defaults", "--ip-defaults", "--help"]
MODES = [["--describe"], ["--resolve"], ["--alter"], ["--export", "json"], ["--export", "yaml"],
         ["--init"], ["--throttled"], [], ["--describe", "--resolve"], ["--alter"], ["--alter"]]
ARGV = st.tuples(
    st.sampled_from(MODES),
    st.lists(st.one_of(st.tuples(st.sampled_from(FLAGS), TEXT).map(list),
                       st.tuples(st.sampled_from(FLAGS), TEXT).map(lambda p: [f"{p[0]}={p[1]}"]),
                       st.sampled_from(SWITCHES).map(lambda s: [s])), max_size=5),
    st.sampled_from(["store", "missing", "none", "both"]))


def fuzz(name: str, default: int) -> settings:
    return settings(deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck),
                    max_examples=int(os.environ.get(name, default)))


def check(code: int, out: str, err: str, argv) -> None:
    assert "Traceback" not in err + out, argv
    assert "internal error" not in err, (argv, err)
    assert code in (0, 1, 2), (argv, code, err)
    if code:
        assert err.strip(), argv  # (kafka-configs.sh forms print Java's messages as they are)


@fuzz("FUZZ_ARGV", 1000)
@given(case=ARGV)
def test_fuzz_argv(store_copy, case):
    mode, pairs, where = case
    words = [w for pair in pairs for w in pair]
    if "--help" in words:
        words.remove("--help")  # prints the help: exit 0, nothing to check
    path = store_copy["missing"] if where == "missing" else store_copy["path"]
    for leftover in store_copy["missing"].parent.glob("missing.sqlite*"):
        leftover.unlink()  # made by an earlier example's write
    where_flags = {"store": ["--sandbox", str(path)], "missing": ["--sandbox", str(path)],
                   "none": [], "both": ["--sandbox", str(path), "--bootstrap-server",
                                        "127.0.0.1:1"]}[where]
    if where == "none" and "--command-config" not in words:
        where_flags = ["--sandbox", str(path)]
    argv = [*mode, *words, *where_flags]
    COUNTS["argv"] += 1
    check(*run(*argv), argv)
    if where == "missing":
        assert not store_copy["missing"].exists() or "--init" in mode or any(
            m in mode for m in ("--alter",)) or "--entity-type" in words or "--client" in words \
            or "--add-config" in words or "--delete-config" in words


@pytest.fixture(scope="module")
def store_copy(store, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz-copy")
    path = folder / "q.sqlite"
    path.write_bytes(store.read_bytes())
    return {"path": path, "missing": folder / "missing.sqlite"}


INT64 = st.integers(-2**63, 2**63 - 1)
NAMES = st.one_of(st.none(), st.text(max_size=8), st.text(SURROGATE, min_size=1, max_size=2),
                  st.integers(), st.lists(st.text(max_size=2), max_size=2))
NUMBERS = st.one_of(st.integers(), st.integers(min_value=10**300, max_value=10**400),
                    st.floats(), st.sampled_from(["1e400", "NaN", "inf", "Infinity", "5", "x"]),
                    st.booleans(), st.none(), st.lists(st.integers(), max_size=2))
ENTRY = st.fixed_dictionaries({
    "entity": st.one_of(st.dictionaries(st.sampled_from(["user", "client-id", "ip", "group", ""]),
                                        NAMES, max_size=3), NAMES),
    "quotas": st.one_of(st.dictionaries(st.sampled_from(["producer_byte_rate",
                                                         "request_percentage",
                                                         "connection_creation_rate",
                                                         "bogus", ""]), NUMBERS, max_size=3),
                        NUMBERS)})
DOCS = st.one_of(
    st.fixed_dictionaries({"entries": st.lists(ENTRY, max_size=3)},
                          optional={"format": st.sampled_from(["quota-console/1", "other"])}),
    st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text()),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                     max_size=3), max_leaves=8))


@fuzz("FUZZ_IMPORT", 500)
@given(doc=DOCS, fmt=st.sampled_from(["json", "yaml", "raw"]), raw=st.binary(max_size=40),
       replace=st.booleans())
def test_fuzz_import_files(tmp_path_factory, doc, fmt, raw, replace):
    folder = tmp_path_factory.mktemp("imp", numbered=True)
    if fmt == "json":
        text = json.dumps(doc, ensure_ascii=True, allow_nan=True)  # \udcxx escapes survive
        path = folder / "q.json"
        path.write_text(text)
    elif fmt == "yaml":
        import yaml
        path = folder / "q.yaml"
        try:
            path.write_text(yaml.safe_dump(doc, allow_unicode=False))
        except (yaml.YAMLError, UnicodeEncodeError):
            path.write_bytes(raw)
    else:
        path = folder / "q.json"
        path.write_bytes(raw)
    store = folder / "s.sqlite"
    argv = ["--sandbox", str(store), "--import", str(path), *(["--replace"] if replace else [])]
    COUNTS["import files"] += 1
    code, out, err = run(*argv)
    check(code, out, err, argv)
    if code:
        assert not store.exists(), (err, path.read_bytes()[:200])  # refused: nothing written
        assert err.count("\n") == 1, err


@fuzz("FUZZ_ROWS", 60)
@given(rows=st.lists(st.tuples(st.one_of(st.text(max_size=12), INT64, st.none(),
                                         st.binary(max_size=4),
                                         st.sampled_from(['{"user":"a"}', '{"ip":"x"}',
                                                          '[["user","a"]]', '{"user":""}'])),
                               st.one_of(st.sampled_from(["producer_byte_rate", "bogus"]),
                                         INT64, st.none()),
                               st.one_of(st.text(max_size=6), st.floats(), INT64,
                                         st.none(), st.binary(max_size=3))),
                     min_size=1, max_size=3),
       command=st.sampled_from([["--describe"], ["--export", "yaml"], ["--resolve", "--user", "a"],
                                ["--resolve", "--ip", "10.0.0.1"],
                                ["--alter", "--user", "b", "--add", "producer_byte_rate=1"]]))
def test_fuzz_damaged_sandbox_rows(tmp_path_factory, rows, command):
    import sqlite3

    path = tmp_path_factory.mktemp("rows", numbered=True) / "q.sqlite"
    with SandboxBackend(path) as backend:
        backend.replace_all({E(user="z"): {"producer_byte_rate": 1.0}})
    with sqlite3.connect(path) as conn:  # a hand-made table: any value in any column
        conn.execute("DROP TABLE quotas")
        conn.execute("CREATE TABLE quotas (entity, key, value)")
        conn.executemany("INSERT INTO quotas VALUES (?, ?, ?)", rows)
    conn.close()
    argv = ["--sandbox", str(path), *command]
    COUNTS["argv"] += 1
    check(*run(*argv), argv)


def test_fuzz_counts_report():
    """Runs last in this file: the counts for the record (FUZZ_REPORT=1 prints them)."""
    if os.environ.get("FUZZ_REPORT"):
        print(f"\nfuzz: {COUNTS}")
    assert COUNTS["tracebacks"] == 0 and COUNTS["internal errors"] == 0


# -- real processes: undecodable argv bytes, Ctrl-C during a wait --------------------------------

def cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "quota_core", *argv], capture_output=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("command, code", [
    (["--alter", "--add", "producer_byte_rate=1"], 1),
    (["--describe"], 1),
    (["--resolve"], 1),
])
def test_undecodable_argv_bytes_in_a_real_process(tmp_path, store, command, code):
    name = os.fsdecode(b"caf\xe9-\xff")  # what Python makes of invalid UTF-8 in argv
    path = tmp_path / "q.sqlite"
    path.write_bytes(store.read_bytes())
    before = digest(path)
    done = cli("--sandbox", str(path), *command[:1], "--user", name, *command[1:])
    assert done.returncode == code, done.stderr
    assert done.stderr.count(b"\n") == 1 and b"Traceback" not in done.stderr
    assert b"is not valid text: it holds a lone surrogate (U+DCE9, from the byte 0xE9)" \
        in done.stderr
    assert digest(path) == before


def test_undecodable_bytes_in_the_import_path_are_just_a_path(tmp_path):
    path = tmp_path / os.fsdecode(b"q\xff.json")
    path.write_text('{"entries": [{"entity": {"user": "a"}, "quotas": {"producer_byte_rate": 1}}]}')
    done = cli("--sandbox", str(tmp_path / "q.sqlite"), "--import", str(path))
    assert done.returncode == 0, done.stderr


def test_ctrl_c_while_waiting_for_a_cluster(tmp_path):
    """A listener that accepts and never answers: the CLI waits; SIGINT ends it in one line."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(30)
        port = server.getsockname()[1]
        proc = subprocess.Popen([sys.executable, "-m", "quota_core", "--bootstrap-server",
                                 f"127.0.0.1:{port}", "--describe", "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        try:
            conn, _ = server.accept()  # the CLI is connected, waiting for an answer
            time.sleep(0.3)
            started = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
            conn.close()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert time.monotonic() - started < 30  # far below the 60 s timeout
    assert (proc.returncode, out) == (130, b"")
    assert err == b"kafka-client-quotas: interrupted (Ctrl-C).\n"
