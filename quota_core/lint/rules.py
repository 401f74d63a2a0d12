"""The lint rules: one table (:data:`RULES`), each row a rule id, its severity, the data it
needs, what it catches, its fix, and its check function. Pure.

Every check reads a :class:`~quota_core.lint.model.LintInput` and returns findings, one per
rule, entry and key. A fix writes each entry it touches with *all* its keys (a desired file is
exact per entry), computed against the quota set linted: apply one, lint again.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from quota_core.domain import ladder
from quota_core.domain.entities import CLIENT_ID, USER, Entity
from quota_core.domain.keys import CLIENT_KEYS
from quota_core.domain.membership import UNNAMED
from quota_core.domain.resolution import resolve_values
from quota_core.domain.shadows import dead_keys
from quota_core.analysis.quota_sizing import suggest_quota
from quota_core.throttling.throttle import estimate_throttle
from quota_core.domain.units import format_exact, format_quota, format_rate
from quota_core.lint import usage as U
from quota_core.lint.model import (SEVERITIES, WELL_KNOWN, Finding, LintInput, Protected,
                                   exempt_value, request_cap, super_users)

__all__ = ["Rule", "RULES", "RULE_IDS", "LintReport", "run_lint", "NEEDS"]

#: What a rule reads, in words (docs/lint.md's column and the empty state's).
NEEDS = {"quotas": "the quota set",
         "settings": "the quota set and the brokers' settings (Kafka's defaults without a "
                     "cluster)",
         "brokers": "a cluster (every broker's settings)",
         "history": "the usage history (--history DIR)",
         "live": "the brokers' metrics endpoints (--metrics URL[,URL...])"}


def _pct(x: float) -> str:
    return f"{x:.0f} %" if x >= 10 else f"{x:.1f} %"


def _with(quotas, entity: Entity, key: str, value: float | None) -> dict[str, float]:
    """``entity``'s keys as they are, with ``key`` set to ``value`` (removed for None)."""
    held = dict(quotas.get(entity, {}))
    if value is None:
        held.pop(key, None)
    else:
        held[key] = value
    return held


def _is_default(entity: Entity) -> bool:
    return any(name is None for _, name in entity)


def _names(items: list[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# --------------------------------------------------------------------------- protected
def _protected_names(inp: LintInput) -> dict[tuple[str, str], list[str]]:
    """Every protected principal lint can name: (kind, name) → the sources protecting it.
    Names come from literal patterns, the entries and the history's tags."""
    supers, _ = super_users(inp.settings)
    patterns: list[Protected] = list(inp.protected) + supers + list(WELL_KNOWN)
    seen: dict[str, set[str]] = {USER: set(), CLIENT_ID: set()}
    if inp.usage is not None and not inp.usage.empty:
        for kind, col in ((USER, "user"), (CLIENT_ID, "client_id")):
            seen[kind] = {v for v in inp.usage[col].dropna().unique() if isinstance(v, str)}
    known: dict[str, set[str]] = {USER: set(seen[USER]), CLIENT_ID: set(seen[CLIENT_ID])}
    for entity in inp.quotas:
        for kind in (USER, CLIENT_ID):
            if entity.has(kind) and entity.name(kind) is not None:
                known[kind].add(entity.name(kind))
    out: dict[tuple[str, str], list[str]] = {}
    for p in patterns:
        names = seen[p.kind] if p.seen_only else known[p.kind] | (
            {p.pattern} if p.literal else set())
        for name in sorted(n for n in names if p.matches(n)):
            sources = out.setdefault((p.kind, name), [])
            if p.source not in sources:
                sources.append(p.source)
    return out


def _partners(inp: LintInput, kind: str, name: str) -> list[str]:
    """The other half of the protected principal's buckets seen in the history (client ids
    of a user, users of a client id), else one name that no entry holds."""
    found: list[str] = []
    if inp.usage is not None and not inp.usage.empty:
        col, other = ("user", "client_id") if kind == USER else ("client_id", "user")
        rows = inp.usage[inp.usage[col] == name]
        found = sorted({v for v in rows[other].dropna().unique() if isinstance(v, str)})
    return found or [UNNAMED]


def check_protected_under_default(inp: LintInput) -> list[Finding]:
    bound: dict[tuple[Entity, str], dict[tuple[str, str], float]] = {}
    protected = _protected_names(inp)
    for (kind, name), _sources in protected.items():
        for partner in _partners(inp, kind, name):
            user, client = (name, partner) if kind == USER else (partner, name)
            for key, found in resolve_values(inp.quotas, user, client, CLIENT_KEYS).items():
                if found is None:
                    continue
                source = ladder.source_entity(found[1], user, client)
                if (source.has(kind) and source.name(kind) == name) or not _is_default(source):
                    continue  # its own entry, or an entry naming it: not a default's doing
                bound.setdefault((source, key), {})[(kind, name)] = found[0]
    out = []
    for (source, key), who in sorted(bound.items(), key=lambda kv: (kv[0][0].sort_key(),
                                                                     kv[0][1])):
        value = next(iter(who.values()))
        named = [f"{'user' if k == USER else 'client id'} {n!r} ({', '.join(protected[(k, n)])})"
                 for k, n in sorted(who)]
        fix = {}
        for kind, name in sorted(who):
            target = Entity.of(user=name) if kind == USER else Entity.of(user=None,
                                                                          client_id=name)
            fix[target] = _with(inp.quotas, target, key,
                                exempt_value(key, inp.settings))
        out.append(Finding(
            "protected-under-default", "error", source, key,
            f"{source.display()} sets {key} to {format_quota(key, value)} for the protected "
            f"{_names(named)}: a default quota throttles the cluster's own clients; the fix "
            f"gives each its own entry that never throttles.", fix))
    return out


# --------------------------------------------------------------------------- entries alone
def check_never_binds(inp: LintInput) -> list[Finding]:
    out = []
    for entity, dead in sorted(dead_keys(inp.quotas).items(), key=lambda kv: kv[0].sort_key()):
        for d in dead:
            out.append(Finding("never-binds", "warning", entity, d.key, d.reason() + (
                f" Its value {format_quota(d.key, inp.quotas[entity][d.key])} is never used; "
                f"the fix removes it."), {entity: _with(inp.quotas, entity, d.key, None)}))
    return out


def _settings_where(inp: LintInput) -> str:
    return (f"read from {len(inp.settings.read)} brokers" if inp.brokers_read else
            inp.settings.source)


def check_too_small(inp: LintInput) -> list[Finding]:
    window = inp.settings.window()
    mmb_text = inp.settings.value("message.max.bytes")
    try:
        mmb = int(str(mmb_text))
    except ValueError:
        mmb = 1048588
    where = _settings_where(inp)
    out = []
    for entity in sorted(inp.quotas, key=Entity.sort_key):
        for key in ("producer_byte_rate", "consumer_byte_rate"):
            q = inp.quotas[entity].get(key)
            if q is None or not q == q or q <= 0:
                continue
            allowance = q * window.samples * window.sample_s
            if allowance >= mmb:
                continue
            # One batch of message.max.bytes, measured over the window's shortest span.
            observed = mmb / ((window.samples - 1) * window.sample_s)
            throttle = estimate_throttle(key, observed, q, window=window).throttle_ms
            need = -(-mmb // (window.samples * window.sample_s))
            out.append(Finding(
                "too-small", "warning", entity, key,
                f"{key} {format_quota(key, q)} × {window.samples} samples × "
                f"{window.sample_s} s = {format_exact(key, allowance).split(' ')[0]} bytes per "
                f"quota window, under message.max.bytes {mmb:,} ({where}): one batch of that size alone is throttled about "
                f"{throttle / 1000:,.1f} s ({throttle:,} ms); the fix raises it to "
                f"{need:,} B/s, the least that fits one batch.",
                {entity: _with(inp.quotas, entity, key, float(need))}))
    return out


def check_cannot_bind(inp: LintInput) -> list[Finding]:
    cap, threads = request_cap(inp.settings)
    where = _settings_where(inp)
    out = []
    for entity in sorted(inp.quotas, key=Entity.sort_key):
        q = inp.quotas[entity].get("request_percentage")
        if q is None or not q > cap:
            continue
        out.append(Finding(
            "cannot-bind", "warning", entity, "request_percentage",
            f"request_percentage {format_quota('request_percentage', q)} is above what one "
            f"broker's threads can use together, {cap:,.0f} % ({threads}, {where}): it never "
            f"throttles anyone; the fix sets it to {cap:,.0f}, which behaves the same and says "
            f"so.", {entity: _with(inp.quotas, entity, "request_percentage", cap)}))
    return out


def check_brokers_disagree(inp: LintInput) -> list[Finding]:
    out = []
    for d in inp.settings.disagreements():
        out.append(Finding(
            "brokers-disagree", "warning", None, d.name,
            f"The brokers disagree on {d.text()}: each broker enforces with its own value; "
            f"set it alike on every broker (a broker setting, no quota change fixes it).", {}))
    return out


# --------------------------------------------------------------------------- history
def check_stale(inp: LintInput) -> list[Finding]:
    days = inp.options.stale_days
    span = U.span(inp.usage)
    recent = U.last_days(inp.usage, days)
    out = []
    for entity in sorted(inp.quotas, key=Entity.sort_key):
        if entity.is_ip:
            continue
        named = {k: entity.name(k) for k in (USER, CLIENT_ID)
                 if entity.has(k) and entity.name(k) is not None}
        if not named:
            continue
        def having(frame):
            mask = None
            for kind, name in named.items():
                m = frame["user" if kind == USER else "client_id"] == name
                mask = m if mask is None else mask & m
            return frame[mask]
        if not having(recent).empty:
            continue
        ever = having(inp.usage)
        last = ("never in the recorded history" if ever.empty else
                f"last seen {U.when_text(max(ever['ts']).to_pydatetime())}")
        who = " and ".join(f"{'user' if k == USER else 'client id'} {n!r}"
                           for k, n in named.items())
        out.append(Finding(
            "stale", "info", entity, None,
            f"No usage sample of the last {days:g} d (to {U.when_text(span.end)}) has "
            f"{who} in its tags ({last}): the entry limits nobody seen; the fix removes it.",
            {entity: {}}))
    return out


def _bound_by(inp: LintInput, stats):
    """Each bucket of ``stats`` with the entry that binds it in the linted quota set."""
    from quota_core.domain.bulk import bulk_resolve_buckets

    users, clients = list(stats["user"]), list(stats["client_id"])
    resolved = bulk_resolve_buckets(inp.quotas, users, clients, CLIENT_KEYS)
    rows = []
    for i, (u, c, key) in enumerate(zip(users, clients, stats["key"])):
        level = int(resolved.levels[key][i])
        rows.append(ladder.source_entity(level, u or "", c or "") if level else None)
    return rows


def _principal(source: Entity, row) -> Entity | None:
    """The entry of its own for the principal of ``row``'s bucket under the default entry
    ``source``: each default name filled with the bucket's tag ({user=<default>} and user
    alice's bucket: {user=alice}); None when the bucket has no such tag to name it by."""
    pairs = []
    for kind, name in source:
        if name is None:
            name = row.user if kind == USER else row.client_id
            if not name:
                return None
        pairs.append((kind, name))
    return Entity.from_pairs(pairs)


def _principals_text(source: Entity, n: int) -> str:
    """What the principals under a default entry are, in words: ``9 users``."""
    user, client = (source.has(USER) and source.name(USER) is None,
                    source.has(CLIENT_ID) and source.name(CLIENT_ID) is None)
    what = ("user and client id pair" if user and client else "user" if user else "client id")
    return f"{n} {what}{'' if n == 1 else 's'}"


def check_chronic(inp: LintInput) -> list[Finding]:
    """An entry whose buckets are throttled much of the time. A fix never loosens an entry
    that binds many principals to fit one of them: under a default entry, each chronically
    throttled principal gets an entry of its own sized from its p99, and the default itself
    is raised only when most principals under it are throttled (the evidence says how many)."""
    days, limit = inp.options.chronic_days, inp.options.chronic_pct
    stats = U.bucket_stats(U.last_days(inp.usage, days))
    if stats.empty:
        return []
    stats = stats.assign(source=_bound_by(inp, stats))
    span = U.span(U.last_days(inp.usage, days))
    shown_days = min(days, span.days) if span else days
    groups: dict[tuple[Entity, str], list] = {}
    for row in stats.itertuples():
        if row.source is not None:
            groups.setdefault((row.source, row.key), []).append(row)

    def is_chronic(r) -> bool:
        return bool(r.sampled_s) and r.throttled_s / r.sampled_s * 100 > limit

    out = []
    for (source, key), rows in sorted(groups.items(), key=lambda kv: (kv[0][0].sort_key(),
                                                                      kv[0][1])):
        chronic = sorted((r for r in rows if is_chronic(r)),
                         key=lambda r: -r.throttled_s / r.sampled_s)
        if not chronic:
            continue
        current = inp.quotas.get(source, {}).get(key)
        buckets = [f"{_bucket(r)} {_pct(r.throttled_s / r.sampled_s * 100)}" for r in chronic]
        seen = (f"{source.display()} {key} ({format_quota(key, current)}) kept "
                f"{len(chronic)} bucket{'' if len(chronic) == 1 else 's'} throttled more than "
                f"{limit:g} % of the last {shown_days:.1f} d ({_names(buckets, 4)}, of "
                f"broker-time sampled)")
        # Under a default: the principals it binds (a user, a client id, or a pair), each
        # with its buckets; throttled when one of its buckets is.
        under: dict[Entity, list] = {}
        if _is_default(source):
            for r in rows:
                own = _principal(source, r)
                if own is not None:
                    under.setdefault(own, []).append(r)
        hot = {e: rs for e, rs in under.items() if any(is_chronic(r) for r in rs)}
        if not _is_default(source) or len(hot) * 2 > len(under):
            need = suggest_quota(key, max(r.p99 for r in rows))
            hint = U.sized(key, need)
            if current is not None and current >= need:
                continue  # throttled under an older, lower quota: raised since
            most = (f"; {len(hot)} of {_principals_text(source, len(under))} under "
                    f"{source.display()} {'is' if len(hot) == 1 else 'are'} throttled"
                    if under else "")
            out.append(Finding(
                "chronic", "warning", source, key,
                f"{seen}{most}; the largest per-bucket p99 rate of the buckets it binds is "
                f"{format_rate(key, hint)}: the fix sets it to that (the sizing hint).",
                {source: _with(inp.quotas, source, key, hint)}))
            continue
        # A few of many: an entry of their own each, the default left as it is.
        needs = {e: suggest_quota(key, max(r.p99 for r in rs)) for e, rs in hot.items()}
        own = {e: U.sized(key, v) for e, v in needs.items() if current is None or v > current}
        if not own:
            continue  # throttled under an older, lower default: it gives their p99 now
        ordered = sorted(own.items(), key=lambda kv: kv[0].sort_key())
        if len(ordered) == 1:
            e, v = ordered[0]
            gives = (f"{e.display()} an entry of its own at {format_rate(key, v)}, the largest "
                     f"per-bucket p99 rate of its buckets (the sizing hint)")
        else:
            gives = ("each an entry of its own at the largest per-bucket p99 rate of its "
                     "buckets (the sizing hint): " + _names(
                         [f"{e.display()} at {format_rate(key, v)}" for e, v in ordered], 4))
        out.append(Finding(
            "chronic", "warning", source, key,
            f"{seen}; only {len(hot)} of {_principals_text(source, len(under))} under "
            f"{source.display()} {'is' if len(hot) == 1 else 'are'} throttled, so the default "
            f"stays as it is; the fix gives {gives}.",
            {e: _with(inp.quotas, e, key, v) for e, v in own.items()}))
    return out


def _bucket(row) -> str:
    from quota_core.analysis.history import client_label

    return client_label(row.user, row.client_id)


def check_churning(inp: LintInput) -> list[Finding]:
    """Many users behind one client id, some of them with quotas keyed by user: the next
    users (a new session principal) miss those entries and fall to whatever else binds."""
    keyed_frame = U.with_keys(U.last_days(inp.usage, inp.options.stale_days))
    pairs = keyed_frame[keyed_frame["user"].notna() & keyed_frame["client_id"].notna()]
    out = []
    for (client, key), group in sorted(pairs.groupby(["client_id", "key"]),
                                       key=lambda kv: kv[0]):
        users = sorted(set(group["user"]))
        if len(users) < inp.options.churn_users:
            continue
        keyed, others = {}, Counter()
        for u in users:
            found = resolve_values(inp.quotas, u, client, (key,))[key]
            source = found and ladder.source_entity(found[1], u, client)
            if source and source.has(USER) and source.name(USER) == u:
                keyed[u] = found[0]
            else:
                others[source.display() if source else "no quota"] += 1
        if not keyed:
            continue
        value = Counter(keyed.values()).most_common(1)[0][0]
        target = Entity.of(client_id=client)
        if any(d.key == key for d in dead_keys({**inp.quotas, target: {key: value}}).get(
                target, [])):
            target = Entity.of(user=None, client_id=client)  # {client-id=C} would be shadowed
        rest = ", ".join(f"{n} {what}" for what, n in others.most_common())
        out.append(Finding(
            "churning-principals", "warning", target, key,
            f"{len(users)} distinct users used client id {client!r} in the last "
            f"{inp.options.stale_days:g} d; {len(keyed)} have {key} keyed by user "
            f"({_names([repr(u) for u in keyed], 3)}), the other {len(users) - len(keyed)} "
            f"get {rest}: quotas keyed by user keep missing the next ones; the fix keys it by "
            f"the client id at {format_quota(key, value)} (what the user-keyed entries give).",
            {target: _with(inp.quotas, target, key, value)}))
    return out


def _short_history(inp: LintInput) -> str | None:
    span = U.span(inp.usage)
    if span is not None and span.days < inp.options.stale_days:
        return (f"the history covers {span.days:.1f} d, less than --stale-days "
                f"{inp.options.stale_days:g}")
    return None


# --------------------------------------------------------------------------- the client's side
def check_client_ignores_throttle(inp: LintInput) -> list[Finding]:
    """A bucket the broker throttles now while every client instance of it that pushes
    reports zero throttle time (quota_core.throttling.client_view: ``client-not-throttled``)."""
    from quota_core.throttling.client_view import CLIENT_NOT_THROTTLED
    from quota_core.throttling.verdict import tags_entity

    out = []
    for (key, user, client_id), view in inp.clients or ():
        if view.agreement != CLIENT_NOT_THROTTLED:
            continue
        who = ", ".join(f"client id {i.client_id!r} ({i.software})" for i in view.instances)
        out.append(Finding(
            "client-ignores-throttle", "warning", tags_entity((user, client_id)), key,
            f"{view.sentence}; the clients: {who}. A client that ignores the throttle is "
            f"muted by the broker instead (its channel is held for the throttle time): "
            f"upgrade it to a client that honours KIP-219."))
    return out


def check_no_telemetry_subscription(inp: LintInput) -> list[Finding]:
    """No client pushes its metrics (KIP-714): the plugin is missing, no subscription
    matches, or the clients are too old; and each throttled bucket none of whose clients
    push: its client's side is unknown."""
    from quota_core.throttling.client_view import NO_TELEMETRY
    from quota_core.throttling.verdict import tags_entity
    from quota_core.domain.wording import NO_TELEMETRY_TEXT, TELEMETRY_NOT_COLLECTED

    if inp.clients is None:
        return []
    if not inp.telemetry:
        return [Finding("no-telemetry-subscription", "info", None, None,
                        f"{TELEMETRY_NOT_COLLECTED}: no broker endpoint read shows the "
                        f"client-telemetry plugin's series; add the plugin to the brokers "
                        f"(docs/client-telemetry.md).")]
    if not inp.client_instances:
        return [Finding("no-telemetry-subscription", "info", None, None,
                        f"{NO_TELEMETRY_TEXT}: the brokers collect client telemetry, but no "
                        f"client pushes; create a subscription "
                        f"(`kafka-client-quotas telemetry subscribe`).")]
    return [Finding("no-telemetry-subscription", "info", tags_entity((user, client_id)), key,
                    f"the broker throttles this bucket, and none of its clients pushes "
                    f"telemetry ({NO_TELEMETRY_TEXT})")
            for (key, user, client_id), view in inp.clients
            if view.agreement == NO_TELEMETRY and view.throttled]


# --------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    needs: str
    catches: str
    fix: str
    check: Callable[[LintInput], list[Finding]] = field(repr=False)
    #: Why the rule cannot judge this input although its data is there (None: it can).
    unready: Callable[[LintInput], str | None] = field(default=lambda inp: None, repr=False)


RULES: tuple[Rule, ...] = (
    Rule("protected-under-default", "error", "quotas",
         "a `<default>` entry that binds a protected principal (super.users, --protected, "
         "[lint] protected, well-known internal clients seen in the history)",
         "an entry of its own for each, that never throttles", check_protected_under_default),
    Rule("never-binds", "warning", "quotas",
         "a key of an entry that can never bind any client (a higher level always sets it "
         "first)", "remove the key", check_never_binds),
    Rule("too-small", "warning", "settings",
         "producer/consumer_byte_rate × quota.window.num × quota.window.size.seconds < "
         "message.max.bytes: one batch is throttled for seconds",
         "raise it to the least that fits one batch", check_too_small),
    Rule("cannot-bind", "warning", "settings",
         "request_percentage above (num.io.threads + num.network.threads) × 100: it never "
         "throttles", "set it to that cap", check_cannot_bind),
    Rule("brokers-disagree", "warning", "brokers",
         "quota-related broker settings that differ between brokers",
         "none in quotas: set the setting alike on every broker", check_brokers_disagree),
    Rule("stale", "info", "history",
         "an entry whose users / client ids appear in no usage sample of the last N days "
         "(--stale-days, 7)", "remove the entry", check_stale, _short_history),
    Rule("churning-principals", "warning", "history",
         "many distinct users behind one client id (--churn-users, 10), some with quotas "
         "keyed by user: those entries keep missing the next users", "key the quota by the client id", check_churning),
    Rule("chronic", "warning", "history",
         "an entry whose buckets were throttled more than X % (--chronic-pct, 10) of the "
         "last 7 days", "the sizing hint, the largest per-bucket p99 rate: under a "
         "`<default>` an entry of its own for each throttled principal; the default itself "
         "only when most principals under it are throttled", check_chronic),
    Rule("client-ignores-throttle", "warning", "live",
         "a bucket the broker throttles now while every client of it that pushes its metrics "
         "(KIP-714) reports zero throttle time: it may ignore throttling (clients before "
         "KIP-219)", "none in quotas: upgrade the client", check_client_ignores_throttle),
    Rule("no-telemetry-subscription", "info", "live",
         "no client pushes its metrics (KIP-714): the brokers lack the plugin, or no "
         "CLIENT_METRICS subscription matches; or a throttled bucket none of whose clients "
         "push", "none in quotas: `kafka-client-quotas telemetry subscribe`",
         check_no_telemetry_subscription),
)
RULE_IDS: tuple[str, ...] = tuple(r.id for r in RULES)
assert all(r.severity in SEVERITIES for r in RULES) and all(r.needs in NEEDS for r in RULES)


@dataclass(frozen=True)
class LintReport:
    findings: list[Finding]
    #: (rule id, what it ran on) and (rule id, why not).
    ran: list[tuple[str, str]]
    skipped: list[tuple[str, str]]

    def counts(self) -> dict[str, int]:
        c = Counter(f.severity for f in self.findings)
        return {s: c[s] for s in SEVERITIES if c[s]}


def _data(inp: LintInput, needs: str) -> tuple[bool, str]:
    entries = f"{len(inp.quotas):,} entries of {inp.quotas_source}"
    if needs == "quotas":
        return True, entries
    if needs == "settings":
        return True, f"{entries}; broker settings {_settings_where(inp)}"
    if needs == "brokers":
        return (inp.brokers_read, f"{len(inp.settings.read)} brokers' settings"
                if inp.brokers_read else f"no brokers' settings ({inp.settings.source})")
    if needs == "live":
        if inp.clients is None:
            return False, "no live figures (give --metrics URL[,URL...] with a cluster)"
        return True, (f"{inp.live_source}: {len(inp.clients):,} live buckets, "
                      f"{inp.client_instances:,} client instances pushing")
    if inp.usage is None or inp.usage.empty:
        return False, "no usage history (give --history DIR)"
    span = U.span(inp.usage)
    return True, (f"{len(inp.usage):,} usage samples of {inp.history_source} "
                  f"({U.when_text(span.start)} to {U.when_text(span.end)})")


def run_lint(inp: LintInput) -> LintReport:
    """Every rule whose data is there, findings most severe first."""
    findings, ran, skipped = [], [], []
    for rule in RULES:
        ok, what = _data(inp, rule.needs)
        why_not = None if not ok else rule.unready(inp)
        if not ok or why_not:
            skipped.append((rule.id, why_not or what))
            continue
        ran.append((rule.id, what))
        findings += rule.check(inp)
    findings.sort(key=lambda f: (SEVERITIES.index(f.severity), RULE_IDS.index(f.rule)))
    return LintReport(findings, ran, skipped)
