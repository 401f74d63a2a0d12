"""``kafka-client-quotas diff``: the drift between two clusters of the fleet.

Example::

    kafka-client-quotas diff --config fleet.toml --cluster staging --against prod

Every (entity, key) whose value differs, a key held on one side only included
(:func:`quota_core.drift.quota_drift`). Exit status as ``plan``'s (docs/interfaces.md): 0 the
two quota sets are equal, 2 they differ, 1 any error (wrong flags included, so 2 always means
"they differ"). The two clusters are read at once, each bounded by ``--timeout``; a cluster
that cannot be read is named on stderr (``cluster NAME: reason``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
from typing import Mapping, Sequence, TextIO

from ..backends.fleet_read import read_clusters
from ..backends.open import DEFAULT_TIMEOUT_S, NumberAction
from ..drift import DriftRow, quota_drift
from ..errors import UsageError
from ..keys import json_number
from .edge import one_line, run_command
from .output import FORMATS, _value, entity_text

__all__ = ["diff_main", "diff_parser", "drift_json", "format_drift"]

PROG = "kafka-client-quotas"
#: diff: equal 0, any error 1 (wrong flags too), different 2 (as plan's 0 / 1 / 2).
EQUAL, ERROR, DIFFERENT = 0, 1, 2


def diff_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"{PROG} diff", description="The drift between two clusters of the fleet: every "
        "(entity, key) whose value differs, a key held on one side only included. Exit 0: "
        "the two quota sets are equal; 2: they differ; 1: an error (wrong flags too).",
        epilog=f"Example: {PROG} diff --config fleet.toml --cluster staging --against prod")
    p.add_argument("--config", metavar="PATH",
                   help="the fleet's TOML file (default: $QUOTA_CONFIG)")
    p.add_argument("--cluster", metavar="NAME", required=True,
                   help="one side: a cluster of the fleet")
    p.add_argument("--against", metavar="NAME", required=True,
                   help="the other side: another cluster of the fleet")
    p.add_argument("--timeout", type=float, action=NumberAction, default=DEFAULT_TIMEOUT_S,
                   metavar="SECONDS",
                   help=f"give up on an unreachable cluster after this long (default "
                        f"{DEFAULT_TIMEOUT_S:g}); the two are read at once")
    p.add_argument("--output", choices=FORMATS, default="text",
                   help="text (names as Kafka prints them), plain (raw names, values with "
                        "units) or json")
    return p


def drift_json(rows: Sequence[DriftRow]) -> list[dict]:
    """The JSON of ``diff --output json``: ``{"entity", "key", "values": {A: v, B: v}}``,
    null on the side without the key."""
    return [{"entity": r.entity.as_dict(), "key": r.key,
             "values": {name: None if v is None else json_number(v)
                        for name, v in r.values.items()}} for r in rows]


def format_drift(name_a: str, name_b: str, rows: Sequence[DriftRow], fmt: str,
                 sizes: Mapping[str, int]) -> str:
    """The drift for people: each entity once, its keys below with both sides' values."""
    if not rows:
        n = sizes.get(name_a, 0)
        return (f"{name_a} and {name_b} hold the same quota set ({n:,} "
                f"entr{'y' if n == 1 else 'ies'}).\n")
    lines, last = [], None
    for r in rows:
        if r.entity != last:
            lines.append(entity_text(r.entity, fmt))
            last = r.entity
        sides = ", ".join(f"{name} {'(not set)' if v is None else _value(r.key, v, fmt)}"
                          for name, v in r.values.items())
        lines.append(f"    {r.key}: {sides}")
    entities = len({r.entity for r in rows})
    lines += ["", f"{name_a} and {name_b} differ: {len(rows):,} key"
                  f"{'' if len(rows) == 1 else 's'} of {entities:,} entit"
                  f"{'y' if entities == 1 else 'ies'}."]
    return "\n".join(lines) + "\n"


def diff_main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``diff --cluster A --against B``: 0 equal, 2 different, 1 an error."""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = diff_parser().parse_args(argv)
    except SystemExit as exc:  # --help: 0; a usage error: 1 here, so 2 means "they differ"
        return EQUAL if not exc.code else ERROR
    return run_command("diff", lambda: _diff(args, out, err), err,
                       one_line(f"{PROG} diff", error_for=(UsageError,)))


main = diff_main


def _diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from ..backends.fleet_config import load_fleet

    if not (0 < args.timeout <= 3600):
        raise UsageError(f"--timeout {args.timeout:g}: give a number of seconds between 0 and "
                         f"3600.")
    if args.cluster == args.against:
        raise UsageError(f"--cluster and --against both name '{args.cluster}': compare two "
                         f"different clusters.")
    fleet = load_fleet(args.config)
    a, b = fleet.select(args.cluster), fleet.select(args.against)
    sets = read_clusters([a, b], args.timeout)
    failed = [(name, s) for name, s in sets.items() if isinstance(s, BaseException)]
    for name, exc in failed:
        err.write(f"{PROG} diff: cluster {name}: {exc}\n")
    if failed:
        return ERROR
    rows = quota_drift(a.name, sets[a.name], b.name, sets[b.name])
    try:
        if args.output == "json":
            out.write(json.dumps(drift_json(rows), ensure_ascii=False, indent=2) + "\n")
        else:
            out.write(format_drift(a.name, b.name, rows, args.output,
                                   {n: len(s) for n, s in sets.items()}))
    except BrokenPipeError:
        return ERROR if rows else EQUAL
    return DIFFERENT if rows else EQUAL
