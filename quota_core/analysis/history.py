"""Questions over the analysed usage history (the pipeline's ``windows`` table), in pandas.

Pure: frames in, frames out. The History page and the Edit preview use these on the tables
the Spark job wrote; the heavy lifting (resolving every sample against the quota set of its
time) was done by the job. :func:`what_if` judges a proposed quota set against the rates the
history recorded, resolving each distinct bucket once with the one ladder
(:func:`~quota_core.domain.bulk.bulk_resolve_buckets`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from quota_core.domain.entities import Entity

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["client_label", "throttle_heatmap", "throttled_by_broker", "HistoryImpact", "what_if",
           "duration_text"]

QuotaSet = Mapping[Entity, Mapping[str, float]]


def client_label(user, client_id) -> str:
    """How a bucket reads: ``alice · app``; a missing tag reads "any …" (the bucket is
    shared across it)."""
    u = "any user" if user is None or user != user else str(user)
    c = "any client id" if client_id is None or client_id != client_id else str(client_id)
    return f"{u} · {c}"


def duration_text(seconds: float) -> str:
    """``2 h 10 min``, ``45 s``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def throttle_heatmap(windows: "pd.DataFrame", top: int = 20) -> "pd.DataFrame":
    """Seconds over quota per hour (columns) and client (rows, the ``top`` most throttled),
    summed over keys, and over brokers where that hides nothing: a client throttled on some
    of the brokers only (each enforces on its own) gets one row per broker,
    ``alice · any client id · broker 2``, when the samples carry a ``broker`` column."""
    import pandas as pd

    over = windows[windows["over_quota"].fillna(False).astype(bool)]
    if over.empty:
        return pd.DataFrame()
    # summed per client, broker and hour first: the labels are built per group, not per sample
    by = ["user", "client_id"] + (["broker"] if "broker" in over else [])
    sums = (over.assign(hour=pd.to_datetime(over["ts"]).dt.floor("h"))
            .groupby(by + ["hour"], dropna=False, sort=False)["interval_s"].sum().reset_index())
    # plain lists first: iterating a text column (Arrow-backed) a value at a time is slow
    labels = [client_label(u, c) for u, c in zip(sums["user"].tolist(),
                                                 sums["client_id"].tolist())]
    if "broker" in over:
        brokers = [str(b) for b in sums["broker"].tolist()]
        everywhere = set(brokers)
        seen: dict[str, set[str]] = {}
        for label, b in zip(labels, brokers):
            seen.setdefault(label, set()).add(b)
        labels = [label if seen[label] == everywhere else f"{label} · broker {b}"
                  for label, b in zip(labels, brokers)]
    table = (pd.DataFrame({"client": labels, "hour": sums["hour"], "s": sums["interval_s"]})
             .pivot_table(index="client", columns="hour", values="s", aggfunc="sum",
                          fill_value=0.0))
    order = table.sum(axis=1).sort_values(ascending=False).index[:top]
    return table.loc[order]


def throttled_by_broker(samples: "pd.DataFrame") -> str:
    """One bucket's samples (``broker``, ``interval_s``, ``over_quota``) in one sentence:
    ``Throttled on broker 2 for 3 h; never on brokers 1 and 3 (each broker enforces on its
    own).``"""
    from quota_core.throttling.live import broker_order, brokers_text

    if samples.empty:
        return "No samples recorded."
    over = samples["over_quota"].fillna(False).astype(bool)
    seconds = samples["interval_s"].where(over, 0.0).groupby(samples["broker"].astype(str)).sum()
    hot = sorted((b for b in seconds.index if seconds[b] > 0),
                 key=lambda b: (-seconds[b], broker_order(b)))
    never = [b for b in seconds.index if seconds[b] <= 0]
    if not hot:
        return f"Never throttled on {brokers_text(never)} in the recorded samples."
    text = "Throttled " + ", ".join(f"on broker {b} for {duration_text(seconds[b])}"
                                    for b in hot)
    if never:
        text += f"; never on {brokers_text(never)}"
    return text + (" (each broker enforces on its own)." if len(seconds) > 1 else ".")


@dataclass(frozen=True)
class HistoryImpact:
    """What ``after`` would have done to the recorded traffic, against ``before``."""

    #: Per bucket and key: throttled_s_before / _after, quota_before / _after.
    per_bucket: "pd.DataFrame"
    span_s: float

    @property
    def _judged(self) -> "pd.DataFrame":
        """The buckets that still hold clients after the change (see :attr:`moved`)."""
        b = self.per_bucket
        return b[~b["moves"].astype(bool)] if "moves" in b else b

    @property
    def moved(self) -> "pd.DataFrame":
        """Buckets nobody would be in after the change (their clients move to buckets of
        another shape): their recorded rate is no client's, so they are not judged."""
        b = self.per_bucket
        return b[b["moves"].astype(bool)] if "moves" in b else b.iloc[0:0]

    @property
    def newly_throttled(self) -> "pd.DataFrame":
        b = self._judged
        return b[(b["throttled_s_after"] > 0) & (b["throttled_s_before"] == 0)]

    @property
    def freed(self) -> "pd.DataFrame":
        b = self._judged
        return b[(b["throttled_s_before"] > 0) & (b["throttled_s_after"] == 0)]

    @property
    def changed(self) -> "pd.DataFrame":
        b = self._judged
        return b[b["throttled_s_before"] != b["throttled_s_after"]]

    def sentence(self) -> str:
        """``Over the last 2 d: 3 clients would have been throttled for 2 h 10 min in
        total (now 0 s); 1 freed.``"""
        span = duration_text(self.span_s)
        changed = self.changed
        moved = len(self.moved)
        tail = "" if not moved else (
            f" {moved} bucket{'' if moved == 1 else 's'} would hold nobody after the change "
            f"(their clients move to buckets of another shape, whose share of the recorded "
            f"traffic is unknown): not judged.")
        if changed.empty:
            return (f"Over the recorded {span}, this change would not have changed how long "
                    f"any client was throttled." + tail)
        before = changed["throttled_s_before"].sum()
        after = changed["throttled_s_after"].sum()
        n = len({(u, c) for u, c in zip(changed["user"], changed["client_id"])})
        parts = [f"Over the recorded {span}: {n} client{'' if n == 1 else 's'} would have "
                 f"been throttled for {duration_text(after)} in total instead of "
                 f"{duration_text(before)}"]
        newly, freed = len(self.newly_throttled), len(self.freed)
        if newly:
            parts.append(f"{newly} newly throttled")
        if freed:
            parts.append(f"{freed} freed")
        return "; ".join(parts) + (" (broker-seconds over quota, today's quotas vs the "
                                   "change).") + tail


def what_if(windows: "pd.DataFrame", before: QuotaSet, after: QuotaSet) -> HistoryImpact:
    """Every bucket and key of the history judged twice, against ``before`` and ``after``
    (both applied to the whole recorded span): seconds over quota with each."""
    import numpy as np
    import pandas as pd

    from quota_core.domain.bulk import bulk_resolve_buckets

    cols = ["user", "client_id", "key"]
    if windows.empty:
        empty = pd.DataFrame(columns=cols + ["throttled_s_before", "throttled_s_after",
                                             "quota_before", "quota_after"])
        return HistoryImpact(empty, 0.0)
    w = windows[["ts", "user", "client_id", "key", "rate", "interval_s"]]
    users = w["user"].astype(object).where(w["user"].notna(), None)
    clients = w["client_id"].astype(object).where(w["client_id"].notna(), None)
    buckets = pd.DataFrame({"user": users, "client_id": clients}).drop_duplicates()
    keys = tuple(sorted(w["key"].unique()))
    b_user, b_client = list(buckets["user"]), list(buckets["client_id"])
    resolved = {}
    for name, quotas in (("before", before), ("after", after)):
        r = bulk_resolve_buckets(quotas, b_user, b_client, keys)
        for key in keys:
            resolved[(name, key)] = r.values[key]
    frames = []
    for key in keys:
        frames.append(buckets.assign(key=key, quota_before=resolved[("before", key)],
                                     quota_after=resolved[("after", key)]))
    quotas = pd.concat(frames, ignore_index=True)
    fill = "\x00none"  # join on null tags
    left = pd.DataFrame({"user": users.fillna(fill), "client_id": clients.fillna(fill),
                         "key": w["key"], "rate": w["rate"], "interval_s": w["interval_s"]})
    right = quotas.assign(user=quotas["user"].fillna(fill),
                          client_id=quotas["client_id"].fillna(fill))
    joined = left.merge(right, on=cols, how="left")
    for name in ("before", "after"):
        q = joined[f"quota_{name}"].to_numpy(dtype=float)
        rate = joined["rate"].to_numpy(dtype=float)
        over = ~np.isnan(q) & ~np.isnan(rate) & (rate > q)
        joined[f"throttled_s_{name}"] = np.where(over, joined["interval_s"], 0.0)
    per = (joined.groupby(cols, dropna=False)
           .agg(throttled_s_before=("throttled_s_before", "sum"),
                throttled_s_after=("throttled_s_after", "sum"),
                quota_before=("quota_before", "first"), quota_after=("quota_after", "first"))
           .reset_index())
    for col in ("user", "client_id"):
        per[col] = per[col].where(per[col] != fill, None)
    # A recorded bucket is judged against ``after`` only while somebody is still in it: a
    # change can move its clients to buckets of another shape (quota_core.domain.membership).
    from quota_core.domain.membership import Membership

    held_before, held_after = Membership(before), Membership(after)
    def tags(u, c):  # a missing tag reads NaN in a string column
        return (u if isinstance(u, str) else None, c if isinstance(c, str) else None)

    per["moves"] = [bool(held_before.current(k, tags(u, c)) and
                         not held_after.current(k, tags(u, c)))
                    for u, c, k in zip(per["user"], per["client_id"], per["key"])]
    ts = pd.to_datetime(windows["ts"])
    span = float((ts.max() - ts.min()).total_seconds()) + float(windows["interval_s"].max())
    return HistoryImpact(per, span)
