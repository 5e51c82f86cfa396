"""Class-collapse diagnostics (cl_diag.measurement.collapse): the class-sum formulas against a
brute-force n x n computation, the SSEM identity, and the block in result.json and reports."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from cl_diag.measurement.collapse import COLLAPSE_EPSILON, at_batch_scope, class_collapse
from cl_diag.measurement.ssem import split_ssem_embedding, ssem_embedding
from cl_diag.report.metrics import COLLAPSE_METRICS
from cl_diag.result import Collapse, Result


def brute_force(z1: np.ndarray, z2: np.ndarray, labels: np.ndarray) -> dict:
    """Every quantity from the explicit 2n x 2n Gram matrix of the unit rows, in float64."""
    u = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
    v = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
    z = np.concatenate([u, v])
    y = np.concatenate([labels, labels])
    inst = np.concatenate([np.arange(len(u))] * 2)
    gram = z @ z.T
    same_class = y[:, None] == y[None, :]
    other_inst = inst[:, None] != inst[None, :]
    classes = np.unique(labels)
    within = [1 - np.sum(z[y == c].mean(0) ** 2) for c in classes]
    mean = z.mean(0)
    between = sum(np.mean(labels == c) * np.sum((z[y == c].mean(0) - mean) ** 2) for c in classes)
    # the mean squared distance to the class mean, written out (equals 1 - ||mu_c||^2)
    spread = [np.mean(np.sum((z[y == c] - z[y == c].mean(0)) ** 2, axis=1)) for c in classes]
    return {
        "within": within,
        "spread": spread,
        "between": between,
        "total": 1 - mean @ mean,
        "s_w": gram[same_class & other_inst].mean(),
        "s_b": gram[~same_class].mean(),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_class_sums_equal_the_brute_force_computation(seed):
    rng = np.random.default_rng(seed)
    n, d = 37, 6
    labels = rng.integers(0, 4, n)
    z1 = rng.standard_normal((n, d)) + 2 * np.eye(4, d)[labels]
    z2 = z1 + 0.3 * rng.standard_normal((n, d))
    got = class_collapse(z1, z2, labels)
    want = brute_force(z1, z2, labels)
    per_class = [c.within_class_variance for c in got.per_class]
    assert per_class == pytest.approx(want["within"], abs=1e-6)
    assert per_class == pytest.approx(want["spread"], abs=1e-6)
    assert got.within_class_variance == pytest.approx(np.mean(want["within"]), abs=1e-6)
    assert got.between_class_variance == pytest.approx(want["between"], abs=1e-6)
    assert got.total_variance == pytest.approx(want["total"], abs=1e-6)
    assert got.s_w == pytest.approx(want["s_w"], abs=1e-6)
    assert got.s_b == pytest.approx(want["s_b"], abs=1e-6)
    counts = np.bincount(labels)
    # total = sum_c (n_c / n) within_c + between, exactly
    weighted = float(np.sum(counts / n * np.array(per_class)))
    assert got.total_variance == pytest.approx(weighted + got.between_class_variance)
    assert [c.count for c in got.per_class] == counts.tolist()
    assert got.classes == 4 and got.instances == n and got.views == 2
    assert got.balanced is False


@pytest.mark.parametrize("seed", [0, 1])
def test_instance_means_and_view_spread_equal_the_hand_computation(seed):
    # the within-class variance of the instance means (u_i + v_i)/2 about their class mean,
    # and (1 - u_i.v_i)/2 averaged in each class, written out; each then averaged over classes
    rng = np.random.default_rng(10 + seed)
    n, d = 41, 5
    labels = rng.integers(0, 3, n)
    z1 = rng.standard_normal((n, d)) + 2 * np.eye(3, d)[labels]
    z2 = z1 + 0.4 * rng.standard_normal((n, d))
    got = class_collapse(z1, z2, labels)
    u = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
    v = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
    means = (u + v) / 2
    inst, spread = [], []
    for c in np.unique(labels):
        mc = means[labels == c]
        inst.append(np.mean(np.sum((mc - mc.mean(0)) ** 2, axis=1)))
        spread.append(np.mean((1 - np.sum(u[labels == c] * v[labels == c], axis=1)) / 2))
    assert got.instance_within_class_variance == pytest.approx(np.mean(inst), abs=1e-6)
    assert got.view_spread == pytest.approx(np.mean(spread), abs=1e-6)
    assert got.within_class_variance == pytest.approx(np.mean(inst) + np.mean(spread), abs=1e-6)
    assert 0 < got.instance_within_class_variance < got.within_class_variance


@pytest.mark.parametrize("batch", [2, 3, 5])
def test_batch_scope_is_the_mean_over_every_balanced_batch(batch):
    # issue 32: the SSEM's scope is one balanced batch. Every batch of `batch` instances per
    # class that the sample allows, enumerated: the mean of each class's within-class variance
    # of the instance means about the batch's own class mean, then over classes
    from itertools import combinations

    rng = np.random.default_rng(7)
    labels = np.repeat(np.arange(3), [5, 6, 7])  # classes of unequal size
    z1 = rng.standard_normal((len(labels), 4)) + 2 * np.eye(3, 4)[labels]
    z2 = z1 + 0.5 * rng.standard_normal(z1.shape)
    got = at_batch_scope(class_collapse(z1, z2, labels), batch)
    u = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
    v = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
    means = (u + v) / 2
    per_class = []
    for c in range(3):
        rows = means[labels == c]
        values = [
            np.mean(np.sum((rows[list(k)] - rows[list(k)].mean(0)) ** 2, axis=1))
            for k in combinations(range(len(rows)), batch)
        ]
        per_class.append(np.mean(values))
    assert got.batch_instances == batch
    assert got.batch_instance_within_class_variance == pytest.approx(np.mean(per_class), rel=1e-9)
    # a sample that is one batch (every class holds exactly n): the sample's own value, bit for
    # bit (a reproduction under an equal fingerprint compares exactly; the mean of the per-class
    # terms differs from the sample's mean in the last bit for about half of such samples)
    for seed in range(8):
        rng = np.random.default_rng(100 + seed)
        ten = np.repeat(np.arange(10), 4)
        a1 = rng.standard_normal((40, 8))
        whole = class_collapse(a1, a1 + 0.3 * rng.standard_normal((40, 8)), ten)
        assert (
            at_batch_scope(whole, 4).batch_instance_within_class_variance
            == whole.instance_within_class_variance
        )
    # a class too small for the batch: no value, the batch size still stated
    short = at_batch_scope(class_collapse(z1, z2, labels), 6)
    assert short.batch_instances == 6 and short.batch_instance_within_class_variance is None
    with pytest.raises(ValueError, match="at least 2"):
        at_batch_scope(got, 1)


@pytest.mark.parametrize(("beta", "delta"), [(1.0, 0.0), (0.946, 0.054), (0.7, 0.1), (0.5, 0.0)])
def test_instance_measure_reads_gamma_on_the_split_view_family(beta, delta):
    # docs/ssem.md: z = sqrt(beta) mu_c + sqrt(gamma) r_ci + sqrt(delta) q_cik, gamma = 1 -
    # beta - delta; the views' within-class variance is gamma + delta, the instance means'
    # gamma (to float32 rounding: the analysis reads float32 rows)
    m, n = 3, 4
    u, v = split_ssem_embedding(beta, delta, m, n)
    got = class_collapse(u, v, np.arange(m * n) // n)
    gamma = 1.0 - beta - delta
    assert got.instance_within_class_variance == pytest.approx(gamma, abs=1e-6)
    assert got.view_spread == pytest.approx(delta, abs=1e-6)
    assert got.within_class_variance == pytest.approx(gamma + delta, abs=1e-6)


def test_chunked_accumulation_does_not_change_the_result(monkeypatch):
    import cl_diag.measurement.collapse as collapse

    rng = np.random.default_rng(5)
    z1, z2 = rng.standard_normal((50, 4)), rng.standard_normal((50, 4))
    labels = np.arange(50) % 3
    whole = class_collapse(z1, z2, labels)
    monkeypatch.setattr(collapse, "_CHUNK_ROWS", 7)
    chunked = class_collapse(z1, z2, labels)
    for key in ("within_class_variance", "between_class_variance", "s_w", "s_b"):
        assert getattr(chunked, key) == pytest.approx(getattr(whole, key), abs=1e-12)


def test_balanced_sample_residual_is_the_squared_norm_of_the_sum():
    # 1 + (n-1) s_w + n(m-1) s_b = ||sum z||^2 / (4N) + (1 - s_pos) / 2
    #                            = N (1 - total variance) + (1 - s_pos) / 2
    rng = np.random.default_rng(3)
    m, n, d = 3, 5, 8
    z1 = rng.standard_normal((m * n, d))
    labels = np.arange(m * n) % m
    for z2 in (z1, z1 + 0.5 * rng.standard_normal((m * n, d))):
        got = class_collapse(z1, z2, labels)
        u = z1 / np.linalg.norm(z1, axis=1, keepdims=True)
        v = z2 / np.linalg.norm(z2, axis=1, keepdims=True)
        total = u.sum(0) + v.sum(0)
        s_pos = float(np.mean(np.sum(u * v, axis=1)))
        want = total @ total / (4 * m * n) + (1 - s_pos) / 2
        assert got.balanced is True
        assert got.ssem_residual == pytest.approx(want, abs=1e-6)
        assert got.ssem_residual == pytest.approx(
            m * n * (1 - got.total_variance) + (1 - s_pos) / 2, abs=1e-6
        )


def test_collapsed_classes_are_flagged_and_the_ssem_has_zero_residual():
    m, n = 3, 4
    labels = np.arange(m * n) // n
    for beta in (1.0, 0.6):
        z = ssem_embedding(beta, m, n)
        got = class_collapse(z, z, labels)
        assert got.within_class_variance == pytest.approx(1 - beta, abs=1e-6)
        assert got.total_variance == pytest.approx(1.0, abs=1e-6)
        assert got.s_w == pytest.approx((n * beta - 1) / (n - 1), abs=1e-6)
        assert got.s_b == pytest.approx(-beta / (m - 1), abs=1e-6)
        assert got.ssem_residual == pytest.approx(0.0, abs=1e-6)
        assert got.collapsed is (beta == 1.0)
        assert got.epsilon == COLLAPSE_EPSILON


def test_one_class_and_singletons_have_no_s_b_or_s_w():
    z = torch.randn(4, 3)
    one = class_collapse(z, z, [1, 1, 1, 1])
    assert one.s_b is None and one.ssem_residual is None and one.classes == 1
    singletons = class_collapse(z, z, [0, 1, 2, 3])
    assert singletons.s_w is None and singletons.within_class_variance == pytest.approx(0, abs=1e-6)
    with pytest.raises(ValueError, match="needs labels"):
        class_collapse(z, z, None)


@pytest.mark.slow
def test_analyze_writes_the_block_for_labelled_embeddings(tmp_path, run_cli, pairs_file):
    out = tmp_path / "out"
    r = run_cli("analyze", pairs_file, "--out", out)
    assert r.code == 0, r.err
    data = json.loads((out / "result.json").read_text())
    layer = data["layers"]["embedding"]
    # after the keys a layer had before it (the 2-D view, issue 24, after it)
    assert list(layer) == ["n", "d", "pairs", "geometry", "collapse", "projections"]
    assert layer["collapse"]["classes"] == 3
    data_npz = np.load(pairs_file)
    want = class_collapse(data_npz["z1"], data_npz["z2"], data_npz["labels"])
    assert layer["collapse"] == json.loads(json.dumps(want.to_dict()))
    result = Result.from_dict(data)
    collapse = result.layers["embedding"].collapse
    assert isinstance(collapse, Collapse)
    assert result.to_dict() == data  # read and written back unchanged
    values = {m.key: m.read(result.layers["embedding"]) for m in COLLAPSE_METRICS}
    assert values["within_class_variance"] == want.within_class_variance
    assert collapse == want  # the block measurement returned is the block read back
    report = (out / "report.md").read_text()
    assert "### Class collapse of 'embedding'" in report and "SSEM identity residual" in report


def test_unlabelled_layers_have_no_collapse_block(tmp_path, run_cli):
    rng = np.random.default_rng(0)
    path = tmp_path / "e.npz"
    np.savez(path, z1=rng.standard_normal((20, 4)), z2=rng.standard_normal((20, 4)))
    r = run_cli("analyze", path, "--out", tmp_path / "out")
    assert r.code == 0, r.err
    data = json.loads((tmp_path / "out" / "result.json").read_text())
    assert "collapse" not in data["layers"]["embedding"]
    assert "Class collapse" not in (tmp_path / "out" / "report.md").read_text()
    assert all(m.read(Result.from_dict(data).layers["embedding"]) is None for m in COLLAPSE_METRICS)


def test_collapse_values_are_finite_at_scale():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(5000, 64, generator=g)
    got = class_collapse(z, z + 0.1 * torch.randn(5000, 64, generator=g), torch.arange(5000) % 10)
    assert all(math.isfinite(getattr(got, k)) for k in ("s_w", "s_b", "within_class_variance"))
    # random directions: nothing is collapsed, and the classes do not separate
    assert got.within_class_variance > 0.9 and abs(got.s_w - got.s_b) < 0.01
