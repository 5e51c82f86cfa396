"""The loss library: hand-computed values, independent naive implementations,
closed forms, validation and numerics.

Formulas: Lee, Lim, Lee, Sohn, ICML 2025, Section 3 and App. A.1
(paper-notes sections 2, 3, 5.3); Khosla et al. 2020 for supcon.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES, IndependentlyAdditive, InfoNCEFamily, global_loss
from cl_diag.losses.distributed import gather_batch, global_indices

ALL = sorted(LOSSES)


def angles(*degrees):
    """Unit vectors in 2-D at the given angles (degrees), float64."""
    a = torch.tensor(degrees, dtype=torch.float64) * math.pi / 180
    return torch.stack([a.cos(), a.sin()], dim=1)


def rand_pair(b=6, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)


def sp(x):
    return math.log1p(math.exp(x))


# --------------------------------------------------------------------------
# Hand-computed values: B = 2 in 2-D.
# u1 at 0 deg, u2 at 90 deg, v1 at 60 deg, v2 at 180 deg, so
#   u1.v1 = 1/2, u1.v2 = -1, u2.v1 = sqrt3/2, u2.v2 = 0,
#   u1.u2 = 0,   v1.v2 = cos 120 = -1/2.
# --------------------------------------------------------------------------
U2, V2 = angles(0, 90), angles(60, 180)
R3 = math.sqrt(3) / 2
T = 0.5
E = lambda s: math.exp(s / T)  # noqa: E731


def test_hand_infonce():
    # rows (anchor u_i over v_j) and columns (anchor v_j over u_i)
    row = [-0.5 / T + math.log(E(0.5) + E(-1)), -0 / T + math.log(E(R3) + E(0))]
    col = [-0.5 / T + math.log(E(0.5) + E(R3)), -0 / T + math.log(E(-1) + E(0))]
    want = 0.5 * (sum(row) / 2) + 0.5 * (sum(col) / 2)
    got = LOSSES["infonce"](U2, V2, temperature=T)
    assert got.item() == pytest.approx(want, rel=1e-6)


def test_hand_simclr():
    # anchor: (positive, [negatives]) over the other 2B - 1 = 3 embeddings
    anchors = [
        (0.5, [-1, 0]),  # u1: v1 | v2, u2
        (0.0, [R3, 0]),  # u2: v2 | v1, u1
        (0.5, [R3, -0.5]),  # v1: u1 | u2, v2
        (0.0, [-1, -0.5]),  # v2: u2 | u1, v1
    ]
    want = np.mean([-math.log(E(p) / (E(p) + sum(E(n) for n in ns))) for p, ns in anchors])
    assert LOSSES["simclr"](U2, V2, temperature=T).item() == pytest.approx(want, rel=1e-6)
    # instance-label supcon is the same formula
    assert LOSSES["supcon"](U2, V2, temperature=T).item() == pytest.approx(want, rel=1e-6)


def test_hand_dcl_and_dhel():
    dcl = [(0.5, [-1, 0]), (0.0, [R3, 0]), (0.5, [R3, -0.5]), (0.0, [-1, -0.5])]
    want_dcl = np.mean([-p / T + math.log(sum(E(n) for n in ns)) for p, ns in dcl])
    # DHEL: each anchor only has its one within-view negative
    dhel = [(0.5, 0.0), (0.0, 0.0), (0.5, -0.5), (0.0, -0.5)]
    want_dhel = np.mean([-p / T + n / T for p, n in dhel])
    assert LOSSES["dcl"](U2, V2, temperature=T).item() == pytest.approx(want_dcl, rel=1e-6)
    assert LOSSES["dhel"](U2, V2, temperature=T).item() == pytest.approx(want_dhel, rel=1e-6)


def test_hand_sigmoid():
    t, b = 2.0, 0.5
    pos = (sp(b - t * 0.5) + sp(b - t * 0.0)) / 2
    cross = (sp(t * -1 - b) + sp(t * R3 - b)) / 2  # divided by B, not B(B-1)
    within = (2 * sp(t * 0 - b) + 2 * sp(t * -0.5 - b)) / (2 * 2)
    got = LOSSES["sigmoid"](U2, V2, temperature=t, bias=b)
    got_w = LOSSES["sigmoid"](U2, V2, temperature=t, bias=b, within_view=True)
    assert got.item() == pytest.approx(pos + cross, rel=1e-6)
    assert got_w.item() == pytest.approx(pos + cross + within, rel=1e-6)


def test_hand_spectral_and_vrn():
    spectral = -(0.5 + 0.0) / 2 + ((-1) ** 2 + R3**2) / 2
    assert LOSSES["spectral"](U2, V2).item() == pytest.approx(spectral, rel=1e-6)
    d = -0.25
    assert LOSSES["vrn"](U2, V2, delta=d).item() == pytest.approx(
        ((-1 - d) ** 2 + (R3 - d) ** 2) / 2, rel=1e-6
    )
    assert LOSSES["vrn"](U2, V2, delta=d, power=3).item() == pytest.approx(
        (abs(-1 - d) ** 3 + abs(R3 - d) ** 3) / 2, rel=1e-6
    )


def test_hand_contrastive_and_triplet():
    # pairs over the union (unordered): positives (u1,v1) d=1/2, (u2,v2) d=1;
    # negatives (u1,u2) d=1, (u1,v2) d=2, (u2,v1) d=1-R3, (v1,v2) d=3/2
    m = 1.2
    want = (0.5 + 1) / 2 + (max(0, m - 1) + 0 + (m - (1 - R3)) + 0) / 4
    assert LOSSES["contrastive"](U2, V2, margin=m).item() == pytest.approx(want, rel=1e-6)
    # triplets: anchor -> (d_ap, [d_an]); each anchor has one positive, 2 negatives
    trip = {
        "u1": (0.5, [1, 2]),
        "u2": (1, [1, 1 - R3]),
        "v1": (0.5, [1 - R3, 1.5]),
        "v2": (1, [2, 1.5]),
    }
    mg = 0.3
    viol = [max(0, ap - an + mg) for ap, ans in trip.values() for an in ans]
    assert LOSSES["triplet"](U2, V2, margin=mg, mining="all").item() == pytest.approx(
        np.mean(viol), rel=1e-6
    )
    # no triplet here is semi-hard for margin 0.3 (u2's d_ap = d_an = 1 is a tie, excluded by
    # neither rule robustly, so the semi-hard rule is checked on the tie-free example below)
    hard = [max(0, ap - min(ans) + mg) for ap, ans in trip.values()]
    assert LOSSES["triplet"](U2, V2, margin=mg, mining="batch-hard").item() == pytest.approx(
        np.mean(hard), rel=1e-6
    )


def test_hand_semi_hard():
    # u1 = 0, v1 = 40, u2 = 70, v2 = 180 degrees; margin 0.5. d = 1 - cos(angle difference).
    d = lambda deg: 1 - math.cos(math.radians(deg))  # noqa: E731
    u, v = angles(0, 70), angles(40, 180)
    # anchor: d_ap, {negative: d_an}
    table = {
        "u1": (d(40), [d(70), d(180)]),
        "v1": (d(40), [d(30), d(140)]),
        "u2": (d(110), [d(70), d(30)]),
        "v2": (d(110), [d(180), d(140)]),
    }
    semi = [ap - an + 0.5 for ap, ans in table.values() for an in ans if ap < an < ap + 0.5]
    # exactly (u1, v1, u2) and (v2, u2, v1) qualify
    assert len(semi) == 2
    got = LOSSES["triplet"](u, v, margin=0.5, mining="semi-hard").item()
    assert got == pytest.approx(np.mean(semi), rel=1e-5)


def test_hand_supcon_with_labels():
    # both instances one class: every other embedding is a positive of each anchor
    z = torch.cat([U2, V2])
    s = (z @ z.T).numpy()
    want = 0.0
    for a in range(4):
        others = [k for k in range(4) if k != a]
        lse = math.log(sum(math.exp(s[a, k] / T) for k in others))
        want += -np.mean([s[a, p] / T - lse for p in others])
    got = LOSSES["supcon"](U2, V2, labels=torch.tensor([7, 7]), temperature=T)
    assert got.item() == pytest.approx(want / 4, rel=1e-6)


# --------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------
def etf(n, d):
    """n-point simplex ETF in R^d (d >= n): centred basis vectors, normalised."""
    e = torch.eye(n, d, dtype=torch.float64)
    e = e - e.mean(dim=0, keepdim=True) * (torch.arange(d) < n)
    return torch.nn.functional.normalize(e, dim=1)


def test_etf_helper_is_an_etf():
    z = etf(5, 6)
    g = z @ z.T
    assert torch.allclose(g.diagonal(), torch.ones(5, dtype=torch.float64))
    off = g[~torch.eye(5, dtype=torch.bool)]
    assert torch.allclose(off, torch.full_like(off, -0.25))


@pytest.mark.parametrize("b", [2, 3, 7])
def test_simclr_identical_views_log_2b_minus_1(b):
    z1, _ = rand_pair(b, 5, seed=b)
    # t -> infinity: all 2B-1 logits equal
    assert LOSSES["simclr"](z1, z1, temperature=1e7).item() == pytest.approx(
        math.log(2 * b - 1), rel=1e-5
    )
    # collapsed embeddings: exactly log(2B-1) at any temperature
    same = torch.ones(b, 3)
    assert LOSSES["simclr"](same, same, temperature=0.1).item() == pytest.approx(
        math.log(2 * b - 1), rel=1e-6
    )


def test_closed_forms_on_etf():
    b = 5
    z = etf(b, 6)
    d = -1 / (b - 1)
    assert LOSSES["vrn"](z, z, delta=d).item() == pytest.approx(0.0, abs=1e-12)
    assert LOSSES["vrn"](z, z).item() == pytest.approx(d**2, rel=1e-5)  # default delta = 0
    t = 0.3  # fp32 arithmetic: rel 1e-5; a wrong formula is off by far more
    # SimCLR: each anchor, 2B-2 negatives at d, positive at 1
    assert LOSSES["simclr"](z, z, temperature=t).item() == pytest.approx(
        math.log1p((2 * b - 2) * math.exp((d - 1) / t)), rel=1e-5
    )
    assert LOSSES["infonce"](z, z, temperature=t).item() == pytest.approx(
        math.log1p((b - 1) * math.exp((d - 1) / t)), rel=1e-5
    )
    assert LOSSES["dcl"](z, z, temperature=t).item() == pytest.approx(
        math.log((2 * b - 2) * math.exp((d - 1) / t)), rel=1e-5
    )
    assert LOSSES["dhel"](z, z, temperature=t).item() == pytest.approx(
        math.log((b - 1) * math.exp((d - 1) / t)), rel=1e-5
    )
    assert LOSSES["spectral"](z, z).item() == pytest.approx(-1 + d**2, rel=1e-5)
    tt, bb = 3.0, 0.7
    assert LOSSES["sigmoid"](z, z, temperature=tt, bias=bb).item() == pytest.approx(
        sp(bb - tt) + (b - 1) * sp(tt * d - bb), rel=1e-5
    )


# --------------------------------------------------------------------------
# Independent naive implementations (float64 loops) on random inputs
# --------------------------------------------------------------------------
def _unit(z):
    z = z.double().numpy()
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def naive_info(u, v, c1, c2, psi, t):
    b = len(u)

    def direction(a, o):  # anchors a, their positives o
        tot = 0.0
        for i in range(b):
            x = sum(c1 * math.exp((a[i] @ o[j] - a[i] @ o[i]) / t) for j in range(b) if j != i)
            x += sum(c2 * math.exp((a[i] @ a[j] - a[i] @ o[i]) / t) for j in range(b) if j != i)
            tot += math.log1p(x) if psi == "log1p" else math.log(x)
        return tot / b

    return 0.5 * direction(u, v) + 0.5 * direction(v, u)


def naive_additive(u, v, phi, psi, c1, c2):
    b = len(u)
    pos = -sum(phi(u[i] @ v[i]) for i in range(b)) / b
    pairs = [(i, j) for i in range(b) for j in range(b) if i != j]
    cross = sum(psi(u[i] @ v[j]) for i, j in pairs) / (b * (b - 1))
    within = sum(psi(u[i] @ u[j]) + psi(v[i] @ v[j]) for i, j in pairs) / (2 * b * (b - 1))
    return pos + c1 * cross + c2 * within


def naive_union(u, v, labels):
    z = np.concatenate([u, v])
    y = np.concatenate([labels, labels])
    return z, y, len(z)


def naive_supcon(u, v, labels, t):
    z, y, n = naive_union(u, v, labels)
    tot = 0.0
    for a in range(n):
        den = sum(math.exp(z[a] @ z[k] / t) for k in range(n) if k != a)
        ps = [p for p in range(n) if p != a and y[p] == y[a]]
        tot += -sum(math.log(math.exp(z[a] @ z[p] / t) / den) for p in ps) / len(ps)
    return tot / n


def naive_triplet(u, v, labels, margin, mining):
    z, y, n = naive_union(u, v, labels)
    d = lambda a, b: 1 - z[a] @ z[b]  # noqa: E731
    losses = []
    for a in range(n):
        ps = [p for p in range(n) if p != a and y[p] == y[a]]
        ns = [k for k in range(n) if y[k] != y[a]]
        if mining == "batch-hard":
            if ps and ns:
                losses.append(
                    max(0.0, max(d(a, p) for p in ps) - min(d(a, k) for k in ns) + margin)
                )
            continue
        for p in ps:
            for k in ns:
                if mining == "semi-hard" and not (d(a, p) < d(a, k) < d(a, p) + margin):
                    continue
                losses.append(max(0.0, d(a, p) - d(a, k) + margin))
    return float(np.mean(losses)) if losses else 0.0


def naive_contrastive(u, v, labels, margin):
    z, y, n = naive_union(u, v, labels)
    pos = [1 - z[a] @ z[b] for a in range(n) for b in range(n) if a != b and y[a] == y[b]]
    neg = [max(0.0, margin - (1 - z[a] @ z[b])) for a in range(n) for b in range(n) if y[a] != y[b]]
    return (np.mean(pos) if pos else 0.0) + (np.mean(neg) if neg else 0.0)


def naive_vrn(u, v, delta, p):
    b = len(u)
    return np.mean([abs(u[i] @ v[j] - delta) ** p for i in range(b) for j in range(b) if i != j])


def _sig_phi_psi(t, b_, n):
    return (lambda x: -sp(b_ - t * x)), (lambda x: (n - 1) * sp(t * x - b_))


@pytest.mark.parametrize("seed", [0, 1])
def test_against_naive(seed):
    b = 6
    z1, z2 = rand_pair(b, 4, seed)
    z1 = z1 * 3.0  # unnormalised inputs: the losses normalise
    u, v = _unit(z1), _unit(z2)
    y = np.array([0, 1, 0, 2, 1, 0])
    yt = torch.from_numpy(y)
    t = 0.3
    cases = {
        "infonce": (LOSSES["infonce"](z1, z2, temperature=t), naive_info(u, v, 1, 0, "log1p", t)),
        "simclr": (LOSSES["simclr"](z1, z2, temperature=t), naive_info(u, v, 1, 1, "log1p", t)),
        "dcl": (LOSSES["dcl"](z1, z2, temperature=t), naive_info(u, v, 1, 1, "log", t)),
        "dhel": (LOSSES["dhel"](z1, z2, temperature=t), naive_info(u, v, 0, 1, "log", t)),
        "sigmoid": (
            LOSSES["sigmoid"](z1, z2, temperature=4.0, bias=1.5),
            naive_additive(u, v, *_sig_phi_psi(4.0, 1.5, b), 1, 0),
        ),
        "sigmoid-w": (
            LOSSES["sigmoid"](z1, z2, temperature=4.0, bias=1.5, within_view=True),
            naive_additive(u, v, *_sig_phi_psi(4.0, 1.5, b), 1, 1),
        ),
        "spectral": (
            LOSSES["spectral"](z1, z2),
            naive_additive(u, v, lambda x: x, lambda x: x * x, 1, 0),
        ),
        "vrn": (LOSSES["vrn"](z1, z2, delta=-0.1, power=2), naive_vrn(u, v, -0.1, 2)),
        "vrn-p3": (LOSSES["vrn"](z1, z2, delta=0.05, power=3), naive_vrn(u, v, 0.05, 3)),
        "supcon": (LOSSES["supcon"](z1, z2, labels=yt, temperature=t), naive_supcon(u, v, y, t)),
        "supcon-inst": (
            LOSSES["supcon"](z1, z2, temperature=t),
            naive_supcon(u, v, np.arange(b), t),
        ),
        "contrastive": (
            LOSSES["contrastive"](z1, z2, labels=yt, margin=0.9),
            naive_contrastive(u, v, y, 0.9),
        ),
        "contrastive-inst": (
            LOSSES["contrastive"](z1, z2, margin=1.1),
            naive_contrastive(u, v, np.arange(b), 1.1),
        ),
    }
    for mining in ("all", "semi-hard", "batch-hard"):
        cases[f"triplet-{mining}"] = (
            LOSSES["triplet"](z1, z2, labels=yt, margin=0.4, mining=mining),
            naive_triplet(u, v, y, 0.4, mining),
        )
        cases[f"triplet-{mining}-inst"] = (
            LOSSES["triplet"](z1, z2, margin=0.4, mining=mining),
            naive_triplet(u, v, np.arange(b), 0.4, mining),
        )
    for name, (got, want) in cases.items():
        assert got.dtype == torch.float32 and got.dim() == 0, name
        assert got.item() == pytest.approx(want, rel=2e-5, abs=1e-6), name
    # the semi-hard case must actually have mined something for the test to mean anything
    assert cases["triplet-semi-hard"][1] > 0


def test_triplet_chunking_matches_unchunked(monkeypatch):
    import cl_diag.losses.triplet as tmod

    z1, z2 = rand_pair(7, 3, seed=5)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0])
    full = LOSSES["triplet"](z1, z2, labels=y, margin=0.5, mining="semi-hard")
    monkeypatch.setattr(tmod, "_CHUNK_ELEMENTS", 1)  # one anchor per chunk
    chunked = LOSSES["triplet"](z1, z2, labels=y, margin=0.5, mining="semi-hard")
    assert chunked.item() == pytest.approx(full.item(), rel=1e-6)


def test_no_qualifying_triplet_gives_attached_zero():
    z1 = angles(0, 180).float().requires_grad_()
    z2 = angles(0, 180).float()
    loss = LOSSES["triplet"](z1, z2, margin=0.1, mining="semi-hard")  # d_ap = 0, d_an = 2
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(z1.grad, torch.zeros_like(z1))


# --------------------------------------------------------------------------
# Families: presets, general coefficients, user phi/psi
# --------------------------------------------------------------------------
def test_family_metadata():
    fam = {k: LOSSES[k].family for k in ALL}
    assert fam == {
        "infonce": "info",
        "simclr": "info",
        "dcl": "info",
        "dhel": "info",
        "sigmoid": "ind-add",
        "spectral": "ind-add",
        "triplet": None,
        "contrastive": None,
        "supcon": None,
        "supcl": None,
        "hcl": None,
        "vrn": None,
    }
    coeffs = {k: LOSSES[k].coefficients() for k in ALL}
    assert coeffs == {
        "infonce": (1.0, 0.0),
        "simclr": (1.0, 1.0),
        "dcl": (1.0, 1.0),
        "dhel": (0.0, 1.0),
        "sigmoid": (1.0, 0.0),
        "spectral": (1.0, 0.0),
        "triplet": None,
        "contrastive": None,
        "supcon": None,
        "supcl": None,
        "hcl": None,
        "vrn": None,
    }
    assert LOSSES["sigmoid"].coefficients(within_view=True) == (1.0, 1.0)
    assert (LOSSES["dhel"].c1, LOSSES["dhel"].c2) == (0.0, 1.0)
    assert LOSSES["supcon"].c1 is None
    assert LOSSES["vrn"].negatives == "cross" and LOSSES["dhel"].negatives == "within"
    assert LOSSES["simclr"].psi == "log1p" and LOSSES["dcl"].psi == "log"
    hp = {k: LOSSES[k].defaults for k in ALL}
    assert hp == {
        "infonce": {"temperature": 0.2},
        "simclr": {"temperature": 0.2},
        "dcl": {"temperature": 0.2},
        "dhel": {"temperature": 0.2},
        "sigmoid": {"temperature": 1.0, "bias": -1.0, "within_view": False},
        "spectral": {},
        "triplet": {"margin": 0.2, "mining": "all"},
        "contrastive": {"margin": 1.0},
        "supcon": {"temperature": 0.1},
        "supcl": {"temperature": 0.1, "alpha": 0.5},
        "hcl": {"temperature": 0.5, "beta": 1.0, "tau_plus": 0.1},
        "vrn": {"delta": 0.0, "power": 2.0},
    }
    assert LOSSES["triplet"].hyperparameters[1].choices == ("all", "semi-hard", "batch-hard")
    assert all(h.help for k in ALL for h in LOSSES[k].hyperparameters)


def test_general_info_family_matches_naive():
    z1, z2 = rand_pair(5, 3, seed=3)
    u, v = _unit(z1), _unit(z2)
    for c1, c2, psi in [(0.5, 2.0, "log1p"), (3.0, 0.0, "log"), (0.0, 0.25, "log1p")]:
        got = InfoNCEFamily(c1=c1, c2=c2, psi=psi)(z1, z2, temperature=0.7)
        assert got.item() == pytest.approx(naive_info(u, v, c1, c2, psi, 0.7), rel=2e-5)


def test_presets_are_family_members():
    z1, z2 = rand_pair(5, 3, seed=4)
    for name, (c1, c2, psi) in {
        "infonce": (1, 0, "log1p"),
        "simclr": (1, 1, "log1p"),
        "dcl": (1, 1, "log"),
        "dhel": (0, 1, "log"),
    }.items():
        assert torch.equal(
            LOSSES[name](z1, z2, temperature=0.4),
            InfoNCEFamily(c1, c2, psi)(z1, z2, temperature=0.4),
        )
    t, b, n = 2.0, -0.5, 5
    sig = IndependentlyAdditive(
        phi=lambda x: -torch.nn.functional.softplus(b - t * x),
        psi=lambda x: (n - 1) * torch.nn.functional.softplus(t * x - b),
        c1=1,
        c2=1,
    )
    assert sig(z1, z2).item() == pytest.approx(
        LOSSES["sigmoid"](z1, z2, temperature=t, bias=b, within_view=True).item(), rel=1e-6
    )


def test_user_additive_family_matches_naive():
    z1, z2 = rand_pair(4, 3, seed=6)
    u, v = _unit(z1), _unit(z2)
    loss = IndependentlyAdditive(phi=lambda x: torch.log1p(x + 1.5), psi=torch.exp, c1=0, c2=1)
    want = naive_additive(u, v, lambda x: math.log1p(x + 1.5), math.exp, 0, 1)
    assert loss(z1, z2).item() == pytest.approx(want, rel=2e-5)
    assert loss.family == "ind-add" and loss.coefficients() == (0.0, 1.0)


def test_family_argument_errors():
    with pytest.raises(ValueError, match="psi"):
        InfoNCEFamily(1, 1, psi="exp")
    with pytest.raises(ValueError, match="not both 0"):
        InfoNCEFamily(0, 0)
    with pytest.raises(ValueError, match=">= 0"):
        IndependentlyAdditive(phi=torch.sin, psi=torch.exp, c1=-1, c2=1)
    with pytest.raises(ValueError, match="phi and psi"):
        IndependentlyAdditive(c1=1, c2=0)(*rand_pair(3, 2))


# --------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_shape_errors(name):
    loss = LOSSES[name]
    z1, z2 = rand_pair(4, 3)
    with pytest.raises(ValueError, match="batch of 1"):
        loss(z1[:1], z2[:1])
    with pytest.raises(ValueError, match="same shape"):
        loss(z1, z2[:3])
    with pytest.raises(ValueError, match="same shape"):
        loss(z1, torch.randn(4, 5))
    with pytest.raises(ValueError, match="2-D"):
        loss(z1[0], z2[0])
    with pytest.raises(ValueError, match="labels"):
        loss(z1, z2, labels=torch.tensor([0, 1, 0]))
    with pytest.raises(ValueError, match="integers"):
        loss(z1, z2, labels=torch.tensor([0.0, 1.0, 0.0, 1.0]))
    with pytest.raises(ValueError, match="does not take bogus; its hyper-parameters are"):
        loss(z1, z2, bogus=1)


def test_unknown_kwarg_message_names_accepted_ones():
    with pytest.raises(
        ValueError,
        match=r"sigmoid does not take margin; its hyper-parameters are: "
        r"temperature, bias, within_view",
    ):
        LOSSES["sigmoid"](*rand_pair(), margin=1.0)
    with pytest.raises(ValueError, match="hyper-parameters are: none"):
        LOSSES["spectral"](*rand_pair(), temperature=0.1)


@pytest.mark.parametrize(
    "name", ["infonce", "simclr", "dcl", "dhel", "sigmoid", "supcon", "supcl", "hcl"]
)
@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), float("inf")])
def test_non_positive_temperature(name, bad):
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        LOSSES[name](*rand_pair(), temperature=bad)


def test_value_checks():
    z = rand_pair()
    with pytest.raises(ValueError, match="mining='hard' is not one of"):
        LOSSES["triplet"](*z, mining="hard")
    with pytest.raises(ValueError, match="margin must be a finite number >= 0"):
        LOSSES["contrastive"](*z, margin=-1.0)
    with pytest.raises(ValueError, match="within_view must be True or False"):
        LOSSES["sigmoid"](*z, within_view=1)
    with pytest.raises(ValueError, match="power must be a finite number >= 1"):
        LOSSES["vrn"](*z, power=0.5)
    with pytest.raises(ValueError, match=r"delta must lie in \[-1, 1\]"):
        LOSSES["vrn"](*z, delta=-2.0)
    with pytest.raises(ValueError, match="temperature must be a number"):
        LOSSES["simclr"](*z, temperature="0.1")
    # ints are accepted where floats are expected
    assert (
        LOSSES["simclr"](*z, temperature=1).item() == LOSSES["simclr"](*z, temperature=1.0).item()
    )


# --------------------------------------------------------------------------
# Numerics
# --------------------------------------------------------------------------
HARD = {
    "infonce": {"temperature": 0.01},
    "simclr": {"temperature": 0.01},
    "dcl": {"temperature": 0.01},
    "dhel": {"temperature": 0.01},
    "supcon": {"temperature": 0.01},
    "supcl": {"temperature": 0.01, "alpha": 0.3},
    "hcl": {"temperature": 0.01, "beta": 1.0, "tau_plus": 0.1},
    "sigmoid": {"temperature": 100.0, "bias": 10.0, "within_view": True},
    "spectral": {},
    "vrn": {"delta": -0.01},
    "triplet": {"mining": "batch-hard"},
    "contrastive": {},
}


@pytest.mark.parametrize("name", ALL)
def test_finite_at_small_temperature_and_large_norms(name):
    z1, z2 = rand_pair(16, 8, seed=9)
    z1 = (z1 * 1e3).requires_grad_()
    z2 = (z2 * 1e3).requires_grad_()
    y = torch.arange(16) % 3
    loss = LOSSES[name](z1, z2, labels=y, **HARD[name])
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(z1.grad).all() and torch.isfinite(z2.grad).all()
    assert z1.grad.abs().sum() > 0


def test_large_logits_match_float64_reference():
    # logits of +-100: a naive exp would overflow float32; log-sum-exp does not
    z1, z2 = rand_pair(5, 3, seed=11)
    u, v = _unit(z1), _unit(z2)
    got = LOSSES["dcl"](z1, z2, temperature=0.01).item()
    want = naive_info(u, v, 1, 1, "log", 0.01)
    assert got == pytest.approx(want, rel=1e-4)


@pytest.mark.parametrize("name", ALL)
def test_fp32_under_autocast(name):
    z1, z2 = rand_pair(8, 16, seed=2)
    z1, z2 = z1.bfloat16(), z2.bfloat16()
    y = torch.arange(8) % 3
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = LOSSES[name](z1, z2, labels=y)
    outside = LOSSES[name](z1.float(), z2.float(), labels=y)
    assert inside.dtype == torch.float32
    # a bf16 matmul would differ at the 1e-2 level
    assert inside.item() == pytest.approx(outside.item(), rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("name", ALL)
def test_gradient_matches_float64_finite_difference(name):
    # autograd through normalisation and masks agrees with central differences
    z1, z2 = rand_pair(4, 3, seed=13)
    y = torch.tensor([0, 1, 0, 1])
    hp = {"triplet": {"mining": "all", "margin": 1.5}}.get(name, {})
    x = z1.clone().requires_grad_()
    LOSSES[name](x, z2, labels=y, **hp).backward()
    h = 1e-2
    for idx in [(0, 0), (2, 1), (3, 2)]:
        zp, zm = z1.clone(), z1.clone()
        zp[idx] += h
        zm[idx] -= h
        fd = (
            LOSSES[name](zp, z2, labels=y, **hp) - LOSSES[name](zm, z2, labels=y, **hp)
        ).item() / (2 * h)
        assert x.grad[idx].item() == pytest.approx(fd, rel=2e-2, abs=2e-3), (name, idx)


# --------------------------------------------------------------------------
# Distributed helpers without a process group (the two-process test is
# tests/test_distributed_losses.py)
# --------------------------------------------------------------------------
def test_distributed_helpers_are_noops_single_process():
    z1, z2 = rand_pair(5, 3)
    y = torch.arange(5) % 2
    g = gather_batch(z1, z2, y)
    assert g.z1 is z1 and g.z2 is z2 and torch.equal(g.labels, y)
    assert g.index.tolist() == [0, 1, 2, 3, 4]
    assert global_indices(3).tolist() == [0, 1, 2]
    for name in ALL:
        assert torch.equal(global_loss(LOSSES[name], z1, z2, y), LOSSES[name](z1, z2, y))
    with pytest.raises(ValueError, match="does not take"):
        global_loss(LOSSES["vrn"], z1, z2, temperature=0.1)
