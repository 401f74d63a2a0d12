"""Page helpers for the Streamlit dashboard: the connection sidebar and cached backend
(:mod:`ui.session`), settings from env/secrets (:mod:`ui.settings`), the guarded apply
(:mod:`ui.actions`), and render-only builders (:mod:`ui.render`, :mod:`ui.charts`).

Pages read widgets, call quota_core, and render with these; no quota logic lives here.
"""
