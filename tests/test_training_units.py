"""Unit tests of the training pieces: schedule, sampler, pair statistics, data, augmentation,
models."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

from cl_diag.models import FreeEmbeddings, build_model, build_projector
from cl_diag.runtime import amp_dtype
from cl_diag.training.augment import eval_transform, simclr_transform, train_transform
from cl_diag.training.data import (
    Transformed,
    TwoViews,
    digits_arrays,
    digits_split,
    load_dataset,
    sample_seed,
    training_data,
)
from cl_diag.training.loop import BatchPairMoments, EpochBatchSampler, lr_at, make_optimizer

# --------------------------------------------------------------------------- schedule


def test_lr_schedule_hand_values():
    kw = dict(peak=1.0, warmup_steps=4, total_steps=12)
    # warm-up: peak * (step + 1) / 4
    assert [lr_at(s, **kw) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    # cosine over the 8 remaining steps: t = (step - 4) / 8
    assert lr_at(4, **kw) == 1.0
    assert lr_at(6, **kw) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))  # 0.853553...
    assert lr_at(8, **kw) == pytest.approx(0.5)
    assert lr_at(12, **kw) == pytest.approx(0.0, abs=1e-15)
    assert lr_at(10, peak=0.3, warmup_steps=0, total_steps=20, schedule="constant") == 0.3
    assert lr_at(0, peak=0.3, warmup_steps=0, total_steps=20) == pytest.approx(0.3)


def test_optimizers_carry_their_settings():
    p = [torch.nn.Parameter(torch.zeros(2))]
    sgd = make_optimizer("sgd", p, lr=0.1, momentum=0.9, weight_decay=1e-4)
    assert isinstance(sgd, torch.optim.SGD)
    assert sgd.param_groups[0]["momentum"] == 0.9 and sgd.param_groups[0]["weight_decay"] == 1e-4
    assert isinstance(
        make_optimizer("adamw", p, lr=0.1, momentum=0.9, weight_decay=0.05), torch.optim.AdamW
    )
    assert isinstance(
        make_optimizer("adam", p, lr=0.1, momentum=0.9, weight_decay=0.0), torch.optim.Adam
    )


def test_amp_dtype_choices():
    cpu = torch.device("cpu")
    assert amp_dtype("auto", cpu) is None
    assert amp_dtype("fp32", cpu) is None
    assert amp_dtype("bf16", cpu) is torch.bfloat16
    assert amp_dtype("fp16", cpu) is torch.float16


# --------------------------------------------------------------------------- sampler


def _batches(sampler, epoch):
    sampler.set_epoch(epoch)
    return [[i for _, i in b] for b in sampler]


def test_sampler_is_a_function_of_seed_and_epoch():
    a, b = EpochBatchSampler(10, 4, seed=3), EpochBatchSampler(10, 4, seed=3)
    assert len(a) == 2  # the partial batch of 2 is dropped
    assert _batches(a, 5) == _batches(b, 5)
    assert _batches(a, 5) != _batches(a, 6)
    assert _batches(a, 0) != _batches(EpochBatchSampler(10, 4, seed=4), 0)
    batches = _batches(a, 1)
    flat = [i for batch in batches for i in batch]
    assert len(flat) == len(set(flat)) == 8 and all(0 <= i < 10 for i in flat)
    a.set_epoch(7)
    assert all(e == 7 for batch in a for e, _ in batch)


def test_ranks_split_each_global_batch_contiguously():
    single = _batches(EpochBatchSampler(23, 6, seed=1), 2)
    ranks = [_batches(EpochBatchSampler(23, 6, seed=1, rank=r, world=3), 2) for r in range(3)]
    for b, batch in enumerate(single):
        assert ranks[0][b] + ranks[1][b] + ranks[2][b] == batch
    with pytest.raises(ValueError):
        EpochBatchSampler(23, 6, seed=1, world=4)


# --------------------------------------------------------------------------- pair statistics


def test_pair_stats_match_direct_computation():
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)) for _ in range(3)]
    batches.append((torch.randn(3, 3, generator=g), torch.randn(3, 3, generator=g)))
    stats = BatchPairMoments()
    pos, cross, within = [], [], []
    for z1, z2 in batches:
        stats.update(z1, z2)
        u = (z1 / z1.norm(dim=1, keepdim=True)).double().numpy()
        v = (z2 / z2.norm(dim=1, keepdim=True)).double().numpy()
        b = len(u)
        for i in range(b):
            pos.append(u[i] @ v[i])
            for j in range(b):
                if i != j:
                    cross.append(u[i] @ v[j])
                if i < j:
                    within += [u[i] @ u[j], v[i] @ v[j]]
    r = stats.result()
    assert stats.count == {"pos": 18, "cross_neg": 3 * 20 + 6, "within_neg": 3 * 20 + 6}
    for key, values in (("pos", pos), ("cross_neg", cross), ("within_neg", within)):
        assert r[f"{key}_mean"] == pytest.approx(np.mean(values), abs=1e-6)
        assert r[f"{key}_var"] == pytest.approx(np.var(values), abs=1e-6)  # population variance


def test_pair_stats_hand_example():
    # u = (e1, e2), v = (e1, -e2): positives 1 and -1; cross negatives e1.(-e2) = 0, e2.e1 = 0;
    # within: e1.e2 = 0 and e1.(-e2) = 0.
    stats = BatchPairMoments()
    stats.update(torch.tensor([[1.0, 0.0], [0.0, 2.0]]), torch.tensor([[3.0, 0.0], [0.0, -1.0]]))
    r = stats.result()
    assert r["pos_mean"] == 0.0 and r["pos_var"] == 1.0
    assert r["cross_neg_mean"] == 0.0 and r["cross_neg_var"] == 0.0
    assert r["within_neg_mean"] == 0.0 and r["within_neg_var"] == 0.0


# --------------------------------------------------------------------------- data


def test_digits_split_is_fixed_stratified_and_complete():
    images, labels = digits_arrays()
    assert images.shape == (1797, 1, 8, 8) and images.dtype == torch.float32
    assert float(images.min()) == 0.0 and float(images.max()) == 1.0
    train, test = digits_split()
    assert len(train) == 1347 and len(test) == 450
    assert set(train.tolist()).isdisjoint(test.tolist())
    assert sorted(train.tolist() + test.tolist()) == list(range(1797))
    again = digits_split()
    assert torch.equal(again[0], train) and torch.equal(again[1], test)
    total = torch.bincount(labels, minlength=10).double()
    in_test = torch.bincount(labels[test], minlength=10).double()
    assert torch.all((in_test - 0.25 * total).abs() <= 1.0)  # stratified: 25 % of each class
    ds = load_dataset("digits", "test")
    assert (
        len(ds) == 450
        and torch.equal(ds[0][0], images[test[0]])
        and ds[0][1] == int(labels[test[0]])
    )


def test_two_views_depend_only_on_seed_epoch_and_index():
    base = load_dataset("digits", "train")
    views = TwoViews(base, train_transform("digits"), seed=7)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    i, a1, a2, y = views[(3, 11)]
    assert torch.equal(torch.get_rng_state(), before)  # caller's RNG untouched
    torch.manual_seed(999)  # a different global state changes nothing
    _, b1, b2, _ = views[(3, 11)]
    assert i == 11 and y == base[11][1]
    assert torch.equal(a1, b1) and torch.equal(a2, b2)
    assert not torch.equal(a1, a2)  # two different views
    _, c1, _, _ = views[(4, 11)]
    assert not torch.equal(a1, c1)  # another epoch, other views
    _, d1, _, _ = TwoViews(base, train_transform("digits"), seed=8)[(3, 11)]
    assert not torch.equal(a1, d1)
    assert a1.shape == (1, 8, 8) and a1.dtype == torch.float32
    assert len({sample_seed(0, e, i) for e in range(20) for i in range(50)}) == 1000


def _torchvision_digits_view(size: int, channels: int):
    """The digits' view as torchvision v2's per-image pipeline (what DigitsViews replaced)."""
    from torchvision.transforms import v2

    class Contrast(torch.nn.Module):
        def forward(self, x):
            return x * (0.6 + (1.2 - 0.6) * torch.rand(()))

    steps = [] if size == 8 else [v2.Resize(size, antialias=True)]
    steps += [
        v2.RandomAffine(degrees=12, translate=(0.15, 0.15), scale=(0.8, 1.2), shear=8),
        Contrast(),
        v2.GaussianNoise(mean=0.0, sigma=0.1, clip=True),
        v2.Normalize((0.3053,), (0.3760,)),
    ]
    if channels != 1:
        steps.append(v2.Lambda(lambda x: x.expand(channels, *x.shape[1:]).contiguous()))
    return v2.Compose(steps)


@pytest.mark.parametrize("size, channels", [(8, 1), (16, 3)])
def test_digits_views_equal_torchvision_per_image_pipeline_to_the_bit(size, channels):
    # DigitsViews draws as torchvision's RandomAffine/GaussianNoise draw and warps a batch at
    # once; the committed digits studies were trained with the per-image pipeline, so any
    # difference in a draw or a rounding would change every one of them.
    images = torch.stack([load_dataset("digits", "train")[k][0] for k in range(120)])
    reference, batched = (
        _torchvision_digits_view(size, channels),
        train_transform("digits", size, channels=channels),
    )
    generator, expected, draws = torch.default_generator, [], []
    for k, image in enumerate(images):
        generator.manual_seed(1_000 + k)
        expected.append(reference(image))
        generator.manual_seed(1_000 + k)
        draws.append(batched.draw())
    got = batched.apply(images, draws)
    assert got.shape == (120, channels, size, size)
    assert torch.equal(got.view(torch.int32), torch.stack(expected).view(torch.int32))
    generator.manual_seed(5)
    one = batched(images[3])
    generator.manual_seed(5)
    assert torch.equal(one.view(torch.int32), reference(images[3]).view(torch.int32))


def test_a_batch_of_two_views_equals_its_items_and_leaves_the_rng_alone():
    # What a key gives must not depend on the batch it comes in: five keys (image 5 in two
    # epochs among them) in one batch against each key alone, a batch of one.
    base = load_dataset("digits", "train")
    keys = [(0, 5), (0, 1), (3, 5), (3, 200), (7, 0)]
    for views in (2, 3):
        drawn = TwoViews(base, train_transform("digits", 16, channels=3), seed=4, views=views)
        torch.manual_seed(0)
        batch = drawn.__getitems__(keys)
        after = torch.rand(3)
        torch.manual_seed(0)
        assert torch.equal(after, torch.rand(3))  # the caller's RNG is restored
        items = [drawn[key] for key in keys]
        assert [b[0] for b in batch] == [5, 1, 5, 200, 0]
        assert [b[-1] for b in batch] == [it[-1] for it in items]
        for b, it in zip(batch, items, strict=True):
            assert len(b) == views + 2
            for x, y in zip(b[1:-1], it[1:-1], strict=True):
                assert x.shape == (3, 16, 16) and torch.equal(x, y)


@pytest.mark.slow  # a fresh interpreter imports torch
def test_the_digits_transforms_need_no_torchvision():
    # Importing torchvision imports torch._dynamo (over a second); an analysis of a digits
    # checkpoint needs neither, and a module-level import in augment.py would bring both back.
    import subprocess
    import sys

    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, torch\n"
            "from cl_diag.training.augment import eval_transform, train_transform\n"
            "image = torch.rand(1, 8, 8)\n"
            "train_transform('digits')(image); eval_transform('digits', channels=3)(image)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torchvision'))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "[]"


def test_simclr_and_eval_transforms_on_pil():
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8))
    t = simclr_transform(32)
    torch.manual_seed(0)
    x = t(img)
    assert x.shape == (3, 32, 32) and x.dtype == torch.float32
    e = eval_transform("cifar10")
    assert torch.equal(e(img), e(img))
    raw = torch.from_numpy(np.array(img)).permute(2, 0, 1).float() / 255
    mean = torch.tensor([0.4914, 0.4822, 0.4465])[:, None, None]
    std = torch.tensor([0.2470, 0.2435, 0.2616])[:, None, None]
    assert torch.allclose(e(img), (raw - mean) / std, atol=1e-5)
    assert eval_transform("imagefolder")(Image.new("RGB", (300, 260))).shape == (3, 224, 224)
    digit = load_dataset("digits", "train")[0][0]
    assert torch.allclose(eval_transform("digits")(digit), (digit - 0.3053) / 0.3760)


def test_missing_cifar_names_layout_and_download():
    from cl_diag.errors import UserError

    with pytest.raises(UserError, match=r"cifar-100-python.*--download"):
        load_dataset("cifar100", data_root="/nonexistent/data")
    with pytest.raises(UserError, match="--data-root"):
        load_dataset("cifar10")
    with pytest.raises(UserError, match="one sub-folder per class"):
        load_dataset("imagefolder", data_root="/nonexistent/imgs")


def test_imagefolder_train_and_val(tmp_path):
    for split in ("train", "val"):
        for k, cls in enumerate(("cat", "dog")):
            (tmp_path / split / cls).mkdir(parents=True)
            for j in range(3):
                Image.new("RGB", (40, 40), (k * 200, j * 50, 10)).save(
                    tmp_path / split / cls / f"{j}.png"
                )
    data = training_data(
        "imagefolder",
        seed=0,
        data_root=str(tmp_path / "train"),
        val_root=str(tmp_path / "val"),
        image_size=16,
    )
    assert (
        data.n_train == 6 and data.num_classes == 2 and data.labels.tolist() == [0, 0, 0, 1, 1, 1]
    )
    i, v1, _, y = data.train_set[(0, 4)]
    assert (i, y) == (4, 1) and v1.shape == (3, 16, 16)
    test = Transformed(
        load_dataset("imagefolder", "test", val_root=str(tmp_path / "val")),
        eval_transform("imagefolder", 16),
    )
    assert test[5][0].shape == (3, 16, 16) and test[5][1] == 1


def test_toy_data_and_subset():
    toy = training_data("toy", seed=0, num_samples=5)
    assert toy.n_train == 5
    i, r1, r2, y = toy.train_set[(2, 3)]
    assert (i, int(r1), int(r2), y) == (3, 3, 8, 3)  # view 2 of instance i is row n + i
    sub = training_data("digits", seed=0, num_samples=100)
    assert sub.n_train == 100 and len(sub.labels) == 100 and sub.split["num_samples"] == 100


# --------------------------------------------------------------------------- models


def test_build_model_shapes_and_layout():
    m = build_model({"dataset": "digits"}, seed=0)
    assert m.arch == "small-cnn"
    z = m(torch.randn(6, 1, 8, 8))
    assert z.shape == (6, 128) and m.features(torch.randn(6, 1, 8, 8)).shape == (6, m.feature_dim)
    # solo-learn's projector layout: Linear(0) BN(1) ReLU(2) Linear(3)
    keys = set(m.projector.state_dict())
    assert {"0.weight", "0.bias", "1.running_mean", "3.weight"} <= keys
    r = build_model({"dataset": "cifar10", "conv1_padding": 2}, seed=0)
    assert r.arch == "resnet18-cifar" and r.backbone.conv1.padding == (2, 2)
    assert r.backbone.conv1.stride == (1, 1) and isinstance(r.backbone.maxpool, torch.nn.Identity)
    assert r.features(torch.randn(2, 3, 32, 32)).shape == (2, 512)
    assert build_model({"dataset": "cifar10"}).backbone.conv1.padding == (1, 1)
    assert (
        build_model({"dataset": "imagefolder", "arch": "resnet50"}).projector[0].out_features
        == 2048
    )


def test_build_model_seeded_and_rng_neutral():
    torch.manual_seed(5)
    state = torch.get_rng_state()
    a = build_model({"dataset": "digits"}, seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    b = build_model({"dataset": "digits"}, seed=3)
    c = build_model({"dataset": "digits"}, seed=4)
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), k
    assert not torch.equal(a.backbone.features[0].weight, c.backbone.features[0].weight)


def test_toy_model_is_free_embeddings():
    m = build_model({"dataset": "toy", "num_samples": 4, "dim": 3}, seed=0)
    assert isinstance(m.backbone, FreeEmbeddings) and isinstance(m.projector, torch.nn.Identity)
    rows = torch.tensor([0, 1, 4, 5])
    assert torch.equal(m(rows), m.backbone.weight[rows])
    z1, z2 = m.backbone.views()
    assert torch.equal(torch.cat([z1, z2]), m.backbone.weight.detach())
    with pytest.raises(ValueError):
        build_model({"dataset": "digits", "arch": "embedding"})


def test_projector_is_linear_bn_relu_linear():
    p = build_projector(4, 8, 2)
    kinds = [type(m).__name__ for m in p]
    assert kinds == ["Linear", "BatchNorm1d", "ReLU", "Linear"]
