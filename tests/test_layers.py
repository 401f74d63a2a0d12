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
    ("quota_core/domain/ladder.py", "import streamlit", "pure-core"),
    ("quota_core/domain/units.py", "import sqlite3", "pure-core"),
    ("quota_core/domain/resolution.py", "from quota_core.backends import sandbox", "pure-core"),
    ("ui/render.py", "import pages.browse", "pages-ui-core"),
    ("quota_core/domain/ladder.py", "import pipeline.columns", "pipeline-uses-core"),
    ("quota_core/backends/sandbox.py", "from quota_core.changes import audit",
     "adapters-below-changes"),
    ("quota_core/telemetry/schema.py", "from quota_core.lint import rules",
     "adapters-below-changes"),
    ("pipeline/columns.py", "import streamlit", "pipeline-below-pages"),
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


# --- every module belongs to a contract -------------------------------------------------------
#: Root packages whose modules are layered among themselves: a contract must place each module
#: below the package (naming ``quota_core`` as a whole, as pages-ui-core does, says nothing
#: about what ``quota_core.analysis.history_rollups`` may import).
LAYERED_INSIDE = ("quota_core",)


def _config() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"]


def placed_by(contract: dict) -> set[str]:
    """The modules (with their descendants) a contract places, i.e. constrains what they
    import: a forbidden contract's source modules, a layers contract's layers (in each
    container), an independence contract's modules. Its forbidden modules are not placed by
    it (being forbidden to others says nothing of what they import)."""
    kind = contract["type"]
    if kind == "forbidden":
        return set(contract["source_modules"])
    if kind == "independence":
        return set(contract["modules"])
    if kind == "layers":
        import re

        names = {n.strip() for layer in contract["layers"] for n in re.split(r"[|:]", layer)}
        containers = contract.get("containers") or [""]
        return {f"{c}.{n}" if c else n for c in containers for n in names if n}
    raise AssertionError(f"tests/test_layers.py does not know contract type {kind!r}: teach "
                         f"placed_by what it places")


def unplaced(modules: set[str], contracts: list[dict]) -> list[str]:
    """The modules no contract places: none names the module or an ancestor (for a module
    inside a :data:`LAYERED_INSIDE` package, an ancestor below the package)."""
    named = set().union(*(placed_by(c) for c in contracts))
    missing = []
    for module in sorted(modules):
        parts = module.split(".")
        floor = 2 if parts[0] in LAYERED_INSIDE and len(parts) > 1 else 1
        if not any(".".join(parts[:i]) in named for i in range(floor, len(parts) + 1)):
            missing.append(module)
    return missing


def test_every_module_belongs_to_a_contract():
    """A new flat module of quota_core (or a new subpackage) that no contract names has no
    layer: add it to pure-core, or to a subpackage that a layers contract places."""
    import grimp

    config = _config()
    graph = grimp.build_graph(*config["root_packages"], cache_dir=None)
    missing = unplaced(set(graph.modules), config["contracts"])
    assert missing == [], (f"in no import-linter contract of pyproject.toml: {missing}; add "
                           f"each to the pure-core list or a layers contract")
    # Every contract names only modules that exist (a renamed module leaves no stale name).
    for contract in config["contracts"]:
        for name in placed_by(contract):
            assert name in graph.modules, (contract["id"], name)


@pytest.mark.parametrize("contract, name, module", [
    ("pure-core", "quota_core.analysis.history_rollups", "quota_core.analysis.history_rollups"),
    ("adapters-below-changes", "lint", "quota_core.lint.history_files"),
    ("pipeline-below-pages", "pipeline", "pipeline.columns"),
])
def test_the_coverage_check_fails_when_a_contract_loses_a_module(contract, name, module):
    """What the check said before: history_rollups, rate_sketch and lint/history_files were in
    no contract, lint in no layers contract, and nothing constrained the pipeline's imports."""
    contracts = _config()["contracts"]
    modules = {"quota_core", "quota_core.analysis.history_rollups", "quota_core.lint",
               "quota_core.lint.history_files", "quota_core.lint.model", "pipeline",
               "pipeline.columns"}
    assert unplaced(modules, contracts) == []
    without = [c for c in contracts if c["id"] != contract]
    (changed,) = [c for c in contracts if c["id"] == contract]
    if changed["type"] == "forbidden":
        changed = dict(changed, source_modules=[m for m in changed["source_modules"]
                                                if m != name])
    else:
        changed = dict(changed, layers=[" | ".join(n.strip() for n in layer.split("|")
                                                   if n.strip() != name)
                                        for layer in changed["layers"]])
    assert module in unplaced(modules, without + [changed])
