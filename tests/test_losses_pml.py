"""simclr, supcon, triplet and contrastive against pytorch-metric-learning
(an independent implementation), values and gradients, on random inputs.

The mapping, common to all: pml takes one embedding matrix and labels, so we
pass the union ``emb = cat([z1, z2])`` with ``lab = cat([y, y])`` (y = the
instance index arange(B) when our loss gets labels=None). pml's default
reducer (AvgNonZeroReducer) averages only the non-zero terms; our losses
average every term, which is pml's ``MeanReducer``.
"""

from __future__ import annotations

import pytest
import torch

pml = pytest.importorskip("pytorch_metric_learning")
from pytorch_metric_learning import losses as pml_losses  # noqa: E402
from pytorch_metric_learning import miners as pml_miners  # noqa: E402
from pytorch_metric_learning.distances import CosineSimilarity  # noqa: E402
from pytorch_metric_learning.reducers import MeanReducer  # noqa: E402

from cl_diag.losses import LOSSES  # noqa: E402

B, D = 12, 6


def data(seed, labelled):
    g = torch.Generator().manual_seed(seed)
    z1 = torch.randn(B, D, generator=g, dtype=torch.float64) * 2
    z2 = torch.randn(B, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (B,), generator=g) if labelled else None
    return z1, z2, y


def union(z1, z2, y):
    lab = torch.arange(z1.shape[0]) if y is None else y
    return torch.cat([z1, z2]), torch.cat([lab, lab])


def compare(ours_fn, theirs_fn, z1, z2, rel=1e-5):
    """Values and input gradients of the two must agree. Ours runs in fp32,
    pml in float64 here, so the tolerance is fp32's."""
    a1, a2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    b1, b2 = z1.clone().requires_grad_(), z2.clone().requires_grad_()
    ours, theirs = ours_fn(a1, a2), theirs_fn(b1, b2)
    assert ours.item() == pytest.approx(theirs.item(), rel=rel)
    ours.backward()
    theirs.backward()
    for ga, gb in ((a1.grad, b1.grad), (a2.grad, b2.grad)):
        assert torch.allclose(ga, gb, rtol=1e-3, atol=1e-5), (ga - gb).abs().max()
    assert theirs.item() > 0  # a non-trivial case


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("t", [0.1, 0.5])
def test_simclr_vs_ntxent(seed, t):
    # ours simclr(temperature=t) == pml NTXentLoss(temperature=t) on the union
    # with instance labels: one positive per anchor, so pml's mean over the
    # 2B positive pairs is our mean over the 2B anchors.
    z1, z2, _ = data(seed, labelled=False)
    theirs = pml_losses.NTXentLoss(temperature=t, reducer=MeanReducer())
    compare(
        lambda a, b: LOSSES["simclr"](a, b, temperature=t),
        lambda a, b: theirs(*union(a, b, None)),
        z1,
        z2,
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labelled", [True, False])
def test_supcon_vs_pml(seed, labelled):
    # ours supcon(labels=y, temperature=t) == pml SupConLoss(temperature=t,
    # distance=CosineSimilarity() [its default], reducer=MeanReducer()) on
    # (cat(z1, z2), cat(y, y)). pml's positives are same-label pairs except
    # self, its denominator every non-self pair: Khosla's L_out.
    z1, z2, y = data(seed, labelled)
    theirs = pml_losses.SupConLoss(temperature=0.2, reducer=MeanReducer())
    compare(
        lambda a, b: LOSSES["supcon"](a, b, labels=y, temperature=0.2),
        lambda a, b: theirs(*union(a, b, y)),
        z1,
        z2,
    )


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("labelled", [True, False])
@pytest.mark.parametrize("mining", ["all", "semi-hard", "batch-hard"])
def test_triplet_vs_pml(seed, labelled, mining):
    # ours triplet(margin=m, mining=...) == pml TripletMarginLoss(margin=m,
    # distance=CosineSimilarity(), reducer=MeanReducer()) on the union, where
    # pml's margin on similarities, relu(s_an - s_ap + m), equals ours on
    # cosine distance, relu(d_ap - d_an + m), since d = 1 - s. Mining:
    #   all        -> no miner (pml then uses every valid triplet)
    #   semi-hard  -> TripletMarginMiner(margin=m, type_of_triplets="semihard",
    #                 distance=CosineSimilarity()): 0 < s_ap - s_an <= m, i.e.
    #                 d_ap < d_an <= d_ap + m (ours uses < at the upper end;
    #                 equality has probability 0 here)
    #   batch-hard -> BatchHardMiner(distance=CosineSimilarity()): per anchor the
    #                 least similar positive and most similar negative.
    m = 0.3
    z1, z2, y = data(seed, labelled)
    loss = pml_losses.TripletMarginLoss(
        margin=m, distance=CosineSimilarity(), reducer=MeanReducer()
    )
    miner = {
        "all": None,
        "semi-hard": pml_miners.TripletMarginMiner(
            margin=m, type_of_triplets="semihard", distance=CosineSimilarity()
        ),
        "batch-hard": pml_miners.BatchHardMiner(distance=CosineSimilarity()),
    }[mining]

    def theirs(a, b):
        emb, lab = union(a, b, y)
        return loss(emb, lab) if miner is None else loss(emb, lab, miner(emb, lab))

    compare(lambda a, b: LOSSES["triplet"](a, b, labels=y, margin=m, mining=mining), theirs, z1, z2)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("labelled", [True, False])
@pytest.mark.parametrize("margin", [0.6, 1.3])
def test_contrastive_vs_pml(seed, labelled, margin):
    # ours contrastive(margin=m) == pml ContrastiveLoss(pos_margin=1,
    # neg_margin=1 - m, distance=CosineSimilarity(), reducer=MeanReducer()):
    # for a similarity, pml's positive term is relu(pos_margin - s) = 1 - s = d
    # and its negative term relu(s - neg_margin) = relu(m - d); MeanReducer
    # averages positive and negative pairs separately and adds the two means.
    z1, z2, y = data(seed, labelled)
    theirs = pml_losses.ContrastiveLoss(
        pos_margin=1.0, neg_margin=1.0 - margin, distance=CosineSimilarity(), reducer=MeanReducer()
    )
    compare(
        lambda a, b: LOSSES["contrastive"](a, b, labels=y, margin=margin),
        lambda a, b: theirs(*union(a, b, y)),
        z1,
        z2,
    )
