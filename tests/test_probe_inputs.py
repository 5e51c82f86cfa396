"""Probe input checks (can a probe run on these labels?) and the one stratified split."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.model_selection import train_test_split

import cl_diag.measurement.probes.linear as linear_module
from cl_diag.errors import UserError
from cl_diag.measurement.probes import (
    ProbeInputError,
    check_probe_inputs,
    clustering,
    knn_probe,
    linear_probe,
    retrieval,
    stratified_split,
)
from cl_diag.training.data import (
    DIGITS_SPLIT_SEED,
    DIGITS_TEST_FRACTION,
    digits_arrays,
    digits_split,
)

# ----------------------------------------------------------------------------- check_probe_inputs


def test_probe_input_error_is_a_user_error_and_a_value_error():
    err = ProbeInputError("x")
    assert isinstance(err, UserError) and isinstance(err, ValueError)
    assert err.exit_code == 2  # the CLI's exit status for a user's mistake


def test_single_class_is_refused_by_name():
    y = np.full(30, 3)
    for probe in ("linear", "knn"):
        reason = check_probe_inputs(probe, train_y=y)
        assert reason is not None and "single class (3)" in reason and probe in reason
    reason = check_probe_inputs("clustering", test_y=torch.full((9,), 7))
    assert reason is not None and "clustered labels hold a single class (7)" in reason


def test_linear_needs_one_class_big_enough_for_the_validation_part():
    # at val_fraction 0.1 a class spares a validation sample from 6 samples on:
    # round(0.1 * 5) = round(0.5) = 0 (halves to even), round(0.6) = 1
    two_each = np.repeat(np.arange(10), 2)  # 20 images over 10 classes, as --probe-train-images 20
    reason = check_probe_inputs("linear", train_y=two_each)
    assert reason is not None
    assert "validation part of the train split is empty" in reason and "6 samples" in reason
    assert check_probe_inputs("knn", train_y=two_each) is None  # kNN has no validation part
    five = np.repeat(np.arange(3), [5, 5, 5])
    assert check_probe_inputs("linear", train_y=five) is not None
    six = np.repeat(np.arange(3), [6, 1, 1])
    assert check_probe_inputs("linear", train_y=six) is None
    # a larger fraction lowers the bar: round(0.25 * 2) = 0, round(0.25 * 3) = 1
    assert "3 samples" in check_probe_inputs("linear", train_y=two_each, val_fraction=0.25)
    assert check_probe_inputs("linear", train_y=np.repeat([0, 1], 3), val_fraction=0.25) is None


def test_empty_inputs_and_retrieval():
    assert "no samples" in check_probe_inputs("linear", train_y=[])
    assert "no test samples" in check_probe_inputs("knn", train_y=[0, 1], test_y=[])
    assert "no (u, v) pairs" in check_probe_inputs("retrieval", n_pairs=0)
    assert check_probe_inputs("retrieval", n_pairs=1) is None
    assert check_probe_inputs("knn", train_y=[0, 1], test_y=[5]) is None


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(probe="pca", train_y=[0, 1]), "probe must be one of"),
        (dict(probe="linear"), "needs train_y"),
        (dict(probe="clustering", train_y=[0, 1]), "needs test_y"),
        (dict(probe="retrieval"), "needs n_pairs"),
        (dict(probe="retrieval", n_pairs=2.0), "n_pairs must be an integer"),
        (dict(probe="linear", train_y=[0, 1], val_fraction=1.0), "val_fraction"),
        (dict(probe="knn", train_y=[0.5, 1.0]), "integer class labels"),
    ],
)
def test_check_probe_inputs_rejects_a_wrong_call(kwargs, match):
    probe = kwargs.pop("probe")
    with pytest.raises(ValueError, match=match):
        check_probe_inputs(probe, **kwargs)


def _run(probe: str, x: np.ndarray, y: np.ndarray, xt: np.ndarray, yt: np.ndarray) -> None:
    if probe == "linear":
        linear_probe(x, y, xt, yt, weight_decays=(1e-2,), max_iter=5)
    elif probe == "knn":
        knn_probe(x, y, xt, yt, ks=(3,))
    else:
        clustering(xt, yt, n_init=1, max_iter=5)


@pytest.mark.parametrize("probe", ["linear", "knn", "clustering"])
def test_the_check_and_the_probe_agree(probe):
    """check_probe_inputs is None exactly when the probe runs; otherwise the probe raises
    ProbeInputError with the same message."""
    rng = np.random.default_rng(0)
    outcomes = set()
    for _ in range(40):
        n_train, n_test = int(rng.integers(1, 25)), int(rng.integers(1, 8))
        n_cls = int(rng.integers(1, 6))
        y, yt = rng.integers(0, n_cls, size=n_train), rng.integers(0, n_cls, size=n_test)
        x = rng.normal(size=(n_train, 3)).astype(np.float32)
        xt = rng.normal(size=(n_test, 3)).astype(np.float32)
        reason = check_probe_inputs(probe, train_y=y, test_y=yt)
        if reason is None:
            _run(probe, x, y, xt, yt)
        else:
            with pytest.raises(ProbeInputError) as info:
                _run(probe, x, y, xt, yt)
            assert str(info.value) == reason
        outcomes.add(reason is None)
    assert outcomes == {True, False}  # the draws cover both answers


def test_linear_probe_refuses_before_fitting(monkeypatch):
    def no_fit(*args, **kwargs):
        raise AssertionError("the solver ran on inputs the probe cannot use")

    monkeypatch.setattr(linear_module, "_fit_logreg", no_fit)
    x = np.random.default_rng(1).normal(size=(20, 4)).astype(np.float32)
    with pytest.raises(ProbeInputError, match="validation part"):
        linear_probe(x, np.repeat(np.arange(10), 2), x, np.zeros(20, dtype=int))
    with pytest.raises(ProbeInputError, match="single class"):
        linear_probe(x, np.zeros(20, dtype=int), x, np.zeros(20, dtype=int))


def test_empty_features_are_a_probe_input_error():
    with pytest.raises(ProbeInputError, match="is empty"):
        retrieval(np.zeros((0, 3)), np.zeros((0, 3)))


# ----------------------------------------------------------------------------- stratified_split


def test_per_class_split_membership_is_pinned():
    """The linear probe's fit / validation split: the indices drawn before the package split."""
    y = np.repeat(np.arange(3), [7, 12, 20])
    fit, val = stratified_split(y, 0.25, 11)
    assert val.tolist() == [1, 3, 9, 15, 16, 20, 23, 24, 25, 31]
    assert fit.tolist() == sorted(set(range(39)) - set(val.tolist()))
    # and with the method spelled out
    assert np.array_equal(stratified_split(y, 0.25, 11, method="per_class")[1], val)


@pytest.mark.parametrize("seed, fraction", [(0, 0.25), (3, 0.1), (7, 1 / 3)])
def test_sklearn_split_is_scikit_learns_train_test_split(seed, fraction):
    _, labels = digits_arrays()
    kept, held = stratified_split(labels, fraction, seed, method="sklearn")
    a, b = train_test_split(
        np.arange(len(labels)), test_size=fraction, stratify=labels.numpy(), random_state=seed
    )
    assert kept.dtype == np.int64 and held.dtype == np.int64
    assert np.array_equal(kept, np.sort(a)) and np.array_equal(held, np.sort(b))
    # the two rules draw differently: they are kept side by side, not merged
    assert not np.array_equal(stratified_split(labels, fraction, seed)[1], held)


def test_digits_split_is_unchanged_by_the_move():
    """The fixed digits split (checkpoints and reference reports depend on it) is still
    scikit-learn's, bit for bit."""
    _, labels = digits_arrays()
    train, test = digits_split()
    a, b = train_test_split(
        np.arange(len(labels)),
        test_size=DIGITS_TEST_FRACTION,
        stratify=labels.numpy(),
        random_state=DIGITS_SPLIT_SEED,
    )
    assert torch.equal(train, torch.from_numpy(np.sort(a)))
    assert torch.equal(test, torch.from_numpy(np.sort(b)))
    assert test[:5].tolist() == [21, 24, 28, 34, 35]  # pinned from main before the move


def test_split_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="method must be"):
        stratified_split(np.arange(10) % 2, 0.2, 0, method="random")  # type: ignore[arg-type]
