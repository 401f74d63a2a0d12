"""Reading a file the user named (an import, client properties), bounded.

``/dev/zero``, a FIFO nobody writes to, a terminal or a multi-gigabyte file given by mistake
must not hang the CLI or fill its memory: :func:`read_text_file` refuses anything that is not
a regular file, naming what it is, and stops at a size limit.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from quota_core.errors import ParseError, QuotaError

if TYPE_CHECKING:  # pragma: no cover
    from quota_core.domain.serialization import QuotaFile

__all__ = ["IMPORT_LIMIT", "LINE_LIMIT", "PROPERTIES_LIMIT", "read_bytes_file",
           "read_text_file", "upload_text", "read_quota_path", "read_quota_upload"]

#: Quota exports: a million entries fit in well under this.
IMPORT_LIMIT = 64 * 2**20
#: Kafka client properties (``--command-config``, ``--add-config-file``): a few lines.
PROPERTIES_LIMIT = 2**20
#: The longest line of an uploaded list (below the csv module's 128 KiB field limit, whose
#: csv.Error would otherwise escape as a crash of the page).
LINE_LIMIT = 64 * 2**10


def _kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, words in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "not a regular file"


def _size(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit} bytes"


def read_bytes_file(path: str | Path, what: str, limit: int,
                    error: type[QuotaError] = ParseError) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    ``what`` names the file in messages (``"--import file"``). Raises ``error`` (a
    :class:`ParseError` by default), its message starting ``Cannot read PATH:`` and its
    ``context`` holding ``path`` and ``reason``, when the file is missing, unreadable, not a
    regular file, or larger than ``limit``. The file is opened without blocking, so a FIFO
    is refused instead of waiting for a writer.
    """
    path = Path(path)

    def fail(reason: str, fix: str = "") -> QuotaError:
        return error(f"Cannot read {path}: {reason}.{' ' + fix if fix else ''}",
                     path=str(path), reason=reason)

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise fail(exc.strerror or type(exc).__name__) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise fail(f"it is {_kind(mode)}, not a regular file",
                       f"A {what} must be a regular file (this one could be endless): save "
                       f"the content to a file and give that.")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise fail(f"it is larger than {_size(limit)}, the most a {what} may be",
                           "Check that it is the right file.")
        return b"".join(chunks)
    except OSError as exc:
        raise fail(exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)


def read_text_file(path: str | Path, what: str, limit: int,
                   error: type[QuotaError] = ParseError, fix: str = "") -> str:
    """:func:`read_bytes_file` decoded as UTF-8; other bytes are refused naming the offset
    (``fix`` says what to give instead; default: save it as UTF-8)."""
    return _utf8(read_bytes_file(path, what, limit, error), str(path), what, error, fix)


def _utf8(raw: bytes, path: str, what: str, error: type[QuotaError], fix: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"it is not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise error(f"Cannot read {path}: {reason}. {fix or f'Save the {what} as UTF-8.'}",
                    path=path, reason=reason) from None


#: What every reader of a quota file calls it, and what to give instead of a wrong one.
_QUOTA_FILE, _QUOTA_FIX = "quota file", "Give a JSON or YAML export."


def read_quota_path(path: str | Path) -> "QuotaFile":
    """The quota file the user named, read as every command reads one (``lint FILE``,
    ``plan FILE``, ``--import``, ``analyze --quotas`` / ``--what-if``): a regular file of at
    most :data:`IMPORT_LIMIT` bytes of UTF-8, then the strict reader and its checks
    (:func:`quota_core.domain.serialization.read_quota_file`). One :class:`ParseError` of one line,
    the same for every command, when the file cannot be read or may not be applied."""
    from quota_core.domain.serialization import format_of, read_quota_file

    text = read_text_file(path, _QUOTA_FILE, IMPORT_LIMIT, fix=_QUOTA_FIX)
    return read_quota_file(text, format_of(Path(path).name, text), source=str(path))


def read_quota_upload(data: bytes, name: str) -> "QuotaFile":
    """A quota file uploaded or pasted on the Plan page (``name``: the upload's file name, or
    ``pasted text``): the bounds, the strict reader and the checks of :func:`read_quota_path`,
    with its messages."""
    from quota_core.domain.serialization import format_of, read_quota_file

    if len(data) > IMPORT_LIMIT:
        reason = f"it is larger than {_size(IMPORT_LIMIT)}, the most a {_QUOTA_FILE} may be"
        raise ParseError(f"Cannot read {name}: {reason}. Check that it is the right file.",
                         path=name, reason=reason)
    text = _utf8(data, name, _QUOTA_FILE, ParseError, _QUOTA_FIX)
    return read_quota_file(text, format_of(name, text), source=name)


def upload_text(data: bytes, what: str, limit: int = IMPORT_LIMIT,
                line_limit: int = LINE_LIMIT) -> str:
    """An uploaded file's bytes (a dashboard upload: already in memory) as text, with the
    same bounds as a file the CLI reads: at most ``limit`` bytes and no line longer than
    ``line_limit``, else one :class:`ParseError` naming ``what``. Bytes that are not UTF-8
    become U+FFFD, as the Edit page has always read its clients list."""
    if len(data) > limit:
        raise ParseError(f"The {what} is larger than {_size(limit)}, the most it may be: "
                         f"upload the part you need.", reason="too large")
    longest = max(map(len, data.splitlines()), default=0)
    if longest > line_limit:
        raise ParseError(f"The {what} has a line of {longest:,} bytes, longer than the "
                         f"{line_limit // 1024} KiB a line may be: it is not a list of names.",
                         reason="line too long")
    return data.decode("utf-8", "replace")
