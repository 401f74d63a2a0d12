"""The sidebar: the connection card, the "Editor" sign-in part, the banners above every
page, and the editing gate at the top of the pages that write.

:func:`sidebar` picks the connection, opens it through the process-wide registry
(:mod:`ui.registry`), shows what it is (cluster id, broker count, never a password) and
who is at the keyboard (:mod:`ui.identity` decides), then stores the
:class:`ui.page_context.PageContext` that pages read (through :mod:`ui.context`).
"""
from __future__ import annotations

import os

import streamlit as st

from quota_core.backends.base import QuotaBackend
from quota_core.changes.audit import AuditLog
from quota_core.errors import QuotaError
from quota_core.throttling import brokers_text

from ui.page_context import PageContext, remember, secrets_dict
from ui.identity import (LOCAL, LOCAL_MODE_DETAIL, LOCAL_MODE_NOTICE, PROXY, SIGNIN, Identity,
                         access_mode, identify, setup_banner)
from ui.registry import Health, Snapshot, _clock, registry, stale_notice
from ui.settings import (AccessPolicy, ConnectionSpec, access_policy, audit_path, cache_ttl,
                         connections, kafka_timeout, watch_every)
from ui.fleet import (CLUSTER_PARAM, cluster_policy, cluster_spec, console_fleet, fleet_configured,
                      pick_cluster, read_only_refusal, unknown_cluster)
from ui.text import code, md

__all__ = ["sidebar", "card_state", "connection_banner", "editing_gate", "may_apply"]


def _header(name: str) -> str | None:
    try:
        value = st.context.headers.get(name)
    except Exception:  # noqa: BLE001 - no request context (tests, scripts)
        return None
    return value.strip() if value and value.strip() else None


def _describe_error(spec: ConnectionSpec, exc: Exception) -> str:
    reason = str(exc) if isinstance(exc, QuotaError) else f"{type(exc).__name__}: {exc}"
    return f"Cannot read quotas from {spec.label} ({spec.location}): {reason}"


def sidebar() -> PageContext:
    """Render the connection sidebar and build the page context."""
    env, secrets = dict(os.environ), secrets_dict()
    policy = access_policy(env, secrets)
    ttl = cache_ttl(env, secrets)
    audit = AuditLog(audit_path(env, secrets))
    reg = registry()
    reg.timeout_s = kafka_timeout(env, secrets)
    spec: ConnectionSpec | None = None
    snapshot: Snapshot | None = None
    backend: QuotaBackend | None = None
    error: str | None = None
    fleet = cluster = None
    specs: list[ConnectionSpec] = []
    with st.sidebar:
        st.markdown("#### Connection")
        if fleet_configured(env, secrets):
            fleet, cluster, error = _pick_from_fleet(env, secrets)
            if cluster is not None:
                spec = cluster_spec(cluster)
                specs = [cluster_spec(c) for c in fleet]
                policy = cluster_policy(policy, cluster)
                if cluster.audit_log:
                    audit = AuditLog(cluster.audit_log)
        else:
            specs = connections(env, secrets)
            error = _legacy_address_error(env, secrets)
            if not specs:
                error = ("No cluster is configured. Start the console with `make run` (it "
                         "starts a local broker), or set QUOTA_BOOTSTRAP_SERVERS / "
                         "QUOTA_SANDBOX, or add a [kafka] section to .streamlit/secrets.toml.")
                st.caption("Not connected.")
            elif error is None and len(specs) > 1:
                labels = [f"{s.label} — {s.location}" for s in specs]
                idx = st.selectbox("Use", range(len(specs)), format_func=labels.__getitem__,
                                   key="connection_choice")
                spec = specs[idx or 0]
            elif error is None:
                spec = specs[0]
        if spec is not None:
            try:
                backend = reg.backend(spec)
                snapshot = reg.snapshot(spec, ttl)
                reg.watch(spec, watch_every(env, secrets))
            except Exception as exc:  # noqa: BLE001 - shown as the banner, the app still loads
                error = _describe_error(spec, exc)
                reg.drop(spec)
                backend = None
            _connection_card(spec, snapshot)
            if st.button("Refresh", key="refresh_snapshot", icon=":material/refresh:",
                         help="Describe the quotas again now (otherwise every "
                              f"{ttl:.0f} s, and after every change made here)."):
                reg.invalidate(spec)
                st.rerun()
        identity = _identity(policy)
    ctx = PageContext(spec, backend, snapshot, error, policy, identity.name, identity, audit,
                      specs, fleet=fleet, cluster=cluster)
    remember(ctx)
    return ctx


#: The sidebar's cluster picker (its widget key; the session's last pick).
PICKER_KEY = "fleet_cluster"


def _picked() -> None:
    """The picker changed: the address follows, so the link shows the cluster picked."""
    name = st.session_state.get(PICKER_KEY)
    if name:
        st.query_params[CLUSTER_PARAM] = name


def _pick_from_fleet(env, secrets):
    """The fleet, the cluster this run shows (the address's ``?cluster=``, else this
    session's pick, else the first) and the error that stops the page from showing any."""
    try:
        fleet = console_fleet(env, secrets)
    except QuotaError as exc:
        st.caption("Not connected.")
        return None, None, f"The fleet's configuration cannot be used: {exc}"
    names = fleet.names()
    if not names:
        st.caption("Not connected.")
        return fleet, None, f"The fleet ({fleet.source}) names no cluster."
    asked = st.query_params.get(CLUSTER_PARAM)
    chosen, problem = pick_cluster(names, asked, st.session_state.get(PICKER_KEY))
    st.session_state[PICKER_KEY] = chosen
    labels = {c.name: (c.display_name if c.display_name == c.name
                       else f"{c.display_name} ({c.name})") for c in fleet}
    st.selectbox("Cluster", names, key=PICKER_KEY, format_func=labels.__getitem__,
                 on_change=_picked, placeholder="Pick a cluster",
                 help="Every page shows the cluster picked here; the address carries it "
                      "(?cluster=NAME), so a link opens the same view.")
    if chosen is None:
        return fleet, None, problem
    # Written only when it differs: a pasted link, or a page opened from the menu, which
    # drops the query (a write costs the browser a round trip, not a second run).
    if asked != chosen:
        st.query_params[CLUSTER_PARAM] = chosen
    return fleet, fleet.clusters[chosen], None


def _legacy_address_error(env, secrets) -> str | None:
    """Without a fleet file, today's single connection is the fleet of one: an address
    naming another cluster shows the error, not this one's data."""
    asked = st.query_params.get(CLUSTER_PARAM)
    if asked is None:
        return None
    try:
        names = console_fleet(env, secrets).names()
    except QuotaError:
        return None
    return None if asked in names else unknown_cluster(asked, names)


def card_state(snapshot: Snapshot | None, health: Health) -> tuple[str, str | None]:
    """The connection card's tone and its status line: ``("ok", None)`` while the cluster
    answers; ``("stale", "not answering since HH:MM:SS")`` while the background watch finds
    it silent (the same facts as :func:`stale_notice`, so card and banner agree);
    ``("down", "unreachable")`` when it could not be read at all."""
    if snapshot is None:
        return "down", "unreachable"
    if health.failing_since is None:
        if health.missing:
            # The cluster answers, but not with every broker it had: never a plain green.
            first = min(since for _, since in health.missing)
            gone = brokers_text(node for node, _ in health.missing)
            verb = "is" if len(health.missing) == 1 else "are"
            return "stale", (f"{gone} {verb} missing from the cluster's metadata since "
                             f"{_clock(first)}: stopped, fenced after a crash, or removed")
        return "ok", None
    last = health.last_ok if health.last_ok is not None else snapshot.loaded_at
    return "stale", f"not answering since {_clock(last)}"


def _connection_card(spec: ConnectionSpec, snapshot: Snapshot | None) -> None:
    if snapshot is None:
        _card(spec, snapshot)
    else:
        _watched_card(spec, snapshot)


@st.fragment(run_every=5)
def _watched_card(spec: ConnectionSpec, snapshot: Snapshot) -> None:
    """Re-drawn every few seconds on its own, like the stale banner, so the card turns amber
    while the banner says the cluster stopped answering."""
    _card(spec, snapshot)


def _card(spec: ConnectionSpec, snapshot: Snapshot | None) -> None:
    kind = {"kafka": "Kafka cluster", "sandbox": "Sandbox file"}.get(spec.kind, spec.kind)
    lines = [f"**{md(spec.label)}**", f"{kind} · {code(spec.location)}"]
    health = registry().health(spec)
    tone, status = card_state(snapshot, health)
    if snapshot is not None:
        info = snapshot.info
        # The brokers the watch's last answer named (it asks every few seconds), not the
        # count at the last describe: a stopped broker leaves the metadata within seconds.
        count = len(health.node_ids) if health.node_ids else info.broker_count
        brokers = "?" if count is None else str(count)
        lines.append(f"cluster id {code(info.cluster_id or '?')} · {brokers} "
                     f"broker{'s' if brokers != '1' else ''}"
                     + (f" (of {len(health.node_ids) + len(health.missing)})"
                        if health.missing and health.node_ids else ""))
        lines.append(f"{len(snapshot.quotas):,} quota entries")
    if snapshot is not None:
        # Inside the card's fragment, so its age keeps counting beside the banner's.
        lines.append(f"described {_clock(snapshot.loaded_at)} ({snapshot.age_s:.0f} s ago) "
                     f"in {snapshot.took_s:.2f} s")
    if tone == "ok":
        st.success("  \n".join(lines), icon=":material/link:")
    elif tone == "stale":
        st.warning("  \n".join(lines + [f"**{md(status)}**"]), icon=":material/sync_problem:")
    else:
        st.error("  \n".join(lines + [f"**{md(status)}**"]), icon=":material/link_off:")
    if spec.command_config:
        st.caption(f"client properties from {code(spec.command_config)}")
    props = spec.public_properties()
    if props:
        with st.expander("Client properties"):
            # st.text, not st.code: the highlighter's script would load on every page.
            st.text("\n".join(f"{k}={v}" for k, v in props.items()))


def _server_address() -> str | None:
    try:
        return st.get_option("server.address")
    except Exception:  # noqa: BLE001 - no such option: treat as every interface
        return None


def _identity(policy: AccessPolicy) -> Identity:
    """Who is at the keyboard (ui.identity decides), with the sidebar's "Signed in" part:
    sign-in and sign-out buttons, the proxy's user, or the typed name in local mode."""
    if policy.read_only:
        st.caption("Read-only console: editing is switched off.")
        return Identity("none")
    mode, problem = access_mode(policy, _server_address())
    user = st.user.to_dict() if mode == SIGNIN and not problem else None
    header = _header(policy.user_header) if mode == PROXY and not problem else None
    typed = None
    st.markdown("#### Editor")
    if mode == LOCAL:
        st.warning(f"**{LOCAL_MODE_NOTICE}** {LOCAL_MODE_DETAIL}", icon=":material/warning:")
        typed = st.text_input("Your name (recorded in the audit log)", key="operator_name",
                              placeholder="e.g. jdoe")
    identity = identify(policy, mode, problem, user=user, header_value=header, typed=typed)
    if mode == SIGNIN and not problem:
        if user and user.get("is_logged_in"):
            shown = identity.name or user.get("email") or user.get("name") or "?"
            st.caption(f"Signed in as **{md(shown)}** ({md(identity.via or 'signed in')}).")
            st.button("Sign out", key="sign_out", on_click=st.logout,
                      icon=":material/logout:")
        else:
            st.caption("Viewing needs no sign-in; editing does.")
            st.button("Sign in to edit", key="sign_in", on_click=st.login, type="primary",
                      icon=":material/login:")
    elif mode == PROXY and not problem:
        st.caption(f"Signed in as **{md(identity.name)}** (from the {md(policy.user_header)} "
                   f"header)."
                   if identity.name else f"No {policy.user_header} header on this request.")
    elif identity.problem and not setup_banner(policy, identity):
        st.caption(md(identity.problem) if identity.mode != "none" else
                   "Editing is off: nobody is identified (see the Edit page).")
    return identity


def connection_banner(ctx: PageContext) -> None:
    """The banners above every page: editing refused by its configuration (ui.identity),
    and the cluster that cannot be read, with Retry."""
    refused = setup_banner(ctx.policy, ctx.identity)
    if refused:
        st.error(refused, icon=":material/gpp_bad:")
    if ctx.error is None:
        if ctx.spec is not None and ctx.snapshot is not None:
            _stale_banner(ctx.spec, ctx.snapshot)
        return
    with st.container(border=True):
        st.error(md(ctx.error), icon=":material/cloud_off:")
        if ctx.spec is not None and st.button("Retry", key="retry_connection", type="primary",
                                              icon=":material/refresh:"):
            registry().drop(ctx.spec)
            st.rerun()


@st.fragment(run_every=5)
def _stale_banner(spec: ConnectionSpec, snapshot: Snapshot) -> None:
    """Re-drawn every few seconds on its own (not the page): says within seconds that the
    page shows a quota set the cluster can no longer confirm, and since when."""
    notice = stale_notice(snapshot, registry().health(spec))
    if notice:
        st.warning(md(notice), icon=":material/sync_problem:")


def editing_gate(ctx: PageContext, sign_in_key: str, *, to_read: bool = False) -> None:
    """The top of every page that writes (Edit, Plan): stop the page, saying why, unless the
    console may write here and this person may edit (ui.identity decides who that is).

    ``to_read``: the page's first steps only read (Plan computes a diff), so only a console
    that cannot write or a missing connection stops it; :func:`may_apply` asks for the
    editor's name where the page writes."""
    if not ctx.policy.editing_enabled:
        st.info("This console is read-only.")
        st.stop()
    if ctx.cluster is not None and ctx.cluster.read_only:
        st.error(md(read_only_refusal(ctx.cluster.name)), icon=":material/lock:")
        st.stop()
    if not ctx.connected:
        st.info("Not connected to a cluster: see the message above.", icon=":material/cloud_off:")
        st.stop()
    if ctx.identity.mode == LOCAL:
        st.warning(f"**{LOCAL_MODE_NOTICE}** {LOCAL_MODE_DETAIL}", icon=":material/warning:")
    if not to_read and not may_apply(ctx, sign_in_key):
        st.stop()


def may_apply(ctx: PageContext, sign_in_key: str) -> bool:
    """Whether this person may write; when not, says why (and offers to sign in)."""
    allowed, why_not = ctx.may_edit()
    if not allowed:
        st.warning(md(why_not), icon=":material/lock:")
        if ctx.identity.mode == SIGNIN and ctx.identity.name is None and not ctx.identity.problem:
            st.button("Sign in to edit", key=sign_in_key, on_click=st.login, type="primary",
                      icon=":material/login:")
    return allowed
