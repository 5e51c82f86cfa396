"""SSEM closed forms of cl_diag.measurement.theory (paper-notes 11.3): the supcl loss on the
simplex-to-simplex embedding model, the collapse threshold alpha_c and the optimum beta*."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES
from cl_diag.measurement.theory import (
    collapse_threshold,
    ssem_embedding,
    ssem_loss,
    ssem_optimum,
    ssem_similarities,
)

SETTINGS = [(3, 4, 0.5), (4, 3, 1.0), (3, 4, 0.1), (10, 10, 0.3), (2, 2, 2.0)]


def ssem_embeddings(beta: float, m: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    z = torch.tensor(ssem_embedding(beta, m, n))
    return z, z.clone()


@pytest.mark.parametrize("beta", [0.0, 0.3, 1.0])
def test_the_constructed_ssem_has_the_stated_similarities(beta):
    m, n = 3, 4
    z, _ = ssem_embeddings(beta, m, n)
    y = np.arange(m * n) // n
    gram = (z @ z.T).numpy()
    s_w, s_b = ssem_similarities(beta, m, n)
    same = (y[:, None] == y[None, :]) & ~np.eye(m * n, dtype=bool)
    assert np.allclose(np.diag(gram), 1.0)
    assert np.allclose(gram[same], s_w) and np.allclose(gram[y[:, None] != y[None, :]], s_b)
    assert 1 + (n - 1) * s_w + n * (m - 1) * s_b == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("m", "n", "tau"), SETTINGS)
@pytest.mark.parametrize("beta", [0.0, 0.25, 0.8, 1.0])
@pytest.mark.parametrize("alpha", [0.0, 0.4, 1.0])
def test_ssem_loss_is_the_supcl_loss_of_the_ssem(m, n, tau, beta, alpha):
    z1, z2 = ssem_embeddings(beta, m, n)
    y = torch.arange(m * n) // n
    got = LOSSES["supcl"](z1, z2, labels=y, temperature=tau, alpha=alpha).item()
    assert ssem_loss(beta, alpha, tau, m, n) == pytest.approx(got, rel=1e-5, abs=1e-5)


def _grid_argmin(alpha, tau, m, n, p=2, variant="B", points=20001):
    betas = np.linspace(0.0, 1.0, points)
    losses = [ssem_loss(b, alpha, tau, m, n, p, variant=variant) for b in betas]
    return float(betas[int(np.argmin(losses))])


@pytest.mark.parametrize(("m", "n", "tau"), SETTINGS)
def test_beta_star_is_the_grid_minimum_and_collapse_starts_at_alpha_c(m, n, tau):
    alpha_c = collapse_threshold(tau, m, n)
    for alpha in (0.0, alpha_c - 0.05, alpha_c + 0.02, alpha_c + 0.2, 0.9, 1.0):
        if not 0.0 <= alpha <= 1.0:
            continue
        opt = ssem_optimum(alpha, tau, m, n)
        assert opt.beta == pytest.approx(_grid_argmin(alpha, tau, m, n), abs=1e-4)
        assert (opt.regime == "collapse") == (alpha <= alpha_c)
        assert opt.within_class_variance == pytest.approx(1 - opt.beta)
        assert (opt.s_w, opt.s_b) == pytest.approx(ssem_similarities(opt.beta, m, n))
        assert opt.alpha_c == alpha_c


@pytest.mark.parametrize(("m", "n", "tau"), SETTINGS)
def test_interior_optimum_satisfies_the_stationarity_condition(m, n, tau):
    p, k = 2, 1
    alpha = min(1.0, collapse_threshold(tau, m, n) + 0.1)
    opt = ssem_optimum(alpha, tau, m, n)
    assert opt.regime == "interior"
    lhs = alpha * p * (n - 1) * math.exp(opt.s_w / tau)
    rhs = (1 - alpha) * k * math.exp(1 / tau) + p * math.exp(opt.s_b / tau) * (
        (n - 1) + (1 - alpha) * (m - 1) * n
    )
    assert lhs == pytest.approx(rhs, rel=1e-9)


@pytest.mark.parametrize(("m", "n", "tau"), SETTINGS)
def test_limits(m, n, tau):
    # alpha = 1: the instance-level ETF, s_w = s_b; alpha = 0: class collapse
    opt = ssem_optimum(1.0, tau, m, n)
    assert opt.beta == pytest.approx((m - 1) / (m * n - 1), abs=1e-12)
    assert opt.s_w == pytest.approx(opt.s_b, abs=1e-12)
    assert ssem_optimum(0.0, tau, m, n).regime == "collapse"
    # tau -> 0: k_self / (k_self + (n-1) p); tau -> infinity: 1
    assert collapse_threshold(1e-4, m, n) == pytest.approx(1 / (1 + 2 * (n - 1)), rel=1e-9)
    assert collapse_threshold(1e6, m, n) == pytest.approx(1.0, abs=1e-5)
    # alpha_c grows with tau
    assert collapse_threshold(tau, m, n) < collapse_threshold(2 * tau, m, n)


def test_paper_notes_examples_variant_a():
    # paper-notes 11.3: variant A, tau = 0.1: CIFAR-10 batch 500 (m = 10, n = 50) and
    # CIFAR-100 batch 500 (m = 100, n = 5)
    assert collapse_threshold(0.1, 10, 50, 2, variant="A") == pytest.approx(0.020, abs=5e-4)
    assert collapse_threshold(0.1, 100, 5, 2, variant="A") == pytest.approx(0.203, abs=5e-4)
    opt = ssem_optimum(0.5, 0.1, 10, 50, 2, variant="A")
    assert opt.beta == pytest.approx(_grid_argmin(0.5, 0.1, 10, 50, variant="A"), abs=1e-4)


def test_small_tau_does_not_overflow():
    opt = ssem_optimum(0.3, 1e-3, 10, 10)
    assert math.isfinite(opt.beta) and opt.regime == "interior"
    assert math.isfinite(ssem_loss(0.5, 0.3, 1e-3, 10, 10))


def test_bad_arguments():
    with pytest.raises(ValueError, match="tau"):
        collapse_threshold(0.0, 3, 4)
    with pytest.raises(ValueError, match="m must be an integer >= 2"):
        collapse_threshold(0.5, 1, 4)
    with pytest.raises(ValueError, match="alpha"):
        ssem_optimum(1.5, 0.5, 3, 4)
    with pytest.raises(ValueError, match="variant"):
        ssem_optimum(0.5, 0.5, 3, 4, variant="C")
    with pytest.raises(ValueError, match="beta"):
        ssem_similarities(1.2, 3, 4)
