"""Closed forms of cl_diag.measurement.theory against the numbers in
paper-notes (Lee, Lim, Lee, Sohn, ICML 2025; Lee, Chang, Sohn 2024), and the
theorems checked by optimising free embeddings with the project's own losses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from cl_diag.losses import LOSSES
from cl_diag.measurement.theory import (
    additive_cross_only_condition,
    additive_optimum_x,
    alignment_ceiling,
    delta,
    sigmoid_eq10,
    sigmoid_eq10_lhs,
    sigmoid_optimum,
    variance_band,
)


# --------------------------------------------------------------------------
# Closed forms vs paper-notes
# --------------------------------------------------------------------------
def test_delta_constants():
    # paper-notes 9
    assert delta(4) == pytest.approx(-1 / 3)
    assert delta(50_000) == pytest.approx(-2.00004e-5, rel=1e-6)
    assert delta(126_689) == pytest.approx(-7.893e-6, rel=1e-4)
    assert delta(130_000) == pytest.approx(-7.692e-6, rel=1e-4)
    assert delta(1_281_167) == pytest.approx(-7.805e-7, rel=1e-4)
    with pytest.raises(ValueError, match="n must be an integer >= 2"):
        delta(1)


def test_variance_band():
    lo, hi = variance_band(4, 2)  # Fig. 2: 2/9 and 8/9
    assert (lo, hi) == (pytest.approx(2 / 9), pytest.approx(8 / 9))
    assert variance_band(10, 10) == (0.0, 0.0)  # m = n: the full-batch ETF
    # paper-notes 5.2 table, n = 50,000
    table = {
        32: (6.45e-7, 0.032239),
        64: (3.17e-7, 0.015853),
        128: (1.57e-7, 0.007854),
        256: (7.80e-8, 0.003902),
        512: (3.87e-8, 0.001937),
    }
    for m, (want_lo, want_hi) in table.items():
        lo, hi = variance_band(50_000, m)
        assert lo == pytest.approx(want_lo, rel=5e-3)
        assert hi == pytest.approx(want_hi, rel=5e-4)
        assert hi == pytest.approx(1 / (m - 1), rel=m / 50_000 + 1e-3)  # ~ (1 - m/n)/(m-1)
    his = [variance_band(50_000, m)[1] for m in table]
    assert his == sorted(his, reverse=True)
    with pytest.raises(ValueError, match="exceeds"):
        variance_band(4, 8)


def test_sigmoid_eq10_values():
    # paper-notes 5.1, Ex. 5.4, n = 50,000
    assert sigmoid_eq10_lhs(1.0, -1.0, 50_000) == pytest.approx(0.163, abs=5e-4)
    assert sigmoid_eq10(1.0, -1.0, 50_000)
    assert sigmoid_eq10_lhs(10.0, 10.0, 50_000) == pytest.approx(1.1e4, rel=0.01)
    assert sigmoid_eq10(10.0, 10.0, 50_000)
    # hand value: n = 8, t = b = 1: (1 + e^{1/7 + 1}) / (1 + e^0) = 2.0340... < 3
    assert sigmoid_eq10_lhs(1.0, 1.0, 8) == pytest.approx((1 + math.exp(1 / 7 + 1)) / 2, rel=1e-12)
    assert sigmoid_eq10(1.0, 1.0, 8)
    assert not sigmoid_eq10(10.0, 10.0, 1024)
    assert not sigmoid_eq10(1.0, 1.0, 2)
    # huge t, b: log-space, no overflow
    assert not sigmoid_eq10(5000.0, 5000.0, 100)
    assert sigmoid_eq10_lhs(5000.0, 5000.0, 100) == math.inf


@pytest.mark.parametrize(
    "t,b,n",
    [
        (1.0, -1.0, 50_000),
        (10.0, 10.0, 50_000),
        (1.0, 1.0, 8),
        (10.0, 10.0, 1024),
        (2.0, 3.0, 6),
        (0.5, 4.0, 30),
    ],
)
def test_eq10_is_condition_8_for_sigmoid(t, b, n):
    # phi'(1) = t/(1+e^{t-b}); psi'(delta) = (n-1) t/(1+e^{t/(n-1)+b})
    dphi = t / (1 + math.exp(t - b))
    dpsi = (n - 1) * t / (1 + math.exp(t / (n - 1) + b))
    regime = additive_cross_only_condition(dphi, dpsi, n)
    assert regime == ("excessive" if sigmoid_eq10(t, b, n) else "etf")


def test_sigmoid_optimum_examples():
    # paper-notes 11.1
    o = sigmoid_optimum(1.0, 1.0, 8)
    assert o.regime == "interior"
    assert (o.x, o.s_pos, o.s_neg) == (
        pytest.approx(0.759, abs=5e-4),
        pytest.approx(0.519, abs=5e-4),
        pytest.approx(-0.349, abs=5e-4),
    )
    # x* solves 2 sigma(b + t - 2tx) = (N-2) sigma(tx(N-2)/(N-1) - t - b)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    assert 2 * sig(2 - 2 * o.x) == pytest.approx(6 * sig(o.x * 6 / 7 - 2), rel=1e-10)
    assert sigmoid_optimum(5.0, 0.0, 1024)[:4] == ("antipodal", 0.0, -1.0, -1.0)
    e = sigmoid_optimum(10.0, 10.0, 1024)
    assert (e.regime, e.x, e.s_pos) == ("etf", 1.0, 1.0)
    assert e.s_neg == pytest.approx(delta(1024))
    # consistent with the general Def. 3.2 optimum of h(x) (paper-notes 5.1), x = E_pos
    t, b, n = 1.0, 1.0, 8
    x = additive_optimum_x(
        lambda s: -math.log1p(math.exp(b - t * s)),
        lambda s: (n - 1) * math.log1p(math.exp(t * s - b)),
        n,
    )
    assert x == pytest.approx(o.s_pos, abs=1e-6)


def test_sigmoid_optimum_is_the_ccem_minimum():
    # brute force over the one-parameter family x in [0, 1]
    for t, b, n in [
        (1.0, 1.0, 8),
        (3.0, 0.5, 10),
        (5.0, 0.0, 1024),
        (10.0, 10.0, 1024),
        (2.0, 2.0, 5),
    ]:
        k = (n - 2) / (n - 1)
        sp = lambda x: np.logaddexp(0, x)  # noqa: E731
        xs = np.linspace(0, 1, 200_001)
        loss = sp(b - t * (2 * xs - 1)) + (n - 1) * sp(t * (xs * k - 1) - b)
        assert sigmoid_optimum(t, b, n).x == pytest.approx(xs[np.argmin(loss)], abs=2e-5)


def test_alignment_ceiling_and_exact_identity():
    assert alignment_ceiling(delta(10), 10) == pytest.approx(1.0)
    assert alignment_ceiling(-0.5, 4) == pytest.approx(1 - 0.5 + 1 / 3)
    g = torch.Generator().manual_seed(0)
    for n, d in [(5, 3), (8, 8), (20, 4)]:
        u = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64), dim=1)
        v = F.normalize(torch.randn(n, d, generator=g, dtype=torch.float64) + u, dim=1)
        s = u @ v.T
        e_pos = s.diagonal().mean().item()
        e_neg = s[~torch.eye(n, dtype=torch.bool)].mean().item()
        assert e_pos <= alignment_ceiling(e_neg, n) + 1e-12  # Thm 5.2, Eq. 7
        # exact identity (paper-notes 5.1): (n-2) E_pos = n + 2(n-1) E_neg - (n/2) R
        diff = u - v
        r = ((diff - diff.mean(0)) ** 2).sum(1).mean().item() + (
            (u.mean(0) + v.mean(0)) ** 2
        ).sum().item()
        assert (n - 2) * e_pos == pytest.approx(n + 2 * (n - 1) * e_neg - n / 2 * r, abs=1e-10)


# --------------------------------------------------------------------------
# Theorems by optimising free embeddings with the project's losses
# --------------------------------------------------------------------------
def optimise(loss_fn, n, d, steps, seed=0, batches=None, lr=0.05):
    g = torch.Generator().manual_seed(seed)
    p1 = torch.randn(n, d, generator=g).requires_grad_()
    p2 = torch.randn(n, d, generator=g).requires_grad_()
    opt = torch.optim.Adam([p1, p2], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        opt.zero_grad()
        if batches is None:
            loss = loss_fn(p1, p2)
        else:  # fixed mini-batch partition: sum_k L(U_Ik, V_Ik)
            loss = sum(loss_fn(p1[i], p2[i]) for i in batches)
        loss.backward()
        opt.step()
        sched.step()
    u = F.normalize(p1.detach().double(), dim=1)
    v = F.normalize(p2.detach().double(), dim=1)
    off = ~torch.eye(n, dtype=torch.bool)
    return {
        "pos": (u * v).sum(1),
        "cross": (u @ v.T)[off],
        "within": torch.cat([(u @ u.T)[off], (v @ v.T)[off]]),
    }


@pytest.mark.parametrize(
    "name,n,d",
    [("simclr", 4, 4), ("dcl", 5, 6), ("dhel", 6, 6), ("infonce", 8, 9), ("simclr", 8, 8)],
)
def test_thm51_full_batch_reaches_simplex_etf(name, n, d):
    s = optimise(lambda a, b: LOSSES[name](a, b, temperature=0.5), n, d, steps=600, seed=n)
    assert torch.allclose(s["pos"], torch.ones(n, dtype=torch.float64), atol=1e-4)
    for kind in ("cross", "within"):
        assert torch.allclose(s[kind], torch.full_like(s[kind], delta(n)), atol=1e-4), kind


@pytest.mark.slow
def test_ex54_sigmoid_cross_only_is_excessively_separated_and_matches_ccem():
    n, t, b = 8, 1.0, 1.0
    assert sigmoid_eq10(t, b, n)
    pred = sigmoid_optimum(t, b, n)
    s = optimise(lambda p, q: LOSSES["sigmoid"](p, q, temperature=t, bias=b), n, n, steps=1500)
    assert s["pos"].mean() < 1 - 0.1
    assert s["cross"].mean() < delta(n) - 0.1
    # CCEM prediction: regime interior, s_pos = 2x* - 1, every negative x*(N-2)/(N-1) - 1
    assert pred.regime == "interior"
    assert s["pos"].mean().item() == pytest.approx(pred.s_pos, abs=2e-3)
    assert (s["pos"].mean().item() + 1) / 2 == pytest.approx(pred.x, abs=1e-3)
    assert torch.allclose(s["cross"], torch.full_like(s["cross"], pred.s_neg), atol=5e-3)


def test_ex54_within_view_negatives_restore_etf():
    n, t, b = 8, 1.0, 1.0
    s = optimise(
        lambda p, q: LOSSES["sigmoid"](p, q, temperature=t, bias=b, within_view=True),
        n,
        n,
        steps=1000,
    )
    assert torch.allclose(s["pos"], torch.ones(n, dtype=torch.float64), atol=1e-4)
    assert torch.allclose(s["cross"], torch.full_like(s["cross"], delta(n)), atol=1e-4)


def test_sigmoid_antipodal_regime():
    # t = 1, b = -1 (the rebuttal's setting) with N = 8: t + b = 0 <= log 3
    n = 8
    assert sigmoid_optimum(1.0, -1.0, n).regime == "antipodal"
    s = optimise(lambda p, q: LOSSES["sigmoid"](p, q, temperature=1.0, bias=-1.0), n, n, steps=500)
    assert torch.allclose(s["pos"], torch.full_like(s["pos"], -1.0), atol=1e-4)
    assert torch.allclose(s["cross"], torch.full_like(s["cross"], -1.0), atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name,seed", [("simclr", 0), ("simclr", 1), ("dhel", 2), ("dcl", 3)])
def test_thm55_fixed_minibatches_variance_band(name, seed):
    n, m = 4, 2
    lo, hi = variance_band(n, m)
    s = optimise(
        lambda a, b: LOSSES[name](a, b, temperature=0.5),
        n,
        3,
        steps=800,
        seed=seed,
        batches=[[0, 1], [2, 3]],
    )
    assert torch.allclose(s["pos"], torch.ones(n, dtype=torch.float64), atol=1e-4)
    cross = s["cross"]  # the n(n-1) = 12 ordered pairs (u_i, v_j), i != j
    assert cross.mean().item() == pytest.approx(delta(n), abs=1e-4)
    # within-batch negatives sit at -1/(m-1) = -1, more separated than delta(n)
    u_dot_v = {
        (i, j): x
        for (i, j), x in zip(
            [(i, j) for i in range(4) for j in range(4) if i != j], cross.tolist(), strict=True
        )
    }
    for pair in [(0, 1), (1, 0), (2, 3), (3, 2)]:
        assert u_dot_v[pair] == pytest.approx(-1.0, abs=1e-4)
    var = cross.var(unbiased=False).item()
    assert lo - 1e-4 <= var <= hi + 1e-4


def test_argument_checks():
    assert delta(np.int64(5)) == -0.25  # numpy integers are integers
    with pytest.raises(ValueError, match="n must be an integer"):
        delta(4.0)
    with pytest.raises(ValueError, match="m must be an integer >= 2"):
        variance_band(10, 1)
    with pytest.raises(ValueError, match="t must be a finite number > 0"):
        sigmoid_optimum(0.0, 1.0, 8)
    with pytest.raises(ValueError, match="b must be finite"):
        sigmoid_eq10(1.0, math.nan, 8)
    with pytest.raises(ValueError, match="n must be an integer >= 3"):
        sigmoid_optimum(1.0, 1.0, 2)
