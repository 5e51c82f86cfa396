"""Probes against independent implementations (scikit-learn, brute-force numpy) and hand values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from cl_diag.measurement.probes import (
    _fit_logreg,
    _Memory,
    clustering,
    knn_predict,
    knn_probe,
    linear_probe,
    retrieval,
    retrieval_ranks,
    stratified_split,
)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(y.size)
    x, y = x[perm].astype(np.float32), y[perm]
    return x[:1200], y[:1200], x[1200:], y[1200:]


def _tied_patterns(n: int, rng: np.random.Generator) -> np.ndarray:
    """Rows with exactly four ones among eight: unit rows hold 0 and 0.5, so every cosine
    is a multiple of 1/4, computed exactly in any precision and order -- plenty of ties."""
    out = np.zeros((n, 8), dtype=np.float32)
    for i in range(n):
        out[i, rng.choice(8, size=4, replace=False)] = 1.0
    return out


# ----------------------------------------------------------------------------- linear probe


def test_logreg_objective_matches_sklearn_coefficients(digits):
    """Same objective: mean CE + wd/2 ||W||^2  <=>  sklearn C = 1 / (wd * n)."""
    x_tr, y_tr, _, _ = digits
    x_tr, y_tr = x_tr[:600], y_tr[:600]
    x = torch.from_numpy(_unit(x_tr.astype(np.float64)))
    n, d = x.shape
    for wd in (1e-2, 1e-3):
        theta, info, _ = _fit_logreg(
            x,
            torch.from_numpy(y_tr),
            wd,
            torch.zeros(d * 10 + 10, dtype=torch.float64),
            2000,
            1e-9,
            20,
        )
        sk = LogisticRegression(C=1.0 / (wd * n), tol=1e-10, max_iter=10_000).fit(x.numpy(), y_tr)
        w = theta[: d * 10].view(d, 10).numpy().T
        b = theta[d * 10 :].numpy()
        scale = np.abs(sk.coef_).max()
        assert np.abs(w - sk.coef_).max() <= 1e-4 * scale, info
        # both start at b = 0 and the bias gradient sums to 0 over classes: same (centred)
        # intercepts
        assert np.abs(b - sk.intercept_).max() <= 1e-4 * scale


def _two_loop(pairs, g):
    """Nocedal & Wright Alg. 7.4, H0 = (s_m.y_m / y_m.y_m) I; pairs oldest first."""
    q = g.copy()
    alphas = []
    for s, y in reversed(pairs):
        a = (s @ q) / (s @ y)
        q -= a * y
        alphas.append(a)
    s, y = pairs[-1]
    r = (s @ y) / (y @ y) * q
    for (s, y), a in zip(pairs, reversed(alphas), strict=True):
        r += (a - (y @ r) / (s @ y)) * s
    return r


def test_compact_lbfgs_product_matches_two_loop_recursion():
    rng = np.random.default_rng(0)
    p, m = 30, 5
    a = rng.normal(size=(p, p))
    hess = a @ a.T + np.eye(p)
    pairs = [(s, hess @ s) for s in rng.normal(size=(8, p))]
    mem = _Memory(m, p, torch.zeros(p, dtype=torch.float64))
    for s, y in pairs:
        mem.push(torch.from_numpy(s), torch.from_numpy(y))
    g = rng.normal(size=p)
    # eight pushes into five slots: the ring keeps the last five, oldest first
    expect = _two_loop(pairs[-m:], g)
    assert np.allclose(mem.apply(torch.from_numpy(g)).numpy(), expect, rtol=1e-10, atol=1e-12)


def test_memory_shift_penalty_is_exact():
    """y for weight decay w2 equals y for w1 plus (w2 - w1) s on the W coordinates."""
    rng = np.random.default_rng(1)
    n, d, c = 40, 3, 4
    x = torch.from_numpy(rng.normal(size=(n, d)))
    y = torch.from_numpy(rng.integers(0, c, size=n))

    def grad(theta, wd):  # independent: autograd through F.cross_entropy
        theta = theta.clone().requires_grad_(True)
        w, b = theta[: d * c].view(d, c), theta[d * c :]
        loss = torch.nn.functional.cross_entropy(x @ w + b, y) + 0.5 * wd * (w**2).sum()
        (g,) = torch.autograd.grad(loss, theta)
        return g

    t0, t1 = (
        torch.from_numpy(rng.normal(size=d * c + c)),
        torch.from_numpy(rng.normal(size=d * c + c)),
    )
    mem = _Memory(3, d * c + c, t0)
    mem.push(t1 - t0, grad(t1, 1e-1) - grad(t0, 1e-1))
    mem.shift_penalty(1e-3 - 1e-1, d * c)
    assert torch.allclose(mem.y[mem.order[0]], grad(t1, 1e-3) - grad(t0, 1e-3), atol=1e-12)
    assert mem.sty[mem.order[0], mem.order[0]] == pytest.approx(
        float((t1 - t0) @ mem.y[mem.order[0]])
    )


def test_linear_probe_single_weight_decay_matches_sklearn(digits):
    x_tr, y_tr, x_te, y_te = digits
    x_tr, y_tr = x_tr[:800], y_tr[:800]
    wd = 1e-4
    res = linear_probe(x_tr, y_tr, x_te, y_te, weight_decays=(wd,))
    xn_tr, xn_te = _unit(x_tr.astype(np.float64)), _unit(x_te.astype(np.float64))
    sk = LogisticRegression(C=1.0 / (wd * len(y_tr)), tol=1e-6, max_iter=5000).fit(xn_tr, y_tr)
    assert res.weight_decay == wd
    assert abs(res.top1 - sk.score(xn_te, y_te)) <= 0.005
    scores = sk.decision_function(xn_te)
    top5 = (np.argsort(-scores, axis=1)[:, :5] == y_te[:, None]).any(axis=1).mean()
    assert abs(res.top5 - top5) <= 0.005


def test_linear_probe_selection_matches_sklearn_loop(digits):
    """The whole protocol (grid on the held-out split, refit) written with sklearn."""
    x_tr, y_tr, x_te, y_te = digits
    x_tr, y_tr = x_tr[:800], y_tr[:800]
    grid = (1e-2, 1e-3, 1e-4, 1e-5)
    res = linear_probe(x_tr, y_tr, x_te, y_te, weight_decays=grid, patience=None, seed=3)
    xn_tr, xn_te = _unit(x_tr.astype(np.float64)), _unit(x_te.astype(np.float64))
    fit, val = stratified_split(y_tr, 0.1, 3)
    accs = {}
    for wd in grid:
        m = LogisticRegression(C=1.0 / (wd * fit.size), tol=1e-6, max_iter=5000).fit(
            xn_tr[fit], y_tr[fit]
        )
        accs[wd] = m.score(xn_tr[val], y_tr[val])
    best = max(grid, key=lambda w: (accs[w], w))  # ties: larger weight decay
    sk = LogisticRegression(C=1.0 / (best * len(y_tr)), tol=1e-6, max_iter=5000).fit(xn_tr, y_tr)
    assert set(res.settings["val_top1"]) == {repr(w) for w in grid}
    for w in grid:
        assert (
            abs(res.settings["val_top1"][repr(w)] - accs[w]) <= 1.5 / val.size
        )  # at most one sample
    assert abs(res.top1 - sk.score(xn_te, y_te)) <= 0.005
    assert res.top1 > 0.93


def test_linear_probe_separable_and_topk_clipped():
    rng = np.random.default_rng(1)
    centres = np.eye(10)[:3] * 5.0
    y = np.repeat(np.arange(3), 100)
    x = centres[y] + rng.normal(scale=0.3, size=(300, 10))
    yt = np.repeat(np.arange(3), 30)
    xt = centres[yt] + rng.normal(scale=0.3, size=(90, 10))
    res = linear_probe(x, y, xt, yt)
    assert res.top1 == 1.0
    # three classes: "top5" is top-3, which always contains the label
    assert res.settings["top5_k"] == 3 and res.top5 == 1.0
    assert res.settings["classes"] == 3 and res.settings["n_test"] == 90


def test_linear_probe_reproducible_and_records_settings(digits):
    x_tr, y_tr, x_te, y_te = digits
    kw = dict(seed=5, weight_decays=(1e-2, 1e-3))
    a = linear_probe(x_tr[:400], y_tr[:400], x_te, y_te, **kw)
    b = linear_probe(torch.from_numpy(x_tr[:400]), torch.from_numpy(y_tr[:400]), x_te, y_te, **kw)
    assert a == b
    st = a.settings
    for key in (
        "normalisation",
        "optimiser",
        "max_iter",
        "tolerance",
        "weight_decay_grid",
        "val_fraction",
        "seed",
        "n_train",
        "n_test",
        "classes",
    ):
        assert key in st
    assert st["n_train"] == 400 and st["n_fit"] + st["n_val"] == 400 and st["seed"] == 5
    assert 0.0 <= a.top1 <= a.top5 <= 1.0


def test_linear_probe_label_values_are_arbitrary(digits):
    """Class labels are names: shifting them changes nothing; unseen test labels count as errors."""
    x_tr, y_tr, x_te, y_te = digits
    a = linear_probe(x_tr[:300], y_tr[:300], x_te[:200], y_te[:200], weight_decays=(1e-3,))
    b = linear_probe(
        x_tr[:300], y_tr[:300] * 7 + 100, x_te[:200], y_te[:200] * 7 + 100, weight_decays=(1e-3,)
    )
    assert a.top1 == b.top1 and a.top5 == b.top5
    y_bad = y_te[:200].copy()
    y_bad[:10] = 99
    c = linear_probe(x_tr[:300], y_tr[:300], x_te[:200], y_bad, weight_decays=(1e-3,))
    assert c.settings["n_test_unseen_class"] == 10
    assert c.top1 <= a.top1


def test_stratified_split():
    y = np.repeat(np.arange(4), [10, 20, 30, 1])
    fit, val = stratified_split(y, 0.1, seed=0)
    assert np.all(np.diff(fit) > 0) and np.all(np.diff(val) > 0)
    assert np.intersect1d(fit, val).size == 0 and fit.size + val.size == y.size
    assert np.bincount(y[val], minlength=4).tolist() == [1, 2, 3, 0]  # the singleton stays in fit
    again = stratified_split(y, 0.1, seed=0)
    assert np.array_equal(again[1], val)
    assert not np.array_equal(stratified_split(y, 0.1, seed=1)[1], val)


# ----------------------------------------------------------------------------- kNN


def _knn_brute(train_x, train_y, test_x, k, temperature):
    """Direct transcription: sort by (similarity desc, index asc), vote exp(s/T) per class."""
    tr, te = _unit(train_x.astype(np.float64)), _unit(test_x.astype(np.float64))
    classes = np.unique(train_y)
    k = min(k, len(train_y))
    out = []
    for q in te:
        s = tr @ q
        order = np.lexsort((np.arange(s.size), -s))[:k]
        votes = np.zeros(classes.size)
        for j in order:
            votes[np.searchsorted(classes, train_y[j])] += math.exp(s[j] / temperature)
        out.append(classes[int(np.argmax(votes))])  # first maximum: smallest class
    return np.array(out)


def test_knn_vote_hand_computed():
    # q = e1; a = e1 (class 0, s = 1); b, c = (0.8, 0.6) (class 1, s = 0.8)
    train = np.array([[1.0, 0.0], [0.8, 0.6], [0.8, 0.6]], dtype=np.float32)
    y = np.array([0, 1, 1])
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    # T = 0.07: e^(1/0.07) = 1.6e6 > 2 e^(0.8/0.07) = 1.8e5  -> class 0
    assert knn_predict(train, y, q, ks=(3,), temperature=0.07)[3].tolist() == [0]
    # T = 1: e^1 = 2.72 < 2 e^0.8 = 4.45  -> class 1
    assert knn_predict(train, y, q, ks=(3,), temperature=1.0)[3].tolist() == [1]
    # k = 1: only a
    assert knn_predict(train, y, q, ks=(1,), temperature=1.0)[1].tolist() == [0]


def test_knn_matches_brute_force_random():
    rng = np.random.default_rng(0)
    train = rng.normal(size=(300, 8)).astype(np.float32)
    ty = rng.integers(0, 5, size=300)
    test = rng.normal(size=(97, 8)).astype(np.float32)
    ks = (1, 5, 20, 200, 500)
    preds = knn_predict(train, ty, test, ks=ks, block_size=13)
    for k in ks:
        assert np.array_equal(preds[k], _knn_brute(train, ty, test, k, 0.07)), k


def test_knn_matches_brute_force_with_ties():
    rng = np.random.default_rng(1)
    train = _tied_patterns(120, rng)
    ty = rng.integers(0, 4, size=120)
    test = _tied_patterns(60, rng)
    ks = (1, 2, 3, 7, 20)
    for temperature in (0.07, 1.0):
        preds = knn_predict(train, ty, test, ks=ks, temperature=temperature, block_size=16)
        for k in ks:
            assert np.array_equal(preds[k], _knn_brute(train, ty, test, k, temperature)), (
                k,
                temperature,
            )


def test_knn_tie_rules_explicit():
    # three identical train rows: with k = 1 the smallest index (label 2) wins
    train = np.ones((3, 4), dtype=np.float32)
    assert knn_predict(train, np.array([2, 0, 1]), np.ones((1, 4)), ks=(1,))[1].tolist() == [2]
    # k = 2: labels 2 and 0 with equal votes -> the smaller class, 0
    assert knn_predict(train, np.array([2, 0, 1]), np.ones((1, 4)), ks=(2,))[2].tolist() == [0]


def test_knn_probe_accuracy_and_settings():
    rng = np.random.default_rng(2)
    train = rng.normal(size=(150, 6)).astype(np.float32)
    ty = rng.integers(0, 3, size=150)
    test = rng.normal(size=(40, 6)).astype(np.float32)
    yy = rng.integers(0, 3, size=40)
    res = knn_probe(train, ty, test, yy)
    assert list(res.to_dict()) == ["k20", "k200", "settings"]  # result.json's keys
    assert res.top1[20] == float((_knn_brute(train, ty, test, 20, 0.07) == yy).mean())
    assert res.top1[200] == float((_knn_brute(train, ty, test, 150, 0.07) == yy).mean())
    assert res.settings["k_effective"] == {"k20": 20, "k200": 150}
    assert res.settings["temperature"] == 0.07
    assert knn_probe(train, ty, test, yy) == res


def test_test_accuracies_carry_scipys_wilson_interval_in_result_json(digits):
    """Issue 37: the linear and kNN top-1 carry their 95 % Wilson interval over the test
    images in result.json, as scipy's binomtest computes it for the same count."""
    from scipy.stats import binomtest

    x_tr, y_tr, x_te, y_te = digits
    x_tr, y_tr, x_te, y_te = x_tr[:300], y_tr[:300], x_te[:97], y_te[:97]
    linear = linear_probe(x_tr, y_tr, x_te, y_te, weight_decays=(1e-3,))
    knn = knn_probe(x_tr, y_tr, x_te, y_te, ks=(5,))
    for top1, interval in (
        (linear.top1, linear.top1_interval),
        (knn.top1[5], knn.scores[5].top1_interval),
    ):
        correct = round(top1 * 97)
        assert correct / 97 == top1 and 0 < correct < 97  # an interior count: both ends move
        expected = binomtest(correct, 97).proportion_ci(method="wilson")
        assert interval == pytest.approx((expected.low, expected.high), abs=1e-12)
        assert interval[0] < top1 < interval[1]
    assert linear.to_dict()["top1_interval"] == list(linear.top1_interval)
    assert list(knn.to_dict()["k5"]) == ["top1", "top1_interval"]


# ----------------------------------------------------------------------------- retrieval


def test_retrieval_hand_computed_pessimistic_ties():
    u = v = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    assert retrieval_ranks(u, v).tolist() == [2, 2, 1]
    res = retrieval(u, v)
    assert res.recall[1] == pytest.approx(1 / 3)
    assert res.recall[5] == 1.0 and res.recall[10] == 1.0
    # in result.json, one key per requested k
    assert list(res.to_dict())[:3] == ["recall_at_1", "recall_at_5", "recall_at_10"]
    assert res.median_rank == 2.0


def test_retrieval_matches_brute_force():
    rng = np.random.default_rng(3)
    u = rng.normal(size=(211, 16)).astype(np.float32)
    v = (u + rng.normal(scale=1.5, size=u.shape)).astype(np.float32)
    s = _unit(u.astype(np.float64)) @ _unit(v.astype(np.float64)).T
    brute = (s >= np.diag(s)[:, None]).sum(axis=1)
    ranks = retrieval_ranks(torch.from_numpy(u), torch.from_numpy(v), block_size=17)
    assert np.array_equal(ranks, brute)
    res = retrieval(u, v, block_size=50)
    for k in (1, 5, 10):
        assert res.recall[k] == float((brute <= k).mean())
    assert res.median_rank == float(np.median(brute))
    assert 0.0 < res.recall[1] < res.recall[10] < 1.0  # the data are neither trivial nor hopeless


def test_retrieval_with_ties_matches_brute_force():
    rng = np.random.default_rng(4)
    u = _tied_patterns(90, rng)
    v = _tied_patterns(90, rng)
    s = _unit(u.astype(np.float64)) @ _unit(v.astype(np.float64)).T
    brute = (s >= np.diag(s)[:, None]).sum(axis=1)
    assert np.array_equal(retrieval_ranks(u, v, block_size=7), brute)


# ----------------------------------------------------------------------------- clustering


def test_clustering_separated_blobs():
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(4), 50)
    x = np.eye(6)[y] * 10 + rng.normal(scale=0.3, size=(200, 6))
    res = clustering(x, y * 3 + 1, seed=0)  # label values are names
    assert res.nmi == pytest.approx(1.0) and res.ari == pytest.approx(1.0)
    assert res.settings["k"] == 4


def test_clustering_matches_sklearn_and_is_reproducible():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 3, size=120)
    x = rng.normal(size=(120, 5)) + np.eye(5)[y]
    a = clustering(x, y, seed=7)
    assert a == clustering(torch.from_numpy(x), torch.from_numpy(y), seed=7)
    from sklearn.cluster import KMeans

    pred = KMeans(n_clusters=3, n_init=10, random_state=7).fit_predict(_unit(x))
    assert a.nmi == pytest.approx(normalized_mutual_info_score(y, pred), abs=1e-12)
    assert a.ari == pytest.approx(adjusted_rand_score(y, pred), abs=1e-12)
    assert 0.0 < a.nmi < 1.0


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda x, y: linear_probe(x, y[:-1], x, y), "labels but"),
        (lambda x, y: linear_probe(x, np.zeros_like(y), x, y), "single class"),
        (lambda x, y: linear_probe(x, y, x[:, :3], y), "same dimension"),
        (lambda x, y: linear_probe(x, y.astype(float), x, y), "integer class labels"),
        (lambda x, y: linear_probe(x[:, 0], y, x, y), "2-D"),
        (lambda x, y: linear_probe(x, y, x, y, weight_decays=(0.0,)), "weight_decays"),
        (lambda x, y: linear_probe(x, y, x, y, val_fraction=1.0), "val_fraction"),
        (lambda x, y: knn_probe(x, y, x, y, ks=(0,)), "positive integer"),
        (lambda x, y: knn_probe(x, y, x, y, temperature=0.0), "temperature"),
        (lambda x, y: knn_probe(x, y, x, y[:-1]), "labels but"),
        (lambda x, y: retrieval(x, x[:-1]), "pair row by row"),
        (lambda x, y: clustering(x, y[:5]), "labels but"),
        (lambda x, y: clustering(x[:1], y[:1]), "single class"),
        (lambda x, y: linear_probe([[1.0]], y, x, y), "torch.Tensor or numpy"),
    ],
)
def test_bad_inputs_raise_value_error(call, match):
    rng = np.random.default_rng(7)
    x = rng.normal(size=(40, 4)).astype(np.float32)
    y = np.arange(40) % 2
    with pytest.raises(ValueError, match=match):
        call(x, y)


def test_nan_features_rejected():
    x = np.ones((10, 3))
    x[4, 1] = np.nan
    y = np.arange(10) % 2
    with pytest.raises(ValueError, match=r"NaN or infinite values.*row 4"):
        knn_probe(x, y, np.ones((2, 3)), np.array([0, 1]))
    with pytest.raises(ValueError, match="NaN"):
        retrieval(np.ones((10, 3)), x)
