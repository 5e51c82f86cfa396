"""The Lightning callback: a tiny LightningModule trained a few steps on CPU logs the monitor's
row every log_every steps, found through each documented hook."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("lightning")

import lightning.pytorch as pl
from lightning.pytorch.loggers import Logger

from cl_diag.errors import UserError
from cl_diag.integrations.lightning import MonitorCallback
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

    def training_step(self, batch, batch_idx):
        x1, x2 = batch
        z1, z2 = self.net(x1), self.net(x2)
        self.seen.append((z1.detach().clone(), z2.detach().clone()))
        u, v = torch.nn.functional.normalize(z1, dim=1), torch.nn.functional.normalize(z2, dim=1)
        loss = torch.nn.functional.cross_entropy(u @ v.T / 0.5, torch.arange(len(u)))
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


def _fit(module: pl.LightningModule, steps: int = 6) -> tuple[Capture, MonitorCallback]:
    logger, callback = Capture(), MonitorCallback(n_ref=N, log_every=2)  # one line for the user
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        logger=logger,
        log_every_n_steps=2,  # = log_every: each row reaches the logger once
        callbacks=[callback],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, _loader())
    return logger, callback


@pytest.mark.parametrize("module", [Tiny("z1z2"), Tiny("solo"), WithHook("hook")])
def test_callback_logs_the_monitor_row_every_log_every_steps(module):
    logger, callback = _fit(module)
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
