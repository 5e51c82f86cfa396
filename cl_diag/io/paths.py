"""Why a path a user gave names nothing: the words every "not there" message uses.

``Path.exists()`` is false for a missing file, a dangling symbolic link and a loop of links
alike; a user fixes each differently, so :func:`why_missing` tells them apart."""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["why_missing"]


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
