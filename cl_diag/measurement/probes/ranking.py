"""Label-free retrieval of the positive view: Recall@k and the median rank."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from cl_diag.measurement.probes.features import _features, _normalise, _positive_int
from cl_diag.result import Retrieval, RetrievalScores

#: working memory of one block of queries (its float32 similarities and their comparison with
#: the positive): the rows per block shrink as n grows, so no n x n matrix is ever held
_BLOCK_BYTES = 64 << 20


def retrieval_ranks(u: Any, v: Any, *, block_size: int = 1024) -> np.ndarray:
    """Rank of the positive v_i among all v for each query u_i, by cosine similarity.

        rank_i = #{j : s_ij >= s_ii},   s_ij = <u_i, v_j> / (||u_i|| ||v_j||),

    so rank 1 means v_i is strictly the most similar, and any other v_j tied with v_i
    is counted ahead of it (pessimistic ties).  s_ii is taken from the same float32
    block product as the s_ij it is compared with.  Streamed over blocks of
    ``block_size`` queries: memory O(block_size * n), never n x n.
    """
    uu = _features(u, "u")
    vv = _features(v, "v")
    if uu.shape != vv.shape:
        raise ValueError(
            f"u has shape {tuple(uu.shape)} but v has {tuple(vv.shape)}; the two views must pair "
            "row by row"
        )
    block_size = _positive_int(block_size, "block_size")
    uu, vv = _normalise(uu), _normalise(vv)
    n = uu.shape[0]
    block_size = max(1, min(block_size, _BLOCK_BYTES // (5 * max(n, 1))))
    ranks = np.empty(n, dtype=np.int64)
    for start in range(0, n, block_size):
        stop = min(start + block_size, n)
        sims = uu[start:stop] @ vv.T
        pos = sims[torch.arange(stop - start), torch.arange(start, stop)]
        ranks[start:stop] = (sims >= pos[:, None]).sum(dim=1).numpy()
    return ranks


def _scores(ranks: np.ndarray, ks: Sequence[int]) -> tuple[dict[int, float | None], float]:
    return {k: float((ranks <= k).mean()) for k in ks}, float(np.median(ranks))


def retrieval(
    u: Any,
    v: Any,
    *,
    ks: Sequence[int] = (1, 5, 10),
    block_size: int = 1024,
    both_directions: bool = False,
) -> Retrieval:
    """Label-free retrieval of the positive: Recall@k and the median rank.

    With rank_i from :func:`retrieval_ranks` (pessimistic ties),
    ``recall_at_k = (1/n) #{i : rank_i <= k}`` and ``median_rank = median_i rank_i``
    (numpy's median: the mean of the two middle ranks for even n).
    For two augmented views U, V of the same n images, Recall@1 is the fraction of
    images whose other view is their nearest neighbour among all n second views.
    ``both_directions``: also the reverse direction, each v_i queried among all u
    (``reverse``: e.g. text -> image after image -> text for two encoders' embeddings).
    Returns Recall@k by requested k (``.recall[1]``; ``recall_at_1`` in result.json), the
    median rank and the ``settings``.
    """
    ks = [_positive_int(k, "each k") for k in ks]
    ranks = retrieval_ranks(u, v, block_size=block_size)
    settings = {
        "normalisation": "l2 per row",
        "similarity": "cosine, float32",
        "rank": "1 + #{j != i : s_ij >= s_ii} (ties counted against the positive)",
        "ks": ks,
        "n": int(ranks.size),
    }
    reverse = None
    if both_directions:
        recall, median = _scores(retrieval_ranks(v, u, block_size=block_size), ks)
        reverse = RetrievalScores(recall=recall, median_rank=median)
        settings["directions"] = "view 1 -> view 2 (recall, median_rank) and back (reverse)"
    recall, median = _scores(ranks, ks)
    return Retrieval(recall=recall, median_rank=median, reverse=reverse, settings=settings)
