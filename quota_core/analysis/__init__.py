"""quota_core.analysis: its face is written by hand."""
