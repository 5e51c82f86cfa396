"""Reading a result.json from disk before it is typed: the file checks that make a FIFO, a
device, a huge or binary file or a file of another kind a clear error (:func:`read_result_json`,
which :func:`cl_diag.result.load` types), and a cheap test of whose file a path is
(:func:`is_result_file`, for the folders cl-diag writes and cleans)."""

from __future__ import annotations

import json
import re
import stat
from pathlib import Path

from cl_diag.errors import UserError
from cl_diag.io.jsonfile import parse_json
from cl_diag.vocabulary import RESULT_NAME

__all__ = ["MAX_RESULT_BYTES", "is_result_file", "read_result_json"]

#: the largest result.json :func:`load` reads (a real one is tens to hundreds of kilobytes)
MAX_RESULT_BYTES = 256 << 20


def read_result_json(path: str | Path) -> tuple[object, Path]:
    """The parsed JSON of one result.json (or the folder holding it) and its path: a regular
    file of at most :data:`MAX_RESULT_BYTES`, UTF-8, valid JSON of bounded nesting; every
    problem is a :class:`UserError` naming the file and the fix.
    :func:`cl_diag.result.load` types it."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_NAME
    try:
        # a regular file of bounded size only: a FIFO would block for ever, /dev/zero never end
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise UserError(
                f"{path} is not a regular file (a device, FIFO or socket?), so not a result.json. "
                "Pass the result.json `cl-diag analyze` wrote, or its folder."
            )
        if info.st_size > MAX_RESULT_BYTES:
            raise UserError(
                f"{path} has {info.st_size:,} bytes, more than any result.json cl-diag writes "
                f"({MAX_RESULT_BYTES:,} at most). Pass the result.json `cl-diag analyze` wrote."
            )
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(
            f"{path} is not a text file, so not a result.json. "
            "Pass the result.json `cl-diag analyze` wrote."
        ) from None
    except OSError as exc:
        raise UserError(
            f"Cannot read {path}: {exc.strerror or exc}. Check the path and its permissions."
        ) from None
    try:
        data = parse_json(text, where=path, fix="Pass the result.json `cl-diag analyze` wrote.")
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
            "it may be truncated or not a result file. "
            "Re-run `cl-diag analyze` to write it again."
        ) from None
    return data, path


#: how every result.json cl-diag writes begins (:func:`dumps_json` of a Result: "schema" first)
_RESULT_START = re.compile(rb'\{\s*"schema":\s*"cl-diag/result/\d+"')


def is_result_file(path: str | Path) -> bool:
    """True when ``path`` is a regular file that begins as every result.json cl-diag writes
    (any schema version). Reads at most its first 64 bytes: a cheap test of whose file it is,
    not a validation (that is :func:`load`)."""
    path = Path(path)
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            return _RESULT_START.match(handle.read(64)) is not None
    except OSError:
        return False
