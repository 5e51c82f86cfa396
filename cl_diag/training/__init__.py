"""Training: datasets and two-view augmentation, encoders and projector, the loop, checkpoints.

The pieces other commands reuse::

    from cl_diag.training import build_model, load_checkpoint
    from cl_diag.training.data import load_dataset, digits_split, TwoViews, Transformed
    from cl_diag.training.augment import train_transform, eval_transform

    ck = load_checkpoint("runs/digits-simclr/last.pt")   # weights-only; UserError on a bad file
    model = build_model(ck["config"])                      # same architecture, fresh weights
    model.backbone.load_state_dict(ck["backbone"]); model.projector.load_state_dict(ck["projector"])
"""

from cl_diag.training.checkpoint import load_checkpoint, save_checkpoint
from cl_diag.training.models import ContrastiveModel, build_model

__all__ = ["build_model", "load_checkpoint", "save_checkpoint", "ContrastiveModel"]
