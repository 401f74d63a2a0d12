"""The public surface of ``quota_core``: an explicit ``__all__``, and a light import."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests import ROOT



def _fresh(code: str) -> str:
    """Run ``code`` in a fresh interpreter (nothing imported by other tests) and return stdout."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_all_lists_exactly_the_public_names():
    # In a fresh process, so submodules imported by other tests do not show up as attributes.
    doc = json.loads(_fresh(
        "import json, types, quota_core as q\n"
        "print(json.dumps({'all': q.__all__, 'public': [n for n in dir(q) if not "
        "n.startswith('_') and not isinstance(getattr(q, n), types.ModuleType)]}))"))
    exported, public = doc["all"], doc["public"]
    assert len(exported) == len(set(exported)), "a name is listed twice in __all__"
    assert sorted(set(public) - set(exported)) == [], "public but missing from __all__"
    assert sorted(set(exported) - set(public)) == [], "in __all__ but not defined"


def test_every_name_in_all_exists_and_star_import_gives_exactly_them():
    import quota_core

    for name in quota_core.__all__:
        assert hasattr(quota_core, name), name
        assert not isinstance(getattr(quota_core, name), types.ModuleType), name
    namespace: dict = {}
    exec("from quota_core import *", namespace)
    assert sorted(n for n in namespace if n != "__builtins__") == sorted(quota_core.__all__)


@pytest.mark.parametrize("module", ["quota_core.cli.spec", "quota_core.cli.output",
                                    "quota_core.domain.serialization", "quota_core.backends.sandbox",
                                    "quota_core.domain.bulk", "quota_core.backends.base"])
def test_submodule_all_names_exist(module):
    import importlib

    mod = importlib.import_module(module)
    missing = [n for n in mod.__all__ if not hasattr(mod, n)]
    assert missing == []


HEAVY = ["streamlit", "pyspark", "kafka", "confluent_kafka", "numpy", "pandas", "yaml"]


def test_import_is_light():
    """Habit 1: no Streamlit, Spark or Kafka client at package level (nor numpy, pandas, yaml,
    which only bulk resolution and YAML export need, lazily)."""
    loaded = json.loads(_fresh(
        "import json, sys\nimport quota_core\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules or any("
        "k.startswith(m + '.') for k in sys.modules)]))"))
    assert loaded == []


def test_cli_and_sandbox_import_light_too():
    loaded = json.loads(_fresh(
        "import json, sys\nimport quota_core.cli.main, quota_core.backends.sandbox, quota_core.domain.bulk\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"))
    assert loaded == []


def test_the_error_tree_names_every_error_class_once_in_all():
    """quota_core.errors: one ``__all__`` listing each class once, and the tree in its
    docstring drawing each class under its real base."""
    import inspect
    import re

    from quota_core import errors

    classes = {n: c for n, c in vars(errors).items()
               if inspect.isclass(c) and c.__module__ == errors.__name__}
    assert sorted(errors.__all__) == sorted(classes)
    assert len(errors.__all__) == len(set(errors.__all__))
    source = inspect.getsource(errors)
    assert source.count("__all__ =") == 1 and "__all__ +=" not in source
    doc = errors.__doc__
    drawn = re.findall(r"^(.*?)(?:├── |└── )(\w+)", doc, re.M)
    parents: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = [(-1, "QuotaError")]
    for indent, name in drawn:
        depth = len(indent)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents.setdefault(name, set()).add(stack[-1][1])
        stack.append((depth, name))
    for name, cls in classes.items():
        if name in ("QuotaError", "Problem"):
            continue
        assert name in parents, f"{name} is not drawn in the errors tree"
        assert parents[name] == {b.__name__ for b in cls.__bases__}, name


def test_the_backends_use_only_public_names_of_the_core():
    """A backend imports what the core exports, never a private helper (issue 17: the sandbox
    imported ``validation._java_entity``)."""
    import ast
    import pathlib

    import quota_core.backends as backends

    private = []
    for path in sorted(pathlib.Path(backends.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level >= 2:  # from ..module import
                private += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                            if a.name.startswith("_") and not a.name.startswith("__")]
    assert private == []
