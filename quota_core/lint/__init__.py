"""Quota health: find the quotas that will hurt someone, before they do.

Pure core (no Streamlit, Spark or Kafka client): :data:`RULES` is the one table of rules
(:mod:`.rules`), :func:`run_lint` runs those whose data is there over a :class:`LintInput`
(:mod:`.model`), the traffic rules read the usage history as a pandas frame (:mod:`.usage`).
Reading the collector's files is :mod:`.history_files`; the CLI is
:mod:`quota_core.cli.lint`, the page ``pages/health.py``.
"""
from quota_core.lint.model import (SEVERITIES, WELL_KNOWN, Finding, LintInput, LintOptions,
                                   Protected, parse_protected, protected_from_config,
                                   severity_at_least, super_users)
from quota_core.lint.rules import NEEDS, RULE_IDS, RULES, LintReport, Rule, run_lint

__all__ = ["SEVERITIES", "WELL_KNOWN", "Finding", "LintInput", "LintOptions", "Protected",
           "parse_protected", "protected_from_config", "severity_at_least", "super_users",
           "NEEDS", "RULE_IDS", "RULES", "LintReport", "Rule", "run_lint"]
