"""Writing a command's outputs so that a failure leaves nothing half-written.

Everything goes to a staging folder beside ``--out``; only when all files are
written are they moved into place (``os.replace`` is atomic per file on one
file system). On any exception the staging folder is removed and ``--out`` is
as it was.

Stale files: a writer may list the files it owns in :data:`OWNED_FILES` (one
name a line) inside the staging folder. Re-run into the same ``--out``, the files
the previous listing named that this run did not write again (e.g. the figure of
a layer the new result lacks) are removed after the new files are in place. Only
names from the tool's own listing are ever removed: nothing a user put in
``--out``, and nothing when there is no earlier listing.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write_text


def ensure_writable_parent(out: Path) -> Path:
    """Return the existing folder that will hold ``out``, or raise UserError."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(
            f"--out {out} exists and is not a folder. Give a folder path (it is created if "
            "missing)."
        )
    parent = out.parent.resolve()
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UserError(
            f"--out {out} lies under {parent}, which is a file, not a folder. Choose another --out."
        )
    for folder in (parent, out) if out.exists() else (parent,):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UserError(
                f"Cannot write to {folder} (for --out {out}): permission denied. Choose a writable "
                "folder."
            )
    return parent


#: name of the listing of the files a writer owns in its output folder (see the module docstring)
OWNED_FILES = ".cl-diag-owned"


def owned_files_text(names: list[str]) -> str:
    """The listing's text: the plain file names, sorted, one a line."""
    for name in names:
        if not _plain_name(name):
            raise ValueError(f"an owned file must be a plain file name, not {name!r}")
    return "".join(f"{name}\n" for name in sorted(set(names)))


def _plain_name(name: str) -> bool:
    # a name inside the folder itself: no separators, no parent references, not the listing
    return (
        bool(name)
        and name == Path(name).name
        and name not in (".", "..", OWNED_FILES)
        and "\\" not in name
    )


def _read_owned(folder: Path) -> set[str]:
    path = folder / OWNED_FILES
    if not path.is_file() or path.is_symlink():
        return set()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    return {line for line in lines if _plain_name(line)}


def check_replaceable(
    out: Path, names: Iterable[str], *, ours: Callable[[Path], bool] | None = None
) -> None:
    """Refuse to replace a file of ``out`` that cl-diag did not write.

    ``names`` are the files (relative paths) a write is about to move into ``out``. Each
    that already exists there must be cl-diag's: named in ``out``'s :data:`OWNED_FILES`
    listing, the listing itself, or recognised by ``ours`` (e.g. a result.json by its
    content). Anything else, such as a report.md of the user's own, ends in a
    :class:`UserError` that names it and the fix (another folder, or overwrite).
    """
    out = Path(out)
    owned = _read_owned(out) | {OWNED_FILES}
    foreign = [
        name
        for name in names
        if (out / name).exists()
        and name not in owned
        and not (ours is not None and (out / name).is_file() and ours(out / name))
    ]
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        raise UserError(
            f"--out {out} already holds {shown}, which cl-diag did not write; writing there would "
            "replace it. Choose another folder, or pass --overwrite (overwrite=True in Python) "
            "to replace it."
        )


@contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """Yield a temporary folder; on success move its files into ``out``.

    When the staged files include an :data:`OWNED_FILES` listing, files named by the listing
    already in ``out`` but not staged this time are removed once the new files are in place.
    """
    out = Path(out)
    # Stage in the nearest existing folder above --out: same file system, and nothing is
    # created under --out (or its missing parents) until every file is written.
    anchor = ensure_writable_parent(out)
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=anchor))
    except (
        OSError
    ) as exc:  # e.g. a read-only or virtual file system (/proc) that access() did not reveal
        raise UserError(
            f"Cannot write to {anchor} (for --out {out}): {exc.strerror or exc}. Choose a "
            "writable folder."
        ) from None
    try:
        yield staging
        stale: set[str] = set()
        if (staging / OWNED_FILES).is_file():
            staged = {p.name for p in staging.iterdir()}
            stale = _read_owned(out) - staged
        out.mkdir(parents=True, exist_ok=True)
        for source in sorted(staging.rglob("*")):
            target = out / source.relative_to(staging)
            if source.is_dir():
                target.mkdir(exist_ok=True)
            else:
                os.replace(source, target)
        for name in sorted(stale):
            target = out / name
            # a regular file only: never follow a link or empty a folder that took the name
            if target.is_file() and not target.is_symlink():
                target.unlink()
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _finite_or_none(value: object) -> object:
    """JSON has no NaN/Inf: an undefined statistic (e.g. of an empty class split) is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    return value


def dumps_json(payload: dict) -> str:
    """Deterministic JSON text: insertion order, shortest float repr, trailing newline."""
    return json.dumps(_finite_or_none(payload), indent=2, allow_nan=False) + "\n"


def write_json(path: Path, payload: dict) -> None:
    """Write :func:`dumps_json` of ``payload`` to ``path`` atomically (UTF-8, "\\n" newlines)."""
    atomic_write_text(path, dumps_json(payload))
