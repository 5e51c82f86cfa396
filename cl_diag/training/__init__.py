"""Training: datasets and two-view augmentation, the loop, checkpoints (the models it trains
come from :mod:`cl_diag.models`)::

    ck = load_checkpoint("runs/digits-simclr/last.pt")   # weights-only; UserError on a bad file
    model = build_model(ck["config"])                      # same architecture, fresh weights
    model.backbone.load_state_dict(ck["backbone"]); model.projector.load_state_dict(ck["projector"])
"""

from cl_diag.training.checkpoint import load_checkpoint, save_checkpoint

__all__ = ["load_checkpoint", "save_checkpoint"]
