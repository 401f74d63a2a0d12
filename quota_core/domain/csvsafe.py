"""CSV cells a spreadsheet cannot run: the one rule every CSV export of the console uses.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice and Google Sheets (``=HYPERLINK("http://x")``,
``+cmd|' /C calc'!A1``). OWASP's rule (https://owasp.org/www-community/attacks/CSV_Injection):
prefix such a cell with ``'``, which the spreadsheet shows as text and hides. The prefix is a
change to the text, so every export that uses it says so (:data:`FORMULA_NOTE`).
"""
from __future__ import annotations

import csv
import io

__all__ = ["FORMULA_STARTS", "FORMULA_NOTE", "spreadsheet_cell", "spreadsheet_csv"]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FORMULA_NOTE = ("Cells that start with =, +, -, @, a tab or a carriage return get a leading ' "
                "so that a spreadsheet shows them as text instead of running them as formulas "
                "(remove it to get the raw name).")


def spreadsheet_cell(value: object) -> object:
    """``value`` unchanged, unless it is text a spreadsheet would run: then ``'`` + text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_csv(text: str) -> str:
    """A CSV text with :func:`spreadsheet_cell` applied to every cell (for an export made
    elsewhere, such as the audit log's ``records_csv``)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in csv.reader(io.StringIO(text, newline="")):
        writer.writerow([spreadsheet_cell(cell) for cell in row])
    return buf.getvalue()
