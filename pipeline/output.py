"""Write the tables all or nothing: into a hidden sibling directory, renamed at the end.

A failed or interrupted run leaves no ``--out`` directory (or the previous one untouched),
so a half-written table can never be mistaken for a result. Local (or shared-mount) paths
only: the rename is ``os.rename``.
"""
from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from .errors import PipelineError
from .spark_errors import translating

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

__all__ = ["check_out", "write_tables"]


def _local(out: str) -> Path:
    if "://" in out and not out.startswith("file:"):
        raise PipelineError(f"--out {out}: only a local directory can be written all or nothing "
                            f"(it is renamed into place); write locally and copy.", path=out)
    return Path(out.removeprefix("file:")).resolve()


def check_out(out: str, overwrite: bool) -> Path:
    """Fail before any work when ``out`` exists (unless ``overwrite``)."""
    path = _local(out)
    if path.exists() and not overwrite:
        raise PipelineError(f"--out {out} already exists: remove it or pass --overwrite.",
                            path=out)
    if not path.parent.is_dir():
        raise PipelineError(f"--out {out}: the parent directory {path.parent} does not exist.",
                            path=out)
    return path


def write_tables(tables: Mapping[str, "DataFrame"], out: str, overwrite: bool = False,
                 progress: Callable[[str], None] = lambda line: None) -> Path:
    """Write each table as Parquet to ``out/<name>``; all appear at once or none do."""
    path = check_out(out, overwrite)
    tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex[:8]}"
    try:
        for name, df in tables.items():
            progress(f"writing {name}")
            with translating(f"writing {name}"):
                df.write.parquet(str(tmp / name))
        if path.exists():
            old = path.parent / f".{path.name}.old-{uuid.uuid4().hex[:8]}"
            path.rename(old)
            tmp.rename(path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path
