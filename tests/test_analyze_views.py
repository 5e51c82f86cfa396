"""``cl-diag analyze CHECKPOINT --views V``: V augmented views of each image, pairs over every
view pair; V = 2 is the two-view result, byte for byte."""

from __future__ import annotations

import json

import pytest

from cl_diag.errors import UserError
from cl_diag.orchestration.analyze import AnalyzeConfig, analyze
from cl_diag.orchestration.train import TrainConfig, train


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(num_samples=96, batch_size=32, steps=3, out=str(out), quiet=True))
    return out / "last.pt"


def _analyze(checkpoint, out, **kw):
    config = AnalyzeConfig(input=checkpoint, out=out, num_images=40, probes=(), device="cpu", **kw)
    analyze(config)
    return json.loads((out / "result.json").read_text())


def _flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[prefix + k] = v
    return out


@pytest.mark.slow
def test_two_views_are_the_default_result_byte_for_byte(checkpoint, tmp_path):
    _analyze(checkpoint, tmp_path / "default")
    _analyze(checkpoint, tmp_path / "two", views=2)
    for name in ("result.json", "report.md"):
        assert (tmp_path / "default" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


@pytest.mark.slow
def test_three_views_count_every_view_pair_and_every_view(checkpoint, tmp_path):
    two = _analyze(checkpoint, tmp_path / "two")
    three = _analyze(checkpoint, tmp_path / "three", views=3)
    n = 40
    for layer in ("backbone", "projector"):
        p2, p3 = two["layers"][layer]["pairs"], three["layers"][layer]["pairs"]
        assert p3["positive"]["count"] == 3 * n and p2["positive"]["count"] == n
        assert p3["cross_view_negative"]["count"] == 3 * n * (n - 1)
        assert p3["within_view_negative"]["count"] == 3 * n * (n - 1) // 2
        # views 1 and 2 are the same draws: the geometry (views 1 and 2) is unchanged (its
        # cross-view mean, which it computes itself with more views, to rounding)
        assert _flat(three["layers"][layer]["geometry"]) == pytest.approx(
            _flat(two["layers"][layer]["geometry"]), rel=1e-6, abs=1e-9
        )
    views = three["source"]["views"]
    assert views["views"] == 3 and "3 times" in views["augmentation"]


def test_view_option_errors(checkpoint, tmp_path, pairs_file):
    with pytest.raises(UserError, match="exact pairs"):
        _analyze(checkpoint, tmp_path / "a", views=3, pairs="sampled")
    with pytest.raises(UserError, match="embeddings file"):
        analyze(AnalyzeConfig(input=pairs_file, out=tmp_path / "b", views=3))
    with pytest.raises(UserError, match=r"--views 1 must be in \[2, 64\]"):
        _analyze(checkpoint, tmp_path / "c", views=1)
