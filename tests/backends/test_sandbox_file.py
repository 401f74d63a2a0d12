"""The sandbox file is the user's data: reads never write it, other files are refused.

"Reads never write" is proven on the bytes: the file's SHA-256 (and the absence of -wal and
-shm files) before and after --describe, --resolve and --export, on a fresh sandbox, a
foreign SQLite database, an empty file and a read-only file.
"""
from __future__ import annotations

import hashlib
import sqlite3
from io import StringIO
from pathlib import Path

import pytest

from quota_core import Entity
from quota_core.cli.main import main
from quota_core.errors import ConnectionFailed
from quota_core.backends.sandbox import SandboxBackend

E = Entity.of
READS = [["--describe"], ["--describe", "--user", "alice"], ["--resolve", "--user", "alice",
         "--client-id", "app"], ["--resolve", "--ip", "10.0.0.1"], ["--export", "json"],
         ["--export", "yaml"], ["--describe", "--output", "json"]]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    code = main(list(argv), out=out, err=err)
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


def fingerprint(path: Path) -> tuple:
    """The file's bytes, mode and the SQLite side files next to it."""
    side = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mode, side


def make_sandbox(path: Path) -> Path:
    with SandboxBackend(path) as backend:
        backend.replace_all({E(user="alice"): {"producer_byte_rate": 1024.0},
                             E(ip="10.0.0.1"): {"connection_creation_rate": 5.0}})
    return path


def make_foreign(path: Path, wal: bool = False) -> Path:
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("CREATE TABLE orders (id INTEGER, total REAL)")
    conn.execute("INSERT INTO users VALUES (1, 'ada')")
    conn.commit()
    conn.close()
    return path


@pytest.fixture(params=["sandbox", "read-only sandbox", "foreign", "foreign-wal", "empty",
                        "empty-database", "text", "read-only foreign"])
def case(request, tmp_path) -> tuple[str, Path]:
    path = tmp_path / "q.sqlite"
    kind = request.param
    if "sandbox" in kind:
        make_sandbox(path)
    elif kind.endswith("foreign"):
        make_foreign(path)
    elif kind == "foreign-wal":
        make_foreign(path, wal=True)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "empty-database":
        sqlite3.connect(path).execute("PRAGMA user_version=7").connection.close()
    elif kind == "text":
        path.write_text('{"format": "quota-console/1", "entries": []}\n')
    if kind.startswith("read-only"):
        path.chmod(0o444)
    yield kind, path
    path.chmod(0o644)


@pytest.mark.parametrize("read", READS, ids=" ".join)
def test_reads_never_write(case, read):
    kind, path = case
    before = fingerprint(path)
    assert before[2] == []  # no -wal/-shm to begin with
    code, out, err = run("--sandbox", str(path), *read)
    assert fingerprint(path) == before, f"{kind}: {read} changed the file"
    if kind in ("foreign", "foreign-wal", "read-only foreign"):
        assert (code, out) == (1, "")
        assert err == (f"kafka-client-quotas: Cannot open the sandbox store {path}: it is an "
                       f"SQLite database with tables orders, users but no quota-console tables. "
                       f"Give the path of a sandbox file, or a new path to create one.\n")
    elif kind == "text":
        assert (code, out) == (1, "")
        assert "it is not an SQLite file (it looks like JSON or YAML text: an export? Load it " \
               "into a sandbox with --import), so not a quota console sandbox" in err
    else:
        assert code == 0, err
        if "sandbox" in kind and read == ["--describe"]:
            assert out == "{user=alice}\nproducer_byte_rate=1024\n\n" \
                          "{ip=10.0.0.1}\nconnection_creation_rate=5\n"


def test_a_failed_write_leaves_a_foreign_file_alone(tmp_path):
    path = make_foreign(tmp_path / "app.db")
    before = fingerprint(path)
    for argv in (["--alter", "--user", "a", "--add", "producer_byte_rate=1"],
                 ["--alter", "--user", "a", "--add", "producer_byte_rate=1", "--validate-only"],
                 ["--init"]):
        code, out, err = run("--sandbox", str(path), *argv)
        assert code == 1 and "but no quota-console tables" in err, (argv, err)
        assert fingerprint(path) == before
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)  # not switched to WAL


def test_the_first_write_creates_the_sandbox(tmp_path):
    path = tmp_path / "sub" / "q.sqlite"
    backend = SandboxBackend(path)
    assert backend.describe() == {} and backend.info().cluster_id is None
    assert not path.parent.exists()  # opening and reading made nothing, not even the folder
    assert backend.alter([], validate_only=True).ok
    from quota_core import Alteration
    assert backend.alter([Alteration.of(E(user="a"), {"producer_byte_rate": 5})],
                         validate_only=True).ok
    assert not path.parent.exists()  # validate-only is a read
    assert backend.alter([Alteration.of(E(user="a"), {"producer_byte_rate": 5})]).ok
    assert backend.describe() == {E(user="a"): {"producer_byte_rate": 5.0}}
    assert backend.info().cluster_id.startswith("sandbox-")
    backend.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.parametrize("start", ["missing", "empty", "empty-database"])
def test_init_creates_an_empty_sandbox(tmp_path, start):
    path = tmp_path / "q.sqlite"
    if start == "empty":
        path.write_bytes(b"")
    elif start == "empty-database":
        sqlite3.connect(path).execute("PRAGMA user_version=7").connection.close()
    assert run("--sandbox", str(path), "--init") == (
        0, "", f"Created the sandbox {path} (no quotas yet).\n")
    assert run("--sandbox", str(path), "--init") == (
        0, "", f"{path} is already a sandbox: nothing changed.\n")
    assert run("--sandbox", str(path), "--describe") == (0, "", "")
    with SandboxBackend(path) as backend:
        assert backend.info().cluster_id.startswith("sandbox-")


def test_read_only_file_is_read_but_not_written(tmp_path):
    path = make_sandbox(tmp_path / "q.sqlite")
    path.chmod(0o444)
    before = fingerprint(path)
    code, out, err = run("--sandbox", str(path), "--alter", "--user", "b", "--add",
                         "producer_byte_rate=1")
    assert (code, out) == (1, "")
    assert (f"Cannot write the sandbox store {path}: the file (or its folder) is read-only. "
            f"Make it writable (chmod u+w {path}), or copy it and give the copy.") in err
    assert err.count("\n") == 1
    # Checking an alteration still works: it is a read.
    code, _, err = run("--sandbox", str(path), "--alter", "--user", "b", "--add",
                       "producer_byte_rate=1", "--validate-only")
    assert code == 0 and "nothing was changed" in err
    assert fingerprint(path) == before
    path.chmod(0o644)


@pytest.mark.parametrize("content, what", [
    (b"\x00" * 100, "it is not an SQLite file, so not a quota console sandbox"),
    (b"SQLite format 3\x00" + b"\xff" * 200, "it is not a readable SQLite database"),
])
def test_files_that_are_not_sandboxes_are_named(tmp_path, content, what):
    path = tmp_path / "q.sqlite"
    path.write_bytes(content)
    with pytest.raises(ConnectionFailed, match=what):
        SandboxBackend(path)
    assert path.read_bytes() == content


def test_a_directory_is_refused(tmp_path):
    code, out, err = run("--sandbox", str(tmp_path), "--describe")
    assert (code, out) == (1, "")
    assert err == (f"kafka-client-quotas: Cannot open the sandbox store {tmp_path}: it is a "
                   f"directory, not a sandbox file. Give the path of a sandbox file, or a new "
                   f"path to create one.\n")


# -- damaged rows: one line naming the row and the fix, for every command ------------------

@pytest.mark.parametrize("entity, key, value", [
    ("not json", "producer_byte_rate", "1.0"),
    ('{"user": 5}', "producer_byte_rate", "1.0"),
    ('{"planet": "x"}', "producer_byte_rate", "1.0"),
    ('{"user": "\\udc80"}', "producer_byte_rate", "1.0"),
    ('[["user"]]', "producer_byte_rate", "1.0"),
    ("42", "producer_byte_rate", "1.0"),
    ('{"user": "a"}', "bogus_rate", "1.0"),
    ('{"user": "a"}', "producer_byte_rate", "fast"),
    ('{"user": "a"}', "producer_byte_rate", b"\x01"),
    ('{"user": "a"}', None, "1.0"),
    (7, "producer_byte_rate", "1.0"),
    ('{"user": "a"}', "producer_byte_rate", None),
])
@pytest.mark.parametrize("command", [["--describe"], ["--resolve", "--user", "a"],
                                     ["--export", "json"],
                                     ["--alter", "--user", "b", "--add", "producer_byte_rate=1"]])
def test_damaged_rows_are_one_line(tmp_path, entity, key, value, command):
    path = make_sandbox(tmp_path / "q.sqlite")
    with sqlite3.connect(path) as conn:  # NOT NULL would refuse None: a table made by hand
        conn.execute("ALTER TABLE quotas RENAME TO old")
        conn.execute("CREATE TABLE quotas (entity, key, value, PRIMARY KEY (entity, key))")
        conn.execute("INSERT INTO quotas SELECT * FROM old")
        conn.execute("DROP TABLE old")
        conn.execute("INSERT INTO quotas VALUES (?, ?, ?)", (entity, key, value))
    conn.close()
    before = fingerprint(path)
    code, out, err = run("--sandbox", str(path), *command)
    assert code == 1 and out == ""
    assert err.startswith(f"kafka-client-quotas: The sandbox store {path} has a damaged row "
                          f"(entity {entity!r}, key {key!r}"), err
    assert err.endswith("Delete or fix that row with the sqlite3 shell, or restore the file "
                        "from an --export.\n") and err.count("\n") == 1
    assert fingerprint(path) == before
