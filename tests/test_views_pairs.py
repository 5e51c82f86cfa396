"""Pair statistics over V > 2 views (``analyze --views V``) against a brute-force count."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cl_diag.measurement.inputs import label_codes, normalise_views
from cl_diag.measurement.pairs import delta_float32, pair_statistics_of


def _views(nv=3, n=30, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(n, d, generator=g)
    return [
        torch.nn.functional.normalize(base + 0.7 * torch.randn(n, d, generator=g), dim=1)
        for _ in range(nv)
    ]


def _brute(views, labels=None):
    z = [x.double().numpy() for x in views]
    nv, n = len(z), z[0].shape[0]
    pos, cross, within, cross_same = [], [], [], []
    for i in range(nv):
        for j in range(i + 1, nv):
            s = z[i] @ z[j].T
            pos += list(np.diag(s))
            for a in range(n):
                for b in range(n):
                    if a != b:
                        cross.append(s[a, b])
                        if labels is not None and labels[a] == labels[b]:
                            cross_same.append(s[a, b])
        s = z[i] @ z[i].T
        within += [s[a, b] for a in range(n) for b in range(a + 1, n)]
    return np.array(pos), np.array(cross), np.array(within), np.array(cross_same)


def _stats(views, labels=None, block_size=7, n_ref=40):
    unit = normalise_views(views[0], views[1])
    codes = label_codes(labels, unit.n, unit.u.device)
    return pair_statistics_of(
        unit, n_ref=n_ref, codes=codes, block_size=block_size, more_views=views[2:]
    )


@pytest.mark.parametrize("nv", [3, 4])
def test_every_view_pair_and_every_view(nv):
    views = _views(nv=nv)
    labels = torch.arange(30) % 4
    got = _stats(views, labels)
    pos, cross, within, cross_same = _brute(views, labels.tolist())
    pairs = nv * (nv - 1) // 2
    assert len(pos) == 30 * pairs and len(cross) == 30 * 29 * pairs and len(within) == nv * 435
    for kind, want in (
        ("positive", pos),
        ("cross_view_negative", cross),
        ("within_view_negative", within),
    ):
        g = got[kind]
        assert g.count == len(want)
        assert g.mean == pytest.approx(want.mean(), rel=1e-6, abs=1e-7)
        assert g.var == pytest.approx(want.var(), rel=1e-5)
        assert g.min == pytest.approx(want.min(), abs=1e-6)
        assert g.max == pytest.approx(want.max(), abs=1e-6)
    t32 = delta_float32(40)
    # float32 similarities below delta: the brute force in float32
    z32 = [x.float() for x in views]
    below = sum(
        int(((z32[i] @ z32[j].T)[~torch.eye(30, dtype=torch.bool)] < t32).sum())
        for i in range(nv)
        for j in range(i + 1, nv)
    )
    assert got["cross_view_negative"].excessive_count == below
    same = got["cross_view_negative"].by_class.same_class
    assert same.count == len(cross_same)
    assert same.mean == pytest.approx(cross_same.mean(), rel=1e-6)


def test_the_same_views_give_the_same_bits_on_any_number_of_threads():
    views = _views(nv=3, n=25)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _stats(views, block_size=4)
        torch.set_num_threads(2)
        two = _stats(views, block_size=4)
    finally:
        torch.set_num_threads(threads)
    assert one == two


def test_sampled_mode_refuses_more_views():
    views = _views(nv=3)
    unit = normalise_views(views[0], views[1])
    with pytest.raises(ValueError, match="exact mode"):
        pair_statistics_of(unit, n_ref=40, mode="sampled", more_views=views[2:])
