"""Training: datasets and two-view augmentation, the loop, checkpoints.

The models it trains come from :mod:`cl_diag.models`. The pieces other commands reuse::

    from cl_diag.models import build_model
    from cl_diag.training import load_checkpoint
    from cl_diag.training.data import load_dataset, digits_split, TwoViews, Transformed
    from cl_diag.training.augment import train_transform, eval_transform

    ck = load_checkpoint("runs/digits-simclr/last.pt")   # weights-only; UserError on a bad file
    model = build_model(ck["config"])                      # same architecture, fresh weights
    model.backbone.load_state_dict(ck["backbone"]); model.projector.load_state_dict(ck["projector"])
"""

from cl_diag.training.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["load_checkpoint", "save_checkpoint"]
