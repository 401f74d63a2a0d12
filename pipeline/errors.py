"""The pipeline's one error class, under quota_core's hierarchy.

    QuotaError (quota_core.errors)
    └── PipelineError    an input the job cannot use (missing or mistyped column, empty
                         date range, corrupt or unreadable file, unreachable topic), or an
                         output it cannot write

Spark's own exceptions (``AnalysisException``, ``Py4JJavaError``...) are translated into it at
the boundary (:func:`pipeline.readers` and :func:`pipeline.output`), so the CLI and the job
catch one class and print one clear line. ``path`` and ``column`` say where the problem is.
"""
from __future__ import annotations

from typing import Any

from quota_core.errors import QuotaError

__all__ = ["PipelineError"]


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
