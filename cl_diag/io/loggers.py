"""Where a training monitor's rows go: one small interface, :class:`RowLogger`, and three
adapters, CSV (the default, no extra package), TensorBoard and Weights & Biases::

    logger = TensorBoardLogger("runs/a/tensorboard")     # or CsvLogger(...), WandbLogger(...)
    mon = cl_diag.Monitor(n_ref=len(train_set), log_every=50, logger=logger)
    ...                                                   # every row flushed is logged
    logger.close()

``cl-diag train --logger`` chooses one with :func:`open_logger`. The TensorBoard and W&B
extras are imported only when an adapter of theirs is made; a missing one is a UserError
naming the ``pip install`` that fixes it (:func:`require_logger`). Every number of a row is
logged as ``prefix + key`` (``cl_diag/cross_neg_var``) against ``step``; values that are not
numbers are left to the CSV.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import io
import math
import numbers
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cl_diag.errors import UserError
from cl_diag.io.atomic import atomic_write_bytes

__all__ = [
    "EXTRAS",
    "CsvLogger",
    "RowLogger",
    "TensorBoardLogger",
    "WandbLogger",
    "csv_columns",
    "open_logger",
    "require_logger",
    "write_rows_csv",
]

#: logger -> (the module it imports, the cl-diag extra that installs it); csv needs none
EXTRAS: Mapping[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "wandb": ("wandb", "wandb"),
}

#: the prefix of every logged key (the Lightning callback's too)
PREFIX = "cl_diag/"


@runtime_checkable
class RowLogger(Protocol):
    """What takes a monitor's rows: ``log(row, step)`` for each row as it is closed, ``close()``
    once at the end (files flushed, a W&B run finished)."""

    def log(self, row: Mapping[str, Any], step: int) -> None: ...

    def close(self) -> None: ...


def _scalars(row: Mapping[str, Any], prefix: str) -> dict[str, float]:
    """The row's numbers as floats under ``prefix + key``, without ``step`` (the x axis)."""
    return {
        f"{prefix}{key}": float(value)
        for key, value in row.items()
        if key != "step" and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }


# --------------------------------------------------------------------------- CSV


def csv_columns(rows: Iterable[Mapping[str, Any]], leading: Sequence[str] = ()) -> list[str]:
    """The columns of a rows file: the ``leading`` ones that some row has, in their order, then
    every other key as first seen. A column no row has a value for is left out, so no column
    is empty (a value that is None counts as none)."""
    seen: dict[str, None] = {}
    for row in rows:
        for key, value in row.items():
            if value is not None and not (isinstance(value, str) and value == ""):
                seen.setdefault(key)
    first = [key for key in leading if key in seen]
    return first + [key for key in seen if key not in first]


def write_rows_csv(
    path: str | Path, rows: Sequence[Mapping[str, Any]], leading: Sequence[str] = ()
) -> Path:
    """Write ``rows`` as CSV atomically (the whole file or, on a failure, the old one): the
    columns of :func:`csv_columns`, one line a row, an empty cell only where one row lacks a
    value that others have."""
    buf = io.StringIO()
    columns = csv_columns(rows, leading)
    writer = csv.DictWriter(
        buf, fieldnames=columns, lineterminator="\n", restval="", extrasaction="ignore"
    )
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    path = Path(path)
    atomic_write_bytes(path, buf.getvalue().encode())
    return path


class CsvLogger:
    """Rows to a CSV file, rewritten whole (atomically) at each row, so the file is always
    complete. ``leading``: the columns to put first when rows have them (a monitor's
    :data:`~cl_diag.measurement.monitor.METRIC_COLUMNS`); ``rows``: rows already logged (a
    resumed run's). Writing the whole file costs time in proportion to the rows so far, at
    each row: meant for a row every few dozen steps, as a monitor makes them."""

    def __init__(
        self,
        path: str | Path,
        *,
        leading: Sequence[str] = (),
        rows: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        self.path = Path(path)
        self.leading = tuple(leading)
        self.rows: list[dict[str, Any]] = [dict(row) for row in rows]

    def log(self, row: Mapping[str, Any], step: int) -> None:
        self.rows.append({**row, "step": step})
        write_rows_csv(self.path, self.rows, self.leading)

    def close(self) -> None:
        if self.rows:
            write_rows_csv(self.path, self.rows, self.leading)


# --------------------------------------------------------------------------- the extras


def require_logger(kind: str) -> None:
    """UserError when the package ``--logger kind`` needs is not installed (found without
    importing it, so the command line can say so before anything loads)."""
    if kind not in EXTRAS:
        return
    module, extra = EXTRAS[kind]
    if not _installed(module):
        raise UserError(
            f"--logger {kind} needs the {module} package, which is not installed: "
            f"pip install 'cl-diag[{extra}]' (or use --logger csv)."
        )


def _installed(module: str) -> bool:
    if sys.modules.get(module) is not None:  # imported already (or put there by a test)
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module without a spec
        return False


def _import_extra(kind: str, module: str) -> Any:
    require_logger(kind)
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # installed but broken (a missing dependency of its own)
        extra = EXTRAS[kind][1]
        raise UserError(
            f"--logger {kind}: importing {module} failed ({exc}); reinstall it with "
            f"pip install --force-reinstall 'cl-diag[{extra}]'."
        ) from None


class TensorBoardLogger:
    """Rows to TensorBoard event files in ``log_dir`` (``torch.utils.tensorboard``'s
    ``SummaryWriter``; needs ``cl-diag[tensorboard]``): one scalar a number, at the row's step.

    ``purge_step``: a run that continues from a checkpoint at step S passes S + 1, and
    TensorBoard then hides what an earlier, killed attempt logged from step S + 1 on (those
    steps are trained again); a run that replaces another in the same folder passes 1."""

    def __init__(
        self, log_dir: str | Path, *, prefix: str = PREFIX, purge_step: int | None = None
    ) -> None:
        _import_extra("tensorboard", "tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self.prefix = prefix
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge_step)

    def log(self, row: Mapping[str, Any], step: int) -> None:
        for tag, value in _scalars(row, self.prefix).items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()  # a row every few dozen steps: visible in TensorBoard at once

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """Rows to a Weights & Biases run (``cl-diag[wandb]``): ``run.log(numbers, step=step)``.
    Without ``run`` one is started with ``wandb.init(project, name, dir, config)`` in W&B's own
    mode (``WANDB_MODE=offline`` logs to ``dir`` without a network) and finished by
    :meth:`close`; a ``run`` of your own is left open."""

    def __init__(
        self,
        *,
        project: str = "cl-diag",
        name: str | None = None,
        dir: str | Path | None = None,
        config: Mapping[str, Any] | None = None,
        run: Any = None,
        prefix: str = PREFIX,
    ) -> None:
        self.prefix = prefix
        self._owns_run = run is None
        if run is None:
            wandb = _import_extra("wandb", "wandb")
            if dir is not None:
                Path(dir).mkdir(parents=True, exist_ok=True)
            try:
                run = wandb.init(
                    project=project,
                    name=name,
                    dir=None if dir is None else str(dir),
                    config=dict(config) if config is not None else None,
                )
            except Exception as exc:  # wandb's own errors: no login, no network, a bad setting
                raise UserError(
                    f"--logger wandb could not start a W&B run: {exc}. Log in with wandb login, "
                    "or set WANDB_MODE=offline to log without a network (wandb sync uploads "
                    "it later)."
                ) from None
        self.run = run

    def log(self, row: Mapping[str, Any], step: int) -> None:
        # W&B shows NaN as missing: a row whose clock read 0 s has no images_per_s
        self.run.log(
            {k: v for k, v in _scalars(row, self.prefix).items() if not math.isnan(v)}, step=step
        )

    def close(self) -> None:
        if self._owns_run:
            self.run.finish()


# --------------------------------------------------------------------------- cl-diag train


def open_logger(
    kind: str,
    out_dir: Path,
    *,
    start_step: int = 0,
    name: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> RowLogger | None:
    """The logger ``cl-diag train --logger kind`` also sends a run's rows to: ``csv`` none (the
    run's metrics.csv is its CSV), ``tensorboard`` event files in ``out_dir/tensorboard`` (what a
    killed attempt logged after ``start_step`` hidden), ``wandb`` a W&B run named ``name`` with
    the run's ``config``.
    """
    if kind == "csv":
        return None
    if kind == "tensorboard":
        return TensorBoardLogger(out_dir / "tensorboard", purge_step=start_step + 1)
    if kind == "wandb":
        return WandbLogger(name=name, dir=out_dir, config=config)
    raise ValueError(f"unknown logger {kind!r}")
