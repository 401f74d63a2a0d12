"""The live metrics feed behind the Throttled now page and the Resolve page's live panel.

One feed per configured set of endpoints, per server process: a daemon thread scrapes every
endpoint every few seconds and keeps the last minutes in a bounded ring, so a page shows a
line over time without a collector running. Failures are kept per endpoint and shown, never
raised, with the time of the endpoint's last successful scrape: a round in which any
endpoint failed is not :attr:`Frame.complete`, and no page calls it all clear.
"""
from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import streamlit as st

from quota_core.throttling import endpoint_address
from quota_core.telemetry.collector import Endpoint, parse_endpoints
from quota_core.errors import QuotaError

from ui.settings import metrics_endpoints, metrics_template

__all__ = ["LiveFeed", "feed", "feed_for", "fleet_metrics_hint", "Frame", "Down", "endpoint_name", "usage_rows", "held_rows",
           "frame_unread",
           "ended_ago"]


def endpoint_name(endpoint: Endpoint) -> str:
    """How a page names an endpoint that cannot be read: its URL's ``host:port`` (it has no
    broker id then; docs/interfaces.md, "Labels and shapes")."""
    return endpoint_address(endpoint.url)


@dataclass(frozen=True)
class Down:
    """An endpoint whose last scrape failed: its ``host:port``, why, and when it last
    answered (None: not since the console started)."""

    name: str
    error: str
    last_ok: float | None
    #: The broker's node id, when the endpoint answered with one before (None: unknown).
    node: str | None = None

    @property
    def label(self) -> str:
        """``broker 2 (127.0.0.1:44377)`` when its node id is known, else ``host:port``."""
        return f"broker {self.node} ({self.name})" if self.node else self.name

    def since_text(self, now: float | None = None) -> str:
        if self.last_ok is None:
            return "no successful scrape since the console started"
        age = (time.time() if now is None else now) - self.last_ok
        return (f"last successful scrape at {time.strftime('%H:%M:%S', time.localtime(self.last_ok))}"
                f" ({age:.0f} s ago)")


@dataclass(frozen=True)
class Frame:
    """One scrape round: when, what every endpoint answered, and which failed (``host:port``
    → why; :attr:`down` also says since when)."""

    at: float
    series: tuple
    errors: dict = field(default_factory=dict)
    down: tuple[Down, ...] = ()
    #: The node id of every endpoint that answered (its label when it exports none).
    brokers: tuple[str, ...] = ()
    #: What the clients pushed (KIP-714): quota_core.telemetry.client_reports.ClientReport.
    clients: tuple = ()
    #: Whether any endpoint that answered carries the client-telemetry plugin.
    telemetry: bool = False

    def client_side(self):
        """The clients' reports of this round (quota_core.throttling.client_view.ClientSide)."""
        from quota_core.throttling import ClientSide

        return ClientSide(self.clients, self.telemetry)

    @property
    def complete(self) -> bool:
        """Every endpoint answered: only then can counts (and an all-clear) be trusted."""
        return not self.down


class LiveFeed:
    def __init__(self, endpoints: list[Endpoint], every_s: float = 5.0, keep_s: float = 900.0,
                 timeout_s: float = 3.0) -> None:
        self.endpoints, self.every_s, self.timeout_s = endpoints, every_s, timeout_s
        self.frames: deque[Frame] = deque(maxlen=max(2, int(keep_s / every_s)))
        #: endpoint URL → time of its last successful scrape
        self.last_ok: dict[str, float] = {}
        #: endpoint URL → the node id it last answered with
        self.node_of: dict[str, str] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="quota-live-feed", daemon=True)
        self._thread.start()

    def _round(self) -> Frame:
        from quota_core.telemetry.sweep import scrape_all

        series, failed = scrape_all(self.endpoints, self.timeout_s)
        now, down_urls = time.time(), {endpoint.url for endpoint, _ in failed}
        self.last_ok.update((e.url, now) for e in self.endpoints if e.url not in down_urls)
        self.node_of.update(getattr(series, "node_of", {}))
        errors = {endpoint_name(e): str(exc) for e, exc in failed}
        down = [Down(endpoint_name(e), str(exc), self.last_ok.get(e.url), self.node_of.get(e.url))
                for e, exc in failed]
        return Frame(time.time(), tuple(series), errors, tuple(down), tuple(series.brokers),
                     tuple(getattr(series, "clients", ())), bool(getattr(series, "telemetry",
                                                                         False)))

    def _loop(self) -> None:
        while True:
            try:
                frame = self._round()
            except RuntimeError as exc:
                # The interpreter is ending: its thread pools take no more work ("cannot
                # schedule new futures after interpreter shutdown"). The process is going
                # away, and a traceback on its stderr would say nothing. (The main thread
                # can still look alive then: a pytest-xdist worker showed it.)
                if "interpreter shutdown" in str(exc) or not threading.main_thread().is_alive():
                    return
                raise
            with self._lock:
                self.frames.append(frame)
            time.sleep(max(0.0, self.every_s - (time.time() - frame.at)))

    def latest(self, wait_s: float = 5.0) -> Frame | None:
        """The newest round (waiting up to ``wait_s`` for the first one)."""
        deadline = time.time() + wait_s
        while True:
            with self._lock:
                if self.frames:
                    return self.frames[-1]
            if time.time() >= deadline:
                return None
            time.sleep(0.05)

    def history(self) -> list[Frame]:
        with self._lock:
            return list(self.frames)


def fleet_metrics_hint() -> str | None:
    """Where a fleet's cluster gets its metrics endpoints (None outside a fleet file): what
    a page without live figures says instead of the console-wide settings."""
    from ui.page_context import fleet_cluster

    chosen = fleet_cluster()
    if chosen is None:
        return None
    return (f"Cluster {chosen.name!r} has no metrics endpoints: add `metrics = [\"URL\", …]` "
            f"(or `metrics_template`) to its `[clusters.{chosen.name}]` table in the fleet's "
            f"configuration to see live figures here.")


def feed_for(endpoints_text: str) -> LiveFeed:
    """The process's feed for these endpoints (one per endpoints text, started once)."""
    return _feed(endpoints_text)


@st.cache_resource(show_spinner=False)
def _feed(endpoints_text: str) -> LiveFeed:
    return LiveFeed(parse_endpoints(endpoints_text),
                    every_s=float(os.environ.get("QUOTA_LIVE_EVERY", "5")))


def feed(secrets: dict) -> tuple[LiveFeed | None, str | None]:
    """The feed for the configured endpoints (or the template, filled in for the connected
    cluster's brokers): ``(feed, None)``, ``(None, why not)``."""
    from quota_core.throttling import endpoints_from_template

    from ui.page_context import connected_cluster, fleet_cluster

    env = dict(os.environ)
    text, template = metrics_endpoints(env, secrets), metrics_template(env, secrets)
    chosen = fleet_cluster()
    if chosen is not None:  # a fleet's cluster has its own endpoints (or none)
        text, template = chosen.metrics_arg, chosen.metrics_template
    cluster = connected_cluster()
    try:
        if not text and template and cluster is not None and cluster.node_ids:
            text = endpoints_from_template(template, cluster.node_ids, cluster.hosts)
        if not text:
            return None, None
        return _feed(text), None
    except QuotaError as exc:
        return None, f"The metrics endpoints setting is not usable: {exc}"


_ROWS: "OrderedDict[tuple[int, int], tuple[Frame, object, list]]" = OrderedDict()
_ROWS_KEPT = 8
_ROWS_LOCK = threading.Lock()


def usage_rows(frame: Frame, quotas) -> list:
    """:func:`quota_core.throttling.live.join_usage` of one scrape round against one quota set, computed
    once per process: Throttled now and every Resolve live panel (each session, every 5 s)
    read the same round, and resolving its buckets indexes the whole set (~1 s at 100,000
    entries). Keyed by identity; the entry holds both objects, so an id is not reused while
    it is kept. The rows are shared: callers read them, never change them."""
    from quota_core.throttling import join_usage

    key = (id(frame), id(quotas))
    with _ROWS_LOCK:
        hit = _ROWS.get(key)
        if hit is not None and hit[0] is frame and hit[1] is quotas:
            _ROWS.move_to_end(key)
            return hit[2]
    rows = join_usage(frame.series, quotas)
    with _ROWS_LOCK:
        _ROWS[key] = (frame, quotas, rows)
        while len(_ROWS) > _ROWS_KEPT:
            _ROWS.popitem(last=False)
    return rows


def frame_unread(frame: Frame | None, cluster_nodes=()) -> tuple[str, ...]:
    """The brokers whose figures ``frame`` does not hold, each once: by node id where known
    (an endpoint that answered before with its node id; a broker of the cluster no answering
    endpoint covers), by ``host:port`` otherwise (:func:`quota_core.throttling.coverage.unread_brokers`).
    No frame yet: every broker of the cluster."""
    from quota_core.throttling import unread_brokers

    if frame is None:
        return tuple(cluster_nodes)
    return unread_brokers(tuple(cluster_nodes), frame.brokers,
                          [(d.name, d.node) for d in frame.down])


def ended_ago(history, row, memory_ms: float, now: float | None = None) -> float | None:
    """For a bucket throttled recently (``row``: a :class:`quota_core.throttling.live.BucketUsage` with
    ``recent``): how many seconds ago the feed last saw it throttled *now* on that broker,
    looking back over the broker's throttle-time memory (``memory_ms``); None when no round
    kept shows it (the console started since, or it ended before)."""
    from dataclasses import replace

    from quota_core.throttling import finite, gather

    now = time.time() if now is None else now
    key = (row.broker, row.quota_type, row.user, row.client_id)
    for frame in reversed(history):
        if frame.at < now - memory_ms / 1000 - 1:
            break
        figures = gather(s for s in frame.series
                         if (s.broker, s.quota_type, s.user or None, s.client_id or None) == key)
        got = figures.get(key)
        if not got:
            continue
        then = replace(row, rate=finite(got.get("rate")), throttle_ms=finite(got.get("throttle")))
        if then.throttled:
            return max(0.0, now - frame.at)
    return None


def held_rows(live: LiveFeed, frame: Frame, quotas) -> list:
    """:func:`usage_rows` of ``frame``, where a bucket that looks throttled recently but was
    throttled now in a round of the last :data:`quota_core.throttling.live.CONFIRM_S` stays "now": a
    read under 90 % of the quota can be a dip (:func:`quota_core.throttling.live.hold`)."""
    from quota_core.throttling import CONFIRM_S, hold

    rows = usage_rows(frame, quotas)
    if not any(r.recent for r in rows):
        return rows
    # Every round of the last CONFIRM_S (at least the round before): a bucket throttled now
    # in any of them stays "now" (a dip lasts about 2 s at most).
    span = max(CONFIRM_S, live.every_s) + 0.5
    for before in [f for f in live.history() if frame.at - span <= f.at < frame.at]:
        rows = hold(rows, usage_rows(before, quotas))
    return rows
