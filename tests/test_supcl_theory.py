"""SSEM closed forms of cl_diag.measurement.theory (paper-notes 11.3): the supcl loss on the
simplex-to-simplex embedding model, the collapse threshold alpha_c and the optimum beta*; and
where the SSEM is the optimum of the loss (docs/ssem.md): the split-view family, the threshold
alpha_s below which the views of an instance part, and free optimisation that checks both."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES
from cl_diag.measurement.ssem import (
    collapse_threshold,
    split_ssem_embedding,
    split_ssem_loss,
    split_ssem_optimum,
    split_ssem_similarities,
    ssem_embedding,
    ssem_loss,
    ssem_optimum,
    ssem_similarities,
    supcl_balanced_loss,
    supcl_free_optimum,
    view_split_threshold,
)
from cl_diag.measurement.theory import ssem_panel
from cl_diag.runconfig import RunConfig

REPO = Path(__file__).resolve().parents[1]

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


# ---- where the SSEM is the optimum of variant B (docs/ssem.md) --------------------------------

#: a free optimum that reaches a closed form's loss lies within this of it (L-BFGS tolerances
#: leave ~1e-9; the split-view optimum's nested scalar search ~1e-12)
EPSILON = 1e-6


def _supcl(views: np.ndarray, alpha: float, tau: float, n: int) -> float:
    """The torch ``supcl`` loss of p views (p, m n, d), instance c*n + i of class c."""
    z = [torch.tensor(v) for v in views]
    y = torch.arange(views.shape[1]) // n
    loss = LOSSES["supcl"](z[0], z[1], labels=y, extra_views=z[2:], temperature=tau, alpha=alpha)
    return float(loss)


@pytest.mark.parametrize("p", [2, 3])
def test_numpy_loss_is_the_torch_loss_and_its_gradient_the_finite_difference(p):
    rng = np.random.default_rng(p)
    z = rng.standard_normal((p, 12, 7))
    z /= np.linalg.norm(z, axis=2, keepdims=True)
    loss, grad = supcl_balanced_loss(z, 0.3, 0.4, 3)
    assert loss == pytest.approx(_supcl(z, 0.3, 0.4, 3), rel=1e-6)
    step = rng.standard_normal(z.shape)
    h = 1e-6
    up, down = (
        supcl_balanced_loss(z + h * step, 0.3, 0.4, 3),
        supcl_balanced_loss(z - h * step, 0.3, 0.4, 3),
    )
    assert (up[0] - down[0]) / (2 * h) == pytest.approx(float((grad * step).sum()), rel=1e-6)


@pytest.mark.parametrize("p", [2, 3])
@pytest.mark.parametrize(("beta", "delta"), [(0.7, 0.0), (0.5, 0.2), (0.9, 0.1), (0.0, 1.0)])
def test_split_family_construction_has_its_similarities_and_loss(p, beta, delta):
    m, n, alpha, tau = 3, 4, 0.3, 0.5
    z = split_ssem_embedding(beta, delta, m, n, p)
    assert z.shape == (p, m * n, m * n * p)
    s_o, s_w, s_b = split_ssem_similarities(beta, delta, m, n, p)
    flat = z.reshape(p * m * n, -1)
    gram = flat @ flat.T
    inst = np.tile(np.arange(m * n), p)
    same_inst = (inst[:, None] == inst[None, :]) & ~np.eye(p * m * n, dtype=bool)
    same_class = (inst[:, None] // n == inst[None, :] // n) & (inst[:, None] != inst[None, :])
    assert np.allclose(np.diag(gram), 1.0)
    assert np.allclose(gram[same_inst], s_o) and np.allclose(gram[same_class], s_w)
    assert np.allclose(gram[inst[:, None] // n != inst[None, :] // n], s_b)
    got = split_ssem_loss(beta, delta, alpha, tau, m, n, p)
    assert got == pytest.approx(_supcl(z, alpha, tau, n), rel=1e-6)
    if delta == 0.0:
        assert got == pytest.approx(ssem_loss(beta, alpha, tau, m, n, p), rel=1e-12)


def test_view_split_threshold_by_hand():
    # (m, n, p, tau) = (4, 3, 2, 0.2): rho = e^{-4/(3*0.2)}; alpha_s = (1 - 24 rho)/(5 + 18 rho)
    rho = math.exp(-4 / 0.6)
    assert view_split_threshold(0.2, 4, 3) == pytest.approx((1 - 24 * rho) / (5 + 18 * rho))
    assert view_split_threshold(0.2, 4, 3) == pytest.approx(0.193007099, abs=1e-9)
    assert view_split_threshold(0.2, 3, 4) == pytest.approx(0.140782877, abs=1e-9)
    assert view_split_threshold(0.15, 10, 10) == pytest.approx(0.045980525, abs=1e-9)
    # p = 3: (p-1)(1 - mnp rho)/(np - 1 + (m-1) np rho)
    rho = math.exp(-3 / (2 * 0.2))
    want = 2 * (1 - 36 * rho) / (11 + 2 * 12 * rho)
    assert view_split_threshold(0.2, 3, 4, 3) == pytest.approx(want)
    # alpha_s <= 0 exactly when m n p rho >= 1: tau >= m / ((m-1) log(m n p))
    edge = 10 / (9 * math.log(200))
    assert view_split_threshold(edge, 10, 10) == pytest.approx(0.0, abs=1e-12)
    assert view_split_threshold(edge * 1.01, 10, 10) < 0 < view_split_threshold(edge * 0.99, 10, 10)
    # the collapse window alpha_s <= alpha <= alpha_c is never empty; both tend to 1/(2n-1)
    for tau in (0.05, 0.2, 1.0):
        assert view_split_threshold(tau, 4, 3) < collapse_threshold(tau, 4, 3)
    assert view_split_threshold(1e-3, 4, 3) == pytest.approx(1 / 5, rel=1e-9)


@pytest.mark.parametrize(("m", "n", "tau"), [(4, 3, 0.2), (3, 4, 0.2), (10, 10, 0.15), (3, 4, 0.1)])
def test_split_views_beat_the_ssem_exactly_below_alpha_s(m, n, tau):
    a_s = view_split_threshold(tau, m, n)
    below = split_ssem_optimum(a_s - 1e-3, tau, m, n)
    assert below.delta > 1e-5 and below.loss < ssem_loss(
        ssem_optimum(a_s - 1e-3, tau, m, n).beta, a_s - 1e-3, tau, m, n
    )
    window = split_ssem_optimum(0.5 * (a_s + collapse_threshold(tau, m, n)), tau, m, n)
    assert window.delta == 0.0 and window.beta == 1.0  # alpha_s < alpha < alpha_c: collapse
    for alpha in (0.5, 0.9, 1.0):  # interior SSEM optima pass the test (alpha > alpha_c)
        opt = split_ssem_optimum(alpha, tau, m, n)
        assert opt.delta == 0.0 and opt.beta == ssem_optimum(alpha, tau, m, n).beta


#: issue 23's counterexamples (m, n, tau, alpha): the SSEM's optimal loss, and the split-view
#: optimum's loss, beta and delta (gamma = 0: no instance offsets); free optimisation reached
#: the same loss to 1e-9 (docs/ssem-region.csv)
COUNTEREXAMPLES = [
    ((4, 3, 0.2, 0.15), 1.614008931, 1.608326718, 0.945953, 0.054047),
    ((3, 4, 0.2, 0.1), 1.947173543, 1.940023903, 0.926910, 0.073090),
    ((10, 10, 0.15, 0.0), 2.950170601, 2.928504295, 0.850144, 0.149856),
]


@pytest.mark.parametrize(("point", "ssem", "split", "beta", "delta"), COUNTEREXAMPLES)
def test_issue_23_counterexamples_lie_outside_the_region(point, ssem, split, beta, delta):
    m, n, tau, alpha = point
    assert alpha < view_split_threshold(tau, m, n)
    assert ssem_loss(ssem_optimum(alpha, tau, m, n).beta, alpha, tau, m, n) == pytest.approx(
        ssem, abs=1e-9
    )
    opt = split_ssem_optimum(alpha, tau, m, n)
    assert opt.loss == pytest.approx(split, abs=1e-9)
    assert (opt.beta, opt.delta) == pytest.approx((beta, delta), abs=1e-6)
    assert opt.gamma == pytest.approx(0.0, abs=1e-9)
    # the configuration itself, through the torch loss: an explicit point below the SSEM
    z = split_ssem_embedding(opt.beta, opt.delta, m, n)
    assert _supcl(z, alpha, tau, n) == pytest.approx(split, abs=1e-5)
    assert ssem - split > 5e-3


@pytest.mark.parametrize(
    ("point", "ssem", "split"), [(c[0], c[1], c[2]) for c in COUNTEREXAMPLES[:2]]
)
def test_free_optimisation_leaves_the_ssem_outside_the_region(point, ssem, split):
    m, n, tau, alpha = point
    free = supcl_free_optimum(alpha, tau, m, n, starts=1)
    assert free.loss == pytest.approx(split, abs=EPSILON)
    assert ssem - free.loss > 5e-3  # the issue's 1.608 < 1.614 at (4, 3, 0.2, 0.15)
    assert free.embedding.shape == (2, m * n, 2 * m * n)
    assert np.allclose(np.linalg.norm(free.embedding, axis=2), 1.0)


@pytest.mark.parametrize(
    ("m", "n", "tau", "alpha"),
    [(3, 4, 0.5, 0.5), (4, 3, 0.2, 0.2), (3, 4, 0.2, 0.142), (2, 3, 1.0, 0.0)],
)
def test_free_optimisation_finds_the_ssem_inside_the_region(m, n, tau, alpha):
    # (4, 3, 0.2, 0.2) and (3, 4, 0.2, 0.142) sit in the collapse window alpha_s <= alpha <=
    # alpha_c; (2, 3, 1.0, 0) has alpha_s < 0
    assert alpha >= view_split_threshold(tau, m, n)
    opt = ssem_optimum(alpha, tau, m, n)
    free = supcl_free_optimum(alpha, tau, m, n, starts=1)
    assert free.loss == pytest.approx(ssem_loss(opt.beta, alpha, tau, m, n), abs=EPSILON)


def _evidence() -> list[dict[str, str]]:
    with (REPO / "docs" / "ssem-region.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_committed_grid_evidence_supports_the_region():
    # tools/ssem_region.py wrote docs/ssem-region.csv by free optimisation over the grid G of
    # docs/ssem.md; its closed-form columns are recomputed here, its free losses read
    rows = _evidence()
    assert len(rows) >= 150
    inside = outside = 0
    for r in rows:
        m, n, p = int(r["m"]), int(r["n"]), int(r["p"])
        tau, alpha, free = float(r["tau"]), float(r["alpha"]), float(r["free_loss"])
        a_s = view_split_threshold(tau, m, n, p)
        assert float(r["alpha_s"]) == pytest.approx(a_s, abs=1e-9)
        ssem = ssem_loss(ssem_optimum(alpha, tau, m, n, p).beta, alpha, tau, m, n, p)
        split = split_ssem_optimum(alpha, tau, m, n, p).loss
        assert free >= split - EPSILON, r  # nothing below the split-view optimum was found
        if alpha >= a_s:
            inside += 1
            assert free == pytest.approx(ssem, abs=EPSILON), r
        else:
            outside += 1
            assert free == pytest.approx(split, abs=EPSILON) and split < ssem, r
    assert inside >= 100 and outside >= 30


@pytest.mark.slow
@pytest.mark.parametrize(("m", "n"), [(2, 2), (2, 3), (3, 2)])
@pytest.mark.parametrize("tau", [0.2, 0.3])
def test_free_optimisation_matches_the_region_on_a_grid(m, n, tau):
    # tau = 0.1 passes too but L-BFGS needs minutes a point there (docs/ssem-region.csv has it)
    a_s, a_c = view_split_threshold(tau, m, n), collapse_threshold(tau, m, n)
    for alpha in (0.0, a_s - 0.03, 0.5 * (a_s + a_c), a_c + 0.05, 0.7):
        if not 0.0 <= alpha <= 1.0:
            continue
        free = supcl_free_optimum(alpha, tau, m, n, starts=2).loss
        ssem = ssem_loss(ssem_optimum(alpha, tau, m, n).beta, alpha, tau, m, n)
        split = split_ssem_optimum(alpha, tau, m, n).loss
        if alpha >= a_s:
            assert free == pytest.approx(ssem, abs=EPSILON), alpha
        else:
            assert free == pytest.approx(split, abs=EPSILON) and split < ssem - 1e-5, alpha


@pytest.mark.parametrize(
    ("m", "batch", "tau", "alpha", "outside"),
    [(4, 12, 0.2, 0.15, True), (4, 12, 0.2, 0.2, False), (10, 100, 0.3, 0.0, False)],
)
def test_panel_states_the_region(m, batch, tau, alpha, outside):
    config = RunConfig(batch_size=batch, balanced_batch=True, classes_per_batch=m)
    block, sentence = ssem_panel(config, {"alpha": alpha, "temperature": tau}, 2 * batch)
    assert block is not None
    assert block.alpha_split == pytest.approx(view_split_threshold(tau, m, batch // m))
    assert block.outside_ssem_region is outside
    if outside:
        assert "outside the SSEM's region" in sentence and "alpha_s = 0.193" in sentence
    else:
        assert "the SSEM is the optimum for alpha >= alpha_s" in sentence


def test_region_functions_refuse_bad_arguments():
    with pytest.raises(ValueError, match="tau"):
        view_split_threshold(0.0, 3, 4)
    with pytest.raises(ValueError, match="beta and delta"):
        split_ssem_similarities(0.8, 0.3, 3, 4)
    with pytest.raises(ValueError, match="alpha"):
        split_ssem_optimum(-0.1, 0.5, 3, 4)
    with pytest.raises(ValueError, match="starts"):
        supcl_free_optimum(0.5, 0.5, 3, 4, starts=0)


def test_report_notes_a_run_outside_the_region_also_from_an_older_result():
    from cl_diag.report.document import Note
    from cl_diag.report.theory_section import ssem_blocks

    config = RunConfig(batch_size=12, balanced_batch=True, classes_per_batch=4)
    block, _ = ssem_panel(config, {"alpha": 0.15, "temperature": 0.2}, 24)
    assert block is not None
    # an older result recorded neither alpha_split nor outside_ssem_region: recomputed
    older = replace(block, alpha_split=None, outside_ssem_region=None)
    for ssem in (block, older):
        notes = [b for b in ssem_blocks(None, ssem, None) if isinstance(b, Note)]  # type: ignore[arg-type]
        assert len(notes) == 1 and "α = 0.15 < α_s = 0.193" in notes[0].text
    inside, _ = ssem_panel(config, {"alpha": 0.2, "temperature": 0.2}, 24)
    assert inside is not None and not any(
        isinstance(b, Note)
        for b in ssem_blocks(None, inside, None)  # type: ignore[arg-type]
    )


def test_the_other_variant_is_computed_beside_the_recorded_one():
    # issue 32.5: at the reference study's (m, n, p, tau) = (10, 10, 2, 0.3) alpha_c is 0.2508
    # under variant B (the supcl loss) and 0.2815 under variant A (self kept)
    from cl_diag.measurement.ssem import ssem_other_variant
    from cl_diag.result import Ssem

    block = Ssem.from_dict({"alpha": 0.3, "tau": 0.3, "m": 10, "n": 10, "p": 2, "variant": "B"})
    name, other = ssem_other_variant(block)
    assert name == "A" and other.alpha_c == pytest.approx(0.2815, abs=5e-5)
    assert collapse_threshold(0.3, 10, 10) == pytest.approx(0.2508, abs=5e-5)
    # k_self = p under A: the closed form with k = 2
    rho = math.exp(-10 / (9 * 0.3))
    assert other.alpha_c == pytest.approx(1 - 9 * 2 * (1 - rho) / (2 + 18 + 9 * 10 * 2 * rho))
    assert other.regime == "interior" and 0 < other.within_class_variance < 0.0598
    back = ssem_other_variant(Ssem.from_dict({**block.to_dict(), "variant": "A"}))
    assert back is not None and back[0] == "B"
    assert ssem_other_variant(Ssem.from_dict({"alpha": 0.3})) is None
