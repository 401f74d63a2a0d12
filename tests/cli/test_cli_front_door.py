"""The CLI's front door (issue 27, item 8): ``--help`` lists every subcommand with one line,
``--version`` prints the version and exits 0."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from quota_core.cli.main import SUBCOMMANDS, registered_subcommands, subcommand_lines
from quota_core.cli.version import package_version
from tests import ROOT
from tests.cli_steps import run

PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _listed(help_text: str) -> dict[str, str]:
    """The subcommand table at the end of --help: name -> its line."""
    table = help_text.split("subcommands (", 1)[1].split("\n\n", 1)[0]
    rows = [re.match(r"  (\S+)\s{2,}(\S.*)", line) for line in table.splitlines()[1:]]
    return {m[1]: m[2] for m in rows if m}


def test_help_lists_every_subcommand_with_one_line():
    code, out, err = run("--help")
    assert (code, err) == (0, "")
    listed = _listed(out)
    expected = {"configs", "plan", "apply", "lint", "collect", "serve-metrics", "analyze"}
    assert expected <= set(listed) == set(SUBCOMMANDS) | set(registered_subcommands())
    assert all(len(line) > 20 for line in listed.values()), listed
    assert listed["analyze"].startswith("analyse the usage history with Spark")
    assert dict(subcommand_lines()) == listed


def test_version_prints_the_version_and_exits_0():
    code, out, err = run("--version")
    assert (code, out, err) == (0, f"kafka-client-quotas {PYPROJECT_VERSION}\n", "")
    assert package_version() == PYPROJECT_VERSION


def test_version_falls_back_to_pyproject_when_not_installed(monkeypatch):
    import importlib.metadata as md

    def missing(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "version", missing)
    assert package_version() == PYPROJECT_VERSION


def test_version_through_the_real_process():
    done = subprocess.run([sys.executable, "-m", "quota_core", "--version"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (
        0, f"kafka-client-quotas {PYPROJECT_VERSION}", "")


def test_a_subcommand_after_the_flags_is_named_with_the_right_order():
    """`--config F diff ...` used to answer "one of --describe ... is required": a newcomer
    who typed the flags first learns nothing from that."""
    code, out, err = run("--config", "fleet.toml", "diff", "--cluster", "a", "--against", "b")
    assert (code, out) == (2, "")
    assert err == ("kafka-client-quotas: error: the subcommand comes first: kafka-client-quotas "
                   "diff --config fleet.toml --cluster a --against b\n")
    # a name that happens to be a subcommand's, with a mode given, is just a name
    code, out, err = run("--sandbox", "/nonexistent/x.db", "--describe", "--user", "plan")
    assert code == 2 and "subcommand comes first" not in err
