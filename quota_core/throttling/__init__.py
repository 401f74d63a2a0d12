"""quota_core.throttling: its face is written by hand."""
