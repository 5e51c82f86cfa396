"""The ``supcl`` loss (issue 14, section 1): a hand computation, a naive reference, and its
limits against ``simclr`` and ``supcon``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES, LossOptionError, SupCLLoss, build_loss


def rand_pair(b=6, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)


def _unit(x: torch.Tensor) -> np.ndarray:
    x = x.double().numpy()
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def naive_supcl(u, v, labels, t, alpha):
    """Variant B rows, written out pair by pair in float64 (paper-notes 11.3)."""
    z = np.concatenate([u, v])
    y = np.concatenate([labels, labels])
    inst = np.concatenate([np.arange(len(u)), np.arange(len(u))])
    n = len(z)
    total = 0.0
    for a in range(n):
        den = sum(math.exp(z[a] @ z[k] / t) for k in range(n) if k != a)

        def log_p(k, a=a, den=den):
            return z[a] @ z[k] / t - math.log(den)

        own = [k for k in range(n) if k != a and inst[k] == inst[a]]
        sup = [k for k in range(n) if y[k] == y[a] and inst[k] != inst[a]]
        self_term = -sum(log_p(k) for k in own) / len(own)
        if sup:
            sup_term = -sum(log_p(k) for k in sup) / len(sup)
            total += (1 - alpha) * sup_term + alpha * self_term
        else:
            total += self_term
    return total / n


def test_hand_computation_two_instances_of_one_class():
    # z = [e1, e2, e1, e2], one class. Anchor e1: the other view e1 (s = 1) and the two e2
    # (s = 0) in the denominator D = e^{1/t} + 2; S = {e1}, P = {e2, e2}. So
    # l = (1 - alpha) log D + alpha (log D - 1/t) = log D - alpha / t for every anchor.
    z = torch.eye(2, 4)
    y = torch.tensor([3, 3])
    for t, alpha in ((0.5, 0.0), (0.5, 0.3), (0.2, 1.0), (1.0, 0.75)):
        want = math.log(math.exp(1 / t) + 2) - alpha / t
        got = LOSSES["supcl"](z, z, labels=y, temperature=t, alpha=alpha)
        # float32 logits: log D - 1/t cancels, so the error is absolute (~1e-7)
        assert got.item() == pytest.approx(want, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.5, 1.0])
def test_matches_the_naive_formula(seed, alpha):
    z1, z2 = rand_pair(9, 4, seed=seed)
    # class 2 has one instance: its anchors keep the L_self term alone
    y = np.array([0, 1, 0, 1, 0, 2, 1, 3, 3])
    got = LOSSES["supcl"](z1, z2, labels=torch.tensor(y), temperature=0.3, alpha=alpha)
    want = naive_supcl(_unit(z1), _unit(z2), y, 0.3, alpha)
    assert got.item() == pytest.approx(want, rel=2e-6)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("t", [0.05, 0.2, 1.0])
def test_alpha_one_is_simclr(seed, t):
    z1, z2 = rand_pair(16, 8, seed=seed)
    y = torch.arange(16) % 4
    got = LOSSES["supcl"](z1, z2, labels=y, temperature=t, alpha=1.0)
    want = LOSSES["simclr"](z1, z2, temperature=t)
    # the same number computed along two paths: equal to float32 rounding
    assert got.item() == pytest.approx(want.item(), rel=2e-6, abs=1e-6)
    # and the gradient too
    a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    LOSSES["supcl"](a, b, labels=y, temperature=t, alpha=1.0).backward()
    c, d = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    LOSSES["simclr"](c, d, temperature=t).backward()
    assert torch.allclose(a.grad, c.grad, rtol=1e-4, atol=1e-6)
    assert torch.allclose(b.grad, d.grad, rtol=1e-4, atol=1e-6)


def test_without_labels_every_alpha_is_simclr_and_supcon():
    z1, z2 = rand_pair(7, 3, seed=4)
    simclr = LOSSES["simclr"](z1, z2, temperature=0.4).item()
    for alpha in (0.0, 0.4, 1.0):
        assert LOSSES["supcl"](z1, z2, temperature=0.4, alpha=alpha).item() == pytest.approx(
            simclr, rel=2e-6
        )
    assert LOSSES["supcon"](z1, z2, temperature=0.4).item() == pytest.approx(simclr, rel=2e-6)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_supcon_is_supcl_at_alpha_one_over_2n_minus_1_in_a_balanced_batch(n):
    # SupCon averages over S(a) (1 view) and P(a) (2(n - 1) views) together:
    # (1 * mean_S + 2(n-1) * mean_P) / (2n - 1), i.e. supcl at alpha = 1/(2n - 1).
    m = 3
    z1, z2 = rand_pair(m * n, 6, seed=n)
    y = torch.arange(m * n) % m
    supcon = LOSSES["supcon"](z1, z2, labels=y, temperature=0.25).item()
    at = LOSSES["supcl"](z1, z2, labels=y, temperature=0.25, alpha=1 / (2 * n - 1)).item()
    assert at == pytest.approx(supcon, rel=2e-6)
    # ... and not at alpha = 0: there the same-instance view is no positive at all
    at_zero = LOSSES["supcl"](z1, z2, labels=y, temperature=0.25, alpha=0.0).item()
    assert abs(at_zero - supcon) > 1e-3


def test_alpha_zero_ignores_the_same_instance_view_as_a_positive():
    # Moving a view onto its own instance's other view changes L_self only; at alpha = 0 the
    # loss still changes (the pair sits in every denominator), but by less than at alpha = 1.
    z1, z2 = rand_pair(6, 4, seed=8)
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    far = LOSSES["supcl"](z1, z2, labels=y, temperature=0.5, alpha=0.0).item()
    near = LOSSES["supcl"](z1, z1.clone(), labels=y, temperature=0.5, alpha=0.0).item()
    want_far = naive_supcl(_unit(z1), _unit(z2), y.numpy(), 0.5, 0.0)
    want_near = naive_supcl(_unit(z1), _unit(z1), y.numpy(), 0.5, 0.0)
    assert far == pytest.approx(want_far, rel=2e-6) and near == pytest.approx(want_near, rel=2e-6)


def test_options_are_checked_once_with_named_errors():
    with pytest.raises(LossOptionError, match=r"alpha must lie in \[0, 1\]") as err:
        build_loss("supcl", alpha=1.5)
    assert err.value.option == "alpha" and err.value.loss == "supcl"
    with pytest.raises(LossOptionError, match="temperature must be a finite number > 0"):
        SupCLLoss(temperature=0.0)
    with pytest.raises(LossOptionError, match="alpha must lie"):
        LOSSES["supcl"](*rand_pair(), alpha=float("nan"))
    loss = build_loss("supcl", temperature=0.2, alpha=0.25)
    assert loss.hparams == {"temperature": 0.2, "alpha": 0.25}
    assert LOSSES["supcl"].hparams == {"temperature": 0.1, "alpha": 0.5}
    assert LOSSES["supcl"].uses_labels and LOSSES["supcl"].family is None
