"""``plan --from-cluster A --cluster B``: a promotion, the plan that makes B's quota set A's.

The desired set is cluster A's quota set, read (in a thread of its own, bounded by
``--timeout``) while B is read; the plan is bound to B as every plan is (its cluster id in the
plan's ``cluster``), so ``apply PLAN --cluster B`` applies it and ``--cluster A`` is refused.
The preview says when the two clusters run different Kafka versions, or either runs a custom
quota callback (``client.quota.callback.class``): :func:`quota_core.drift.promotion_notes`.
The plan document carries both sides under ``promotion``.
"""
from __future__ import annotations

import argparse
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from ..changes.audit import cluster_fields
from ..errors import QuotaError, UsageError

__all__ = ["Side", "start_source", "side_of", "promotion_json", "format_promotion"]


@dataclass
class Side:
    """One cluster of a promotion: its name, store fields (kind, location, cluster id), the
    Kafka version it runs (None: a sandbox), its custom callbacks, and (the source) its set."""

    name: str
    fields: dict
    version: str | None
    callbacks: dict[str, tuple[str, ...]]
    settings_unread: str | None = None
    quotas: dict = field(default_factory=dict)


def side_of(name: str, backend, *, with_quotas: bool = False) -> Side:
    """What a promotion needs to know of one cluster (read from ``backend``)."""
    from ..brokers import read_settings

    quotas = backend.describe() if with_quotas else {}
    info = backend.info()
    fields = {**cluster_fields(info), "cluster_id": backend.identity()}
    settings = read_settings(backend)
    unread = None
    if info.kind != "sandbox" and not settings.read:
        unread = settings.source  # "Kafka's defaults: the brokers' settings could not be ..."
    return Side(name, fields, backend.broker_version(), dict(settings.callbacks), unread,
                quotas)


def start_source(args: argparse.Namespace) -> tuple[str, Future]:
    """Check the flags of a promotion and start reading the source cluster: ``(its name, a
    future of its Side)``; the future raises the source's error, its message naming it."""
    from ..backends.fleet_config import fleet_of_args
    from ..backends.open import open_cluster, require_sandbox_file

    target = getattr(args, "fleet_cluster", None)
    if args.file is not None:
        raise UsageError(f"Give the desired quota set once: a FILE ({args.file}) or "
                         f"--from-cluster {args.from_cluster}, not both.")
    if target is None or args.cluster is None:
        raise UsageError(f"--from-cluster {args.from_cluster} copies one cluster of the fleet "
                         f"onto another: name the cluster the plan is for with --cluster NAME.")
    source = fleet_of_args(args).select(args.from_cluster)
    if source.name == target.name:
        raise UsageError(f"--from-cluster and --cluster both name '{source.name}': a "
                         f"promotion goes from one cluster to another.")

    def read() -> Side:
        try:
            if source.sandbox:  # a read never creates a sandbox
                require_sandbox_file(source.sandbox)
            with open_cluster(source, timeout_s=args.timeout) as backend:
                return side_of(source.name, backend, with_quotas=True)
        except QuotaError as exc:
            exc.message = f"cluster {source.name}: {exc.message}"
            raise

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="promote-source")
    future = pool.submit(read)
    pool.shutdown(wait=False)
    return source.name, future


def _notes(source: Side, target: Side) -> list[str]:
    from ..drift import promotion_notes

    notes = promotion_notes(source.name, target.name,
                            {s.name: s.version for s in (source, target)},
                            {s.name: s.callbacks for s in (source, target)})
    for side in (source, target):
        if side.settings_unread:
            notes.append(f"cluster {side.name!r}: whether it runs a custom quota callback is "
                         f"not known ({side.settings_unread}).")
    return notes


def promotion_json(source: Side, target: Side) -> dict:
    """The plan document's ``promotion``: both sides and the notes of the preview."""
    def side(s: Side) -> dict:
        return {"name": s.name, **{k: v for k, v in s.fields.items() if k != "label"},
                "broker_version": s.version,
                "callbacks": {cls: list(nodes) for cls, nodes in s.callbacks.items()}}

    return {"from": side(source), "to": side(target), "notes": _notes(source, target)}


def format_promotion(source: Side, target: Side) -> str:
    """The preview's lines about the two clusters (after the plan itself)."""
    def what(s: Side) -> str:
        version = f"Kafka {s.version}" if s.version else "a sandbox, no brokers"
        callback = (", custom quota callback " + ", ".join(s.callbacks)) if s.callbacks else ""
        return f"cluster {s.name!r} ({version}{callback})"

    lines = ["", f"Promotion: {what(source)} → {what(target)}."]
    notes = _notes(source, target)
    lines += [f"  ! {n}" for n in notes]
    return "\n".join(lines) + "\n"
