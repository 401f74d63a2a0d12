"""The one mapping from error class to exit status, for every subcommand.

The exit code table of docs/interfaces.md, in code (as httpx keeps ``HTTPCORE_EXC_MAP``):
every command ends an error of the tree at its one edge,
:func:`quota_core.cli.edge.run_command`, which prints the message and returns
``exit_code(command, exc)``.

* main command, ``apply``, ``collect``, ``analyze``, ``serve-metrics``, ``telemetry``: 0 done, 1 a runtime
  failure, 2 a usage error, 3 outcome unknown (sent, not confirmed);
* ``plan``: 0 no changes, 1 any error (usage errors included), 2 changes pending;
* ``lint``: 0 no finding at or above ``--fail-on``, 1 any error, 2 findings;
* ``configs`` (the kafka-configs.sh dialect): as ConfigCommand, 1 for every error, an
  unreadable ``--add-config-file`` or ``--command-config`` included (ConfigCommand prints a
  stack trace and exits 1; docs/interfaces.md), and 1 for ``--help`` as
  ``kafka-configs.sh --help``.

tests/test_docs.py holds every exit code table of the docs equal to :data:`EXIT_CODES`.

``plan`` and ``lint`` keep 2 for their *result*, so a CI job never reads a typo as "changes
pending". A status that is a result (plan's 2, lint's 2) is returned by the command itself.
"""
from __future__ import annotations

from ..errors import OutcomeUnknown, ParseError, QuotaError, UsageError

__all__ = ["EXIT_CODES", "exit_code", "FAILURE", "USAGE", "OUTCOME_UNKNOWN"]

FAILURE, USAGE, OUTCOME_UNKNOWN = 1, 2, 3

_RUNTIME = ((UsageError, USAGE), (ParseError, USAGE), (OutcomeUnknown, OUTCOME_UNKNOWN),
            (QuotaError, FAILURE))
_ANY_ERROR = ((BaseException, FAILURE),)
_CONFIGS = ((BaseException, FAILURE),)

#: subcommand -> (error class, exit status), the first class the error is an instance of wins.
EXIT_CODES: dict[str, tuple[tuple[type[BaseException], int], ...]] = {
    "main": _RUNTIME, "apply": _RUNTIME, "collect": _RUNTIME, "analyze": _RUNTIME,
    "serve-metrics": _RUNTIME, "telemetry": _RUNTIME,
    "plan": _ANY_ERROR, "lint": _ANY_ERROR, "configs": _CONFIGS,
}


def exit_code(command: str, exc: BaseException) -> int:
    """The exit status of ``command`` failing with ``exc``."""
    for cls, status in EXIT_CODES[command]:
        if isinstance(exc, cls):
            return status
    return FAILURE
