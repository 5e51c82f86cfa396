"""The Lightning callback: a tiny LightningModule trained a few steps on CPU logs the monitor's
row every log_every steps, found through each documented hook, with the training step's loss;
a Trainer whose logging cadence would drop rows gets a warning that names what to set."""

from __future__ import annotations

import warnings

import pytest
import torch

pytest.importorskip("lightning")

import lightning.pytorch as pl
from lightning.pytorch.loggers import Logger

from cl_diag.errors import UserError
from cl_diag.integrations.lightning import MonitorCallback, cadence_problem
from cl_diag.measurement.monitor import Monitor

N, D, BATCH = 48, 6, 8


class Capture(Logger):
    """A logger that keeps what Lightning hands it."""

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[int, dict[str, float]]] = []

    @property
    def name(self) -> str:
        return "capture"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.logged.append((int(step or 0), dict(metrics)))


class Tiny(pl.LightningModule):
    """Two noisy views of fixed vectors through one linear layer; SimCLR-like loss."""

    def __init__(self, style: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Linear(D, 4)
        self.style = style
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        x1, x2 = batch
        z1, z2 = self.net(x1), self.net(x2)
        self.seen.append((z1.detach().clone(), z2.detach().clone()))
        u, v = torch.nn.functional.normalize(z1, dim=1), torch.nn.functional.normalize(z2, dim=1)
        loss = torch.nn.functional.cross_entropy(u @ v.T / 0.5, torch.arange(len(u)))
        self.losses.append(float(loss))
        if self.style == "z1z2":
            return {"loss": loss, "z1": z1, "z2": z2}
        if self.style == "solo":  # solo-learn's methods return the crops' projections as "z"
            return {"loss": loss, "z": [z1, z2]}
        self._last = (z1, z2)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class WithHook(Tiny):
    def cl_diag_views(self, outputs, batch):
        return self._last


def _loader() -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(N, D, generator=g)
    views = torch.utils.data.TensorDataset(
        x + 0.1 * torch.randn(N, D, generator=g), x + 0.1 * torch.randn(N, D, generator=g)
    )
    return torch.utils.data.DataLoader(views, batch_size=BATCH)


def _fit(
    module: pl.LightningModule,
    steps: int = 6,
    *,
    log_every: int = 2,
    log_every_n_steps: int = 2,  # = log_every: each row reaches the logger once
    **trainer_options,
) -> tuple[Capture, MonitorCallback]:
    logger = Capture()
    callback = MonitorCallback(n_ref=N, log_every=log_every)  # one line for the user
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        log_every_n_steps=log_every_n_steps,
        callbacks=[callback],
        **{"logger": logger, **trainer_options},
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, _loader())
    return logger, callback


@pytest.mark.parametrize("module", [Tiny("z1z2"), Tiny("solo"), WithHook("hook")])
def test_callback_logs_the_monitor_row_every_log_every_steps(module):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logger, callback = _fit(module)
    assert not [w for w in caught if "MonitorCallback(" in str(w.message)]  # cadences agree
    rows = [(step, m) for step, m in logger.logged if any(k.startswith("cl_diag/") for k in m)]
    assert [step for step, _ in rows] == [1, 3, 5]  # Lightning's 0-based step of batches 2, 4, 6
    keys = {
        "cl_diag/pos_mean",
        "cl_diag/pos_var",
        "cl_diag/cross_neg_mean",
        "cl_diag/cross_neg_var",
        "cl_diag/cross_neg_excessive_ratio",
        "cl_diag/within_neg_mean",
        "cl_diag/within_neg_var",
        "cl_diag/within_neg_excessive_ratio",
        "cl_diag/vrn",
        "cl_diag/seconds",
        "cl_diag/images_per_s",
    }
    for _, metrics in rows:
        assert keys <= set(metrics)
    # the values are a Monitor's over the same projections, two steps a row
    reference = Monitor(n_ref=N, log_every=2)
    expected = []
    for z1, z2 in module.seen:
        reference.update(z1, z2)
        if (row := reference.flush()) is not None:
            expected.append(row)
    assert len(expected) == 3 and len(callback.monitor.history) == 3
    for (_, metrics), row in zip(rows, expected, strict=True):
        for key in ("pos_mean", "cross_neg_var", "within_neg_excessive_ratio", "vrn"):
            assert metrics[f"cl_diag/{key}"] == pytest.approx(row[key], rel=1e-6, abs=1e-9)


def test_callback_without_a_hook_says_how_to_give_the_views():
    with pytest.raises(UserError, match="cl_diag_views"):
        _fit(Tiny("loss-only"), steps=1)


# --------------------------------------------------------------------------- cadence and loss


def test_a_mismatched_cadence_gets_a_warning_naming_what_to_set():
    # the case: the callback's 5 against the Trainer's default 50; a 12-step run
    with pytest.warns(
        UserWarning,
        match=r"MonitorCallback\(log_every=5\) closes a row every 5 training batches, but "
        r"Trainer\(log_every_n_steps=50\) hands logged values to the logger every 50 batches: "
        r"only 1 row in 10 reaches the logger .* set Trainer\(log_every_n_steps=5\)\.",
    ):
        logger, callback = _fit(Tiny("z1z2"), steps=12, log_every=5, log_every_n_steps=50)
    assert len(callback.monitor.history) == 2  # the rows were made ...
    assert not [m for _, m in logger.logged if "cl_diag/pos_mean" in m]  # ... and none logged
    # what the warning says to set logs every row at its step
    logger, _ = _fit(Tiny("z1z2"), steps=12, log_every=5, log_every_n_steps=5)
    logged = [step for step, m in logger.logged if "cl_diag/pos_mean" in m]
    assert logged == [4, 9]  # Lightning's 0-based step of batches 5 and 10


@pytest.mark.parametrize(
    "log_every, n, accumulate, fix",
    [
        (50, 50, 1, None),
        (100, 50, 1, None),  # every row still reaches the logger at its step
        (3, 2, 1, "set Trainer(log_every_n_steps=3)"),  # rows arrive late
        (0, 50, 1, "set MonitorCallback(log_every=50)"),  # no rows at all
        (5, 0, 1, "set Trainer(log_every_n_steps=5)"),  # the Trainer logs no steps
        (8, 2, 2, None),  # 2 optimiser steps of 2 batches = 4 batches: divides 8
        (6, 2, 4, "set MonitorCallback(log_every=8)"),
        (4, 4, 2, "set Trainer(log_every_n_steps=2)"),
    ],
)
def test_cadence_problem_says_what_to_set(log_every, n, accumulate, fix):
    problem = cadence_problem(log_every, n, accumulate)
    assert (problem is None) == (fix is None)
    if fix is not None:
        assert problem.endswith(fix + ".")


def test_no_logger_no_cadence_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit(Tiny("z1z2"), steps=4, log_every=5, log_every_n_steps=50, logger=False)
    assert not [w for w in caught if "MonitorCallback(" in str(w.message)]


@pytest.mark.parametrize("style", ["z1z2", "hook"])
def test_the_training_steps_loss_reaches_the_monitor(style):
    module = WithHook(style) if style == "hook" else Tiny(style)  # a dict / a bare tensor
    logger, callback = _fit(module)
    rows = callback.monitor.history
    assert len(rows) == 3 and len(module.losses) == 6
    for i, row in enumerate(rows):  # the mean of the row's two steps' losses
        assert row["loss"] == pytest.approx(sum(module.losses[2 * i : 2 * i + 2]) / 2, rel=1e-7)
    logged = [m["cl_diag/loss"] for _, m in logger.logged if "cl_diag/loss" in m]
    assert logged == pytest.approx([row["loss"] for row in rows], rel=1e-6)


def test_the_loss_is_the_training_steps_under_gradient_accumulation():
    # Lightning passes on loss / accumulate_grad_batches; the monitor gets the step's own loss
    module = Tiny("z1z2")
    _, callback = _fit(module, steps=3, log_every=2, log_every_n_steps=1, accumulate_grad_batches=2)
    rows = callback.monitor.history
    assert len(rows) == 3 and len(module.losses) == 6
    for i, row in enumerate(rows):
        assert row["loss"] == pytest.approx(sum(module.losses[2 * i : 2 * i + 2]) / 2, rel=1e-7)


def test_the_callbacks_csv_has_epoch_lr_and_loss_filled(tmp_path):
    import csv

    _, callback = _fit(Tiny("z1z2"), steps=8, log_every=2)  # 6 batches an epoch
    path = callback.monitor.to_csv(tmp_path / "metrics.csv")
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:3] == ["epoch", "step", "loss"] and "contrastive" not in rows[0]
    assert all(value != "" for row in rows for value in row.values())
    assert [r["epoch"] for r in rows] == ["1", "1", "1", "2"]
    assert {float(r["lr"]) for r in rows} == {0.1}  # Tiny's SGD learning rate
