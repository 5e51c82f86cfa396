"""Writing a command's outputs so that a failure leaves nothing half-written and nothing
of the user's is lost (docs/reliability.md tells the whole protocol).

**Staging.** Everything goes to a staging folder on the destination's own file system
(inside ``--out``, or the nearest existing folder above it) and is moved into place with
``os.replace`` only once all is written: atomic per file, never across file systems. On any
exception the staging folder is removed and ``--out`` is as it was. A leftover staging folder
(``.cl-diag-staging-<pid>-<random>``) is removed later only when it holds
:data:`STAGING_MARKER` or is empty (:mod:`cl_diag.io.leftovers`).

**Ownership is proven, never trusted.** :data:`OWNED_FILES` names the kind of output a folder
holds and a *seal* of each file cl-diag wrote there (:func:`seal`: SHA-256 of
``cl-diag-owned/2``, NUL, the name, NUL, the bytes; not what ``sha256sum`` prints). Seals are
no secret, so a file is cl-diag's only when its seal is listed *and* it carries cl-diag's mark
(:func:`carries_mark`, :data:`_MARKS`): a listing planted with the real seal of a user's
``notes.md`` removes nothing. A later run refuses another kind of output's folder (unless
``overwrite``); replaces a file only if it is proven (a regular file reached through no link,
marked, sealed) or with ``overwrite``; refuses, whatever ``overwrite`` says, a target that is a
folder, behind a link or on another file system, all checked before the first move; and
removes only proven files of the previous run with a suffix cl-diag writes
(:data:`REMOVABLE_SUFFIXES`). The mark is a constant, not a random token, so that outputs stay
the same bytes for the same inputs; a token would prove nothing more. During the moves the
listing holds the seals of both old and new files, so a run killed half-way leaves every file
still proven.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write_text, storage_error
from cl_diag.io.leftovers import log, remove_leftovers, tagged, temp_files
from cl_diag.io.paths import why_missing

__all__ = [
    "KINDS",
    "OWNED_FILES",
    "REMOVABLE_SUFFIXES",
    "STAGING_MARKER",
    "STAGING_MARKER_TEXT",
    "Listing",
    "carries_mark",
    "check_targets",
    "dumps_json",
    "ensure_writable_parent",
    "listing_text",
    "read_listing",
    "seal",
    "staged_output",
    "write_json",
]

#: name of the record of the files the tool wrote in an output folder, with their seals
OWNED_FILES = ".cl-diag-owned"
#: the kinds of output folder: what ``analyze``, ``compare`` and ``reproduce`` write
KINDS = ("analysis", "comparison", "reproduction")
#: suffixes of the files cl-diag writes into an output folder: no other file is ever removed
REMOVABLE_SUFFIXES = (".json", ".md", ".html", ".csv", ".svg")
#: the file in every staging folder that says cl-diag made it
STAGING_MARKER = ".cl-diag-staging"
STAGING_MARKER_TEXT = (
    "cl-diag staging folder: the next cl-diag run here removes it once its process is gone\n"
)
_STAGING_PREFIX = ".cl-diag-staging-"
_STAGING = re.compile(rf"^{re.escape(_STAGING_PREFIX)}(?:(?P<pid>\d+)-)?[a-z0-9_]{{8}}$")

_SEAL_TAG = b"cl-diag-owned/2\x00"
#: the extended attribute each file carries once cl-diag has moved it into an output folder:
#: its seal under the name it was written as. It lives with the file itself, not with its
#: bytes or its name, so a copy (``cp``), a file renamed (``mv report.md mine.md``) or a
#: user's file under a planted listing lacks it, and outputs stay the same bytes.
_XATTR = "user.cl-diag.seal"
_HEADER = (
    "# cl-diag-owned 2 {kind}: the files cl-diag wrote here, as <seal>  <name>. Do not edit.\n"
)
_HEADER_LINE = re.compile(r"^# cl-diag-owned 2 ([a-z]+): ")
#: the first line of a listing written before seals (plain SHA-256): it proves nothing
_OLD_HEADER = "# cl-diag: the files it wrote in this folder"
_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")
#: a listing longer than this is no listing cl-diag wrote
_MAX_LISTING = 16 << 20

#: cl-diag's mark, by suffix: how every file it writes into an output folder begins (the
#: renderers' fixed openings; tests/test_reliability_filesystems.py checks that every file
#: analyze, compare and reproduce write carries it). No user's file begins so unless it was
#: cl-diag's.
_DOCUMENTS = rb"cl-diag (?:analysis|comparison|reproduction)"
_MARKS = {
    ".json": re.compile(rb'\{\n  "schema": "cl-diag/(?:result|provenance|reproduction)/[0-9]+",\n'),
    ".md": re.compile(rb"# " + _DOCUMENTS + rb"\n"),
    ".html": re.compile(
        rb'<!DOCTYPE html>\n<html lang="en">\n<head>\n(?:<(?:meta|link) [^<>\n]*>\n){0,8}'
        rb"<title>" + _DOCUMENTS + rb"[:<]"
    ),
    ".svg": re.compile(
        rb"<\?xml [^\n]*\?>\n(?:[^\n]*\n){0,16}?"
        rb"    <dc:creator>\n     <cc:Agent>\n      <dc:title>cl-diag</dc:title>\n"
    ),
    ".csv": re.compile(rb"(?:label,run,layer|group,layer,n_seeds,seeds,runs),[^\n]*\n"),
}
#: how much of a file's start :func:`carries_mark` reads
_MARK_SPAN = 4096


# --------------------------------------------------------------------------- the folder


#: system folders no output of cl-diag belongs in, nor anywhere below them
_SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/proc",
    "/sbin",
    "/sys",
    "/usr",
)
#: folders that hold others' files: an output folder may lie below them, never be one of them
_SHARED_FOLDERS = ("/", "/home", "/opt", "/root", "/srv", "/tmp", "/var", "/mnt", "/media")
#: cl-diag's own source tree (the package) and, in a checkout, the checkout's folders
_PACKAGE = Path(__file__).resolve().parents[1]
_CHECKOUT = _PACKAGE.parent if (_PACKAGE.parent / "pyproject.toml").is_file() else None


def refuse_unmeant_output(out: Path) -> None:
    """UserError when ``out`` is a folder no user means to fill with cl-diag's files: the
    file-system root, a home folder itself, a shared top-level folder (/tmp, /var, ...), a
    system folder or anything below one (/etc, /usr, /proc, ...), or cl-diag's own source:
    the package, and in a checkout its root, ``tests/`` and ``docs/``."""
    if not str(out):
        raise UserError("--out is empty. Give the folder to write into, e.g. --out results/a.")
    try:
        where = Path(os.path.abspath(Path(out).expanduser()))
        resolved = where.resolve()
    except (OSError, RuntimeError):  # a symlink loop: ensure_writable_parent names it
        return
    home = Path.home().resolve() if "HOME" in os.environ else None
    why = None
    for path in {where, resolved}:
        if str(path) in _SHARED_FOLDERS or path == Path(path.anchor):
            why = "the top of a file system or a folder shared by everyone"
        elif home is not None and path == home:
            why = "your home folder itself"
        elif any(path == Path(t) or Path(t) in path.parents for t in _SYSTEM_TREES):
            why = "a system folder"
        elif path == _PACKAGE or _PACKAGE in path.parents:
            why = "cl-diag's own source code"
        elif _CHECKOUT is not None and path in (_CHECKOUT, _CHECKOUT / "tests", _CHECKOUT / "docs"):
            why = "a folder of cl-diag's checkout"
        if why is not None:
            raise UserError(
                f"--out {out} is {why}; cl-diag writes its files into a folder of their own. "
                "Give a new or cl-diag's own folder, e.g. --out results/analysis."
            )


def ensure_writable_parent(out: Path) -> Path:
    """Return the existing folder that will hold ``out``, or raise UserError (a folder no one
    means, :func:`refuse_unmeant_output`; a file in the way, a dangling link, a symlink loop,
    a name longer than the file system allows, no permission)."""
    out = Path(out)
    refuse_unmeant_output(out)
    _check_name_lengths(out)  # before any stat: a name too long fails every one of them
    if out.is_symlink() and not out.exists():
        raise UserError(
            f"--out {out} {why_missing(out)}. Make it name a folder, or choose another --out."
        )
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


def _check_name_lengths(out: Path) -> None:
    try:
        longest_name = os.pathconf(out.anchor or os.curdir, "PC_NAME_MAX")
        longest_path = os.pathconf(out.anchor or os.curdir, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows): the usual limits
        longest_name, longest_path = 255, 4096
    long = [part for part in out.parts if len(os.fsencode(part)) > longest_name]
    if long:
        raise UserError(
            f"--out has a folder name of {len(os.fsencode(long[0]))} bytes "
            f"({long[0][:40]}...); this file system allows at most {longest_name}. Choose a "
            "shorter --out."
        )
    # the outputs' own names (and a staging folder) need room below --out
    if len(os.fsencode(str(out.absolute()))) > longest_path - 256:
        raise UserError(
            f"--out is a path of {len(os.fsencode(str(out.absolute())))} bytes; this file system "
            f"allows paths of at most {longest_path}, and the files inside need room. Choose a "
            "shorter --out."
        )


# --------------------------------------------------------------------------- proof


def seal(path: Path, name: str) -> str | None:
    """The seal of the regular file ``path`` written under ``name`` (see the module docstring);
    None for anything else (a link, a folder, a FIFO, a file that cannot be read)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest = hashlib.sha256(_SEAL_TAG + name.encode("utf-8") + b"\x00")
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return digest.hexdigest()


def carries_mark(path: Path, name: str) -> bool:
    """Whether the regular file ``path`` (written under ``name``) begins with cl-diag's mark for
    its suffix (:data:`_MARKS`): what a planted listing cannot give a user's own file. A link,
    a folder, an unreadable file or a suffix cl-diag does not write carries none."""
    mark = _MARKS.get(PurePosixPath(name).suffix.lower())
    if mark is None:
        return False
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        start = b""
        while len(start) < _MARK_SPAN and (chunk := os.read(fd, _MARK_SPAN - len(start))):
            start += chunk
    except OSError:
        return False
    finally:
        os.close(fd)
    return mark.match(start) is not None


def _safe_name(name: str) -> bool:
    # a relative path inside the folder: no parent references, no absolute or odd parts
    if not name or "\\" in name or "\x00" in name:
        return False
    path = PurePosixPath(name)
    if path.is_absolute() or name == OWNED_FILES:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _walk(root: Path, name: str) -> tuple[str | None, os.stat_result | None]:
    """``(blocker, lstat)`` of ``root/name``, walked one component at a time without following
    a link: ``blocker`` is the part of ``name`` that is a link or anything but a real folder
    above the file (None when there is none); ``lstat`` is None when the file does not exist
    or a blocker hides it."""
    parts = PurePosixPath(name).parts
    here = root
    for depth, part in enumerate(parts):
        here = here / part
        try:
            info = os.lstat(here)
        except FileNotFoundError:
            return None, None
        except OSError:
            return "/".join(parts[: depth + 1]), None
        if depth == len(parts) - 1:
            return None, info
        if not stat.S_ISDIR(info.st_mode):  # a link, a file, anything but a real folder
            return "/".join(parts[: depth + 1]), None
    return None, None


def _proven(root: Path, name: str, seals: Mapping[str, set[str]]) -> bool:
    """``root/name`` is a regular file reached without a link, it carries cl-diag's mark, and
    its seal is listed."""
    blocker, info = _walk(root, name)
    if blocker is not None or info is None or not stat.S_ISREG(info.st_mode):
        return False
    listed = seals.get(name, set())
    return bool(listed) and carries_mark(root / name, name) and seal(root / name, name) in listed


@dataclass(frozen=True)
class Listing:
    """What an output folder's :data:`OWNED_FILES` says: the kind of output (None when there is
    no valid listing), the seals by name, and whether it is a listing of an older version
    (plain hashes, which prove nothing)."""

    kind: str | None = None
    seals: dict[str, set[str]] = field(default_factory=dict)
    old: bool = False


def listing_text(kind: str, seals: Mapping[str, Iterable[str]]) -> str:
    """The listing's text: the header naming ``kind``, then one ``<seal>  <name>`` line per
    seal, sorted by name then seal."""
    if kind not in KINDS:
        raise ValueError(f"an output folder is one of {KINDS}, not {kind!r}")
    lines = []
    for name in sorted(seals):
        if not _safe_name(name):
            raise ValueError(
                f"an owned file must be a relative path inside the folder, not {name!r}"
            )
        lines += [f"{digest}  {name}\n" for digest in sorted(set(seals[name]))]
    return _HEADER.format(kind=kind) + "".join(lines)


def read_listing(folder: Path) -> Listing:
    """``folder``'s listing. Anything that is not a listing this version writes (no file, a
    link, a huge file, another header, lines that do not parse) proves nothing."""
    path = Path(folder) / OWNED_FILES
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_LISTING:
            return Listing()
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return Listing()
    header = _HEADER_LINE.match(lines[0]) if lines else None
    if header is None or header.group(1) not in KINDS:
        return Listing(old=bool(lines) and lines[0].startswith(_OLD_HEADER))
    seals: dict[str, set[str]] = {}
    for line in lines[1:]:
        match = _LINE.match(line)
        if match and _safe_name(match.group(2)):
            seals.setdefault(match.group(2), set()).add(match.group(1))
    return Listing(kind=header.group(1), seals=seals)


def _tag(path: Path, digest: str) -> bool:
    """Give the file cl-diag just moved to ``path`` its :data:`_XATTR`; False where the
    platform or the file system keeps no extended attributes."""
    setxattr = getattr(os, "setxattr", None)
    if setxattr is None:
        return False
    try:
        setxattr(path, _XATTR, digest.encode("ascii"), follow_symlinks=False)
    except OSError:
        return False
    return True


def _tagged(root: Path, name: str) -> bool:
    """``root/name`` is the very file cl-diag moved there under that name: it carries
    :data:`_XATTR` with its seal (a copy, a renamed file or a user's file does not)."""
    getxattr = getattr(os, "getxattr", None)
    if getxattr is None:
        return False
    try:
        tag = getxattr(root / name, _XATTR, follow_symlinks=False).decode("ascii", "replace")
    except OSError:
        return False
    return tag == seal(root / name, name)


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def check_targets(
    out: Path,
    names: Iterable[str],
    *,
    overwrite: bool,
    kind: str | None = None,
    listing: Listing | None = None,
) -> None:
    """Raise UserError unless every file ``names`` (paths relative to ``out``) can be written
    into ``out``: no name taken by a folder or reached through a link or a file, no existing
    file the tool cannot prove it wrote, and (given ``kind``) no other kind of output in the
    folder (the last two unless ``overwrite``). Nothing is changed."""
    out = Path(out)
    if not out.is_dir():
        return
    root = out.resolve()
    listing = read_listing(root) if listing is None else listing
    if kind is not None and listing.kind not in (None, kind) and not overwrite:
        raise UserError(
            f"--out {out} holds {_article(listing.kind)} {listing.kind} written by cl-diag (its "
            f"{OWNED_FILES} says so); writing {_article(kind)} {kind} there would mix the two. "
            f"Choose another --out, or pass --overwrite to replace the {listing.kind}'s files. "
            "Nothing was written."
        )
    blocked: list[str] = []
    foreign: list[str] = []
    for name in sorted(set(names)):
        blocker, info = _walk(root, name)
        if blocker is not None:
            blocked.append(f"{out / blocker} is not a folder (cl-diag writes {out / name})")
        elif info is None:
            continue
        elif stat.S_ISDIR(info.st_mode):
            blocked.append(f"{out / name} is a folder where cl-diag writes a file")
        elif not overwrite and not _proven(root, name, listing.seals):
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
        # listed with the right seal but without cl-diag's mark: a figure of a cl-diag before
        # the mark, or the user's file under a planted listing
        unmarked = [
            name
            for name in foreign
            if seal(root / name, name) in listing.seals.get(name, set())
            and not carries_mark(root / name, name)
        ]
        old = (
            f" Its {OWNED_FILES} was written by an earlier cl-diag and proves nothing now; if "
            f"{them} are cl-diag's own, pass --overwrite once."
            if listing.old
            else (
                f" {OWNED_FILES} lists {unmarked[0]}, but the file does not carry cl-diag's "
                "mark (what every file cl-diag writes begins with), so the listing proves "
                "nothing; if it is cl-diag's own, from an earlier version, delete it or pass "
                "--overwrite once."
                if unmarked
                else ""
            )
        )
        raise UserError(
            f"--out {out} already holds {shown}, which cl-diag did not write (or which changed "
            f"since it did).{old} Pass --overwrite to replace {them}, or choose another --out. "
            "Nothing was written."
        )


# --------------------------------------------------------------------------- staging


def _is_staging(path: Path) -> bool:
    """A leftover staging folder is removed only when cl-diag's marker says it made it (or it
    is empty: nothing is lost)."""
    try:
        entries = os.listdir(path)
        if not entries:
            return True
        marker = path / STAGING_MARKER
        if not stat.S_ISREG(os.lstat(marker).st_mode):
            return False
        with open(marker, encoding="utf-8") as handle:
            return handle.read(len(STAGING_MARKER_TEXT) + 1) == STAGING_MARKER_TEXT
    except (OSError, UnicodeDecodeError):
        return False


def _staged_files(staging: Path) -> list[str]:
    return sorted(
        p.relative_to(staging).as_posix()
        for p in staging.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != OWNED_FILES
    )


def _device(path: Path) -> int | None:
    while True:
        try:
            return os.stat(path).st_dev
        except FileNotFoundError:
            if path.parent == path:
                return None
            path = path.parent
        except OSError:
            return None


#: how long a command waits for another one's move of its files into the same --out
COMMIT_WAIT = 60.0


def _checked(staging: Path, out: Path, names: list[str], *, overwrite: bool, kind: str) -> Listing:
    """The checks of a commit (nothing is changed): every target free or proven, one kind of
    output, no target on another file system. Returns the folder's listing."""
    root = out.resolve()
    listing = read_listing(root) if root.is_dir() else Listing()
    check_targets(out, [*names, OWNED_FILES], overwrite=True, listing=listing)  # in the way
    check_targets(out, names, overwrite=overwrite, kind=kind, listing=listing)
    device = _device(staging)
    elsewhere = sorted({n for n in names if _device(root / n) not in (None, device)})
    if elsewhere:
        raise UserError(
            f"Cannot write into --out {out}: {out / elsewhere[0]} lies on another file system "
            "than the folder itself (a mount point inside --out). Choose another --out. Nothing "
            "was written."
        )
    return listing


def _commit(staging: Path, out: Path, *, overwrite: bool, kind: str) -> None:
    names = _staged_files(staging)
    new = {name: seal(staging / name, name) or "" for name in names}
    _checked(staging, out, names, overwrite=overwrite, kind=kind)  # before --out is made
    created = not out.is_dir()
    out.mkdir(parents=True, exist_ok=True)
    try:
        # one move at a time per folder: two commands writing one --out (an analysis into a
        # sweep's cell, two analyses) each move a whole, proven set, the later one over the
        # earlier, whose files it checks again once the earlier has moved them
        with exclusive_folder(out, what="cl-diag command", wait=COMMIT_WAIT):
            listing = _checked(staging, out, names, overwrite=overwrite, kind=kind)
            _move(staging, out.resolve(), new, listing, kind)
    except BaseException:
        if created:  # a refused or failed command leaves no folder it made (rmdir: only empty)
            with contextlib.suppress(OSError):
                out.rmdir()
        raise


def _move(staging: Path, root: Path, new: Mapping[str, str], listing: Listing, kind: str) -> None:
    # a file of the previous run that this one does not write again is removed only when it is
    # proven and is the very file cl-diag moved there (its extended attribute): a marked copy
    # named in a planted listing proves nothing about *that* file. Where the file system keeps
    # no extended attributes the file is kept, with a note.
    earlier = [
        name
        for name in listing.seals
        if name not in new
        and name.endswith(REMOVABLE_SUFFIXES)
        and _proven(root, name, listing.seals)
    ]
    stale = [name for name in earlier if _tagged(root, name)]
    for name in sorted(set(earlier) - set(stale)):
        log.warning(
            "kept %s from an earlier run in %s: nothing shows that it is the file cl-diag "
            "wrote there (a copy, or a file system without extended attributes); delete it if "
            "you do not need it.",
            name,
            root,
        )
    # While files move, the listing proves both generations: a run killed half-way leaves
    # nothing the next run would refuse to replace or could not prune.
    both = {name: {*listing.seals.get(name, set()), digest} for name, digest in new.items()}
    both.update({name: listing.seals[name] for name in stale})
    atomic_write_text(root / OWNED_FILES, listing_text(kind, both))
    for name in new:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        _tag(staging / name, new[name])  # before the move: the file is never there untagged
        os.replace(staging / name, target)
    for name in stale:
        # still (nothing swapped a link or another file in meanwhile)
        if _proven(root, name, listing.seals) and _tagged(root, name):
            with contextlib.suppress(OSError):
                (root / name).unlink()
    atomic_write_text(root / OWNED_FILES, listing_text(kind, {n: [d] for n, d in new.items()}))


def _remove_staging_leftovers(folder: Path) -> None:
    remove_leftovers(folder, _STAGING, what="staging folder", proof=_is_staging)


@contextmanager
def staged_output(out: Path, *, kind: str, overwrite: bool = False) -> Iterator[Path]:
    """Yield an empty folder to write ``kind`` outputs into (``"analysis"``, ``"comparison"`` or
    ``"reproduction"``); on success move its files into ``out`` as the module docstring says.
    ``overwrite``: replace files the tool cannot prove it wrote, or another kind of output,
    instead of stopping; a folder in the way always stops the run.
    """
    if kind not in KINDS:
        raise ValueError(f"an output folder is one of {KINDS}, not {kind!r}")
    out = Path(out)
    anchor = ensure_writable_parent(out)
    # Stage on --out's own file system: inside it when it is a folder already (a mount point,
    # a link to another disk), else beside where it will be made. Nothing outside the staging
    # folder changes until every file is written.
    where = out.resolve() if out.is_dir() else anchor
    _remove_staging_leftovers(where)
    if out.is_dir():  # the listing's temporary file, left by a writer that was killed
        remove_leftovers(where, temp_files(re.escape(OWNED_FILES)), what="temporary file")
    try:
        holder = Path(tempfile.mkdtemp(prefix=tagged(_STAGING_PREFIX), dir=where))
    except OSError as exc:  # e.g. a read-only or virtual file system (/proc) access() missed
        raise (
            storage_error(exc, where)
            or _name_error(exc, out)
            or UserError(
                f"Cannot write to {where} (for --out {out}): {exc.strerror or exc}. Choose a "
                "writable folder."
            )
        ) from None
    try:
        try:
            (holder / STAGING_MARKER).write_text(STAGING_MARKER_TEXT, encoding="utf-8")
            staging = holder / "files"
            staging.mkdir()
            yield staging
        except OSError as exc:
            kept = f"nothing in --out {out} was changed"
            full = storage_error(exc, f"the outputs for --out {out}", kept=kept)
            if full is None:
                raise _name_error(exc, out) or exc from None
            raise full from None
        try:
            _commit(staging, out, overwrite=overwrite, kind=kind)
        except OSError as exc:
            raise _name_error(exc, out) or exc from None
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def _name_error(exc: OSError, out: Path) -> UserError | None:
    if exc.errno != errno.ENAMETOOLONG:
        return None
    return UserError(
        f"Cannot write into --out {out}: a file name or path there is too long for the file "
        "system. Choose a shorter --out. Nothing was written."
    )


# --------------------------------------------------------------------------- JSON


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


@contextmanager
def exclusive_folder(folder: Path, *, what: str, wait: float = 0.0) -> Iterator[None]:
    """Hold ``folder`` for this process alone while the block runs: an advisory lock on the
    folder itself (``flock``; no file is left behind), released when the block ends or the
    process dies. A process that asks while another holds it waits up to ``wait`` seconds,
    then gets a UserError saying so; where ``flock`` does not exist (Windows) nothing is
    locked."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on POSIX
        yield
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise UserError(
                        f"{folder} is being written by another {what} right now; wait for it "
                        "to end, or choose another --out. Nothing was written."
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(handle)
