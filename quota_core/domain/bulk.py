"""Bulk resolution: many (user, client-id) pairs against one quota set, vectorised.

Same answers as :func:`quota_core.domain.resolution.resolve_values`, pair for pair, but the work is
done once per *distinct* user and client id and then gathered with numpy, so a million pairs
resolve in well under a second. Used by pages (every known client at once) and the pipeline.
numpy and pandas are imported here only, lazily, so the rest of the core stays light.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from quota_core.domain.entities import CLIENT_ID, IP, USER, Entity
from quota_core.domain.keys import CLIENT_KEYS
from quota_core.domain import ladder
from quota_core.domain.ladder import ABSENT, DEFAULT, NAME
from quota_core.domain.resolution import ANONYMOUS

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import pandas as pd

__all__ = ["BulkResolution", "bulk_resolve", "bulk_resolve_buckets"]

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
    """Resolve each client ``(users[i], client_ids[i])``; None means ANONYMOUS / the empty
    client id. Rungs are consulted as :func:`quota_core.domain.ladder.consulted` says."""
    _same_length(users, client_ids)
    ucodes, uniq_users = _codes(users, ANONYMOUS)
    ccodes, uniq_clients = _codes(client_ids, "")
    return _resolve(quotas, ucodes, uniq_users, ccodes, uniq_clients, keys,
                    lambda r, has_user, has_client: ladder.consulted(r, has_user, has_client),
                    users_out=None, clients_out=None)


def bulk_resolve_buckets(quotas: Mapping[Entity, Mapping[str, float]],
                         users: Sequence[str | None], client_ids: Sequence[str | None],
                         keys: tuple[str, ...] = CLIENT_KEYS) -> BulkResolution:
    """The limit of each broker bucket, from its metric tags: ``users[i]`` / ``client_ids[i]``
    is the tag's raw value, None (or "") when the bucket is not keyed by that tag. Only the
    rungs :func:`quota_core.domain.ladder.levels_for_tags` allows can set a bucket's limit."""
    _same_length(users, client_ids)
    ucodes, uniq_users = _codes([u or None for u in users], "")
    ccodes, uniq_clients = _codes([c or None for c in client_ids], "")
    allowed = {(hu, hc): ladder.levels_for_tags(hu, hc) for hu in (False, True) for hc in (False, True)}
    return _resolve(quotas, ucodes, uniq_users, ccodes, uniq_clients, keys,
                    lambda r, has_user, has_client: r.level in allowed[(has_user, has_client)],
                    users_out=users, clients_out=client_ids)


def _same_length(users: Sequence, client_ids: Sequence) -> None:
    if len(users) != len(client_ids):
        raise ValueError(f"users and client_ids differ in length ({len(users)} vs "
                         f"{len(client_ids)}): give one client id per user (None for none).")


def _entries_by_level(quotas: Mapping[Entity, Mapping[str, float]]
                      ) -> dict[int, dict[object, Mapping[str, float]]]:
    """The quota set split by rung: level -> {lookup name: quotas}. The lookup name is the user
    (a rung that names a user only), the client id, the (user, client id) pair, or None."""
    shape_level = {(r.user, r.client_id): r for r in ladder.LADDER}
    tables: dict[int, dict[object, Mapping[str, float]]] = {r.level: {} for r in ladder.LADDER}
    for entity, q in quotas.items():
        d = dict(entity.parts)
        if IP in d:
            continue
        shape = tuple(ABSENT if t not in d else DEFAULT if d[t] is None else NAME
                      for t in (USER, CLIENT_ID))
        r = shape_level.get(shape)
        if r is None:
            continue
        u, c = d.get(USER), d.get(CLIENT_ID)
        lookup = (u, c) if r.user == NAME and r.client_id == NAME else \
            u if r.user == NAME else c if r.client_id == NAME else None
        tables[r.level][lookup] = q
    return tables


def _resolve(quotas, ucodes, uniq_users, ccodes, uniq_clients, keys, consults,
             users_out, clients_out) -> BulkResolution:
    """Down the ladder, rung by rung, over the rows not yet decided for some key.

    ``consults(rung, has_user, has_client)`` says whether a rung may decide a row whose user
    / client id is non-empty; it is asked four times per rung, never per row."""
    import numpy as np
    import pandas as pd

    user_index = pd.Index(uniq_users, dtype=object)
    client_index = pd.Index(uniq_clients, dtype=object)
    n, nk = len(ucodes), len(keys)
    nonempty_user = np.array([bool(u) for u in uniq_users], dtype=bool)
    nonempty_client = np.array([bool(c) for c in uniq_clients], dtype=bool)
    combo = (nonempty_user[ucodes].astype(np.int8) * 2 + nonempty_client[ccodes]) if n else \
        np.zeros(0, dtype=np.int8)

    def rows(tables: "Sequence[Mapping[str, float]]") -> "np.ndarray":
        """(len(tables), nk): each entry's value per key, or _MISSING."""
        return np.array([q.get(k, _MISSING) for q in tables for k in keys],
                        dtype=float).reshape(len(tables), nk)

    def per_name(table: dict, index: "pd.Index") -> "np.ndarray":
        """(len(index), nk) over the distinct names: the key's value, or _MISSING."""
        out = np.full((len(index), nk), _MISSING)
        pos = index.get_indexer(pd.Index(list(table), dtype=object))
        hit = pos >= 0
        out[pos[hit]] = rows(list(table.values()))[hit]
        return out

    def candidates(r, table: dict, idx: "np.ndarray") -> "np.ndarray":
        """(nk, len(idx)): what rung ``r`` holds for the rows ``idx``, or _MISSING."""
        if r.user == NAME and r.client_id == NAME:
            out = np.full((len(idx), nk), _MISSING)
            width = max(len(uniq_clients), 1)
            pairs = list(table)
            pu = user_index.get_indexer(pd.Index([p[0] for p in pairs], dtype=object))
            pc = client_index.get_indexer(pd.Index([p[1] for p in pairs], dtype=object))
            known = np.flatnonzero((pu >= 0) & (pc >= 0))
            if len(known):
                pos = pd.Index(pu[known] * width + pc[known]).get_indexer(
                    ucodes[idx] * width + ccodes[idx])
                hit = np.flatnonzero(pos >= 0)
                out[hit] = rows([table[pairs[i]] for i in known])[pos[hit]]
            return out.T
        if r.user == NAME:
            return per_name(table, user_index)[ucodes[idx]].T
        if r.client_id == NAME:
            return per_name(table, client_index)[ccodes[idx]].T
        return np.broadcast_to(rows([table[None]]).T, (nk, len(idx)))

    level = np.zeros((nk, n), dtype=np.int8)
    value = np.full((nk, n), np.nan)
    tables = _entries_by_level(quotas)
    for r in ladder.LADDER:
        if not tables[r.level] or n == 0:
            continue
        allowed = np.array([consults(r, hu, hc) for hu in (False, True) for hc in (False, True)])
        idx = np.flatnonzero(allowed[combo] & (level == 0).any(axis=0))
        if not len(idx):
            continue
        cand = candidates(r, tables[r.level], idx)
        sub_level = level[:, idx]
        take = (sub_level == 0) & (cand != _MISSING)
        if take.any():
            sub_value = value[:, idx]
            sub_value[take] = cand[take]
            sub_level[take] = r.level
            value[:, idx], level[:, idx] = sub_value, sub_level
    value[level == 0] = np.nan
    user_arr = (np.asarray(uniq_users, dtype=object)[ucodes] if users_out is None
                else np.asarray(list(users_out), dtype=object))
    client_arr = (np.asarray(uniq_clients, dtype=object)[ccodes] if clients_out is None
                  else np.asarray(list(clients_out), dtype=object))
    return BulkResolution(user_arr, client_arr,
                          {key: value[i] for i, key in enumerate(keys)},
                          {key: level[i] for i, key in enumerate(keys)})
