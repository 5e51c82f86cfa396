"""Geometry block (cl_diag.measurement.geometry) against numpy float64 brute force and closed
forms."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

from cl_diag.measurement.geometry import (
    RANKME_EPSILON,
    covariance_spectrum,
    effective_rank,
    geometry,
    uniformity,
)
from cl_diag.measurement.pairs import normalise_views
from cl_diag.result import Ceiling, ViewValues

U32 = 2.0**-24


def rows(z1, z2):
    u, v = normalise_views(z1, z2)
    return u.double().numpy(), v.double().numpy()


def brute_uniformity(x: np.ndarray) -> float:
    n = x.shape[0]
    sq = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    iu = np.triu_indices(n, 1)
    return float(np.log(np.mean(np.exp(-2.0 * sq[iu]))))


def brute_rankme(x: np.ndarray, eps: float = 1e-7) -> float:
    s = np.linalg.svd(x, compute_uv=False)
    p = s / s.sum() + eps
    return float(np.exp(-(p * np.log(p)).sum()))


@pytest.mark.parametrize("n,d,block", [(2, 3, None), (9, 4, 2), (83, 16, 10), (130, 64, 64)])
def test_matches_brute_force(n, d, block):
    rng = np.random.default_rng(n)
    z1 = rng.standard_normal((n, d)) * 3.0
    z2 = z1 + rng.standard_normal((n, d))
    g = geometry(z1, z2, n_ref=1000, block_size=block)
    u, v = rows(z1, z2)
    assert list(g.to_dict()) == [
        "alignment",
        "uniformity",
        "effective_rank",
        "spectrum",
        "frontier_gap",
        "alignment_ceiling",
    ]
    assert g.alignment == pytest.approx(np.mean(((u - v) ** 2).sum(1)), rel=1e-13)
    # uniformity: the exponent -2|x_i - x_j|^2 = 4 x_i.x_j - ... carries 4x the float32 dot error
    # (<= d u per pair), and a log-mean-exp moves by at most the largest exponent error
    eps = 4 * (d * U32 / (1 - d * U32))
    assert abs(g.uniformity.u - brute_uniformity(u)) <= eps
    assert abs(g.uniformity.v - brute_uniformity(v)) <= eps
    assert g.effective_rank.epsilon == RANKME_EPSILON == 1e-7
    assert g.effective_rank.u == pytest.approx(brute_rankme(u), rel=1e-10)
    assert g.effective_rank.v == pytest.approx(brute_rankme(v), rel=1e-10)
    for name, x in (("u", u), ("v", v)):
        spec = np.sort(np.linalg.eigvalsh(np.cov(x, rowvar=False, bias=True)))[::-1][: min(n, d)]
        values = getattr(g.spectrum, name)
        assert len(values) == min(n, d)
        assert np.allclose(values, np.clip(spec, 0, None), rtol=1e-9, atol=1e-12)
        assert all(a >= b for a, b in itertools.pairwise(values))
    mean_pos = np.mean((u * v).sum(1))
    cross = u @ v.T
    mean_neg = (cross.sum() - np.trace(cross)) / (n * (n - 1))
    assert g.frontier_gap == pytest.approx(
        mean_neg - ((n - 2) * mean_pos - n) / (2 * (n - 1)), abs=1e-12
    )
    assert g.alignment_ceiling.value == pytest.approx(1 + mean_neg + 1 / 999, abs=1e-12)
    assert g.alignment_ceiling.below_one is bool(1 + mean_neg + 1 / 999 < 1)
    json.dumps(g.to_dict(), allow_nan=False)


def test_frontier_gap_is_the_slack_of_lemma_c6():
    """paper-notes 5.1: (n-2) E_pos = n + 2(n-1) E_neg - (n/2) R for unit vectors, with
    R = tr Var_pos[u - v] + |ubar + vbar|^2 >= 0, so the gap equals n R / (4 (n - 1)).
    The rows are unit only to float32 rounding (|u|^2 = 1 +- ~d u), hence the tolerance."""
    rng = np.random.default_rng(0)
    n, d = 64, 10
    z1 = rng.standard_normal((n, d)) + 0.3
    z2 = z1 + 0.8 * rng.standard_normal((n, d))
    g = geometry(z1, z2, n_ref=n)
    u, v = rows(z1, z2)
    diff = u - v
    r = ((diff - diff.mean(0)) ** 2).sum(1).mean() + ((u.mean(0) + v.mean(0)) ** 2).sum()
    assert g.frontier_gap > 0
    assert g.frontier_gap == pytest.approx(n * r / (4 * (n - 1)), abs=1e-6)


def test_frontier_gap_zero_on_the_frontier():
    """Equality case: u_i - v_i constant and sum u = -sum v, e.g. u_i = a w_i + c e,
    v_i = a w_i - c e with w a centred simplex (sum w_i = 0) and e orthogonal to it (paper-notes
    5.1 counterexample)."""
    n = 12
    w = np.eye(n) - 1.0 / n
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    a, c = math.cos(0.4), math.sin(0.4)
    e = np.zeros((1, n + 1))
    e[0, n] = 1.0
    wz = np.hstack([w, np.zeros((n, 1))])
    g = geometry(a * wz + c * e, a * wz - c * e, n_ref=n)
    assert abs(g.frontier_gap) <= 1e-6
    # alignment is 4 c^2 and the mean positive 1 - 2 c^2, both in closed form
    assert g.alignment == pytest.approx(4 * c * c, abs=1e-6)


def test_antipodal_closed_forms():
    """u_i = e, v_i = -e for all i: alignment 4, zero distances within each view (uniformity 0),
    rank one, zero covariance, and every cross-view negative -1: ceiling 1 - 1 + 1/(n_ref-1)."""
    n = 10
    z1 = np.tile([0.0, 2.0, 0.0], (n, 1))
    z2 = -z1 * 5
    g = geometry(z1, z2, n_ref=100)
    assert g.alignment == 4.0
    assert g.uniformity == ViewValues(u=0.0, v=0.0)
    p1 = 1 + RANKME_EPSILON
    assert g.effective_rank.u == pytest.approx(
        math.exp(-(p1 * math.log(p1) + 2 * 1e-7 * math.log(1e-7))), rel=1e-12
    )
    assert g.spectrum.u == [0.0, 0.0, 0.0]
    assert g.alignment_ceiling.value == pytest.approx(1 / 99, abs=1e-15)
    assert g.alignment_ceiling.below_one is True
    # Lemma C.6 bound: mean_neg = -1 >= ((n-2)(-1) - n)/(2(n-1)) = -1: on the frontier
    assert g.frontier_gap == pytest.approx(0.0, abs=1e-15)


def test_simplex_etf_closed_forms():
    """u_i = v_i = simplex ETF vertices: |u_i - u_j|^2 = 2 + 2/(n-1) for every pair, so the
    uniformity is -4n/(n-1); positives 1 (alignment 0); the ceiling is exactly 1 (not below)
    up to round-off; covariance eigenvalues 1/(n-1) (n-1 times) and 0."""
    n = 16
    q, _ = np.linalg.qr(np.random.default_rng(1).standard_normal((n, n)))
    z = (np.eye(n) - 1.0 / n) @ q
    g = geometry(z, z, n_ref=n)
    eps = 1e-6
    assert g.alignment <= eps
    assert g.uniformity.u == pytest.approx(-4 * n / (n - 1), abs=eps)
    assert g.alignment_ceiling.value == pytest.approx(1.0, abs=eps)
    assert g.effective_rank.u == pytest.approx(n - 1, rel=1e-4)  # n-1 equal singular values
    assert (
        np.allclose(g.spectrum.u[: n - 1], 1 / (n - 1), atol=eps) and abs(g.spectrum.u[-1]) <= eps
    )


def test_effective_rank_of_orthonormal_rows():
    x = torch.eye(6, 9)[:, :]  # 6 orthonormal rows: six equal singular values
    p = 1 / 6 + RANKME_EPSILON
    assert effective_rank(x) == pytest.approx(math.exp(-6 * p * math.log(p)), rel=1e-12)
    assert len(covariance_spectrum(x)) == 6


def test_cross_view_mean_is_used_when_given():
    rng = np.random.default_rng(3)
    z1, z2 = rng.standard_normal((20, 4)), rng.standard_normal((20, 4))
    g = geometry(z1, z2, n_ref=20, cross_view_mean=-0.5)
    assert g.alignment_ceiling == Ceiling(value=1 - 0.5 + 1 / 19, below_one=True)
    with pytest.raises(ValueError, match="cross_view_mean"):
        geometry(z1, z2, n_ref=20, cross_view_mean=float("nan"))


def test_theorem_5_2_holds_with_n_ref_equal_n():
    """E[s_pos] <= 1 + E[s_neg] + 1/(n-1) for any unit vectors (paper Thm 5.2, n = rows)."""
    rng = np.random.default_rng(4)
    for trial in range(5):
        n = 30 + trial
        z1 = rng.standard_normal((n, 5)) + rng.standard_normal(5)
        z2 = z1 + rng.standard_normal((n, 5)) * trial
        g = geometry(z1, z2, n_ref=n)
        u, v = rows(z1, z2)
        assert np.mean((u * v).sum(1)) <= g.alignment_ceiling.value + 1e-6


def test_uniformity_tiles_agree():
    """Tile shapes change only the float32 GEMM rounding (exponent error <= 4 d u per pair)."""
    rng = np.random.default_rng(5)
    x = normalise_views(rng.standard_normal((50, 6)), rng.standard_normal((50, 6)))[0]
    values = [uniformity(x, block_size=b) for b in (1, 7, 50)]
    assert max(values) - min(values) <= 2 * 4 * 6 * U32
    assert abs(values[0] - brute_uniformity(x.double().numpy())) <= 4 * 6 * U32


@pytest.mark.parametrize(
    "z1,z2,kwargs,match",
    [
        (np.ones((1, 3)), np.ones((1, 3)), {"n_ref": 5}, "at least 2"),
        (np.ones((3, 2)), np.ones((3, 3)), {"n_ref": 5}, "same shape"),
        (np.array([[0.0, 0.0], [1.0, 1.0]]), np.ones((2, 2)), {"n_ref": 5}, "all zeros"),
        (np.array([[np.nan, 0.0], [1.0, 1.0]]), np.ones((2, 2)), {"n_ref": 5}, "NaN"),
        (np.ones((3, 2)), np.ones((3, 2)), {"n_ref": 1}, "n_ref"),
        (np.ones((3, 2)), np.ones((3, 2)), {"n_ref": 5, "block_size": 0}, "block_size"),
    ],
)
def test_bad_input(z1, z2, kwargs, match):
    with pytest.raises(ValueError, match=match):
        geometry(z1, z2, **kwargs)
