"""Queue negatives (``queue=(K1, K2)``, ``--queue K``): the InfoNCE family, hcl and VRN with
stored keys as extra cross-view negatives, against a hand computation and naive loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES, LossOptionError


def angles(*degrees):
    a = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([a.cos(), a.sin()], dim=1)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def unit(x):
    return [np.asarray(r, dtype=float) / np.linalg.norm(r) for r in x.tolist()]


def naive_info(z1, z2, k1, k2, t, c1, c2, psi):
    """Each direction anchor by anchor: psi(c1 sum_cross + c1 sum_queue + c2 sum_within)."""
    u, v, q1, q2 = unit(z1), unit(z2), unit(k1), unit(k2)
    b = len(u)
    total = 0.0
    for a_side, b_side, queue in ((u, v, q2), (v, u, q1)):
        for i in range(b):
            pos = a_side[i] @ b_side[i]
            x = c1 * sum(math.exp((a_side[i] @ b_side[j] - pos) / t) for j in range(b) if j != i)
            x += c1 * sum(math.exp((a_side[i] @ k - pos) / t) for k in queue)
            x += c2 * sum(math.exp((a_side[i] @ a_side[j] - pos) / t) for j in range(b) if j != i)
            total += math.log1p(x) if psi == "log1p" else math.log(x)
    return total / (2 * b)


def test_hand_computation_infonce_with_one_queued_key_per_view():
    # u1 at 0 deg, u2 at 90; v1 at 60, v2 at 180; queued keys: K1 = [45 deg], K2 = [135 deg]; t = 1.
    # Each anchor: log(1 + e^{s_neg - s_pos} + e^{s_queue - s_pos}), anchors of U see K2, of V K1:
    #   u1: pos cos 60, neg u1.v2 = -1,     queue u1.k2 = cos 135
    #   u2: pos cos 90, neg u2.v1 = cos 30, queue u2.k2 = cos 45
    #   v1: pos cos 60, neg v1.u2 = cos 30, queue v1.k1 = cos 15
    #   v2: pos cos 90, neg v2.u1 = -1,     queue v2.k1 = cos 135
    u, v = angles(0, 90), angles(60, 180)
    k1, k2 = angles(45), angles(135)
    c = lambda deg: math.cos(math.radians(deg))  # noqa: E731
    terms = [
        (c(60), -1.0, c(135)),
        (c(90), c(30), c(45)),
        (c(60), c(30), c(15)),
        (c(90), -1.0, c(135)),
    ]
    want = sum(math.log1p(math.exp(n - p) + math.exp(q - p)) for p, n, q in terms) / 4
    assert want == pytest.approx(naive_info(u, v, k1, k2, 1.0, 1, 0, "log1p"), rel=1e-12)
    got = LOSSES["infonce"](u, v, temperature=1.0, queue=(k1, k2)).item()
    assert got == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize(
    "name, c1, c2, psi",
    [("infonce", 1, 0, "log1p"), ("simclr", 1, 1, "log1p"), ("dcl", 1, 1, "log")],
)
def test_the_family_with_a_queue_against_a_loop(name, c1, c2, psi):
    z1, z2 = rand(6, 4, seed=1), rand(6, 4, seed=2)
    k1, k2 = rand(9, 4, seed=3), rand(9, 4, seed=4)
    got = LOSSES[name](z1, z2, temperature=0.4, queue=(k1, k2)).item()
    assert got == pytest.approx(naive_info(z1, z2, k1, k2, 0.4, c1, c2, psi), rel=1e-5)


def test_hcl_with_a_queue_against_a_loop():
    z1, z2 = rand(5, 4, seed=5), rand(5, 4, seed=6)
    k1, k2 = rand(7, 4, seed=7), rand(7, 4, seed=8)
    t, beta, tau = 0.5, 1.0, 0.1
    u, v, q1, q2 = unit(z1), unit(z2), unit(k1), unit(k2)
    b, n = 5, 2 * 5 - 2 + 7
    total = 0.0
    for a_side, b_side, queue in ((u, v, q2), (v, u, q1)):
        for i in range(b):
            pos = math.exp(a_side[i] @ b_side[i] / t)
            negs = [a_side[i] @ b_side[j] for j in range(b) if j != i]
            negs += [a_side[i] @ a_side[j] for j in range(b) if j != i]
            negs += [a_side[i] @ k for k in queue]
            assert len(negs) == n
            mean_w = sum(math.exp(beta * s / t) for s in negs) / n
            r = sum(math.exp(beta * s / t) / mean_w * math.exp(s / t) for s in negs)
            ng = max((r - tau * n * pos) / (1 - tau), n * math.exp(-1 / t))
            total += -math.log(pos / (pos + ng))
    got = LOSSES["hcl"](z1, z2, temperature=t, beta=beta, tau_plus=tau, queue=(k1, k2)).item()
    assert got == pytest.approx(total / (2 * b), rel=1e-5)


def test_vrn_with_a_queue_is_the_mean_over_every_cross_view_negative():
    z1, z2 = rand(4, 3, seed=9), rand(4, 3, seed=10)
    k1, k2 = rand(5, 3, seed=11), rand(5, 3, seed=12)
    u, v, q1, q2 = unit(z1), unit(z2), unit(k1), unit(k2)
    d = -0.25
    terms = [(u[i] @ v[j] - d) ** 2 for i in range(4) for j in range(4) if i != j]
    terms += [(u[i] @ k - d) ** 2 for i in range(4) for k in q2]
    terms += [(v[i] @ k - d) ** 2 for i in range(4) for k in q1]
    assert len(terms) == 4 * 3 + 2 * 4 * 5
    got = LOSSES["vrn"](z1, z2, delta=d, queue=(k1, k2)).item()
    assert got == pytest.approx(sum(terms) / len(terms), rel=1e-5)


def test_far_keys_change_little_and_near_keys_raise_the_loss():
    e1 = torch.zeros(6, 4)
    e1[:, 0] = 1.0
    z1, z2 = e1 + 0.1 * rand(6, 4, seed=1), e1 + 0.1 * rand(6, 4, seed=2)
    base = LOSSES["infonce"](z1, z2, temperature=0.1).item()
    # keys opposite to every anchor: each adds e^{(-1 - pos)/t} ~ e^{-20}, negligible
    far = LOSSES["infonce"](z1, z2, temperature=0.1, queue=(-e1, -e1)).item()
    near = LOSSES["infonce"](z1, z2, temperature=0.1, queue=(z1, z2)).item()
    assert far == pytest.approx(base, abs=1e-6) and near > base + 0.3


def test_losses_without_cross_view_negatives_refuse_a_queue():
    z1, z2 = rand(4, 3), rand(4, 3, seed=1)
    k = rand(5, 3, seed=2)
    for name in ("dhel", "supcon", "sigmoid", "triplet"):
        with pytest.raises(LossOptionError) as exc:
            LOSSES[name](z1, z2, queue=(k, k))
        assert exc.value.option == "queue" and "infonce" in str(exc.value)
    with pytest.raises(ValueError, match="queue must be two"):
        LOSSES["simclr"](z1, z2, queue=(k, k[:, :2]))


def test_gradients_do_not_reach_the_queue_through_detached_keys():
    z1, z2 = rand(4, 3).requires_grad_(), rand(4, 3, seed=1)
    k1, k2 = rand(5, 3, seed=2), rand(5, 3, seed=3)
    LOSSES["simclr"](z1, z2, queue=(k1, k2)).backward()
    assert z1.grad is not None and torch.isfinite(z1.grad).all() and k1.grad is None
