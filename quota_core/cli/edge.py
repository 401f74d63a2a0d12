"""The one edge of every subcommand: where a :class:`~quota_core.errors.QuotaError` stops.

Each subcommand (the main command, ``plan``, ``apply``, ``lint``, ``collect``,
``serve-metrics``, ``configs``, ``quota-console`` and the pipeline's ``analyze``) parses its
flags, then hands the rest of its work to :func:`run_command`. An error of the tree that
escapes it is caught there, once: its words go to stderr and its exit status comes from the
one table, :data:`quota_core.cli.exits.EXIT_CODES`. What a command says is its own (its prefix,
which classes read ``error:``); how it ends is not.

A status that is a *result* (plan's 2 "changes pending", lint's 2 "findings", apply's refusal
on drift) is returned by the command itself, not raised.
"""
from __future__ import annotations

from typing import Callable, TextIO

from quota_core.errors import AlterationError, ParseError, QuotaError, UsageError
from quota_core.cli.exits import exit_code

__all__ = ["run_command", "one_line", "Say"]

#: The words a command prints for an error of the tree (the whole text, newline included).
Say = Callable[[QuotaError], str]


def one_line(prefix: str | None, error_for: tuple[type[BaseException], ...] = (
        UsageError, ParseError), by_problem: bool = False) -> Say:
    """The usual words: ``PREFIX: error: MESSAGE`` for an error of ``error_for`` (an input the
    user gave, by default), ``PREFIX: MESSAGE`` for any other; no ``PREFIX: `` when ``prefix``
    is None. ``by_problem``: an :class:`~quota_core.errors.AlterationError` says one such line
    per problem it carries."""
    head = f"{prefix}: " if prefix else ""

    def say(exc: QuotaError) -> str:
        if isinstance(exc, error_for):
            return f"{head}error: {exc}\n"
        if by_problem and isinstance(exc, AlterationError):
            return "".join(f"{head}{getattr(p, 'message', p)}\n" for p in exc.problems or [exc])
        return f"{head}{exc}\n"

    return say


def run_command(command: str, body: Callable[[], int], err: TextIO, say: Say) -> int:
    """Run ``body`` (a subcommand's work after its flags are read) and return its status; a
    :class:`~quota_core.errors.QuotaError` it raises is written to ``err`` as ``say`` words
    it, and ends the command with ``EXIT_CODES[command]``'s status for its class."""
    try:
        return body()
    except QuotaError as exc:
        err.write(say(exc))
        return exit_code(command, exc)
