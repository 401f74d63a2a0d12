"""The layers are a contract: import-linter checks pyproject.toml's contracts on the tree,
and each contract is shown to fail when an import that breaks it is added (in a copy)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import ROOT

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
    ("quota_core/domain/units.py", "from quota_core.throttling import live", "core-packages"),
    ("quota_core/throttling/throttle.py", "from quota_core.analysis import history",
     "core-packages"),
    ("quota_core/errors.py", "from quota_core.domain import keys", "core-packages"),
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
    raise AssertionError(f"tests/project/test_layers.py does not know contract type {kind!r}: teach "
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
    """A new module of quota_core (or a new subpackage) that no contract names has no
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


def _without(contract: dict, name: str) -> dict:
    """``contract`` with ``name`` (a module, or a layer's short name) taken out."""
    if contract["type"] == "forbidden":
        return dict(contract, source_modules=[m for m in contract["source_modules"]
                                              if m != name])
    return dict(contract, layers=[" | ".join(n.strip() for n in layer.split("|")
                                             if n.strip() != name)
                                  for layer in contract["layers"]])


@pytest.mark.parametrize("contracts, names, module", [
    (("pure-core", "core-packages"), ("quota_core.analysis", "analysis"),
     "quota_core.analysis.history_rollups"),
    (("pure-core", "core-packages"), ("quota_core.errors", "errors"), "quota_core.errors"),
    (("adapters-below-changes",), ("lint",), "quota_core.lint.history_files"),
    (("pipeline-below-pages",), ("pipeline",), "pipeline.columns"),
])
def test_the_coverage_check_fails_when_a_contract_loses_a_module(contracts, names, module):
    """What the check said before: history_rollups, rate_sketch and lint/history_files were in
    no contract, lint in no layers contract, and nothing constrained the pipeline's imports.
    A package of the pure core is placed twice (pure-core: what it may import from outside;
    core-packages: its layer inside): taken out of both, its modules are in no contract."""
    config = _config()["contracts"]
    modules = {"quota_core", "quota_core.errors", "quota_core.analysis",
               "quota_core.analysis.history_rollups", "quota_core.lint",
               "quota_core.lint.history_files", "quota_core.lint.model", "pipeline",
               "pipeline.columns"}
    assert unplaced(modules, config) == []
    changed = []
    for contract in config:
        if contract["id"] in contracts:
            for name in names:
                contract = _without(contract, name)
        changed.append(contract)
    assert module in unplaced(modules, changed)


def test_every_python_file_of_quota_core_is_a_module_the_check_sees():
    """A .py file in a folder without ``__init__.py`` is no module of the graph, so the coverage
    check above would never see it: every file under quota_core/ must be one."""
    import grimp

    graph = grimp.build_graph("quota_core", cache_dir=None)
    files = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
             for p in (ROOT / "quota_core").rglob("*.py")}
    assert files - set(graph.modules) == set()


def test_no_module_sits_flat_beside_the_packages():
    """The pure core is packages now: a new module goes into domain, throttling, analysis or
    planning (or a family), not back into the flat quota_core/ folder."""
    flat = sorted(p.name for p in (ROOT / "quota_core").glob("*.py"))
    assert flat == ["__init__.py", "__main__.py", "errors.py"]


# --- pages, ui and pipeline import the core through its faces ---------------------------------
#: The pure core's packages: each has a public face, ``_FACE`` (submodule -> its public names)
#: and ``__all__``, names loaded on first use.
FACED = ("quota_core.domain", "quota_core.throttling", "quota_core.analysis",
         "quota_core.planning")
#: The one error tree is a module every layer imports as it is (its public names are its face).
ERROR_TREE = "quota_core.errors"
#: Families whose submodules the outer layers still import directly (no face yet).
WITHOUT_FACE = ("quota_core.backends", "quota_core.telemetry", "quota_core.changes",
                "quota_core.cli", "quota_core.lint")
OUTER = ("ui", "pages", "pipeline")


def outer_imports_past_a_face(root: Path) -> list[str]:
    """``file:line: what`` for each import in ui/, pages/, pipeline/ and app.py that takes a
    module of the pure core, or a name its face does not export."""
    import ast
    import importlib

    faces = {"quota_core": set(importlib.import_module("quota_core").__all__)}
    faces.update({p: set(importlib.import_module(p).__all__) for p in FACED})
    faces[ERROR_TREE] = {n for n in vars(importlib.import_module(ERROR_TREE))
                         if not n.startswith("_")}
    files = [p for d in OUTER for p in sorted((root / d).rglob("*.py"))] + [root / "app.py"]
    wrong = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                wrong += [f"{where}: import {a.name}" for a in node.names
                          if a.name.startswith("quota_core.")
                          and not a.name.startswith(WITHOUT_FACE)]
            elif isinstance(node, ast.ImportFrom) and not node.level and (
                    node.module or "").startswith("quota_core"):
                if node.module.startswith(WITHOUT_FACE):
                    continue
                if node.module not in faces:
                    wrong.append(f"{where}: from {node.module} (a submodule, not a face)")
                    continue
                wrong += [f"{where}: {a.name} is not in {node.module}.__all__"
                          for a in node.names if a.name not in faces[node.module]]
    return wrong


def test_pages_ui_and_pipeline_import_the_core_through_its_faces():
    wrong = outer_imports_past_a_face(ROOT)
    assert wrong == [], ("import these from the package (quota_core.domain, .throttling, "
                         ".analysis, .planning), adding the name to its _FACE if it is new "
                         "(python /work/regroup/regroup.py . does both): " + "; ".join(wrong))


def test_the_face_check_fails_on_a_submodule_import(tmp_path):
    for folder in (*OUTER, "quota_core"):
        shutil.copytree(ROOT / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "app.py").write_text("")
    with (tmp_path / "pages" / "browse.py").open("a") as page:
        page.write("\nfrom quota_core.domain.entities import Entity\n"
                   "from quota_core.throttling import live\n")
    assert [w.split(": ", 1)[1] for w in outer_imports_past_a_face(tmp_path)] == [
        "from quota_core.domain.entities (a submodule, not a face)",
        "live is not in quota_core.throttling.__all__"]


@pytest.mark.parametrize("package", FACED)
def test_each_face_is_one_table_of_names_that_load(package):
    import importlib

    face = importlib.import_module(package)
    table = face._FACE
    names = [n for ns in table.values() for n in ns]
    assert face.__all__ == sorted(names) and len(set(names)) == len(names), "one home a name"
    folder = Path(face.__file__).parent
    for module, exported in table.items():
        assert (folder / f"{module}.py").is_file(), (package, module)
        home = importlib.import_module(f"{package}.{module}")
        for name in exported:
            # A name equal to a submodule's would be shadowed by the module once it loads.
            assert not (folder / f"{name}.py").exists(), (package, name)
            assert getattr(face, name) is getattr(home, name), (package, name)


def test_a_face_loads_only_what_is_asked_for():
    """The faces load a submodule on first use: the CLI, importing one submodule, pays for no
    other (quota_core/__init__ loads the domain's basics itself)."""
    probe = ("import sys, quota_core.analysis.quota_sizing, quota_core.planning\n"
             "print(sorted(m for m in sys.modules if m.startswith(('quota_core.', 'pandas'))))")
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    loaded = set(eval(run.stdout))
    assert not loaded & {"quota_core.analysis.history", "quota_core.analysis.history_rollups",
                         "quota_core.planning.plan", "quota_core.planning.impact", "pandas"}
