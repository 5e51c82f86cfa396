"""Multinomial logistic regression on frozen features: the linear probe."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from cl_diag.measurement.probes.checks import require_probe_inputs
from cl_diag.measurement.probes.features import (
    _check_same_dim,
    _classes,
    _encode,
    _features,
    _labels,
    _normalise,
    _positive_int,
)
from cl_diag.measurement.probes.lbfgs import _lbfgs, _Memory
from cl_diag.measurement.probes.split import stratified_split
from cl_diag.measurement.stats import wilson_interval
from cl_diag.result import LinearProbe

#: Weight-decay grid of the linear probe, searched from the strongest to the weakest.
DEFAULT_WEIGHT_DECAYS: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)


class _SoftmaxRegression:
    """L(theta) = (1/n) sum_i -log softmax(x_i W + b)_{y_i} + (lambda/2) ||W||_F^2.

    theta = [vec(W), b] is one flat vector, W of shape (d, C).  The gradient is
    dL/dW = x^T (P - Y) / n + lambda W, dL/db = 1^T (P - Y) / n with P = softmax rows.

    Along a search direction the logits are affine in the step, Z + t Z_d with
    Z_d = x D_W + d_b, so after one matrix product per direction every trial step
    of the line search costs O(n C) instead of two O(n d C) products -- the trick
    GLM solvers such as glmnet and LIBLINEAR use.  An iteration costs two products
    (Z_d and the gradient) however many trial steps it takes.
    """

    _REFRESH = 10  # recompute Z from scratch every this many steps, bounding drift

    def __init__(self, x: torch.Tensor, y: torch.Tensor, weight_decay: float, n_cls: int) -> None:
        self.x, self.y, self.lam = x, y, weight_decay
        self.n, self.d = x.shape
        self.c = n_cls
        self.nw = self.d * n_cls
        self.rows = torch.arange(self.n, device=x.device)
        self.minus_one = torch.tensor(-1.0, dtype=x.dtype, device=x.device)
        self.steps = 0

    def _wb(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return theta[: self.nw].view(self.d, self.c), theta[self.nw :]

    def _nll_residual(self, z: torch.Tensor) -> tuple[float, torch.Tensor]:
        """Mean cross-entropy of logits z and the residual P - Y (z is not modified)."""
        # log_softmax is one fused pass; logsumexp and a subtraction cost several
        logp = torch.log_softmax(z, dim=1)
        # summed in float64 so that the line search sees decreases below the float32
        # resolution of a sum over n terms
        nll = -float(logp.gather(1, self.y[:, None]).sum(dtype=torch.float64)) / self.n
        r = logp.exp_()
        r.index_put_((self.rows, self.y), self.minus_one, accumulate=True)
        return nll, r

    def _grad(self, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        g = torch.empty(self.nw + self.c, dtype=w.dtype, device=w.device)
        torch.addmm(
            w, self.x.T, r, beta=self.lam, alpha=1.0 / self.n, out=g[: self.nw].view(self.d, self.c)
        )
        torch.sum(r, dim=0, out=g[self.nw :]).div_(self.n)
        return g

    def start(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        """Value and gradient at theta, which becomes the current point."""
        w, b = self._wb(theta)
        self.theta, self.z = theta, torch.addmm(b, self.x, w)
        nll, r = self._nll_residual(self.z)
        return nll + 0.5 * self.lam * float(w.flatten() @ w.flatten()), self._grad(w, r)

    def line(self, direction: torch.Tensor) -> Callable[[float], tuple[float, float]]:
        """phi(t) = L(theta + t d) and phi'(t), each trial without a matrix product."""
        w, _ = self._wb(self.theta)
        dw, db = self._wb(direction)
        self.direction = direction
        self.zd = torch.addmm(db, self.x, dw)
        ww = float(w.flatten() @ w.flatten())
        wd = float(w.flatten() @ dw.flatten())
        dd = float(dw.flatten() @ dw.flatten())
        zd_flat = self.zd.flatten()
        self.trial: tuple[float, torch.Tensor, float, torch.Tensor] | None = None

        def phi(t: float) -> tuple[float, float]:
            zt = torch.add(self.z, self.zd, alpha=t)
            nll, r = self._nll_residual(zt)
            self.trial = (t, zt, nll, r)
            f = nll + 0.5 * self.lam * (ww + 2.0 * t * wd + t * t * dd)
            slope = float(r.flatten() @ zd_flat) / self.n + self.lam * (wd + t * dd)
            return f, slope

        self.phi = phi
        return phi

    def accept(self, t: float) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Move to theta + t d; return the new point, its value and its gradient."""
        if self.trial is None or self.trial[0] != t:
            self.phi(t)
        assert self.trial is not None
        _, zt, nll, r = self.trial
        theta = torch.add(self.theta, self.direction, alpha=t)
        w, b = self._wb(theta)
        self.steps += 1
        if self.steps % self._REFRESH == 0:
            zt = torch.addmm(b, self.x, w)
            nll, r = self._nll_residual(zt)
        self.theta, self.z = theta, zt
        return theta, nll + 0.5 * self.lam * float(w.flatten() @ w.flatten()), self._grad(w, r)


def _fit_logreg(
    x: torch.Tensor,
    y: torch.Tensor,
    weight_decay: float,
    init: torch.Tensor,
    max_iter: int,
    tol: float,
    history_size: int,
    memory: _Memory | None = None,
) -> tuple[torch.Tensor, dict[str, Any], _Memory]:
    """Minimise mean_i CE(x_i W + b, y_i) + (weight_decay / 2) ||W||_F^2 by :func:`_lbfgs`.

    ``init`` is the flat start theta = [vec(W), b]; ``memory`` holds L-BFGS pairs
    already expressed for this weight decay (see :meth:`_Memory.shift_penalty`).
    """
    problem = _SoftmaxRegression(x, y, weight_decay, init.numel() // (x.shape[1] + 1))
    with torch.no_grad():
        return _lbfgs(
            problem, init, max_iter=max_iter, tol=tol, history_size=history_size, memory=memory
        )


def _logits(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    n_cls = theta.numel() // (x.shape[1] + 1)
    return torch.addmm(
        theta[x.shape[1] * n_cls :], x, theta[: x.shape[1] * n_cls].view(x.shape[1], n_cls)
    )


def _topk_correct(logits: torch.Tensor, y: torch.Tensor, k: int) -> tuple[int, int]:
    """Counts of rows whose label is the arg-max (top-1) / among the k largest logits."""
    top = logits.topk(k, dim=1).indices
    hit = top == y[:, None]
    return int(hit[:, 0].sum()), int(hit.any(dim=1).sum())


def linear_probe(
    train_x: Any,
    train_y: Any,
    test_x: Any,
    test_y: Any,
    *,
    weight_decays: Sequence[float] = DEFAULT_WEIGHT_DECAYS,
    val_fraction: float = 0.1,
    seed: int = 0,
    max_iter: int = 500,
    tol: float = 1e-6,
    history_size: int = 20,
    patience: int | None = 1,
    center: bool = True,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> LinearProbe:
    """Linear probe: multinomial logistic regression on frozen, L2-normalised features.

    With features x_i / ||x_i|| and classes 0..C-1, the classifier (W in R^{d x C}, b in R^C)
    minimises

        L(W, b) = (1/n) sum_i -log softmax(x_i W + b)_{y_i} + (lambda / 2) ||W||_F^2,

    the bias unpenalised: scikit-learn's ``LogisticRegression`` objective with ``C = 1 / (lambda
    * n)``. It is solved by full-batch L-BFGS in torch (:func:`_lbfgs`, weak-Wolfe line search,
    from W = 0, b = 0), stopping when max|grad| <= ``tol``, when an iteration lowers L by less than
    the relative rounding of ``dtype``, or after ``max_iter``. Centring the features (``center``)
    is an exact reparametrisation that only speeds L-BFGS.

    lambda is chosen on a seeded stratified split of the train split (:func:`stratified_split`),
    walking the grid from the largest value down, each fit warm-started from the previous one;
    the highest validation top-1 wins (ties: the larger lambda), and ``patience`` stops the walk
    after that many values in a row below the best. The final classifier is refit on the whole
    train split, warm-started; the objective is convex, so warm starts change the time, not the
    answer. The paper (App. D) trains its head with SGD instead; this is deterministic and much
    cheaper on cached features.

    Returns the :class:`cl_diag.result.LinearProbe` block: test top-1 and top-k (k = min(5, C))
    as fractions, the chosen lambda, and every setting, with each grid value's validation top-1
    and each fit's iterations and stopping reason. Test labels absent from the train split count
    as errors.
    """
    tx = _features(train_x, "train_x")
    vx = _features(test_x, "test_x")
    _check_same_dim(tx, vx, "train_x", "test_x")
    ty = _labels(train_y, tx.shape[0], "train_y", "train_x")
    vy = _labels(test_y, vx.shape[0], "test_y", "test_x")
    # before any fitting: two classes, and a validation part for the weight decay
    require_probe_inputs("linear", train_y=ty, test_y=vy, val_fraction=val_fraction)
    classes = _classes(ty)
    wds = [float(w) for w in weight_decays]
    if not wds or any(not math.isfinite(w) or w <= 0 for w in wds):
        raise ValueError(
            "weight_decays must be a non-empty list of positive numbers, got "
            f"{list(weight_decays)!r}"
        )
    max_iter = _positive_int(max_iter, "max_iter")
    if patience is not None:
        patience = _positive_int(patience, "patience")
    history_size = _positive_int(history_size, "history_size")
    if not (tol > 0):
        raise ValueError(f"tol must be positive, got {tol}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    dev = torch.device(device) if device is not None else torch.device("cpu")

    n_cls = classes.size
    k_top = min(5, n_cls)
    fit_idx, val_idx = stratified_split(ty, val_fraction, seed)
    x = _normalise(tx).to(device=dev, dtype=dtype)
    # Centering is an exact reparametrisation, (x - mu) W + (b + mu W) = x W + b, with the
    # penalty on W unchanged; it removes the common direction of non-negative (post-ReLU)
    # features that otherwise makes the problem ill-conditioned and L-BFGS slow.
    mu = x.mean(dim=0) if center else torch.zeros_like(x[0])
    x = x - mu
    y = torch.from_numpy(_encode(ty, classes)).to(dev)
    d = x.shape[1]
    grid = sorted(set(wds), reverse=True)

    x_fit, y_fit = x[torch.from_numpy(fit_idx).to(dev)], y[torch.from_numpy(fit_idx).to(dev)]
    x_val, y_val = x[torch.from_numpy(val_idx).to(dev)], y[torch.from_numpy(val_idx).to(dev)]
    theta = torch.zeros(d * n_cls + n_cls, dtype=dtype, device=dev)
    mem, mem_wd = None, 0.0
    val_top1: dict[str, float] = {}
    fits: dict[str, dict[str, Any]] = {}
    best: tuple[float, float, torch.Tensor, _Memory] | None = None
    worse = 0
    for wd in grid:
        # the path's warm start: previous solution and its curvature pairs, re-expressed
        # for this weight decay
        if mem is not None:
            mem.shift_penalty(wd - mem_wd, d * n_cls)
        theta, fits[repr(wd)], mem = _fit_logreg(
            x_fit, y_fit, wd, theta, max_iter, tol, history_size, mem
        )
        mem_wd = wd
        acc = _topk_correct(_logits(theta, x_val), y_val, 1)[0] / len(val_idx)
        val_top1[repr(wd)] = acc
        # strict '>' keeps the larger weight decay on ties, the grid being descending
        if best is None or acc > best[0]:
            best = (acc, wd, theta, mem.copy())
        # Weaker regularisation costs more iterations and, past the optimum, validation
        # accuracy keeps falling: stop the walk after `patience` candidates in a row
        # below the best so far.
        worse = worse + 1 if acc < best[0] else 0
        if patience is not None and worse >= patience:
            break
        # nothing can beat a perfect score, and ties go to the larger weight decay
        if acc == 1.0:
            break
    assert best is not None
    _, wd_best, theta, mem = best
    # Refit on fit + validation rows from the chosen solution; its curvature pairs,
    # measured on 1 - val_fraction of the rows, still precondition well.
    theta, fits["refit"], _ = _fit_logreg(x, y, wd_best, theta, max_iter, tol, history_size, mem)
    xt = _normalise(vx).to(device=dev, dtype=dtype) - mu
    yt = torch.from_numpy(_encode(vy, classes)).to(dev)
    c1, c5 = _topk_correct(_logits(theta, xt), yt, k_top)
    n_test = vx.shape[0]
    return LinearProbe(
        top1=c1 / n_test,
        top5=c5 / n_test,
        top1_interval=wilson_interval(c1, n_test),
        weight_decay=wd_best,
        settings={
            "normalisation": "l2 per row",
            "model": "multinomial logistic regression, unpenalised bias",
            "objective": "mean cross-entropy + weight_decay/2 * ||W||_F^2 "
            "(sklearn C = 1/(weight_decay*n))",
            "optimiser": "full-batch L-BFGS (compact form), weak-Wolfe line search, init zeros",
            "centred": bool(center),
            "dtype": str(dtype).replace("torch.", ""),
            "max_iter": max_iter,
            "tolerance": tol,
            "history_size": history_size,
            "weight_decay_grid": grid,
            "selection": "highest validation top-1 (ties: larger weight decay); grid walked from "
            "large to small with warm starts; refit on full train split warm-started",
            "patience": patience,
            "val_top1": val_top1,
            "val_fraction": float(val_fraction),
            "seed": int(seed),
            "n_train": int(tx.shape[0]),
            "n_fit": int(fit_idx.size),
            "n_val": int(val_idx.size),
            "n_test": int(n_test),
            "n_test_unseen_class": int((_encode(vy, classes) < 0).sum()),
            "classes": int(n_cls),
            "top5_k": k_top,
            "fits": fits,
        },
    )
