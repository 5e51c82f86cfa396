"""The simplex-to-simplex embedding model (SSEM) of supervised contrastive learning with a
self-supervised share (the ``supcl`` loss; the SSEM paper, paper-notes 11.3), apart from the ICML
paper's closed forms in :mod:`cl_diag.measurement.theory`, whose ``ssem_panel`` puts these beside
a run. Pure Python/numpy: the class-collapse threshold alpha_c and the optimum beta* with its
predicted s_w, s_b and within-class variance for both published variants (B: self excluded
everywhere, the ``supcl`` loss; A: the self pair kept) (:func:`collapse_threshold`,
:func:`ssem_optimum`); the split-view family that bounds where the SSEM is the optimum
(:func:`view_split_threshold`, alpha_s); and the balanced batch loss optimised freely
(:func:`supcl_free_optimum`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from cl_diag.measurement.argcheck import check_count
from cl_diag.result import Ssem

__all__ = [
    "SSEM_VARIANTS",
    "SSEM_VARIANT_TEXT",
    "FreeOptimum",
    "SSEMOptimum",
    "SplitOptimum",
    "collapse_threshold",
    "split_ssem_embedding",
    "split_ssem_loss",
    "split_ssem_optimum",
    "split_ssem_similarities",
    "ssem_alpha_split",
    "ssem_embedding",
    "ssem_loss",
    "ssem_optimum",
    "ssem_other_variant",
    "ssem_similarities",
    "supcl_balanced_loss",
    "supcl_free_optimum",
    "view_split_threshold",
]

#: SupCon-style rows of the two published codes (paper-notes 11.3): same-instance views in the
#: denominator, k_self = p - 1 (variant B, the ``supcl`` loss: self excluded everywhere) or
#: k_self = p (variant A: the self pair stays in the denominator and is an L_self positive)
SSEM_VARIANTS = ("B", "A")


def _check_ssem(tau: float, m: int, n: int, p: int, variant: str) -> tuple[float, int, int, int]:
    tau = float(tau)
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"tau must be a finite number > 0, got {tau!r}")
    if variant not in SSEM_VARIANTS:
        raise ValueError(f"variant must be one of {SSEM_VARIANTS}, got {variant!r}")
    return tau, check_count(m, "m"), check_count(n, "n"), check_count(p, "p")


def _k_self(p: int, variant: str) -> int:
    return p - 1 if variant == "B" else p


def ssem_similarities(beta: float, m: int, n: int) -> tuple[float, float]:
    """(s_w, s_b) of the SSEM at beta in [0, 1] (paper-notes 11.3).

    m classes of n instances: class means mu_c form a simplex ETF (mu.mu' = -1/(m-1)), each
    class's offsets r_{c,i} a simplex ETF (r.r' = -1/(n-1)) orthogonal to every mean and to
    the other classes' offsets, and z_{c,i} = sqrt(beta) mu_c + sqrt(1 - beta) r_{c,i} for
    every view (needs d >= mn - 1). Then

        s_w = (n beta - 1) / (n - 1)    same class, different instance
        s_b = -beta / (m - 1)           different classes

    the within-class variance is 1 - beta, the total variance 1, and
    1 + (n - 1) s_w + n (m - 1) s_b = 0. beta = 1 is class collapse, beta = (m-1)/(mn-1)
    the instance-level simplex ETF.
    """
    m, n = check_count(m, "m"), check_count(n, "n")
    beta = float(beta)
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must lie in [0, 1], got {beta!r}")
    return (n * beta - 1.0) / (n - 1), -beta / (m - 1)


def ssem_embedding(beta: float, m: int, n: int) -> np.ndarray:
    """The SSEM at beta as (mn, mn) float64 unit rows, instance c*n + i of class c (paper-notes
    11.3), built from the standard basis e_{c,i} of R^{mn}: class means
    mu_c = sqrt(m/(m-1)) sqrt(n) (f_c - mean_c' f_c') with centroids f_c = mean_i e_{c,i}
    (a simplex ETF), offsets r_{c,i} = sqrt(n/(n-1)) (e_{c,i} - f_c) (a simplex ETF inside each
    class, orthogonal to every mean and to the other classes), and
    z_{c,i} = sqrt(beta) mu_c + sqrt(1 - beta) r_{c,i}. Use it as both views."""
    m, n = check_count(m, "m"), check_count(n, "n")
    ssem_similarities(beta, m, n)  # checks beta
    e = np.eye(m * n).reshape(m, n, m * n)
    f = e.mean(axis=1)
    mu = math.sqrt(m / (m - 1)) * math.sqrt(n) * (f - f.mean(axis=0))
    r = math.sqrt(n / (n - 1)) * (e - f[:, None, :])
    z = math.sqrt(beta) * mu[:, None, :] + math.sqrt(1.0 - beta) * r
    return z.reshape(m * n, m * n)


def ssem_loss(
    beta: float, alpha: float, tau: float, m: int, n: int, p: int = 2, *, variant: str = "B"
) -> float:
    """The ``supcl`` loss of a balanced batch (m classes x n instances x p views) on the SSEM:

        L(beta) = log D(beta) - (alpha + (1 - alpha) s_w) / tau,
        D(beta) = k_self e^{1/tau} + (n-1) p e^{s_w/tau} + (m-1) n p e^{s_b/tau},

    with k_self = p - 1 (variant B, the ``supcl`` loss) or p (variant A); every anchor has the
    same row, so this is the batch mean. Convex in beta. Evaluated as log-sum-exp."""
    tau, m, n, p = _check_ssem(tau, m, n, p, variant)
    s_w, s_b = ssem_similarities(beta, m, n)
    logs = [
        math.log(_k_self(p, variant)) + 1.0 / tau if _k_self(p, variant) else -math.inf,
        math.log((n - 1) * p) + s_w / tau,
        math.log((m - 1) * n * p) + s_b / tau,
    ]
    top = max(logs)
    log_d = top + math.log(sum(math.exp(x - top) for x in logs))
    return log_d - (float(alpha) + (1.0 - float(alpha)) * s_w) / tau


def collapse_threshold(tau: float, m: int, n: int, p: int = 2, *, variant: str = "B") -> float:
    """alpha_c(tau; m, n, p): the ``supcl`` optimum on the SSEM collapses every class
    (beta* = 1) iff alpha <= alpha_c (paper-notes 11.3, [inferred], checked by free
    optimisation in tests/test_supcl_theory.py):

        alpha_c = 1 - (n-1) p (1 - rho) / (k_self + (n-1) p + (m-1) n p rho),
        rho = exp(-m / ((m-1) tau)),

    the alpha at which dL/dbeta vanishes at beta = 1. tau -> 0 gives
    k_self / (k_self + (n-1) p); tau -> inf gives 1 (every alpha < 1 collapses).
    """
    tau, m, n, p = _check_ssem(tau, m, n, p, variant)
    rho = math.exp(-m / ((m - 1) * tau))
    k = _k_self(p, variant)
    return 1.0 - (n - 1) * p * (1.0 - rho) / (k + (n - 1) * p + (m - 1) * n * p * rho)


class SSEMOptimum(NamedTuple):
    regime: str  # "collapse" (beta* = 1) or "interior"
    beta: float  # beta* in [0, 1]
    s_w: float  # predicted same-class, different-instance similarity
    s_b: float  # predicted between-class similarity
    within_class_variance: float  # 1 - beta*
    alpha_c: float  # the collapse threshold at these tau, m, n, p


def _ssem_slope_sign(
    beta: float, alpha: float, tau: float, m: int, n: int, p: int, k: int
) -> float:
    """A positive multiple of dL/dbeta on the SSEM (the same sign):

        dL/dbeta = (n p / tau) (e^{s_w/tau} - e^{s_b/tau}) / D - (1 - alpha) n / ((n-1) tau),

    times (n - 1) tau D e^{-1/tau} / n, so that every exponential is e^{(s - 1)/tau} <= 1 and
    nothing overflows at small tau."""
    s_w, s_b = ssem_similarities(beta, m, n)
    e_w = math.exp((s_w - 1.0) / tau)
    e_b = math.exp((s_b - 1.0) / tau)
    d = k + (n - 1) * p * e_w + (m - 1) * n * p * e_b
    return (n - 1) * p * (e_w - e_b) - (1.0 - alpha) * d


def ssem_optimum(
    alpha: float, tau: float, m: int, n: int, p: int = 2, *, variant: str = "B"
) -> SSEMOptimum:
    """beta* = argmin_{beta in [0, 1]} :func:`ssem_loss`, with its predicted s_w, s_b and
    within-class variance 1 - beta*.

    L is convex in beta, so its derivative is increasing: beta* = 1 (class collapse) when the
    derivative is <= 0 at 1 (alpha <= alpha_c), else the root of the derivative, found by
    bisection (robust at any tau: see :func:`_ssem_slope_sign`). The interior stationarity
    condition (paper-notes 11.3) is

        alpha p (n-1) e^{s_w/tau} = (1-alpha) k_self e^{1/tau}
                                    + p e^{s_b/tau} [(n-1) + (1-alpha)(m-1) n];

    at alpha = 1 it gives s_w = s_b, the instance-level ETF beta* = (m-1)/(mn-1).
    """
    tau, m, n, p = _check_ssem(tau, m, n, p, variant)
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    k = _k_self(p, variant)
    alpha_c = collapse_threshold(tau, m, n, p, variant=variant)

    def slope(beta: float) -> float:
        return _ssem_slope_sign(beta, alpha, tau, m, n, p, k)

    if slope(1.0) <= 0.0:
        beta, regime = 1.0, "collapse"
    elif slope(0.0) >= 0.0:
        beta, regime = 0.0, "interior"
    else:
        lo, hi = 0.0, 1.0
        for _ in range(200):  # halves the bracket to the float64 resolution of [0, 1]
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            if slope(mid) > 0.0:
                hi = mid
            else:
                lo = mid
        beta, regime = 0.5 * (lo + hi), "interior"
    s_w, s_b = ssem_similarities(beta, m, n)
    return SSEMOptimum(regime, beta, s_w, s_b, 1.0 - beta, alpha_c)


# ------------------------------------------- where the SSEM is the optimum: the split-view family


def view_split_threshold(tau: float, m: int, n: int, p: int = 2) -> float:
    """alpha_s(tau; m, n, p): below it the SSEM is *not* the optimum of the ``supcl`` loss
    (variant B); at and above it the SSEM's optimum is the optimum of the split-view family
    (:func:`split_ssem_loss`), which holds it (docs/ssem.md, derived there)::

        alpha_s = (p - 1) (1 - m n p rho) / (n p - 1 + (m - 1) n p rho),
        rho = exp(-m / ((m - 1) tau)).

    Variant B keeps a same-instance view in every denominator but never makes it an L_sup
    positive, so at small alpha the views of an instance gain by parting (delta > 0):
    collapse (beta* = 1) is the optimum only for alpha_s <= alpha <= alpha_c, an interior
    SSEM optimum (alpha > alpha_c) always passes the test, and alpha_c - alpha_s
    = rho ((m-1) n p + (n-1) p + (p-1) m n p) / (n p - 1 + (m-1) n p rho) > 0. alpha_s <= 0
    (every alpha in the region) iff m n p rho >= 1, i.e. tau >= m / ((m-1) log(m n p)).
    Sufficiency against every configuration is established numerically (free optimisation,
    :func:`supcl_free_optimum`; the grid in docs/ssem.md), not proved.
    """
    tau, m, n, p = _check_ssem(tau, m, n, p, "B")
    rho = math.exp(-m / ((m - 1) * tau))
    return (p - 1) * (1.0 - m * n * p * rho) / (n * p - 1 + (m - 1) * n * p * rho)


#: the SSEM variants in words: which rows each keeps (paper-notes 11.3)
SSEM_VARIANT_TEXT = {
    "B": "self excluded from every denominator: the supcl loss, the authors' ImageNet code",
    "A": "self pair kept in the denominator and as an L_self positive: the authors' "
    "CIFAR/synthetic code",
}


def ssem_other_variant(ssem: Ssem) -> tuple[str, SSEMOptimum] | None:
    """The other variant's optimum beside a recorded SSEM block's (variant B's beside A's and
    A's beside B's), recomputed from its alpha, tau, m, n and p: how much the prediction
    depends on which rows the loss keeps (at (m, n, p, tau) = (10, 10, 2, 0.3) alpha_c is
    0.2508 under B and 0.2815 under A). None when the block lacks them."""
    alpha, tau, m, n, p = ssem.alpha, ssem.tau, ssem.m, ssem.n, ssem.p
    if alpha is None or tau is None or m is None or n is None or p is None:
        return None
    other = "A" if (ssem.variant or "B") == "B" else "B"
    return other, ssem_optimum(alpha, tau, m, n, p, variant=other)


def ssem_alpha_split(ssem: Ssem) -> float | None:
    """alpha_s of a recorded SSEM block, recomputed from its tau, m, n and p
    (:func:`view_split_threshold`), so that results written before the panel recorded
    ``alpha_split`` are judged the same way; None when the block lacks them."""
    if ssem.tau is None or ssem.m is None or ssem.n is None or ssem.p is None:
        return None
    return view_split_threshold(ssem.tau, ssem.m, ssem.n, ssem.p)


def split_ssem_similarities(
    beta: float, delta: float, m: int, n: int, p: int = 2
) -> tuple[float, float, float]:
    """(s_o, s_w, s_b) of the split-view family at beta, delta >= 0, beta + delta <= 1
    (gamma = 1 - beta - delta)::

        z_{c,i,k} = sqrt(beta) mu_c + sqrt(gamma) r_{c,i} + sqrt(delta) q_{c,i,k}

    with the SSEM's class means mu_c and offsets r_{c,i} (:func:`ssem_similarities`) and,
    per instance, a simplex ETF of p view offsets q_{c,i,k} (q.q' = -1/(p-1)) orthogonal to
    everything else (needs d >= m n p - 1). Then

        s_o = beta + gamma - delta / (p - 1)     the other views of the same instance
        s_w = beta - gamma / (n - 1)             same class, another instance
        s_b = -beta / (m - 1)                    another class

    delta = 0 is the SSEM at beta (s_o = 1)."""
    m, n, p = check_count(m, "m"), check_count(n, "n"), check_count(p, "p")
    beta, delta = float(beta), float(delta)
    if not (beta >= 0.0 and delta >= 0.0 and beta + delta <= 1.0 + 1e-15):
        raise ValueError(
            f"beta and delta must be >= 0 with beta + delta <= 1, got {beta!r}, {delta!r}"
        )
    gamma = max(0.0, 1.0 - beta - delta)
    return beta + gamma - delta / (p - 1), beta - gamma / (n - 1), -beta / (m - 1)


def split_ssem_loss(
    beta: float, delta: float, alpha: float, tau: float, m: int, n: int, p: int = 2
) -> float:
    """The ``supcl`` loss (variant B) of the balanced batch on the split-view family
    (:func:`split_ssem_similarities`); every anchor has the same row, so with
    P = (p-1) e^{s_o/tau} + (n-1) p e^{s_w/tau} + (m-1) n p e^{s_b/tau}

        L(beta, delta) = log P - (alpha s_o + (1 - alpha) s_w) / tau,

    convex in (beta, gamma, delta) (a log-sum-exp of linear functions minus a linear one).
    delta = 0 gives :func:`ssem_loss`."""
    tau, m, n, p = _check_ssem(tau, m, n, p, "B")
    s_o, s_w, s_b = split_ssem_similarities(beta, delta, m, n, p)
    logs = [
        math.log(p - 1) + s_o / tau,
        math.log((n - 1) * p) + s_w / tau,
        math.log((m - 1) * n * p) + s_b / tau,
    ]
    top = max(logs)
    log_d = top + math.log(sum(math.exp(x - top) for x in logs))
    return log_d - (float(alpha) * s_o + (1.0 - float(alpha)) * s_w) / tau


def split_ssem_embedding(beta: float, delta: float, m: int, n: int, p: int = 2) -> np.ndarray:
    """The split-view family at (beta, delta) as (p, m n, m n p) float64 unit rows: view k of
    instance c*n + i of class c (:func:`split_ssem_similarities`). Built from the standard
    basis e_{c,i,k} of R^{mnp}: instance centroids g_{c,i} = mean_k e_{c,i,k}, scaled by
    sqrt(p), carry the SSEM at beta / (1 - delta) (:func:`ssem_embedding`), and
    q_{c,i,k} = sqrt(p/(p-1)) (e_{c,i,k} - g_{c,i})."""
    split_ssem_similarities(beta, delta, m, n, p)  # checks the arguments
    common = 1.0 - float(delta)
    base = ssem_embedding(min(1.0, beta / common) if common > 0 else 0.0, m, n)
    e = np.eye(m * n * p).reshape(m * n, p, m * n * p)
    g = e.mean(axis=1)  # (mn, mnp)
    lifted = base @ (math.sqrt(p) * g)  # the SSEM, isometrically in R^{mnp}
    q = math.sqrt(p / (p - 1)) * (e - g[:, None, :])  # (mn, p, mnp)
    z = math.sqrt(common) * lifted[:, None, :] + math.sqrt(float(delta)) * q
    return np.ascontiguousarray(z.transpose(1, 0, 2))


class SplitOptimum(NamedTuple):
    beta: float  # weight of the class means
    gamma: float  # weight of the instance offsets within a class
    delta: float  # weight of the view offsets within an instance (0: the SSEM)
    loss: float  # the supcl loss there
    s_o: float  # same-instance similarity
    s_w: float  # same class, another instance
    s_b: float  # another class


def split_ssem_optimum(alpha: float, tau: float, m: int, n: int, p: int = 2) -> SplitOptimum:
    """The minimum of :func:`split_ssem_loss` over the triangle beta, delta >= 0,
    beta + delta <= 1: nested bounded scalar minimisation (the loss is jointly convex, so its
    partial minimum over beta is convex in delta); a point within 1e-12 of the SSEM's optimal
    loss counts as the SSEM's optimum. Below :func:`view_split_threshold` it lies below the
    SSEM's optimum (delta* > 0); at and above it, delta* = 0 and it is the SSEM's."""
    from scipy.optimize import minimize_scalar

    tau, m, n, p = _check_ssem(tau, m, n, p, "B")
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")

    def best_beta(delta: float) -> tuple[float, float]:
        if delta >= 1.0:
            return 0.0, split_ssem_loss(0.0, 1.0, alpha, tau, m, n, p)
        r = minimize_scalar(
            lambda b: split_ssem_loss(b, delta, alpha, tau, m, n, p),
            bounds=(0.0, 1.0 - delta),
            method="bounded",
            options={"xatol": 1e-12},
        )
        ends = [(float(r.x), float(r.fun)), (0.0, split_ssem_loss(0.0, delta, alpha, tau, m, n, p))]
        ends.append((1.0 - delta, split_ssem_loss(1.0 - delta, delta, alpha, tau, m, n, p)))
        return min(ends, key=lambda bf: bf[1])

    r = minimize_scalar(
        lambda dl: best_beta(dl)[1], bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-12}
    )
    candidates = [float(r.x), 0.0, 1.0]
    delta = min(candidates, key=lambda dl: best_beta(dl)[1])
    beta, loss = best_beta(delta)
    # on the SSEM's edge (delta = 0) and at ties within the search's rounding (1e-12), the
    # SSEM's own optimum (exact by bisection)
    ssem = ssem_optimum(alpha, tau, m, n, p)
    ssem_value = ssem_loss(ssem.beta, alpha, tau, m, n, p)
    if delta == 0.0 or ssem_value <= loss + 1e-12:
        beta, delta, loss = ssem.beta, 0.0, ssem_value
    s_o, s_w, s_b = split_ssem_similarities(beta, delta, m, n, p)
    return SplitOptimum(beta, max(0.0, 1.0 - beta - delta), delta, loss, s_o, s_w, s_b)


class FreeOptimum(NamedTuple):
    loss: float  # the lowest supcl loss the starts reached
    embedding: np.ndarray  # (p, m n, d) unit rows at it: view k of instance c*n + i
    losses: tuple[float, ...]  # each start's final loss, in start order


def supcl_balanced_loss(
    z: np.ndarray, alpha: float, tau: float, n: int
) -> tuple[float, np.ndarray]:
    """The ``supcl`` loss (variant B) of p views z (p, m n, d) of a balanced batch whose
    instance c*n + i has class c, and its gradient in z, in float64 numpy (independent of the
    torch loss in cl_diag.losses.supcl, which tests/test_supcl_theory.py checks it against).

    With G = Z Z^T / tau over the p m n rows (the diagonal excluded) and per-row weights
    W = alpha S / |S| + (1 - alpha) P / |P| (S: the other views of the instance, P: the views
    of the other instances of the class), L = mean_a [logsumexp_{j != a} G_aj - sum_k W_ak G_ak]
    and dL/dZ = (A + A^T) Z / tau with A = (softmax(G) - W) / (p m n)."""
    p, mn, d = z.shape
    inst = np.tile(np.arange(mn), p)
    same_inst = inst[:, None] == inst[None, :]
    same_class = (inst[:, None] // n) == (inst[None, :] // n)
    eye = np.eye(p * mn, dtype=bool)
    own = same_inst & ~eye
    sup = same_class & ~same_inst
    w = alpha * own / own.sum(1, keepdims=True) + (1.0 - alpha) * sup / sup.sum(1, keepdims=True)
    flat = z.reshape(p * mn, d)
    g = flat @ flat.T / tau
    g[eye] = -np.inf
    top = g.max(axis=1, keepdims=True)
    e = np.exp(g - top)
    total = e.sum(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(total[:, 0])
    loss = float(np.mean(lse - (w * np.where(eye, 0.0, g)).sum(axis=1)))
    a = (e / total - w) / (p * mn)
    grad = (a + a.T) @ flat / tau
    return loss, grad.reshape(p, mn, d)


def supcl_free_optimum(
    alpha: float,
    tau: float,
    m: int,
    n: int,
    p: int = 2,
    *,
    d: int | None = None,
    starts: int = 3,
    seed: int = 0,
) -> FreeOptimum:
    """Minimise the ``supcl`` loss (variant B) of a balanced batch over free unit vectors:
    m n instances x p views in R^d (default d = m n p: every configuration of the m n p
    points fits), float64, L-BFGS on unnormalised vectors X with z = X / ||X|| (the gradient
    projected through the normalisation), from ``starts`` Gaussian starts seeded
    ``seed``, ``seed + 1``, ...; the lowest end wins. A numerical check of the closed forms:
    an upper bound on the true minimum, equal to it when a start reaches the global basin."""
    from scipy.optimize import minimize

    tau, m, n, p = _check_ssem(tau, m, n, p, "B")
    alpha = float(alpha)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha!r}")
    d = m * n * p if d is None else check_count(d, "d", 1)
    shape = (p, m * n, d)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        raw = x.reshape(shape)
        norms = np.linalg.norm(raw, axis=2, keepdims=True)
        z = raw / norms
        loss, grad = supcl_balanced_loss(z, alpha, tau, n)
        tangent = grad - z * (grad * z).sum(axis=2, keepdims=True)
        return loss, (tangent / norms).ravel()

    ends = []
    for start in range(check_count(starts, "starts", 1)):
        x0 = np.random.default_rng(seed + start).standard_normal(math.prod(shape))
        r = minimize(
            objective,
            x0,
            jac=True,
            method="L-BFGS-B",
            # tight enough that a converged start is within ~1e-10 of its minimum's loss
            options={"maxiter": 20000, "maxfun": 40000, "gtol": 1e-9, "ftol": 1e-14},
        )
        raw = r.x.reshape(shape)
        ends.append((float(r.fun), raw / np.linalg.norm(raw, axis=2, keepdims=True)))
    best = min(ends, key=lambda e: e[0])
    return FreeOptimum(best[0], best[1], tuple(e[0] for e in ends))
