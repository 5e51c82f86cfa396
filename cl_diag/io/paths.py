"""Paths a user gives: the words every "not there" message uses, and a path argument checked.

``Path.exists()`` is false for a missing file, a dangling symbolic link and a loop of links
alike; a user fixes each differently, so :func:`why_missing` tells them apart.
:func:`path_argument` refuses what is no path (a number, an empty string) by its parameter's
name, as the command line refuses an empty ``--out``."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from cl_diag.errors import UserError
from cl_diag.options import shown

__all__ = ["path_argument", "why_missing"]


def path_argument(value: object, name: str) -> Path:
    """``value`` as a :class:`Path` when it is one (a ``str`` or an ``os.PathLike``, not
    empty); else a :class:`UserError` naming the parameter ``name``, what it got and the fix."""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text.strip():
            return Path(text)
        problem = "is empty (it would mean the current folder)" if not text else "is no path"
    else:
        problem = f"is of type {type(value).__name__}, not a path"
    raise UserError(
        f"{name}={shown(value)} {problem}: give a str or pathlib.Path, e.g. {name}='out/'."
    )


def why_missing(path: str | os.PathLike[str]) -> str:
    """What is wrong with a path that does not exist, as the end of a sentence that begins with
    it: ``does not exist``, ``is a symbolic link to X, which does not exist`` or ``is a loop of
    symbolic links (a -> b -> a)``."""
    path = Path(path)
    if not path.is_symlink():
        return "does not exist"
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            chain, at = [str(path)], path
            while at.is_symlink() and len(chain) < 6:
                at = at.parent / os.readlink(at)
                chain.append(str(at))
                if str(at) == chain[0]:
                    break
            return f"is a loop of symbolic links ({' -> '.join(chain)})"
    return f"is a symbolic link to {os.readlink(path)}, which does not exist"
