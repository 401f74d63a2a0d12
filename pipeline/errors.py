"""The pipeline's one error class, under quota_core's hierarchy.

    QuotaError (quota_core.errors)
    └── PipelineError    an input the job cannot use (missing or mistyped column, empty
        │                date range, corrupt or unreadable file, unreachable topic), or an
        │                output it cannot write
        └── BadInputFile a usage or snapshot file whose columns are missing or mistyped, or
                         that is not Parquet: found before Spark starts, a usage error
                         (also a quota_core ParseError: exit 2)

Spark's own exceptions (``AnalysisException``, ``Py4JJavaError``...) are translated into it at
the boundary (:func:`pipeline.readers` and :func:`pipeline.output`), so the CLI and the job
catch one class and print one clear line. ``path`` and ``column`` say where the problem is.
"""
from __future__ import annotations

from typing import Any

from quota_core.errors import ParseError, QuotaError

__all__ = ["PipelineError", "BadInputFile"]


class PipelineError(QuotaError):
    """An input the analysis job cannot use, or an output it cannot write.

    The message names the path (or topic) and, when one is at fault, the column, and says
    what to do; ``path`` and ``column`` carry the same for callers.
    """

    def __init__(self, message: str, path: str | None = None, column: str | None = None,
                 **context: Any) -> None:
        super().__init__(message, path=path, column=column, **context)
        self.path = path
        self.column = column


class BadInputFile(PipelineError, ParseError):
    """A file the user named (under ``--usage``) that breaks the collector's contract: a
    column missing or of another type, or not a Parquet file at all. Checked from the files'
    footers (pyarrow) before Spark starts; a usage error (exit 2), named in one line."""
