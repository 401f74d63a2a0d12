"""Page helpers for the Streamlit dashboard: the connection sidebar and cached backend
(:mod:`ui.context`, :mod:`ui.sidebar`, :mod:`ui.registry`), settings from env/secrets (:mod:`ui.settings`), and render-only
builders (:mod:`ui.render`, :mod:`ui.charts`), and text from input made safe for markdown and
charts (:mod:`ui.text`: every name or URL parameter a page puts in markdown goes through
it). The guarded apply is the core's
(:mod:`quota_core.changes.workflow`), shared with the CLI.

Pages read widgets, call quota_core, and render with these; no quota logic lives here.
"""
