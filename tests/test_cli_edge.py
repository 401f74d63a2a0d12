"""One CLI edge: every subcommand ends an error of the tree in quota_core.cli.edge.run_command,
which prints the command's words and exits with EXIT_CODES' status; no module catches a
QuotaError on its own to end a command (issue 28: ten edges in seven modules before)."""
from __future__ import annotations

import ast
import inspect
import io
from pathlib import Path

import pytest

import quota_core.errors as errors
from quota_core.cli.edge import one_line, run_command
from quota_core.errors import (AlterationError, ConnectionFailed, OutcomeUnknown, ParseError,
                               Problem, QuotaError, UsageError)

ROOT = Path(__file__).resolve().parents[1]
#: Every module that holds a subcommand's main: the CLI's, and the pipeline's analyze.
CLI_MODULES = sorted((ROOT / "quota_core" / "cli").glob("*.py")) + [ROOT / "pipeline" /
                                                                     "analyze.py"]
#: The modules whose main hands its work to run_command.
COMMANDS = ["main", "plan", "diff", "lint", "collect", "serve_metrics", "configs_compat", "console"]


def _tree_classes() -> set[str]:
    """The names of QuotaError and every class below it (the pipeline's included)."""
    import pipeline.errors
    import quota_core.telemetry.folder_lock

    names = set()
    for module in (errors, pipeline.errors, quota_core.telemetry.folder_lock):
        names |= {name for name, obj in vars(module).items()
                  if inspect.isclass(obj) and issubclass(obj, QuotaError)}
    return names


def _handled(node: ast.ExceptHandler) -> set[str]:
    kinds = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
    return {k.id if isinstance(k, ast.Name) else getattr(k, "attr", "") for k in kinds if k}


def test_no_module_ends_a_command_on_a_quota_error_but_the_edge():
    """An ``except`` naming a class of the tree must raise again (a translation, as configs'
    unreadable --add-config-file): only run_command turns one into an exit status."""
    tree = _tree_classes()
    edges = []
    for path in CLI_MODULES:
        if path.name == "edge.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ExceptHandler) and _handled(node) & tree and not any(
                    isinstance(n, ast.Raise) for n in ast.walk(node)):
                edges.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert edges == []


@pytest.mark.parametrize("module", COMMANDS)
def test_each_subcommand_hands_its_work_to_the_edge(module):
    text = (ROOT / "quota_core" / "cli" / f"{module}.py").read_text(encoding="utf-8")
    assert "run_command(" in text


def test_analyze_hands_its_work_to_the_edge_and_returns_no_status_by_hand():
    text = (ROOT / "pipeline" / "analyze.py").read_text(encoding="utf-8")
    assert 'run_command("analyze"' in text
    assert "return 2" not in text


@pytest.mark.parametrize("command, exc, status, words", [
    ("main", UsageError("--timeout 0: give seconds"), 2, "P: error: --timeout 0: give seconds\n"),
    ("main", ParseError("bad --names"), 2, "P: error: bad --names\n"),
    ("main", ConnectionFailed("no broker"), 1, "P: no broker\n"),
    ("main", OutcomeUnknown("sent, no answer"), 3, "P: sent, no answer\n"),
    ("plan", ParseError("bad file"), 1, "P: error: bad file\n"),
    ("lint", UsageError("x"), 1, "P: error: x\n"),
    ("analyze", ParseError("bad --usage"), 2, "P: error: bad --usage\n"),
    ("analyze", ConnectionFailed("busy"), 1, "P: busy\n"),
])
def test_run_command_says_the_error_and_exits_as_the_table_says(command, exc, status, words):
    err = io.StringIO()

    def body() -> int:
        raise exc

    assert run_command(command, body, err, one_line("P")) == status
    assert err.getvalue() == words


def test_run_command_returns_the_body_status_and_lets_other_exceptions_through():
    err = io.StringIO()
    assert run_command("plan", lambda: 2, err, one_line("P")) == 2 and err.getvalue() == ""
    with pytest.raises(KeyError):
        run_command("main", lambda: {}["x"], err, one_line("P"))


def test_the_words_of_one_line():
    problems = AlterationError("2 problems", problems=[Problem("first"),
                                                      Problem("second")])
    assert one_line("P", by_problem=True)(problems) == "P: first\nP: second\n"
    assert one_line("P")(problems) == "P: 2 problems\n"
    assert one_line(None, error_for=(QuotaError,))(ConnectionFailed("x")) == "error: x\n"
    assert one_line("quota-console", ())(UsageError("--port x")) == "quota-console: --port x\n"
