"""Kafka's throttle arithmetic (QuotaUtils, metrics Rate, QuotaConfig defaults).

A broker measures each bucket's rate over ``quota.window.num`` (11) samples of
``quota.window.size.seconds`` (1 s); the window it divides by is at least (samples - 1)
sample lengths, i.e. 10 s. When the rate exceeds the quota it delays the client by
``(observed - quota) / quota * window``: long enough that the average comes back to the
quota. Byte-rate throttles are not capped; request and connection throttles are capped at
one sample window. Kafka rounds half up (``Math.round``), not to even as Python's ``round``.

``controller_mutation_rate`` is different: a token bucket (ControllerMutationQuotaManager)
holding up to ``rate × samples × window`` tokens. A topic or partition mutation over quota is
*rejected* (THROTTLING_QUOTA_EXCEEDED), not delayed; the client is told to wait
``-tokens / rate × 1000`` ms (:func:`mutation_throttle_ms`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from quota_core.domain.keys import QUOTA_KEYS

__all__ = [
    "DEFAULT_SAMPLES",
    "DEFAULT_SAMPLE_MS",
    "DEFAULT_METRIC_SAMPLES",
    "DEFAULT_METRIC_SAMPLE_MS",
    "QuotaWindow",
    "DEFAULT_WINDOW",
    "ThrottleEstimate",
    "rate_window_ms",
    "throttle_time_ms",
    "estimate_throttle",
    "round_half_up",
    "mutation_throttle_ms",
]

DEFAULT_SAMPLES = 11
DEFAULT_SAMPLE_MS = 1000
#: The broker's own metrics (``metrics.num.samples`` × ``metrics.sample.window.ms``): the
#: span its ``throttle-time`` average covers, not the quota window (QUOTA_SEMANTICS.md).
DEFAULT_METRIC_SAMPLES = 2
DEFAULT_METRIC_SAMPLE_MS = 30_000


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """A broker's quota window: ``quota.window.num`` samples of ``quota.window.size.seconds``
    (DescribeConfigs; :meth:`quota_core.backends.base.QuotaBackend.quota_window`)."""

    samples: int = DEFAULT_SAMPLES
    sample_s: int = DEFAULT_SAMPLE_MS // 1000
    #: Where the figures come from: a broker (``broker 1``) or Kafka's defaults.
    source: str = "Kafka's defaults"
    #: Brokers whose own window differs (a rolling change half done): ``(node id, samples,
    #: size s)``; each broker enforces with its own (:meth:`for_broker`).
    differing: tuple[tuple[str, int, int], ...] = ()
    #: ``metrics.num.samples`` × ``metrics.sample.window.ms``: what the broker's
    #: ``throttle-time`` average covers (it remembers a throttle that long after it ended).
    metric_samples: int = DEFAULT_METRIC_SAMPLES
    metric_sample_ms: int = DEFAULT_METRIC_SAMPLE_MS

    def for_broker(self, broker: str) -> "QuotaWindow":
        """The window of the broker labelled ``broker``: its own when it differs, else this."""
        for node, samples, sample_s in self.differing:
            if node == broker:
                return QuotaWindow(samples, sample_s, f"broker {node}",
                                   metric_samples=self.metric_samples,
                                   metric_sample_ms=self.metric_sample_ms)
        return self

    @property
    def throttle_memory_ms(self) -> int:
        """How long a broker's ``throttle-time`` average can still hold a throttle after the
        last throttled request: ``metrics.num.samples`` × ``metrics.sample.window.ms``."""
        return int(self.metric_samples * self.metric_sample_ms)

    @property
    def sample_ms(self) -> int:
        return int(self.sample_s * 1000)

    @property
    def measured_ms(self) -> tuple[int, int]:
        """The span a rate is measured over: ``(samples - 1) × size`` at least, up to
        ``samples × size`` (Rate.windowSize; older samples are purged)."""
        return ((self.samples - 1) * self.sample_ms, self.samples * self.sample_ms)

    def text(self) -> str:
        """``11 × 1 s (Kafka's defaults)``."""
        return f"{self.samples} × {self.sample_s} s ({self.source})"

    def as_dict(self) -> dict:
        return {"quota.window.num": self.samples, "quota.window.size.seconds": self.sample_s,
                "metrics.num.samples": self.metric_samples,
                "metrics.sample.window.ms": self.metric_sample_ms, "source": self.source}


#: Kafka's defaults, for callers that have not read the cluster's settings.
DEFAULT_WINDOW = QuotaWindow()
#: Keys whose throttle is capped at one sample window.
_CAPPED_KEYS = frozenset({"request_percentage", "connection_creation_rate"})


def rate_window_ms(elapsed_ms: float | None = None, samples: int = DEFAULT_SAMPLES,
                   sample_ms: int = DEFAULT_SAMPLE_MS) -> float:
    """The window a Rate divides by: the time since the oldest sample, but at least
    ``samples - 1`` whole samples (Rate.windowSize). ``None`` means a long-running client,
    whose window is the full ``samples`` windows at most; we take the minimum, which is what
    a throttled client mostly sees."""
    minimum = (samples - 1) * sample_ms
    if elapsed_ms is None:
        return float(minimum)
    full = int(elapsed_ms // sample_ms)
    if full < samples - 1:
        elapsed_ms += (samples - 1 - full) * sample_ms
    return float(elapsed_ms)


def round_half_up(x: float) -> int:
    """Java's ``Math.round``: ``floor(x + 0.5)`` (2.5 → 3, where Python's round gives 2)."""
    return math.floor(x + 0.5)


def mutation_throttle_ms(tokens: float, rate: float) -> int:
    """How long a broker asks a client to wait after a rejected mutation: while the token
    bucket is negative, ``-tokens / rate × 1000`` ms, rounded half up; else 0."""
    if not tokens < 0 or not rate > 0:
        return 0
    return round_half_up(-tokens / rate * 1000)


def throttle_time_ms(observed: float, quota: float, window_ms: float = 10_000,
                     cap_ms: float | None = None) -> int:
    """``round((observed - quota) / quota * window_ms)``, 0 when not over, optionally capped."""
    if not observed > quota:  # also False for NaN quotas: a NaN bound never throttles
        return 0
    throttle = round_half_up((observed - quota) / quota * window_ms)
    if cap_ms is not None:
        throttle = min(throttle, int(cap_ms))
    return max(throttle, 0)


@dataclass(frozen=True, slots=True)
class ThrottleEstimate:
    key: str
    observed: float
    quota: float | None
    throttle_ms: int
    capped: bool

    @property
    def throttled(self) -> bool:
        return self.throttle_ms > 0

    @property
    def usage_ratio(self) -> float | None:
        """observed / quota (1.0 = exactly at quota), None when unlimited."""
        if not self.quota:
            return None
        return self.observed / self.quota


def estimate_throttle(key: str, observed: float, quota: float | None,
                      samples: int = DEFAULT_SAMPLES,
                      sample_ms: int = DEFAULT_SAMPLE_MS,
                      window: QuotaWindow | None = None) -> ThrottleEstimate:
    """The throttle a broker would apply to a bucket observed at ``observed`` (per second,
    per broker) against ``quota`` (None = unlimited). ``window`` (the cluster's quota window)
    overrides ``samples`` / ``sample_ms``; without either, Kafka's defaults (11 × 1 s)."""
    if window is not None:
        samples, sample_ms = window.samples, window.sample_ms
    if key not in QUOTA_KEYS:
        raise KeyError(key)
    if quota is None:
        return ThrottleEstimate(key, observed, None, 0, False)
    cap = float(sample_ms) if key in _CAPPED_KEYS else None
    window = rate_window_ms(None, samples, sample_ms)
    uncapped = throttle_time_ms(observed, quota, window)
    throttle = throttle_time_ms(observed, quota, window, cap)
    return ThrottleEstimate(key, observed, quota, throttle, throttle < uncapped)
