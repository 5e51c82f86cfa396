"""cl-diag's training monitor as a Lightning callback (``pip install 'cl-diag[lightning]'``).

One line in a solo-learn, lightly or any other Lightning setup::

    from cl_diag.integrations.lightning import MonitorCallback

    trainer = lightning.Trainer(callbacks=[MonitorCallback(n_ref=len(train_set), log_every=50)])

After each training batch the callback gives the two views' projections to a
:class:`cl_diag.Monitor` (no host sync, detached, AMP- and DDP-safe: the views are gathered from
every rank) and, every ``log_every`` batches, logs the monitor's row with
``LightningModule.log_dict`` as ``cl_diag/<key>`` (``cl_diag/cross_neg_var``,
``cl_diag/cross_neg_excessive_ratio``, ...; see :mod:`cl_diag.measurement.monitor`), so the
values are also in ``trainer.callback_metrics``. Lightning hands the latest logged values to
the logger every ``Trainer(log_every_n_steps=...)`` steps: set it to ``log_every`` (both
default to 50) and each row reaches the logger once, at the step that closed it.

The hook: where the projections are found, in this order --

1. a method ``cl_diag_views(self, outputs, batch)`` of the LightningModule, returning
   ``(z1, z2)`` (``outputs`` is what ``training_step`` returned);
2. the outputs of ``training_step``: a dict with ``"z1"`` and ``"z2"``, or with ``"z"``, a list
   of the views' projections whose first two are used (solo-learn's methods return this).

The monitor itself is ``callback.monitor``: ``callback.monitor.to_csv(path)`` writes every row
logged, in the columns of ``cl-diag train``'s metrics.csv.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from cl_diag.errors import UserError
from cl_diag.measurement.monitor import Monitor

try:
    from lightning.pytorch import LightningModule, Trainer
    from lightning.pytorch.callbacks import Callback
except ImportError as exc:  # an optional extra
    raise ImportError(
        "cl_diag.integrations.lightning needs Lightning: pip install 'cl-diag[lightning]'"
    ) from exc

__all__ = ["HOOK", "MonitorCallback"]

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

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        z1, z2 = views_of(pl_module, outputs, batch)
        self.monitor.update(z1, z2)
        row = self.monitor.flush()
        if row is not None:
            # every rank holds the same row (the views are gathered): no sync_dist needed
            logged = {f"{self.prefix}{key}": float(value) for key, value in row.items()}
            logged.pop(f"{self.prefix}step")  # Lightning logs its own step
            pl_module.log_dict(logged, on_step=True, on_epoch=False)


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
