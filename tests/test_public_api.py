"""The public surface of ``quota_core``: an explicit ``__all__``, and a light import."""
from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("module", ["quota_core.spec", "quota_core.output",
                                    "quota_core.serialization", "quota_core.sandbox",
                                    "quota_core.bulk", "quota_core.backend"])
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
        "import json, sys\nimport quota_core.cli, quota_core.sandbox, quota_core.bulk\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"))
    assert loaded == []
