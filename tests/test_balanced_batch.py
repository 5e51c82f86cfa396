"""--balanced-batch (m classes x n instances per batch), --num-classes for the toy dataset, and
the supcl loss in the trainer (issue 14, section 1)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch

from cl_diag.errors import UserError
from cl_diag.orchestration.train import (
    TrainConfig,
    config_from_checkpoint,
    resolve_config,
    train,
)
from cl_diag.training.checkpoint import load_checkpoint
from cl_diag.training.data import class_counts, toy_labels
from cl_diag.training.loop import BalancedBatchSampler


def _batches(sampler, epoch):
    sampler.set_epoch(epoch)
    return [[i for _, i in b] for b in sampler]


LABELS = torch.tensor([i % 5 for i in range(53)])  # classes of 11, 11, 11, 10, 10


@pytest.mark.parametrize(("batch", "m"), [(10, 5), (12, 3), (8, 2)])
def test_every_batch_holds_m_classes_of_n_distinct_instances(batch, m):
    sampler = BalancedBatchSampler(LABELS, batch, m, seed=2)
    n = batch // m
    assert len(sampler) == 53 // batch
    covered: set[int] = set()
    for epoch in range(6):
        classes: Counter = Counter()
        seen: Counter = Counter()
        for b in _batches(sampler, epoch):
            assert len(b) == len(set(b)) == batch
            per_class = Counter(int(LABELS[i]) for i in b)
            assert len(per_class) == m and set(per_class.values()) == {n}
            classes.update(per_class.keys())
            seen.update(b)
        # within an epoch every class, and every instance of a class, is drawn equally often
        # (to within one): the streams read off whole permutations
        assert max(classes.values()) - min(classes.get(c, 0) for c in range(5)) <= 1
        for c in range(5):
            members = [seen.get(i, 0) for i in range(53) if i % 5 == c]
            assert max(members) - min(members) <= 1
        covered.update(seen)
    assert covered == set(range(53))


def test_batches_are_a_function_of_seed_and_epoch():
    a, b = BalancedBatchSampler(LABELS, 10, 5, seed=3), BalancedBatchSampler(LABELS, 10, 5, seed=3)
    assert _batches(a, 4) == _batches(b, 4)
    assert _batches(a, 4) != _batches(a, 5)
    assert _batches(a, 0) != _batches(BalancedBatchSampler(LABELS, 10, 5, seed=4), 0)
    a.set_epoch(9)
    assert all(e == 9 for batch in a for e, _ in batch)


def test_ranks_split_each_global_batch_contiguously():
    single = _batches(BalancedBatchSampler(LABELS, 12, 3, seed=1), 2)
    ranks = [
        _batches(BalancedBatchSampler(LABELS, 12, 3, seed=1, rank=r, world=3), 2) for r in range(3)
    ]
    for k, batch in enumerate(single):
        assert ranks[0][k] + ranks[1][k] + ranks[2][k] == batch
    # the batch is shuffled: a rank's slice is not one class
    assert any(len({int(LABELS[i]) for i in ranks[0][k]}) > 1 for k in range(len(single)))


def test_sampler_refuses_what_it_cannot_fill():
    with pytest.raises(ValueError, match="not a multiple"):
        BalancedBatchSampler(LABELS, 10, 3, seed=0)
    with pytest.raises(ValueError, match="classes per batch"):
        BalancedBatchSampler(LABELS, 12, 6, seed=0)
    with pytest.raises(ValueError, match="fewer than the 11 per batch"):
        BalancedBatchSampler(LABELS, 22, 2, seed=0)
    with pytest.raises(ValueError, match="world size"):
        BalancedBatchSampler(LABELS, 10, 5, seed=0, world=4)


def test_toy_labels_and_class_counts():
    assert toy_labels(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert toy_labels(3).tolist() == [0, 1, 2]
    assert class_counts("toy", num_samples=7, num_classes=3) == [3, 2, 2]
    digits = class_counts("digits")
    assert len(digits) == 10 and sum(digits) == 1347 and min(digits) >= 130
    assert sum(class_counts("digits", num_samples=64)) == 64


TOY = dict(dataset="toy", num_samples=24, num_classes=3, dim=8, quiet=True)


def test_resolve_fills_m_and_n():
    c = resolve_config(TrainConfig(**TOY, batch_size=12, balanced_batch=True))
    assert (c.classes_per_batch, c.instances_per_class) == (3, 4)
    c = resolve_config(TrainConfig(**TOY, batch_size=4, balanced_batch=True, classes_per_batch=2))
    assert (c.classes_per_batch, c.instances_per_class) == (2, 2)
    c = resolve_config(TrainConfig(batch_size=100, balanced_batch=True))  # digits: 10 x 10
    assert (c.classes_per_batch, c.instances_per_class) == (10, 10)
    plain = resolve_config(TrainConfig(**TOY, batch_size=12))
    assert plain.classes_per_batch is None and plain.instances_per_class is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            dict(batch_size=128, balanced_batch=True),
            "--batch-size 128 is not divisible by 10; use a multiple of 10",
        ),
        (
            dict(batch_size=12, balanced_batch=True, classes_per_batch=12),
            "--classes-per-batch 12 exceeds the 10 classes of digits",
        ),
        (
            dict(batch_size=10, balanced_batch=True),
            "leaves 1 instance per class",
        ),
        (
            dict(batch_size=16, num_samples=64, balanced_batch=True, classes_per_batch=2),
            "the smallest class of digits has",
        ),
        (dict(classes_per_batch=4), "add --balanced-batch"),
        (dict(balanced_batch=True, classes_per_batch=1), r"--classes-per-batch 1 must be in \[2, "),
        (dict(num_classes=3), "--num-classes applies to --dataset toy only"),
        (
            dict(dataset="toy", num_samples=8, batch_size=4, balanced_batch=True),
            "add --num-classes",
        ),
        (dict(dataset="toy", num_samples=4, num_classes=5), "exceeds the 4 toy instances"),
        (dict(loss="supcl", alpha=1.5), r"alpha must lie in \[0, 1\].*--alpha"),
        (dict(loss="simclr", alpha=0.5), "--alpha is not a hyper-parameter of the simclr loss"),
    ],
)
def test_user_mistakes_are_clear_errors(options, message):
    with pytest.raises(UserError, match=message):
        resolve_config(TrainConfig(quiet=True, **options))


def test_cli_balanced_batch_error_exits_2_and_writes_nothing(tmp_path, run_cli):
    out = tmp_path / "run"
    r = run_cli("train", "--loss", "supcl", "--balanced-batch", "--batch-size", "64", "--out", out)
    assert r.code == 2 and "not divisible by 10" in (r.err + r.out)
    assert not out.exists()


def _run(tmp_path, name, **extra):
    options = dict(
        **TOY,
        loss="supcl",
        alpha=0.3,
        temperature=0.5,
        batch_size=6,
        balanced_batch=True,
        epochs=6,
        optimizer="sgd",
        lr=0.5,
        momentum=0.9,
        weight_decay=0.0,
        warmup_epochs=1,
        seed=5,
        out=str(tmp_path / name),
    )
    options.update(extra)
    return train(TrainConfig(**options))


def test_balanced_supcl_run_resumes_bit_exact(tmp_path):
    full = _run(tmp_path, "full", save_every=3)
    assert full.steps == 6 * 4
    half = tmp_path / "full" / "epoch_0003.pt"
    resumed = train(config_from_checkpoint(half, out=str(tmp_path / "resumed"), quiet=True))
    assert resumed.steps_this_run == 3 * 4
    a = load_checkpoint(tmp_path / "full" / "last.pt")
    b = load_checkpoint(tmp_path / "resumed" / "last.pt")
    assert torch.equal(a["backbone"]["weight"], b["backbone"]["weight"])
    assert a["config"]["classes_per_batch"] == 3 and a["config"]["alpha"] == 0.3
    assert torch.equal(a["embeddings"]["z1"], b["embeddings"]["z1"])


def test_balanced_batches_reach_the_loss_with_their_labels(tmp_path, monkeypatch):
    from cl_diag.losses.supcl import SupCLLoss

    seen = []
    original = SupCLLoss._compute

    def spy(self, u, v, labels, **hp):
        seen.append(labels.clone())
        return original(self, u, v, labels, **hp)

    monkeypatch.setattr(SupCLLoss, "_compute", spy)
    _run(tmp_path, "spy", epochs=1)
    assert len(seen) == 4
    for labels in seen:
        assert sorted(Counter(labels.tolist()).values()) == [2, 2, 2]


def test_toy_classes_reach_the_analysis(tmp_path, run_cli):
    _run(tmp_path, "toy", epochs=2)
    r = run_cli("analyze", tmp_path / "toy" / "last.pt", "--out", tmp_path / "analysis")
    assert r.code == 0, r.err
    data = json.loads((tmp_path / "analysis" / "result.json").read_text())
    collapse = data["layers"]["embedding"]["collapse"]
    assert collapse["classes"] == 3 and collapse["instances"] == 24 and collapse["balanced"]
    assert data["config"]["num_classes"] == 3 and data["config"]["balanced_batch"] is True
