"""quota_core.planning: its face is written by hand."""
