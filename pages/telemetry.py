"""Client telemetry: the cluster's client-metrics subscriptions (KIP-714), managed by editors.

Lists each subscription (name, metric prefixes, match, interval); an editor adds the shipped
default, adds one of their own (checked as ``telemetry subscribe`` checks it) or removes one.
Each change is written as the CLI writes it, read back, and recorded in the audit log. A
sandbox, or a cluster whose brokers collect nothing clients push, shows no form.
"""
import streamlit as st

from quota_core.domain import DEFAULT_SUBSCRIPTION, TELEMETRY_NOT_COLLECTED
from quota_core.errors import QuotaError, UsageError
from quota_core.changes.subscriptions import read_subscriptions, subscribe, unsubscribe
from ui.context import context
from ui.sidebar import editing_gate, may_apply
from ui.subscriptions import form_words, subscription_from_form, subscriptions_frame
from ui.text import code, md

ctx = context()
ss = st.session_state
st.title("Client telemetry")
st.caption("What clients push to the brokers (KIP-714) is chosen by subscriptions: which "
           "metrics, from which clients, how often. Resolve and Throttled now show what the "
           "clients report. See docs/client-telemetry.md.")
editing_gate(ctx, sign_in_key="sign_in_telemetry", to_read=True)

try:
    held = read_subscriptions(ctx.backend)
except QuotaError as exc:
    st.error(md(f"Cannot read the client-metrics subscriptions: {exc}"))
    st.stop()
if not held.kafka or not held.collected:
    st.info(md(f"{TELEMETRY_NOT_COLLECTED[0].upper()}{TELEMETRY_NOT_COLLECTED[1:]}"
               + ("." if not held.kafka else ": no broker plugin receives what clients push "
                  "(see docs/client-telemetry.md).")), icon=":material/sensors_off:")
if held.kafka and held.subs:
    st.dataframe(subscriptions_frame(held.subs), hide_index=True, key="tm_table")
elif held.kafka:
    st.markdown("No client-metrics subscriptions: clients push nothing.")
if not held.collected:
    st.stop()

done = ss.pop("tm_done", None)
if done:
    st.success(md(done), icon=":material/check_circle:")
if not may_apply(ctx, "sign_in_telemetry"):
    st.stop()
how = {"actor": ctx.operator, "cluster": ctx.cluster_fields(), "audit": ctx.audit,
       "target": ctx.cluster}


def _write(what: str, change) -> None:
    """Run a write; on success say so after the rerun (the table then shows it)."""
    try:
        change()
    except QuotaError as exc:
        st.error(md(f"Not changed: {exc}"), icon=":material/block:")
        return
    ss["tm_done"] = what
    st.rerun()


with st.container(border=True):
    st.markdown(f"**The default subscription** — {code(DEFAULT_SUBSCRIPTION.name)}: throttle "
                f"times, request latency and connection metrics, every "
                f"{DEFAULT_SUBSCRIPTION.interval_ms // 1000} s, from every client.")
    if st.button("Add the default subscription", key="tm_default", icon=":material/add:"):
        _write(f"Subscribed {DEFAULT_SUBSCRIPTION.name}.",
               lambda: subscribe(ctx.backend, DEFAULT_SUBSCRIPTION, **how))

with st.container(border=True):
    st.markdown("**Add a subscription** (a name the cluster has is replaced)")
    c1, c2 = st.columns(2)
    name = c1.text_input("Name", key="tm_name", placeholder="throttle-watch")
    metrics = c2.text_input("Metric prefixes", key="tm_metrics",
                            placeholder="org.apache.kafka.producer., org.apache.kafka.consumer.",
                            help="Comma-separated metric-name prefixes, or * for every metric.")
    match = c1.text_area("Match", key="tm_match", placeholder="client_id=batch-.*",
                         help="One KEY=REGEX a line; a client matches when every regex matches "
                              "in full. Empty: every client.")
    interval = c2.text_input("Interval (ms)", key="tm_interval", placeholder="300000",
                             help="How often clients push: 100 to 3,600,000 ms. Empty: "
                                  "Kafka's default, 300,000 ms.")
    if st.button("Add subscription", key="tm_add", icon=":material/add:"):
        try:
            sub = subscription_from_form(name, metrics, match, interval)
        except UsageError as exc:
            st.error(md(form_words(str(exc))), icon="✏️")
        else:
            _write(f"Subscribed {sub.name}.", lambda: subscribe(ctx.backend, sub, **how))

if held.subs:
    with st.container(border=True):
        st.markdown("**Remove a subscription** (its clients stop pushing those metrics)")
        gone = st.selectbox("Subscription", [s.name for s in held.subs], key="tm_remove_name")
        if st.button("Remove", key="tm_remove", icon=":material/delete:"):
            _write(f"Unsubscribed {gone}.", lambda: unsubscribe(ctx.backend, gone, **how))
