"""Writing a command's outputs so that a failure leaves nothing half-written.

Everything goes to a staging folder beside ``--out``; only when all files are
written are they moved into place (``os.replace`` is atomic per file on one
file system). On any exception the staging folder is removed and ``--out`` is
as it was.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cl_diag.errors import UserError


def ensure_writable_parent(out: Path) -> Path:
    """Return the existing folder that will hold ``out``, or raise UserError."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a folder. Give a folder path (it is created if missing).")
    parent = out.parent.resolve()
    while not parent.exists():
        parent = parent.parent
    for folder in (parent, out) if out.exists() else (parent,):
        if not os.access(folder, os.W_OK | os.X_OK):
            raise UserError(
                f"Cannot write to {folder} (for --out {out}): permission denied. Choose a writable folder."
            )
    return parent


@contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """Yield a temporary folder; on success move its files into ``out``."""
    out = Path(out)
    # Stage in the nearest existing folder above --out: same file system, and nothing is
    # created under --out (or its missing parents) until every file is written.
    anchor = ensure_writable_parent(out)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.staging-", dir=anchor))
    try:
        yield staging
        out.mkdir(parents=True, exist_ok=True)
        for source in sorted(staging.rglob("*")):
            target = out / source.relative_to(staging)
            if source.is_dir():
                target.mkdir(exist_ok=True)
            else:
                os.replace(source, target)
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
    Path(path).write_text(dumps_json(payload), encoding="utf-8")
