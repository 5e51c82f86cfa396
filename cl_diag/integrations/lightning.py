"""cl-diag's training monitor as a Lightning callback (``pip install 'cl-diag[lightning]'``).

One line in a solo-learn, lightly or any other Lightning setup::

    from cl_diag.integrations.lightning import MonitorCallback

    trainer = lightning.Trainer(callbacks=[MonitorCallback(n_ref=len(train_set), log_every=50)])

After each training batch the callback gives the two views' projections to a
:class:`cl_diag.Monitor` (no host sync, detached, AMP- and DDP-safe) and every ``log_every``
batches logs its row with ``log_dict`` as ``cl_diag/<key>``. Lightning hands logged values to
the logger every ``log_every_n_steps``: set it to ``log_every`` (both default to 50);
:func:`cadence_problem` warns, naming the value to set, when rows would arrive late or not at
all. The loss ``training_step`` returns is averaged over the row's steps as ``loss`` (times
``accumulate_grad_batches``, which Lightning divides by), beside ``epoch`` and ``lr``, so
``callback.monitor.to_csv(path)`` writes the columns of ``cl-diag train``'s metrics.csv.

The projections are found, in this order: a method ``cl_diag_views(self, outputs, batch)`` of
the LightningModule returning ``(z1, z2)``; else ``training_step``'s outputs, a dict with
``"z1"`` and ``"z2"`` or with ``"z"``, a list of views whose first two are used (solo-learn's).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.measurement.monitor import Monitor

try:
    from lightning.pytorch import LightningModule, Trainer
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.utilities import rank_zero_warn
except ImportError as exc:  # an optional extra
    raise ImportError(
        "cl_diag.integrations.lightning needs Lightning: pip install 'cl-diag[lightning]'"
    ) from exc

__all__ = ["HOOK", "MonitorCallback", "cadence_problem", "loss_of", "views_of"]

#: the LightningModule method the callback asks first for the two views' projections
HOOK = "cl_diag_views"


class MonitorCallback(Callback):
    """Log cl-diag's in-batch pair statistics of every training batch's two views.

    ``n_ref`` (the number of training instances: the threshold delta = -1/(n_ref - 1) of the
    excessive ratios and the VRN value), ``log_every``, ``delta``, ``excessive`` and
    ``gather`` are :class:`cl_diag.Monitor`'s; ``prefix`` starts every logged key.
    """

    def __init__(
        self,
        n_ref: int | None = None,
        log_every: int = 50,
        *,
        delta: float | None = None,
        excessive: bool | None = None,
        gather: bool | None = None,
        prefix: str = "cl_diag/",
    ) -> None:
        super().__init__()
        self.monitor = Monitor(n_ref, log_every, delta=delta, excessive=excessive, gather=gather)
        self.prefix = prefix

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Warn when the Trainer's logging cadence would keep rows from its logger."""
        if not trainer.loggers:  # no logger: the rows are in callback_metrics and the monitor
            return
        problem = cadence_problem(
            self.monitor.log_every,
            # a Trainer attribute since Lightning 1.x, untyped (set in its logger connector)
            int(getattr(trainer, "log_every_n_steps", 50)),
            int(getattr(trainer, "accumulate_grad_batches", 1) or 1),
        )
        if problem is not None:
            rank_zero_warn(problem, category=UserWarning)

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        z1, z2 = views_of(pl_module, outputs, batch)
        loss = loss_of(outputs)
        accumulate = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        if loss is not None and accumulate > 1 and pl_module.automatic_optimization:
            loss = loss * accumulate  # Lightning hands on the loss divided by the accumulation
        lr = _learning_rate(trainer)
        if loss is None:
            self.monitor.update(z1, z2, lr=lr)
        else:
            self.monitor.update(z1, z2, lr=lr, loss=loss)
        row = self.monitor.flush(epoch=trainer.current_epoch + 1)
        if row is not None:
            # every rank holds the same row (the views are gathered): no sync_dist needed
            logged = {f"{self.prefix}{key}": float(value) for key, value in row.items()}
            logged.pop(f"{self.prefix}step")  # Lightning logs its own step
            pl_module.log_dict(logged, on_step=True, on_epoch=False)


def _learning_rate(trainer: Trainer) -> float | None:
    """The first optimiser's first parameter group's learning rate, as the step used it."""
    optimizers = getattr(trainer, "optimizers", None) or []
    groups = getattr(optimizers[0], "param_groups", None) if optimizers else None
    return float(groups[0]["lr"]) if groups else None


def cadence_problem(log_every: int, log_every_n_steps: int, accumulate: int = 1) -> str | None:
    """What goes wrong when a callback closing a row every ``log_every`` training batches runs
    under ``Trainer(log_every_n_steps=N, accumulate_grad_batches=A)``, with the setting that
    fixes it; None when every row reaches the logger at the step that closed it.

    Lightning hands logged values to its logger at the batches that end an optimiser step whose
    count is a multiple of N, i.e. every A N batches, and keeps only the latest value of a key
    in between. So every row reaches the logger, on time, exactly when A N divides
    ``log_every``; otherwise a row waits for the next such batch (logged at a later step), and
    when rows close more often than A N batches all but the last of each interval are lost.
    """
    every = accumulate * log_every_n_steps
    callback = f"MonitorCallback(log_every={log_every})"
    if log_every == 0:
        return (
            f"{callback} closes no rows in a Lightning run (0: only when flushed by hand), so "
            f"nothing is logged; set MonitorCallback(log_every={every or 50})."
        )
    if log_every % accumulate == 0:
        fix = f"set Trainer(log_every_n_steps={log_every // accumulate})"
    elif log_every_n_steps:
        fix = f"set MonitorCallback(log_every={every})"
    else:
        steps = max(1, round(log_every / accumulate))
        fix = (
            f"set MonitorCallback(log_every={steps * accumulate}) and "
            f"Trainer(log_every_n_steps={steps})"
        )
    if log_every_n_steps == 0:
        return (
            f"Trainer(log_every_n_steps=0) hands no step values to the logger, so none of "
            f"{callback}'s rows reach it. To log every row at its step, {fix}."
        )
    if log_every % every == 0:
        return None
    accumulating = f", accumulate_grad_batches={accumulate}" if accumulate > 1 else ""
    trainer = f"Trainer(log_every_n_steps={log_every_n_steps}{accumulating})"
    both = math.lcm(log_every, every)
    if log_every < every:
        what = (
            f"only 1 row in {both // log_every} reaches the logger (the others are replaced "
            "before Lightning logs)"
            if both // log_every > 1 and every % log_every == 0
            else "rows replace each other before Lightning logs, and those that reach the "
            "logger arrive late"
        )
    else:
        what = "rows reach the logger late, at a later step than the one that closed them"
    return (
        f"{callback} closes a row every {log_every} training batches, but {trainer} hands "
        f"logged values to the logger every {every} batches: {what}. To log every row at its "
        f"step, {fix}."
    )


def loss_of(outputs: Any) -> torch.Tensor | float | None:
    """The loss a ``training_step`` returned (a one-number tensor, or a dict's ``"loss"``), or
    None when it returned none."""
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss.detach()
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):
        return float(loss)
    return None


def views_of(pl_module: Any, outputs: Any, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The two views' projections of a training step, found through the hook (module docs)."""
    hook = getattr(pl_module, HOOK, None)
    if callable(hook):
        found = hook(outputs, batch)
        if isinstance(found, Sequence) and len(found) == 2:
            return found[0], found[1]
        raise UserError(
            f"{type(pl_module).__name__}.{HOOK} returned {type(found).__name__}; "
            "it must return the two views' projections (z1, z2)."
        )
    if isinstance(outputs, Mapping):
        if "z1" in outputs and "z2" in outputs:
            return outputs["z1"], outputs["z2"]
        z = outputs.get("z")
        if isinstance(z, Sequence) and len(z) >= 2:
            return z[0], z[1]
    raise UserError(
        "MonitorCallback cannot find the two views' projections of the training step: return "
        '{"loss": loss, "z1": z1, "z2": z2} (or "z": [z1, z2]) from training_step, or define '
        f"{HOOK}(self, outputs, batch) -> (z1, z2) on {type(pl_module).__name__}."
    )
