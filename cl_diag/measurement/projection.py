"""A 2-D view of a layer's embeddings: PCA always, UMAP when ``umap-learn`` is installed.

What a reader looks at (classes apart or merged, a collapsed cloud), not a measurement a
finding reads; drawn from a seeded sample of at most :data:`MAX_POINTS` rows of the first view,
the same instances for every layer. **PCA** (:func:`pca_2d`, Pearson 1901): an exact float64
SVD of the centred sample, each axis' sign fixed so that its largest loading is positive,
``explained`` = S_k^2 / sum S^2. **UMAP** (:func:`umap_2d`, McInnes et al. 2018):
``umap.UMAP(n_components=2, metric="cosine", random_state=seed)``, single-threaded and
reproducible, imported only with the ``[umap]`` extra. Coordinates are rounded to 6 decimals,
so result.json does not carry a BLAS's last bits.
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings

import numpy as np
import torch

from cl_diag.result import Projection

__all__ = ["MAX_POINTS", "UMAP_MODULE", "pca_2d", "projections_of", "sample_rows", "umap_2d"]

#: the most instances a 2-D view shows (a scatter of more is ink, and UMAP's cost grows with n)
MAX_POINTS = 500
#: the module the optional extra ``cl-diag[umap]`` (distribution umap-learn) provides
UMAP_MODULE = "umap"
#: UMAP's neighbourhood size (its default) and the fewest points it is run on
UMAP_NEIGHBOURS = 15
_DECIMALS = 6


def sample_rows(n: int, seed: int, limit: int = MAX_POINTS) -> torch.Tensor:
    """The instances a 2-D view shows: all ``n`` when n <= ``limit``, else ``limit`` drawn
    uniformly without replacement with ``seed`` (ascending). Memory O(limit), not O(n): a
    moments-mode run has millions of rows, so indices are drawn with replacement and the first
    ``limit`` distinct ones kept (a uniform sample without replacement)."""
    if n <= limit:
        return torch.arange(n)
    generator = torch.Generator().manual_seed(seed)
    if n <= 8 * limit:
        return torch.sort(torch.randperm(n, generator=generator)[:limit]).values
    kept: dict[int, None] = {}  # insertion-ordered: the first occurrences, in draw order
    while len(kept) < limit:
        for i in torch.randint(n, (2 * limit,), generator=generator).tolist():
            kept.setdefault(int(i), None)
            if len(kept) == limit:
                break
    return torch.sort(torch.tensor(list(kept), dtype=torch.int64)).values


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), _DECIMALS) + 0.0 for v in values]  # + 0.0: no "-0.0"


def pca_2d(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates (k, 2) of the rows of ``x`` (k, d) on their first two principal axes, and
    each axis' share of the variance; an axis the data lack (d = 1, or rank 1) is zeros."""
    centred = x - x.mean(axis=0, keepdims=True)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    axes = np.zeros((2, x.shape[1]))
    shares = np.zeros(2)
    total = float(np.sum(s**2))
    for k in range(min(2, vt.shape[0])):
        axis = vt[k]
        if axis[np.argmax(np.abs(axis))] < 0:  # the sign an SVD leaves free, fixed
            axis = -axis
        axes[k] = axis
        shares[k] = float(s[k] ** 2) / total if total > 0 else 0.0
    return centred @ axes.T, shares


def umap_2d(x: np.ndarray, seed: int) -> np.ndarray | None:
    """UMAP coordinates (k, 2) of the rows of ``x``, or None when umap-learn is not installed
    or there are too few points for its neighbourhoods."""
    if importlib.util.find_spec(UMAP_MODULE) is None or x.shape[0] <= UMAP_NEIGHBOURS + 1:
        return None
    umap = importlib.import_module(UMAP_MODULE)
    reducer = umap.UMAP(
        n_components=2, n_neighbors=UMAP_NEIGHBOURS, metric="cosine", random_state=seed, n_jobs=1
    )
    with warnings.catch_warnings():
        # umap-learn 0.5 warns on every seeded fit that a seed means one job; one job and a
        # seed is what makes the view reproducible, so the warning tells a user nothing
        warnings.filterwarnings("ignore", message="n_jobs value", category=UserWarning)
        embedded = reducer.fit_transform(x.astype(np.float32))
    return np.asarray(embedded, dtype=np.float64)


def projections_of(
    u: torch.Tensor, codes: torch.Tensor | None, *, seed: int
) -> dict[str, Projection]:
    """The 2-D views of one layer: ``u`` its first view's L2-normalised rows (n, d),
    ``codes`` the class codes (n,) or None; "pca" always, "umap" when it can run."""
    rows = sample_rows(int(u.shape[0]), seed)
    x = u.detach()[rows.to(u.device)].to("cpu", torch.float64).numpy()
    classes = None if codes is None else [int(c) for c in codes.detach().cpu()[rows].tolist()]
    index = [int(i) for i in rows.tolist()]
    coords, shares = pca_2d(x)
    out = {
        "pca": Projection(
            method="pca",
            seed=seed,
            rows=index,
            x=_rounded(coords[:, 0]),
            y=_rounded(coords[:, 1]),
            classes=classes,
            explained=_rounded(shares),
        )
    }
    embedded = umap_2d(x, seed)
    if embedded is not None:
        out["umap"] = Projection(
            method="umap",
            seed=seed,
            rows=index,
            x=_rounded(embedded[:, 0]),
            y=_rounded(embedded[:, 1]),
            classes=classes,
            settings={"n_neighbors": UMAP_NEIGHBOURS, "metric": "cosine"},
        )
    return out
