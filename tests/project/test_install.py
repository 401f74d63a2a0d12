"""Issue 28 item 1: an installable console.

The wheel that ``pip`` builds from this checkout carries the dashboard (``app.py``, ``pages/``,
``ui/``, ``.streamlit/config.toml``, under ``quota_console/``) next to ``quota_core``; once it
is installed in a fresh virtualenv, outside the checkout, ``kafka-client-quotas`` and
``quota-console`` run from it, and ``quota-console`` serves the app on 127.0.0.1 only.

To stay fast and offline, the wheel is built with ``--no-build-isolation`` (this venv's
setuptools, pinned in requirements.txt) and installed with ``--no-deps``; the fresh venv
reaches the third-party packages through a ``.pth`` file naming this venv's site-packages (a
path in a ``.pth`` file is added as it is: this venv's editable install of the checkout,
itself a ``.pth`` hook, is not run). The project's own modules come from the wheel.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from quota_core.cli import console

from tests import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: What the wheel is built from: the product, without tests, caches or a secrets.toml.
SOURCES = ["app.py", "pages", "ui", "quota_core", "localkafka", "pipeline", "pyproject.toml",
           ".streamlit/config.toml"]
#: The folders whose modules the installed commands import (the wheel must hold every one).
RUNTIME = ["quota_core", "localkafka", "pipeline", "ui", "pages"]


# --- the command line (in-process, fast) -------------------------------------------------

def test_defaults_listen_on_loopback_8501_and_serve_the_checkouts_app():
    cmd = console.streamlit_args([], {})
    assert cmd[:2] == ["run", str(ROOT / "app.py")]
    opts = dict(zip(cmd[2::2], cmd[3::2]))
    assert opts["--server.address"] == "127.0.0.1"
    assert opts["--server.port"] == "8501"
    assert opts["--server.headless"] == "true"


def test_port_and_address_flags_and_quota_port():
    opts = dict(zip(*[iter(console.streamlit_args(
        ["--port", "8600", "--address", "0.0.0.0"], {"QUOTA_PORT": "9000"})[2:])] * 2))
    assert (opts["--server.port"], opts["--server.address"]) == ("8600", "0.0.0.0")
    opts = dict(zip(*[iter(console.streamlit_args([], {"QUOTA_PORT": "9000"})[2:])] * 2))
    assert opts["--server.port"] == "9000"


@pytest.mark.parametrize("argv, env, names", [
    (["--port", "0"], {}, "--port"),
    (["--port", "65536"], {}, "--port"),
    (["--port", "http"], {}, "--port"),
    (["--address", "not an address"], {}, "--address"),
    ([], {"QUOTA_PORT": "eighty"}, "QUOTA_PORT"),
    (["--bogus"], {}, "--bogus"),
])
def test_usage_errors_exit_2_with_one_clear_line(monkeypatch, capsys, argv, env, names):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert console.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("quota-console: ") and names in lines[0]
    assert "Traceback" not in err


def test_a_missing_app_is_a_runtime_error(tmp_path):
    with pytest.raises(Exception, match="not installed next to quota_core"):
        console.app_path(tmp_path)


def test_importing_the_entry_point_loads_no_streamlit():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, quota_core.cli.console\n"
         "print([m for m in sys.modules if m.split('.')[0] == 'streamlit'])"],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- the declared dependencies (fast) ----------------------------------------------------

def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> dict[str, str]:
    reqs = PYPROJECT["project"]["dependencies"] + [
        r for extra in PYPROJECT["project"].get("optional-dependencies", {}).values()
        for r in extra]
    return {_name(r): r for r in reqs}


def _third_party_imports() -> set[str]:
    """Top-level modules the runtime folders import that are neither stdlib nor ours."""
    ours = set(RUNTIME) | {"app"}
    found = set()
    files = [ROOT / "app.py"] + [p for d in RUNTIME for p in (ROOT / d).rglob("*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names} - ours - set(sys.stdlib_module_names)
    return found


def test_every_runtime_import_is_a_declared_dependency():
    declared = _declared()
    owners = metadata.packages_distributions()
    missing = {}
    for module in sorted(_third_party_imports()):
        dists = {d.lower().replace("_", "-") for d in owners.get(module, [module])}
        if not dists & set(declared):
            missing[module] = sorted(dists)
    assert missing == {}, f"imported at run time but not in pyproject.toml: {missing}"


def test_every_dependency_has_a_lower_bound_and_a_pin_that_meets_it():
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.-]+)==([0-9][^\s#]*)", line)
        if m:
            pins[m[1].lower().replace("_", "-")] = m[2]

    def version(text: str) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    for name, requirement in _declared().items():
        m = re.search(r">=\s*([0-9][0-9.]*)", requirement)
        assert m, f"{requirement}: no lower bound"
        assert name in pins, f"{name} is not pinned in requirements.txt"
        assert version(pins[name]) >= version(m[1]), f"{name}=={pins[name]} < {requirement}"
    # Spark is only for the pipeline: the dashboard and the CLI install without it.
    assert "pyspark" not in {_name(r) for r in PYPROJECT["project"]["dependencies"]}


# --- the wheel, installed in a fresh venv (about 15 s) -------------------------------------

def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("QUOTA_", "STREAMLIT_", "PYTHON", "VIRTUAL_ENV"))}
    env["HOME"] = str(home)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> list[str]:
    """The local addresses of the sockets listening on ``port`` (from /proc/net/tcp, tcp6)."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(addr)
                # /proc prints each 32-bit word in host order (little-endian here)
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                out.append(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6,
                                            raw))
    return out


def _get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, env, cwd, wheel): the wheel built from a copy of the checkout, installed into a
    fresh venv; ``env`` has no PYTHONPATH and ``cwd`` is outside the checkout."""
    import setuptools

    have = tuple(int(p) for p in setuptools.__version__.split(".")[:2])
    assert have >= (70, 1), (
        f"setuptools {setuptools.__version__} in {sys.prefix} cannot build a wheel offline "
        f"(70.1 or later is needed, pinned in requirements.txt): run `make venv`")
    tmp = tmp_path_factory.mktemp("install")
    src, dist, venv, cwd = tmp / "src", tmp / "dist", tmp / "venv", tmp / "elsewhere"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    cwd.mkdir()
    env = _clean_env(tmp / "home")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "-w", str(dist), str(src)],
                   check=True, cwd=cwd, env=env, timeout=180, capture_output=True)
    (wheel,) = dist.glob("quota_console-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", "--no-deps", "--no-index", str(wheel)],
                   check=True, cwd=cwd, env=env, timeout=180, capture_output=True)
    # Only now the third-party packages (pip above saw an empty venv).
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    deps = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")]
    Path(purelib, "deps-from-test-venv.pth").write_text("\n".join(deps) + "\n")
    return venv, env, cwd, wheel


def test_the_wheel_holds_the_dashboard_under_one_package_and_every_module(installed):
    _, _, _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"quota_console/app.py", "quota_console/.streamlit/config.toml"} <= names
    # Every module and data file of the runtime folders (a data file, e.g. a help text, must be
    # listed in [tool.setuptools.package-data]: include-package-data is off).
    expected = {("quota_console/" if p.parts[len(ROOT.parts)] in ("ui", "pages") else "")
                + p.relative_to(ROOT).as_posix()
                for d in RUNTIME for p in (ROOT / d).rglob("*") if p.is_file()
                and "__pycache__" not in p.parts and not p.name.startswith(".")
                and not p.name.endswith((".pyc", "~", ".swp", ".orig", ".rej"))}
    assert sorted(expected - names) == [], "a file of the checkout is missing from the wheel " \
        "(a new package folder goes into [tool.setuptools] packages in pyproject.toml, a data " \
        "file into [tool.setuptools.package-data])"
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"quota_core", "localkafka", "pipeline", "quota_console"}
    assert not any(n.endswith("secrets.toml") for n in names)
    entry_points = next(zipfile.Path(wheel, n).read_text() for n in names
                        if n.endswith(".dist-info/entry_points.txt"))
    assert "quota-console = quota_core.cli.console:main_entry" in entry_points
    assert "kafka-client-quotas = quota_core.cli.main:main_entry" in entry_points


def test_installed_console_serves_the_app_on_loopback_from_the_wheel(installed):
    venv, env, cwd, _ = installed
    bin_ = venv / "bin"
    # As `streamlit run` does: the app's folder first on sys.path; then every ui module.
    probe = subprocess.run(
        [str(bin_ / "python"), "-c",
         "import importlib, json, pkgutil, sys, quota_core, pipeline, localkafka\n"
         "from quota_core.cli.console import app_path\n"
         "sys.path.insert(0, str(app_path().parent))\n"
         "import ui\n"
         "mods = [importlib.import_module('ui.' + m.name) for m in pkgutil.iter_modules(ui.__path__)]\n"
         "print(json.dumps([quota_core.__file__, pipeline.__file__, localkafka.__file__, "
         "str(app_path())] + [m.__file__ for m in mods]))"],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
    assert probe.returncode == 0, probe.stderr
    paths = json.loads(probe.stdout)
    assert Path(paths[3]).parent.name == "quota_console" and len(paths) > 10
    for path in paths:
        assert Path(path).resolve().is_relative_to(venv.resolve()), path
    assert not str(ROOT) in probe.stdout

    # The first command, from the wheel: write a quota into a sandbox file.
    sandbox = cwd / "quotas.sqlite"
    env = dict(env, QUOTA_AUDIT_LOG=str(cwd / "audit.jsonl"))
    alter = subprocess.run([str(bin_ / "kafka-client-quotas"), "--sandbox", str(sandbox),
                            "--alter", "--user", "alice", "--add", "producer_byte_rate=1MiB"],
                           capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
    assert alter.returncode == 0, alter.stderr

    bad = subprocess.run([str(bin_ / "quota-console"), "--port", "99999"], capture_output=True,
                         text=True, cwd=cwd, env=env, timeout=60)
    assert bad.returncode == 2 and "--port" in bad.stderr, bad.stderr

    port = _free_port()
    log = cwd / "console.log"
    # The (hidden) script health check runs app.py and its default page in the server and
    # answers 503 when the script raises: the installed pages and ui import and run.
    run_env = dict(env, QUOTA_SANDBOX=str(sandbox), STREAMLIT_SERVER_SCRIPT_HEALTH_CHECK_ENABLED="true")
    with open(log, "w") as out:
        proc = subprocess.Popen([str(bin_ / "quota-console"), "--port", str(port)], cwd=cwd,
                                env=run_env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline, health = time.monotonic() + 40, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = _get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        assert health == (200, "ok"), (health, log.read_text())
        status, body = _get(f"http://127.0.0.1:{port}/")
        assert status == 200 and "<html" in body.lower()
        status, body = _get(f"http://127.0.0.1:{port}/_stcore/script-health-check", timeout=30)
        assert (status, body) == (200, "ok"), log.read_text()
        assert _listening(port) == ["127.0.0.1"], _listening(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, log.read_text()
    assert str(ROOT) not in log.read_text()


def test_without_pyspark_the_pipeline_says_how_to_install_it(monkeypatch):
    """PySpark is the [pipeline] extra: a session asked for without it is one clear error."""
    from pipeline.errors import PipelineError
    from pipeline.session import get_session

    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(PipelineError, match=r"quota-console\[pipeline\]"):
        get_session(with_kafka=False)


def test_a_taken_port_or_a_foreign_address_is_a_runtime_failure_in_one_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert console.main(["--port", str(port)]) == 1
        err = capsys.readouterr().err
        assert f"port {port} on 127.0.0.1 is in use" in err and len(err.splitlines()) == 1
    # 192.0.2.1 (TEST-NET-1, RFC 5737) is no address of this machine: Streamlit would raise.
    assert console.main(["--port", str(_free_port()), "--address", "192.0.2.1"]) == 1
    err = capsys.readouterr().err
    assert "cannot listen on 192.0.2.1" in err and "Traceback" not in err
