"""quota_core.cli.exits: the exit table of docs/interfaces.md is the one mapping from error class to status."""
import pytest

from quota_core.cli.exits import EXIT_CODES, exit_code
from quota_core.errors import (AlterationError, ConcurrentChange, ConnectionFailed, OutcomeUnknown,
                               ParseError, UsageError, ValidationError)

RUNTIME = ["main", "apply", "collect", "analyze", "serve-metrics"]


@pytest.mark.parametrize("command", RUNTIME)
@pytest.mark.parametrize("exc, status", [
    (UsageError("--alter needs --add"), 2), (ParseError("bad --names"), 2),
    (OutcomeUnknown("sent, no answer"), 3), (ConnectionFailed("no broker"), 1),
    (ConcurrentChange("changed since"), 1), (AlterationError("refused"), 1),
    (ValidationError("bad value"), 1),
])
def test_runtime_commands_share_one_row(command, exc, status):
    assert exit_code(command, exc) == status


@pytest.mark.parametrize("command", ["plan", "lint", "configs"])
@pytest.mark.parametrize("exc", [UsageError("x"), ParseError("x"), OutcomeUnknown("x"),
                                 ConnectionFailed("x"), ValueError("x")])
def test_result_commands_exit_1_for_every_error(command, exc):
    assert exit_code(command, exc) == 1


def test_every_subcommand_of_the_contract_has_a_row():
    assert set(EXIT_CODES) == {"main", "apply", "collect", "analyze", "serve-metrics", "plan",
                               "lint", "configs", "telemetry"}


# -- every subcommand's real exit status comes from the table ---------------------------------
import io  # noqa: E402

from quota_core.cli.main import main  # noqa: E402
from quota_core.errors import UnreadableFile  # noqa: E402


def _cases(tmp):
    sandbox, missing = tmp / "q.db", str(tmp / "missing")
    main(["--init", "--sandbox", str(sandbox)], io.StringIO(), io.StringIO())
    desired = tmp / "desired.json"
    desired.write_text("[]", encoding="utf-8")
    notjson = tmp / "plan.json"
    notjson.write_text("{not json", encoding="utf-8")
    notdb = tmp / "not.db"
    notdb.write_text("hello", encoding="utf-8")
    sb = ["--sandbox", str(sandbox)]
    return {
        "main usage": ("main", ["--describe", "--sandbox", missing], UsageError),
        "main parse": ("main", ["--import", missing, *sb], ParseError),
        "main runtime": ("main", ["--describe", "--sandbox", str(notdb)], ConnectionFailed),
        "plan usage": ("plan", ["plan", str(desired)], UsageError),
        "plan parse": ("plan", ["plan", missing, *sb], ParseError),
        "apply usage": ("apply", ["apply", str(notjson)], UsageError),
        "apply parse": ("apply", ["apply", str(notjson), *sb], ParseError),
        "apply runtime": ("apply", ["apply", str(notjson), "--sandbox", str(notdb)],
                          ParseError),  # the plan file is read first: a usage error wins
        "plan runtime": ("plan", ["plan", str(desired), "--sandbox", str(notdb)],
                         ConnectionFailed),
        "collect parse": ("collect", ["collect", "--metrics", "http://127.0.0.1:9/m", "--to",
                                      str(tmp / "out"), *sb, "--every", "0"], ParseError),
        "configs unreadable file": ("configs", [
            "configs", "--alter", "--entity-type", "users", "--entity-name", "u",
            "--add-config-file", missing, *sb], UnreadableFile),
        "configs missing flag": ("configs", ["configs", "--alter", *sb], Exception),
    }


CASES = ["main usage", "main parse", "main runtime", "plan usage", "plan parse",
         "plan runtime", "apply usage", "apply parse", "apply runtime", "collect parse",
         "configs unreadable file", "configs missing flag"]


@pytest.mark.parametrize("case", CASES)
def test_each_subcommand_exits_as_the_table_says(case, tmp_path, monkeypatch):
    """Each subcommand, run for real on an error of a known class, exits with the status
    the table gives that class for that subcommand."""
    monkeypatch.delenv("QUOTA_PLAN_KEY", raising=False)
    cases = _cases(tmp_path)
    command, argv, cls = cases[case]
    err = io.StringIO()
    status = main(argv, io.StringIO(), err)
    assert status == exit_code(command, cls("x")), err.getvalue()
    assert "Traceback" not in err.getvalue()
