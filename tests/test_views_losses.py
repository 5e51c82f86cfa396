"""More than two views (``extra_views``, ``--views V``): the multi-positive forms of simclr,
infonce and supcon, and VRN over every view pair, against a hand computation, a naive loop
and the two-view losses (V = 2)."""

from __future__ import annotations

import math

import pytest
import torch

from cl_diag.losses import LOSSES, LossOptionError, build_loss


def angles(*degrees):
    a = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([a.cos(), a.sin()], dim=1)


def rand_views(v=3, b=5, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, d, generator=g) for _ in range(v)]


def naive(views, t, kind, labels=None):
    terms = naive_terms(views, t, kind, labels)
    return sum(terms) / len(terms)


def naive_terms(views, t, kind, labels=None):
    """Anchor by anchor (view-major order): -(1/|P|) sum_P log(e^{s_ap/t} / sum_A e^{s_ak/t})."""
    z = [torch.nn.functional.normalize(x.double(), dim=1) for x in views]
    nv, b = len(z), z[0].shape[0]
    rows = [(i, a) for i in range(nv) for a in range(b)]  # (view, instance)
    y = list(range(b)) if labels is None else labels.tolist()
    terms = []
    for i, a in rows:
        sim = {(j, c): float(z[i][a] @ z[j][c]) / t for j, c in rows if (j, c) != (i, a)}
        if kind == "simclr":
            cand = list(sim)
            pos = [(j, c) for j, c in sim if c == a]
        elif kind == "infonce":
            cand = [(j, c) for j, c in sim if j != i]
            pos = [(j, c) for j, c in sim if c == a]
        else:  # supcon
            cand = list(sim)
            pos = [(j, c) for j, c in sim if y[c] == y[a]]
        log_den = math.log(sum(math.exp(sim[k]) for k in cand))
        terms.append(-sum(sim[p] - log_den for p in pos) / len(pos))
    return terms


def test_hand_computation_three_views_simclr():
    # B = 2 instances, 3 views in 2-D: instance 0 at 0, 30, 60 deg; instance 1 at 90, 180, 270.
    # Anchor (view 1, instance 0) at 0 deg: positives at 30 and 60 deg (cos 30, cos 60), other
    # candidates at 90, 180, 270 deg (cos 0, -1, 0); t = 1.
    z = [angles(0, 90), angles(30, 180), angles(60, 270)]
    c30, c60 = math.cos(math.pi / 6), 0.5
    den = math.exp(c30) + math.exp(c60) + math.exp(0) + math.exp(-1) + math.exp(0)
    anchor = -0.5 * ((c30 - math.log(den)) + (c60 - math.log(den)))
    assert naive_terms(z, 1.0, "simclr")[0] == pytest.approx(anchor, rel=1e-12)
    got = LOSSES["simclr"](z[0], z[1], temperature=1.0, extra_views=z[2:]).item()
    assert got == pytest.approx(naive(z, 1.0, "simclr"), rel=1e-6)


@pytest.mark.parametrize("kind", ["simclr", "infonce", "supcon"])
@pytest.mark.parametrize("nv", [3, 4])
def test_multi_positive_against_a_naive_loop(kind, nv):
    views = rand_views(v=nv, b=5, d=4, seed=nv)
    labels = torch.tensor([0, 1, 0, 2, 1]) if kind == "supcon" else None
    got = LOSSES[kind](views[0], views[1], labels, temperature=0.5, extra_views=views[2:])
    assert got.item() == pytest.approx(naive(views, 0.5, kind, labels), rel=1e-5)


@pytest.mark.parametrize(
    "name, hp, labels",
    [
        ("simclr", {"temperature": 0.3}, None),
        ("infonce", {"temperature": 0.3}, None),
        ("supcon", {"temperature": 0.3}, torch.tensor([0, 1, 0, 2, 1, 2])),
        ("supcon", {"temperature": 0.3}, None),
        ("vrn", {"delta": -0.2, "power": 2.0}, None),
    ],
)
def test_the_general_form_at_two_views_is_the_two_view_loss(name, hp, labels):
    u, v = (torch.nn.functional.normalize(x, dim=1) for x in rand_views(v=2, b=6, d=5, seed=1))
    loss = build_loss(name, **hp)
    two = loss(u, v, labels).item()
    general = loss._compute_views([u, v], labels, **loss.hparams).item()
    assert general == pytest.approx(two, rel=1e-6)


def test_vrn_over_every_view_pair():
    views = rand_views(v=3, b=4, d=3, seed=2)
    delta = -1 / 3
    got = LOSSES["vrn"](views[0], views[1], delta=delta, extra_views=views[2:]).item()
    z = [torch.nn.functional.normalize(x.double(), dim=1) for x in views]
    terms = [
        (float(z[i][a] @ z[j][c]) - delta) ** 2
        for i in range(3)
        for j in range(3)
        for a in range(4)
        for c in range(4)
        if i != j and a != c
    ]
    assert got == pytest.approx(sum(terms) / len(terms), rel=1e-5)


def test_the_order_of_the_views_does_not_matter():
    views = rand_views(v=4, b=5, d=4, seed=3)
    for name in ("simclr", "infonce", "supcon", "supcl", "vrn"):
        a = LOSSES[name](views[0], views[1], extra_views=views[2:]).item()
        p = [views[2], views[0], views[3], views[1]]
        b = LOSSES[name](p[0], p[1], extra_views=p[2:]).item()
        assert a == pytest.approx(b, rel=1e-5), name


def test_two_view_losses_refuse_more_views():
    views = rand_views(v=3)
    for name in ("dcl", "dhel", "sigmoid", "triplet", "hcl"):
        with pytest.raises(LossOptionError) as exc:
            LOSSES[name](views[0], views[1], extra_views=views[2:])
        assert exc.value.option == "views" and "simclr" in str(exc.value)


def test_a_misshapen_view_is_named():
    views = rand_views(v=3)
    with pytest.raises(ValueError, match="view 3 must be"):
        LOSSES["simclr"](views[0], views[1], extra_views=[views[2][:3]])


def test_gradients_reach_every_view():
    views = [z.requires_grad_() for z in rand_views(v=3)]
    LOSSES["simclr"](views[0], views[1], extra_views=views[2:]).backward()
    assert all(z.grad is not None and z.grad.abs().sum() > 0 for z in views)


@pytest.mark.parametrize("nv", [3, 4])
def test_supcl_with_more_views_between_its_two_limits(nv):
    # alpha = 1 is the multi-positive simclr; in a batch of n = 2 instances per class, supcon
    # averages over S(a) and P(a) together, so it is supcl at alpha = (V - 1) / (V n - 1).
    views = rand_views(v=nv, b=6, d=4, seed=10 + nv)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    z1, z2, rest = views[0], views[1], views[2:]
    simclr = LOSSES["simclr"](z1, z2, temperature=0.4, extra_views=rest).item()
    one = LOSSES["supcl"](z1, z2, labels, temperature=0.4, alpha=1.0, extra_views=rest).item()
    assert one == pytest.approx(simclr, rel=1e-6)
    share = (nv - 1) / (nv * 2 - 1)
    supcon = LOSSES["supcon"](z1, z2, labels, temperature=0.4, extra_views=rest).item()
    mixed = LOSSES["supcl"](z1, z2, labels, temperature=0.4, alpha=share, extra_views=rest)
    assert mixed.item() == pytest.approx(supcon, rel=1e-6)
    # and the naive supcon loop pins the same value independently
    assert supcon == pytest.approx(naive(views, 0.4, "supcon", labels), rel=1e-5)
