"""The claims registry against result sets where the truth is known (issue 21).

Every prediction of the registry has a case here: a builder of hand-made runs whose per-seed
effect on the claim's analysis scale is exactly ``shift + scale * NOISE[seed]`` (a paired
difference, a deviation from the claim's reference, or a slope with the same noise at every
level), and a way to put the same runs outside the source's scope. The generic tests check,
for each: a large true effect is supported, a null effect measured precisely not borne out (a
directional claim), a null effect measured noisily inconclusive, a reversed effect
contradicted, an effect whose interval ends at the claimed size fragile (it replicates about
half the time), out-of-scope runs not applicable, the sensitivity of a decided verdict and the
seeds-needed figure of an undecided one equal to direct noncentral-t computations.
For an agreement claim (effect = measured − predicted) the "large true effect" is exact
agreement measured precisely, "reversed" a deviation of ten margins, and "null" agreement
measured too noisily to show it.

Adding a claim to the registry: one entry in cl_diag/report/claims.py and one CASES entry.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from cl_diag.measurement.convergence import GAP, PLATEAU
from cl_diag.measurement.stats import CONFIDENCE
from cl_diag.report.claims import (
    CLAIMS,
    NOT_APPLICABLE,
    Claim,
    Finding,
    Identity,
    RunData,
    findings_blocks,
    run_findings,
    summary_lines,
)
from cl_diag.report.claims.facts import LayerPairs, PairMoments
from cl_diag.report.document import Paragraph
from cl_diag.result import Collapse, Ssem, TrainingLoss
from cl_diag.runconfig import parse_run_config

REPO = Path(__file__).resolve().parents[1]
SEEDS = (1, 2, 3, 4, 5)
#: the per-seed noise pattern: mean exactly 0, sample sd 1.127
NOISE = np.array([0.9, -1.3, 0.4, 1.1, -1.1])
#: a per-seed baseline that the paired designs cancel
BASELINE = np.array([0.3, -0.2, 0.1, -0.4, 0.2])
N_REF = 1000
DELTA = -1.0 / (N_REF - 1)
#: batch sizes of the trend cases (log2 m = 4, 5, 6) and the α of the SSEM trend
SIZES = (16, 32, 64)
ALPHAS = (0.0, 0.5, 1.0)

PREDICTIONS = [k for k, c in CLAIMS.items() if isinstance(c, Claim) and c.kind == "prediction"]
#: predictions whose interval is effect ± t se (a power figure and the t-based borderline);
#: the threshold's profile-likelihood interval and the toy's exact share of seeds have their
#: own tests below
T_PREDICTIONS = [k for k in PREDICTIONS if k not in ("alpha_threshold", "toy_spread")]
#: a run at a flat loss, at the closed-form optimum where the claim knows one
CONVERGED_LOSS = TrainingLoss(
    steps=1000, final=3.0, final_steps=100, before=3.0, before_steps=100, change=0.0, change_se=0.0
)
DESCRIPTIONS = [k for k, c in CLAIMS.items() if isinstance(c, Claim) and c.kind == "description"]
IDENTITIES = [k for k, c in CLAIMS.items() if isinstance(c, Identity)]


def run(label: str, config: dict, **facts) -> RunData:
    """A run with plausible defaults for every fact a claim reads, ``facts`` replacing them."""
    n_train = facts.pop("n_train", None)
    base: dict = {
        "n_ref": N_REF,
        "delta": DELTA,
        "layer": "projector",
        "n": 500,
        "d": 128,
        "loss_family": "info_nce",
        "pos_mean": 0.8,
        "pos_var": 0.01,
        "neg_mean": 0.0,
        "neg_var": 0.1,
        "neg_largest": 0.9,
        "neg_ratio": 0.5,
        "top1": 0.9,
        "n_test": 450,
        "loss": CONVERGED_LOSS,
        "optimum_loss": 3.0,
    }
    base.update(facts)
    return RunData(label=label, config=parse_run_config(config, n_train=n_train), **base)


TUNING = {"grid": [1, 3, 10, 30], "selected": 3, "split": "validation", "criterion": "top-1"}


def _vrn(weight: float, tuned: bool) -> dict:
    return (
        {"vrn": weight, "vrn_tuning": {**TUNING, "selected": weight}} if tuned else {"vrn": weight}
    )


# ---- builders: the per-seed effect is shift + scale * NOISE[k] on the analysis scale ----------


def paired(
    control: dict,
    treatment: dict,
    facts: Callable[[float], dict],
    base: float,
    shift: float,
    scale: float,
    common: dict | None = None,
    control_facts: dict | None = None,
) -> list[RunData]:
    """Control and treatment runs per seed: the metric (analysis scale) is base + a seed's
    baseline in the control arm, plus shift + scale * NOISE[k] in the treatment arm."""
    common = common or {}
    runs = []
    for k, seed in enumerate(SEEDS):
        b = base + 0.1 * BASELINE[k]
        runs.append(
            run(
                f"c{seed}",
                {**control, "seed": seed},
                **{**common, **(control_facts or {}), **facts(b)},
            )
        )
        runs.append(
            run(
                f"t{seed}",
                {**treatment, "seed": seed},
                **{**common, **facts(b + shift + scale * NOISE[k])},
            )
        )
    return runs


def one_sample(
    config: dict, facts: Callable[[float], dict], ref: float, shift: float, scale: float, **common
) -> list[RunData]:
    """One config, a run per seed: the metric is ref + shift + scale * NOISE[k]."""
    return [
        run(f"s{seed}", {**config, "seed": seed}, **{**common, **facts(ref + shift + scale * n)})
        for seed, n in zip(SEEDS, NOISE, strict=True)
    ]


def trend_runs(
    config: dict,
    option: str,
    values: tuple[float, ...],
    x: Callable[[float], float],
    facts: Callable[[float, float], dict],
    shift: float,
    scale: float,
    **common,
) -> list[RunData]:
    """Runs at each value of ``option`` and seed: the metric is 0.3 + shift * x + scale *
    NOISE[k] (the same noise at each level, so the fitted slope is shift exactly)."""
    return [
        run(
            f"{option}{v} s{seed}",
            {**config, option: v, "seed": seed},
            **{**common, **facts(v, 0.3 + shift * x(v) + scale * n)},
        )
        for v in values
        for seed, n in zip(SEEDS, NOISE, strict=True)
    ]


def _collapse(variance: float, spread: float = 0.05) -> Collapse:
    """A collapse block whose instance means have within-class variance ``variance`` (the
    views' adds their spread)."""
    return Collapse.from_dict(
        {
            "classes": 10,
            "instances": 50,
            "within_class_variance": variance + spread,
            "view_spread": spread,
            "instance_within_class_variance": variance,
        }
    )


def _ssem(alpha: float, predicted: float, *, regime: str | None = None) -> Ssem:
    return Ssem.from_dict(
        {
            "alpha": alpha,
            "tau": 0.3,
            "m": 10,
            "n": 10,
            "p": 2,
            "variant": "B",
            "alpha_c": 0.25,
            "beta_star": 1.0 - predicted,
            "regime": regime or ("collapse" if predicted == 0 else "interior"),
            "predicted": {"s_w": None, "s_b": None, "within_class_variance": predicted},
            "d_below_mn_minus_1": False,
            "alpha_split": -0.1675540590337885,  # view_split_threshold(0.3, 10, 10)
            "outside_ssem_region": False,
        }
    )


SIMCLR = {"loss": "simclr", "batch_size": 64}
SIGMOID = {"loss": "sigmoid", "batch_size": 64, "temperature": 1.0, "bias": -1.0}
SUPCL = {"loss": "supcl", "batch_size": 100, "balanced_batch": True, "temperature": 0.3}
TOY = {"loss": "simclr", "batch_size": 2, "dataset": "toy"}
TOY_FACTS = {"free_embeddings": True, "n_ref": 4, "delta": -1 / 3, "n": 4, "d": 3}


def _log_var(v: float) -> dict:
    return {"neg_var": math.exp(v)}


def _log_std(v: float) -> dict:
    return {"neg_var": math.exp(2 * v)}


def _share(v: float) -> dict:
    return {"neg_ratio": v}


def _top1(v: float) -> dict:
    return {"top1": v}


def _mean(v: float) -> dict:
    return {"neg_mean": v}


def vrn_variance(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    common = {"loss_family": None} if outside else {}
    return paired(
        {**SIMCLR, "vrn": 0.0},
        {**SIMCLR, "vrn": 30.0},
        _log_var,
        math.log(0.15),
        shift,
        scale,
        common,
    )


def batch_variance(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    return trend_runs(
        SIMCLR,
        "batch_size",
        SIZES,
        math.log2,
        lambda m, y: {"neg_var": math.exp(y - 2)},
        shift,
        scale,
        **({"loss_family": None} if outside else {}),
    )


#: the seeds of the share-of-seeds case (toy_spread): 20, so that every outcome is reachable
SHARE_SEEDS = tuple(range(1, 21))
SHARE_NOISE = np.random.default_rng(11).standard_normal(len(SHARE_SEEDS))


def toy_spread(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    """Per seed, the VRN run's spread shrinks a decade (reaches the figure) or not at all:
    seed k reaches it when its rank (k + 0.5)/20 lies below 0.5 + shift + scale * noise, so
    the share reaching is about 0.5 + shift (a share, the claim's scale)."""
    facts = {**TOY_FACTS, "n_ref": 8} if outside else TOY_FACTS
    runs = []
    for k, seed in enumerate(SHARE_SEEDS):
        reaches = (k + 0.5) / len(SHARE_SEEDS) < 0.5 + shift + scale * SHARE_NOISE[k]
        std = 0.3 * (0.1 if reaches else 1.0)
        runs.append(
            run(f"c{seed}", {**TOY, "vrn": 0.0, "seed": seed}, **facts, **_log_std(math.log(0.3)))
        )
        runs.append(
            run(f"t{seed}", {**TOY, "vrn": 3.0, "seed": seed}, **facts, **_log_std(math.log(std)))
        )
    return runs


def toy_centre(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    """|mean − δ| is 1 + a tenth of a seed's baseline without VRN, plus shift + scale * noise
    with VRN (VRN centring them better is a negative shift; 1 keeps every distance positive)."""
    facts = {**TOY_FACTS, "n_ref": 8} if outside else TOY_FACTS
    return paired(
        {**TOY, "vrn": 0.0},
        {**TOY, "vrn": 3.0},
        lambda v: _mean(-1 / 3 + v),
        1.0,
        shift,
        scale,
        facts,
    )


def excessive_share(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    config = {**SIMCLR, "loss": "dcl"} if outside else SIMCLR
    return one_sample(config, _share, 0.57, shift, scale, n_train=N_REF)


def within_view_share(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    return paired(
        {**SIGMOID, "within_view": False},
        {**SIGMOID, "within_view": True},
        _share,
        0.6,
        shift,
        scale,
        control_facts={"eq10_full": not outside},
    )


def vrn_accuracy(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    return paired(
        {**SIMCLR, "vrn": 0.0}, {**SIMCLR, **_vrn(3.0, not outside)}, _top1, 0.85, shift, scale
    )


def vrn_accuracy_batch(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    runs = []
    for m in SIZES:
        for k, seed in enumerate(SEEDS):
            base = 0.85 + 0.01 * BASELINE[k]
            gain = 0.02 + shift * math.log2(m) + scale * NOISE[k]
            runs.append(
                run(
                    f"b{m} s{seed}",
                    {**SIMCLR, "batch_size": m, "vrn": 0.0, "seed": seed},
                    top1=base,
                )
            )
            runs.append(
                run(
                    f"b{m} vrn s{seed}",
                    {**SIMCLR, "batch_size": m, **_vrn(3.0, not outside), "seed": seed},
                    top1=base + gain,
                )
            )
    return runs


def batch_accuracy(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    config = {**SIMCLR, "loss": "infonce"} if outside else SIMCLR
    return trend_runs(
        config, "batch_size", SIZES, math.log2, lambda m, y: {"top1": 0.5 + y}, shift, scale
    )


def eq10_separation(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    # the full batch: 100 free vectors per view trained on all 100 pairs at once
    config = {**SIGMOID, "batch_size": 100, "within_view": outside}
    facts = {"loss_family": "independently_additive", "eq10_full": True, "n_ref": 100, "d": 128}
    return one_sample(config, _mean, -1 / 99, shift, scale, delta=-1 / 99, **facts)


def eq10_etf(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    config = {**SIGMOID, "batch_size": 100, "bias": 7.0, "within_view": False}
    facts = {"loss_family": "independently_additive", "eq10_full": outside, "n_ref": 100, "d": 99}
    return one_sample(config, _mean, -1 / 99, shift, scale, delta=-1 / 99, **facts)


def ccem_optimum(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    # free embeddings on the full batch of N = 8 pairs, d = 8; x = (1 + s_pos)/2 against x*
    config = {**SIGMOID, "batch_size": 8, "temperature": 8.0, "bias": -1.0}
    config["within_view"] = outside  # within-view negatives: outside the CCEM's loss
    facts = {"free_embeddings": True, "n_ref": 8, "delta": -1 / 7, "n": 8, "d": 8}
    return one_sample(
        config, lambda x: {"pos_mean": 2 * x - 1}, 0.56, shift, scale, ccem_x=0.56, **facts
    )


def ssem_collapse(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    ssem = _ssem(0.1, 0.0, regime="interior" if outside else "collapse")
    return one_sample(
        {**SUPCL, "alpha": 0.1},
        lambda v: {"collapse": _collapse(v)},
        0.0,
        shift,
        scale,
        ssem=ssem,
        pos_mean=0.999,
        loss_family=None,
    )


def ssem_variance(shift: float, scale: float, outside: bool = False) -> list[RunData]:
    ssem = _ssem(0.5, 0.3, regime="collapse" if outside else None)
    return one_sample(
        {**SUPCL, "alpha": 0.5},
        lambda v: {"collapse": _collapse(v)},
        0.3,
        shift,
        scale,
        ssem=ssem,
        pos_mean=0.99,
        loss_family=None,
    )


#: the α of the threshold case (α_c = 0.25 in _ssem) and its fixed noise, one per seed and α
THRESHOLD_ALPHAS = (0.0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7, 1.0)
THRESHOLD_NOISE = np.random.default_rng(7).standard_normal((len(SEEDS), len(THRESHOLD_ALPHAS)))


def alpha_threshold(
    shift: float, scale: float, outside: bool = False, rise: float = 0.5
) -> list[RunData]:
    """Runs at each α and seed: the instance measure is flat (a per-seed offset) below a
    break at α_c + shift and rises by ``rise`` per unit α above it, plus scale * noise."""
    config = {**SUPCL, "balanced_batch": not outside}
    runs = []
    for k, seed in enumerate(SEEDS):
        for j, a in enumerate(THRESHOLD_ALPHAS):
            y = 0.1 + 0.02 * BASELINE[k] + rise * max(0.0, a - (0.25 + shift))
            runs.append(
                run(
                    f"alpha{a} s{seed}",
                    {**config, "alpha": a, "seed": seed},
                    collapse=_collapse(y + scale * THRESHOLD_NOISE[k, j]),
                    ssem=_ssem(a, 0.0 if a <= 0.25 else 0.5 * (a - 0.25)),
                    loss_family=None,
                )
            )
    return runs


@dataclass(frozen=True)
class Case:
    build: Callable[..., list[RunData]]
    #: how the design's spread is computed: "one_sample" (per-seed values or differences),
    #: "slope" (residuals of the fit) -- for the direct power computation; "break" (a
    #: profile-likelihood interval: no power figure, no t-interval borderline)
    design: str


CASES = {
    "vrn_variance": Case(vrn_variance, "one_sample"),
    "batch_variance": Case(batch_variance, "slope"),
    "toy_spread": Case(toy_spread, "share"),
    "toy_centre": Case(toy_centre, "one_sample"),
    "excessive_share": Case(excessive_share, "one_sample"),
    "within_view_share": Case(within_view_share, "one_sample"),
    "vrn_accuracy": Case(vrn_accuracy, "one_sample"),
    "vrn_accuracy_batch": Case(vrn_accuracy_batch, "slope"),
    "batch_accuracy": Case(batch_accuracy, "slope"),
    "eq10_separation": Case(eq10_separation, "one_sample"),
    "eq10_etf": Case(eq10_etf, "one_sample"),
    "ccem_optimum": Case(ccem_optimum, "one_sample"),
    "ssem_collapse": Case(ssem_collapse, "one_sample"),
    "ssem_variance": Case(ssem_variance, "one_sample"),
    "alpha_threshold": Case(alpha_threshold, "break"),
}


def finding(key: str, shift: float, scale: float, outside: bool = False) -> Finding:
    """The one finding of claim ``key`` on its case's runs (the registry restricted to it)."""
    runs = CASES[key].build(shift, scale, outside)
    found = [f for f in run_findings(runs, claims=[key]) if f.claim == key]
    assert len(found) == 1, [(f.subject, f.verdict, f.note) for f in found]
    return found[0]


def _spec(key: str) -> Claim:
    claim = CLAIMS[key]
    assert isinstance(claim, Claim) and claim.margin is not None and claim.expect is not None
    return claim


def _sign(claim: Claim) -> float:
    return -1.0 if claim.expect == "decrease" else 1.0


# ---- the registry and its docs ----------------------------------------------------------------


def test_every_prediction_has_a_known_truth_case():
    # adding a claim is one entry and one test: the case is the test
    assert sorted(CASES) == sorted(PREDICTIONS)


def test_docs_claims_md_is_generated_from_the_registry():
    # python tools/claims_doc.py writes it
    spec = importlib.util.spec_from_file_location("claims_doc", REPO / "tools" / "claims_doc.py")
    assert spec is not None and spec.loader is not None
    claims_doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(claims_doc)
    assert (REPO / "docs" / "claims.md").read_text(encoding="utf-8") == claims_doc.claims_markdown()


def test_every_entry_names_its_work_and_the_ssem_claims_are_not_the_icml_papers():
    for key, claim in CLAIMS.items():
        assert claim.source.where or claim.source.work == "none", key
        if key.startswith("ssem") or key == "alpha_threshold":
            assert claim.source.work == "SSEM"
        if key.startswith("ccem"):
            assert claim.source.work == "CCEM"
    for key in PREDICTIONS:
        claim = _spec(key)
        assert claim.margin_why and claim.at_scope and claim.scope, key


# ---- the five known truths, for each prediction -------------------------------------------


@pytest.mark.parametrize("key", PREDICTIONS)
def test_large_true_effect_is_supported(key):
    claim = _spec(key)
    shift = 0.0 if claim.expect == "agree" else _sign(claim) * 10 * claim.margin
    f = finding(key, shift, 0.05 * claim.margin)
    assert f.verdict == "supported", f.note
    assert not f.fragile and f.replication is not None and f.replication > 0.99, f.note
    assert f.confidence == pytest.approx(CONFIDENCE)  # one finding: no multiplicity
    if key not in T_PREDICTIONS:
        # the threshold test's profile-likelihood interval has no power design (its own tests)
        assert f.seeds_needed is None and f.sensitivity is None
        return
    # a decided verdict gives the design's sensitivity (issue 32), not a seed count: at a
    # spread of a twentieth of the margin the seeds at hand call an effect well short of ten
    # margins supported
    assert f.seeds_needed is None and f.sensitivity is not None, f.note
    per = " per level" if CASES[key].design == "slope" else ""
    assert f"Sensitivity: 5 seeds{per} call a true" in f.note
    if claim.expect == "agree":
        assert 0 < f.sensitivity < claim.margin
    else:
        claimed = claim.margin if claim.claimed is None else claim.claimed
        assert claimed < abs(f.sensitivity) < 10 * claim.margin
        assert math.copysign(1.0, f.sensitivity) == _sign(claim)


def _null_scale(key: str) -> float:
    """A spread at which a null effect's interval holds the claimed size (an agreement's
    reaches beyond ± the margin): exact agreement, or no effect, measured too noisily to show
    it (a slope over three levels is more precise than one mean over seeds)."""
    claim = _spec(key)
    assert claim.margin is not None
    if claim.expect == "agree":
        return 1.2 * claim.margin
    return (2.0 if CASES[key].design == "slope" else 1.0) * claim.margin


@pytest.mark.parametrize("key", T_PREDICTIONS)
def test_null_effect_is_inconclusive(key):
    scale = _null_scale(key)
    f = finding(key, 0.0, scale)
    assert f.verdict == "inconclusive", f.note
    assert f.sensitivity is None
    assert f.seeds_needed is not None and "80 % power" in f.note


@pytest.mark.parametrize("key", [k for k in T_PREDICTIONS if _spec(k).expect != "agree"])
def test_null_effect_measured_precisely_is_not_borne_out(key):
    # issue 32: an interval wholly short of the claimed size rejects what the source says
    claim = _spec(key)
    assert claim.margin is not None
    claimed = claim.claimed if claim.claimed is not None else claim.margin
    # half a margin short of the claimed size, and half a margin the other way from zero (not
    # far enough to contradict), both measured precisely
    for effect in (claimed - 0.5 * claim.margin, -0.5 * claim.margin):
        f = finding(key, _sign(claim) * effect, 0.05 * claim.margin)
        assert f.verdict == "not borne out", f.note
        assert f.note.startswith("Not borne out: the whole interval lies short of the claimed")
        assert not f.fragile and f.sensitivity is not None


@pytest.mark.parametrize("key", PREDICTIONS)
def test_reversed_effect_is_contradicted(key):
    claim = _spec(key)
    shift = 10 * claim.margin if claim.expect == "agree" else -_sign(claim) * 10 * claim.margin
    f = finding(key, shift, 0.05 * claim.margin)
    assert f.verdict == "contradicted", f.note
    assert not f.fragile


@pytest.mark.parametrize("key", T_PREDICTIONS)
def test_effect_at_the_claimed_size_is_fragile(key):
    claim = _spec(key)
    margin = claim.margin
    assert margin is not None
    claimed = margin if claim.claimed is None else claim.claimed
    scale = 0.2 * margin
    probe = finding(key, 0.0, scale)
    assert probe.se is not None and probe.df is not None and probe.estimate is not None
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, probe.df) * probe.se
    # shift the effect so that the deciding end of the interval sits on the claimed size
    if claim.expect == "increase":
        target = claimed + half
    elif claim.expect == "decrease":
        target = -claimed - half
    else:
        target = margin - half
    f = finding(key, target - probe.estimate, scale)
    assert f.verdict in ("supported", "inconclusive")
    # the interval's end on the boundary: a replicate lands on either side about half the time
    assert f.replication is not None and 0.4 < f.replication < 0.6, (f.replication, f.note)
    assert f.fragile and "; fragile." in f.note
    assert f.seeds_needed is not None  # a fragile verdict gives its seed count, no sensitivity
    assert f.sensitivity is None
    # a twentieth of the margin inside: supported, and still fragile
    inward = -1.0 if claim.expect == "agree" else _sign(claim)
    inside = finding(key, target - probe.estimate + inward * 0.05 * margin, scale)
    assert inside.verdict == "supported" and inside.fragile
    # the replication odds are the t predictive probability of the same verdict
    assert inside.replication is not None and inside.prediction_error is not None
    assert inside.replication_method == "t predictive distribution"
    lo, hi = sorted(_analysis(claim, x) for x in inside.interval)
    spread = math.sqrt(2) * inside.se
    if claim.expect == "increase":
        want = stats.t.sf((claimed - lo) / spread, inside.df)
    elif claim.expect == "decrease":
        want = stats.t.cdf((-claimed - hi) / spread, inside.df)
    else:
        want = stats.t.cdf((margin - hi) / spread, inside.df) - stats.t.cdf(
            (-margin - lo) / spread, inside.df
        )
    assert inside.replication == pytest.approx(want, rel=1e-9)


def _analysis(claim: Claim, shown: float) -> float:
    """An interval end as printed back on the claim's analysis scale."""
    if claim.shows == "relative":
        return math.log1p(shown)
    if claim.shows == "factor":
        return math.log(shown)
    return shown


@pytest.mark.parametrize("key", PREDICTIONS)
def test_out_of_scope_runs_are_not_applicable(key):
    claim = _spec(key)
    runs = CASES[key].build(_sign(claim) * 10 * claim.margin, 0.05 * claim.margin, True)
    found = [f for f in run_findings(runs, claims=[key]) if f.claim == key]
    assert found and all(f.verdict == NOT_APPLICABLE for f in found)
    assert all(f.note.startswith("Not applicable: needs ") for f in found)
    assert all(f.p_value is None for f in found)  # outside the Holm family


def _direct_seeds(design: str, sd: float, margin: float, alpha: float, levels=(), agree=False):
    """The fewest seeds whose one-sided t test at ``alpha`` detects ``margin`` with 80 % power,
    straight from scipy's noncentral t."""
    for n in range(1, 10_001):
        if design == "one_sample":
            df, ncp = n - 1, margin * math.sqrt(n) / sd
        else:
            x = np.asarray(levels, dtype=float)
            df = n * x.size - 2
            ncp = margin * math.sqrt(n * ((x - x.mean()) ** 2).sum()) / sd
        if df < 1:
            continue
        power = stats.nct.sf(stats.t.ppf(1 - alpha, df), df, ncp)
        if agree:
            power = 2 * power - 1
        if power >= 0.8:
            return n
    return None


@pytest.mark.parametrize("key", T_PREDICTIONS)
def test_seeds_needed_is_the_noncentral_t_power_computation(key):
    claim = _spec(key)
    assert claim.margin is not None
    scale = _null_scale(key)
    f = finding(key, 0.0, scale)
    alpha = (1 - f.confidence) / 2 if f.confidence is not None else 0.025
    case = CASES[key]
    if case.design == "one_sample":
        sd = scale * float(np.std(NOISE, ddof=1))
        levels: tuple = ()
    else:
        x = np.log2(SIZES)
        xs = np.repeat(x, len(SEEDS))
        ys = np.tile(scale * NOISE, len(x))
        slope, intercept = np.polyfit(xs, ys, 1)
        sd = math.sqrt(((ys - slope * xs - intercept) ** 2).sum() / (xs.size - 2))
        levels = tuple(x)
    want = _direct_seeds(case.design, sd, claim.margin, alpha, levels, claim.expect == "agree")
    assert f.seeds_needed == want
    assert f.seeds == len(SEEDS)


# ---- no claim is supported by everything ------------------------------------------------------


@pytest.mark.parametrize("key", PREDICTIONS)
def test_random_result_sets_do_not_always_support_a_claim(key):
    claim = _spec(key)
    assert claim.margin is not None
    rng = np.random.default_rng(sum(map(ord, key)))
    verdicts = set()
    for _ in range(60):
        # effects of up to four margins either way, spreads from a hundredth to two margins
        shift = float(rng.uniform(-4, 4)) * claim.margin
        scale = float(np.exp(rng.uniform(math.log(0.01), math.log(2.0)))) * claim.margin
        verdicts.add(finding(key, shift, scale).verdict)
    # issue 32: random results reach every outcome the claim defines, and not only one
    if key == "alpha_threshold":  # a profile-likelihood interval over a grid of α
        assert "supported" in verdicts and len(verdicts) >= 2, verdicts
    elif claim.expect == "agree":
        assert verdicts == {"supported", "contradicted", "inconclusive"}, verdicts
    else:
        assert verdicts == {"supported", "not borne out", "contradicted", "inconclusive"}, verdicts


# ---- beyond the five truths -------------------------------------------------------------------


def test_a_failed_precondition_is_not_applicable_here_never_contradicted():
    # sigmoid without within-view negatives that has almost nothing below δ: nothing to reduce,
    # even if the within-view runs have more
    runs = paired(
        {**SIGMOID, "within_view": False},
        {**SIGMOID, "within_view": True},
        _share,
        0.01,
        0.5,
        0.001,
        control_facts={"eq10_full": True},
    )
    (f,) = run_findings(runs, claims=["within_view_share"])
    assert f.verdict == NOT_APPLICABLE and f.note.startswith("Not applicable here: ")
    assert "no share of 5 points to reduce" in f.note
    # every α at or below α_c: the SSEM predicts no change
    flat = [
        replace(r, ssem=_ssem(float(r.config.alpha or 0), 0.0, regime="collapse"))
        for r in alpha_threshold(0.0, 0.001)
    ]
    (h,) = run_findings(flat, claims=["alpha_threshold"])
    assert h.verdict == NOT_APPLICABLE and "predicts no change" in h.note
    # one α above α_c: no rising part to place a break by
    few = [r for r in alpha_threshold(0.0, 0.001) if (r.alpha or 0) <= 0.3]
    (k,) = run_findings(few, claims=["alpha_threshold"])
    assert k.verdict == NOT_APPLICABLE and "at least two on each side" in k.note


def test_share_claims_read_the_share_below_delta_minus_epsilon_where_it_is_recorded():
    # issue 32: "below δ" is s < δ − ε. A run that records the margin share is read by it, not
    # by the strict share (here float residue at an ETF: 40 % strictly below, none beyond ε); a
    # result written before the margin count existed falls back on its min and max
    from cl_diag.report.claims.terms import NEG_SHARE

    run = excessive_share(0.0, 0.01)[0]
    residue = replace(run, neg_ratio=0.4, neg_min=run.delta - 1e-6, neg_max=run.delta + 1e-6)
    assert NEG_SHARE.read(replace(residue, neg_margin_ratio=0.0)) == 0.0
    assert NEG_SHARE.read(residue) == 0.0  # no margin share recorded: min/max fallback
    spread = replace(run, neg_ratio=0.58, neg_min=-0.9, neg_max=0.4)
    assert NEG_SHARE.read(replace(spread, neg_margin_ratio=0.57)) == 0.57
    assert NEG_SHARE.read(spread) == 0.58
    # the margin share decides the verdict: 57 % strictly below δ but 40 % beyond ε contradicts
    runs = [
        replace(r, neg_margin_ratio=(r.neg_ratio or 0) - 0.17) for r in excessive_share(0.0, 0.005)
    ]
    (f,) = run_findings(runs, claims=["excessive_share"])
    (g,) = run_findings(excessive_share(0.05, 0.005), claims=["excessive_share"])
    assert f.verdict == "contradicted" and g.verdict == "supported", (f.note, g.note)


def test_ssem_claims_read_the_batch_scope_where_the_result_records_it():
    # issue 32: the SSEM speaks of one balanced batch; a result that records the collapse
    # measure at that scope is judged by it, an older one by the sample's value
    sample = replace(_collapse(0.05), batch_instances=10, batch_instance_within_class_variance=0.0)
    runs = [replace(r, collapse=sample) for r in ssem_collapse(0.0, 0.0001)]
    assert {r.instance_within_class_variance for r in runs} == {0.0}
    (g,) = run_findings(runs, claims=["ssem_collapse"])
    old = [replace(r, collapse=_collapse(0.05)) for r in ssem_collapse(0.0, 0.0001)]
    (h,) = run_findings(old, claims=["ssem_collapse"])
    assert (g.verdict, h.verdict) == ("supported", "contradicted"), (g.note, h.note)


def test_ssem_claims_read_the_instance_means_whatever_the_views_spread():
    # a views' spread of 0.3 (s_pos = 0.4) no longer makes the collapse claim untestable:
    # the instance means' within-class variance is 0 (to 1e-4) on every seed
    runs = [
        replace(r, collapse=_collapse(float(r.instance_within_class_variance or 0), 0.3))
        for r in ssem_collapse(0.0, 0.0001)
    ]
    (g,) = run_findings(runs, claims=["ssem_collapse"])
    assert g.verdict == "supported", g.note
    # results written before the instance means were measured: not applicable, with the fix
    old = [
        replace(
            r,
            collapse=Collapse.from_dict(
                {"classes": 10, "instances": 50, "within_class_variance": 0.05}
            ),
        )
        for r in ssem_collapse(0.0, 0.0001)
    ]
    (h,) = run_findings(old, claims=["ssem_collapse"])
    assert h.verdict == NOT_APPLICABLE and "analyse the run again" in h.note


def test_threshold_null_is_inconclusive_and_says_why_no_seed_count():
    # the break at α_c measured too noisily to place it within ± 0.05
    f = finding("alpha_threshold", 0.0, 0.06)
    assert f.verdict == "inconclusive", f.note
    assert f.seeds_needed is None and "No seed count for 80 % power" in f.note
    # a flat measure (no rise at all): nothing places the break
    runs = alpha_threshold(0.0, 0.01, rise=0.0)
    (g,) = run_findings(runs, claims=["alpha_threshold"])
    assert g.verdict == "inconclusive", g.note


def test_threshold_interval_is_the_profile_likelihood_of_the_break():
    from cl_diag.report.claims.inference import hinge_fit, hinge_interval

    runs = alpha_threshold(0.1, 0.01)
    f = finding("alpha_threshold", 0.1, 0.01)
    xs = [float(r.alpha or 0) for r in runs]
    ys = [float(r.instance_within_class_variance or 0) for r in runs]
    fit = hinge_fit(xs, ys, [r.seed for r in runs])
    lo, hi = hinge_interval(fit, 0.95)
    assert f.estimate == pytest.approx(fit.break_ - 0.25)
    assert f.interval == pytest.approx((lo - 0.25, hi - 0.25))
    assert f.verdict == "contradicted"  # a break at 0.35 (measured 0.3 to 0.4), not 0.25
    assert 0.3 < fit.break_ < 0.4 and fit.df == len(runs) - len(SEEDS) - 2


def test_untuned_lambda_is_not_applicable_and_a_tuned_one_among_a_grid_is_tested():
    untuned = vrn_accuracy(0.05, 0.001, outside=True)
    (f,) = run_findings(untuned, claims=["vrn_accuracy"])
    assert "the config records no tuning of λ (a fixed λ)" in f.note
    # a λ grid in which the record chose 3: only λ = 3 is tested against none
    grid = vrn_accuracy(0.05, 0.001) + [
        run(f"l30 s{seed}", {**SIMCLR, "vrn": 30.0, "seed": seed}, top1=0.80) for seed in SEEDS
    ]
    (g,) = run_findings(grid, claims=["vrn_accuracy"])
    assert g.subject.endswith(": VRN 3 vs none") and g.verdict == "supported"
    # chosen on the test split: not tuned
    cheat = [
        replace(
            r,
            config=parse_run_config(
                {**SIMCLR, "vrn": 3.0, "seed": r.seed, "vrn_tuning": {**TUNING, "split": "test"}}
            ),
        )
        if r.config.vrn.on
        else r
        for r in vrn_accuracy(0.05, 0.001)
    ]
    (h,) = run_findings(cheat, claims=["vrn_accuracy"])
    assert h.verdict == NOT_APPLICABLE and "λ was chosen on the test split" in h.note


def test_excessive_share_of_one_trained_model_uses_its_image_sampling():
    one = excessive_share(0.2, 0.0)[:1]
    (f,) = run_findings(one, claims=["excessive_share"])
    # Hoeffding's U-statistic bound with n/2 effective pairs, Agresti-Coull shrinkage
    eff = 250.0
    p = (0.77 * eff + 2) / (eff + 4)  # a share of 57 % + 20 points
    se = math.sqrt(p * (1 - p) / eff)
    assert f.replicate == "images" and f.n == 500 and f.se == pytest.approx(se)
    assert f.interval == pytest.approx((0.2 - 1.959963984540054 * se, 0.2 + 1.959963984540054 * se))
    assert f.verdict == "supported" and f.seeds_needed is None
    # a VRN run, a free embedding or δ of another n: outside the rebuttal's scope
    for facts in ({"free_embeddings": True}, {"n_train": 2000}):
        other = [run("x", {**SIMCLR, "seed": 1}, neg_ratio=0.7, **facts)]
        (g,) = run_findings(other, claims=["excessive_share"])
        assert g.verdict == NOT_APPLICABLE


def test_one_run_per_condition_is_inconclusive_with_no_seed_count():
    runs = vrn_variance(-1.0, 0.01)
    first = [r for r in runs if r.seed == 1]
    (f,) = run_findings(first, claims=["vrn_variance"])
    assert f.verdict == "inconclusive" and f.interval is None and f.seeds_needed is None
    assert "one run per condition" in f.note
    assert f.effect == pytest.approx(math.expm1(-1.0 + 0.01 * NOISE[0]))


def test_unpaired_seeds_fall_back_to_welch():
    runs = vrn_variance(-1.0, 0.05)
    moved = [
        replace(r, config=parse_run_config({**SIMCLR, "vrn": 30.0, "seed": r.seed + 10}))
        if r.config.vrn.on
        else r
        for r in runs
    ]
    (f,) = run_findings(moved, claims=["vrn_variance"])
    control = [math.log(r.neg_var) for r in moved if not r.config.vrn.on]
    treatment = [math.log(r.neg_var) for r in moved if r.config.vrn.on]
    ci = stats.ttest_ind(treatment, control, equal_var=False).confidence_interval(0.95)
    assert "Welch" in f.method and f.interval == pytest.approx(
        (math.expm1(ci.low), math.expm1(ci.high))
    )


def test_holm_across_the_claims_of_a_report():
    # several predictions in one report: the i-th smallest p of K is judged at 2.5 %/(K - i + 1)
    # (one-sided) until the first that is not decided; that one and every later one at its level
    runs = vrn_variance(-0.06, 0.1) + trend_runs(
        {**SIMCLR, "vrn": 0.0},
        "batch_size",
        (128, 256),
        math.log2,
        lambda m, y: {"neg_var": math.exp(y - 2)},
        -0.05,
        0.01,
    )
    found = [f for f in run_findings(runs) if f.kind == "prediction" and f.p_value is not None]
    k = len(found)
    assert k >= 3
    ranked = sorted(found, key=lambda f: f.p_value or 0.0)
    first: float | None = None
    for i, f in enumerate(ranked):
        level = 0.025 / (k - i)
        if first is None and (f.p_value or 0.0) > level:
            first = level
        assert f.confidence == pytest.approx(1 - 2 * (level if first is None else first))
        assert (f.verdict == "inconclusive") == (first is not None)
    # decided both ways and undecided all occur here
    assert first is not None and ranked[0].verdict in ("supported", "not borne out")
    assert {"supported", "not borne out", "inconclusive"} <= {f.verdict for f in found}
    (method,) = [b for b in findings_blocks(found) if isinstance(b, Paragraph)][:1]
    assert f"the {k} findings with a verdict are one family; Holm's step-down" in method.text


def test_summary_lines_name_source_runs_and_power():
    lines = summary_lines([finding("toy_centre", 0.0, 0.1)])
    assert lines[0].startswith(
        "With VRN the negative similarities centre on δ = −1/(n−1) (Lee et al. 2025, rebuttal, "
    )
    ssem = summary_lines([finding("ssem_variance", 0.0, 0.1)])
    assert "(SSEM paper, " in ssem[0] and "Lee et al. 2025" not in ssem[0]


def test_the_toy_spread_is_judged_on_the_share_of_seeds_that_reach_the_figure():
    # issue 32.3: the toy's seeds have two modes (VRN reaches the tenfold shrinkage in some and
    # breaks alignment in others): the verdict is on the share reaching it, with its exact
    # (Clopper-Pearson) interval, against one half
    claim = _spec("toy_spread")
    assert claim.margin == 0.25 and claim.claimed == 0.0
    every = finding("toy_spread", 1.0, 0.0)  # 20 of 20 reach it
    assert every.verdict == "supported" and "20 of 20 seeds reach" in every.measured
    lo, hi = stats.binomtest(20, 20).proportion_ci(confidence_level=CONFIDENCE)
    assert every.interval == pytest.approx((lo - 0.5, hi - 0.5))
    assert every.seeds_needed is None and every.sensitivity is None
    assert "Bernoulli trial" in every.note
    few = finding("toy_spread", -0.4, 0.0)  # 2 of 20: the interval wholly below one half
    assert few.verdict == "not borne out" and "2 of 20 seeds reach" in few.measured
    none = finding("toy_spread", -1.0, 0.0)  # 0 of 20: wholly at or below a quarter
    assert none.verdict == "contradicted"
    half = finding("toy_spread", 0.0, 0.0)  # 10 of 20
    assert half.verdict == "inconclusive" and half.estimate == pytest.approx(0.0)
    # the second mode is counted: the positive mean falling with VRN
    runs = CASES["toy_spread"].build(0.0, 0.0)
    broken = [
        replace(r, pos_mean=0.7) if r.config.vrn.on and r.config.seed in (3, 4, 5) else r
        for r in runs
    ]
    (f,) = run_findings(broken, claims=["toy_spread"])
    assert "the positive mean falls by more than 0.05 with VRN in 3 of 20" in f.measured


def test_the_toy_centre_is_what_vrn_adds_to_the_centring():
    # issue 32.3: runs without VRN whose negatives already centre on δ leave VRN nothing to
    # add: not borne out, where a one-sample test of the VRN runs alone said supported
    runs = CASES["toy_centre"].build(0.0, 0.0)
    at_delta = [replace(r, neg_mean=-1 / 3 + 1e-3) for r in runs]
    (f,) = run_findings(at_delta, claims=["toy_centre"])
    assert f.verdict == "not borne out", f.note
    assert f.subject.endswith("VRN 3 vs none")


def test_example_5_4_and_thm_5_1_iii_are_about_the_full_batch_with_room():
    # issue 23.3: Eq. 10 decides the optimum of the full-batch loss (Eq. 1) with d >= n (Thm
    # 5.3) or d >= n - 1 (Thm 5.1); runs on mini-batches, or with too few dimensions, are not
    # applicable, with the condition named
    for key, build in (("eq10_separation", eq10_separation), ("eq10_etf", eq10_etf)):
        runs = build(0.0, 0.001)
        (f,) = [f for f in run_findings(runs, claims=[key]) if f.claim == key]
        assert f.verdict != NOT_APPLICABLE, f.note
        mini = [replace(r, config=replace(r.config, batch_size=32)) for r in runs]
        (f,) = run_findings(mini, claims=[key])
        assert f.verdict == NOT_APPLICABLE and "mini-batches of m = 32 < n = 100" in f.note
        narrow = [replace(r, d=50) for r in runs]
        (f,) = run_findings(narrow, claims=[key])
        assert f.verdict == NOT_APPLICABLE and "d = 50 < n" in f.note
    # the ETF claim needs Eq. 10 to fail; the separation claim needs it to hold: one run set
    # is at the scope of exactly one of them
    both = run_findings(eq10_etf(0.0, 0.001), claims=["eq10_separation", "eq10_etf"])
    verdicts = {f.claim: f.verdict for f in both}
    assert verdicts["eq10_separation"] == NOT_APPLICABLE and "Eq. 10 fails" in next(
        f.note for f in both if f.claim == "eq10_separation"
    )
    assert verdicts["eq10_etf"] == "supported"
    # d = n - 1 suffices for the ETF (Thm 5.1: the eq10_etf case has d = 99, n = 100), not
    # for Thm 5.3 (d >= n)
    at_n_minus_1 = [replace(r, d=99) for r in eq10_separation(0.0, 0.001)]
    (f,) = run_findings(at_n_minus_1, claims=["eq10_separation"])
    assert f.verdict == NOT_APPLICABLE and "d = 99 < n = 100" in f.note


def test_per_seed_lists_follow_the_seeds_numbers():
    # ten seeds: seed 10 comes last, not after seed 1 (its text "10" sorts before "2")
    runs = []
    for seed in range(1, 11):
        for vrn, std in ((0.0, 0.3), (3.0, 0.3 * seed / 100)):
            facts = {**TOY_FACTS, **_log_std(math.log(std))}
            runs.append(run(f"s{seed}v{vrn}", {**TOY, "vrn": vrn, "seed": seed}, **facts))
    (f,) = [f for f in run_findings(runs, claims=["toy_spread"]) if f.claim == "toy_spread"]
    listed = f.measured.split("per seed: ")[1].split(", ")
    assert listed == [f"{100 * (s / 100 - 1):+.4g} %" for s in range(1, 11)]


def _spec_any(key: str) -> Claim:
    claim = CLAIMS[key]
    assert isinstance(claim, Claim)
    return claim


# ---- descriptions: estimates with intervals, no verdict ---------------------------------------


def test_alignment_under_vrn_is_described_not_judged():
    runs = paired(
        {**SIMCLR, "vrn": 0.0},
        {**SIMCLR, "vrn": 30.0},
        lambda v: {"pos_mean": v},
        0.8,
        -0.2,
        0.01,
    )
    (f,) = run_findings(runs, claims=["vrn_alignment"])
    diffs = -0.2 + 0.01 * NOISE
    ci = stats.ttest_1samp(diffs, 0.0).confidence_interval(0.95)
    assert f.verdict is None and f.kind == "description"
    assert f.effect == pytest.approx(diffs.mean())
    assert f.interval == pytest.approx((ci.low, ci.high))
    assert f.seeds_needed is None and f.replication is None


def test_distance_to_the_band_is_described_as_a_factor():
    runs = one_sample(
        {**SIMCLR, "vrn": 0.0}, _log_var, math.log(0.05), math.log(3.0), 0.01, band=(1e-6, 0.05)
    )
    (f,) = run_findings(runs, claims=["band_distance"])
    assert f.verdict is None and f.effect == pytest.approx(3.0 * math.exp(0.0), rel=1e-9)
    # with VRN the band is not the prediction: no line at all
    vrn = one_sample({**SIMCLR, "vrn": 30.0}, _log_var, 0.0, 0.0, 0.01, band=(1e-6, 0.05))
    assert run_findings(vrn, claims=["band_distance"]) == []


def test_an_embeddings_file_gets_only_the_consistency_checks():
    layer = _layer_of_unit_vectors(np.random.default_rng(0), 30, 8)
    bare = RunData(label="file", layers=(layer,), neg_ratio=0.7, neg_mean=-0.1, n=30, n_ref=30)
    found = run_findings([bare])
    assert found and {f.kind for f in found} == {"consistency"}
    assert all(f.verdict == "holds" for f in found)


# ---- consistency checks: identities that fire only on a measurement bug --------------------


def _layer_of_unit_vectors(rng, n: int, d: int, *, shift: float = 0.0) -> LayerPairs:
    u = rng.standard_normal((n, d)) + shift
    v = u + 0.5 * rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    off = ~np.eye(n, dtype=bool)
    cross = (u @ v.T)[off]
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    within = np.concatenate([(u @ u.T)[upper], (v @ v.T)[upper]])
    pos = np.einsum("ij,ij->i", u, v)

    def moments(x):
        return PairMoments(float(x.mean()), float(x.var()), int(x.size), False)

    return LayerPairs("projector", n, moments(pos), moments(cross), moments(within))


@pytest.mark.parametrize("key", IDENTITIES)
def test_identities_hold_on_any_unit_vectors_and_fire_on_a_planted_bug(key):
    identity = CLAIMS[key]
    assert isinstance(identity, Identity)
    rng = np.random.default_rng(7)
    for trial in range(50):
        n, d = int(rng.integers(3, 40)), int(rng.integers(2, 12))
        layer = _layer_of_unit_vectors(rng, n, d, shift=float(rng.uniform(0, 3)))
        slack = identity.slack(layer)
        assert slack is not None and slack >= -1e-12, (trial, slack)
    # a bug: the positives' mean reported one too high, the negatives too low
    layer = _layer_of_unit_vectors(rng, 20, 8)
    assert layer.positive is not None and layer.cross is not None and layer.within is not None
    bug = replace(
        layer,
        positive=replace(layer.positive, mean=layer.positive.mean + 1.0),
        cross=replace(layer.cross, mean=layer.cross.mean - 1.0),
        within=replace(layer.within, mean=layer.within.mean - 1.0),
    )
    (f,) = run_findings([RunData(label="r", layers=(bug,))], claims=[key])
    assert f.kind == "consistency" and f.verdict == "violated" and "measurement bug" in f.note
    (g,) = run_findings([RunData(label="r", layers=(layer,))], claims=[key])
    assert g.verdict == "holds"


def test_thm52_slack_is_the_closed_form():
    # 1 + E[cross] + 1/(n-1) - E[pos] = n/(n-1) [ tr Var(u - v)/2 + (|u_bar|^2 + |v_bar|^2)/2 ]
    rng = np.random.default_rng(3)
    n, d = 12, 5
    u = rng.standard_normal((n, d)) + 1.0
    v = u + 0.3 * rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    diff = u - v
    closed = (
        n
        / (n - 1)
        * (
            0.5 * diff.var(axis=0).sum()
            + 0.5 * (np.linalg.norm(u.mean(0)) ** 2 + np.linalg.norm(v.mean(0)) ** 2)
        )
    )
    off = ~np.eye(n, dtype=bool)
    layer = LayerPairs(
        "x",
        n,
        PairMoments(float(np.einsum("ij,ij->i", u, v).mean()), 0.0, n, False),
        PairMoments(float((u @ v.T)[off].mean()), 0.0, n * (n - 1), False),
        None,
    )
    assert CLAIMS["thm52_ceiling"].slack(layer) == pytest.approx(closed, abs=1e-12)  # type: ignore[union-attr]


def test_ratios_beyond_float_range_print_as_infinite():
    # a band whose upper end is subnormal (the variance 1e318 times it): no OverflowError
    runs = one_sample({**SIMCLR, "vrn": 0.0}, _log_var, math.log(0.1), 0.0, 0.01, band=(0, 1e-318))
    (f,) = run_findings(runs, claims=["band_distance"])
    assert f.effect == math.inf and "∞" in summary_lines([f])[0]


def test_an_accuracy_on_a_grid_has_at_least_its_rounding_for_noise():
    # every seed scores the same at each batch size on 450 test images: no spread over seeds,
    # yet the accuracies are rounded to a grid of 1/450, whose rounding alone has sd
    # 1/450/sqrt(12) (the floor cl-diag reproduce gives a grid statistic too)
    rounding = (1 / 450) / math.sqrt(12)
    slope = finding("batch_accuracy", 0.01, 0.0)
    sxx = len(SEEDS) * sum((math.log2(m) - 5) ** 2 for m in SIZES)  # log2 m = 4, 5, 6
    assert slope.se == pytest.approx(rounding / math.sqrt(sxx))
    assert "rounding of its grid" in slope.method
    # paired by seed: a difference of two values on the grid, both roundings
    gain = finding("vrn_accuracy", 0.01, 0.0)
    assert gain.se == pytest.approx(math.sqrt(2) * rounding / math.sqrt(len(SEEDS)))
    # a spread above the rounding is the spread itself
    noisy = finding("vrn_accuracy", 0.01, 0.01)
    assert noisy.se == pytest.approx(0.01 * np.std(NOISE, ddof=1) / math.sqrt(len(SEEDS)))
    assert "rounding" not in noisy.method
    # a continuous statistic has no grid: its spread of 0 stays 0
    centre = finding("toy_centre", 0.0, 0.0)
    assert centre.se is not None and centre.se < 1e-12


def test_ssem_claims_have_no_verdict_below_alpha_s():
    # (m, n, tau) = (4, 3, 0.2): alpha_s = 0.193 < alpha_c = 0.2047 (docs/ssem.md); below
    # alpha_s the optimum of variant B parts the views of an instance: out of scope
    def at(alpha: float) -> Ssem:
        base = _ssem(alpha, 0.0, regime="collapse")
        return replace(base, tau=0.2, m=4, n=3, alpha_c=0.2047, alpha_split=0.193)

    outside = [replace(r, ssem=at(0.15)) for r in ssem_collapse(0.0, 0.001)]
    (f,) = run_findings(outside, claims=["ssem_collapse"])
    assert f.verdict == NOT_APPLICABLE
    assert "α = 0.15 < α_s = 0.193: the optimum parts the views of an instance" in f.note
    inside = [replace(r, ssem=at(0.2)) for r in ssem_collapse(0.0, 0.001)]
    (g,) = run_findings(inside, claims=["ssem_collapse"])
    assert g.verdict == "supported", g.note
    # the region is recomputed from tau, m, n, p: a result written before alpha_split (None)
    # is judged the same way
    legacy = [replace(r, ssem=replace(at(0.15), alpha_split=None)) for r in outside]
    (h,) = run_findings(legacy, claims=["ssem_collapse"])
    assert h.verdict == NOT_APPLICABLE and "α_s = 0.193" in h.note


def test_optimum_claims_need_a_converged_run():
    # issue 32.2: a run still falling, or above the closed-form optimum loss, is not at the
    # optimum the source speaks of: not applicable, with the loss and the optimum named
    runs = CASES["ssem_collapse"].build(0.0, 0.001)
    above = [
        replace(r, loss=replace(r.loss, final=3.21, contrastive=3.21), optimum_loss=3.15)
        for r in runs
    ]
    (f,) = run_findings(above, claims=["ssem_collapse"])
    assert f.verdict == NOT_APPLICABLE
    assert "not converged: loss 3.21, optimum 3.15" in f.note
    # the summary line says what the runs show, not only what the claim needs
    assert "(here: not converged: loss 3.21, optimum 3.15)" in summary_lines([f])[0]
    at = [replace(r, loss=replace(r.loss, final=3.15 + GAP / 2), optimum_loss=3.15) for r in runs]
    (g,) = run_findings(at, claims=["ssem_collapse"])
    assert g.verdict != NOT_APPLICABLE, g.note
    unknown = [replace(r, loss=None) for r in runs]
    (h,) = run_findings(unknown, claims=["ssem_collapse"])
    assert h.verdict == NOT_APPLICABLE and "no training loss recorded" in h.note
    # the toy's claims: a plateau (no closed form for SimCLR + VRN on mini-batches of 2)
    toy = CASES["toy_centre"].build(-0.5, 0.001)
    falling = [
        replace(r, loss=replace(r.loss, change=0.43)) if not r.config.vrn.on else r for r in toy
    ]
    (k,) = run_findings(falling, claims=["toy_centre"])
    assert k.verdict == NOT_APPLICABLE and "the loss still falls 43 % ± 0 % per tenth" in k.note
    # flat within the plateau's 1 %, or within twice the noise of the windows' means beyond it
    flat = [replace(r, loss=replace(r.loss, change=PLATEAU)) for r in toy]
    (m,) = run_findings(flat, claims=["toy_centre"])
    assert m.verdict == "supported", m.note
    noisy = [replace(r, loss=replace(r.loss, change=-0.08, change_se=0.045)) for r in toy]
    (n,) = run_findings(noisy, claims=["toy_centre"])
    assert n.verdict == "supported", n.note
    rising = [replace(r, loss=replace(r.loss, change=-0.15, change_se=0.045)) for r in toy]
    (o,) = run_findings(rising, claims=["toy_centre"])
    assert o.verdict == NOT_APPLICABLE and "the loss still rises 15 % ± 4.5 % per tenth" in o.note
    # windows too noisy to resolve a 10 % change show no plateau, whatever their estimate
    blurred = [replace(r, loss=replace(r.loss, change=0.0, change_se=0.06)) for r in toy]
    (q,) = run_findings(blurred, claims=["toy_centre"])
    assert q.verdict == NOT_APPLICABLE and "cannot resolve a change of 10 %" in q.note
