"""Done means: `cl-diag train` with no options learns a representation of the digits.

The backbone of the default run, probed linearly on L2-normalised features of the fixed
digits train/test split, must beat the same encoder at its random initialisation.
Measured (default run, 40 epochs, ~1 CPU-minute): scikit-learn LogisticRegression() on
normalised features 0.971 trained vs 0.798 random; the project's linear_probe (weight decay
tuned) 0.984 vs 0.942. The thresholds below leave a margin.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from cl_diag.models import build_model
from cl_diag.training import load_checkpoint
from cl_diag.training.augment import eval_transform
from cl_diag.training.data import Transformed, load_dataset


def backbone_features(model, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    ds = Transformed(load_dataset("digits", split), eval_transform("digits"))
    x = torch.stack([ds[i][0] for i in range(len(ds))])
    y = torch.tensor([ds[i][1] for i in range(len(ds))])
    model.eval()
    with torch.no_grad():
        return model.backbone(x), y


def probe_accuracy(model) -> float:
    from sklearn.linear_model import LogisticRegression

    tx, ty = backbone_features(model, "train")
    vx, vy = backbone_features(model, "test")
    clf = LogisticRegression(max_iter=5000).fit(F.normalize(tx).numpy(), ty.numpy())
    return float(clf.score(F.normalize(vx).numpy(), vy.numpy()))


@pytest.mark.slow
def test_default_run_beats_random_init(trained_digits):
    # the shared run (conftest.trained_digits) is `cl-diag train --quiet` with no options
    ck = load_checkpoint(trained_digits / "last.pt")
    assert ck["config"]["epochs"] == 40 and ck["complete"] is True
    assert ck["split"]["kind"] == "stratified" and len(ck["split"]["test_indices"]) == 450
    trained = build_model(ck["config"])
    trained.backbone.load_state_dict(ck["backbone"])
    trained.projector.load_state_dict(ck["projector"])
    random_init = build_model(ck["config"], seed=ck["config"]["seed"])
    acc_trained, acc_random = probe_accuracy(trained), probe_accuracy(random_init)
    assert acc_trained >= 0.93, (acc_trained, acc_random)
    assert acc_trained - acc_random >= 0.10, (acc_trained, acc_random)
