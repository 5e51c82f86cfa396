"""Full-batch L-BFGS in compact form with a weak-Wolfe line search (the linear probe's solver).

Nocedal & Wright, "Numerical Optimization", Alg. 7.5, with the compact product of Byrd,
Nocedal & Schnabel (1994) in :class:`_Memory`; the objective comes as a
:class:`LineSearchProblem`, whose line search may be cheaper than a full evaluation. Why not
``torch.optim.LBFGS``: on the probe's problems it takes 1.5-1.8x the time, since it runs a
forward and a backward product per line-search trial (here trials are free: logits are affine
along the direction) and restarts its memory at each weight decay of the grid
(:meth:`_Memory.shift_penalty` carries the curvature pairs over); docs/implementation.md has
``benchmarks/bench_linear_probe.py``'s figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import scipy.linalg
import torch


class LineSearchProblem(Protocol):
    """What :func:`_lbfgs` needs of an objective f(theta) (the linear probe's is
    ``linear._SoftmaxRegression``): the current point, its value and gradient, and the
    one-dimensional restriction phi(t) = f(theta + t d) along a search direction."""

    theta: torch.Tensor

    def start(self, theta: torch.Tensor) -> tuple[float, torch.Tensor]:
        """Make theta the current point; return f(theta) and its gradient."""
        ...

    def line(self, direction: torch.Tensor) -> Callable[[float], tuple[float, float]]:
        """phi(t) and phi'(t) along ``direction`` from the current point."""
        ...

    def accept(self, t: float) -> tuple[torch.Tensor, float, torch.Tensor]:
        """Move to theta + t d; return the new point, its value and its gradient."""
        ...


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

    def copy(self) -> _Memory:
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
    problem: LineSearchProblem,
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
