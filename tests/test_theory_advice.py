"""``cl-diag theory`` (issue 34): the sources' predictions and advice before training.

Every number is the closed forms' (one implementation: the same as result.json's theory panel),
and each advice boundary is checked against a free optimisation at a point on each side of it:
the SSEM's collapse threshold alpha_c (supcl), Eq. 10's bias b* and the antipodal boundary
(the cross-view-only sigmoid loss), the within-view remedy and Thm 5.5's band.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import refused

from cl_diag.losses import LOSSES
from cl_diag.measurement.advice import Sizes, advise, alpha_above
from cl_diag.measurement.ssem import (
    collapse_threshold,
    ssem_optimum,
    supcl_free_optimum,
    view_split_threshold,
)
from cl_diag.measurement.theory import (
    antipodal_bias_boundary,
    delta,
    eq10_bias_boundary,
    sigmoid_eq10,
    sigmoid_optimum,
    variance_band,
)

REPO = Path(__file__).resolve().parents[1]


# ---- the boundaries the advice names -----------------------------------------------------------


@pytest.mark.parametrize(("t", "n"), [(0.5, 3), (1.0, 8), (10.0, 8), (5.0, 1024), (40.0, 64)])
def test_eq10_bias_boundary_is_where_eq10_switches(t, n):
    b = eq10_bias_boundary(t, n)
    assert sigmoid_eq10(t, b - 1e-7, n) and not sigmoid_eq10(t, b + 1e-7, n)
    # the optimum is the ETF just above it and over-separated just below
    assert sigmoid_optimum(t, b + 1e-6, n).regime == "etf"
    assert sigmoid_optimum(t, b - 1e-3, n).regime in ("interior", "antipodal")


def test_antipodal_boundary_is_the_ccem_one():
    for t, n in ((1.0, 8), (5.0, 1024)):
        b = antipodal_bias_boundary(t, n)
        assert sigmoid_optimum(t, b - 1e-6, n).regime == "antipodal"
        assert sigmoid_optimum(t, b + 1e-3, n).regime != "antipodal"


def test_alpha_above_is_the_next_round_alpha():
    assert alpha_above(0.2508) == 0.26
    assert alpha_above(0.25) == 0.26  # strictly above: 0.25 itself collapses
    assert alpha_above(0.0) == 0.01


# ---- the two commands --------------------------------------------------------------------


def test_supcl_collapse_advice_and_its_diagram(run_cli, tmp_path):
    args = ("--loss", "supcl", "--alpha", "0.2", "--temperature", "0.3")
    result = run_cli("theory", *args, "--classes", "10", "--per-class", "10", "--out", tmp_path)
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    a_b = collapse_threshold(0.3, 10, 10)
    a_a = collapse_threshold(0.3, 10, 10, variant="A")
    assert f"alpha = 0.2 <= alpha_c = {a_b:.4g} (tau = 0.3, 10 classes x 10 instances" in text
    assert "the optimum collapses every class" in text and "alpha >= 0.26 keeps" in text
    assert f"alpha_c = {a_a:.4g}" in text  # variant A beside it
    assert "proved within a family" in text
    svg = (tmp_path / "phase_supcl.svg").read_bytes()
    ET.fromstring(svg)
    assert (tmp_path / "phase_supcl.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the same setting draws the same bytes
    again = tmp_path / "again"
    assert (
        run_cli("theory", *args, "--classes", "10", "--per-class", "10", "--out", again).code == 0
    )
    assert (again / "phase_supcl.svg").read_bytes() == svg
    assert (again / "phase_supcl.png").read_bytes() == (tmp_path / "phase_supcl.png").read_bytes()


def test_sigmoid_prediction_the_free_embedding_study_measures(run_cli, tmp_path):
    result = run_cli("theory", "--loss", "sigmoid", "--t", "1", "--b", "-1", "--n", "4", "--d", "4")
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    assert "regime antipodal: x* = 0, s_pos* = -1, s_neg* = -1 (delta = -0.3333)" in text
    assert f"b >= {eq10_bias_boundary(1.0, 4):.3g} removes it" in text
    assert "d >= N = 4 — holds" in text
    within = run_cli(
        "theory",
        "--loss",
        "sigmoid",
        "--t",
        "1",
        "--b",
        "-1",
        "--n",
        "4",
        "--d",
        "4",
        "--within-view",
    )
    assert within.code == 0
    assert "the optimum is the simplex ETF for any t and b" in " ".join(within.out.split())


def test_json_gives_every_number_of_the_closed_forms(run_cli):
    result = run_cli(
        "theory", "--loss", "sigmoid", "--t", "1", "--b", "1", "--m", "8", "--n", "1000", "--json"
    )
    assert result.code == 0, result.err
    data = json.loads(result.out)
    batch, full = data["items"]
    assert batch["numbers"]["ccem"] == {
        "N": 8,
        "x_star": sigmoid_optimum(1.0, 1.0, 8).x,
        "s_pos": sigmoid_optimum(1.0, 1.0, 8).s_pos,
        "s_neg": sigmoid_optimum(1.0, 1.0, 8).s_neg,
        "regime": "interior",
    }
    assert batch["numbers"]["eq10"]["holds"] is True and batch["holds"] is None  # d not given
    assert full["numbers"]["ccem"]["N"] == 1000 and full["numbers"]["ccem"]["regime"] == "antipodal"
    assert data["sizes"] == {
        "n": 1000,
        "m": 8,
        "d": None,
        "classes": None,
        "per_class": None,
        "views": 2,
    }


def test_an_infinite_eq10_side_is_null_in_the_json(run_cli):
    # (1 + e^{t/(N-1) + b}) / (1 + e^{t - b}) overflows at b = 1000: the JSON stays JSON
    result = run_cli("theory", "--loss", "sigmoid", "--t", "1", "--b", "1000", "--n", "8", "--json")
    assert result.code == 0, result.err
    (item,) = json.loads(result.out)["items"]
    assert item["numbers"]["eq10"]["lhs"] is None and item["numbers"]["eq10"]["holds"] is False


def test_the_band_advice_of_an_infonce_loss():
    found = advise("simclr", {"temperature": 0.5}, Sizes(n=64, m=16, d=128), vrn=0.0)
    full, band = found.items
    assert full.numbers["s_neg"] == delta(64) and full.holds is True
    lo, hi = variance_band(64, 16)
    assert band.numbers == {"n": 64, "m": 16, "lo": lo, "hi": hi, "within_batch_optimum": delta(16)}
    assert band.holds is True
    assert "m = 64" not in band.advice and "the full batch (m = n = 64) removes it" in band.advice
    with_vrn = advise("simclr", {}, Sizes(n=64, m=16, d=128), vrn=30.0).items[1]
    assert with_vrn.holds is False and "VRN (lambda = 30) shrinks it" in with_vrn.advice


# ---- one implementation: the theory panel of an analysed run says the same ---------------------


@pytest.mark.parametrize(
    "run", ["supcl-collapse/alpha=0.25_seed=1", "supcl-collapse/alpha=1_seed=1"]
)
def test_a_result_json_gives_its_own_theory_panels_numbers(run_cli, run):
    path = REPO / "reports" / run / "analysis" / "result.json"
    panel = json.loads(path.read_text(encoding="utf-8"))["theory"]["ssem"]
    result = run_cli("theory", path, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["loss"] == "supcl" and data["sizes"]["classes"] == 10
    block = data["items"][0]["numbers"]
    assert {k: v for k, v in block.items() if k != "variant_a"} == panel


def test_a_digits_result_gives_its_own_band(run_cli):
    run = REPO / "reports" / "digits-batch-study" / "batch-size=16_vrn=0_seed=11" / "analysis"
    panel = json.loads((run / "result.json").read_text(encoding="utf-8"))["theory"]
    result = run_cli("theory", run, "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert (data["loss"], data["sizes"]["n"], data["sizes"]["m"]) == ("simclr", 1347, 16)
    band = data["items"][1]["numbers"]
    assert {k: v for k, v in band.items() if k != "within_batch_optimum"} == panel["variance_band"]
    assert band["within_batch_optimum"] == panel["within_batch_optimum"]


def test_a_recipe_and_a_checkpoint_give_their_setting(run_cli, tmp_path):
    recipe = run_cli("theory", "simclr-vrn", "--batch-size", "32", "--json")
    assert recipe.code == 0, recipe.err
    data = json.loads(recipe.out)
    assert data["loss"] == "simclr" and data["sizes"]["n"] == 1347 and data["sizes"]["m"] == 32
    assert data["sizes"]["d"] == 128
    trained = run_cli(
        "train",
        "--loss",
        "sigmoid",
        "--bias",
        "2",
        "--epochs",
        "1",
        "--num-samples",
        "64",
        "--batch-size",
        "32",
        "--out",
        tmp_path / "run",
        "--quiet",
    )
    assert trained.code == 0, trained.err
    found = json.loads(run_cli("theory", tmp_path / "run" / "last.pt", "--json").out)
    assert found["loss"] == "sigmoid" and found["settings"]["bias"] == 2.0
    assert (found["sizes"]["n"], found["sizes"]["m"]) == (64, 32)
    # an option given goes over what the file records
    over = json.loads(run_cli("theory", tmp_path / "run" / "last.pt", "--b", "-3", "--json").out)
    assert over["settings"]["bias"] == -3.0


def test_train_prints_the_advice_at_its_start(run_cli, tmp_path):
    common = ("--epochs", "1", "--num-samples", "64", "--batch-size", "32")
    shown = run_cli("train", *common, "--out", tmp_path / "a")
    assert shown.code == 0, shown.err
    first = " ".join(shown.err.split())
    assert first.startswith("theory (Lee et al. 2025 (ICML), Thm 5.5 (Eq. 11)): m = 32 < n = 64")
    quiet = run_cli("train", *common, "--out", tmp_path / "b", "--quiet")
    assert quiet.code == 0 and "theory (" not in quiet.err


def test_the_python_api_is_the_command(tmp_path):
    import cl_diag

    found = cl_diag.theory(
        loss="supcl", alpha=0.5, temperature=0.3, classes=10, per_class=10, out=tmp_path
    )
    opt = ssem_optimum(0.5, 0.3, 10, 10)
    assert found.advice.items[0].numbers["beta_star"] == opt.beta
    assert [p.name for p in found.files] == ["phase_supcl.svg", "phase_supcl.png"]
    assert json.loads(found.to_json())["files"] == [str(p) for p in found.files]


# ---- bad input, and a loss the sources say nothing about ----------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (
            ("--loss", "supcl", "--temperature", "0", "--classes", "2", "--per-class", "2"),
            ["temperature must be", "> 0"],
        ),
        (("--loss", "softmax"), ["unknown loss 'softmax'", "simclr"]),
        (("--loss", "simclr", "--n", "10", "--m", "20"), ["m = 20 exceeds the n = 10"]),
        (("--loss", "simclr", "--n", "1"), ["n must be an integer >= 2"]),
        (("--loss", "supcl", "--alpha", "1.5", "--classes", "2", "--per-class", "2"), ["alpha"]),
        (("--t", "1"), ["No loss", "--loss"]),
        (("--loss", "sigmoid", "--t", "1e308", "--n", "8"), ["beyond what the closed forms"]),
    ],
)
def test_bad_input_is_refused(run_cli, args, fragments):
    refused(run_cli("theory", *args), *fragments)


def test_an_out_that_is_a_file_is_refused_before_any_work(run_cli, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("mine", encoding="utf-8")
    args = ("--loss", "supcl", "--alpha", "0.2", "--temperature", "0.3")
    refused(
        run_cli("theory", *args, "--classes", "2", "--per-class", "2", "--out", afile), "is a file"
    )
    assert afile.read_text(encoding="utf-8") == "mine"


def test_a_recipe_is_checked_as_train_checks_it(run_cli, tmp_path):
    recipe = tmp_path / "bad.toml"
    recipe.write_text("loss = 3\n", encoding="utf-8")
    refused(run_cli("theory", recipe), "loss")


def test_a_loss_without_theory_says_so(run_cli):
    result = run_cli("theory", "--loss", "triplet", "--n", "100")
    assert result.code == 0
    text = " ".join(result.out.split())
    assert "no prediction: the sources make no prediction about the optimum of triplet" in text
    supcl = " ".join(run_cli("theory", "--loss", "supcl").out.split())
    assert "the SSEM needs balanced batches: give --classes" in supcl


# ---- each advice boundary against a free optimisation, a point on each side ---------------------


def _free_pairs(loss, n: int, d: int, steps: int, batches=None, seed: int = 0) -> dict:
    """Two views of n free unit vectors in R^d minimising ``loss`` (Adam, cosine schedule):
    the positive and the cross-view negative similarities at the end."""
    g = torch.Generator().manual_seed(seed)
    p1 = torch.randn(n, d, generator=g, dtype=torch.float64).requires_grad_()
    p2 = torch.randn(n, d, generator=g, dtype=torch.float64).requires_grad_()
    opt = torch.optim.Adam([p1, p2], lr=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        opt.zero_grad()
        value = loss(p1, p2) if batches is None else sum(loss(p1[i], p2[i]) for i in batches)
        value.backward()
        opt.step()
        sched.step()
    u, v = F.normalize(p1.detach(), dim=1), F.normalize(p2.detach(), dim=1)
    off = ~torch.eye(n, dtype=torch.bool)
    return {"pos": (u * v).sum(1), "cross": (u @ v.T)[off]}


def _sigmoid(t: float, b: float, within: bool = False):
    return lambda p, q: LOSSES["sigmoid"](p, q, temperature=t, bias=b, within_view=within)


@pytest.mark.slow
@pytest.mark.parametrize("side", [-0.8, 0.8])
def test_eq10_advice_matches_a_free_optimisation_on_each_side(side):
    n, t = 6, 2.0
    b = eq10_bias_boundary(t, n) + side
    (item,) = advise("sigmoid", {"temperature": t, "bias": b}, Sizes(n=n, d=n)).items
    s = _free_pairs(_sigmoid(t, b), n, n, steps=1500)
    if side < 0:  # the advice: Eq. 10 holds, negatives below delta, at the CCEM's values
        assert item.numbers["eq10"]["holds"] and "over-separates" in item.advice
        assert s["cross"].mean().item() < delta(n) - 0.05
        assert s["cross"].mean().item() == pytest.approx(item.numbers["ccem"]["s_neg"], abs=5e-3)
        assert s["pos"].mean().item() == pytest.approx(item.numbers["ccem"]["s_pos"], abs=5e-3)
    else:  # the advice: Eq. 10 fails, the ETF
        assert not item.numbers["eq10"]["holds"] and "the optimum is the simplex ETF" in item.advice
        assert s["pos"].mean().item() == pytest.approx(1.0, abs=1e-3)
        assert torch.allclose(s["cross"], torch.full_like(s["cross"], delta(n)), atol=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("side", [-0.5, 0.5])
def test_antipodal_advice_matches_a_free_optimisation_on_each_side(side):
    n, t = 6, 1.0
    b = antipodal_bias_boundary(t, n) + side
    assert b < eq10_bias_boundary(t, n)  # both points over-separate
    (item,) = advise("sigmoid", {"temperature": t, "bias": b}, Sizes(n=n, d=n)).items
    s = _free_pairs(_sigmoid(t, b), n, n, steps=1500)
    antipodal = item.numbers["ccem"]["regime"] == "antipodal"
    assert antipodal == (side < 0) and ("every similarity is -1" in item.advice) == (side < 0)
    if side < 0:
        assert torch.allclose(s["pos"], torch.full_like(s["pos"], -1.0), atol=1e-3)
    else:
        assert s["pos"].mean().item() > -1 + 0.1
        assert s["pos"].mean().item() == pytest.approx(item.numbers["ccem"]["s_pos"], abs=5e-3)


@pytest.mark.slow
def test_the_within_view_remedy_matches_a_free_optimisation():
    n, t = 6, 2.0
    b = eq10_bias_boundary(t, n) - 0.8  # over-separated without within-view negatives
    (item,) = advise(
        "sigmoid", {"temperature": t, "bias": b, "within_view": True}, Sizes(n=n, d=n)
    ).items
    assert "simplex ETF for any t and b" in item.prediction
    s = _free_pairs(_sigmoid(t, b, within=True), n, n, steps=1500)
    assert torch.allclose(s["cross"], torch.full_like(s["cross"], delta(n)), atol=1e-3)


@pytest.mark.slow
def test_the_band_advice_matches_a_free_optimisation():
    n, m = 4, 2
    (_, band) = advise("simclr", {"temperature": 0.5}, Sizes(n=n, m=m, d=3)).items
    s = _free_pairs(
        lambda a, b: LOSSES["simclr"](a, b, temperature=0.5), n, 3, 800, batches=[[0, 1], [2, 3]]
    )
    var = s["cross"].var(unbiased=False).item()
    assert band.numbers["lo"] - 1e-4 <= var <= band.numbers["hi"] + 1e-4


def _within_class_similarity(z: np.ndarray, n: int) -> float:
    """Mean cosine of the views of different instances of one class (the SSEM's s_w)."""
    p, mn, _ = z.shape
    flat = z.reshape(p * mn, -1)
    inst = np.tile(np.arange(mn), p)
    same_class = (inst[:, None] // n) == (inst[None, :] // n)
    other = inst[:, None] != inst[None, :]
    return float((flat @ flat.T)[same_class & other].mean())


@pytest.mark.parametrize("side", [-0.15, 0.15])
def test_collapse_advice_matches_a_free_optimisation_on_each_side(side):
    m, n, tau = 2, 2, 1.0
    assert view_split_threshold(tau, m, n) <= 0  # every alpha is in the SSEM's region
    alpha = collapse_threshold(tau, m, n) + side
    item = advise(
        "supcl", {"alpha": alpha, "temperature": tau}, Sizes(classes=m, per_class=n)
    ).items[0]
    free = supcl_free_optimum(alpha, tau, m, n, starts=2)
    s_w = _within_class_similarity(free.embedding, n)
    if side < 0:
        assert item.numbers["regime"] == "collapse" and "collapses every class" in item.advice
        assert s_w == pytest.approx(1.0, abs=1e-4)
    else:
        assert item.numbers["regime"] == "interior" and "instances stay apart" in item.advice
        assert s_w == pytest.approx(item.numbers["predicted"]["s_w"], abs=1e-4)
        assert s_w < 1 - 0.05
    assert math.isfinite(free.loss)


def test_the_readmes_diagram_is_what_the_command_draws():
    from cl_diag.report.phase import ssem_phase

    committed = (REPO / "docs" / "figures" / "phase_supcl.png").read_bytes()
    assert committed == ssem_phase(0.3, 0.2, 10, 10, fmt="png")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/figures/phase_supcl.png)" in readme
    shown = f"alpha_c = {collapse_threshold(0.3, 10, 10):.4g} (tau = 0.3, 10 classes x 10"
    assert shown in " ".join(readme.split())


@pytest.mark.parametrize("alpha", [0.15, 0.5])
def test_region_advice_matches_a_free_optimisation_on_each_side(alpha):
    # at tau = 0.3 on 2 x 2 x 2 the SSEM's region starts at alpha_s = 0.329: below it the free
    # optimum parts the two views of an instance (numerical, docs/ssem.md), above them aligned
    m, n, tau = 2, 2, 0.3
    alpha_s = view_split_threshold(tau, m, n)
    assert 0.15 < alpha_s < 0.5
    region = advise("supcl", {"alpha": alpha, "temperature": tau}, Sizes(classes=m, per_class=n))
    item = region.items[1]
    free = supcl_free_optimum(alpha, tau, m, n, starts=2)
    same_instance = float((free.embedding[0] * free.embedding[1]).sum(-1).mean())
    if alpha < alpha_s:
        assert item.holds is False and "outside the SSEM's region" in item.advice
        assert same_instance < 1 - 0.1  # the views part
    else:
        assert item.holds is True and item.advice is None
        assert same_instance == pytest.approx(1.0, abs=1e-6)
        s_w = _within_class_similarity(free.embedding, n)
        assert s_w == pytest.approx(region.items[0].numbers["predicted"]["s_w"], abs=1e-4)
