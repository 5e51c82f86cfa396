"""The loss library's module form: options checked once at construction, the same
values as the functional API bit for bit, the structured option error, the learnable
sigmoid (SigLIP), the shared pair bookkeeping and the triplet miners."""

from __future__ import annotations

import math
import pickle

import pytest
import torch
import torch.nn.functional as F

import cl_diag.losses._common as common
from cl_diag.errors import UserError
from cl_diag.losses import (
    LOSSES,
    MINERS,
    BatchHardTriplets,
    ContrastiveLoss,
    DCLLoss,
    DHELLoss,
    HCLLoss,
    IndependentlyAdditive,
    InfoNCEFamily,
    InfoNCELoss,
    Loss,
    LossOptionError,
    Pairs,
    RegularisedLoss,
    SigmoidLoss,
    SimCLRLoss,
    SpectralLoss,
    SupCLLoss,
    SupConLoss,
    TripletLoss,
    VRNLoss,
    build_loss,
    global_loss,
)


def rand_pair(b=6, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, generator=g), torch.randn(b, d, generator=g)


LABELS = torch.tensor([0, 1, 0, 2, 1, 0])

# (name, hyper-parameters, module class): every named loss at non-default settings.
CASES = [
    ("infonce", {"temperature": 0.3}, InfoNCELoss),
    ("simclr", {"temperature": 0.07}, SimCLRLoss),
    ("dcl", {"temperature": 0.5}, DCLLoss),
    ("dhel", {"temperature": 0.25}, DHELLoss),
    ("sigmoid", {"temperature": 4.0, "bias": 1.5, "within_view": False}, SigmoidLoss),
    ("sigmoid", {"temperature": 2.0, "bias": -0.5, "within_view": True}, SigmoidLoss),
    ("spectral", {}, SpectralLoss),
    ("triplet", {"margin": 0.4, "mining": "all"}, TripletLoss),
    ("triplet", {"margin": 0.4, "mining": "semi-hard"}, TripletLoss),
    ("triplet", {"margin": 0.7, "mining": "batch-hard"}, TripletLoss),
    ("contrastive", {"margin": 0.8}, ContrastiveLoss),
    ("supcon", {"temperature": 0.2}, SupConLoss),
    ("supcl", {"temperature": 0.2, "alpha": 0.3}, SupCLLoss),
    ("hcl", {"temperature": 0.3, "beta": 2.0, "tau_plus": 0.05}, HCLLoss),
    ("vrn", {"delta": -0.1, "power": 2}, VRNLoss),
    ("vrn", {"delta": 0.05, "power": 3}, VRNLoss),
]
IDS = [f"{n}-{'-'.join(map(str, hp.values()))}" for n, hp, _ in CASES]


def _value_and_grads(fn, z1, z2, labels):
    a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    out = fn(a, b, labels)
    out.backward()
    return out.detach(), a.grad, b.grad


# --------------------------------------------------------------------------- same numbers
@pytest.mark.parametrize(("name", "hp", "cls"), CASES, ids=IDS)
@pytest.mark.parametrize("labelled", [False, True])
def test_module_equals_functional_bit_for_bit(name, hp, cls, labelled):
    z1, z2 = rand_pair(seed=3)
    y = LABELS if labelled else None
    functional = _value_and_grads(lambda a, b, lab: LOSSES[name](a, b, lab, **hp), z1, z2, y)
    for module in (cls(**hp), build_loss(name, **hp)):
        assert type(module) is cls
        got = _value_and_grads(module, z1, z2, y)
        for g, f in zip(got, functional, strict=True):
            assert torch.equal(g, f), (name, hp)
        assert got[0].dtype == torch.float32 and got[0].dim() == 0


def test_families_as_modules_equal_their_functional_calls():
    z1, z2 = rand_pair(seed=4)
    fam = InfoNCEFamily(c1=0.5, c2=2.0, psi="log", temperature=0.6)
    assert torch.equal(fam(z1, z2), InfoNCEFamily(0.5, 2.0, "log")(z1, z2, temperature=0.6))
    assert fam.hparams == {"temperature": 0.6} and fam.coefficients() == (0.5, 2.0)
    add = IndependentlyAdditive(phi=lambda s: s, psi=torch.exp, c1=1, c2=1)
    u, v = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
    off = ~torch.eye(6, dtype=torch.bool)
    want = (
        -(u * v).sum(1).mean()
        + torch.exp((u @ v.T)[off]).sum() / 30
        + (torch.exp((u @ u.T)[off]).sum() + torch.exp((v @ v.T)[off]).sum()) / 60
    )
    assert add(z1, z2).item() == pytest.approx(want.item(), rel=1e-6)


def test_global_loss_takes_a_configured_module():
    z1, z2 = rand_pair(seed=5)
    module = build_loss("supcon", temperature=0.3)
    assert torch.equal(
        global_loss(module, z1, z2, LABELS), LOSSES["supcon"](z1, z2, LABELS, temperature=0.3)
    )


def test_module_is_fp32_under_autocast():
    z1, z2 = rand_pair(8, 16, seed=2)
    module = build_loss("dcl", temperature=0.1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = module(z1.bfloat16(), z2.bfloat16())
    assert inside.dtype == torch.float32
    outside = module(z1.bfloat16().float(), z2.bfloat16().float())
    assert inside.item() == pytest.approx(outside.item(), rel=1e-6)


# --------------------------------------------------------------------------- checked once
def test_a_built_module_never_rechecks_its_options(monkeypatch):
    module = build_loss("triplet", margin=0.3, mining="semi-hard")
    z1, z2 = rand_pair()

    def boom(*args, **kwargs):
        raise AssertionError("option check in the hot path")

    monkeypatch.setattr(common, "_coerce", boom)
    monkeypatch.setattr(Loss, "resolve", boom)
    assert module(z1, z2, LABELS).dim() == 0
    with pytest.raises(AssertionError, match="hot path"):  # the functional form does check
        LOSSES["triplet"](z1, z2, margin=0.3)


def test_configure_leaves_the_registry_entry_alone():
    module = build_loss("simclr", temperature=0.5)
    assert module is not LOSSES["simclr"]
    assert LOSSES["simclr"].hparams == {"temperature": 0.2}
    assert module.hparams == module.defaults == {"temperature": 0.5}
    assert module.hyperparameters[0].default == 0.5
    assert type(LOSSES["simclr"]).hyperparameters[0].default == 0.2
    # a call may still override, for that call only
    z1, z2 = rand_pair()
    assert torch.equal(module(z1, z2, temperature=0.2), LOSSES["simclr"](z1, z2))
    assert module.hparams == {"temperature": 0.5}
    assert repr(module) == "SimCLRLoss(temperature=0.5)"


def test_build_loss_fills_the_defaults_of_what_is_not_given():
    assert build_loss("sigmoid", bias=2.0).hparams == {
        "temperature": 1.0,
        "bias": 2.0,
        "within_view": False,
    }
    assert build_loss("triplet", mining="batch-hard").hparams == {
        "margin": 0.2,
        "mining": "batch-hard",
    }
    assert build_loss("sigmoid", within_view=True).negatives == "both"
    assert LOSSES["sigmoid"].negatives == "cross"


# --------------------------------------------------------------------------- structured errors
@pytest.mark.parametrize(
    ("build", "option", "message"),
    [
        (
            lambda: SimCLRLoss(temperature=0.0),
            "temperature",
            "simclr: temperature must be a finite number > 0, got 0.0",
        ),
        (
            lambda: build_loss("supcon", temperature=float("nan")),
            "temperature",
            "supcon: temperature must be a finite",
        ),
        (
            lambda: TripletLoss(mining="hardest"),
            "mining",
            "triplet: mining='hardest' is not one of 'all', 'semi-hard', 'batch-hard'",
        ),
        (
            lambda: ContrastiveLoss(margin=-0.1),
            "margin",
            "contrastive: margin must be a finite number >= 0",
        ),
        (lambda: VRNLoss(power=0.5), "power", "vrn: power must be a finite number >= 1"),
        (lambda: VRNLoss(delta=1.5), "delta", r"vrn: delta must lie in \[-1, 1\]"),
        (
            lambda: SigmoidLoss(within_view="yes"),
            "within_view",
            "sigmoid: within_view must be True or False",
        ),
        (lambda: SigmoidLoss(bias=float("inf")), "bias", "sigmoid: bias must be a finite number"),
        (lambda: SigmoidLoss(learnable=1), "learnable", "sigmoid: learnable must be True or False"),
        (
            lambda: build_loss("simclr", tau=0.1),
            "tau",
            "simclr does not take tau; its hyper-parameters are: temperature",
        ),
        (lambda: build_loss("spectral", margin=1.0), "margin", "hyper-parameters are: none"),
        (
            lambda: build_loss("ntxent"),
            "loss",
            "unknown loss 'ntxent'; choose one of: contrastive, dcl",
        ),
        (lambda: InfoNCEFamily(1, 1, psi="exp"), "psi", "psi must be one of"),
        (lambda: InfoNCEFamily(-1, 1), "c1", "must be finite, >= 0 and not both 0"),
        (lambda: InfoNCEFamily(1, float("nan")), "c2", "must be finite, >= 0"),
        (lambda: InfoNCEFamily(0, 0), "c1", "not both 0"),
        (lambda: IndependentlyAdditive(phi=torch.sin), "psi", "needs both phi and psi"),
    ],
)
def test_option_errors_are_structured_and_raised_at_construction(build, option, message):
    with pytest.raises(LossOptionError, match=message) as info:
        build()
    err = info.value
    assert err.option == option
    assert isinstance(err, UserError) and isinstance(err, ValueError) and err.exit_code == 2
    assert str(err) == err.message


def test_per_call_option_errors_are_structured_too():
    with pytest.raises(LossOptionError) as info:
        LOSSES["triplet"](*rand_pair(), margin=0.1, mining="hard")
    assert (info.value.option, info.value.loss) == ("mining", "triplet")
    with pytest.raises(LossOptionError) as info:
        LOSSES["vrn"](*rand_pair(), bogus=1, alpha=2)
    assert info.value.option == "alpha"  # the first unknown name, sorted


def test_option_error_pickles_with_its_option():
    err = LossOptionError("simclr: temperature must be > 0", option="temperature", loss="simclr")
    back = pickle.loads(pickle.dumps(err))
    assert (str(back), back.option, back.loss) == (str(err), "temperature", "simclr")


def test_train_config_names_the_cli_option_from_the_error():
    from cl_diag.orchestration.train import TrainConfig, resolve_config

    want = r"^simclr: temperature must be a finite number > 0, got -1.0 \(option --temperature\)\.$"
    with pytest.raises(UserError, match=want):
        resolve_config(TrainConfig(dataset="toy", temperature=-1.0))
    with pytest.raises(
        UserError,
        match=r"not one of 'all', 'semi-hard', 'batch-hard' "
        r"\(option --mining\)\.$",
    ):
        resolve_config(TrainConfig(dataset="toy", loss="triplet", mining="hard"))


# --------------------------------------------------------------------------- learnable sigmoid
def test_learnable_sigmoid_starts_at_siglip_initialisation():
    loss = SigmoidLoss(learnable=True)
    params = dict(loss.named_parameters())
    assert set(params) == {"log_temperature", "bias"}
    assert params["log_temperature"].item() == pytest.approx(math.log(10.0), rel=1e-7)
    assert params["bias"].item() == 10.0  # paper sign: SigLIP's b = -10
    assert all(p.dtype == torch.float32 and p.requires_grad for p in params.values())
    assert set(loss.state_dict()) == {"log_temperature", "bias"}
    z1, z2 = rand_pair(seed=7)
    fixed = SigmoidLoss(temperature=10.0, bias=10.0)
    assert loss(z1, z2).item() == pytest.approx(fixed(z1, z2).item(), rel=1e-6)
    assert not list(LOSSES["sigmoid"].parameters())  # the fixed form has none
    # given values are the starting point
    start = SigmoidLoss(temperature=2.0, bias=-3.0, learnable=True)
    assert start.hparams["temperature"] == pytest.approx(2.0) and start.hparams["bias"] == -3.0
    assert build_loss("sigmoid", learnable=True, within_view=True).learnable
    assert build_loss("sigmoid", learnable=True).hparams["bias"] == 10.0


def test_learnable_sigmoid_gradients_match_the_hand_derivatives():
    # L = (1/B) sum_i sp(b - t s_ii) + (1/B) sum_{i != j} sp(t s_ij - b), t = exp(t'):
    # dL/db  = (1/B) sum_i sig(b - t s_ii) - (1/B) sum_{i != j} sig(t s_ij - b)
    # dL/dt' = t [ -(1/B) sum_i s_ii sig(b - t s_ii) + (1/B) sum_{i != j} s_ij sig(t s_ij - b) ]
    z1, z2 = rand_pair(5, 4, seed=8)
    loss = SigmoidLoss(temperature=3.0, bias=0.5, learnable=True)
    loss(z1, z2).backward()
    s = F.normalize(z1.double(), dim=1) @ F.normalize(z2.double(), dim=1).T
    t, b, n = 3.0, 0.5, 5
    pos, neg = s.diagonal(), s[~torch.eye(n, dtype=torch.bool)]
    d_b = (torch.sigmoid(b - t * pos).sum() - torch.sigmoid(t * neg - b).sum()) / n
    d_t = (-(pos * torch.sigmoid(b - t * pos)).sum() + (neg * torch.sigmoid(t * neg - b)).sum()) / n
    assert loss.bias.grad.item() == pytest.approx(d_b.item(), rel=1e-4)
    assert loss.log_temperature.grad.item() == pytest.approx(t * d_t.item(), rel=1e-4)


def test_sgd_moves_the_learned_temperature_and_bias_and_lowers_the_loss():
    z1, z2 = rand_pair(8, 6, seed=9)
    z2 = z1 + 0.3 * z2  # aligned positives: separable, so t should grow
    loss = SigmoidLoss(learnable=True)
    opt = torch.optim.SGD(loss.parameters(), lr=0.02)
    first = loss(z1, z2).item()
    for _ in range(5):
        opt.zero_grad()
        value = loss(z1, z2)
        value.backward()
        opt.step()
    assert loss(z1, z2).item() < first
    # b falls from +10 (positives' logit t*s - b is what the loss raises) and t moves
    assert loss.hparams["bias"] < 10.0
    assert loss.hparams["temperature"] != pytest.approx(10.0, abs=1e-3)


def test_learnable_sigmoid_refuses_per_call_temperature_and_bias():
    loss = SigmoidLoss(learnable=True)
    with pytest.raises(LossOptionError, match="bias, temperature are learned") as info:
        loss(*rand_pair(), temperature=1.0, bias=0.0)
    assert info.value.option == "bias"
    assert loss(*rand_pair(), within_view=True).dim() == 0  # other options still may be


def test_learnable_sigmoid_runs_on_the_global_batch_and_configures_to_a_copy():
    z1, z2 = rand_pair(seed=10)
    loss = SigmoidLoss(learnable=True)
    value = global_loss(loss, z1, z2)
    value.backward()
    assert loss.bias.grad is not None and torch.isfinite(loss.bias.grad)
    copy = loss.configure(within_view=True)
    assert copy.bias is not loss.bias and copy.bias.item() == loss.bias.item()
    assert copy.coefficients() == (1.0, 1.0) and loss.coefficients() == (1.0, 0.0)


# --------------------------------------------------------------------------- pair bookkeeping
def test_pairs_masks_by_hand():
    p = Pairs.of_views(batch=3, labels=torch.tensor([5, 7, 5]))
    assert p.size == 6 and p.ids.tolist() == [5, 7, 5, 5, 7, 5]
    assert p.instances.tolist() == [0, 1, 2, 0, 1, 2]
    assert p.positive.nonzero().tolist() == [
        [0, 2],
        [0, 3],
        [0, 5],
        [1, 4],
        [2, 0],
        [2, 3],
        [2, 5],
        [3, 0],
        [3, 2],
        [3, 5],
        [4, 1],
        [5, 0],
        [5, 2],
        [5, 3],
    ]
    assert torch.equal(p.negative, ~(p.positive | p.self_mask))
    assert p.other_views.nonzero().tolist() == [[0, 3], [1, 4], [2, 5], [3, 0], [4, 1], [5, 2]]
    unlabelled = Pairs.of_views(batch=3)
    assert torch.equal(unlabelled.positive, unlabelled.other_views)
    three = Pairs.of_views(batch=2, views=3)  # multi-view: every other view is a positive
    assert three.positive.sum(1).tolist() == [2] * 6
    assert three.negative.sum(1).tolist() == [3] * 6


def test_miners_are_the_mining_choices():
    choices = TripletLoss.hyperparameters[1].choices
    assert tuple(MINERS) == choices == ("all", "semi-hard", "batch-hard")
    assert isinstance(MINERS["batch-hard"], BatchHardTriplets)


def test_batch_hard_miner_picks_the_farthest_positive_and_nearest_negative():
    dist = torch.tensor(
        [[0.0, 0.3, 0.9, 0.5], [0.3, 0.0, 0.2, 0.8], [0.9, 0.2, 0.0, 0.4], [0.5, 0.8, 0.4, 0.0]]
    )
    pairs = Pairs(torch.tensor([0, 0, 1, 1]), torch.arange(4))
    ((d_ap, d_an, chosen),) = MINERS["batch-hard"].mine(dist, pairs, margin=0.1)
    assert d_ap.tolist() == pytest.approx([0.3, 0.3, 0.4, 0.4])
    assert d_an.tolist() == pytest.approx([0.5, 0.2, 0.2, 0.5])
    assert chosen is None
    blocks = list(MINERS["semi-hard"].mine(dist, pairs, margin=0.25))
    # semi-hard: d_ap < d_an < d_ap + 0.25 -> (a=0,p=1,n=3): 0.3 < 0.5 < 0.55 and
    # (a=3,p=2,n=0): 0.4 < 0.5 < 0.65; nothing else
    chosen = torch.cat([c.reshape(-1) for _, _, c in blocks])
    assert int(chosen.sum()) == 2


# --------------------------------------------------------------------------- the trainer
def test_the_trainer_checks_the_loss_options_once_not_per_step(tmp_path, monkeypatch):
    from cl_diag.orchestration.train import TrainConfig, train

    calls = {"n": 0}
    real = common._coerce

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(common, "_coerce", counting)
    counts = []
    for steps in (2, 8):
        calls["n"] = 0
        train(
            TrainConfig(
                dataset="toy",
                num_samples=8,
                batch_size=4,
                steps=steps,
                vrn=1.0,
                out=str(tmp_path / str(steps)),
                quiet=True,
            )
        )
        counts.append(calls["n"])
    assert counts[0] == counts[1] > 0


# --------------------------------------------------------------------------- loss + lambda R
def _regularised_vs_separate(name, hp, *, labels=None, **batch_args):
    """(RegularisedLoss's total, main, reg and input gradients) and the same computed by the two
    modules separately."""
    z1, z2 = rand_pair(seed=5)
    extra = [t.clone().requires_grad_() for t in batch_args.pop("extra_views", [])]
    loss, vrn = build_loss(name, **hp), VRNLoss(delta=-0.2)
    out = []
    for fused in (True, False):
        a, b = z1.clone().requires_grad_(), z2.clone().requires_grad_()
        args = dict(batch_args, **({"extra_views": extra} if extra else {}))
        if fused:
            total, main, reg = RegularisedLoss(loss, vrn, 30.0)(a, b, labels, **args)
        else:
            main, reg = loss(a, b, labels, **args), vrn(a, b, labels, **args)
            total = main + 30.0 * reg
        grads = torch.autograd.grad(total, [a, b, *extra])
        out.append((total.detach(), main.detach(), reg.detach(), grads))
    return out


@pytest.mark.parametrize(("name", "hp", "cls"), [c for c in CASES if c[0] != "vrn"], ids=IDS[:-2])
def test_regularised_loss_gives_each_term_bit_for_bit_and_the_same_gradient(name, hp, cls):
    fused, separate = _regularised_vs_separate(name, hp, labels=LABELS)
    for got, want in zip(fused[:3], separate[:3], strict=True):
        assert torch.equal(got, want), name  # the values: the same rows, the same operations
    assert fused[0] == fused[1] + 30.0 * fused[2]
    for got, want in zip(fused[3], separate[3], strict=True):  # one normalisation's backward
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_regularised_loss_with_a_queue_and_with_more_views():
    g = torch.Generator().manual_seed(7)
    keys = (torch.randn(4, 5, generator=g), torch.randn(4, 5, generator=g))
    for name in ("simclr", "dcl"):
        fused, separate = _regularised_vs_separate(name, {"temperature": 0.3}, queue=keys)
        assert all(torch.equal(a, b) for a, b in zip(fused[:3], separate[:3], strict=True))
        for got, want in zip(fused[3], separate[3], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    third = torch.randn(6, 5, generator=g)
    fused, separate = _regularised_vs_separate("supcon", {}, labels=LABELS, extra_views=[third])
    assert all(torch.equal(a, b) for a, b in zip(fused[:3], separate[:3], strict=True))
    assert len(fused[3]) == 3  # the third view gets its gradient too
    for got, want in zip(fused[3], separate[3], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_regularised_loss_refuses_a_bad_weight_and_what_the_loss_cannot_take():
    for weight in (-1.0, math.nan, math.inf):
        with pytest.raises(LossOptionError) as err:
            RegularisedLoss(SimCLRLoss(), VRNLoss(), weight)
        assert err.value.option == "weight"
    z1, z2 = rand_pair()
    with pytest.raises(LossOptionError) as err:  # dhel has no queue negatives
        RegularisedLoss(DHELLoss(), VRNLoss(), 1.0)(z1, z2, queue=(z1[:2], z2[:2]))
    assert err.value.option == "queue"
    # a batch prepared with a queue cannot be given to a loss that takes none
    batch = SimCLRLoss().prepare(z1, z2, queue=(z1[:2], z2[:2]))
    with pytest.raises(LossOptionError):
        DHELLoss().on_unit(batch)


def test_regularised_loss_calls_a_plain_callable_as_it_is():
    calls = []

    def mean_cos(z1, z2, labels=None):
        calls.append(1)
        return F.cosine_similarity(z1, z2).mean()

    z1, z2 = rand_pair()
    total, main, reg = RegularisedLoss(
        common.CallableLoss(mean_cos, "mean_cos", {}), VRNLoss(), 2.0
    )(z1, z2)
    assert calls == [1] and torch.equal(main, mean_cos(z1, z2))
    assert torch.equal(reg, VRNLoss()(z1, z2)) and torch.equal(total, main + 2.0 * reg)


def test_fit_trains_with_one_normalisation_for_loss_and_vrn(monkeypatch):
    """--vrn: the loop normalises the views once for both terms (RegularisedLoss), not twice."""
    from cl_diag.models import build_model
    from cl_diag.orchestration.train import TrainConfig, resolve_config
    from cl_diag.runtime import Runtime
    from cl_diag.training.data import training_data
    from cl_diag.training.loop import fit

    prepared = []
    real = Loss.prepare

    def counting(self, *args, **kwargs):
        prepared.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Loss, "prepare", counting)
    data = training_data("digits", seed=0, num_samples=64)
    config = resolve_config(
        TrainConfig(dataset="digits", batch_size=32, epochs=1, vrn=30.0, quiet=True),
        n_train=data.n_train,
    )
    result = fit(config, build_model(config, seed=0), data, None, env=Runtime(torch.device("cpu")))
    assert result.steps == 2 and prepared == ["simclr", "simclr"]  # one preparation a step
    row = result.history[-1]
    assert row["loss"] == pytest.approx(row["contrastive"] + 30 * row["vrn"], rel=1e-5)
