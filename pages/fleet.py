"""Fleet: every configured cluster, one row each: whether it answers and since when, its
brokers, quota entries, buckets throttled now, lint errors, and its last change and who made
it (the audit log).

The clusters are read at once, each bounded by the Kafka timeout (ui.fleet.over_fleet): the
rows fill in as the clusters answer, and a dead cluster is a row that says so.
"""
import os

import streamlit as st

from ui.context import context, secrets_dict
from ui.fleet_page import fleet_table_rows, page_fleet, render_rows
from ui.settings import kafka_timeout
from ui.text import md

ctx = context()
st.title("Fleet")
env, secrets = dict(os.environ), secrets_dict()
fleet = page_fleet(ctx, env, secrets)
timeout = kafka_timeout(env, secrets)
st.caption(f"{len(fleet)} cluster{'s' if len(fleet) != 1 else ''} from {md(fleet.source)}, "
           f"read at once; each has {timeout:g} s to answer. Buckets throttled now come from a "
           f"cluster's metrics endpoints: without them the count is unknown, never zero.")
if not len(fleet):
    st.info("No cluster is configured: set QUOTA_CONFIG to a fleet file, or add "
            "[clusters.NAME] tables to .streamlit/secrets.toml.", icon=":material/hub:")
    st.stop()

table = st.empty()
render_rows(table, fleet, {})
rows = {}
for row in fleet_table_rows(fleet, ctx, env, secrets, timeout):
    rows[row.name] = row
    render_rows(table, fleet, rows)
if st.button("Check again", key="fleet_again", icon=":material/refresh:"):
    st.rerun()
st.page_link("pages/drift.py", label="Compare two clusters (drift and promotion)",
             icon=":material/compare_arrows:")
