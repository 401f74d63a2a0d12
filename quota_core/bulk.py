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
    n, nk = len(ucodes), len(keys)

    # Split the quota set by rung shape once: (user part, client part) -> {name: quotas}.
    by_user: dict[str, Mapping[str, float]] = {}          # rung 3 {user=U}
    by_user_cdef: dict[str, Mapping[str, float]] = {}     # rung 2 {user=U, client-id=<default>}
    by_client: dict[str, Mapping[str, float]] = {}        # rung 7 {client-id=C}
    by_udef_client: dict[str, Mapping[str, float]] = {}   # rung 4 {user=<default>, client-id=C}
    by_pair: dict[tuple[str, str], Mapping[str, float]] = {}  # rung 1
    scalar: dict[int, Mapping[str, float]] = {}           # rungs 5, 6, 8
    for entity, q in quotas.items():
        parts = entity.parts  # ordered user, client-id, ip
        if len(parts) == 2 and parts[0][0] == USER and parts[1][0] == CLIENT_ID:
            u, c = parts[0][1], parts[1][1]
            if u is not None and c is not None:
                by_pair[(u, c)] = q
            elif u is not None:
                by_user_cdef[u] = q
            elif c is not None:
                by_udef_client[c] = q
            else:
                scalar[5] = q
        elif len(parts) == 1 and parts[0][0] == USER:
            if parts[0][1] is None:
                scalar[6] = q
            else:
                by_user[parts[0][1]] = q
        elif len(parts) == 1 and parts[0][0] == CLIENT_ID:
            if parts[0][1] is None:
                scalar[8] = q
            else:
                by_client[parts[0][1]] = q

    def rows(tables: "Sequence[Mapping[str, float]]") -> "np.ndarray":
        """(len(tables), nk): each entry's value per key, or _MISSING."""
        return np.array([q.get(k, _MISSING) for q in tables for k in keys],
                        dtype=float).reshape(len(tables), nk)

    def per_name(table: dict[str, Mapping[str, float]], index: "pd.Index") -> "np.ndarray":
        """(len(index), nk) over the distinct names: the key's value, or _MISSING."""
        out = np.full((len(index), nk), _MISSING)
        if table:
            pos = index.get_indexer(pd.Index(list(table), dtype=object))
            hit = pos >= 0
            out[pos[hit]] = rows(list(table.values()))[hit]
        return out

    def first(candidates) -> tuple["np.ndarray", "np.ndarray"]:
        """Down a list of (values, rung), the first value present, and its rung (0: none)."""
        value, level = candidates[0][0].copy(), np.zeros(candidates[0][0].shape, dtype=np.int8)
        for cand, rung in candidates:
            open_ = (level == 0) & (cand != _MISSING)
            value[open_] = cand[open_]
            level[open_] = rung
        return value, level

    # Per distinct user: rungs 2 and 3. Per distinct client id: rung 4, the defaults 5 and
    # 6 (the same for everyone), then rungs 7 and 8. A pair takes its user's answer, else
    # its client id's: that is the ladder below rung 1.
    user_val, user_lvl = first([(per_name(by_user_cdef, user_index), 2),
                                (per_name(by_user, user_index), 3)])
    shape = (len(client_index), nk)
    fixed = {r: np.broadcast_to(rows([scalar.get(r, {})])[0], shape) for r in (5, 6, 8)}
    client_val, client_lvl = first([(per_name(by_udef_client, client_index), 4),
                                    (fixed[5], 5), (fixed[6], 6),
                                    (per_name(by_client, client_index), 7), (fixed[8], 8)])
    # Gather as (key, pair) so that each key's column comes out contiguous.
    tr = np.ascontiguousarray
    level = np.take(tr(user_lvl.T), ucodes, axis=1)
    result = np.take(tr(user_val.T), ucodes, axis=1)
    below = level == 0
    if below.any():
        cl = np.take(tr(client_lvl.T), ccodes, axis=1)
        cv = np.take(tr(client_val.T), ccodes, axis=1)
        level = np.where(below, cl, level)
        result = np.where(below, cv, result)

    # Rung 1 overrides: look pairs up by a combined integer code, once for all keys.
    if by_pair:
        width = max(len(uniq_clients), 1)
        pairs = list(by_pair)
        pu = user_index.get_indexer(pd.Index([p[0] for p in pairs], dtype=object))
        pc = client_index.get_indexer(pd.Index([p[1] for p in pairs], dtype=object))
        known = np.flatnonzero((pu >= 0) & (pc >= 0))
        if len(known):
            entry_codes = pu[known] * width + pc[known]
            entry_vals = rows([by_pair[pairs[i]] for i in known])
            pos = pd.Index(entry_codes).get_indexer(ucodes * width + ccodes)
            hit = np.flatnonzero(pos >= 0)
            if len(hit):
                cand = entry_vals[pos[hit]].T  # (nk, hits)
                present = cand != _MISSING
                sub_val, sub_lvl = result[:, hit], level[:, hit]
                sub_val[present] = cand[present]
                sub_lvl[present] = 1
                result[:, hit], level[:, hit] = sub_val, sub_lvl
    # An empty client id (or user) narrows the ladder as in resolution.active_levels: only
    # {user=U}, {user=<default>} (or only the client-id rungs; or nothing when both are empty).
    empty_user = uniq_users.index("") if "" in uniq_users else -1
    empty_client = uniq_clients.index("") if "" in uniq_clients else -1
    if empty_user >= 0 or empty_client >= 0:
        no_user, no_client = ucodes == empty_user, ccodes == empty_client
        narrowed = [
            (no_client & ~no_user, ucodes, [(per_name(by_user, user_index), 3),
                                            (np.broadcast_to(rows([scalar.get(6, {})])[0],
                                                             (len(user_index), nk)), 6)]),
            (no_user & ~no_client, ccodes, [(per_name(by_client, client_index), 7),
                                            (np.broadcast_to(rows([scalar.get(8, {})])[0],
                                                             (len(client_index), nk)), 8)]),
        ]
        for mask, codes, candidates in narrowed:
            where = np.flatnonzero(mask)
            if len(where):
                val, lvl = first(candidates)
                result[:, where] = np.take(tr(val.T), codes[where], axis=1)
                level[:, where] = np.take(tr(lvl.T), codes[where], axis=1)
        level[:, np.flatnonzero(no_user & no_client)] = 0
    result[level == 0] = np.nan
    values = {key: result[i] for i, key in enumerate(keys)}
    levels = {key: level[i] for i, key in enumerate(keys)}

    user_arr = np.asarray(uniq_users, dtype=object)[ucodes]
    client_arr = np.asarray(uniq_clients, dtype=object)[ccodes]
    return BulkResolution(user_arr, client_arr, values, levels)
