"""Read the collector's history for lint, without Spark: ``DIR/usage/date=YYYY-MM-DD/`` and
``DIR/quotas/date=…/`` (Parquet, or JSON lines; :mod:`quota_core.telemetry.schema`).

Only the last days a rule looks at are read (whole ``date=`` partitions, newest first), and
only the columns the rules use. Every problem is one :class:`~quota_core.errors.ParseError`
naming the path and, where one is at fault, the column.
"""
from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from quota_core.domain.entities import Entity
from quota_core.errors import ParseError
from quota_core.telemetry.schema import snapshots_to_quotas

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["USAGE_NEEDED", "read_usage", "read_latest_quotas"]

#: The usage columns the rules read.
USAGE_NEEDED = ("ts", "quota_type", "user", "client_id", "rate", "throttle_ms", "interval_s")


def _days(folder: Path) -> list[tuple[date, Path]]:
    out = []
    for part in folder.iterdir() if folder.is_dir() else ():
        if part.is_dir() and part.name.startswith("date="):
            try:
                out.append((date.fromisoformat(part.name[5:]), part))
            except ValueError:
                raise ParseError(f"{part}: not a date=YYYY-MM-DD folder of the collector's "
                                 f"history.") from None
    return sorted(out)


def _files(day: Path) -> list[Path]:
    return sorted(f for f in day.iterdir() if f.is_file() and not f.name.startswith((".", "_"))
                  and f.suffix.lower() in (".parquet", ".json", ".jsonl"))


def _read(files: list[Path], columns: tuple[str, ...], where: Path) -> "pd.DataFrame":
    import pandas as pd

    frames = []
    for f in files:
        try:
            if f.suffix.lower() == ".parquet":
                import pyarrow.parquet as pq

                names = pq.read_schema(f).names
                missing = [c for c in columns if c not in names]
                frame = None if missing else pq.read_table(f, columns=list(columns)).to_pandas()
            else:
                frame = pd.read_json(f, lines=True, dtype=False)
                missing = [c for c in columns if c not in frame.columns]
        except (OSError, ValueError) as exc:
            raise ParseError(f"{f}: not a readable history file ({' '.join(str(exc).split())[:200]})"
                             f"; remove or rewrite it.") from None
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several classes here
            raise ParseError(f"{f}: not a readable Parquet file ({type(exc).__name__}); remove "
                             f"or rewrite it.") from None
        if missing:
            raise ParseError(f"{f}: column {missing[0]!r} is missing; the collector writes "
                             f"{', '.join(columns)}.")
        frames.append(frame[list(columns)])
    if not frames:
        return pd.DataFrame(columns=list(columns))
    out = pd.concat(frames, ignore_index=True)
    try:
        out["ts"] = pd.to_datetime(out["ts"], utc=True)
    except (ValueError, TypeError) as exc:
        raise ParseError(f"{where}: column 'ts' holds a value that is not a UTC time "
                         f"({exc}).") from None
    return out


def read_usage(history: str | Path, days: float) -> "pd.DataFrame":
    """The usage samples of the history's last ``days`` days (and the day before, whole)."""
    root = Path(history)
    if not (root / "usage").is_dir():
        raise ParseError(f"--history {history}: no usage/ folder there. Point it at the "
                         f"collector's output (kafka-client-quotas collect --to DIR).")
    days_found = _days(root / "usage")
    if not days_found:
        raise ParseError(f"{root / 'usage'}: no date=YYYY-MM-DD folders: the collector has "
                         f"written no samples yet.")
    last = days_found[-1][0]
    keep = [p for d, p in days_found if d >= last - timedelta(days=int(days) + 1)]
    frame = _read([f for p in keep for f in _files(p)], USAGE_NEEDED, root / "usage")
    if frame.empty:
        raise ParseError(f"{root / 'usage'}: no usage samples in the last {days:g} days "
                         f"of the history.")
    for col in ("rate", "throttle_ms", "interval_s"):
        frame[col] = _numbers(frame[col], root / "usage", col)
    return frame


def _numbers(series, where: Path, col: str):
    import pandas as pd

    out = pd.to_numeric(series, errors="coerce")
    if (out.isna() & series.notna()).any():
        raise ParseError(f"{where}: column {col!r} holds a value that is not a number.")
    return out.astype(float)


def read_latest_quotas(history: str | Path) -> tuple[dict[Entity, dict[str, float]], str]:
    """The newest quota snapshot of the history, and its time."""
    root = Path(history) / "quotas"
    days_found = _days(root)
    for _, part in reversed(days_found):
        frame = _read(_files(part), ("ts", "entity", "key", "value"), root)
        if frame.empty:
            continue
        newest = frame[frame["ts"] == frame["ts"].max()]
        rows = [{"ts": 0, "entity": e if isinstance(e, str) else None, "key": k, "value": v}
                for e, k, v in zip(newest["entity"], newest["key"], newest["value"])]
        try:
            quotas = snapshots_to_quotas(rows).get(0, {})
        except Exception as exc:  # noqa: BLE001 - an entity that does not parse
            raise ParseError(f"{part}: a quota snapshot row does not parse ({exc}).") from None
        return quotas, f"the history's quota snapshot of " \
                       f"{newest['ts'].iloc[0].strftime('%Y-%m-%d %H:%M UTC')}"
    raise ParseError(f"--history {history}: no quota snapshots (quotas/date=…) to lint: give "
                     f"a quota FILE or --bootstrap-server / --sandbox as well.")
