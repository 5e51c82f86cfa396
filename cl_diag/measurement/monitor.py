"""A monitor for any training loop: in-batch pair statistics on the device, a row every few steps.

Plain PyTorch::

    mon = cl_diag.Monitor(n_ref=len(train_set), log_every=50)
    for step, (x1, x2) in enumerate(loader):
        z1, z2 = model(x1), model(x2)
        loss = my_loss(z1, z2)
        mon.update(z1, z2, loss=loss)   # no host sync; detached; AMP- and DDP-safe
        ...
        if (row := mon.flush()) is not None:
            print(row)                  # a dict of numbers every 50 steps
    mon.to_csv("metrics.csv")           # the columns of `cl-diag train`'s metrics.csv

``logger=`` (:mod:`cl_diag.io.loggers`, or anything with ``log(row, step)``) also logs each
row. ``cl-diag train`` and :mod:`cl_diag.integrations.lightning` use this same class.

A row pools the steps since the previous one. For each batch of B instances with normalised
views u_i, v_i (Lee et al., ICML 2025, Sec. 3): ``pos`` (u_i.v_i, B pairs), ``cross_neg``
(u_i.v_j, i != j, B(B-1)) and ``within_neg`` (u_i.u_j and v_i.v_j, i < j, B(B-1)), each as
``<kind>_mean`` = S1/n and ``<kind>_var`` = S2/n - mean^2 from float64 sums. With ``n_ref``
(delta = -1/(n_ref - 1), the simplex ETF's similarity, Thm 5.1):
``cross_neg_excessive_ratio`` and ``within_neg_excessive_ratio`` = #{s < delta} / n (paper
Sec. 5; near an ETF it counts float residue, which the analysis's margin count avoids), and
``vrn`` = mean (s - delta)^2 = var + (mean - delta)^2 over the cross-view negatives (Def. 5.7,
p = 2). Also ``step``, ``seconds``, ``images_per_s``, the mean of every scalar given to
:meth:`Monitor.update` and the last ``lr``. Queue negatives (``update(..., queue=(K1, K2))``)
are a second stream, :class:`QueueStats`, as the ``queue_neg_*`` columns.

It stays cheap: :meth:`Monitor.update` adds small float64 tensors on the device, and
:meth:`Monitor.flush` reads a row in one host sync. Statistics are taken from fp32 copies
with autocast and TF32 off (fp16 cannot resolve delta = -2e-5), without gradients; under DDP
the views are gathered from every rank, so every row describes the global batch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.io.loggers import RowLogger, csv_columns, write_rows_csv
from cl_diag.losses.distributed import is_distributed
from cl_diag.measurement import theory
from cl_diag.measurement.pairs import float32_at_least, full_fp32_matmul
from cl_diag.options import MONITOR, PYTHON, check_values
from cl_diag.vocabulary import NEGATIVE_TYPES, PAIR_TYPES, PairType


class MonitorError(UserError, ValueError):
    """A mistake in what a :class:`Monitor` is given (a UserError, and a ValueError as before)."""


__all__ = [
    "EXCESSIVE_COLUMNS",
    "KINDS",
    "METRIC_COLUMNS",
    "BatchPairMoments",
    "Monitor",
    "MonitorError",
    "QueueStats",
]

#: the columns of ``cl-diag train``'s metrics.csv, in order; :meth:`Monitor.to_csv` writes
#: these first, those that its rows have (a monitor given no ``loss`` writes no loss column)
METRIC_COLUMNS = (
    "epoch",
    "step",
    "loss",
    "contrastive",
    "vrn",
    "lr",
    "images_per_s",
    "seconds",
    *(f"{kind.short}_{statistic}" for kind in PAIR_TYPES for statistic in ("mean", "var")),
)
#: the in-batch pair kinds, in row order: the pair types' column prefixes (``pos``, ...)
KINDS = tuple(kind.short for kind in PAIR_TYPES)
#: the columns a monitor that counts excessive separation adds after :data:`METRIC_COLUMNS`
EXCESSIVE_COLUMNS = tuple(f"{kind.short}_excessive_ratio" for kind in NEGATIVE_TYPES)

_SUMS = 16  # the (4, 2, 2) raw moments of BatchPairMoments, flattened
_BELOW = 3  # below-delta counts of pos, cross_neg, within_neg
#: the B x B block (0: u v^T, 1: u u^T, 2: v v^T) of each view pair (0,0), (0,1), (1,0), (1,1)
_VIEW_PAIRS = [1, 0, 0, 2]
#: the row product (0: u.u, 1: u.v, 2: v.v) of each view pair (0,0), (0,1), (1,0), (1,1)
_ROW_PAIRS = [0, 1, 1, 2]
#: without counting below delta, up to this many steps of views are held and added in one go,
#: within this many bytes of the views and their computation (_held_step_bytes)
_HELD_STEPS = 16
_HELD_BYTES = 1 << 25


def _held_step_bytes(b: int, d: int) -> int:
    """What one held step costs in memory: its views (fp32, held and normalised) and its
    products, d x d grams (2 d <= 3 B) or the three B x B blocks in fp32 and float64."""
    products = 2 * d * d * 4 if 2 * d <= 3 * b else 3 * b * b * (4 + 8 + 8)
    return 2 * b * d * 4 * 2 + products


#: similarities per band of the B x B route (CPU, CUDA): 21 bytes each of buffers, so about
#: 22 MB on a CPU (one band up to B = 590) and 88 MB on a GPU (B = 1180; B = 4096: 13 bands)
_BAND_SIMILARITIES = (1 << 20, 1 << 22)


# --------------------------------------------------------------------------- the statistics


class BatchPairMoments:
    """Mean and population variance of positive, cross-view and within-view negative cosine
    similarities over all batches given to :meth:`update`; with ``excessive`` also the number of
    each below ``delta`` (the training-time stream; an analysis's statistics are
    :class:`cl_diag.result.PairStats`).

    mean = S1/n and var = S2/n - mean^2 from float64 sums (similarities lie in [-1, 1], so the
    cancellation costs at most ~1e-16 E[s^2] / var, negligible above var = 1e-12). A step adds,
    on the device, four 2 x 2 float64 matrices over the views (u, v): for each view pair the sums
    of s and s^2 over all B^2 pairs and over the B pairs i = j, from which :meth:`read` takes each
    kind. The all-pair sums need no B x B matrix when d is small: sum_ij u_i.v_j = (sum u).(sum v)
    and sum_ij (u_i.v_j)^2 = <U^T U, V^T V>_F. Without ``excessive`` up to 16 steps' views (32 MiB)
    are added in one batched computation (a small B's step is mostly kernel launches); with it, a
    step forms the three B x B products in fp32 and counts (within-view pairs from the strict
    upper triangle only) and takes the moments from them.
    """

    KINDS = KINDS

    def __init__(self, delta: float | None = None, *, excessive: bool = False) -> None:
        if excessive and delta is None:
            raise ValueError("counting excessive separation needs a threshold delta")
        self.delta = delta
        self.excessive = excessive
        # the float32 bound T with s < delta <=> s < T for float32 s (pairs.float32_at_least)
        self._t32 = float32_at_least(delta) if excessive and delta is not None else None
        self.count = {k: 0 for k in KINDS}
        # float64 (4, 2, 2): [all-pairs sum s, all-pairs sum s^2, i = j sum s, i = j sum s^2]
        self.sums: torch.Tensor | None = None
        # float64 (3,): pairs below delta of pos, cross_neg, within_neg (with ``excessive``)
        self.below: torch.Tensor | None = None
        self._upper: torch.Tensor | None = None  # strict upper triangle mask, cached per B
        # the d x d route's steps not yet added: (T, 2, B, d), the first _n_held of them
        self._held: torch.Tensor | None = None
        self._n_held = 0
        self._buffers: dict[str, torch.Tensor] = {}  # the B x B route's, reused every step

    @torch.no_grad()
    def update(self, z1: torch.Tensor, z2: torch.Tensor) -> None:
        """Add a batch of two views (B, d) each: detached, in fp32, autocast and TF32 off."""
        z1, z2 = z1.detach(), z2.detach()
        if self._holds(z1.shape) and z1.dtype == z2.dtype:
            torch.stack([z1, z2], out=self._slot(z1))  # the step's one copy
        else:
            self.add_views(torch.stack([z1, z2]))

    @torch.no_grad()
    def add_views(self, views: torch.Tensor) -> None:
        """:meth:`update` with the two views stacked, (2, B, d)."""
        views = views.detach()
        if self._holds(views.shape[1:]):
            self._slot(views[0]).copy_(views)
        else:
            with torch.autocast(views.device.type, enabled=False), full_fp32_matmul():
                p = torch.nn.functional.normalize(views.float(), dim=2)  # u, v
                per_block, below = self._blocks(p)
            # (4, 3) over (uv, uu, vv) -> (4, 2, 2) over the view pairs (k, l); the pair (1, 0)
            # has v u^T's sums, which are u v^T's
            self._accumulate(per_block[:, _VIEW_PAIRS].reshape(4, 2, 2))
            if below is not None:
                self.below = below if self.below is None else self.below + below
            self._count(views.shape[1])

    def _holds(self, shape: torch.Size) -> bool:
        """Whether a step of views (B, d) is held and added with others (no counting below
        delta, and one step's computation fits in the held budget); else it is added at once,
        on the B x B route, a band of rows at a time."""
        return self._t32 is None and _held_step_bytes(*shape) <= _HELD_BYTES

    def _slot(self, view: torch.Tensor) -> torch.Tensor:
        """The place (2, B, d) in the held steps for a step shaped like ``view`` (B, d): the
        steps held so far are added first when it differs from them, or when they are full."""
        held = self._held
        if held is None or (held.shape[2:], held.dtype, held.device) != (
            view.shape,
            view.dtype,
            view.device,
        ):
            self._add_held()
            steps = max(1, min(_HELD_STEPS, _HELD_BYTES // _held_step_bytes(*view.shape)))
            held = self._held = view.new_empty((steps, 2, *view.shape))
        elif self._n_held == len(held):
            self._add_held()
        self._n_held += 1
        self._count(view.shape[0])
        return held[self._n_held - 1]

    def _count(self, b: int) -> None:
        for k, n in zip(KINDS, (b, b * (b - 1), b * (b - 1)), strict=True):
            self.count[k] += n

    def _add_held(self) -> None:
        """The T steps held, in one batched computation: the kernels a step would launch,
        launched once for T steps (at a small B most of a step's cost is their launch).

        Per step, with p_0 = U and p_1 = V normalised, when d is small (2 d <= 3 B) the
        all-pairs sums need no B x B matrix: sum_ij p_k,i . p_l,j = (sum_i p_k,i) . (sum_j
        p_l,j) and sum_ij (p_k,i . p_l,j)^2 = <P_k^T P_k, P_l^T P_l>_F (2 B d^2 multiply-adds
        instead of 3 B^2 d), and the i = j sums come from the B row products u_i . u_i,
        u_i . v_i, v_i . v_i. Else the three B x B products u v^T, u u^T, v v^T give them."""
        if not self._n_held:
            return
        assert self._held is not None
        held, self._n_held = self._held[: self._n_held], 0
        b, d = held.shape[2:]
        with torch.autocast(held.device.type, enabled=False), full_fp32_matmul():
            p = torch.nn.functional.normalize(held.float(), dim=3)  # (T, 2, B, d)
            if 2 * d > 3 * b:
                blocks = (p[:, [0, 0, 1]] @ p[:, [1, 0, 1]].transpose(2, 3)).double()
                diagonal = blocks.diagonal(dim1=2, dim2=3)  # (T, 3, B): uv, uu, vv
                per_block = torch.stack(
                    [
                        blocks.sum((0, 2, 3)),
                        blocks.square().sum((0, 2, 3)),
                        diagonal.sum((0, 2)),
                        diagonal.square().sum((0, 2)),
                    ]
                )  # (4, 3), as the banded B x B route gives them
                self._accumulate(per_block[:, _VIEW_PAIRS].reshape(4, 2, 2))
                return
            rows = torch.stack(
                [p[:, 0].square().sum(2), (p[:, 0] * p[:, 1]).sum(2), p[:, 1].square().sum(2)]
            ).double()  # (3, T, B): the i = j similarities of the pairs uu, uv, vv
            totals = p.sum(2).double()  # (T, 2, d)
            # (T, 2, d^2): U^T U and V^T V. Their entries carry fp32 rounding already, and their
            # Frobenius products in fp32 add an error of the same order (~1e-7 of sum s^2)
            grams = (p.transpose(2, 3) @ p).flatten(2)
            every = (totals @ totals.transpose(1, 2)).sum(0)  # (2, 2)
            every_sq = (grams @ grams.transpose(1, 2)).double().sum(0)
            # (uu, uv, vv) -> the view pairs (0, 0), (0, 1), (1, 0), (1, 1)
            on_rows = torch.stack([rows.sum((1, 2)), rows.square().sum((1, 2))])[:, _ROW_PAIRS]
            self._accumulate(torch.cat([torch.stack([every, every_sq]), on_rows.view(2, 2, 2)]))

    def _accumulate(self, batch: torch.Tensor) -> None:
        self.sums = batch if self.sums is None else self.sums + batch

    def _blocks(self, p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The B x B route: the similarity blocks u v^T (its diagonal the positives), u u^T and
        v v^T in fp32, a band of rows at a time (bounded memory at any batch size), into
        buffers kept across steps (a fresh multi-MB tensor a step costs page faults on CPU).

        Returns the float64 (4, 3) moments [sum s, sum s^2, diagonal sum s, diagonal sum s^2]
        of each block, and with a threshold the (3,) counts below it of the positives, the
        cross-view negatives and the within-view negatives (strict upper triangles: a
        product that rounds asymmetrically cannot count a pair twice).
        """
        u, v = p[0], p[1]
        b, d = u.shape
        lhs = torch.stack([u, u, v], out=self._buffer("lhs", (3, b, d), p))
        rhs = torch.stack([v, u, v], out=self._buffer("rhs", (3, b, d), p)).transpose(1, 2)
        band = max(1, _BAND_SIMILARITIES[p.device.type == "cuda"] // (3 * b))
        moments, below = None, None
        for r0 in range(0, b, band):
            shape = (3, min(b, r0 + band) - r0, b)
            blocks = torch.bmm(lhs[:, r0 : r0 + band], rhs, out=self._buffer("s", shape, p))
            s64 = self._buffer("s64", shape, p, torch.float64)
            s64.copy_(blocks)
            sq = torch.mul(s64, s64, out=self._buffer("sq64", shape, p, torch.float64))
            diagonal = s64.diagonal(offset=r0, dim1=1, dim2=2)  # entries (i, r0 + i)
            part = torch.stack(
                [s64.sum((1, 2)), sq.sum((1, 2)), diagonal.sum(1), (diagonal**2).sum(1)]
            )
            moments = part if moments is None else moments + part
            if self._t32 is not None:
                lt = torch.lt(blocks, self._t32, out=self._buffer("lt", shape, p, torch.bool))
                pos = lt[0].diagonal(offset=r0).sum()
                within = (lt[1:] & self._upper_band(b, r0, shape[1], p.device)).sum()
                counts = torch.stack([pos, lt[0].sum() - pos, within]).double()
                below = counts if below is None else below + counts
        assert moments is not None
        return moments, below

    def _buffer(
        self,
        name: str,
        shape: tuple[int, ...],
        like: torch.Tensor,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        dtype = like.dtype if dtype is None else dtype
        numel = math.prod(shape)
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < numel or buf.dtype != dtype or buf.device != like.device:
            buf = self._buffers[name] = torch.empty(numel, dtype=dtype, device=like.device)
        return buf[:numel].view(shape)

    def _upper_band(self, b: int, r0: int, rows: int, device: torch.device) -> torch.Tensor:
        """Rows r0 .. r0 + rows of the strict upper triangle mask of a B x B matrix."""
        if self._upper is None or self._upper.shape[0] != b or self._upper.device != device:
            self._upper = torch.ones(b, b, dtype=torch.bool, device=device).triu(1)
        return self._upper[r0 : r0 + rows]

    def packed(self) -> torch.Tensor | None:
        """Everything added, as one flat float64 tensor on the device (None before any
        update): what :meth:`read` takes once it is on the host."""
        self._add_held()
        if self.sums is None:
            return None
        parts = [self.sums.reshape(-1)]
        if self.below is not None:
            parts.append(self.below)
        return torch.cat(parts)

    def read(self, values: list[float] | None, vrn_delta: float | None = None) -> dict[str, float]:
        """The statistics from :meth:`packed`'s values (host floats; None: nothing added).

        ``{kind}_mean`` and ``{kind}_var`` for each kind; with ``excessive``
        ``{kind}_excessive_ratio`` for the negative kinds; with ``vrn_delta`` also ``vrn``,
        the VRN term with p = 2 (Lee et al., ICML 2025, Def. 5.7) over the cross-view
        negatives seen: mean (s - delta)^2 = var + (mean - delta)^2. Statistics of a kind
        with no pairs (B = 1) are NaN.
        """
        sums = self._kind_sums(values[:_SUMS]) if values is not None else {}
        out: dict[str, float] = {}
        for k in KINDS:
            n = self.count[k]
            if not n:
                out[f"{k}_mean"] = out[f"{k}_var"] = math.nan
                continue
            s1, s2 = sums[k]
            mean = s1 / n
            out[f"{k}_mean"] = mean
            out[f"{k}_var"] = max(0.0, s2 / n - mean * mean)
        if self.excessive:
            below = values[_SUMS : _SUMS + _BELOW] if values is not None else [0.0] * _BELOW
            for k, count in zip(KINDS[1:], below[1:], strict=True):
                n = self.count[k]
                out[f"{k}_excessive_ratio"] = count / n if n else math.nan
        if vrn_delta is not None:
            cross = PairType.CROSS_VIEW_NEGATIVE.short
            n = self.count[cross]
            out["vrn"] = math.nan
            if n:
                s1, s2 = sums[cross]
                out["vrn"] = (s2 - 2 * vrn_delta * s1) / n + vrn_delta**2
        return out

    def result(self, vrn_delta: float | None = None) -> dict[str, float]:
        """:meth:`read` of what was added (one host sync)."""
        packed = self.packed()
        return self.read(None if packed is None else packed.tolist(), vrn_delta)

    @staticmethod
    def _kind_sums(values: list[float]) -> dict[str, tuple[float, float]]:
        """``{kind: (sum s, sum s^2)}`` from the flattened (4, 2, 2) raw moments."""
        # values[4 m + 2 k + l] is moment m of the view pair (k, l)
        every, every_sq, rows, rows_sq = (
            [values[4 * m + 2 * k : 4 * m + 2 * k + 2] for k in (0, 1)] for m in range(4)
        )
        return {
            PairType.POSITIVE.short: (rows[0][1], rows_sq[0][1]),
            PairType.CROSS_VIEW_NEGATIVE.short: (
                every[0][1] - rows[0][1],
                every_sq[0][1] - rows_sq[0][1],
            ),
            # pairs i < j: half of each view's off-diagonal (a symmetric matrix)
            PairType.WITHIN_VIEW_NEGATIVE.short: (
                (every[0][0] - rows[0][0] + every[1][1] - rows[1][1]) / 2,
                (every_sq[0][0] - rows_sq[0][0] + every_sq[1][1] - rows_sq[1][1]) / 2,
            ),
        }


class QueueStats:
    """The queue stream: similarities of the anchors to negatives kept in a queue (MoCo's memory
    bank, ``cl-diag train --queue K``), separate from the in-batch pairs.

    Per step, with unit anchors u_i, v_i (the batch's two views) and unit queued keys k1_k (of
    view 1) and k2_k (of view 2), K of each: the 2BK similarities u_i.k2_k and v_i.k1_k, the
    cross-view negatives the loss adds from the queue. Kind ``queue_neg``: mean and population
    variance over every step's similarities (float64 S1, S2 and the count, as
    :class:`BatchPairMoments`), with ``excessive`` also the fraction below delta. The sums come from
    d x d products, sum_ik u_i.k_k = (sum_i u_i).(sum_k k_k) and sum_ik (u_i.k_k)^2 =
    <U^T U, K^T K>_F, in float64; only the excessive count forms the B x K products (fp32).
    Keys written by an older encoder than the anchors' show up here as a distribution shifted
    from the in-batch ``cross_neg``.
    """

    KINDS = ("queue_neg",)

    def __init__(self, delta: float | None = None, *, excessive: bool = False) -> None:
        self.excessive = excessive
        self._t32 = float32_at_least(delta) if excessive and delta is not None else None
        self.count = 0
        # float64 (2,): sum s, sum s^2 (and (3,) with the below-delta count)
        self.sums: torch.Tensor | None = None

    @torch.no_grad()
    def add(self, views: torch.Tensor, k1: torch.Tensor, k2: torch.Tensor) -> None:
        """Add a step: ``views`` (2, B, d) the anchors, ``k1``, ``k2`` (K, d) the queued keys."""
        with torch.autocast(views.device.type, enabled=False), full_fp32_matmul():
            p = torch.nn.functional.normalize(views.detach().float(), dim=2)
            keys = torch.nn.functional.normalize(
                torch.stack([k2.detach(), k1.detach()]).float(), dim=2
            )  # (2, K, d): the keys each view's anchors see
            a64, k64 = p.double(), keys.double()
            total = (a64.sum(1) * k64.sum(1)).sum()
            grams_a = a64.transpose(1, 2) @ a64  # (2, d, d)
            grams_k = k64.transpose(1, 2) @ k64
            squares = (grams_a * grams_k).sum()
            parts = [total, squares]
            if self._t32 is not None:
                s = torch.bmm(p, keys.transpose(1, 2))  # (2, B, K) fp32
                parts.append(torch.count_nonzero(s < self._t32).double())
            batch = torch.stack(parts)
        self.sums = batch if self.sums is None else self.sums + batch
        self.count += 2 * views.shape[1] * k1.shape[0]

    def packed(self) -> torch.Tensor | None:
        return self.sums

    def read(self, values: list[float] | None) -> dict[str, float]:
        """``queue_neg_mean``, ``queue_neg_var`` (and ``queue_neg_excessive_ratio``) from
        :meth:`packed`'s values; empty when no step had a queue."""
        if values is None or not self.count:
            return {}
        n = self.count
        mean = values[0] / n
        out = {"queue_neg_mean": mean, "queue_neg_var": max(0.0, values[1] / n - mean * mean)}
        if self.excessive:
            out["queue_neg_excessive_ratio"] = values[2] / n
        return out


# --------------------------------------------------------------------------- the monitor


def _gather_views(views: torch.Tensor) -> torch.Tensor:
    """(2, B, d) of this rank -> (2, W B, d), the ranks' rows in rank order, without gradients
    (one all_gather; every rank must pass the same B, as DistributedSampler gives)."""
    import torch.distributed as dist

    parts = [torch.empty_like(views) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, views.contiguous())
    return torch.cat(parts, dim=1)


class Monitor:
    """In-batch pair statistics of a training run, a row every ``log_every`` steps (the module
    docstring says what a row holds).

    ``n_ref`` (the training instances) sets delta = -1/(n_ref - 1), the threshold of the excessive
    ratios and the target of ``vrn`` (or give ``delta`` itself); without either, rows hold means
    and variances only. ``log_every``: :meth:`flush` returns a row when the step count is a
    multiple of it (0: only when forced). ``excessive``: count negatives below delta (default:
    when delta is known; three B x B products a step). ``gather``: gather the views of all ranks
    (default: under DDP with more than one rank). ``step``, ``history``: where a resumed run
    starts. ``logger``: where each row is also logged (closing it is the caller's).
    """

    def __init__(
        self,
        n_ref: int | None = None,
        log_every: int = 50,
        *,
        delta: float | None = None,
        excessive: bool | None = None,
        gather: bool | None = None,
        step: int = 0,
        history: Iterable[Mapping[str, Any]] = (),
        logger: RowLogger | None = None,
    ) -> None:
        if n_ref is not None and delta is not None:
            raise MonitorError("give n_ref or delta, not both (delta = -1/(n_ref - 1))")
        # each checked against its declaration (cl_diag.options.MONITOR): an OptionError is a
        # UserError and a ValueError
        given = dict(n_ref=n_ref, log_every=log_every, delta=delta, step=step)
        values = check_values(given, MONITOR, spelling=PYTHON)
        n_ref, log_every, delta, step = (values[k] for k in ("n_ref", "log_every", "delta", "step"))
        if n_ref is not None:
            delta = theory.delta(n_ref)
        if excessive and delta is None:
            raise MonitorError("excessive=True needs n_ref (or delta): the ratio counts s < delta")
        self.n_ref = n_ref
        self.delta = None if delta is None else float(delta)
        self.log_every = log_every
        self.excessive = self.delta is not None if excessive is None else bool(excessive)
        self.gather = gather
        self.step = int(step)
        #: every row flushed so far (and those of a resumed run), oldest first
        self.history: list[dict[str, Any]] = [dict(row) for row in history]
        self.logger = logger
        #: the row just flushed, step by step: ``(step, {name: value})`` of the scalars given
        #: to :meth:`update` (e.g. to find the step where a loss stopped being finite)
        self.row_steps: list[tuple[int, dict[str, float]]] = []
        self._open_row()

    def _open_row(self) -> None:
        self._stats = BatchPairMoments(self.delta, excessive=self.excessive)
        self._queue = QueueStats(self.delta, excessive=self.excessive)
        # per step: (step, names of its tensor scalars, those tensors (detached), host scalars)
        self._steps: list[tuple[int, tuple[str, ...], list[torch.Tensor], dict[str, float]]] = []
        self._images = 0
        self._lr: float | None = None
        self._t0 = time.perf_counter()

    def restart_clock(self) -> None:
        """Start the open row's clock now: time spent before (e.g. writing a checkpoint
        between epochs) is not counted in its ``seconds`` and ``images_per_s``."""
        self._t0 = time.perf_counter()

    @property
    def pending(self) -> int:
        """Steps added since the last row."""
        return len(self._steps)

    @torch.no_grad()
    def update(
        self,
        z1: torch.Tensor,
        z2: torch.Tensor,
        *,
        lr: float | None = None,
        queue: tuple[torch.Tensor, torch.Tensor] | None = None,
        **scalars: torch.Tensor | float,
    ) -> None:
        """Add one step: the two views' embeddings (B, d) each, row i of both instance i.

        ``queue`` = (K1, K2), (K, d) each: the keys of view 1 and of view 2 a queue held at this
        step (the negatives the loss added); the row then also holds the queue stream's
        ``queue_neg_mean`` and ``queue_neg_var`` (:class:`QueueStats`). Under DDP the queue
        is the same on every rank (filled with the global batch) and is not gathered.

        Never waits for the device. ``scalars`` (``loss=loss``, any name) are logged as
        their mean over the row's steps: pass tensors as they are (calling ``.item()``
        would wait for the device). Under DDP a scalar is this rank's value. ``lr`` (a
        number) is logged as the last value given.
        """
        _check_views(z1, z2)
        if queue is not None:
            _check_queue(queue, z1)
        gather = is_distributed() if self.gather is None else self.gather
        gather = gather and is_distributed()
        batch = z1.shape[0]
        if gather or queue is not None:
            views = torch.stack([z1.detach(), z2.detach()])
            if gather:
                views = _gather_views(views)
            self._stats.add_views(views)
            if queue is not None:
                self._queue.add(views, queue[0], queue[1])
            batch = views.shape[1]
        else:
            self._stats.update(z1, z2)  # one copy of the views a step, no more

        names, values, host = [], [], {}
        for name, value in scalars.items():
            if isinstance(value, torch.Tensor):
                if value.numel() != 1:
                    raise MonitorError(f"{name} must be a single number, got shape {_shape(value)}")
                names.append(name)
                values.append(value.detach())  # as it is: stacked and converted at the row
            else:
                host[name] = float(value)
        self.step += 1
        self._steps.append((self.step, tuple(names), values, host))
        self._images += int(batch)
        if lr is not None:
            self._lr = float(lr)

    def flush(
        self,
        force: bool = False,
        *,
        epoch: int | None = None,
        extra: Callable[[], Mapping[str, float]] | None = None,
    ) -> dict[str, Any] | None:
        """The row of the steps since the last one, when the step count is a multiple of
        ``log_every`` (or ``force``, with at least one step since the last row); else None.
        The one host sync of the monitor. ``epoch`` is written into the row when given;
        ``extra()`` (an evaluation at this step) adds its values after the row's clock stopped.
        With no step since the last row, ``extra`` goes to that row (:meth:`annotate`)."""
        if not self._steps:
            if extra is not None and self.history:
                self.annotate(extra())
            return None
        if not force and not (self.log_every and self.step % self.log_every == 0):
            return None
        row = self._close(epoch)
        if extra is not None:
            row.update(extra())
        self.history.append(row)
        if self.logger is not None:
            self.logger.log(row, row["step"])
        return row

    def annotate(self, values: Mapping[str, float]) -> None:
        """Add ``values`` to the last row (it was logged already: the logger gets them alone)."""
        last = self.history[-1]
        last.update(values)
        if self.logger is not None:
            self.logger.log(dict(values), last["step"])

    def _close(self, epoch: int | None) -> dict[str, Any]:
        packed = self._stats.packed()
        assert packed is not None
        queued = self._queue.packed()
        if queued is not None:  # the queue stream, read in the same host sync
            packed = torch.cat([packed, queued])
        flat = packed
        scalars = [t.reshape(()) for _, _, values, _ in self._steps for t in values]
        if scalars:  # the steps' scalars, in float64 beside the moments
            if all(t.device == packed.device for t in scalars):
                stacked = torch.stack(scalars).to(torch.float64)  # one kernel for the row
            else:
                stacked = torch.stack([t.to(packed.device, torch.float64) for t in scalars])
            flat = torch.cat([stacked, packed])
        values = flat.tolist()  # the host sync
        seconds = time.perf_counter() - self._t0

        offset = 0
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        steps: list[tuple[int, dict[str, float]]] = []
        for step, names, _, host in self._steps:
            mine = dict(zip(names, values[offset : offset + len(names)], strict=True))
            offset += len(names)
            mine.update(host)
            steps.append((step, mine))
            for name, value in mine.items():  # float64, in step order
                sums[name] = sums.get(name, 0.0) + value
                counts[name] = counts.get(name, 0) + 1

        row: dict[str, Any] = {}
        if epoch is not None:
            row["epoch"] = epoch
        row["step"] = self.step
        if self._lr is not None:
            row["lr"] = self._lr
        row["images_per_s"] = self._images / seconds if seconds > 0 else math.nan
        row["seconds"] = seconds
        row.update({name: sums[name] / counts[name] for name in sums})
        # a "vrn" scalar (a VRN loss term the caller computed) wins over the statistic
        vrn_delta = None if "vrn" in row else self.delta
        stats = values[offset:]
        if queued is not None:
            queue_values, stats = stats[len(stats) - queued.numel() :], stats[: -queued.numel()]
            row.update(self._stats.read(stats, vrn_delta))
            row.update(self._queue.read(queue_values))
        else:
            row.update(self._stats.read(stats, vrn_delta))
        self.row_steps = steps
        self._open_row()
        return row

    @property
    def columns(self) -> list[str]:
        """The CSV columns: those of :data:`METRIC_COLUMNS` and then :data:`EXCESSIVE_COLUMNS`
        that the rows have, then any other key of the rows (scalars of other names) as first
        seen. A column no row has a value for is left out: no column is empty."""
        return csv_columns(self.history, METRIC_COLUMNS + EXCESSIVE_COLUMNS)

    def to_csv(self, path: str | Path) -> Path:
        """Write :attr:`history` as CSV (atomically): one line per row, the columns of
        :attr:`columns`; a cell is empty only where a row lacks a value that others have."""
        return write_rows_csv(path, self.history, METRIC_COLUMNS + EXCESSIVE_COLUMNS)


def _check_views(z1: Any, z2: Any) -> None:
    for name, z in (("z1", z1), ("z2", z2)):
        if not isinstance(z, torch.Tensor) or z.dim() != 2:
            raise MonitorError(f"{name} must be a 2-D tensor (B, d), got {_shape(z)}")
        if z.is_meta:
            raise MonitorError(f"{name} is a meta tensor: it has a shape but no values")
        if not z.is_floating_point():
            raise MonitorError(f"{name} must hold floating-point embeddings, got {z.dtype}")
    if z1.shape != z2.shape:
        raise MonitorError(
            f"z1 and z2 must have the same shape (row i of each is instance i), "
            f"got {tuple(z1.shape)} and {tuple(z2.shape)}"
        )
    if z1.shape[0] == 0 or z1.shape[1] == 0:
        raise MonitorError(
            f"z1 and z2 have shape {tuple(z1.shape)}: a step needs at least one instance of at "
            "least one dimension (skip the update of an empty batch)"
        )
    if z1.device != z2.device:
        raise MonitorError(
            f"z1 is on {z1.device} and z2 on {z2.device}; give both views on one device"
        )


def _check_queue(queue: Any, z1: torch.Tensor) -> None:
    if not isinstance(queue, (tuple, list)) or len(queue) != 2:
        raise MonitorError(f"queue must be a pair (K1, K2) of (K, d) tensors, got {_shape(queue)}")
    for name, keys in zip(("K1", "K2"), queue, strict=True):
        if not isinstance(keys, torch.Tensor) or keys.dim() != 2:
            raise MonitorError(f"queue {name} must be a 2-D tensor (K, d), got {_shape(keys)}")
        if keys.is_meta or not keys.is_floating_point():
            raise MonitorError(f"queue {name} must hold floating-point keys with values")
        if keys.shape[1] != z1.shape[1] or keys.shape[0] == 0:
            raise MonitorError(
                f"queue {name} has shape {tuple(keys.shape)}; it must be (K, {z1.shape[1]}) "
                "with K >= 1: keys of the embeddings' dimension"
            )
        if keys.device != z1.device:
            raise MonitorError(f"queue {name} is on {keys.device}, the views on {z1.device}")
    if queue[0].shape != queue[1].shape:
        raise MonitorError(
            f"queue K1 and K2 must have the same shape, got {tuple(queue[0].shape)} and "
            f"{tuple(queue[1].shape)}"
        )


def _shape(value: object) -> str:
    shape = getattr(value, "shape", None)
    return str(tuple(shape)) if shape is not None else type(value).__name__
