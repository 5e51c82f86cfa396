"""Writing a command's outputs so that a failure leaves nothing half-written and nothing
of the user's is lost.

Everything goes to a staging folder beside ``--out`` (``.<out>.staging-<pid>-<random>``); only
when all files are written are they moved into place (``os.replace`` is atomic per file on one
file system). On any exception the staging folder is removed and ``--out`` is as it was.

Ownership is proven, never trusted. After each run, :data:`OWNED_FILES` in ``--out`` records
the SHA-256 of every file the tool wrote there (``<sha256>  <name>``, one a line). A later run
into the same folder

* replaces a file of the same name only if its content still has a recorded hash (the tool
  wrote it and nobody changed it since), or with ``overwrite``; anything else -- the user's own
  ``report.md``, a report they edited -- stops the run before anything moves;
* refuses, whatever ``overwrite`` says, when a name it writes is taken by a folder (or a path
  through a file): every target is checked before the first move, so the folder never mixes
  two runs;
* removes the files of the previous run it does not write again (e.g. the figure of a layer
  the new result lacks), and only those whose content still matches their recorded hash.

A listing the tool did not write (planted, copied, edited) proves nothing: a name without a
hash of the file's current content is never removed. During the moves the listing holds the
hashes of both the old and the new files, so a run killed half-way leaves a folder whose files
are all still proven. Staging folders left by a killed run are removed by the next run into the
same ``--out`` (:mod:`cl_diag.io.leftovers`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write_text, storage_error
from cl_diag.io.leftovers import remove_leftovers, staging_folders, tagged


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


#: name of the record of the files the tool wrote in an output folder, with their hashes
OWNED_FILES = ".cl-diag-owned"
_HEADER = "# cl-diag: the files it wrote in this folder, as <sha256>  <name>. Do not edit.\n"
_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")


def file_sha256(path: Path) -> str | None:
    """SHA-256 of a regular file's bytes; None for anything else (a link, folder, FIFO...)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _safe_name(name: str) -> bool:
    # a relative path inside the folder: no parent references, no absolute or odd parts
    if not name or "\\" in name or "\x00" in name:
        return False
    path = PurePosixPath(name)
    if path.is_absolute() or name == OWNED_FILES:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def owned_text(hashes: Mapping[str, Iterable[str]]) -> str:
    """The listing's text: one ``<sha256>  <name>`` line per hash, sorted by name then hash."""
    lines = []
    for name in sorted(hashes):
        if not _safe_name(name):
            raise ValueError(
                f"an owned file must be a relative path inside the folder, not {name!r}"
            )
        lines += [f"{digest}  {name}\n" for digest in sorted(set(hashes[name]))]
    return _HEADER + "".join(lines)


def read_owned(folder: Path) -> dict[str, set[str]]:
    """``{name: {sha256, ...}}`` from ``folder``'s listing; lines that do not parse (e.g. a
    listing of bare names) prove nothing and are ignored."""
    path = Path(folder) / OWNED_FILES
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode) or os.lstat(path).st_size > (16 << 20):
            return {}
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    owned: dict[str, set[str]] = {}
    for line in lines:
        match = _LINE.match(line)
        if match and _safe_name(match.group(2)):
            owned.setdefault(match.group(2), set()).add(match.group(1))
    return owned


def _occupied(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def check_targets(
    out: Path, names: Iterable[str], *, overwrite: bool, owned: Mapping[str, set[str]] | None = None
) -> None:
    """Raise UserError unless every file ``names`` (paths relative to ``out``) can be written
    into ``out``: no name taken by a folder or reached through a file, and no existing file the
    tool cannot prove it wrote (unless ``overwrite``). Nothing is changed."""
    out = Path(out)
    if not out.is_dir():
        return
    owned = read_owned(out) if owned is None else owned
    blocked: list[str] = []
    foreign: list[str] = []
    for name in sorted(set(names)):
        parts = PurePosixPath(name).parts
        for depth in range(1, len(parts)):
            above = out.joinpath(*parts[:depth])
            if _occupied(above) and (above.is_symlink() or not above.is_dir()):
                blocked.append(f"{above} is not a folder (cl-diag writes {out / name})")
                break
        else:
            target = out / name
            if not _occupied(target):
                continue
            if target.is_dir() and not target.is_symlink():
                blocked.append(f"{target} is a folder where cl-diag writes a file")
            elif not overwrite and file_sha256(target) not in owned.get(name, set()):
                foreign.append(name)
    if blocked:
        raise UserError(
            f"Cannot write into --out {out}: {'; '.join(blocked)}. Move or rename it, or choose "
            "another --out. Nothing was written."
        )
    if foreign:
        shown = ", ".join(foreign[:8]) + (
            f" ... ({len(foreign)} in all)" if len(foreign) > 8 else ""
        )
        them = "it" if len(foreign) == 1 else "them"
        raise UserError(
            f"--out {out} already holds {shown}, which cl-diag did not write (or which changed "
            f"since it did). Pass --overwrite to replace {them}, or choose another --out. "
            "Nothing was written."
        )


def _staged_files(staging: Path) -> list[str]:
    return sorted(
        p.relative_to(staging).as_posix()
        for p in staging.rglob("*")
        if p.is_file() and p.name != OWNED_FILES
    )


def _commit(staging: Path, out: Path, *, overwrite: bool) -> None:
    names = _staged_files(staging)
    new = {name: file_sha256(staging / name) or "" for name in names}
    owned = read_owned(out) if out.is_dir() else {}
    check_targets(out, [*names, OWNED_FILES], overwrite=True, owned=owned)  # folders in the way
    check_targets(out, names, overwrite=overwrite, owned=owned)
    stale = [
        name
        for name, hashes in owned.items()
        if name not in new and file_sha256(out / name) in hashes
    ]
    out.mkdir(parents=True, exist_ok=True)
    # While files move, the listing proves both generations: a run killed half-way leaves
    # nothing the next run would refuse to replace or could not prune.
    both = {name: {*owned.get(name, set()), digest} for name, digest in new.items()}
    both.update({name: owned[name] for name in stale})
    atomic_write_text(out / OWNED_FILES, owned_text(both))
    for name in names:
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / name, target)
    for name in stale:
        with contextlib.suppress(OSError):
            (out / name).unlink()
    atomic_write_text(out / OWNED_FILES, owned_text({n: [d] for n, d in new.items()}))


@contextmanager
def staged_output(out: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder; on success move its files into ``out`` (see the module
    docstring for what may be replaced and what is removed).

    ``overwrite``: replace files in ``out`` the tool cannot prove it wrote (the user's own
    ``report.md``, say) instead of stopping. A folder in the way always stops the run.
    """
    out = Path(out)
    # Stage in the nearest existing folder above --out: same file system, and nothing is
    # created under --out (or its missing parents) until every file is written.
    anchor = ensure_writable_parent(out)
    remove_leftovers(anchor, staging_folders(out.name), what="staging folder")
    try:
        staging = Path(tempfile.mkdtemp(prefix=tagged(f".{out.name}.staging-"), dir=anchor))
    except OSError as exc:  # e.g. a read-only or virtual file system (/proc) access() missed
        raise (
            storage_error(exc, anchor)
            or UserError(
                f"Cannot write to {anchor} (for --out {out}): {exc.strerror or exc}. Choose a "
                "writable folder."
            )
        ) from None
    try:
        try:
            yield staging
        except OSError as exc:
            kept = f"nothing in --out {out} was changed"
            full = storage_error(exc, f"the outputs for --out {out}", kept=kept)
            if full is None:
                raise
            raise full from None
        _commit(staging, out, overwrite=overwrite)
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
