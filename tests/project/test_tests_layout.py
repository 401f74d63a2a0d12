"""tests/ is grouped as the code is (issue 28, item 6): a test file lives in the folder of the
layer it tests, never at tests/ root, where only the shared helpers and fixtures stay."""
from __future__ import annotations

from tests import ROOT, TESTS


def test_no_test_file_sits_at_the_root_of_tests():
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert loose == [], (f"move {loose} into the folder of what they test (core, backends, "
                         f"telemetry, changes, cli, lint, pages, browser, pipeline, truth, "
                         f"project)")


def test_every_folder_of_tests_is_a_package():
    """``tests.<folder>.test_x`` is each module's name (rootdir import mode): a folder without
    ``__init__.py`` would import its files as top-level modules, and two files of one name in
    two folders would clash."""
    folders = {p.parent for p in TESTS.rglob("test_*.py")}
    assert folders and all((f / "__init__.py").is_file() for f in folders), sorted(
        str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file())
    assert (TESTS / "conftest.py").is_file()
