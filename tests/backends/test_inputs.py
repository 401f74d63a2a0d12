"""Files the user names are read bounded: a FIFO, /dev/zero or a huge file never hangs the CLI.

The CLI cases run ``python -m quota_core`` as a subprocess with a deadline and a memory cap,
so a regression fails in seconds instead of hanging the suite or filling memory.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from quota_core.errors import ConfigError, ParseError
from quota_core.backends.files import read_bytes_file, read_text_file
from quota_core.backends.kafka_config import load_command_config

from tests import ROOT



@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


# -- the helper ------------------------------------------------------------------------------

@pytest.mark.parametrize("name, kind", [("fifo", "a named pipe (FIFO)"),
                                        ("zero", "a character device"),
                                        ("dir", "a directory")])
def test_non_regular_files_are_refused_at_once(tmp_path, fifo, name, kind):
    path = {"fifo": fifo, "zero": Path("/dev/zero"), "dir": tmp_path}[name]
    start = time.monotonic()
    with pytest.raises(ParseError) as info:
        read_text_file(path, "--import file", 1000)
    assert time.monotonic() - start < 10  # a FIFO with no writer would block forever
    assert str(info.value).startswith(f"Cannot read {path}: it is {kind}, not a regular file.")
    assert "A --import file must be a regular file" in str(info.value)
    assert info.value.context == {"path": str(path), "reason": f"it is {kind}, not a regular file"}


def test_size_limit(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert read_bytes_file(path, "thing", 1000) == b"x" * 1000  # exactly the limit is fine
    with pytest.raises(ParseError, match=r"it is larger than 999 bytes, the most a thing may be"):
        read_bytes_file(path, "thing", 999)
    path.write_bytes(b"x" * (2**20 + 1))
    with pytest.raises(ConfigError, match=r"larger than 1 MiB, the most a --command-config"):
        read_bytes_file(path, "--command-config file", 2**20, ConfigError)


def test_missing_and_not_utf8(tmp_path):
    with pytest.raises(ParseError, match=r"Cannot read .*/nope: No such file or directory\.$"):
        read_text_file(tmp_path / "nope", "--import file", 10)
    (tmp_path / "latin").write_bytes(b"caf\xe9!")
    with pytest.raises(ParseError, match=r"it is not UTF-8 text \(invalid continuation byte at "
                                         r"byte 3\)\. Give a JSON export\.$"):
        read_text_file(tmp_path / "latin", "--import file", 10, fix="Give a JSON export.")


def test_command_config_is_bounded(tmp_path, fifo):
    with pytest.raises(ConfigError, match="character device, not a regular file"):
        load_command_config("/dev/zero")
    with pytest.raises(ConfigError, match="named pipe"):
        load_command_config(fifo)
    big = tmp_path / "big.properties"
    big.write_text("#" * (2**20 + 1))
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_command_config(big)
    with pytest.raises(ConfigError, match="does not exist"):  # its own message, as before
        load_command_config(tmp_path / "missing.properties")


# -- the CLI, as a subprocess with a deadline --------------------------------------------------

def _cap_memory() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))


def cli(*argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "quota_core", *argv], capture_output=True,
                              text=True, timeout=timeout, cwd=ROOT, preexec_fn=_cap_memory)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung: {argv}")


@pytest.mark.parametrize("source", ["zero", "fifo"])
def test_cli_import_of_an_endless_file_is_refused(tmp_path, fifo, source):
    path = "/dev/zero" if source == "zero" else str(fifo)
    store = tmp_path / "q.sqlite"
    done = cli("--sandbox", str(store), "--import", path)
    kind = "a character device" if source == "zero" else "a named pipe (FIFO)"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"kafka-client-quotas: error: Cannot read {path}: it is "
                                  f"{kind}, not a regular file.")
    assert done.stderr.count("\n") == 1
    assert not store.exists()  # nothing written, not even an empty sandbox


def test_cli_import_of_a_huge_file_is_refused(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(64 * 2**20 + 1)  # sparse: no disk used
    done = cli("--sandbox", str(tmp_path / "q.sqlite"), "--import", str(big))
    assert done.returncode == 2
    assert "it is larger than 64 MiB, the most a quota file may be" in done.stderr  # as lint, plan


@pytest.mark.parametrize("source", ["zero", "fifo"])
def test_cli_command_config_of_an_endless_file_is_refused(fifo, source):
    path = "/dev/zero" if source == "zero" else str(fifo)
    done = cli("--bootstrap-server", "127.0.0.1:1", "--command-config", path, "--describe")
    assert (done.returncode, done.stdout) == (2, "")  # docs/interfaces.md: unreadable = usage error
    assert f"Cannot read {path}: it is " in done.stderr and "not a regular file" in done.stderr
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("source", ["zero", "fifo"])
def test_cli_add_config_file_of_an_endless_file_is_refused(tmp_path, fifo, source):
    path = "/dev/zero" if source == "zero" else str(fifo)
    done = cli("--sandbox", str(tmp_path / "q.sqlite"), "--alter", "--entity-type", "users",
               "--entity-name", "bob", "--add-config-file", path)
    assert done.returncode == 1  # the kafka-configs.sh dialect exits as ConfigCommand: 1 for every error
    assert f"cannot read --add-config-file {path}: it is " in done.stderr
    assert "Traceback" not in done.stderr
