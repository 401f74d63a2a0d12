"""``--all-clusters``: one read command on every cluster of the fleet at once (issue 29).

Each cluster runs the ordinary single-cluster command (its flags copied, ``--cluster NAME``
set) in a thread of its own, writing to buffers, so a slow or dead cluster holds no other
back; each is bounded by ``--timeout`` as a single run is. Then, in the fleet file's order:

* JSON: one list. Each cluster's list is spliced in with ``"cluster": NAME`` first in every
  row (a text splice, no re-encoding: 200,000 rows stay cheap); an object (``--resolve``)
  becomes one object per cluster with ``"cluster"`` first.
* text: grouped, each cluster under a ``--- cluster NAME ---`` line.
* stderr: each line of a cluster says ``cluster NAME:``. A cluster that cannot be read (it
  failed and printed nothing) is named with the reason; its rows are absent, and the command
  exits 1 once the others are printed.

A usage error that every cluster gives alike is the command line's own: said once, exit 2.
"""
from __future__ import annotations

import argparse
import io
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence, TextIO

from quota_core.domain.fleet import ClusterConfig, Fleet
from quota_core.errors import UsageError

__all__ = ["ClusterRun", "run_each", "refuse_one_cluster_flags", "merge_json", "merge_text",
           "finish", "cluster_args",
           "MAX_WORKERS", "SEPARATOR"]

#: At most this many clusters are read at the same time.
MAX_WORKERS = 32
#: The line above each cluster's text output.
SEPARATOR = "--- cluster {name} ---"


@dataclass
class ClusterRun:
    """What one cluster's run printed and its exit status."""

    cluster: ClusterConfig
    status: int
    out: str
    err: str

    @property
    def name(self) -> str:
        return self.cluster.name


def cluster_args(args: argparse.Namespace, fleet: Fleet, cluster: ClusterConfig
                 ) -> argparse.Namespace:
    """A copy of the parsed flags that names one cluster of ``fleet``."""
    copy = argparse.Namespace(**vars(args))
    copy.all_clusters = False
    copy.cluster = cluster.name
    copy._fleet = fleet
    copy.fleet_cluster = None
    return copy


def refuse_one_cluster_flags(args: argparse.Namespace, verb: str,
                             extra: Sequence[tuple[str, object]] = (), hint: str = "") -> None:
    """With ``--all-clusters``: a usage error for the first flag that names one cluster's
    store or metrics (each cluster has its own, in the fleet file). ``verb`` says what the
    command does to every cluster ("reads"), ``extra`` adds the command's own such flags,
    ``hint`` ends the sentence's parenthesis."""
    for flag, value in (("--cluster", args.cluster), ("--bootstrap-server", args.bootstrap_server),
                        ("--sandbox", args.sandbox), ("--command-config", args.command_config),
                        ("--metrics", args.metrics),
                        ("--metrics-template", args.metrics_template), *extra):
        if value:
            raise UsageError(f"--all-clusters {verb} every cluster of the fleet file, each with "
                             f"its own store and metrics: drop {flag} (or name one cluster "
                             f"with --cluster NAME{hint}).")


def run_each(fleet: Fleet, run_one: Callable[[ClusterConfig, TextIO, TextIO], int],
             prog: str) -> list[ClusterRun]:
    """``run_one(cluster, out, err)`` for every cluster, concurrently; the runs in the
    fleet's order. An exception outside the error tree is that cluster's failure (one line,
    the others still run)."""
    clusters = list(fleet)

    def one(cluster: ClusterConfig) -> ClusterRun:
        out, err = io.StringIO(), io.StringIO()
        try:
            status = run_one(cluster, out, err)
        except Exception as exc:  # noqa: BLE001 - one cluster's bug must not sink the rest
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            err.write(f"{prog}: internal error ({detail}). This is a bug: please report it "
                      f"with the command line.\n")
            status = 1
        return ClusterRun(cluster, status, out.getvalue(), err.getvalue())

    if not clusters:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(clusters)),
                            thread_name_prefix="cluster") as pool:
        return list(pool.map(one, clusters))


def _read(run: ClusterRun, ok: Sequence[int]) -> bool:
    """Whether the cluster answered: a status the command calls done, or rows printed
    beside a partial failure (an unreadable metrics endpoint)."""
    return run.status in ok or bool(run.out.strip())


def _tag_list(text: str, name: str) -> str | None:
    """The rows of a JSON list printed with a 2-space indent, each with ``"cluster"``
    first, as the list's body (no brackets); "" for an empty list; None when ``text`` is
    not such a list. Only a top-level element opens with a line that is exactly ``  {``:
    inside strings a newline is escaped, and nested objects sit deeper."""
    body = text.strip()
    if body == "[]":
        return ""
    if not (body.startswith("[\n  {\n") and body.endswith("\n  }\n]")):
        return None
    tag = f'\n  {{\n    "cluster": {json.dumps(name, ensure_ascii=False)},\n'
    return body[1:-2].replace("\n  {\n", tag)[1:]


def merge_json(runs: Sequence[ClusterRun], ok: Sequence[int]) -> str:
    """The answered clusters' JSON as one list, ``"cluster": NAME`` on every row (an object
    per cluster when a cluster's answer is one object)."""
    bodies: list[str] = []
    for run in runs:
        if not _read(run, ok) or not run.out.strip():
            continue
        body = _tag_list(run.out, run.name)
        if body is None:
            try:
                doc = json.loads(run.out)
            except ValueError:
                continue
            docs = doc if isinstance(doc, list) else [doc]
            tagged = [{"cluster": run.name, **d} if isinstance(d, dict)
                      else {"cluster": run.name, "value": d} for d in docs]
            body = json.dumps(tagged, ensure_ascii=False, indent=2)[2:-2] if tagged else ""
        if body:
            bodies.append(body)
    return "[\n" + ",\n".join(bodies) + "\n]\n" if bodies else "[]\n"


def merge_text(runs: Sequence[ClusterRun], ok: Sequence[int]) -> str:
    """The answered clusters' text, each under its :data:`SEPARATOR` line."""
    blocks = []
    for run in runs:
        if _read(run, ok):
            text = run.out if run.out.endswith("\n") or not run.out else run.out + "\n"
            blocks.append(SEPARATOR.format(name=run.name) + "\n" + text)
    return "\n".join(blocks)


def _err_lines(run: ClusterRun, prog: str) -> str:
    head = f"{prog}: "
    lines = []
    for line in run.err.splitlines():
        if line.startswith(head):
            lines.append(f"{head}cluster {run.name}: {line[len(head):]}\n")
        else:
            lines.append(f"cluster {run.name}: {line}\n")
    if not _read(run, ()) and run.status != 0 and not run.err.strip():
        lines.append(f"{head}cluster {run.name}: could not be read (exit {run.status}).\n")
    return "".join(lines)


def finish(runs: Sequence[ClusterRun], fmt: str, out: TextIO, err: TextIO, prog: str, *,
           ok: Sequence[int] = (0,), result: Callable[[Sequence[int]], int] | None = None,
           usage: int | None = 2) -> int:
    """Print the merged answer and every cluster's stderr lines; the exit status: ``usage``
    with the one message when every cluster gave the same usage error, 1 when a cluster
    failed, else ``result(statuses)`` (default 0)."""
    if usage is not None and runs and all(r.status == usage and not r.out.strip() for r in runs) and \
            len({r.err for r in runs}) == 1 and usage not in ok:
        err.write(runs[0].err)
        return usage
    text = merge_json(runs, ok) if fmt == "json" else merge_text(runs, ok)
    out.write(text)
    for run in runs:
        err.write(_err_lines(run, prog))
    if any(r.status not in ok for r in runs):
        return 1
    return result([r.status for r in runs]) if result else 0
