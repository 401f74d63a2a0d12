"""quota_core.cli.exits: CONTRACTS' exit table is the one mapping from error class to status."""
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
                               "lint", "configs"}
