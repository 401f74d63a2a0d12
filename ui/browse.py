"""The Browse table: a described quota set as rows, filtered, searched, sorted and counted.

Pure and pandas-first (pandas is imported lazily, as in :mod:`quota_core.domain.bulk`): the set is
turned into one DataFrame once (:func:`quota_frame`), and every filter change is a few
vectorised comparisons over it (:func:`filter_frame`), so 100,000 entries stay interactive.

The filter mirrors a describe filter, per entity type (:class:`TypeMatch`): *any* (a name or
the default), *default*, an *exact* name, or *absent* (the entity has no such type), plus
*strict* (the entity has exactly the filtered types). :meth:`BrowseFilter.entity_filter`
gives the equivalent :class:`~quota_core.domain.filters.EntityFilter`, and the two agree on every
set (tests/pages/test_browse.py checks this); *absent* is the one thing describe cannot say.

Every entity is also classified by the ladder rung its *shape* fills (:func:`entity_level`):
``{user=U}`` is rung 3 for user U, ``{client-id=<default>}`` rung 8, an ip entity ``"ip"``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from quota_core.domain import (CLIENT_ID, DEFAULT_TEXT, ENTITY_TYPES, IP, USER, Entity,
                               spreadsheet_cell)
from quota_core.errors import FilterError
from quota_core.domain import (EntityFilter, FilterComponent, ABSENT, DEFAULT, LADDER, NAME,
                               level_of, format_value, format_quota)

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

__all__ = [
    "LEVELS",
    "ALL_KEYS",
    "DEFAULT_LABEL",
    "MATCH_MODES",
    "TypeMatch",
    "BrowseFilter",
    "entity_level",
    "quota_rows",
    "quota_frame",
    "filter_frame",
    "sort_frame",
    "at_levels",
    "level_counts",
    "natural_key",
    "display_frame",
    "export_csv",
    "export_json",
    "frame_quotas",
]

#: Every ladder level an entry can fill, in ladder order; ip entities come last.
LEVELS: tuple[str, ...] = tuple(str(r.level) for r in LADDER) + ("ip",)
#: Every quota key, client keys first (the table's column order).
ALL_KEYS: tuple[str, ...] = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
                             "controller_mutation_rate", "connection_creation_rate")
#: How the table shows the default entity: not ``<default>``, which a real name can be.
DEFAULT_LABEL = "⟨default⟩"

# How the frame codes each type's part (ladder.ABSENT / DEFAULT / NAME) as small integers,
# in the order names sort: absent, then the default, then names.
_CODE = {ABSENT: 0, DEFAULT: 1, NAME: 2}
_TYPE_COLUMNS = {USER: "user", CLIENT_ID: "client-id", IP: "ip"}

#: Filter modes per entity type, as the page offers them.
MATCH_MODES: tuple[str, ...] = ("unset", "any", "default", "exact", "absent")


def entity_level(entity: Entity) -> str:
    """The ladder level this entity's shape fills: ``"1"`` … ``"8"``, or ``"ip"``."""
    level = level_of(entity)
    return "ip" if level is None else str(level)


# --------------------------------------------------------------------------- the filter
@dataclass(frozen=True, slots=True)
class TypeMatch:
    """How one entity type is filtered: ``mode`` is one of :data:`MATCH_MODES`."""

    mode: str = "unset"
    name: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MATCH_MODES:
            raise FilterError(f"Unknown match mode {self.mode!r}: use one of "
                              f"{', '.join(MATCH_MODES)}.")

    def component(self, entity_type: str) -> FilterComponent | None:
        if self.mode == "any":
            return FilterComponent.any(entity_type)
        if self.mode == "default":
            return FilterComponent.default(entity_type)
        if self.mode == "exact":
            if not self.name:
                raise FilterError(f"The exact match for {entity_type} has no name: type a "
                                  f"name, or match the default instead.")
            return FilterComponent.exact(entity_type, self.name)
        return None


@dataclass(frozen=True, slots=True)
class BrowseFilter:
    """What the Browse page filters on. The empty filter keeps everything."""

    user: TypeMatch = field(default_factory=TypeMatch)
    client_id: TypeMatch = field(default_factory=TypeMatch)
    ip: TypeMatch = field(default_factory=TypeMatch)
    strict: bool = False
    #: Case-insensitive substring of any name (user, client id or ip).
    search: str = ""
    #: Keep only entries at these levels (empty: all).
    levels: tuple[str, ...] = ()

    def matches(self) -> dict[str, TypeMatch]:
        return {USER: self.user, CLIENT_ID: self.client_id, IP: self.ip}

    def entity_filter(self) -> EntityFilter:
        """The describe filter for the type components (``absent`` has no equivalent).

        Raises :class:`FilterError` for combinations a broker refuses (ip with user)."""
        components = [c for t, m in self.matches().items()
                      if (c := m.component(t)) is not None]
        ef = EntityFilter(tuple(components), self.strict)
        ef.validate()
        return ef

    @property
    def describe_equivalent(self) -> bool:
        """True when :meth:`entity_filter` alone selects exactly the same entries."""
        return (not self.search and not self.levels
                and all(m.mode != "absent" for m in self.matches().values()))


# --------------------------------------------------------------------------- rows / frame
def quota_rows(quotas: Mapping[Entity, Mapping[str, float]]) -> list[dict]:
    """Plain rows (no pandas): entity parts (None = default, key missing = absent), the
    level, and the quotas. Sorted in the entities' own order."""
    rows = []
    for entity in sorted(quotas, key=Entity.sort_key):
        d = entity.as_dict()
        rows.append({"entity": str(entity), "level": entity_level(entity),
                     "parts": {_TYPE_COLUMNS[t]: n for t, n in d.items()},
                     "quotas": dict(quotas[entity])})
    return rows


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """``svc-10`` after ``svc-2``: digit runs compare as numbers, the rest case-folded, then
    the raw text breaks ties (so distinct names never compare equal)."""
    parts = _DIGITS.split(name)
    return tuple((0, int(p), "") if i % 2 else (1, 0, p.casefold())
                 for i, p in enumerate(parts) if p) + ((2, 0, name),)


def natural_ranks(names: "list[str | None]") -> "np.ndarray":
    """Each name's rank in natural order (None, i.e. absent or the default, ranks first)."""
    import numpy as np

    distinct = sorted({n for n in names if n is not None}, key=natural_key)
    rank = {n: i + 1 for i, n in enumerate(distinct)}
    return np.fromiter((rank.get(n, 0) if n is not None else 0 for n in names),
                       dtype=np.int64, count=len(names))


def quota_frame(quotas: Mapping[Entity, Mapping[str, float]]) -> "pd.DataFrame":
    """One row per entity, built once per described set.

    Columns: ``user``/``client-id``/``ip`` as shown (the name, :data:`DEFAULT_LABEL`, or ``""``
    when absent); ``level``; one float column per key of :data:`ALL_KEYS` (NaN = not set);
    and private columns for filtering: ``_user_kind``… (0 absent, 1 default, 2 name),
    ``_user``… (the raw name or None), ``_search`` (names, lower-cased) and ``_entity``.
    """
    import numpy as np
    import pandas as pd

    n = len(quotas)
    kinds = {t: np.zeros(n, dtype=np.int8) for t in ENTITY_TYPES}
    names: dict[str, list] = {t: [None] * n for t in ENTITY_TYPES}
    values = {k: np.full(n, np.nan) for k in ALL_KEYS}
    # NaN in a value column is "not set" only where the key is not set: brokers accept NaN.
    is_set = {k: np.zeros(n, dtype=bool) for k in ALL_KEYS}
    entities: list[Entity] = [None] * n  # type: ignore[list-item]
    for i, (entity, q) in enumerate(quotas.items()):
        entities[i] = entity
        for t, name in entity.parts:
            kinds[t][i] = _CODE[DEFAULT] if name is None else _CODE[NAME]
            names[t][i] = name
        for k, v in q.items():
            col = values.get(k)
            if col is not None:
                col[i] = v
                is_set[k][i] = True
    columns: dict[str, object] = {}
    for t in ENTITY_TYPES:
        shown = np.array(names[t], dtype=object)
        shown[kinds[t] == _CODE[DEFAULT]] = DEFAULT_LABEL
        shown[kinds[t] == _CODE[ABSENT]] = ""
        columns[_TYPE_COLUMNS[t]] = shown
    # The level from the shape, vectorised: (user kind, client-id kind) -> rung; ip -> "ip".
    table = np.full(9, -1, dtype=np.int8)
    for r in LADDER:
        table[_CODE[r.user] * 3 + _CODE[r.client_id]] = LEVELS.index(str(r.level))
    codes = table[kinds[USER].astype(np.int64) * 3 + kinds[CLIENT_ID]]
    codes[kinds[IP] != _CODE[ABSENT]] = LEVELS.index("ip")
    columns["level"] = pd.Categorical.from_codes(codes, categories=list(LEVELS), ordered=True)
    columns.update(values)
    columns.update({f"_set_{k}": m for k, m in is_set.items()})
    for t in ENTITY_TYPES:
        columns[f"_{_TYPE_COLUMNS[t]}_kind"] = kinds[t]
        # object dtype on purpose: filters compare these as numpy arrays, and pandas'
        # string dtype would convert on every access.
        columns[f"_{_TYPE_COLUMNS[t]}"] = pd.Series(names[t], dtype=object)
    search = ["\x1f".join(n or "" for n in triple).lower()
              for triple in zip(names[USER], names[CLIENT_ID], names[IP])]
    # Arrow-backed: a search is one vectorised substring scan (pyarrow), not a Python loop.
    columns["_search"] = pd.Series(search, dtype="string[pyarrow]")
    for t in ENTITY_TYPES:  # natural order ranks: svc-2 before svc-10
        columns[f"_{_TYPE_COLUMNS[t]}_nat"] = natural_ranks(names[t])
    frame = pd.DataFrame(columns)
    frame["_entity"] = pd.Series(entities, dtype=object)
    # Default order: by level, then names (the default sorts before names).
    frame = frame.sort_values(["level", "_user_kind", "_user_nat", "_client-id_kind",
                               "_client-id_nat", "_ip_kind", "_ip_nat"], kind="stable")
    return frame.reset_index(drop=True)


def filter_frame(frame: "pd.DataFrame", spec: BrowseFilter) -> "pd.DataFrame":
    """The rows ``spec`` keeps, vectorised. Raises :class:`FilterError` like describe would."""
    import numpy as np

    ef = spec.entity_filter()  # validates, exactly as a broker would
    keep = np.ones(len(frame), dtype=bool)
    if spec.strict and not ef.components:
        keep[:] = False  # an empty strict describe filter matches nothing
    for t, m in spec.matches().items():
        col = _TYPE_COLUMNS[t]
        kind = frame[f"_{col}_kind"].to_numpy()
        if m.mode == "any":
            keep &= kind != _CODE[ABSENT]
        elif m.mode == "default":
            keep &= kind == _CODE[DEFAULT]
        elif m.mode == "exact":
            keep &= (kind == _CODE[NAME]) & (frame[f"_{col}"].to_numpy() == m.name)
        elif m.mode == "absent" or spec.strict:  # strict: unfiltered types must be absent
            keep &= kind == _CODE[ABSENT]
    if spec.levels:
        keep &= frame["level"].isin(list(spec.levels)).to_numpy()
    if spec.search:
        needle = spec.search.strip().lower()
        if needle:
            idx = np.flatnonzero(keep)
            names = frame["_search"]
            if len(idx) < len(frame):
                names = names.iloc[idx]
            found = names.str.contains(needle, regex=False).to_numpy(dtype=bool,
                                                                      na_value=False)
            keep[idx[~found]] = False
    return frame[keep]


def at_levels(frame: "pd.DataFrame", levels: Iterable[str]) -> "pd.DataFrame":
    """Only the rows at these ladder levels (all rows when ``levels`` is empty)."""
    levels = list(levels)
    if not levels:
        return frame
    return frame[frame["level"].isin(levels).to_numpy()]


def sort_frame(frame: "pd.DataFrame", by: str, descending: bool = False) -> "pd.DataFrame":
    """Sort by a shown column; names in natural order (``svc-2`` before ``svc-10``, the
    default first), quota columns numerically with unset values last."""
    if by in ("user", "client-id", "ip"):
        cols = [f"_{by}_kind", f"_{by}_nat"]
        return frame.sort_values(cols, ascending=not descending, kind="stable")
    if by not in frame.columns:
        raise KeyError(f"Cannot sort by {by!r}: not a column of the table.")
    return frame.sort_values(by, ascending=not descending, na_position="last", kind="stable")


def level_counts(frame: "pd.DataFrame") -> dict[str, int]:
    """Entries per ladder level, every level present (0 when none)."""
    counts = frame["level"].value_counts()
    return {level: int(counts.get(level, 0)) for level in LEVELS}


# --------------------------------------------------------------------------- display/export
def _human(key: str, v: float) -> str:
    if v != v:  # NaN: not set
        return ""
    return format_quota(key, v)


def display_frame(frame: "pd.DataFrame", keys: Iterable[str] = ALL_KEYS,
                  exact: bool = True) -> "pd.DataFrame":
    """The shown columns of ``frame``: names, level, and per key a human text column
    ``<key>`` plus (with ``exact``) the exact number as ``<key> (exact)``. Formats each
    distinct value once."""
    import pandas as pd

    out = pd.DataFrame({"user": frame["user"], "client-id": frame["client-id"],
                        "ip": frame["ip"], "level": frame["level"].astype(str)})
    for key in keys:
        col, is_set = frame[key], frame[f"_set_{key}"].to_numpy()
        uniques = pd.unique(col.dropna())
        labels = {v: _human(key, float(v)) for v in uniques}
        shown = col.map(labels).astype(object).where(col.notna(), "")
        shown[is_set & col.isna().to_numpy()] = "NaN (set, never limits)"
        out[key] = shown
        if exact:
            out[f"{key} (exact)"] = col
    return out


def _name_text(kind: int, name: str | None) -> str:
    return {_CODE[ABSENT]: "", _CODE[DEFAULT]: DEFAULT_TEXT}.get(kind, name or "")


def export_csv(frame: "pd.DataFrame") -> str:
    """CSV of the rows: ``entity`` as people read it (raw names, quoted where they could be
    misread: a real ``<default>`` name is ``"<default>"``, the default entity ``<default>``),
    the level, the names (``<default>`` for the
    default, empty when absent), and each key's exact value (empty when not set). A cell a
    spreadsheet would run as a formula is prefixed with ``'`` (:mod:`quota_core.domain.csvsafe`)."""
    import pandas as pd

    out = pd.DataFrame({"entity": [e.display() for e in frame["_entity"]],
                        "level": frame["level"].astype(str)})
    for col in ("user", "client-id", "ip"):
        kinds, names = frame[f"_{col}_kind"].to_numpy(), frame[f"_{col}"].to_numpy()
        out[col] = [_name_text(k, n) for k, n in zip(kinds, names)]
    for key in ALL_KEYS:
        out[key] = [format_value(v) if set_ else "" for v, set_ in
                    zip(frame[key].to_numpy(), frame[f"_set_{key}"].to_numpy())]
    # Names are input: a cell a spreadsheet would run as a formula gets a leading '.
    out = out.map(spreadsheet_cell)
    return out.to_csv(index=False, lineterminator="\n")


def frame_quotas(frame: "pd.DataFrame") -> dict[Entity, dict[str, float]]:
    """The quota set the rows of ``frame`` hold (for export, or re-filtering)."""
    values = {k: frame[k].to_numpy() for k in ALL_KEYS}
    is_set = {k: frame[f"_set_{k}"].to_numpy() for k in ALL_KEYS}
    out: dict[Entity, dict[str, float]] = {}
    for i, entity in enumerate(frame["_entity"]):
        out[entity] = {k: float(values[k][i]) for k in ALL_KEYS if is_set[k][i]}
    return out


def export_json(frame: "pd.DataFrame") -> str:
    """The rows as the CLI's export document (``quota-console/1``: raw names, ``null`` for
    the default), so ``kafka-client-quotas --import`` can read it back."""
    from quota_core.domain import to_document

    return json.dumps(to_document(frame_quotas(frame)), indent=1, ensure_ascii=False)
