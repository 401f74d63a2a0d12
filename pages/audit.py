"""Audit log: every change applied from this console — who, when, where, before and after."""
import pandas as pd
import streamlit as st

from quota_core.changes.audit import (UNKNOWN_STORE, WRITER_STOPPED, records_csv, records_jsonl,
                                      same_store, store_text)
from quota_core.domain import FORMULA_NOTE, spreadsheet_csv
from ui.context import context

ctx = context()


def _shown(record) -> str:
    """The entity with raw names (the record keeps Kafka's text form too, for the CLI)."""
    try:
        return record.entity_obj().display()
    except Exception:  # noqa: BLE001 - a hand-edited log line: show what it says
        return record.entity_text


st.title("Audit log")
st.caption(f"Every change applied from this console, newest first. Stored append-only in "
           f"`{ctx.audit.path}`: each change's intent is written before it is sent, its "
           f"outcome after.")

attempts = st.session_state.get("au_refused", False)
records = ctx.audit.read(refused=attempts)
if ctx.audit.skipped:
    st.warning(f"{ctx.audit.skipped} line(s) of the log could not be read (e.g. a write cut "
               f"short by a crash) and are left out.")
if not records:
    st.info("No changes have been applied from this console yet.")
    st.stop()

f1, f2, f3, f4 = st.columns(4)
text = f1.text_input("Entity contains", key="au_entity", placeholder="alice").strip().lower()
actors = sorted({r.actor for r in records})
who = f2.multiselect("By", actors, key="au_actor", placeholder="anyone")
here_only = f3.toggle("Only this cluster", key="au_here", value=ctx.spec is not None,
                      disabled=ctx.spec is None,
                      help="Records of the store this console shows: the same cluster id (a "
                           "sandbox: the same id and file). Records without one (older logs) "
                           f"show as \"{UNKNOWN_STORE}\" and match no cluster.")
f4.toggle("Also refused attempts", key="au_refused",
          help="Changes the cluster refused, or never sent: nothing changed there.")

here = ctx.store()
shown = [r for r in reversed(records)
         if (not text or text in _shown(r).lower())
         and (not who or r.actor in who)
         and (not here_only or same_store(r.cluster, here))]


def _outcome(r) -> str:
    """What happened: applied, conflict, refused, not sent, or unknown (with why)."""
    if r.note == WRITER_STOPPED:
        return WRITER_STOPPED
    return "outcome unknown (sent, not confirmed)" if r.outcome == "unknown" else r.outcome


def _q(q: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in q.items()) or "—"


table = pd.DataFrame([{
    "when (UTC)": r.ts, "who": r.actor, "action": r.action, "outcome": _outcome(r),
    "entity": _shown(r),
    "before": _q(r.before), "after": _q(r.after),
    "cluster": store_text(r.cluster),
    "cluster id": r.cluster.get("cluster_id") or "", "note": r.note,
} for r in shown])
st.markdown(f"**{len(shown):,}** of {len(records):,} changes")
st.dataframe(table, hide_index=True, key="au_table",
             column_config={"when (UTC)": st.column_config.TextColumn(width="medium"),
                            "entity": st.column_config.TextColumn(width="large")})

e1, e2, _ = st.columns([1, 1, 3])
e1.download_button("Export CSV", data=lambda: spreadsheet_csv(records_csv(shown)),
                   file_name="quota-audit.csv", mime="text/csv", icon=":material/download:",
                   key="au_csv")
e2.download_button("Export JSON lines", data=lambda: records_jsonl(shown),
                   file_name="quota-audit.jsonl", mime="application/x-ndjson",
                   icon=":material/download:", key="au_jsonl")
st.caption(f"CSV: {FORMULA_NOTE} The JSON lines keep every record exactly.")
