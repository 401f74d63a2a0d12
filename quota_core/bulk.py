"""Bulk resolution: many (user, client-id) pairs against one quota set, vectorised.

Same answers as :func:`quota_core.resolution.resolve_values`, pair for pair, but the work is
done once per *distinct* user and client id and then gathered with numpy, so a million pairs
resolve in well under a second. Used by pages (every known client at once) and the pipeline.
numpy and pandas are imported here only, lazily, so the rest of the core stays light.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from .entities import CLIENT_ID, USER, Entity
from .keys import CLIENT_KEYS
from .resolution import ANONYMOUS

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

__all__ = ["BulkResolution", "bulk_resolve"]

_MISSING = -1.0  # configured quotas are > 0 (or NaN), so -1 can mark "not on this rung"


@dataclass(frozen=True)
class BulkResolution:
    """Columnar results: per key, ``values`` (NaN where unlimited) and ``levels`` (0 where
    unlimited, else the winning ladder rung 1-8), aligned with the input pairs."""

    users: "np.ndarray"
    client_ids: "np.ndarray"
    values: Mapping[str, "np.ndarray"]
    levels: Mapping[str, "np.ndarray"]

    def __len__(self) -> int:
        return len(self.users)

    def to_pandas(self) -> "pd.DataFrame":
        import pandas as pd

        columns: dict[str, object] = {"user": self.users, "client_id": self.client_ids}
        for key in self.values:
            columns[key] = self.values[key]
            columns[f"{key}_level"] = self.levels[key]
        return pd.DataFrame(columns)


def _codes(names: Sequence[str | None], fill: str) -> tuple["np.ndarray", list[str]]:
    """Factorise names; None becomes ``fill`` (ANONYMOUS or the empty client id)."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(np.asarray(names, dtype=object), use_na_sentinel=True)
    uniques = list(uniques)
    if (codes < 0).any():
        try:
            idx = uniques.index(fill)
        except ValueError:
            idx = len(uniques)
            uniques.append(fill)
        codes = np.where(codes < 0, idx, codes)
    return codes.astype(np.int64, copy=False), uniques


def bulk_resolve(quotas: Mapping[Entity, Mapping[str, float]],
                 users: Sequence[str | None], client_ids: Sequence[str | None],
                 keys: tuple[str, ...] = CLIENT_KEYS) -> BulkResolution:
    """Resolve each ``(users[i], client_ids[i])``; None means ANONYMOUS / the empty client id."""
    import numpy as np
    import pandas as pd

    if len(users) != len(client_ids):
        raise ValueError(f"users and client_ids differ in length ({len(users)} vs "
                         f"{len(client_ids)}): give one client id per user (None for none).")
    ucodes, uniq_users = _codes(users, ANONYMOUS)
    ccodes, uniq_clients = _codes(client_ids, "")
    user_index, client_index = pd.Index(uniq_users, dtype=object), pd.Index(uniq_clients, dtype=object)
    n = len(ucodes)

    # Split the quota set by rung shape once: (user part, client part) -> {name: quotas}.
    by_user: dict[str, dict[str, float]] = {}          # rung 3 {user=U}
    by_user_cdef: dict[str, dict[str, float]] = {}     # rung 2 {user=U, client-id=<default>}
    by_client: dict[str, dict[str, float]] = {}        # rung 7 {client-id=C}
    by_udef_client: dict[str, dict[str, float]] = {}   # rung 4 {user=<default>, client-id=C}
    by_pair: dict[tuple[str, str], dict[str, float]] = {}  # rung 1
    scalar: dict[int, Mapping[str, float]] = {}        # rungs 5, 6, 8
    for entity, q in quotas.items():
        d = entity.as_dict()
        if len(d) == 2 and USER in d and CLIENT_ID in d:
            u, c = d[USER], d[CLIENT_ID]
            if u is not None and c is not None:
                by_pair[(u, c)] = q  # type: ignore[assignment]
            elif u is not None:
                by_user_cdef[u] = q  # type: ignore[assignment]
            elif c is not None:
                by_udef_client[c] = q  # type: ignore[assignment]
            else:
                scalar[5] = q
        elif len(d) == 1 and USER in d:
            if d[USER] is None:
                scalar[6] = q
            else:
                by_user[d[USER]] = q  # type: ignore[index]
        elif len(d) == 1 and CLIENT_ID in d:
            if d[CLIENT_ID] is None:
                scalar[8] = q
            else:
                by_client[d[CLIENT_ID]] = q  # type: ignore[index]

    def per_name(table: dict[str, Mapping[str, float]], index: "pd.Index", key: str):
        """An array over the distinct names: the key's value, or _MISSING."""
        names = [name for name, q in table.items() if key in q]
        out = np.full(len(index), _MISSING)
        if names:
            pos = index.get_indexer(pd.Index(names, dtype=object))
            hit = pos >= 0
            vals = np.array([table[nm][key] for nm in names], dtype=float)
            out[pos[hit]] = vals[hit]
        return out

    # Rung 1: look pairs up by a combined integer code.
    width = max(len(uniq_clients), 1)
    pair_codes = ucodes * width + ccodes

    values: dict[str, np.ndarray] = {}
    levels: dict[str, np.ndarray] = {}
    for key in keys:
        result = np.full(n, _MISSING)
        level = np.zeros(n, dtype=np.int8)

        def take(candidate: "np.ndarray", rung: int) -> None:
            open_ = (level == 0) & (candidate != _MISSING)
            result[open_] = candidate[open_]
            level[open_] = rung

        pairs = [(u, c) for (u, c), q in by_pair.items() if key in q]
        if pairs:
            pu = user_index.get_indexer(pd.Index([p[0] for p in pairs], dtype=object))
            pc = client_index.get_indexer(pd.Index([p[1] for p in pairs], dtype=object))
            known = (pu >= 0) & (pc >= 0)
            if known.any():
                entry_codes = pu[known] * width + pc[known]
                entry_vals = np.array([by_pair[p][key] for p, k in zip(pairs, known) if k])
                pos = pd.Index(entry_codes).get_indexer(pair_codes)
                cand = np.where(pos >= 0, entry_vals[np.maximum(pos, 0)], _MISSING)
                take(cand, 1)
        named = {2: (by_user_cdef, ucodes, user_index), 3: (by_user, ucodes, user_index),
                 4: (by_udef_client, ccodes, client_index), 7: (by_client, ccodes, client_index)}
        for rung in range(2, 9):  # rungs in order: take() only fills what is still open
            if rung in named:
                table, codes, index = named[rung]
                if any(key in q for q in table.values()):
                    take(per_name(table, index, key)[codes], rung)
            elif key in scalar.get(rung, {}):
                take(np.full(n, scalar[rung][key]), rung)
        result[level == 0] = np.nan
        values[key], levels[key] = result, level

    user_arr = np.asarray(uniq_users, dtype=object)[ucodes]
    client_arr = np.asarray(uniq_clients, dtype=object)[ccodes]
    return BulkResolution(user_arr, client_arr, values, levels)
