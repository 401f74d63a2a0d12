"""The sentence pieces the pages share (Resolve, Throttled now, Edit, Plan, Quota health):
one template each, so every page says a thing the same, true way.

* :func:`plural` / :func:`verb`: "1 bucket has", "3 buckets have", never "3 buckets had its".
* :func:`against`: a measured rate against its quota. A byte or mutation rate reads
  ``2.4 MiB/s of 2 MiB/s (120%)``; ``request_percentage`` is a share of one request-handler /
  network thread's time (QUOTA_SEMANTICS: 100 = one thread fully busy), so it reads
  ``12.4% of a thread's time, against a quota of 50% of a thread (25% of the quota)``, not
  "12.4% of a thread of 50% of a thread".
* :func:`inherited` / :func:`inherited_short`: a key an entry does not set is not "unlimited"
  when a lower level of the ladder sets it for the entry's clients: "not set on this entry;
  user 'bob' gets 1 MiB/s from {user=<default>} (level 6)".

Every template is pure text from plain values, with names raw (``repr``-quoted where a
sentence quotes them); the pages escape the whole sentence (``ui.text.md`` or
``html.escape``) so a name is shown as written. ``tests/pages/test_wording.py`` parses each one back.
"""
from __future__ import annotations

from typing import Iterable

from quota_core.domain.entities import CLIENT_ID, IP, USER, Entity
from quota_core.domain.keys import QUOTA_KEYS, format_value
from quota_core.domain.units import format_quota, format_rate

__all__ = ["plural", "verb", "against", "inherited", "inherited_short", "entry_clients",
           "quota_changed", "clients_moved", "quota_before", "read_only_refused",
           "versions_differ", "custom_callback_on", "TELEMETRY_NOT_COLLECTED",
           "NO_TELEMETRY_TEXT", "client_no_telemetry", "client_broker_unknown",
           "client_agrees_throttled", "client_ignores_throttle", "client_waits_elsewhere",
           "client_waits_recently", "client_agrees_free", "client_waits_for_another_key",
           "broker_order", "brokers_text", "broker_name", "NO_CLIENT_HISTORY_TEXT",
           "client_wait_history", "ms_text"]

#: What the console says of a cluster that collects nothing clients push (KIP-714): no broker
#: plugin receives the pushes, or the cluster is older than Kafka 3.7.
TELEMETRY_NOT_COLLECTED = "client telemetry is not collected on this cluster"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 bucket``, ``3 buckets``, ``0 buckets``; ``many`` for an irregular plural
    (``plural(2, "entity", "entities")``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def verb(n: int, one: str, many: str) -> str:
    """The verb that agrees with ``n``: ``verb(1, "gets", "get")``."""
    return one if n == 1 else many


def _is_share_of_thread(key: str) -> bool:
    spec = QUOTA_KEYS.get(key)
    return spec is not None and spec.unit == "%"


def against(key: str, rate: float | None, limit: float | None,
            utilisation: float | None = None) -> str:
    """A measured ``rate`` against its quota ``limit`` (``utilisation`` = rate / limit, shown
    when given): ``2.4 MiB/s of 2 MiB/s (120%)``; for ``request_percentage``
    ``12.4% of a thread's time, against a quota of 50% of a thread (25% of the quota)``;
    ``no rate`` when the broker reports none."""
    shown = "no rate" if rate is None else format_rate(key, rate)
    if _is_share_of_thread(key):
        if rate is not None:
            shown += "'s time"
        if limit is None:
            return f"{shown}, with no quota"
        share = "" if utilisation is None else f" ({utilisation:.0%} of the quota)"
        return f"{shown}, against a quota of {format_value(limit)}% of a thread{share}"
    share = "" if utilisation is None else f" ({utilisation:.0%})"
    return f"{shown} of {format_quota(key, limit)}{share}"


def entry_clients(entity: Entity) -> str:
    """Who an entry's quota is for, raw names ``repr``-quoted: ``user 'bob'``,
    ``client id 'app' of user 'bob'``, ``every user without an entry of its own``."""
    if entity.is_ip:
        name = entity.name(IP)
        return "every ip without an entry of its own" if name is None else f"ip {name!r}"
    parts = entity.as_dict()
    user, client_id = parts.get(USER, ...), parts.get(CLIENT_ID, ...)
    u = None if user is ... else ("any user" if user is None else f"user {user!r}")
    c = None if client_id is ... else ("any client id" if client_id is None
                                       else f"client id {client_id!r}")
    if u and c:
        return f"{c} of {u}"
    if u == "any user":
        return "every user without an entry of its own"
    if c == "any client id":
        return "every client id without an entry of its own"
    return u or c or "its clients"


def inherited(entity: Entity, key: str, value: float | None, level: int | None,
              source: Entity | None) -> str:
    """What a key ``entity`` does not set means for its clients: the value a lower level of
    the ladder gives them (``value``, ``level``, ``source`` from
    :func:`quota_core.planning.impact.fallback`), or unlimited when none does.

    ``not set on this entry; user 'bob' gets 1 MiB/s from {user=<default>} (level 6)``."""
    who = entry_clients(entity)
    if level is None or source is None:
        return f"not set on this entry; nothing else limits {who}: unlimited"
    return (f"not set on this entry; {who} gets {format_quota(key, value)} from "
            f"{source.display()} (level {level})")


def inherited_short(key: str, value: float | None, level: int | None,
                    source: Entity | None) -> str:
    """The same in a table cell: ``not set (1 MiB/s from {user=<default>}, level 6)`` or
    ``not set (unlimited)``."""
    if level is None or source is None:
        return "not set (unlimited)"
    return f"not set ({format_quota(key, value)} from {source.display()}, level {level})"


def quota_before(key: str, before: float | None, fallback: tuple | None) -> str:
    """An entry's value before a change, for a table cell: the value it holds, or what its
    clients got without it (``fallback`` = ``(value, level, source)``)."""
    if before is not None:
        return format_quota(key, before)
    if fallback is None:
        return "not set"
    return inherited_short(key, *fallback)


def quota_changed(n: int, window_text: str, lasts_s: float) -> str:
    """Throttled now's note on buckets whose quota changed within the rate window."""
    return (f"{plural(n, 'bucket')} {verb(n, 'had its', 'had their')} quota changed within "
            f"the last rate window ({window_text}): the broker still counts traffic from "
            f"before the change, so throttling there can go on for up to {lasts_s:.0f} s "
            f"after it.")


def clients_moved(n: int, checked: int, kind: str = "known client") -> str:
    """``**3 known clients** get a different effective quota (of 40 checked):`` (markdown
    bold around the count; no name in it)."""
    return (f"**{plural(n, kind)}** {verb(n, 'gets', 'get')} a different effective quota "
            f"(of {checked:,} checked):")


def read_only_refused(cluster: str, source: str) -> str:
    """A write refused on a read-only cluster of the fleet: one line naming it and where
    that is set (issue 29)."""
    return (f"cluster {cluster!r} is read-only (read_only = true in {source}): nothing was "
            f"written. Change it on a cluster that allows writes, or set read_only = false.")


def versions_differ(source: str, source_version: str, target: str, target_version: str) -> str:
    """A promotion between clusters that run different Kafka versions (issue 29)."""
    return (f"cluster {source!r} runs Kafka {source_version} and cluster {target!r} Kafka "
            f"{target_version} (as their ApiVersions answers say): a quota set tested on "
            f"{source!r} may behave differently on {target!r}. Check what changed between "
            f"the two versions before you apply.")


def custom_callback_on(cluster: str, callback: str, brokers: str) -> str:
    """A promotion to or from a cluster whose brokers run a custom quota callback
    (``client.quota.callback.class``, KIP-257)."""
    return (f"cluster {cluster!r} runs a custom quota callback on {brokers}, "
            f"client.quota.callback.class={callback}: its quota entries do not decide "
            f"enforcement there (the plugin picks each client's quota and bucket), so the same "
            f"entries can limit clients differently on the two clusters.")


# --------------------------------------------------------------------------- the client's side
# quota_core.throttling.client_view: what the clients of a bucket report (KIP-714) beside the broker's
# verdict. One sentence each; the brokers are named as the live sentences name them.

def ms_text(ms: float | None) -> str:
    """A wait as people read it: ``480 ms``, ``1.2 s``; ``an unknown time`` for None. The one
    rule for every sentence that names a throttle time (live, story, the client's side)."""
    if ms is None:
        return "an unknown time"
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def _clients(n: int) -> str:
    return "the client" if n == 1 else f"{n:,} client instances"


def _where(brokers) -> str:
    return brokers_text(brokers) if brokers else "a broker"


#: Clients that push nothing: never read as "not throttled".
NO_TELEMETRY_TEXT = "no telemetry: no subscription matches, or the client is too old"


#: History's bucket view when no sample of the range carries what the clients reported.
NO_CLIENT_HISTORY_TEXT = ("no client telemetry in this range: none of the bucket's clients "
                          "pushed a throttle time (KIP-714) while the collector ran")


def client_wait_history(mean_ms: float, max_ms: float, hours: int, of_hours: int) -> str:
    """History's bucket view: what the bucket's clients reported waiting, per request (they
    push averages, no request counts, so no total is claimed): ``the clients of this bucket
    reported waiting on average 480 ms per request (at most 900 ms) in 3 of the range's 6
    hours with samples``."""
    return (f"the clients of this bucket reported waiting on average {mean_ms:,.0f} ms per "
            f"request (at most {max_ms:,.0f} ms) in {hours:,} of the range's "
            f"{plural(of_hours, 'hour')} with samples")


def client_no_telemetry(key: str, instances: bool, collected: bool = True,
                        directions: tuple[str, ...] = ("produce",),
                        other: tuple[str, ...] = ()) -> str:
    """No instance of the bucket reports a throttle time: why, never "not throttled".
    ``other``: the directions its instances do report a throttle time for."""
    if not collected:
        return (f"{TELEMETRY_NOT_COLLECTED} (no broker shows pushed client metrics): the client's "
                f"side is unknown")
    if instances and not directions:
        return f"clients push no throttle time for {key}: the client's side is unknown"
    if instances and other:
        # a producer in a consumer_byte_rate bucket (or the reverse): nothing to wait for
        return (f"the clients push {' and '.join(other)} throttle times but none for "
                f"{' or '.join(directions)}: they do not {' or '.join(directions)} here")
    if instances:
        return ("the clients push telemetry but no throttle time: add the throttle metrics "
                "to the subscription (`telemetry subscribe`)")
    return NO_TELEMETRY_TEXT


def client_broker_unknown(n: int, avg_ms: float) -> str:
    """The broker side is unknown (a broker not read): no agreement is claimed."""
    said = (f"reports waiting {ms_text(avg_ms)} per request" if avg_ms
            else "reports no throttle time")
    return (f"{_clients(n)} {said}, but whether the broker throttles this bucket is unknown "
            f"(a broker was not read): no agreement is claimed")


def client_agrees_throttled(brokers, waiting: int, reporting: int, avg_ms: float | None,
                            max_ms: float | None) -> str:
    """Both sides throttled: the example of issue 30."""
    who = "the client reports" if reporting == 1 else (
        f"{waiting:,} of its {reporting:,} client instances report")
    most = f" (at most {ms_text(max_ms)})" if max_ms is not None and avg_ms is not None \
        and max_ms > avg_ms else ""
    return (f"the broker throttles this bucket on {_where(brokers)}, and {who} waiting "
            f"{ms_text(avg_ms)} per request there{most}")


def client_ignores_throttle(brokers, reporting: int) -> str:
    """The broker throttles, the clients report zero throttle time."""
    who = "the client reports" if reporting == 1 else "its clients report"
    return (f"the broker throttles this bucket on {_where(brokers)}, but {who} no throttle "
            f"time: it may ignore throttling (clients before KIP-219 do)")


def client_waits_elsewhere(n: int, avg_ms: float | None) -> str:
    """The clients wait, no client quota bucket of theirs is throttled."""
    who = "the client reports" if n == 1 else f"{n:,} client instances report"
    return (f"{who} throttle time ({ms_text(avg_ms)} per request), but no client quota bucket "
            f"of it is throttled: look at other quotas (replication, controller mutation, "
            f"connection rate)")


def client_waits_for_another_key(n: int, avg_ms: float | None, keys: tuple[str, ...]) -> str:
    """The clients wait, and the broker throttles them, through another quota key: a
    client's throttle time is one figure for all the quotas of a request (Kafka answers with
    the largest delay), so it is that key's wait, not this one's."""
    who = "the client reports" if n == 1 else f"{n:,} client instances report"
    return (f"{who} waiting {ms_text(avg_ms)} per request, from its {' and '.join(keys)} "
            f"quota, which the broker throttles now; this key does not throttle it")


def client_waits_recently(n: int, avg_ms: float | None) -> str:
    """The broker throttled recently; the clients' averages still hold those waits."""
    who = "the client reports" if n == 1 else f"{n:,} client instances report"
    return (f"the broker throttled this bucket recently, not now, and {who} waiting "
            f"{ms_text(avg_ms)} per request over its last pushes")


def client_agrees_free(n: int) -> str:
    """Neither side throttles."""
    who = "the client reports" if n == 1 else "its clients report"
    return f"the broker does not throttle this bucket, and {who} no throttle time"


# ------------------------------------------------------------------ brokers in a sentence
def broker_order(label: str) -> tuple:
    """Sort key: node ids numerically ("2" before "10"), then other labels (host:port, a
    user's LABEL) as text."""
    return (0, int(label), "") if label.isdigit() else (1, 0, label)


def brokers_text(labels: Iterable[str]) -> str:
    """``broker 2``, ``brokers 1 and 3``, ``brokers 1, 2 and 3``."""
    names = sorted(dict.fromkeys(labels), key=broker_order)
    if not names:
        return "no broker"
    if len(names) == 1:
        return f"broker {names[0]}"
    return f"brokers {', '.join(names[:-1])} and {names[-1]}"


def broker_name(label: str) -> str:
    """How a sentence names a broker: a node id reads ``broker 2``; another label (a user's
    ``LABEL=URL``, an unread endpoint's host:port) stays as it is."""
    return f"broker {label}" if label.isdigit() else label
