"""The broker settings every explanation depends on, per broker and for the cluster. Pure.

Kafka reads these from each broker's own configuration (DescribeConfigs of a BROKER resource;
:mod:`quota_core.backends.kafka_brokers` reads them), so they can differ between brokers
while a rolling change is half done:

- ``client.quota.callback.class`` (KIP-257): when set, a plugin decides each client's quota
  and bucket; the describe output and the 8-level ladder no longer decide enforcement.
- ``quota.window.num`` × ``quota.window.size.seconds``: the window every byte-rate and request
  throttle is computed over (:class:`quota_core.throttling.throttle.QuotaWindow`).
- ``metrics.num.samples`` × ``metrics.sample.window.ms``: the broker's own metric samples,
  which its ``throttle-time`` average covers (2 × 30 s by default), so a throttle shows there
  up to that long after it ended (:attr:`quota_core.throttling.throttle.QuotaWindow.throttle_memory_ms`).
- ``controller.quota.window.num`` × ``controller.quota.window.size.seconds``: the token bucket
  of ``controller_mutation_rate``.
- ``max.connection.creation.rate`` (KIP-612): the broker-wide cap on new connections per
  second, besides the per-ip ``connection_creation_rate`` quotas.
- ``num.io.threads``, ``num.network.threads``, ``message.max.bytes``, ``super.users``: read
  for the checks that need them.

:class:`ClusterSettings` is the cluster view: one :class:`BrokerSettings` per node id, the
settings on which brokers disagree (:meth:`ClusterSettings.disagreements`), the window the
arithmetic uses, whether the callback is custom, and the sentences the CLI and the pages show
(:meth:`ClusterSettings.notes`), written once here.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Mapping

from quota_core.throttling.throttle import (DEFAULT_METRIC_SAMPLE_MS, DEFAULT_METRIC_SAMPLES,
                                            DEFAULT_SAMPLES, DEFAULT_SAMPLE_MS, QuotaWindow)

__all__ = ["SETTINGS", "KAFKA_DEFAULTS", "DEFAULT_CALLBACK", "CONFIG_SOURCES", "BrokerSettings",
           "Disagreement", "ClusterSettings", "SettingsNote", "read_settings"]

CALLBACK = "client.quota.callback.class"
WINDOW_NUM, WINDOW_SIZE = "quota.window.num", "quota.window.size.seconds"
CONTROLLER_NUM, CONTROLLER_SIZE = ("controller.quota.window.num",
                                   "controller.quota.window.size.seconds")
CONNECTION_RATE = "max.connection.creation.rate"
METRICS_NUM, METRICS_WINDOW = "metrics.num.samples", "metrics.sample.window.ms"

#: What the console reads from every broker, in the order it shows them.
SETTINGS: tuple[str, ...] = (
    CALLBACK, WINDOW_NUM, WINDOW_SIZE, METRICS_NUM, METRICS_WINDOW, CONTROLLER_NUM,
    CONTROLLER_SIZE, CONNECTION_RATE, "num.io.threads", "num.network.threads", "message.max.bytes", "super.users")

#: Kafka 4.x's defaults (QuotaConfig, SocketServerConfigs, ServerConfigs), for a backend
#: without brokers. None: not set.
KAFKA_DEFAULTS: dict[str, str | None] = {
    CALLBACK: None,
    WINDOW_NUM: str(DEFAULT_SAMPLES),
    WINDOW_SIZE: str(DEFAULT_SAMPLE_MS // 1000),
    METRICS_NUM: str(DEFAULT_METRIC_SAMPLES),
    METRICS_WINDOW: str(DEFAULT_METRIC_SAMPLE_MS),
    CONTROLLER_NUM: str(DEFAULT_SAMPLES),
    CONTROLLER_SIZE: str(DEFAULT_SAMPLE_MS // 1000),
    CONNECTION_RATE: "2147483647",
    "num.io.threads": "8",
    "num.network.threads": "3",
    "message.max.bytes": "1048588",
    "super.users": None,
}

#: The callback Kafka uses when ``client.quota.callback.class`` is not set (KIP-257).
DEFAULT_CALLBACK = "Kafka's default callback"

#: DescribeConfigs' ``config_source`` codes, in words.
CONFIG_SOURCES: dict[int, str] = {
    0: "unknown", 1: "topic", 2: "dynamic (this broker)", 3: "dynamic (cluster default)",
    4: "server.properties", 5: "Kafka's default", 6: "dynamic (logger)",
}


@dataclass(frozen=True)
class BrokerSettings:
    """What one broker reports: ``values`` by setting name (None: not set), where each comes
    from (``sources``), or ``error`` when the broker could not be read."""

    node_id: str
    values: Mapping[str, str | None] = field(default_factory=dict)
    sources: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None

    @property
    def read(self) -> bool:
        return self.error is None

    def value(self, name: str) -> str | None:
        return self.values.get(name)

    def window(self, controller: bool = False) -> QuotaWindow:
        """This broker's quota window (the controller mutation window with ``controller``);
        Kafka's defaults for a setting the broker did not report or reported unreadably."""
        num, size = (CONTROLLER_NUM, CONTROLLER_SIZE) if controller else (WINDOW_NUM, WINDOW_SIZE)
        samples, sample_s = _positive(self.value(num)), _positive(self.value(size))
        memory = {"metric_samples": _positive(self.value(METRICS_NUM)) or DEFAULT_METRIC_SAMPLES,
                  "metric_sample_ms": (_positive(self.value(METRICS_WINDOW))
                                       or DEFAULT_METRIC_SAMPLE_MS)}
        if samples is None or sample_s is None:
            return QuotaWindow(source=f"Kafka's defaults: broker {self.node_id} reported no "
                                      f"usable {num} and {size}", **memory)
        return QuotaWindow(samples, sample_s, f"broker {self.node_id}", **memory)

    @property
    def callback(self) -> str | None:
        """The custom quota callback class, None for Kafka's default."""
        value = (self.value(CALLBACK) or "").strip()
        return value or None


def _positive(text: str | None) -> int | None:
    try:
        value = int(str(text).strip())
    except ValueError:
        return None
    return value if value > 0 else None


@dataclass(frozen=True)
class Disagreement:
    """One setting on which the brokers differ: each value with the brokers that have it."""

    name: str
    #: (value, node ids) pairs, the most common value first.
    values: tuple[tuple[str | None, tuple[str, ...]], ...]

    @property
    def brokers(self) -> tuple[str, ...]:
        """The brokers that differ from the most common value (the ones to look at)."""
        return tuple(n for _, nodes in self.values[1:] for n in nodes)

    def text(self) -> str:
        """``quota.window.num: 11 on brokers 1 and 3, 5 on broker 2``."""
        parts = [f"{_shown(v)} on {_brokers(nodes)}" for v, nodes in self.values]
        return f"{self.name}: " + ", ".join(parts)


def _shown(value: str | None) -> str:
    return "not set" if value is None else repr(value) if value.strip() != value or not value \
        else value


def _brokers(nodes: tuple[str, ...] | list[str]) -> str:
    nodes = list(nodes)
    word = "broker" if len(nodes) == 1 else "brokers"
    listed = nodes[0] if len(nodes) == 1 else ", ".join(nodes[:-1]) + " and " + nodes[-1]
    return f"{word} {listed}"


@dataclass(frozen=True)
class SettingsNote:
    """A sentence about the cluster's settings that changes an answer: ``kind`` is
    ``callback``, ``disagree`` or ``unread``; ``brokers`` the node ids it names."""

    kind: str
    text: str
    brokers: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterSettings:
    """Every broker's settings (node-id order), or none for a backend without brokers
    (``source`` then says whose defaults apply and why)."""

    brokers: tuple[BrokerSettings, ...] = ()
    source: str = "Kafka's defaults"

    @classmethod
    def defaults(cls, source: str = "Kafka's defaults") -> "ClusterSettings":
        return cls((), source)

    @property
    def read(self) -> tuple[BrokerSettings, ...]:
        """The brokers that answered."""
        return tuple(b for b in self.brokers if b.read)

    @property
    def unread(self) -> tuple[BrokerSettings, ...]:
        return tuple(b for b in self.brokers if not b.read)

    def node(self, node_id: str) -> BrokerSettings | None:
        return next((b for b in self.brokers if b.node_id == str(node_id)), None)

    def value(self, name: str) -> str | None:
        """The most common value among the brokers that answered (ties: the lowest node id's);
        Kafka's default when none did."""
        if not self.read:
            return KAFKA_DEFAULTS.get(name)
        counts = Counter(b.value(name) for b in self.read)
        best = max(counts.values())
        return next(b.value(name) for b in self.read if counts[b.value(name)] == best)

    def disagreements(self) -> list[Disagreement]:
        """Every setting on which the brokers that answered differ, in :data:`SETTINGS` order
        (then any other setting read)."""
        names = list(SETTINGS) + sorted({n for b in self.read for n in b.values} - set(SETTINGS))
        out = []
        for name in names:
            groups: dict[str | None, list[str]] = {}
            for b in self.read:
                groups.setdefault(b.value(name), []).append(b.node_id)
            if len(groups) > 1:
                common = self.value(name)
                order = sorted(groups.items(), key=lambda g: (g[0] != common, -len(g[1])))
                out.append(Disagreement(name, tuple((v, tuple(n)) for v, n in order)))
        return out

    def _window(self, controller: bool) -> QuotaWindow:
        if not self.read:
            return QuotaWindow(source=self.source if not self.brokers else
                               "Kafka's defaults: no broker's settings could be read")
        windows = [b.window(controller) for b in self.read]
        # The throttle-time average's span: the longest any broker read has (a verdict of
        # "throttled recently" must not end before the slowest broker forgets).
        longest = max(windows, key=lambda w: w.throttle_memory_ms)
        memory = {"metric_samples": longest.metric_samples,
                  "metric_sample_ms": longest.metric_sample_ms}
        counts = Counter((w.samples, w.sample_s) for w in windows)
        best = max(counts.values())
        pick = next(w for w in windows if counts[(w.samples, w.sample_s)] == best)
        same = [b.node_id for b, w in zip(self.read, windows)
                if (w.samples, w.sample_s) == (pick.samples, pick.sample_s)]
        if pick.source.startswith("Kafka's defaults"):
            num, size = (CONTROLLER_NUM, CONTROLLER_SIZE) if controller else \
                (WINDOW_NUM, WINDOW_SIZE)
            return QuotaWindow(pick.samples, pick.sample_s, f"Kafka's defaults: "
                               f"{_brokers(same)} reported no usable {num} and {size}",
                               **memory)
        where = _brokers(same)
        if len(same) < len(self.read):
            where += f" (of {len(self.read)} read: the others differ)"
        differing = tuple((b.node_id, w.samples, w.sample_s) for b, w in zip(self.read, windows)
                          if (w.samples, w.sample_s) != (pick.samples, pick.sample_s))
        return QuotaWindow(pick.samples, pick.sample_s, where, differing, **memory)

    def window(self) -> QuotaWindow:
        """The quota window the throttle arithmetic uses: the one most brokers have."""
        return self._window(False)

    def controller_window(self) -> QuotaWindow:
        """The controller mutation window (``controller_mutation_rate``'s token bucket)."""
        return self._window(True)


    @property
    def callbacks(self) -> dict[str, tuple[str, ...]]:
        """Each custom callback class with the brokers that run it."""
        out: dict[str, list[str]] = {}
        for b in self.read:
            if b.callback:
                out.setdefault(b.callback, []).append(b.node_id)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def custom_callback(self) -> bool:
        """True when any broker runs a custom ``client.quota.callback.class``."""
        return bool(self.callbacks)

    @property
    def callback_label(self) -> str:
        """What decides quotas here: ``Kafka's default callback`` or the class name(s)."""
        return ", ".join(self.callbacks) or DEFAULT_CALLBACK

    def ladder_label(self) -> str:
        """What the ladder picture is: always Kafka's default callback's; with a custom one,
        the class the brokers run instead."""
        if not self.read:
            return f"{DEFAULT_CALLBACK} ({self.source})."
        if not self.custom_callback:
            return f"{DEFAULT_CALLBACK}: the brokers use this ladder."
        return (f"{DEFAULT_CALLBACK}: not what decides here. The brokers run "
                f"{self.callback_label} ({CALLBACK}).")

    def connection_cap(self) -> SettingsNote | None:
        """KIP-612's broker-wide cap on new connections per second, when a broker sets one
        (``max.connection.creation.rate`` below its default): it binds before any per-ip
        ``connection_creation_rate`` quota above it."""
        capped: dict[int, list[str]] = {}
        default = int(KAFKA_DEFAULTS[CONNECTION_RATE] or 0)
        for b in self.read:
            rate = _positive(b.value(CONNECTION_RATE))
            if rate is not None and rate < default:
                capped.setdefault(rate, []).append(b.node_id)
        if not capped:
            return None
        parts = [f"{rate:,}/s on {_brokers(nodes)}" for rate, nodes in sorted(capped.items())]
        return SettingsNote(
            "connections", f"The brokers also cap new connections from all clients together "
                           f"({CONNECTION_RATE}): {', '.join(parts)}. An ip's "
                           f"connection_creation_rate above that cap never binds.",
            tuple(n for nodes in capped.values() for n in nodes))

    def notes(self) -> list[SettingsNote]:
        """The sentences that change an answer: a custom callback (named), brokers that
        disagree (named), brokers whose settings could not be read."""
        out = []
        for cls, nodes in self.callbacks.items():
            where = "Every broker" if len(nodes) == len(self.read) else \
                _brokers(nodes).capitalize()
            out.append(SettingsNote(
                "callback",
                f"{where} runs a custom quota "
                f"callback, {CALLBACK}={cls}: the describe output does not decide enforcement "
                f"here. The plugin decides each client's quota and bucket; the 8-level ladder "
                f"is {DEFAULT_CALLBACK}'s and may not apply.", tuple(nodes)))
        for d in self.disagreements():
            out.append(SettingsNote(
                "disagree",
                f"The brokers disagree on {d.text()} (a rolling change half done?): each broker "
                f"enforces with its own value; look at {_brokers(d.brokers)}.", d.brokers))
        for b in self.unread:
            out.append(SettingsNote(
                "unread", f"The settings of broker {b.node_id} could not be read ({b.error}): "
                          f"its quota window and callback are not known.", (b.node_id,)))
        return out

    def rows(self) -> list[dict]:
        """One row per setting, one column per broker (node id), for a table."""
        return [{"setting": name, **{f"broker {b.node_id}": b.value(name) for b in self.read}}
                for name in SETTINGS]

    def as_dict(self) -> dict:
        return {"source": self.source, "callback": self.callback_label,
                "custom_callback": self.custom_callback,
                "window": self.window().as_dict(),
                "controller_window": self.controller_window().as_dict(),
                "brokers": [{"broker": b.node_id, "settings": dict(b.values),
                             "sources": dict(b.sources), "error": b.error}
                            for b in self.brokers],
                "disagreements": [{"setting": d.name, "values": [
                    {"value": v, "brokers": list(n)} for v, n in d.values]}
                    for d in self.disagreements()]}


def read_settings(backend) -> ClusterSettings:
    """The broker settings behind ``backend`` (``QuotaBackend.broker_settings``), or Kafka's
    defaults saying why when they cannot be read: an explanation never fails for want of them."""
    from quota_core.errors import QuotaError

    try:
        return backend.broker_settings()
    except QuotaError as exc:
        return ClusterSettings.defaults(f"Kafka's defaults: the brokers' settings could not be "
                                        f"read ({exc})")
