"""Whether a run reached its loss's optimum (issue 32.2): the loss trend read from a
checkpoint's metrics rows, the closed-form optimum losses, and the claims' preconditions."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from cl_diag.losses import LOSSES
from cl_diag.measurement.convergence import loss_trend, plateaued
from cl_diag.measurement.ssem import ssem_loss
from cl_diag.measurement.theory import sigmoid_optimum, sigmoid_optimum_loss
from cl_diag.models.subject import _loss_record
from cl_diag.result import TrainingLoss


def _rows(values: list[float], every: int = 1) -> list[dict]:
    """Metrics rows of ``every`` steps each, the row's loss the mean of its steps'."""
    rows = []
    for i in range(0, len(values), every):
        chunk = values[i : i + every]
        rows.append({"epoch": 1, "step": i + len(chunk), "loss": sum(chunk) / len(chunk)})
    return rows


def test_the_trend_compares_the_last_tenth_of_the_steps_with_the_tenth_before():
    # 100 steps of loss 3 - 0.01 s: the last 10 average 2.045, the 10 before 2.145; their
    # centres lie 10 steps apart, a tenth of the training: a change of 0.1 / 2.045 per tenth
    values = [3.0 - 0.01 * s for s in range(1, 101)]
    trend = loss_trend(_rows(values))
    assert trend is not None
    assert (trend.steps, trend.final_steps, trend.before_steps) == (100, 10, 10)
    assert trend.final == pytest.approx(2.045) and trend.before == pytest.approx(2.145)
    assert trend.change == pytest.approx(0.1 / 2.045)
    # the rows of a straight line spread about each window's mean by the trend alone: the
    # standard error of a mean of 10 equally weighted rows, sqrt(10/9 sum (x - mean)^2) / 10
    window = values[-10:]
    se = math.sqrt(10 / 9 * sum((x - sum(window) / 10) ** 2 for x in window)) / 10
    assert trend.change_se == pytest.approx(math.sqrt(2) * se / 2.045)
    assert not trend.plateaued
    flat = loss_trend(_rows([2.0] * 100))
    assert flat is not None and flat.change == 0.0 and flat.plateaued


def test_coarse_rows_widen_the_windows_and_never_share_a_row():
    # rows of 13 steps (an epoch) and 81 steps: each window takes whole rows, at least 9 steps
    values = [3.0 - 0.01 * s for s in range(1, 82)]
    trend = loss_trend(_rows(values, every=13))
    assert trend is not None
    assert trend.final_steps == 3 + 13 and trend.before_steps == 13  # rows (65, 78] + (78, 81]
    # a straight line: the change per tenth is the slope times a tenth over the final mean,
    # whatever the windows' widths
    assert trend.change == pytest.approx(0.01 * 8.1 / trend.final)


def test_a_noisy_level_is_a_plateau_and_a_fall_beyond_the_noise_is_not():
    # mini-batch noise about a level: rows of 2 steps scattered by 0.2 about 2; the change
    # estimate (3.3 %) is noise within twice its standard error (4.5 %)
    z = np.random.default_rng(3).standard_normal(100)
    rows = [{"step": 2 * i + 2, "loss": 2.0 + 0.2 * z[i]} for i in range(100)]
    trend = loss_trend(rows)
    assert trend is not None and trend.change_se == pytest.approx(0.04505, abs=1e-4)
    assert abs(trend.change) > 0.01 and trend.plateaued  # beyond 1 %, within its noise
    # the same noise on a loss falling 0.02 a step (20 % per tenth) is not a plateau
    falling = [{"step": r["step"], "loss": r["loss"] + 0.02 * (200 - r["step"])} for r in rows]
    fell = loss_trend(falling)
    assert fell is not None and fell.change > 0.15 and not fell.plateaued
    assert not plateaued(0.05, 0.01) and plateaued(0.05, 0.025) and plateaued(-0.01, 0.0)
    assert not plateaued(0.0, 0.051)  # the windows cannot resolve a 10 % change


def test_too_few_rows_or_no_loss_give_no_trend():
    assert loss_trend([]) is None
    assert loss_trend([{"step": 10, "loss": 1.0}]) is None  # one row: one window
    assert loss_trend([{"step": 5, "vrn": 1.0}, {"step": 10, "vrn": 1.0}]) is None
    # a non-finite row is skipped, not averaged
    rows = [*_rows([2.0] * 20), {"step": 21, "loss": math.nan}]
    trend = loss_trend(rows)
    assert trend is not None and trend.final == 2.0


def test_the_checkpoint_record_holds_the_contrastive_term_too():
    rows = [{"step": s, "loss": 2.0 + 0.5, "contrastive": 2.0, "vrn": 0.1} for s in range(1, 41)]
    record = _loss_record(rows)
    assert record is not None
    assert record["final"] == 2.5 and record["contrastive"] == 2.0 and record["change"] == 0.0
    assert TrainingLoss.from_dict(record).final_steps == 4 and record["change_se"] == 0.0
    assert _loss_record([]) is None


@pytest.mark.parametrize(("t", "b"), [(1.0, 1.0), (1.0, -1.0), (4.0, 1.0)])
def test_the_sigmoid_optimum_loss_is_the_loss_at_the_ccem_optimum(t, b):
    # an independent check: the loss module itself on the constant-embedding model's
    # configuration at x* (paper-notes 11.1): u_i = √(1−x) e + √x w_i, v_i = −√(1−x) e + √x w_i
    # with w a simplex ETF orthogonal to e, so s_pos = 2x − 1 and s_neg = x (N−2)/(N−1) − 1
    n = 4
    opt = sigmoid_optimum(t, b, n)
    x = opt.x
    eye = torch.eye(n + 1, dtype=torch.float64)
    e, basis = eye[0], eye[1:]
    w = math.sqrt(n / (n - 1)) * (basis - basis.mean(0))
    u = math.sqrt(1 - x) * e + math.sqrt(x) * w
    v = -math.sqrt(1 - x) * e + math.sqrt(x) * w
    assert float((u * v).sum(1).mean()) == pytest.approx(opt.s_pos)
    assert float(u[0] @ v[1]) == pytest.approx(opt.s_neg)
    loss = LOSSES["sigmoid"](u, v, temperature=t, bias=b, within_view=False)
    assert float(loss) == pytest.approx(sigmoid_optimum_loss(t, b, n), rel=1e-6)  # fp32


def test_the_ssem_optimum_loss_is_the_supcl_losss_floor_on_its_batch():
    # the SSEM's batch loss at beta* is no more than at any other beta (the optimum)
    for alpha in (0.0, 0.3, 1.0):
        from cl_diag.measurement.ssem import ssem_optimum

        best = ssem_optimum(alpha, 0.3, 10, 10, 2)
        floor = ssem_loss(best.beta, alpha, 0.3, 10, 10, 2)
        assert all(floor <= ssem_loss(b / 20, alpha, 0.3, 10, 10, 2) + 1e-12 for b in range(21))


@pytest.mark.slow
def test_an_analysed_checkpoint_records_its_loss_trend(tmp_path, run_cli):
    out = tmp_path / "toy"
    args = ("--dataset", "toy", "--loss", "simclr", "--batch-size", "2", "--steps", "20")
    assert run_cli("train", *args, "--lr", "0.5", "--out", out, "-q").code == 0
    assert run_cli("analyze", out / "last.pt", "--out", tmp_path / "a", "-q").code == 0
    recorded = json.loads((tmp_path / "a" / "result.json").read_text())["source"]["loss"]
    rows = torch.load(out / "last.pt", weights_only=True)["metrics"]
    assert recorded == {**_loss_record(rows), "contrastive": pytest.approx(recorded["final"])}
    assert recorded["steps"] == 20 and recorded["final_steps"] == 2
