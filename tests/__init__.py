"""The tests, in folders as the code is grouped (core, backends, telemetry, changes, cli, lint,
pages, browser, pipeline, truth, project). Helpers and session fixtures stay here, at the root,
importable from every folder as ``tests.<module>``."""
from pathlib import Path

#: The checkout, and this folder: the one place a test finds the tree from.
ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
