"""Browse: every quota entry, filtered like describe, searched, sorted, counted, exported."""

import streamlit as st

from quota_core import format_quota
from ui.browse import (ALL_KEYS, DEFAULT_LABEL, LEVELS, BrowseFilter, TypeMatch, at_levels,
                       export_csv, export_json, filter_frame, level_counts, sort_frame)
from quota_core.domain import FORMULA_NOTE, entity_to_json
from quota_core.errors import FilterError
from quota_core.domain import QUOTA_KEYS, LADDER
from ui.charts import byte_rate_box, byte_rate_table_html, level_bar, level_bars_html
from ui.fleet import CLUSTER_PARAM
from ui.context import context
from ui.text import code, md

#: Up to this many rows the table is sent whole and selectable; above, it is loaded lazily
#: (Streamlit serves a screenful at a time).
EAGER_LIMIT = 2_000
MODES = {"unset": "— (no filter)", "any": "any: a name or the default",
         "default": "the default", "exact": "exact name", "absent": "absent (no such part)"}
PATTERNS = {str(r.level): r.pattern for r in LADDER} | {"ip": "{ip=…}"}

ctx = context()
st.title("Browse quotas")
st.caption(f"Every quota entry. {DEFAULT_LABEL} is the *default* entity of a type; a name "
           f"spelled `<default>` is an ordinary name and shows as written.")
if not ctx.connected:
    st.info("Not connected to a cluster: see the message above.", icon=":material/cloud_off:")
    st.stop()
frame = ctx.snapshot.frame
dead = ctx.snapshot.dead_keys()

# -- the view lives in the URL, so it can be shared ------------------------------------------
#: widget key -> query parameter
URL_STATE = {"br_user_mode": "user_mode", "br_user_name": "user", "br_client_id_mode":
             "client_id_mode", "br_client_id_name": "client_id", "br_ip_mode": "ip_mode",
             "br_ip_name": "ip", "br_search": "q", "br_strict": "strict", "br_levels": "levels",
             "br_sort": "sort", "br_desc": "desc", "br_dead": "never_applies"}
_FLAGS = {"br_strict", "br_desc", "br_dead"}
if not st.session_state.get("br_seeded"):
    qp = st.query_params
    for widget, param in URL_STATE.items():
        if param not in qp:
            continue
        if widget in _FLAGS:
            st.session_state[widget] = qp[param] == "1"
        elif widget == "br_levels":
            st.session_state[widget] = [lv for lv in qp.get_all(param) if lv in LEVELS]
        elif widget.endswith("_mode"):
            if qp[param] in MODES:
                st.session_state[widget] = qp[param]
        else:
            st.session_state[widget] = qp[param]
    st.session_state["br_seeded"] = True


@st.fragment
def view() -> None:
    """Filters, table, exports and charts: a filter change reruns this part only, not the
    sidebar or the navigation."""
    # -- filters ---------------------------------------------------------------------------
    with st.container(border=True):
        cols = st.columns(3)
        matches = {}
        for col, (field, label) in zip(cols, (("user", "user"), ("client_id", "client-id"),
                                              ("ip", "ip"))):
            mode = col.selectbox(label, list(MODES), format_func=MODES.__getitem__,
                                 key=f"br_{field}_mode")
            name = ""
            if mode == "exact":
                name = col.text_input(f"{label} name", key=f"br_{field}_name",
                                      placeholder="exact name, as the broker sees it")
            matches[field] = TypeMatch(mode, name)
        c1, c2, c3 = st.columns([3, 1, 2])
        search = c1.text_input("Search names", key="br_search", placeholder="part of a user, "
                               "client id or ip (any case)")
        c2.markdown("&nbsp;")
        strict = c2.checkbox("strict", key="br_strict",
                             help="Only entities with exactly the filtered parts (describe's "
                                  "strict match). Without filters it matches nothing, like "
                                  "describe.")
        c3.markdown("&nbsp;")
        only_dead = c3.checkbox(f"only entries that never apply ({len(dead):,})", key="br_dead",
                                help="Entries with a key that can never limit any client, because "
                                     "a higher level every one of their clients reaches sets that "
                                     "key first (e.g. a {client-id=C} key that {user=<default>} "
                                     "also sets).")

    spec = BrowseFilter(matches["user"], matches["client_id"], matches["ip"], strict, search)
    try:
        matching = filter_frame(frame, spec)
        describe = str(spec.entity_filter())
    except FilterError as exc:
        st.error(md(exc), icon=":material/filter_alt_off:")
        return

    # -- counts per ladder level: also the level filter --------------------------------------
    counts = level_counts(matching)
    levels = st.pills("Entries per ladder level (click to show only those levels)", list(LEVELS),
                      selection_mode="multi", key="br_levels",
                      format_func=lambda lv: f"{lv} {PATTERNS[lv]} · {counts[lv]:,}")
    shown = at_levels(matching, levels)
    if only_dead:
        shown = shown[ctx.snapshot.display().loc[shown.index, "never applies"].to_numpy() != ""]
    st.markdown(f"**{len(shown):,}** of {len(frame):,} entries · describe filter {code(describe)}"
                + ("" if spec.describe_equivalent and not levels else " (with search, levels or "
                   "absent parts, which describe cannot express)"))

    # -- sort, table -------------------------------------------------------------------------
    s1, s2, s3 = st.columns([2, 1, 3])
    sort_by = s1.selectbox("Sort by", ["level", "user", "client-id", "ip", *ALL_KEYS],
                           key="br_sort")
    descending = s2.toggle("descending", key="br_desc")
    s3.caption("Sort by orders quota columns by their exact value; clicking a column header "
               "sorts the rows shown by their text.")
    if sort_by != "level" or descending:
        shown = sort_frame(shown, sort_by, descending)

    wanted = {}
    for widget, param in URL_STATE.items():
        value = st.session_state.get(widget)
        if widget in _FLAGS:
            if value:
                wanted[param] = "1"
        elif widget == "br_levels":
            if value:
                wanted[param] = list(value)
        elif value and value not in ("unset",) and not (widget == "br_sort" and value == "level"):
            wanted[param] = value
    current = {k: (st.query_params.get_all(k) if k == "levels" else st.query_params[k])
               for k in st.query_params}
    if CLUSTER_PARAM in current:  # the cluster shown stays in the address
        wanted[CLUSTER_PARAM] = current[CLUSTER_PARAM]
    if current != wanted:
        st.query_params.from_dict(wanted)
    page = shown

    table = ctx.snapshot.display().loc[page.index]
    # Sized so every key column shows at 1,400 px: short headers (the key is in the help),
    # the exact value in the row's detail panel, and a narrow ⚠ for entries with keys that
    # never apply.
    SHORT = {"producer_byte_rate": "producer B/s", "consumer_byte_rate": "consumer B/s",
             "request_percentage": "request %", "controller_mutation_rate": "mutations/s",
             "connection_creation_rate": "connections/s"}
    column_config = {
        "user": st.column_config.TextColumn("user", width=130),
        "client-id": st.column_config.TextColumn("client-id", width=130),
        "ip": st.column_config.TextColumn("ip", width=95),
        "level": st.column_config.TextColumn("level", width=45,
                                             help="The ladder level this entry's shape fills."),
    }
    order = ["user", "client-id", "ip", "level"]
    for key in ALL_KEYS:
        if not shown[f"_set_{key}"].any():
            continue  # a key no matching entry sets gets no column
        spec_k = QUOTA_KEYS[key]
        column_config[key] = st.column_config.TextColumn(
            SHORT[key], width=90, help=f"{key}: {spec_k.description} Select a row for the "
                                       f"exact value.")
        order.append(key)
    if dead:
        table = table.assign(**{"⚠": (table["never applies"] != "").map({True: "⚠",
                                                                          False: ""})})
        column_config["⚠"] = st.column_config.TextColumn(
            "⚠", width=35, help="Keys of this entry that no client ever gets (a higher level "
                                "decides them first). Select the row to see which and why, or "
                                "tick 'only entries that never apply'.")
        order.append("⚠")
    # Only the shown columns (and the reasons behind ⚠) go to the browser.
    table = table[order + (["never applies"] if dead else [])]
    # Small results: selectable. Big ones: streamed to the browser lazily, a screenful at a time.
    small = len(table) <= EAGER_LIMIT
    data = table
    # The default shows as DEFAULT_LABEL. Only if a real name is spelled that way too is the
    # default also told apart by style (grey italics): pandas' styler formats every cell, ~45 ms
    # per 250 rows on each rerun, so it runs only when it is needed to read the table right.
    NAME_PARTS = ["user", "client-id", "ip"]
    if small and any((page[f"_{part}"].to_numpy() == DEFAULT_LABEL).any() for part in NAME_PARTS):
        def _default_style(shown):  # the default: no raw name (None), yet shown (not absent)
            raw = page[[f"_{part}" for part in NAME_PARTS]].set_axis(NAME_PARTS, axis=1)
            is_default = raw.isna().to_numpy() & (shown.to_numpy() == DEFAULT_LABEL)
            return shown.where(~is_default, "font-style: italic; color: #5f6368").where(
                is_default, "")
        data = table.style.apply(_default_style, axis=None, subset=NAME_PARTS)
    event = st.dataframe(data, column_config=column_config, column_order=order, hide_index=True,
                         height=min(38 + 35 * max(len(table), 1), 600), placeholder="",
                         on_select="rerun" if small else "ignore",
                         selection_mode="single-row", key="br_table", lazy=not small)
    if not small:
        st.caption("Large result: rows load as you scroll. Narrow it down to "
                   f"{EAGER_LIMIT:,} entries or fewer to select a row.")

    rows = event.selection.rows if small and event is not None else []
    if rows and rows[0] < len(page):
        entity = page["_entity"].iloc[rows[0]]
        with st.container(border=True):
            st.markdown(f"**Selected** {code(entity.display())} — level "
                        f"{page['level'].iloc[rows[0]]}")
            q = ctx.snapshot.quotas.get(entity, {})
            st.markdown("  \n".join(f"{k}: {format_quota(k, v)} ({v:,.0f})"
                                    if QUOTA_KEYS[k].is_byte_rate else f"{k}: {format_quota(k, v)}"
                                    for k, v in sorted(q.items())))
            for reason in dead.get(entity, ()):
                st.warning(md(reason.reason()), icon=":material/block:")
            d = entity.as_dict()
            l1, l2 = st.columns(2)
            if entity.is_ip:
                if d["ip"] is not None:
                    l1.page_link("pages/resolve.py", label="Resolve this ip",
                                 icon=":material/troubleshoot:", query_params={"ip": d["ip"]})
            else:
                params = {k: v for k, v in (("user", d.get("user")),
                                            ("client_id", d.get("client-id"))) if v}
                l1.page_link("pages/resolve.py", label="Resolve a client of this entry",
                             icon=":material/troubleshoot:", query_params=params)
            if ctx.policy.editing_enabled:
                l2.page_link("pages/edit.py", label="Edit this entry", icon=":material/edit:",
                             query_params={"entity": entity_to_json(entity)})

    # -- export ------------------------------------------------------------------------------
    e1, e2, _ = st.columns([1, 1, 3])
    e1.download_button("Export CSV", data=lambda: export_csv(shown), file_name="quotas.csv",
                       mime="text/csv", icon=":material/download:", key="br_csv",
                       help="Every matching entry (not only the rows shown).")
    e2.download_button("Export JSON", data=lambda: export_json(shown), file_name="quotas.json",
                       mime="application/json", icon=":material/download:", key="br_json",
                       help="The CLI's export format: kafka-client-quotas --import reads it back.")
    st.caption(f"CSV: {FORMULA_NOTE} The JSON export keeps every name exactly.")

    # -- charts ------------------------------------------------------------------------------
    # Plain HTML by default: the same figures, without a chart library redrawing on every
    # filter change (ui.charts); the Plotly charts are one toggle away.
    plotly = st.toggle("Interactive charts", key="br_plotly",
                       help="Plotly charts of the same figures (hover, zoom).")
    g1, g2 = st.columns(2)
    if plotly:
        g1.plotly_chart(level_bar(level_counts(shown)), key="br_levels_chart")
        g2.plotly_chart(byte_rate_box(shown), key="br_box_chart")
    else:
        g1.html(level_bars_html(level_counts(shown)))
        g2.html(byte_rate_table_html(shown))


view()
