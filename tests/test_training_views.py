"""``cl-diag train --views V``: V augmented views per instance in the multi-positive losses."""

from __future__ import annotations

import math

import pytest
import torch

from cl_diag.errors import UserError
from cl_diag.losses import LOSSES
from cl_diag.orchestration.train import TrainConfig, resolve_config, train
from cl_diag.training.augment import train_transform
from cl_diag.training.checkpoint import load_checkpoint
from cl_diag.training.data import TwoViews, load_dataset

SMALL = dict(num_samples=64, batch_size=16, steps=2, warmup_epochs=0.0, quiet=True)


def test_the_first_two_of_v_views_are_the_two_views():
    base = load_dataset("digits", "train")
    two = TwoViews(base, train_transform("digits", None), seed=4)
    three = TwoViews(base, train_transform("digits", None), seed=4, views=3)
    a, b = two[(1, 7)], three[(1, 7)]
    assert len(a) == 4 and len(b) == 5 and a[0] == b[0] == 7 and a[-1] == b[-1]
    assert torch.equal(a[1], b[1]) and torch.equal(a[2], b[2])
    assert not torch.equal(b[3], b[1]) and not torch.equal(b[3], b[2])


@pytest.mark.parametrize("loss", ["simclr", "infonce", "supcon"])
def test_three_views_train_and_are_recorded(tmp_path, loss):
    r = train(TrainConfig(loss=loss, views=3, vrn=3.0, out=str(tmp_path), **SMALL))
    row = r.history[-1]
    assert r.steps == 2 and math.isfinite(row["loss"])
    assert row["loss"] == pytest.approx(row["contrastive"] + 3 * row["vrn"], rel=1e-5)
    assert load_checkpoint(tmp_path / "last.pt")["config"]["views"] == 3


def test_the_first_step_loss_is_the_three_view_loss_of_the_batch(tmp_path):
    # One step at lr ~ 0 (constant schedule, no warm-up): the logged loss is the loss of the
    # initial model on the first batch's three views, recomputed here from the same data.
    from cl_diag.models import build_model
    from cl_diag.training.data import training_data
    from cl_diag.training.loop import EpochBatchSampler

    options = TrainConfig(
        views=3,
        steps=1,
        lr=1e-12,
        schedule="constant",
        warmup_epochs=0.0,
        num_samples=48,
        batch_size=16,
        out=str(tmp_path),
        quiet=True,
        seed=2,
    )
    r = train(options)
    c = resolve_config(options)
    data = training_data("digits", seed=2, num_samples=48, views=3)
    model = build_model(c, seed=2)
    keys = next(iter(EpochBatchSampler(48, 16, 2)))
    items = [data.train_set[k] for k in keys]
    x = torch.cat([torch.stack([it[v] for it in items]) for v in (1, 2, 3)])
    model.train()
    z = model(x).float().chunk(3)
    want = LOSSES["simclr"](z[0], z[1], temperature=0.2, extra_views=[z[2]]).item()
    assert r.history[-1]["loss"] == pytest.approx(want, rel=1e-5)


def test_view_option_errors():
    with pytest.raises(UserError, match="takes two views"):
        resolve_config(TrainConfig(loss="dcl", views=3))
    with pytest.raises(UserError, match="toy"):
        resolve_config(TrainConfig(dataset="toy", arch="embedding", views=3))
    with pytest.raises(UserError, match=r"--views 1 must be in \[2, 64\]"):
        resolve_config(TrainConfig(views=1))
