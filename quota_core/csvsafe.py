"""CSV cells a spreadsheet cannot run: the one rule every CSV export of the console uses.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
formula by Excel, LibreOffice and Google Sheets (``=HYPERLINK("http://x")``,
``+cmd|' /C calc'!A1``). OWASP's rule (https://owasp.org/www-community/attacks/CSV_Injection):
prefix such a cell with ``'``, which the spreadsheet shows as text and hides. The prefix is a
change to the text, so every export that uses it says so (:data:`FORMULA_NOTE`).
"""
from __future__ import annotations

__all__ = ["FORMULA_STARTS", "FORMULA_NOTE", "spreadsheet_cell"]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
FORMULA_NOTE = ("Cells that start with =, +, -, @, a tab or a carriage return get a leading ' "
                "so that a spreadsheet shows them as text instead of running them as formulas "
                "(remove it to get the raw name).")


def spreadsheet_cell(value: object) -> object:
    """``value`` unchanged, unless it is text a spreadsheet would run: then ``'`` + text."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
