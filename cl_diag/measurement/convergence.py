"""Whether a training run reached its loss's optimum, read from the loss it recorded.

A claim about the *optimum* of a loss (the SSEM's class collapse, Eq. 10's over-separation,
the simplex ETF) can only be judged on a run that reached it: an under-trained run
contradicts any of them by being under-trained. From the metrics rows a checkpoint keeps (each
the mean loss of its steps):

* **a plateau** (any run): the loss's relative change per tenth of the training,

      change = (L_before - L_last) / |L_last| * (S / 10) / (c_last - c_before),

  L_last the step-weighted mean of the last rows covering a tenth of the S steps, L_before that
  of as many rows before them, c_* the windows' centres. Each window mean has a standard error
  from its rows' spread (mini-batch noise), ``change_se`` the change's. A run has plateaued when
  its windows resolve :data:`RESOLUTION` (``2 change_se <= 10 %``) and ``|change| <= PLATEAU +
  2 change_se`` (at most 1 % either way);
* **the gap to the optimum loss**, where a source gives it in closed form (the SSEM's batch
  loss at beta*, paper-notes 11.3; the full-batch sigmoid loss at the CCEM's x*, 11.1):
  ``L_last - L* <= GAP`` (0.01 nats).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the largest relative change of the loss per tenth of the training a plateau allows
PLATEAU = 0.01
#: the largest change per tenth of the steps that the end windows must resolve (2 se)
RESOLUTION = 0.1
#: the largest gap (in nats) between the final loss and the closed-form optimum loss
GAP = 0.01
#: the share of the steps each window covers (at least)
WINDOW = 0.1


@dataclass(frozen=True)
class LossTrend:
    """The training loss over its last two windows (see the module docstring): ``steps`` in
    all, the mean loss ``final`` over the last ``final_steps`` steps and ``before`` over the
    ``before_steps`` before them, ``change``, the relative change per tenth of the training
    (positive: still falling), and its standard error ``change_se`` (0 where a window is one
    row: no spread to read)."""

    steps: int
    final: float
    final_steps: int
    before: float
    before_steps: int
    change: float
    change_se: float

    @property
    def plateaued(self) -> bool:
        return plateaued(self.change, self.change_se)


def plateaued(change: float, change_se: float | None) -> bool:
    """Whether a loss change per tenth of the steps shows a plateau: measured to within
    ±:data:`RESOLUTION` (2 ``change_se``) and within ±(:data:`PLATEAU` + 2 ``change_se``); no
    standard error (one row a window) counts as 0."""
    noise = 2.0 * (change_se or 0.0)
    return noise <= RESOLUTION and abs(change) <= PLATEAU + noise


def _rows(history: Sequence[Mapping[str, Any]], key: str) -> list[tuple[int, int, float]]:
    """(first step, last step, mean loss) of each row with a finite ``key``, in step order."""
    out: list[tuple[int, int, float]] = []
    previous = 0
    for row in history:
        step, value = row.get("step"), row.get(key)
        if not isinstance(step, int | float) or not isinstance(value, int | float):
            continue
        step = int(step)
        if step <= previous or not math.isfinite(float(value)):
            previous = max(previous, step)
            continue
        out.append((previous + 1, step, float(value)))
        previous = step
    return out


def _window(
    rows: list[tuple[int, int, float]], least: int
) -> tuple[float, int, float, float] | None:
    """(step-weighted mean, steps, centre, standard error of the mean) of the last rows of
    ``rows`` covering at least ``least`` steps, which it removes from ``rows``; None when they
    cover fewer. The standard error treats the rows as independent draws about the window's
    level (weights w_i = steps_i / steps: sqrt(k/(k-1) sum w_i^2 (x_i - mean)^2) for k rows;
    0 for one row)."""
    taken: list[tuple[int, int, float]] = []
    while rows and sum(last - first + 1 for first, last, _ in taken) < least:
        taken.append(rows.pop())
    steps = sum(last - first + 1 for first, last, _ in taken)
    if steps < least:
        return None
    mean = sum((last - first + 1) * value for first, last, value in taken) / steps
    centre = sum((last - first + 1) * (first + last) / 2 for first, last, _ in taken) / steps
    k = len(taken)
    spread = sum(((last - first + 1) / steps) ** 2 * (v - mean) ** 2 for first, last, v in taken)
    se = math.sqrt(k / (k - 1) * spread) if k >= 2 else 0.0
    return mean, steps, centre, se


def loss_trend(history: Sequence[Mapping[str, Any]], key: str = "loss") -> LossTrend | None:
    """The :class:`LossTrend` of a run's metrics rows (dicts with ``step`` and ``key``), or
    None when they do not hold two windows of a tenth of the steps each.

    >>> rows = [{"step": s, "loss": 2.0 + 1.0 / s} for s in range(1, 101)]
    >>> trend = loss_trend(rows)
    >>> (trend.final_steps, trend.before_steps, round(trend.final, 4), trend.plateaued)
    (10, 10, 2.0105, True)
    """
    rows = _rows(history, key)
    if not rows:
        return None
    steps = rows[-1][1]
    least = max(1, math.ceil(WINDOW * steps))
    last = _window(rows, least)
    before = _window(rows, least)
    if last is None or before is None or last[0] == 0.0:
        return None
    scale = (steps / 10) / (last[2] - before[2]) / abs(last[0])
    change = (before[0] - last[0]) * scale
    change_se = math.hypot(before[3], last[3]) * scale
    return LossTrend(steps, last[0], last[1], before[0], before[1], change, change_se)


#: the metrics columns that time the run (seconds, throughput): they differ between two runs of
#: the same seed, so a record of the curves, which identical weights must give identically,
#: leaves them out
TIMING_COLUMNS = frozenset({"seconds", "images_per_s"})
#: the most rows a record of the curves keeps (evenly spaced; enough for a figure)
MAX_CURVE_ROWS = 200


def curve_columns(history: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]] | None:
    """A run's metrics rows as columns for a figure: ``step`` and every numeric column but the
    timings, one value per kept row (None where the row lacks the column: ``knn_top1`` is logged
    every N epochs). At most :data:`MAX_CURVE_ROWS` rows are kept, evenly spaced over the rows
    and always the last, plus every row that logs a column most rows lack (the online kNN);
    None without rows holding a step.

    >>> rows = [{"step": s, "loss": 1.0 / s, "seconds": 0.1} for s in range(1, 1001)]
    >>> cols = curve_columns(rows)
    >>> sorted(cols), len(cols["step"]), cols["step"][-1]
    (['loss', 'step'], 200, 1000)
    """

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    rows = [r for r in history if isinstance(r, Mapping) and number(r.get("step"))]
    if not rows:
        return None
    names = sorted({k for r in rows for k, v in r.items() if number(v)} - TIMING_COLUMNS)
    names.remove("step")
    n = len(rows)
    spaced = min(n, MAX_CURVE_ROWS)
    kept = {round(i * (n - 1) / max(spaced - 1, 1)) for i in range(spaced)}
    sparse = [k for k in names if 2 * sum(k in r for r in rows) < n]
    kept |= {i for i, r in enumerate(rows) if any(k in r for k in sparse)}
    order = sorted(kept)
    columns: dict[str, list[Any]] = {"step": [int(rows[i]["step"]) for i in order]}
    for name in names:
        values = [rows[i].get(name) for i in order]
        columns[name] = [float(v) if v is not None and number(v) else None for v in values]
    return columns
