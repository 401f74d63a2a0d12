"""The collector: scrape brokers' quota metrics, snapshot the quota set, append both to a sink.

``kafka-client-quotas collect --metrics URL[,URL...] (--bootstrap-server ... | --sandbox ...)
--to DIR|kafka:TOPIC`` runs :class:`Collector` until SIGTERM or Ctrl-C. What it promises:

* every ``scrape_every`` seconds, one usage sample per bucket per endpoint
  (:mod:`quota_core.telemetry.schema` has the schema);
* the quota set described every ``snapshot_every`` seconds, written when it changed (and once
  at the start), with the brokers' quota window (``settings``: each broker's
  ``quota.window.num`` × ``quota.window.size.seconds``, read at the same time), so the
  pipeline's throttle estimate uses the cluster's own window;
* a broker or a cluster that does not answer is a gap and one log line when it goes down (and
  one when it is back), never a crash;
* endpoints are isolated: in :meth:`Collector.run` they are scraped concurrently, on a
  bounded pool of daemon threads (at most :data:`~quota_core.telemetry.sweep.MAX_PARALLEL`),
  each on its own deadline (the scrape's ``timeout``), so a slow or hostile endpoint delays
  neither the others' samples nor the status line, and a round with many dead endpoints
  costs about one ``timeout``, not one each; while one is still busy with an earlier
  scrape, its next round is skipped (a gap), never queued;
* memory is bounded: at most ``max_buffer`` unwritten samples are held while the sink refuses
  writes, the oldest dropped (and counted) beyond that;
* a sample counted as written is durable (see :mod:`quota_core.telemetry.sinks`); SIGTERM flushes and
  exits 0 within a fraction of a second, whatever an endpoint is doing (a scrape in flight
  is abandoned: its thread is a daemon);
* a status line every ``status_every`` seconds: samples written, endpoints up and down.
"""
from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Sequence
from urllib.parse import urlsplit

from quota_core.errors import BackendError, MetricsError, ParseError, QuotaError
from quota_core.telemetry.schema import snapshot_rows, usage_samples, window_rows, with_cluster
from quota_core.telemetry.sweep import MAX_PARALLEL, scrape_endpoint, sweep_pool

__all__ = ["Endpoint", "parse_endpoints", "Collector", "CollectorStats"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One metrics URL and the broker label its samples carry.

    ``named``: the user gave the label (``LABEL=URL``). Otherwise ``label`` is the URL's
    host:port, which names the endpoint while it cannot be read, and its samples carry the
    broker's node id when the endpoint exports it."""

    label: str
    url: str
    named: bool = True


def parse_endpoints(text: str) -> list[Endpoint]:
    """``URL[,URL...]``; each may be ``LABEL=URL``. The default label is the URL's host:port.
    A URL :func:`~quota_core.telemetry.scrape.url_problem` refuses is a :class:`ParseError`."""
    from quota_core.telemetry.scrape import url_problem

    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        label, _, url = part.partition("=") if "=" in part.split("://", 1)[0] else ("", "", part)
        problem = url_problem(url)
        if problem is not None:  # a usage error (exit 2), never an "internal error"
            raise ParseError(f"--metrics {part!r}: {problem}; give an http(s) URL such as "
                             f"http://127.0.0.1:7071/metrics (optionally LABEL=URL).")
        out.append(Endpoint(label or urlsplit(url).netloc, url, named=bool(label)))
    if not out:
        raise ParseError("--metrics is empty: give at least one http://HOST:PORT/metrics URL.")
    if len({e.label for e in out}) != len(out):
        raise ParseError("--metrics names a broker label twice: give each endpoint its own "
                         "LABEL=URL.")
    return out


@dataclass
class CollectorStats:
    samples_written: int = 0
    snapshots_written: int = 0
    samples_dropped: int = 0
    scrapes: int = 0
    down: dict[str, str] = field(default_factory=dict)  # label -> since (ISO time)


class Collector:
    """Scrape, snapshot and write until ``stop`` is set. ``scrape``/``describe`` are injected
    (``quota_core.telemetry.scrape`` and a backend's ``describe``) so tests can drive faults."""

    def __init__(self, endpoints: Sequence[Endpoint], describe: Callable[[], dict], sink,
                 scrape: Callable[..., list], *, scrape_every: float = 10.0,
                 snapshot_every: float = 60.0, flush_every: float = 10.0,
                 status_every: float = 60.0, max_buffer: int = 200_000,
                 log: Callable[[str], None] = print, timeout: float = 5.0,
                 settings: Callable[[], object] | None = None,
                 cluster: str | None = None) -> None:
        self.endpoints, self.describe, self.sink, self.scrape = list(endpoints), describe, sink, scrape
        self.scrape_every, self.snapshot_every = scrape_every, snapshot_every
        self.flush_every, self.status_every = flush_every, status_every
        self.max_buffer, self.log, self.timeout = max_buffer, log, timeout
        self.stats = CollectorStats()
        self._usage: list[dict] = []
        self._snapshots: list[dict] = []
        self._last_ok: dict[str, float] = {}
        self._last_quotas: dict | None = None
        #: endpoint label → (when, the client reports it showed): KIP-714 pushes.
        self._clients: dict[str, tuple[float, list]] = {}
        self.settings = settings
        #: The cluster's name in the fleet file: every row written carries it (``cluster``).
        self.cluster = cluster
        self._last_windows: list | None = None
        self._settings_down = False
        self._cluster_down = False

    # -- one round -------------------------------------------------------------------------
    def scrape_all(self, now: float) -> None:
        """One round: scrape every endpoint at once (on the sweep's bounded pool) and record
        the answers in the endpoints' order (what :meth:`run` does round after round)."""
        with sweep_pool(len(self.endpoints)) as pool:
            answers = list(pool.map(lambda e: _scrape_one(self.scrape, e, self.timeout),
                                    self.endpoints))
        for endpoint, answer in zip(self.endpoints, answers):
            self.record(endpoint, now, answer)
        self.stats.scrapes += 1

    def record(self, endpoint: Endpoint, now: float, answer: list | QuotaError) -> None:
        """One endpoint's answer to the scrape started at ``now``: samples, or a gap."""
        ts = datetime.fromtimestamp(now, timezone.utc)
        if isinstance(answer, QuotaError):
            if endpoint.label not in self.stats.down:
                self.stats.down[endpoint.label] = ts.isoformat(timespec="seconds")
                self.log(f"collect: {endpoint.label} is down, its samples have a gap "
                         f"until it answers: {answer}")
            return
        if endpoint.label in self.stats.down:
            self.log(f"collect: {endpoint.label} answers again (down since "
                     f"{self.stats.down.pop(endpoint.label)})")
        previous = self._last_ok.get(endpoint.label)
        interval = self.scrape_every if previous is None else now - previous
        self._last_ok[endpoint.label] = now
        self._usage.extend(with_cluster(usage_samples(answer, ts, interval, self._client_throttle(
            endpoint, answer, now)), self.cluster))
        self._bound_buffer()

    def _client_throttle(self, endpoint: Endpoint, answer, now: float):
        """What the clients of each bucket report (KIP-714): the freshest reports of every
        endpoint (a client pushes to one broker and is throttled by others), each endpoint's
        kept for :data:`CLIENT_KEEP_S`; None (no column) when no endpoint carries the
        client-telemetry plugin."""
        from quota_core.throttling.client_view import bucket_client_throttle
        from quota_core.throttling.live import KEY_OF_TYPE
        from quota_core.domain.membership import Membership
        from quota_core.telemetry.client_reports import client_reports, telemetry_collected

        samples = getattr(answer, "client_samples", None) or ()
        if samples and telemetry_collected(samples):
            node = getattr(answer, "node_id", None) or endpoint.label
            self._clients[endpoint.label] = (now, client_reports(
                samples, int(node) if str(node).isdigit() else -1))
        reports = [r for at, rs in self._clients.values() if now - at <= CLIENT_KEEP_S
                   for r in rs]
        if not any(now - at <= CLIENT_KEEP_S for at, _ in self._clients.values()):
            return None
        members = None if self._last_quotas is None else Membership(self._last_quotas)
        return lambda quota_type, user, client_id: bucket_client_throttle(
            KEY_OF_TYPE[quota_type], (user, client_id), reports, members)

    def snapshot(self, now: float) -> None:
        try:
            quotas = self.describe()
        except QuotaError as exc:
            if not self._cluster_down:
                self._cluster_down = True
                self.log(f"collect: cannot describe the quota set, keeping the last one: {exc}")
            return
        if self._cluster_down:
            self._cluster_down = False
            self.log("collect: the cluster answers again")
        ts = datetime.fromtimestamp(now, timezone.utc)
        windows = self._windows(ts)
        same_windows = windows is None or self._last_windows is not None and \
            [r["value"] for r in windows] == [r["value"] for r in self._last_windows] and \
            [r["entity"] for r in windows] == [r["entity"] for r in self._last_windows]
        if quotas != self._last_quotas or not same_windows:
            if windows is None and self._last_windows is not None:
                windows = [dict(r, ts=ts) for r in self._last_windows]  # kept: not re-read
            self._snapshots.extend(with_cluster(snapshot_rows(quotas, ts) + (windows or []),
                                                self.cluster))
            self._last_quotas = quotas
            if windows is not None:
                self._last_windows = windows

    def _windows(self, ts: datetime) -> list[dict] | None:
        """The brokers' quota windows as snapshot rows; None when not read (no ``settings``
        given, or the brokers did not answer: the last ones are kept)."""
        if self.settings is None:
            return None
        try:
            rows = window_rows(self.settings(), ts)
        except QuotaError as exc:
            if not self._settings_down:
                self._settings_down = True
                self.log(f"collect: cannot read the brokers' quota window, keeping the last "
                         f"one: {exc}")
            return None
        self._settings_down = False
        return rows

    def flush(self) -> bool:
        """Write what is buffered; True when the sink took it all."""
        if not self._usage and not self._snapshots:
            return True
        usage, snapshots = self._usage, self._snapshots
        try:
            self.sink.write(usage, snapshots)
        except BackendError as exc:
            self.log(f"collect: writing to {self.sink.label} failed, keeping "
                     f"{len(usage):,} samples to write again: {exc}")
            return False
        self._usage, self._snapshots = [], []
        self.stats.samples_written += len(usage)
        self.stats.snapshots_written += len({r['ts'] for r in snapshots})
        return True

    def _bound_buffer(self) -> None:
        excess = len(self._usage) - self.max_buffer
        if excess > 0:
            del self._usage[:excess]
            self.stats.samples_dropped += excess
            self.log(f"collect: the sink is not taking writes; dropped the {excess:,} oldest "
                     f"unwritten samples to stay within {self.max_buffer:,}.")

    def status_line(self) -> str:
        up = len(self.endpoints) - len(self.stats.down)
        down = "".join(f"; {label} down since {since}" for label, since in self.stats.down.items())
        dropped = f", {self.stats.samples_dropped:,} dropped" if self.stats.samples_dropped else ""
        return (f"collect: {self.stats.samples_written:,} samples and "
                f"{self.stats.snapshots_written:,} quota snapshots written{dropped}, "
                f"{len(self._usage):,} buffered; endpoints up {up}/{len(self.endpoints)}{down}")

    # -- the loop --------------------------------------------------------------------------
    def run(self, stop: threading.Event, clock: Callable[[], float] = time.time) -> int:
        """Until ``stop`` is set; then a last flush. 0 when everything was written.

        The endpoints are scraped on a bounded pool of worker threads (:class:`_Scrapers`);
        this loop only starts scrapes, records the answers as they arrive (within
        :data:`_POLL_S`), snapshots, flushes and logs, so it never waits on an endpoint."""
        answers: queue.Queue = queue.Queue()
        scrapers = _Scrapers(self.scrape, self.timeout, answers,
                             min(MAX_PARALLEL, max(1, len(self.endpoints))))
        next_scrape = next_snapshot = next_flush = clock()
        next_status = clock() + self.status_every
        try:
            while not stop.is_set():
                now = clock()
                if now >= next_snapshot:
                    self.snapshot(now)
                    next_snapshot = now + self.snapshot_every
                if now >= next_scrape:
                    for endpoint in self.endpoints:
                        scrapers.start(endpoint, now)  # one still busy skips this round: a gap
                    self.stats.scrapes += 1
                    next_scrape += self.scrape_every
                    if next_scrape < now:  # a slow round: skip, do not catch up in a burst
                        next_scrape = now + self.scrape_every
                self._record_answers(answers)
                if now >= next_flush:
                    self.flush()
                    next_flush = now + self.flush_every
                if now >= next_status:
                    self.log(self.status_line())
                    next_status = now + self.status_every
                wake = min(next_scrape, next_snapshot, next_flush, next_status)
                stop.wait(min(_POLL_S, max(0.0, wake - clock())))
        finally:
            scrapers.close()
        self._record_answers(answers)
        ok = self.flush()
        self.log(self.status_line())
        return 0 if ok else 1

    def _record_answers(self, answers: queue.Queue) -> None:
        while True:
            try:
                endpoint, started, answer = answers.get_nowait()
            except queue.Empty:
                return
            self.record(endpoint, started, answer)


#: How long one endpoint's client reports count for the samples of every endpoint (s):
#: a few of the default subscription's 30 s push intervals.
CLIENT_KEEP_S = 120.0
#: How often :meth:`Collector.run` picks up answers that arrived (seconds).
_POLL_S = 0.2


def _scrape_one(scrape: Callable[..., list], endpoint: Endpoint, timeout: float) -> list | QuotaError:
    """One endpoint's series, or the error that made it a gap (a bug in a scrape function
    too: a worker never dies of one)."""
    try:
        return scrape_endpoint(endpoint, timeout, scrape=scrape)
    except Exception as exc:  # noqa: BLE001 - isolated per endpoint, reported as its gap
        return MetricsError(f"Scraping {endpoint.url} failed ({type(exc).__name__}: {exc}).",
                            url=endpoint.url)


class _Scrapers:
    """A bounded pool of daemon threads that scrape endpoints when :meth:`start` asks, and
    put ``(endpoint, started, answer)`` on the shared queue. Daemon threads: a scrape in
    flight never holds up the exit. An endpoint is never scraped twice at once."""

    def __init__(self, scrape: Callable[..., list], timeout: float, answers: queue.Queue,
                 size: int) -> None:
        self.scrape, self.timeout, self.answers = scrape, timeout, answers
        self._todo: queue.Queue = queue.Queue()
        self._busy: set[Endpoint] = set()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._loop, daemon=True,
                                          name=f"collect-scrape-{i}") for i in range(size)]
        for thread in self._threads:
            thread.start()

    def start(self, endpoint: Endpoint, now: float) -> bool:
        """Start a scrape of ``endpoint`` stamped ``now``; False (nothing started) while one
        of it is queued or in flight."""
        with self._lock:
            if endpoint in self._busy:
                return False
            self._busy.add(endpoint)
        self._todo.put((endpoint, now))
        return True

    def close(self) -> None:
        for _ in self._threads:
            self._todo.put(None)

    def _loop(self) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            endpoint, now = item
            answer = _scrape_one(self.scrape, endpoint, self.timeout)
            self.answers.put((endpoint, now, answer))
            with self._lock:
                self._busy.discard(endpoint)
