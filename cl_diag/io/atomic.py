"""The one atomic file writer: a crash leaves the old file or the new one, never a torn one.

:func:`atomic_write` writes a temporary ``.<name>.<pid>-<random>.tmp`` in the *same* folder
(the process id tells a killed writer's leftover from a live one's, :mod:`cl_diag.io.leftovers`),
fsyncs it, ``os.replace``-s it over the target and fsyncs the folder. Any failure before the
rename removes the temporary file and leaves the previous one untouched; a full disk is a
:class:`~cl_diag.errors.StorageFullError` naming the file. The new file gets the permissions
``open()`` would give (or those of the file it replaces), not ``mkstemp``'s ``0o600``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

from cl_diag.errors import StorageFullError, UserError
from cl_diag.io.leftovers import tagged

__all__ = [
    "STORAGE_FULL",
    "TEMP_SUFFIX",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "in_chain",
    "storage_error",
    "temp_prefix",
    "user_os_error",
]

#: Suffix of the writer's temporary files; with :func:`temp_prefix` it names what a killed
#: writer may have left behind (``.<name>.<pid>-<random>.tmp``).
TEMP_SUFFIX = ".tmp"

_UMASK: int | None = None


def temp_prefix(path: str | os.PathLike[str]) -> str:
    """The name prefix of the temporary files written for ``path``."""
    return f".{Path(path).name}."


def _umask() -> int:
    # os.umask can only be read by setting it; do it once per process, not per write, so
    # no other thread ever sees the transient value for long.
    global _UMASK
    if _UMASK is None:
        current = os.umask(0o022)
        os.umask(current)
        _UMASK = current
    return _UMASK


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # not supported on every platform / file system (e.g. Windows)
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(handle)`` on a temporary file beside ``path``, then move it over ``path``.

    ``write`` receives a binary file handle. On any exception (including KeyboardInterrupt)
    the temporary file is removed and ``path`` keeps its previous content.
    """
    path = Path(path)
    folder = path.parent
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:  # no file yet: what open() would create
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(prefix=tagged(temp_prefix(path)), suffix=TEMP_SUFFIX, dir=folder)
    except OSError as exc:
        raise (storage_error(exc, path) or exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        # torch.save, interrupted while it writes, closes its zip writer, which raises a
        # RuntimeError ("unexpected pos") whose context is the interrupt: re-raised as such, the
        # signal stops the command as a signal does (exit 130 or 143), not as a crash
        interrupt = in_chain(exc, KeyboardInterrupt)
        if interrupt is not None and interrupt is not exc:
            raise interrupt from None
        full = storage_error(exc, path)
        if full is not None:
            raise full from None
        raise
    _fsync_dir(folder)


_Found = TypeVar("_Found", bound=BaseException)


def in_chain(exc: BaseException | None, kind: type[_Found]) -> _Found | None:
    """The first exception of type ``kind`` in ``exc``'s chain of causes (or contexts), within
    ten links."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, kind):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


#: errno values that say the storage is full: the disk, the user's quota, or the file-size
#: limit (``ulimit -f``)
STORAGE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _os_error(exc: BaseException | None) -> OSError | None:
    # torch.save reports a failed write of its stream as a RuntimeError whose cause (or text)
    # holds the OSError
    return in_chain(exc, OSError)


def storage_error(
    exc: BaseException,
    path: str | os.PathLike[str],
    *,
    kept: str = "the file keeps its previous content, if it had one",
) -> StorageFullError | None:
    """A :class:`~cl_diag.errors.StorageFullError` (a UserError and an OSError) for a write of
    ``path`` that failed because the storage is full (see :data:`STORAGE_FULL`), or None for
    any other failure. ``kept`` says what survived the failed write. An error that already is
    a StorageFullError is reworded for ``path`` and ``kept``."""
    if isinstance(exc, StorageFullError):
        reason = exc.reason
    else:
        error = _os_error(exc)
        if error is not None and error.errno in STORAGE_FULL:
            reason = error.strerror or str(error)
        else:
            text = str(exc)
            if not any(word in text for word in ("No space left", "Disk quota", "File too large")):
                return None
            reason = text.splitlines()[0] if text else type(exc).__name__
    full = StorageFullError(
        f"Cannot write {path}: {reason}. Free some space (or raise the quota or file-size "
        f"limit) and run the command again; {kept}."
    )
    full.reason = reason
    full.errno = errno.ENOSPC if "No space" in reason else errno.EFBIG
    return full


def user_os_error(exc: BaseException) -> UserError | None:
    """The :class:`~cl_diag.errors.UserError` for a failed file operation that the user can
    fix -- the storage is full (:func:`storage_error`), or a name is longer than the file
    system allows -- or None for any other failure."""
    error = _os_error(exc)
    if error is not None and error.errno == errno.ENAMETOOLONG:
        name = error.filename if error.filename is not None else "a path"
        shown = str(name) if len(str(name)) <= 80 else f"{str(name)[:60]}...{str(name)[-16:]}"
        return UserError(
            f"Cannot use {shown}: a file name in it (or the whole path) is longer than the file "
            "system allows (usually 255 bytes a name). Choose a shorter path."
        )
    filename = getattr(error, "filename", None)
    return storage_error(exc, filename if filename is not None else "a file")


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically, byte for byte: no newline translation,
    so the same text gives the same file on every platform."""
    atomic_write_bytes(path, text.encode("utf-8"))
