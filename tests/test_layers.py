"""The layers are a contract: import-linter checks pyproject.toml's contracts on the tree,
and each contract is shown to fail when an import that breaks it is added (in a copy)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache", *args], cwd=root,
                          env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True,
                          text=True, timeout=300)


def test_import_contracts_hold():
    run = _lint(ROOT, "--config", str(ROOT / "pyproject.toml"))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout, run.stdout


@pytest.mark.parametrize("path, line, contract", [
    ("quota_core/ladder.py", "import streamlit", "pure-core"),
    ("quota_core/units.py", "import sqlite3", "pure-core"),
    ("quota_core/resolution.py", "from quota_core.backends import sandbox", "pure-core"),
    ("ui/render.py", "import pages.browse", "pages-ui-core"),
    ("quota_core/ladder.py", "import pipeline.columns", "pipeline-uses-core"),
    ("quota_core/backends/sandbox.py", "from quota_core.changes import audit",
     "adapters-below-changes"),
])
def test_each_contract_fails_when_an_import_breaks_it(tmp_path, path, line, contract):
    for folder in ("quota_core", "ui", "pages", "pipeline"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    target = tmp_path / path
    body = target.read_text().split("\n")
    at = next(i for i, text in enumerate(body) if text.startswith(("from ", "import ")))
    target.write_text("\n".join(body[:at + 1] + [line] + body[at + 1:]))
    run = _lint(tmp_path, "--contract", contract)
    assert run.returncode != 0 and "BROKEN" in run.stdout, run.stdout + run.stderr


def test_the_core_names_no_pipeline_module_and_analyze_is_registered_by_the_pipeline():
    """import-linter sees imports, not a module loaded by its name: the core must not name one
    either. The pipeline adds ``analyze`` through the entry-point group the CLI reads."""
    import re

    from quota_core.cli.main import SUBCOMMANDS, registered_subcommands

    named = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "quota_core").rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"""["']pipeline[.:]""", line)]
    assert named == []
    assert "analyze" not in SUBCOMMANDS
    analyze = registered_subcommands()["analyze"]
    from pipeline.analyze import cli_main

    assert analyze.load() is cli_main
