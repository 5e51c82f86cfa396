"""Geometry of two views' embeddings: alignment, uniformity, effective rank, spectrum,
and the two trade-off quantities of Lee et al. (ICML 2025) that the report shows.

All quantities are computed on the L2-normalised float32 rows u_i, v_i that
:func:`cl_diag.measurement.inputs.normalise_views` returns (the same rows as the
pair statistics), accumulated in float64:

* ``alignment``  E_i ||u_i - v_i||^2  (Wang & Isola 2020, alpha = 2);
  for unit vectors it equals 2 - 2 E[s_pos] (paper Eq. 4).
* ``uniformity`` per view  log E_{i<j} exp(-2 ||x_i - x_j||^2)  (Wang & Isola, t = 2),
  streamed over square tiles of the Gram matrix (float32 matmul, TF32 off) and
  combined with log-sum-exp in float64; never an n x n matrix. Under ``torchrun`` the
  tiles are split over the ranks and the tiles' values gathered and combined in tile
  order, so K ranks give the same bits as one (:mod:`cl_diag.runtime`).
* ``effective_rank`` per view: RankMe (Garrido et al., ICML 2023),
  exp(-sum_k p_k log p_k) with p_k = sigma_k / ||sigma||_1 + epsilon, sigma the
  singular values of the uncentred normalised (n, d) matrix, epsilon = 1e-7.
* ``spectrum`` per view: eigenvalues of the population covariance
  (1/n) sum_i (x_i - xbar)(x_i - xbar)^T, descending, min(n, d) of them
  (squared singular values of the centred matrix over n).
* ``frontier_gap`` (paper-notes 11.2, Lemma C.6 with N = n rows):
  mean_neg - ((N - 2) mean_pos - N) / (2 (N - 1)) >= 0 for unit vectors, with
  mean_pos the mean positive and mean_neg the mean cross-view negative similarity;
  0 means the negatives are as separated as the achieved alignment allows.
* ``alignment_ceiling`` (Thm 5.2, :func:`cl_diag.measurement.theory.alignment_ceiling`):
  1 + mean_neg + 1/(n_ref - 1), an upper bound on
  the mean positive similarity of the full-batch problem of n_ref instances;
  ``below_one`` flags a ceiling below 1, i.e. negatives more separated on average
  than the simplex ETF, so perfect alignment is impossible (excessive separation).

At data-set scale (``analyze --pairs moments``) the uniformity is estimated from sampled
pairs (:func:`uniformity_estimate`) and the rest comes from the views' float64 sums and d x d
Grams (:func:`_from_grams`, O(n d^2)). Single-threaded reductions make the same views give
the same bits on any machine and over any number of ranks.

Example::

    >>> import torch
    >>> from cl_diag.measurement.geometry import geometry
    >>> g = torch.Generator().manual_seed(0)
    >>> z = torch.randn(50, 8, generator=g)
    >>> geometry(z, z, n_ref=50).alignment
    0.0
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import torch

from cl_diag.measurement.inputs import UnitViews, check_int, check_n_ref, normalise_views
from cl_diag.measurement.pairs import _cpu_workers, _LockedIter, _UpperIndex, full_fp32_matmul
from cl_diag.measurement.theory import alignment_ceiling
from cl_diag.result import (
    Ceiling,
    EffectiveRank,
    Geometry,
    Interval,
    Spectrum,
    UniformitySampling,
    ViewValues,
)
from cl_diag.runtime import SINGLE, Ranks, tensor_fingerprint

__all__ = [
    "RANKME_EPSILON",
    "covariance_spectrum",
    "effective_rank",
    "geometry",
    "geometry_of",
    "uniformity",
]

#: epsilon of RankMe (Garrido et al. 2023)
RANKME_EPSILON = 1e-7
#: default tile side of the uniformity pass (about 16 bytes per similarity in flight)
_TILE = {"cpu": 1024, "cuda": 8192}


def uniformity(
    x: torch.Tensor, *, block_size: int | None = None, ranks: Ranks | None = None
) -> float:
    """log( 2/(n(n-1)) * sum_{i<j} exp(-2 ||x_i - x_j||^2) ) of float32 rows ``x``.

    ||x_i - x_j||^2 = |x_i|^2 + |x_j|^2 - 2 x_i.x_j with the squared norms in float64
    and x_i.x_j from a float32 matmul (TF32 off). Each tile's log-sum-exp, m + log sum
    exp(e - m) with m the tile maximum, is taken in float64, and the tiles' values are
    combined by a final log-sum-exp in tile order. On CPU the tiles are shared among
    single-threaded workers, one per torch thread, so the value does not depend on the
    number of cores. ``ranks``: every rank passes the same ``x``, computes its share of the
    tiles and gets the same value (None: alone).
    """
    with _cpu_workers() as threads:
        return _uniformity(x, block_size, ranks or SINGLE, threads)


def _uniformity(x: torch.Tensor, block_size: int | None, ranks: Ranks, threads: int) -> float:
    n = x.shape[0]
    tile = min(n, block_size or _TILE["cuda" if x.device.type == "cuda" else "cpu"])
    with torch.inference_mode(), full_fp32_matmul():
        twice_sq = 2.0 * x.to(torch.float64).pow(2).sum(dim=1)
        starts = range(0, n, tile)
        tiles = [
            (r0, min(r0 + tile, n), c0, min(c0 + tile, n))
            for r0 in starts
            for c0 in starts
            if c0 >= r0
        ]
        # a tile's key is its place in the single-process order, whichever rank computes it
        mine = ranks.share([(r1 - r0) * (c1 - c0) for r0, r1, c0, c1 in tiles])
        tasks = _LockedIter((key, tiles[key]) for key in mine)
        workers = 1 if x.device.type != "cpu" else max(1, min(threads, len(mine)))
        if workers == 1:
            parts = _uniformity_worker(tasks, x, twice_sq, tile)
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [
                    pool.submit(_uniformity_worker, tasks, x, twice_sq, tile)
                    for _ in range(workers)
                ]
                parts = [part for f in futures for part in f.result()]
        # one host transfer for all tiles; then every rank's values, combined in tile order
        keys = [key for key, _ in parts]
        values = torch.stack([value for _, value in parts]).cpu().tolist() if parts else []
        own = list(zip(keys, values, strict=True))
        merged = sorted(kv for everyone in ranks.gather(own) for kv in everyone)
        total = torch.logsumexp(torch.tensor([v for _, v in merged], dtype=torch.float64), dim=0)
    return float(total) - math.log(n * (n - 1) / 2)


def _uniformity_worker(
    tasks, x: torch.Tensor, twice_sq: torch.Tensor, tile: int
) -> list[tuple[int, torch.Tensor]]:
    """(key, log-sum-exp of the tile's exponents) of the tiles pulled from ``tasks``."""
    if x.device.type == "cpu":
        torch.set_num_threads(1)  # this worker thread's own setting: each tile's sums in one order
    gram = torch.empty(tile * tile, dtype=torch.float32, device=x.device)
    expo = torch.empty(tile * tile, dtype=torch.float64, device=x.device)
    upper = _UpperIndex(x.device)
    parts = []
    with torch.inference_mode():  # grad mode is per thread; the caller set full float32 matmuls
        for key, (r0, r1, c0, c1) in tasks:
            g = gram[: (r1 - r0) * (c1 - c0)].view(r1 - r0, c1 - c0)
            torch.mm(x[r0:r1], x[c0:c1].T, out=g)
            e = expo[: g.numel()].view_as(g)
            e.copy_(g)
            # exponent -2 ||x_i - x_j||^2 = 4 x_i.x_j - 2|x_i|^2 - 2|x_j|^2 (<= 0 up to round-off)
            torch.add(-twice_sq[r0:r1, None], e, alpha=4.0, out=e)
            e.sub_(twice_sq[None, c0:c1]).clamp_(max=0.0)
            flat = e.reshape(-1)
            if c0 == r0:
                flat = flat.index_select(0, upper.get(r1 - r0))
            if flat.numel() == 0:
                continue
            top = flat.max()
            parts.append((key, top + torch.log(flat.sub_(top).exp_().sum())))
    return parts


def uniformity_estimate(
    x: torch.Tensor, pairs: int, generator: torch.Generator
) -> tuple[float, Interval]:
    """Uniformity estimated from ``pairs`` pairs i != j drawn uniformly (the ordered pairs
    i != j are uniform over the unordered ones), with its interval at
    :data:`cl_diag.measurement.pairs.CONFIDENCE`: the sample mean m of
    e = exp(-2 ||x_i - x_j||^2) (the same float64 norms and float32 dot products as
    :func:`uniformity`) has standard error sd(e) / sqrt(pairs), so log m is the estimate and
    [log(m - z se), log(m + z se)] the interval (the lower end -inf when m - z se <= 0)."""
    from cl_diag.measurement.pairs import _Z, _dots, _gather_rows

    n = x.shape[0]
    i = torch.randint(0, n, (pairs,), generator=generator)
    j = torch.randint(0, n - 1, (pairs,), generator=generator)
    j = j + (j >= i).long()
    with torch.inference_mode(), full_fp32_matmul():
        dots = _dots(x, i, x, j, _gather_rows(x.shape[1])).to(torch.float64)
        # squared norms of every row in float64, a chunk of rows at a time (O(n) memory)
        step = max(1, (8 << 20) // (8 * x.shape[1]))
        squares = torch.cat(
            [x[r : r + step].to(torch.float64).pow(2).sum(dim=1) for r in range(0, n, step)]
        )
        first, second = squares[i.to(x.device)], squares[j.to(x.device)]
        exponent = (4.0 * dots - 2.0 * first - 2.0 * second).clamp_(max=0.0)
        e = exponent.exp()
        mean = float(e.mean())
        se = float(e.std()) / math.sqrt(pairs) if pairs > 1 else math.inf
    low = mean - _Z * se
    return math.log(mean), (math.log(low) if low > 0 else -math.inf, math.log(mean + _Z * se))


def effective_rank(x: torch.Tensor, *, epsilon: float = RANKME_EPSILON) -> float:
    """RankMe: exp of the entropy of p_k = sigma_k/||sigma||_1 + epsilon, sigma the singular
    values of the (uncentred) rows ``x``."""
    return _rankme(torch.linalg.svdvals(x.to(torch.float64)), epsilon)


def _rankme(sigma: torch.Tensor, epsilon: float = RANKME_EPSILON) -> float:
    """RankMe of singular values ``sigma``."""
    p = sigma / sigma.sum() + epsilon
    return float(torch.exp(-(p * torch.log(p)).sum()))


def _from_grams(
    u,
    v,
    n_ref: int,
    cross_view_mean,
    threads: int,
    uniformity: ViewValues,
    sampling: UniformitySampling,
) -> Geometry:
    """The geometry with ``uniformity`` (estimated, as ``sampling`` says), its alignment,
    effective rank, spectrum, frontier gap and ceiling from the views' float64
    sums (:func:`cl_diag.measurement.moments.view_sums`): O(n d^2) time, O(d^2) memory, for
    n in the millions (moments mode). The singular values of X are the square roots of the
    eigenvalues of X^T X, the covariance's eigenvalues those of (X^T X - n xbar xbar^T) / n:
    the same quantities as the SVDs of :func:`effective_rank` and
    :func:`covariance_spectrum`, the smallest known only to ~1e-16 of the largest."""
    from cl_diag.measurement.moments import view_sums

    n, d = u.shape
    sums = view_sums([u, v], workers=threads)
    ((p, _),) = sums.cross
    (q_u, _), (q_v, _) = sums.within
    mean_pos = p / n
    if cross_view_mean is None:
        mean_neg = (float(sums.firsts[0] @ sums.firsts[1]) - p) / (n * (n - 1))
    else:
        mean_neg = float(cross_view_mean)
        if not math.isfinite(mean_neg):
            raise ValueError(f"cross_view_mean must be a finite number, got {cross_view_mean!r}.")
    rank, spectrum = [], []
    for first, gram in zip(sums.firsts, sums.grams, strict=True):
        eig = torch.linalg.eigvalsh(gram.cpu()).flip(0).clamp_(min=0.0)
        rank.append(_rankme(eig.sqrt()))
        cov = (gram.cpu() - torch.outer(first.cpu(), first.cpu()) / n) / n
        eigenvalues = [float(x) for x in torch.linalg.eigvalsh(cov).flip(0).clamp_(min=0.0)]
        spectrum.append(eigenvalues[: min(n, d)])
    ceiling = alignment_ceiling(mean_neg, n_ref)
    return Geometry(
        alignment=(q_u + q_v - 2 * p) / n,
        uniformity=uniformity,
        effective_rank=EffectiveRank(u=rank[0], v=rank[1], epsilon=RANKME_EPSILON),
        spectrum=Spectrum(u=spectrum[0], v=spectrum[1]),
        frontier_gap=mean_neg - ((n - 2) * mean_pos - n) / (2 * (n - 1)),
        alignment_ceiling=Ceiling(value=ceiling, below_one=bool(ceiling < 1.0)),
        uniformity_sampling=sampling,
    )


def covariance_spectrum(x: torch.Tensor) -> list[float]:
    """Eigenvalues of the population covariance of the rows of ``x``, descending, min(n, d) of
    them."""
    x64 = x.to(torch.float64)
    centred = x64 - x64.mean(dim=0, keepdim=True)
    sigma = torch.linalg.svdvals(centred)  # descending
    return [float(s) for s in (sigma**2 / x.shape[0])]


def geometry(
    z1,
    z2,
    *,
    n_ref: int | None,
    cross_view_mean: float | None = None,
    block_size: int | None = None,
) -> Geometry:
    """Alignment, uniformity, effective rank, covariance spectrum, frontier gap and the
    Thm 5.2 alignment ceiling of two views (see the module docstring for every formula).

    Args:
        z1, z2: (n, d) tensors or arrays, the two views (row i = instance i); normalised here
            (:func:`cl_diag.measurement.inputs.normalise_views`).
        n_ref: instances of the threshold / ceiling 1/(n_ref - 1) (None: n).
        cross_view_mean: the mean cross-view negative similarity if already measured (e.g. by
            :func:`cl_diag.measurement.pairs.pair_statistics`); otherwise computed in O(nd) as
            ((sum_i u_i).(sum_j v_j) - sum_i u_i.v_i) / (n(n-1)) in float64.
        block_size: tile side of the uniformity pass (default 1024 on CPU, 8192 on CUDA).

    Returns:
        the ``geometry`` block of result.json (:class:`cl_diag.result.Geometry`).
    """
    views = normalise_views(z1, z2)
    return geometry_of(views, n_ref=n_ref, cross_view_mean=cross_view_mean, block_size=block_size)


def geometry_of(
    views: UnitViews,
    *,
    n_ref: int | None,
    cross_view_mean: float | None = None,
    block_size: int | None = None,
    ranks: Ranks | None = None,
    uniformity_pairs: int | None = None,
    seed: int = 0,
) -> Geometry:
    """:func:`geometry` of views already checked and normalised by
    :func:`cl_diag.measurement.inputs.normalise_views` (the rows are used as they are).

    ``ranks``: under ``torchrun``, every rank passes the same views and gets the same
    result, the uniformity tiles being split over the ranks (None: this process alone).
    ``uniformity_pairs``: estimate the uniformity from that many sampled pairs of each view
    (seeded with ``seed``; :func:`uniformity_estimate`) instead of visiting all n^2/2, record
    how in ``uniformity_sampling``, and take the rest from the Gram matrices
    (:func:`_from_grams`): ``analyze --pairs moments`` at data-set scale."""
    u, v = views
    n = views.n
    n_ref = check_n_ref(n_ref, n)
    if block_size is not None:
        block_size = check_int(block_size, "block_size", 1)
    ranks = ranks or SINGLE
    ranks.check_same("views or block sizes", lambda: (block_size, tensor_fingerprint(u, v)))
    # torch single-threaded meanwhile: float64 sums and the SVDs' last bits depend on how many
    # threads share them, and a result must not depend on the machine's cores
    with _cpu_workers() as threads:
        return _geometry(
            u, v, n_ref, cross_view_mean, block_size, ranks, threads, uniformity_pairs, seed
        )


def _geometry(
    u,
    v,
    n_ref: int,
    cross_view_mean,
    block_size,
    ranks: Ranks,
    threads: int,
    uniformity_pairs: int | None = None,
    seed: int = 0,
) -> Geometry:
    if uniformity_pairs is not None:
        # data-set scale (moments mode): O(d^2) memory; the uniformity from sampled pairs
        from cl_diag.measurement.pairs import CONFIDENCE

        generator = torch.Generator().manual_seed(seed)
        (value_u, interval_u), (value_v, interval_v) = (
            uniformity_estimate(x, uniformity_pairs, generator) for x in (u, v)
        )
        sampling = UniformitySampling(
            pairs=uniformity_pairs, confidence=CONFIDENCE, u=interval_u, v=interval_v
        )
        uniformity = ViewValues(u=value_u, v=value_v)
        return _from_grams(u, v, n_ref, cross_view_mean, threads, uniformity, sampling)
    n = u.shape[0]
    u64, v64 = u.to(torch.float64), v.to(torch.float64)
    positives = (u64 * v64).sum(dim=1)
    mean_pos = float(positives.mean())
    if cross_view_mean is None:
        mean_neg = float((u64.sum(dim=0) @ v64.sum(dim=0) - positives.sum()) / (n * (n - 1)))
    else:
        mean_neg = float(cross_view_mean)
        if not math.isfinite(mean_neg):
            raise ValueError(f"cross_view_mean must be a finite number, got {cross_view_mean!r}.")
    ceiling = alignment_ceiling(mean_neg, n_ref)
    return Geometry(
        alignment=float((u64 - v64).pow(2).sum(dim=1).mean()),
        uniformity=ViewValues(
            u=_uniformity(u, block_size, ranks, threads),
            v=_uniformity(v, block_size, ranks, threads),
        ),
        effective_rank=EffectiveRank(
            u=effective_rank(u), v=effective_rank(v), epsilon=RANKME_EPSILON
        ),
        spectrum=Spectrum(u=covariance_spectrum(u), v=covariance_spectrum(v)),
        frontier_gap=mean_neg - ((n - 2) * mean_pos - n) / (2 * (n - 1)),
        alignment_ceiling=Ceiling(value=ceiling, below_one=bool(ceiling < 1.0)),
    )
