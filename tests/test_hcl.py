"""hcl: the hard-negative loss of Robinson et al. (ICLR 2021) against a hand computation, the
authors' code transcribed, and its limits (beta = 0, tau_plus = 0 is simclr)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES, HCLLoss, LossOptionError, build_loss


def angles(*degrees):
    a = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([a.cos(), a.sin()], dim=1)


def rand_pair(b=6, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)


def by_hand(z1, z2, t, beta, tau_plus):
    """The paper's Eq. 3-5 anchor by anchor in plain floats: no log space, no masks."""
    u = [np.asarray(r, dtype=float) / np.linalg.norm(r) for r in z1.tolist()]
    v = [np.asarray(r, dtype=float) / np.linalg.norm(r) for r in z2.tolist()]
    b = len(u)
    z = u + v
    n = 2 * b - 2
    total = 0.0
    for a in range(2 * b):
        p = (a + b) % (2 * b)
        pos = math.exp(float(z[a] @ z[p]) / t)
        negs = [float(z[a] @ z[k]) for k in range(2 * b) if k not in (a, p)]
        assert len(negs) == n
        mean_w = sum(math.exp(beta * s / t) for s in negs) / n
        r = sum(math.exp(beta * s / t) / mean_w * math.exp(s / t) for s in negs)
        ng = max((r - tau_plus * n * pos) / (1 - tau_plus), n * math.exp(-1 / t))
        total += -math.log(pos / (pos + ng))
    return total / (2 * b)


def authors_code(out_1, out_2, temperature, beta, tau_plus):
    """Robinson et al.'s ``criterion`` (github.com/joshr17/HCL, estimator='hard'), transcribed."""
    out_1 = torch.nn.functional.normalize(out_1.double(), dim=1)
    out_2 = torch.nn.functional.normalize(out_2.double(), dim=1)
    batch_size = out_1.shape[0]
    out = torch.cat([out_1, out_2], dim=0)
    neg = torch.exp(torch.mm(out, out.t().contiguous()) / temperature)
    mask = torch.ones((batch_size, 2 * batch_size), dtype=torch.bool)
    for i in range(batch_size):
        mask[i, i] = mask[i, i + batch_size] = False
    mask = torch.cat((mask, mask), 0)
    neg = neg.masked_select(mask).view(2 * batch_size, -1)
    pos = torch.exp(torch.sum(out_1 * out_2, dim=-1) / temperature)
    pos = torch.cat([pos, pos], dim=0)
    N = batch_size * 2 - 2
    imp = (beta * neg.log()).exp()
    reweight_neg = (imp * neg).sum(dim=-1) / imp.mean(dim=-1)
    Ng = (-tau_plus * N * pos + reweight_neg) / (1 - tau_plus)
    Ng = torch.clamp(Ng, min=N * np.e ** (-1 / temperature))
    return (-torch.log(pos / (pos + Ng))).mean()


# u1 at 0 deg, u2 at 90, v1 at 60, v2 at 180 (tests/test_losses.py's B = 2 example)
U2, V2 = angles(0, 90), angles(60, 180)


def _anchor(a, t, beta, tau):
    """Anchor a of z = [u1, u2, v1, v2] by the formula, in floats."""
    z = torch.cat([U2, V2]).tolist()
    p = (a + 2) % 4
    sim = lambda i, j: sum(x * y for x, y in zip(z[i], z[j], strict=True))  # noqa: E731
    pos = math.exp(sim(a, p) / t)
    negs = [sim(a, k) for k in range(4) if k not in (a, p)]
    mean_w = sum(math.exp(beta * s / t) for s in negs) / 2
    r = sum(math.exp(beta * s / t) / mean_w * math.exp(s / t) for s in negs)
    ng = max((r - tau * 2 * pos) / (1 - tau), 2 * math.exp(-1 / t))
    return -math.log(pos / (pos + ng))


def test_hand_computation():
    # Anchor u1: positive u1.v1 = 1/2; negatives u1.v2 = -1, u1.u2 = 0 (N = 2); t = 0.5, beta = 1:
    # w = e^{s/t} / mean(e^{-2}, e^0), R = (e^{-4} + 1) / ((e^{-2} + 1) / 2) = 1.79386,
    # Ng = (R - 0.1 * 2 * e) / 0.9 = 1.38911 > 2 e^{-2} (no clamp), L_u1 = log(1 + Ng / e).
    t, beta, tau = 0.5, 1.0, 0.1
    r = (math.exp(-4) + 1) / ((math.exp(-2) + 1) / 2)
    assert r == pytest.approx(1.79386, abs=1e-5)
    ng = (r - tau * 2 * math.e) / (1 - tau)
    assert ng == pytest.approx(1.38911, abs=1e-5) and ng > 2 * math.exp(-2)
    assert _anchor(0, t, beta, tau) == pytest.approx(math.log1p(ng / math.e), rel=1e-12)
    want = sum(_anchor(a, t, beta, tau) for a in range(4)) / 4
    got = LOSSES["hcl"](U2, V2, temperature=t, beta=beta, tau_plus=tau).item()
    assert got == pytest.approx(want, rel=1e-6)  # the loss computes in fp32
    assert want == pytest.approx(by_hand(U2, V2, t, beta, tau), rel=1e-12)


@pytest.mark.parametrize(
    "beta, tau_plus", [(0.0, 0.0), (1.0, 0.0), (0.0, 0.1), (1.0, 0.1), (3.0, 0.3), (0.5, 0.9)]
)
def test_against_the_hand_formula_and_the_authors_code(beta, tau_plus):
    z1, z2 = rand_pair(b=6, d=4, seed=3)
    got = LOSSES["hcl"](z1, z2, temperature=0.5, beta=beta, tau_plus=tau_plus).item()
    assert got == pytest.approx(by_hand(z1, z2, 0.5, beta, tau_plus), rel=1e-5)
    assert got == pytest.approx(authors_code(z1, z2, 0.5, beta, tau_plus).item(), rel=1e-5)


def test_clamp_at_n_exp_minus_one_over_t():
    # tau_plus = 0.9 with aligned positives: the debiased sum is negative and the clamp decides,
    # so every anchor's Ng = N e^{-1/t} and L = log(1 + N e^{-1/t} / e^{s_pos/t}).
    z = torch.eye(3)
    t = 0.5
    got = LOSSES["hcl"](z, z, temperature=t, beta=1.0, tau_plus=0.9).item()
    assert got == pytest.approx(math.log1p(4 * math.exp(-1 / t) / math.exp(1 / t)), rel=1e-6)
    assert got == pytest.approx(by_hand(z, z, t, 1.0, 0.9), rel=1e-6)
    assert authors_code(z, z, t, 1.0, 0.9).item() == pytest.approx(got, rel=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("t", [0.1, 0.5])
def test_beta_0_tau_0_is_simclr_bit_for_bit(seed, t):
    z1, z2 = rand_pair(b=8, d=5, seed=seed)
    z1.requires_grad_(True)
    hcl = LOSSES["hcl"](z1, z2, temperature=t, beta=0.0, tau_plus=0.0)
    (g_hcl,) = torch.autograd.grad(hcl, z1)
    simclr = LOSSES["simclr"](z1, z2, temperature=t)
    (g_simclr,) = torch.autograd.grad(simclr, z1)
    assert hcl.item() == simclr.item()
    assert torch.equal(g_hcl, g_simclr)


def test_hard_negatives_weigh_more_as_beta_grows():
    # One hard negative (close to the anchor) and easy ones: the loss grows with beta, towards the
    # loss with every negative at the hardest similarity (the weights concentrate on it).
    z1, z2 = rand_pair(b=6, d=8, seed=5)
    values = [
        LOSSES["hcl"](z1, z2, temperature=0.5, beta=b, tau_plus=0.0).item()
        for b in (0.0, 0.5, 1.0, 2.0, 4.0)
    ]
    assert values == sorted(values) and values[-1] > values[0] + 0.05


def test_gradients_are_finite_at_small_temperature():
    z1, z2 = rand_pair(b=16, d=8, seed=1)
    z1.requires_grad_(True)
    loss = LOSSES["hcl"](z1, z2, temperature=0.02, beta=1.0, tau_plus=0.1)
    loss.backward()
    assert math.isfinite(loss.item()) and torch.isfinite(z1.grad).all()


def test_module_defaults_and_errors():
    loss = build_loss("hcl")
    assert isinstance(loss, HCLLoss)
    assert loss.hparams == {"temperature": 0.5, "beta": 1.0, "tau_plus": 0.1}
    assert loss.family is None and loss.negatives == "both"
    with pytest.raises(LossOptionError) as exc:
        build_loss("hcl", tau_plus=1.0)
    assert exc.value.option == "tau_plus" and "[0, 1)" in str(exc.value)
    with pytest.raises(LossOptionError) as exc:
        build_loss("hcl", beta=-1.0)
    assert exc.value.option == "beta"
