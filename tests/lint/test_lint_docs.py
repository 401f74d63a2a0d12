"""The lint page's rule table (docs/lint.md) is the code's one table (quota_core.lint.RULES), row for
row."""
from __future__ import annotations

from pathlib import Path

from quota_core.lint import NEEDS, RULES

from tests import ROOT

LINT_PAGE = ROOT / "docs" / "lint.md"


def _page_rows() -> list[str]:
    text = LINT_PAGE.read_text(encoding="utf-8")
    table = text.split("| rule | severity | catches | needs | fix |", 1)[1]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_every_rule_is_in_the_lint_page_and_the_reverse():
    expected = [f"| `{r.id}` | {r.severity} | {r.catches} | {NEEDS[r.needs]} | {r.fix} |"
                for r in RULES]
    assert _page_rows() == expected
