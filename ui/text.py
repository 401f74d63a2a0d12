"""Text from input, made safe for Streamlit's markdown: the one place that does it.

``st.markdown``, ``st.caption``, ``st.info``/``warning``/``error``/``success`` and most widget
labels render GitHub-flavoured markdown, plus Streamlit's own ``:material/…:`` icons and
``:red[…]`` colours. A name or a URL parameter put there as is becomes markup:
``![t](http://host/beacon)`` makes the browser fetch the beacon, ``[Re-authenticate](…)`` a
link. :func:`md` turns any text into markdown that shows exactly that text:

* every ASCII punctuation character markdown or Streamlit gives a meaning to is
  backslash-escaped (CommonMark lets any ASCII punctuation be escaped);
* a bare ``http://…`` or ``www.…`` is turned into a link by GFM's *literal autolinks* even
  when escaped (they are found in the text after the escapes are read), and
  ``:material/home:`` becomes an icon: an invisible WORD JOINER (U+2060) after a ``:`` that
  a letter or ``/`` follows, and between ``www`` and ``.``, breaks those patterns without
  changing what people read.
* An e-mail address (``alice@example.test``, the usual principal with sign-in) is left
  whole, so it reads, copies and searches as written; GFM shows it as a ``mailto:`` link
  whose text is exactly the address. Where a name stands alone, :func:`code` shows it with
  no link at all.

Names in HTML go through :func:`html.escape` instead (``ui.render``). ``st.dataframe`` shows
text as text; ``st.table`` renders each cell as markdown (a Chromium test saw ``**b**`` bold
and ``:material/home:`` an icon in Drift's table), so its frames go through :func:`md_frame`.
"""
from __future__ import annotations

import re
from html import escape

__all__ = ["md", "code", "md_note", "md_frame", "chart_text", "unmd", "WORD_JOINER"]

WORD_JOINER = "\u2060"
#: Characters with a meaning in CommonMark, GFM (tables, strikethrough), KaTeX ($) or
#: Streamlit's directives (:icon:, :color[…]); each is shown literally once escaped.
_SPECIAL = frozenset("\\`*_{}[]()#+-.!|<>~$&:=\"'^%")
_AUTOLINK_PARTS = re.compile(r"(?<=:)(?=[A-Za-z/])|(?i:(?<=www)(?=\.))")
_ICON_PARTS = re.compile(r"(?<=:)(?=[A-Za-z/])")


def md(text: object) -> str:
    """``text`` as markdown that renders as exactly that text (no link, image, HTML, icon,
    emphasis, heading or list); line breaks become spaces."""
    value = " ".join(str(text).splitlines()) if text is not None else ""
    value = _AUTOLINK_PARTS.sub(WORD_JOINER, value)
    return "".join("\\" + c if c in _SPECIAL else c for c in value)


def md_frame(frame):
    """A copy of the pandas ``frame`` for ``st.table``: every text cell and column label as
    :func:`md` makes it, so each shows exactly as written; numbers stay numbers."""
    shown = frame.map(lambda v: md(v) if isinstance(v, str) else v)
    shown.columns = [md(c) if isinstance(c, str) else c for c in frame.columns]
    return shown


def code(text: object) -> str:
    """``text`` as an inline code span that shows exactly that text (an e-mail address or a
    URL too: code spans take no escapes and make no links). The fence is longer than any run
    of backticks in the text; a word joiner after ``:`` keeps Streamlit from reading
    ``:material/x:`` in it."""
    value = " ".join(str(text).splitlines()) if text is not None else ""
    if not value.strip():
        return md(value)
    value = _ICON_PARTS.sub(WORD_JOINER, value)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value[0] in "` " or value[-1] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"


_NOTE_MARKUP = re.compile(r"`([^`]*)`|\*([^*\s][^*]*)\*")


def md_note(text: str) -> str:
    """A sentence the core wrote with a little markdown (``quota_core.domain.shadows``: entities in
    ``code``, a word in *emphasis*) and names inside: its code spans and emphasis are kept,
    everything else is escaped as :func:`md` does. A name with a backtick or an asterisk
    may split a span differently, but every piece is still shown as text."""
    out, end = [], 0
    for m in _NOTE_MARKUP.finditer(text):
        out.append(md(text[end:m.start()]))
        out.append(code(m.group(1)) if m.group(1) is not None else f"*{md(m.group(2))}*")
        end = m.end()
    out.append(md(text[end:]))
    return "".join(out)


def chart_text(text: object) -> str:
    """``text`` for a Plotly label, title or hover text: Plotly reads a subset of HTML there
    (``<a href>`` makes a link, ``<br>`` a line), and shows entities as their characters, so
    escaping ``&``, ``<`` and ``>`` shows exactly the text."""
    return escape("" if text is None else str(text), quote=False)


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def unmd(markdown: str) -> str:
    """What a person reads in markdown :func:`md` made (escapes and word joiners removed):
    for tests, which compare the shown text with the text meant."""
    return _ESCAPED.sub(r"\1", markdown).replace(WORD_JOINER, "")
