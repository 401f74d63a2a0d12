"""quota_core.domain: its face is written by hand."""
