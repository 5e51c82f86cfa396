"""Exact mean and variance of every pair type from O(n d^2) float64 sums, never a pair visited.

For views z^1..z^V of n instances (unit float32 rows z^i_a, row a = instance a), with
a_i = sum_a z^i_a (d-vector), G_i = sum_a z^i_a z^i_a^T (d x d), p^ij_a = z^i_a . z^j_a and
q^i_a = |z^i_a|^2, every sum over pairs is a sum over *all* index pairs minus the diagonal:

* cross-view negatives (z^i_a, z^j_b), a != b, each view pair i < j:
      sum s   = a_i . a_j - sum_a p^ij_a
      sum s^2 = <G_i, G_j>_F - sum_a (p^ij_a)^2         (<G_i, G_j>_F = sum_{a,b} (z^i_a . z^j_b)^2)
* within-view negatives (z^i_a, z^i_b), a < b, each view i:
      sum s   = (|a_i|^2 - sum_a q^i_a) / 2
      sum s^2 = (||G_i||_F^2 - sum_a (q^i_a)^2) / 2

over n(n-1) V(V-1)/2 and n(n-1) V/2 pairs, so mean = sum s / N and the population variance
var = (sum s^2 - (sum s)^2 / N) / N. With class labels the same sums over the rows of one class
give the same-class pairs; the different-class values are the whole minus the same-class.
Everything runs in float64 on chunks of rows (O(d^2) memory besides the views), in a fixed
order whatever the number of workers (each chunk's sums single-threaded, chunks reduced in
row order, the per-class terms with math.fsum), so the bits do not depend on the machine's
cores, and every rank of a torchrun job computes the same bits.

These are the moments of the *exact* similarities of the float32 rows (the products of two
float32 numbers are exact in float64), up to float64 rounding. With u = 2^-53, rows of norm
<= rho = 1 + 2^-22 and any summation order (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., Sec. 3.1: |fl(sum x) - sum x| <= gamma_{m-1} sum |x|, gamma_m = m u /
(1 - m u)), first order in u and for a split of n_s rows (the class size for same-class
values, n otherwise) over N_s pairs:

    |mean - mean_exact|  <= E1 = (2 n_s + d + 4) u rho^2 n_s^2 / N_s
    |E[s^2] - exact|     <= E2 = (2 n_s + d^2 + 2 d + 4) u rho^4 n_s^2 / N_s
    |var - var_exact|    <= E2 + 2 |mean| E1 + E1^2 + 2 u E[s^2]

(each Gram entry sums n_s products: gamma_{n_s} sum |z_k z_l|; their Frobenius product sums
d^2 terms; sum_{k,l} |G_i|_kl |G_j|_kl = sum_{a,b} (sum_k |z^i_ak z^j_bk|)^2 <= n_s^2 rho^4).
A different-class value is the whole minus the same-class one: its error is at most the sum of
both errors scaled by N / N_diff. :func:`error_bounds` evaluates these. They are far below the
float32 rounding of the similarities themselves (|fl32(s) - s| <= eps = gamma^{(32)}_d rho^2 with
the float32 unit 2^-24, Higham Thm 3.5): the moments of the float32 similarities that a tile pass
sees differ from these by at most eps (mean) and 2 eps std + eps^2 (variance), plus the bounds
above.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

from cl_diag.vocabulary import PairType

__all__ = ["Moments", "error_bounds", "pair_moments", "view_sums"]

#: float64 unit round-off
UNIT = 2.0**-53
#: a bound on the norm of a unit row rounded to float32 (each entry within 2^-24 relative)
RHO = 1.0 + 2.0**-22
#: bytes of one chunk of rows in float64 (all views): the working memory besides the Grams;
#: 2 MiB (1,024 rows of two 128-wide views) keeps a chunk and its product in the L2 cache
#: (8 MiB chunks made the pass twice as slow)
_CHUNK_BYTES = 2 << 20
#: fewest rows of a chunk (wide rows: each Gram update stays a real matrix product)
_MIN_CHUNK_ROWS = 256


@dataclass(frozen=True)
class Moments:
    """Sum and sum of squares of ``count`` similarities (float64), and the moments they give."""

    count: int
    total: float
    squares: float
    #: rows the sums ran over (n for the whole, the class size summed over classes otherwise)
    rows: int = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None

    @property
    def var(self) -> float | None:
        """Population variance (ddof 0), clamped at 0 against round-off."""
        if not self.count:
            return None
        return max((self.squares - self.total * self.total / self.count) / self.count, 0.0)

    def minus(self, other: Moments) -> Moments:
        return Moments(
            self.count - other.count,
            self.total - other.total,
            self.squares - other.squares,
            self.rows,
        )


def error_bounds(n: int, d: int, count: int, mean: float, second: float) -> tuple[float, float]:
    """(bound on |mean - exact|, bound on |var - exact|) of closed-form moments over ``count``
    pairs of ``n`` rows of dimension ``d`` with ``mean`` and ``second`` = E[s^2] (module
    docstring; first order in u, with 10 % added for the higher-order terms)."""
    if count == 0:
        return 0.0, 0.0
    scale = n * n / count
    e1 = 1.1 * (2 * n + d + 4) * UNIT * RHO**2 * scale
    e2 = 1.1 * (2 * n + d * d + 2 * d + 4) * UNIT * RHO**4 * scale
    return e1, e2 + 2 * abs(mean) * e1 + e1 * e1 + 2 * UNIT * abs(second)


@dataclass
class _Sums:
    """The float64 sums of one chunk of rows, or of a class (their sum in row order)."""

    firsts: list[torch.Tensor]  # a_i per view, (d,)
    grams: list[torch.Tensor]  # G_i per view, (d, d)
    cross: list[tuple[float, float]]  # per view pair i < j: (sum p, sum p^2)
    within: list[tuple[float, float]]  # per view: (sum q, sum q^2)
    rows: int

    def add(self, other: _Sums) -> None:
        for a, b in zip(self.firsts, other.firsts, strict=True):
            a += b
        for a, b in zip(self.grams, other.grams, strict=True):
            a += b
        self.cross = [
            (a + c, b + e) for (a, b), (c, e) in zip(self.cross, other.cross, strict=True)
        ]
        self.within = [
            (a + c, b + e) for (a, b), (c, e) in zip(self.within, other.within, strict=True)
        ]
        self.rows += other.rows


class _Buffers:
    """One thread's float64 chunk buffers, reused from chunk to chunk: a fresh multi-MB tensor
    per chunk is fresh pages from the kernel each time (page faults and zeroing cost more than
    the products computed in them)."""

    def __init__(self):
        self.tensors: dict[int, torch.Tensor] = {}

    def get(self, k: int, rows: int, d: int, device) -> torch.Tensor:
        buf = self.tensors.get(k)
        if buf is None or buf.numel() < rows * d or buf.device != device:
            buf = torch.empty(rows * d, dtype=torch.float64, device=device)
            self.tensors[k] = buf
        return buf[: rows * d].view(rows, d)


class _ThreadBuffers(threading.local):
    """:class:`_Buffers` per thread (each worker thread its own)."""

    def __init__(self):
        self.buffers = _Buffers()


def _chunk_sums(
    views: Sequence[torch.Tensor],
    r0: int,
    r1: int,
    order: torch.Tensor | None = None,
    buffers: _Buffers | None = None,
) -> _Sums:
    """Sums over rows r0..r1 of every view (rows ``order[r0:r1]`` when given), in float64
    (one thread), in ``buffers`` (a thread's own) or fresh tensors."""
    buffers = buffers or _Buffers()
    device, d = views[0].device, views[0].shape[1]
    pick = None if order is None else order[r0:r1].to(device)
    rows = []
    for k, z in enumerate(views):
        x = buffers.get(k, r1 - r0, d, device)
        x.copy_(z[r0:r1] if pick is None else z[pick])
        rows.append(x)
    product = buffers.get(len(views), r1 - r0, d, device)
    firsts = [x.sum(dim=0) for x in rows]
    grams = [_gram(x) for x in rows]
    cross = []
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            p = torch.mul(rows[i], rows[j], out=product).sum(dim=1)
            cross.append((float(p.sum()), float(p.pow(2).sum())))
    within = []
    for x in rows:
        q = torch.mul(x, x, out=product).sum(dim=1)
        within.append((float(q.sum()), float(q.pow(2).sum())))
    return _Sums(firsts, grams, cross, within, r1 - r0)


def _gram(x: torch.Tensor) -> torch.Tensor:
    """X^T X of float64 rows. On CPU through numpy, whose matmul of an array with its own
    transpose computes one triangle (BLAS syrk) and mirrors it: half the flops of torch's
    general GEMM, the largest cost of the closed form (one BLAS thread: see
    :func:`one_blas_thread`)."""
    if x.device.type != "cpu":
        return x.T @ x
    rows = x.numpy()
    return torch.from_numpy(rows.T @ rows)


@functools.cache
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's BLAS single-threaded meanwhile (the callers run one worker per core, each
    computing its chunks' Grams in one thread); the previous setting is restored. Process-wide,
    like ``torch.set_num_threads``: enter it once, from the thread that starts the workers."""
    with _blas_controller().limit(limits=1, user_api="blas"):
        yield


def _terms(sums: _Sums) -> tuple[float, float, float, float]:
    """(cross sum s, cross sum s^2, within sum s, within sum s^2) of the pairs among the rows
    whose sums these are."""
    v = len(sums.firsts)
    pairs = [(i, j) for i in range(v) for j in range(i + 1, v)]
    c1 = [
        float(sums.firsts[i] @ sums.firsts[j]) - p
        for (i, j), (p, _) in zip(pairs, sums.cross, strict=True)
    ]
    c2 = [
        float((sums.grams[i] * sums.grams[j]).sum()) - pp
        for (i, j), (_, pp) in zip(pairs, sums.cross, strict=True)
    ]
    w1 = [(float(a @ a) - q) / 2 for a, (q, _) in zip(sums.firsts, sums.within, strict=True)]
    w2 = [
        (float((g * g).sum()) - qq) / 2 for g, (_, qq) in zip(sums.grams, sums.within, strict=True)
    ]
    return math.fsum(c1), math.fsum(c2), math.fsum(w1), math.fsum(w2)


def _chunks(n: int, d: int, views: int, runs: Sequence[tuple[int, int]]):
    """(run index, r0, r1): the rows of each class run in chunks of at most ~2 MiB of float64."""
    size = max(_MIN_CHUNK_ROWS, _CHUNK_BYTES // (8 * d * views))
    return [
        (k, r0, min(r0 + size, end))
        for k, (start, end) in enumerate(runs)
        for r0 in range(start, end, size)
    ]


def class_runs(codes: torch.Tensor | None, n: int) -> list[tuple[int, int]]:
    """The (start, end) row ranges of equal codes (codes sorted ascending), or [(0, n)]."""
    if codes is None:
        return [(0, n)]
    _, counts = torch.unique_consecutive(codes.cpu(), return_counts=True)
    ends = torch.cumsum(counts, 0).tolist()
    starts = [0, *ends[:-1]]
    return list(zip(starts, ends, strict=True))


def _in_order(
    views: Sequence[torch.Tensor], chunks, workers: int, order: torch.Tensor | None = None
) -> Iterator[_Sums]:
    """Each chunk's sums, in chunk order, computed by up to ``workers`` single-threaded CPU
    threads with at most 2 ``workers`` chunks in flight (so memory stays O(workers d^2))."""

    local = _ThreadBuffers()

    def compute(task) -> _Sums:
        _, r0, r1 = task
        if views[0].device.type == "cpu":
            torch.set_num_threads(1)  # this thread's setting: each chunk's sums in one order
        return _chunk_sums(views, r0, r1, order, local.buffers)

    if views[0].device.type != "cpu" or workers <= 1 or len(chunks) <= 1:
        threads = torch.get_num_threads()
        try:
            yield from map(compute, chunks)
        finally:
            torch.set_num_threads(threads)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending: deque = deque()
        for task in chunks:
            pending.append(pool.submit(compute, task))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def view_sums(views: Sequence[torch.Tensor], *, workers: int = 1) -> _Sums:
    """The float64 sums of all rows (a_i, G_i, sum p, sum p^2, sum q, sum q^2; see the module
    docstring), chunk by chunk in row order: O(n d^2) time, O(d^2) memory."""
    n, d = views[0].shape
    chunks = _chunks(n, d, len(views), [(0, n)])
    total: _Sums | None = None
    with one_blas_thread():
        for sums in _in_order(views, chunks, workers):
            if total is None:
                total = sums
            else:
                total.add(sums)
    assert total is not None
    return total


class MomentPass:
    """:func:`pair_moments` as jobs another worker pool can run (exact pair statistics runs
    them in its tile workers, so the O(n d^2) pass shares the cores with the tiles instead of
    running after them): :meth:`jobs` computes each chunk's sums in the calling thread (run
    them in any threads, in any order, each thread single-threaded), folded in chunk order as
    they arrive, so the bits are :func:`pair_moments`'; :meth:`result` once all have run."""

    def __init__(
        self,
        views: Sequence[torch.Tensor],
        codes: torch.Tensor | None = None,
        order: torch.Tensor | None = None,
    ):
        self.views, self.codes, self.order = views, codes, order
        n, d = views[0].shape
        self.runs = class_runs(codes, n)
        self.chunks = _chunks(n, d, len(views), self.runs)
        self._local = _ThreadBuffers()
        self._lock = threading.Lock()
        self._arrived: dict[int, _Sums] = {}  # chunks done before an earlier one
        self._next = 0
        self._same_terms: list[list[float]] = [[], [], [], []]
        self._whole: _Sums | None = None
        self._current: _Sums | None = None
        self._current_run = -1

    def jobs(self) -> list[Callable[[], None]]:
        return [functools.partial(self._job, k) for k in range(len(self.chunks))]

    def _job(self, k: int) -> None:
        _, r0, r1 = self.chunks[k]
        self.add(k, _chunk_sums(self.views, r0, r1, self.order, self._local.buffers))

    def add(self, k: int, sums: _Sums) -> None:
        """Chunk ``k``'s sums (from any thread); folded once chunks 0..k-1 are."""
        with self._lock:
            self._arrived[k] = sums
            while self._next in self._arrived:
                self._fold(self._next, self._arrived.pop(self._next))
                self._next += 1

    def _fold(self, k: int, sums: _Sums) -> None:
        run = self.chunks[k][0]
        if run != self._current_run:
            if self._current is not None:
                self._finish(self._current)
            self._current, self._current_run = sums, run
        else:
            assert self._current is not None
            self._current.add(sums)

    def _finish(self, sums: _Sums) -> None:
        """The sums of one class run (all rows without codes)."""
        for k, term in enumerate(_terms(sums)):
            self._same_terms[k].append(term)
        if self._whole is None:
            self._whole = sums
        else:
            self._whole.add(sums)

    def result(self) -> dict[str, list[Moments]]:
        if self._next != len(self.chunks):
            raise RuntimeError(f"{self._next} of {len(self.chunks)} chunks of the sums were run")
        assert self._current is not None
        self._finish(self._current)
        self._current = None
        whole, runs, codes = self._whole, self.runs, self.codes
        assert whole is not None
        v = len(self.views)
        n = self.views[0].shape[0]
        same_terms = self._same_terms
        pairs_per = v * (v - 1) // 2
        c1, c2, w1, w2 = _terms(whole)
        out: dict[str, list[Moments]] = {
            PairType.CROSS_VIEW_NEGATIVE: [Moments(pairs_per * n * (n - 1), c1, c2, n)],
            PairType.WITHIN_VIEW_NEGATIVE: [Moments(v * n * (n - 1) // 2, w1, w2, n)],
        }
        if codes is not None:
            sizes = [end - start for start, end in runs]
            pairs_same = sum(s * (s - 1) for s in sizes)
            rows_same = max(sizes)
            sc1, sc2, sw1, sw2 = (math.fsum(t) for t in same_terms)
            for kind, (t1, t2), count in (
                (PairType.CROSS_VIEW_NEGATIVE, (sc1, sc2), pairs_per * pairs_same),
                (PairType.WITHIN_VIEW_NEGATIVE, (sw1, sw2), v * pairs_same // 2),
            ):
                same_class = Moments(count, t1, t2, rows_same)
                out[kind] += [same_class, out[kind][0].minus(same_class)]
        return out


def pair_moments(
    views: Sequence[torch.Tensor],
    codes: torch.Tensor | None = None,
    *,
    workers: int = 1,
    order: torch.Tensor | None = None,
) -> dict[str, list[Moments]]:
    """Closed-form sums of the negative pair types of views ``views`` (unit float32 rows, same
    shape and device), by class when ``codes`` (sorted ascending) are given. ``order``: the
    rows in class order (``codes`` are then those of ``order``'s rows), read a chunk at a
    time instead of sorted copies of the views.

    Returns ``{PairType.CROSS_VIEW_NEGATIVE: [...], PairType.WITHIN_VIEW_NEGATIVE: [...]}``,
    each ``[whole]`` or, with codes, ``[whole, same_class, different_class]`` (see the module
    docstring).
    ``workers``: CPU threads for the chunks (the result does not depend on it)."""
    moments = MomentPass(views, codes, order)
    with one_blas_thread():
        for k, sums in enumerate(_in_order(views, moments.chunks, workers, order)):
            moments.add(k, sums)
    return moments.result()
