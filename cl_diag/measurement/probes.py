"""Probes of a frozen representation: linear, kNN, positive retrieval, clustering.

All four are pure functions of precomputed feature tensors (``torch.Tensor`` or
``numpy.ndarray``, shape ``(n, d)``) and integer labels; none trains or loads a
model.  Features are compared by cosine similarity, so every probe first
L2-normalises the rows, ``x_i / max(||x_i||_2, 1e-12)`` (an all-zero row stays
zero and is then at cosine 0 from everything).

Protocols (the paper, Lee et al., "On the Similarities of Embeddings in
Contrastive Learning", ICML 2025, App. D, probes the backbone output with the
projector dropped, on normalised, un-augmented features):

* :func:`linear_probe` -- multinomial logistic regression on the cached features,
  full-batch L-BFGS, weight decay chosen on a stratified held-out part of the train
  split, then refit on the whole train split.
* :func:`knn_probe` -- weighted cosine kNN with the InstDisc vote (Wu et al. 2018,
  as in solo-learn's ``WeightedKNNClassifier``).
* :func:`retrieval` -- rank of the positive ``v_i`` among all ``v`` for each ``u_i``.
* :func:`clustering` -- k-means with k = number of classes, NMI and ARI.

Every function returns a plain dict of Python numbers -- accuracies, recalls and
NMI as fractions in [0, 1] -- with a ``"settings"`` entry recording every choice
that affects the numbers.  All are deterministic for fixed inputs, seed and thread
count.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import scipy.linalg
import torch
import torch.nn.functional as F

__all__ = [
    "DEFAULT_WEIGHT_DECAYS",
    "linear_probe",
    "knn_probe",
    "knn_predict",
    "retrieval",
    "retrieval_ranks",
    "clustering",
    "stratified_split",
]

#: Weight-decay grid of the linear probe, searched from the strongest to the weakest.
DEFAULT_WEIGHT_DECAYS: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)

_NORM_EPS = 1e-12


# --------------------------------------------------------------------------- validation


def _to_numpy(a: Any, name: str) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    if isinstance(a, np.ndarray):
        return a
    raise ValueError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(a).__name__}")


def _features(x: Any, name: str, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Validate a (n, d) real feature matrix and return it as a CPU torch tensor."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
    elif isinstance(x, np.ndarray):
        if x.dtype == object or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
            raise ValueError(f"{name} must hold numbers, got dtype {x.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(x))
    else:
        raise ValueError(f"{name} must be a torch.Tensor or numpy.ndarray, got {type(x).__name__}")
    if t.is_complex():
        raise ValueError(f"{name} must be real, got dtype {t.dtype}")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D (n, d), got shape {tuple(t.shape)}")
    if t.shape[0] < 1 or t.shape[1] < 1:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)}); pass at least one row and one column")
    t = t.to(device="cpu", dtype=dtype)
    if not torch.isfinite(t).all():
        bad = int((~torch.isfinite(t)).any(dim=1).nonzero()[0, 0])
        raise ValueError(f"{name} contains NaN or infinite values (first in row {bad}); clean the features first")
    return t


def _labels(y: Any, n: int, name: str, xname: str) -> np.ndarray:
    """Validate a 1-D integer label vector of length n and return it as int64 numpy."""
    a = _to_numpy(y, name)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} labels but {xname} has {n} rows; they must match")
    if not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise ValueError(f"{name} must hold integer class labels, got dtype {a.dtype}")
    return a.astype(np.int64, copy=False)


def _check_same_dim(a: torch.Tensor, b: torch.Tensor, an: str, bn: str) -> None:
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"{an} has {a.shape[1]} columns but {bn} has {b.shape[1]}; features must have the same dimension"
        )


def _classes(train_y: np.ndarray) -> np.ndarray:
    classes = np.unique(train_y)
    if classes.size < 2:
        raise ValueError(f"train labels hold a single class ({classes[0]}); a probe needs at least two classes")
    return classes


def _encode(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Map labels to 0..C-1 by their rank in ``classes``; labels absent from ``classes`` become -1."""
    pos = np.searchsorted(classes, y)
    pos_c = np.minimum(pos, classes.size - 1)
    return np.where(classes[pos_c] == y, pos_c, -1).astype(np.int64)


def _normalise(x: torch.Tensor) -> torch.Tensor:
    return F.normalize(x, p=2.0, dim=1, eps=_NORM_EPS)


def _positive_int(v: Any, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


# --------------------------------------------------------------------------- linear probe


def stratified_split(y: Any, val_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified split of ``range(len(y))`` into (fit, validation) index arrays.

    Each class c with n_c samples sends ``min(round(val_fraction * n_c), n_c - 1)`` of
    them, drawn by ``numpy.random.default_rng(seed)``, to validation, so every class
    stays in the fit part.  Both arrays are returned sorted.
    """
    y = _labels(y, len(y), "y", "y")
    if not (0.0 < float(val_fraction) < 1.0):
        raise ValueError(f"val_fraction must lie strictly between 0 and 1, got {val_fraction}")
    rng = np.random.default_rng(seed)
    val_parts = []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        n_val = min(int(round(val_fraction * idx.size)), idx.size - 1)
        if n_val > 0:
            val_parts.append(rng.permutation(idx)[:n_val])
    val = np.sort(np.concatenate(val_parts)) if val_parts else np.empty(0, dtype=np.int64)
    if val.size == 0:
        raise ValueError(
            f"the validation part of the train split is empty (val_fraction={val_fraction}, "
            f"{y.size} samples); use more training samples or a larger val_fraction"
        )
    mask = np.ones(y.size, dtype=bool)
    mask[val] = False
    return np.flatnonzero(mask), val


class _Memory:
    """The last m curvature pairs (s, y) of L-BFGS, kept for the compact form.

    Byrd, Nocedal & Schnabel (1994), "Representations of quasi-Newton matrices and their
    use in limited memory methods", Thm 2.3: with S = [s_1..s_m], Y = [y_1..y_m],
    R = triu(S^T Y), D = diag(S^T Y) and gamma = s_m.y_m / y_m.y_m,

        H g = gamma g + S a + gamma Y c,   c = -R^{-1} S^T g,
        a = R^{-T} ((D + gamma Y^T Y) R^{-1} S^T g - gamma Y^T g).

    The pairs live as rows of two (m, p) matrices, so one product costs four
    matrix-vector products instead of the 4m vector operations of the two-loop
    recursion -- the difference matters when small operations are slow (many tiny
    kernels on a GPU, or OpenMP regions on busy shared cores).
    """

    def __init__(self, m: int, p: int, like: torch.Tensor) -> None:
        self.m = m
        self.s = torch.zeros(m, p, dtype=like.dtype, device=like.device)
        self.y = torch.zeros(m, p, dtype=like.dtype, device=like.device)
        self.sty = np.zeros((m, m))  # sty[i, j] = s_i . y_j  (slots, not chronological)
        self.yty = np.zeros((m, m))
        self.order: list[int] = []  # slots, oldest first

    def push(self, s: torch.Tensor, y: torch.Tensor) -> None:
        if len(self.order) == self.m:
            slot = self.order.pop(0)  # overwrite the oldest pair
        else:
            slot = min(set(range(self.m)).difference(self.order))
        self.s[slot] = s
        self.y[slot] = y
        s_dot_y = (self.s @ y).double().cpu().numpy()
        y_dot = (self.y @ torch.stack([s, y], dim=1)).double().cpu().numpy()
        self.sty[:, slot] = s_dot_y
        self.sty[slot, :] = y_dot[:, 0]
        self.yty[:, slot] = self.yty[slot, :] = y_dot[:, 1]
        self.order.append(slot)

    def copy(self) -> "_Memory":
        new = _Memory.__new__(_Memory)
        new.m, new.s, new.y = self.m, self.s.clone(), self.y.clone()
        new.sty, new.yty, new.order = self.sty.copy(), self.yty.copy(), list(self.order)
        return new

    def shift_penalty(self, delta: float, n_penalised: int) -> None:
        """Re-express the pairs for an objective whose ridge term changed by delta/2 ||w||^2.

        A pair's y is a gradient difference; the ridge adds lambda * s on the penalised
        coordinates, so y' = y + delta * s there -- exact, which lets the memory carry
        from one weight decay of the path to the next.  Pairs left with s.y' <= 0 (none
        for a convex data term) are dropped.
        """
        if not self.order or delta == 0.0:
            return
        self.y[:, :n_penalised].add_(self.s[:, :n_penalised], alpha=delta)
        self.sty = (self.s @ self.y.T).double().cpu().numpy()
        self.yty = (self.y @ self.y.T).double().cpu().numpy()
        self.order = [k for k in self.order if self.sty[k, k] > 1e-10 * self.yty[k, k]]

    def apply(self, g: torch.Tensor) -> torch.Tensor:
        """H g for the current memory (g itself when the memory is empty)."""
        if not self.order:
            return g.clone()
        idx = np.asarray(self.order)
        u = (self.s @ g).double().cpu().numpy()[idx]
        v = (self.y @ g).double().cpu().numpy()[idx]
        sty = self.sty[np.ix_(idx, idx)]
        r = np.triu(sty)
        new = idx[-1]
        gamma = self.sty[new, new] / self.yty[new, new]
        r_inv_u = scipy.linalg.solve_triangular(r, u, lower=False)
        rhs = (np.diag(sty) * r_inv_u) + gamma * (self.yty[np.ix_(idx, idx)] @ r_inv_u) - gamma * v
        a = scipy.linalg.solve_triangular(r, rhs, lower=False, trans="T")
        coef_s = np.zeros(self.m)
        coef_y = np.zeros(self.m)
        coef_s[idx] = a
        coef_y[idx] = -gamma * r_inv_u
        cs = torch.from_numpy(coef_s).to(g)
        cy = torch.from_numpy(coef_y).to(g)
        return torch.addmv(torch.addmv(g, self.s.T, cs, beta=gamma), self.y.T, cy)


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
        torch.addmm(w, self.x.T, r, beta=self.lam, alpha=1.0 / self.n, out=g[: self.nw].view(self.d, self.c))
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


def _cubic_step(a: float, fa: float, ga: float, b: float, fb: float, gb: float) -> float:
    """Minimiser of the cubic through (a, fa, ga), (b, fb, gb), kept inside the interval.

    Nocedal & Wright, "Numerical Optimization", eq. (3.59); bisection when the cubic
    has no interior minimiser.
    """
    lo, hi = min(a, b), max(a, b)
    d1 = ga + gb - 3.0 * (fa - fb) / (a - b)
    disc = d1 * d1 - ga * gb
    if disc >= 0.0:
        d2 = math.copysign(math.sqrt(disc), b - a)
        denom = gb - ga + 2.0 * d2
        if denom != 0.0:
            t = b - (b - a) * (gb + d2 - d1) / denom
            if math.isfinite(t):
                # stay away from the ends so the bracket keeps shrinking
                return min(max(t, lo + 0.1 * (hi - lo)), hi - 0.1 * (hi - lo))
    return 0.5 * (lo + hi)


def _lbfgs(
    problem: _SoftmaxRegression,
    x0: torch.Tensor,
    *,
    max_iter: int,
    tol: float,
    history_size: int,
    ftol: float | None = None,
    c1: float = 1e-4,
    c2: float = 0.9,
    max_ls: int = 20,
    memory: _Memory | None = None,
) -> tuple[torch.Tensor, dict[str, Any], _Memory]:
    """Minimise a smooth function by L-BFGS with a weak-Wolfe line search.

    Nocedal & Wright, "Numerical Optimization", Alg. 7.5 with the compact product of
    :class:`_Memory`.  The line search looks for t with
    phi(t) <= phi(0) + c1 t phi'(0) and phi'(t) >= c2 phi'(0) (which keeps s.y > 0):
    it starts at t = 1 (t = 1 / ||g|| on a first step without ``memory``, where the
    scale is unknown), extrapolates by 4x while the slope is still steep, and
    otherwise shrinks the bracket by cubic interpolation.  ``memory`` (updated in place
    and returned) carries curvature pairs over from a related problem.

    Stops when max|g| <= tol (scipy's ``gtol``), when the relative decrease of f falls
    below ``ftol`` (default: the machine epsilon of x's dtype -- a float32 objective
    cannot resolve smaller decreases, and line searches below it only chase rounding
    noise), when ``max_ls`` trial steps find no acceptable point, or after ``max_iter``
    iterations.
    """
    if ftol is None:
        ftol = torch.finfo(x0.dtype).eps
    f, g = problem.start(x0.clone())
    x = problem.theta
    mem = memory if memory is not None else _Memory(history_size, x.numel(), x)
    n_trials, it, reason = 0, 0, "max_iter"
    while it < max_iter:
        if float(g.abs().max()) <= tol:
            reason = "gtol"
            break
        d = mem.apply(g).neg_()
        gtd = float(g @ d)
        if not gtd < 0:  # not a descent direction (rounding): restart from steepest descent
            mem = _Memory(history_size, x.numel(), x)
            d = g.neg()
            gtd = float(g @ d)
        phi = problem.line(d)
        t = 1.0 if mem.order else 1.0 / math.sqrt(-gtd)
        lo = (0.0, f, gtd)
        hi: tuple[float, float, float] | None = None
        accepted: float | None = None
        for _ in range(max_ls):
            f_t, g_t = phi(t)
            n_trials += 1
            if not (f_t <= f + c1 * t * gtd) or f_t >= lo[1]:
                hi = (t, f_t, g_t)
            elif g_t < c2 * gtd:
                lo = (t, f_t, g_t)
                accepted = t  # Armijo holds: a usable step even if the search runs out
            else:
                accepted = t
                break
            t = 4.0 * lo[0] if hi is None else _cubic_step(*lo, *hi)
        else:
            if accepted is None:
                reason = "no_decrease"
                break
        x_new, f_new, g_new = problem.accept(accepted)
        s_vec = x_new - x
        y_vec = g_new - g
        # a strictly convex objective keeps s.y > 0; skip a pair rounding has spoiled
        if float(s_vec @ y_vec) > 1e-10 * float(y_vec @ y_vec):
            mem.push(s_vec, y_vec)
        it += 1
        decrease = f - f_new
        x, f, g = x_new, f_new, g_new
        if decrease <= ftol * max(abs(f), 1.0):
            reason = "ftol"
            break
    return x, {"iterations": it, "line_trials": n_trials, "stop": reason}, mem


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
        return _lbfgs(problem, init, max_iter=max_iter, tol=tol, history_size=history_size, memory=memory)


def _logits(theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    n_cls = theta.numel() // (x.shape[1] + 1)
    return torch.addmm(theta[x.shape[1] * n_cls :], x, theta[: x.shape[1] * n_cls].view(x.shape[1], n_cls))


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
) -> dict[str, Any]:
    """Linear probe: multinomial logistic regression on frozen, L2-normalised features.

    With features x_i / ||x_i|| and classes 0..C-1, the classifier (W in R^{d x C},
    b in R^C) minimises

        L(W, b) = (1/n) sum_i -log softmax(x_i W + b)_{y_i} + (lambda / 2) ||W||_F^2,

    the bias unpenalised.  This is scikit-learn's ``LogisticRegression`` objective
    ``(1/2)||W||^2 + C sum_i CE_i`` divided by C*n, i.e. ``C = 1 / (lambda * n)``.
    It is solved by full-batch L-BFGS in torch (:func:`_lbfgs`: ``history_size`` pairs
    in compact form, weak-Wolfe line search, start at W = 0, b = 0), stopping when
    max|grad| <= ``tol`` (scipy's ``gtol``, scikit-learn's ``tol``), when an iteration
    lowers L by less than the relative rounding of ``dtype``, or after ``max_iter``
    iterations.  Features are centred after normalisation (``center``): an exact
    reparametrisation, ``(x - mu) W + (b + mu W) = x W + b``, that only speeds L-BFGS.

    lambda is chosen on a seeded stratified split of the train split
    (:func:`stratified_split`): the grid is walked from the largest to the smallest
    value, each fit warm-started from the previous solution (the regularisation path),
    and the value with the highest validation top-1 wins (ties: the larger lambda).
    The final classifier is refit on the whole train split with that lambda,
    warm-started from its validation-stage solution; the convex objective has one
    minimum, so the warm starts change the time, not the answer.  With ``patience``
    = p the walk stops after p values in a row whose validation top-1 is below the best
    so far (``None``: the whole grid); it always stops at a perfect validation score,
    which no smaller lambda could beat.

    The paper (App. D) trains its linear head with SGD instead (lr 0.1, no weight
    decay, 200 epochs); the choice here is deterministic and much cheaper on cached
    features.  Deterministic on CPU for a fixed thread count.

    Returns ``{"top1", "top5", "weight_decay", "settings"}``: test top-1 and top-k
    accuracy with k = min(5, C) as fractions, the chosen lambda, and every setting,
    including the validation top-1 of each grid value tried (``val_top1``) and each
    fit's iterations, line-search trials and stopping reason (``fits``).  Test labels absent
    from the train split count as errors (``settings["n_test_unseen_class"]``).
    """
    tx = _features(train_x, "train_x")
    vx = _features(test_x, "test_x")
    _check_same_dim(tx, vx, "train_x", "test_x")
    ty = _labels(train_y, tx.shape[0], "train_y", "train_x")
    vy = _labels(test_y, vx.shape[0], "test_y", "test_x")
    classes = _classes(ty)
    wds = [float(w) for w in weight_decays]
    if not wds or any(not math.isfinite(w) or w <= 0 for w in wds):
        raise ValueError(f"weight_decays must be a non-empty list of positive numbers, got {list(weight_decays)!r}")
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
        theta, fits[repr(wd)], mem = _fit_logreg(x_fit, y_fit, wd, theta, max_iter, tol, history_size, mem)
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
    return {
        "top1": c1 / n_test,
        "top5": c5 / n_test,
        "weight_decay": wd_best,
        "settings": {
            "normalisation": "l2 per row",
            "model": "multinomial logistic regression, unpenalised bias",
            "objective": "mean cross-entropy + weight_decay/2 * ||W||_F^2 (sklearn C = 1/(weight_decay*n))",
            "optimiser": "full-batch L-BFGS (compact form), weak-Wolfe line search, init zeros",
            "centred": bool(center),
            "dtype": str(dtype).replace("torch.", ""),
            "max_iter": max_iter,
            "tolerance": tol,
            "history_size": history_size,
            "weight_decay_grid": grid,
            "selection": "highest validation top-1 (ties: larger weight decay); grid walked from large "
            "to small with warm starts; refit on full train split warm-started",
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
    }


# --------------------------------------------------------------------------- kNN


def _policy_neighbours(sims: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k nearest per row, ordered by (similarity desc, train index asc).

    ``torch.topk`` returns the right k-th value but leaves the order of equal values,
    and which of them make the cut, unspecified; this puts every row under the stated
    rule so the result does not depend on the kernel.
    """
    vals, idx = sims.topk(k, dim=1, largest=True, sorted=True)
    # reorder candidates: index ascending first, then a stable descending sort by value
    idx, by_idx = idx.sort(dim=1)
    vals = vals.gather(1, by_idx)
    vals, by_val = vals.sort(dim=1, descending=True, stable=True)
    idx = idx.gather(1, by_val)
    # rows where values equal to the k-th straddle the cut: redo them with a full stable sort
    straddle = (sims >= vals[:, -1:]).sum(dim=1) > k
    if bool(straddle.any()):
        rows = straddle.nonzero().squeeze(1)
        full_vals, full_idx = sims[rows].sort(dim=1, descending=True, stable=True)
        vals[rows] = full_vals[:, :k]
        idx[rows] = full_idx[:, :k]
    return vals, idx


def _knn_inputs(train_x, train_y, test_x, ks, temperature, block_size):
    tx = _features(train_x, "train_x")
    vx = _features(test_x, "test_x")
    _check_same_dim(tx, vx, "train_x", "test_x")
    ty = _labels(train_y, tx.shape[0], "train_y", "train_x")
    classes = _classes(ty)
    ks = [_positive_int(k, "each k") for k in ks]
    if not ks:
        raise ValueError("ks is empty; pass at least one k, e.g. ks=(20, 200)")
    try:
        t = float(temperature)
    except (TypeError, ValueError):
        t = math.nan
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"temperature must be a positive number, got {temperature!r}")
    block_size = _positive_int(block_size, "block_size")
    return tx, ty, vx, classes, ks, t, block_size


def _knn_core(tx, ty, vx, classes, ks, temperature, block_size) -> dict[int, np.ndarray]:
    n_train = tx.shape[0]
    eff = {k: min(k, n_train) for k in ks}
    k_max = max(eff.values())
    train = _normalise(tx)
    test = _normalise(vx)
    y_enc = torch.from_numpy(_encode(ty, classes))
    preds = {k: np.empty(vx.shape[0], dtype=np.int64) for k in ks}
    for start in range(0, vx.shape[0], block_size):
        blk = test[start : start + block_size]
        vals, idx = _policy_neighbours(blk @ train.T, k_max)
        weights = (vals.double() / temperature).exp()
        nbr_y = y_enc[idx]
        for k in ks:
            kk = eff[k]
            votes = torch.zeros(blk.shape[0], classes.size, dtype=torch.float64)
            # scatter_add_ adds along each row in neighbour order, so two classes with the
            # same multiset of similarities get bit-identical votes and tie exactly
            votes.scatter_add_(1, nbr_y[:, :kk], weights[:, :kk])
            # argmax returns the first maximal index: equal votes go to the smallest class
            preds[k][start : start + blk.shape[0]] = classes[votes.argmax(dim=1).numpy()]
    return preds


def knn_predict(
    train_x: Any,
    train_y: Any,
    test_x: Any,
    *,
    ks: Sequence[int] = (20, 200),
    temperature: float = 0.07,
    block_size: int = 1024,
) -> dict[int, np.ndarray]:
    """Weighted cosine kNN predictions (InstDisc vote), one label array per requested k.

    With unit rows, s_ij = <x_test_i, x_train_j> (float32).  N_k(i) is the k train rows
    of largest s_ij (ties: smaller train index first; k clipped to n_train).  The vote
    of class c is

        score_c(i) = sum_{j in N_k(i), y_j = c} exp(s_ij / T),

    summed in float64 over neighbours in (similarity desc, index asc) order, and the
    prediction is argmax_c score_c(i), equal votes going to the smallest class label
    (Wu et al. 2018, "Unsupervised Feature Learning via Non-Parametric Instance
    Discrimination"; solo-learn's ``WeightedKNNClassifier``).  Test rows are processed
    ``block_size`` at a time, so memory is O(block_size * n_train), never n_test x n_train.
    """
    return _knn_core(*_knn_inputs(train_x, train_y, test_x, ks, temperature, block_size))


def knn_probe(
    train_x: Any,
    train_y: Any,
    test_x: Any,
    test_y: Any,
    *,
    ks: Sequence[int] = (20, 200),
    temperature: float = 0.07,
    block_size: int = 1024,
) -> dict[str, Any]:
    """Top-1 accuracy of the weighted cosine kNN classifier of :func:`knn_predict`.

    Returns ``{"k20": {"top1": ...}, "k200": {"top1": ...}, "settings": {...}}`` (one
    entry per requested k, named by the requested k; the k actually used, after clipping
    to n_train, is in ``settings["k_effective"]``).  Defaults follow solo-learn / InstDisc:
    k = 20 and 200, T = 0.07.  Test labels absent from the train split count as errors.
    """
    tx, ty, vx, classes, ks, temperature, block_size = _knn_inputs(
        train_x, train_y, test_x, ks, temperature, block_size
    )
    vy = _labels(test_y, vx.shape[0], "test_y", "test_x")
    preds = _knn_core(tx, ty, vx, classes, ks, temperature, block_size)
    n_train = tx.shape[0]
    out: dict[str, Any] = {f"k{k}": {"top1": float((preds[k] == vy).mean())} for k in ks}
    out["settings"] = {
        "normalisation": "l2 per row",
        "similarity": "cosine, float32",
        "vote": "sum of exp(sim / T) per class over the k nearest (InstDisc / solo-learn)",
        "ties": "neighbours: smaller train index first; votes: smallest class label",
        "ks": ks,
        "k_effective": {f"k{k}": min(k, n_train) for k in ks},
        "temperature": temperature,
        "n_train": int(n_train),
        "n_test": int(vx.shape[0]),
        "classes": int(classes.size),
    }
    return out


# --------------------------------------------------------------------------- retrieval


def retrieval_ranks(u: Any, v: Any, *, block_size: int = 1024) -> np.ndarray:
    """Rank of the positive v_i among all v for each query u_i, by cosine similarity.

        rank_i = #{j : s_ij >= s_ii},   s_ij = <u_i, v_j> / (||u_i|| ||v_j||),

    so rank 1 means v_i is strictly the most similar, and any other v_j tied with v_i
    is counted ahead of it (pessimistic ties).  s_ii is taken from the same float32
    block product as the s_ij it is compared with.  Streamed over blocks of
    ``block_size`` queries: memory O(block_size * n), never n x n.
    """
    uu = _features(u, "u")
    vv = _features(v, "v")
    if uu.shape != vv.shape:
        raise ValueError(
            f"u has shape {tuple(uu.shape)} but v has {tuple(vv.shape)}; the two views must pair row by row"
        )
    block_size = _positive_int(block_size, "block_size")
    uu, vv = _normalise(uu), _normalise(vv)
    n = uu.shape[0]
    ranks = np.empty(n, dtype=np.int64)
    for start in range(0, n, block_size):
        stop = min(start + block_size, n)
        sims = uu[start:stop] @ vv.T
        pos = sims[torch.arange(stop - start), torch.arange(start, stop)]
        ranks[start:stop] = (sims >= pos[:, None]).sum(dim=1).numpy()
    return ranks


def retrieval(u: Any, v: Any, *, ks: Sequence[int] = (1, 5, 10), block_size: int = 1024) -> dict[str, Any]:
    """Label-free retrieval of the positive: Recall@k and the median rank.

    With rank_i from :func:`retrieval_ranks` (pessimistic ties),
    ``recall_at_k = (1/n) #{i : rank_i <= k}`` and ``median_rank = median_i rank_i``.
    For two augmented views U, V of the same n images, Recall@1 is the fraction of
    images whose other view is their nearest neighbour among all n second views.
    Returns ``{"recall_at_1", "recall_at_5", "recall_at_10", "median_rank", "settings"}``
    (one ``recall_at_k`` per requested k).
    """
    ks = [_positive_int(k, "each k") for k in ks]
    ranks = retrieval_ranks(u, v, block_size=block_size)
    out: dict[str, Any] = {f"recall_at_{k}": float((ranks <= k).mean()) for k in ks}
    out["median_rank"] = float(np.median(ranks))
    out["settings"] = {
        "normalisation": "l2 per row",
        "similarity": "cosine, float32",
        "rank": "1 + #{j != i : s_ij >= s_ii} (ties counted against the positive)",
        "ks": ks,
        "n": int(ranks.size),
    }
    return out


# --------------------------------------------------------------------------- clustering


def clustering(x: Any, y: Any, *, seed: int = 0, n_init: int = 10, max_iter: int = 300) -> dict[str, Any]:
    """k-means on L2-normalised features with k = number of classes; NMI and ARI.

    scikit-learn's ``KMeans(n_clusters=C, init="k-means++", n_init=n_init,
    random_state=seed)`` on x_i / ||x_i|| (float64), scored against the labels with
    ``normalized_mutual_info_score`` (arithmetic mean normalisation) and
    ``adjusted_rand_score``.  NMI lies in [0, 1]; ARI is at most 1 and near 0 for
    chance (it can be slightly negative).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

    xx = _features(x, "x", dtype=torch.float64)
    yy = _labels(y, xx.shape[0], "y", "x")
    classes = _classes(yy)
    n_init = _positive_int(n_init, "n_init")
    max_iter = _positive_int(max_iter, "max_iter")
    if xx.shape[0] < classes.size:
        raise ValueError(f"x has {xx.shape[0]} rows but there are {classes.size} classes; k-means needs n >= k")
    feats = _normalise(xx).numpy()
    km = KMeans(n_clusters=int(classes.size), init="k-means++", n_init=n_init, max_iter=max_iter, random_state=seed)
    pred = km.fit_predict(feats)
    return {
        "nmi": float(normalized_mutual_info_score(yy, pred)),
        "ari": float(adjusted_rand_score(yy, pred)),
        "settings": {
            "normalisation": "l2 per row",
            "algorithm": "sklearn KMeans, k-means++ init, Lloyd",
            "k": int(classes.size),
            "n_init": n_init,
            "max_iter": max_iter,
            "seed": int(seed),
            "nmi_average": "arithmetic",
            "n": int(xx.shape[0]),
        },
    }
