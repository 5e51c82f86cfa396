"""What a killed cl-diag left behind, found by name and removed by the next run in that folder.

The atomic writer's temporary files (``.<name>.<pid>-<random>.tmp``) and the output staging
folders (``.cl-diag-staging-<pid>-<random>``) carry their process's id, so a later run tells a
leftover (its process gone) from a live run's work. :func:`remove_leftovers` removes them,
announcing each removal through the ``cl_diag`` logger; a folder only when the caller's
``proof`` (the staging marker) says cl-diag made it, so a user's folder of a similar name stays.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

__all__ = ["log", "pid_alive", "remove_leftovers", "tagged", "temp_files"]

#: The package's logger: library code announces what it cleaned up; the CLI shows it.
log = logging.getLogger("cl_diag")

#: the random part tempfile.mkstemp / mkdtemp add to a name
_RANDOM = r"[a-z0-9_]{8}"


def tagged(prefix: str) -> str:
    """``prefix`` followed by this process's id: the start of a temporary name it makes."""
    return f"{prefix}{os.getpid()}-"


def temp_files(names: str) -> re.Pattern[str]:
    """The atomic writer's temporary files for targets whose names match the regular
    expression ``names`` (e.g. ``r"last\\.pt|metrics\\.csv"``)."""
    return re.compile(rf"^\.(?:{names})\.(?:(?P<pid>\d+)-)?{_RANDOM}\.tmp$")


def pid_alive(pid: int) -> bool:
    """Whether a process with id ``pid`` exists on this machine (ours or another user's)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else (or cannot tell): keep its files
        return True
    return True


def remove_leftovers(
    folder: Path,
    pattern: re.Pattern[str],
    *,
    what: str,
    proof: Callable[[Path], bool] | None = None,
) -> list[Path]:
    """Remove the entries of ``folder`` whose whole name matches ``pattern`` and whose process
    (the ``pid`` group; none for an untagged name) is gone; return them. A folder is removed,
    with its contents, only when ``proof(folder)`` says cl-diag made it (no ``proof``: no
    folder is removed); links are unlinked, never followed. Nothing that cannot be removed
    stops the caller. Each removal is announced on the ``cl_diag`` logger."""
    folder = Path(folder)
    removed: list[Path] = []
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None:
            continue
        pid = match.groupdict().get("pid")
        if pid is not None and pid_alive(int(pid)):
            continue
        path = Path(entry.path)
        try:
            if entry.is_dir(follow_symlinks=False):
                if proof is None or not proof(path):
                    continue
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:
            continue
        removed.append(path)
        log.warning("removed %s, a %s left by an interrupted cl-diag run", path, what)
    return removed
