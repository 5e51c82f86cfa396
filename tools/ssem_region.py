#!/usr/bin/env python3
"""Map where the SSEM is the optimum of the ``supcl`` loss (variant B) by free optimisation,
and write the evidence docs/ssem.md cites (docs/ssem-region.csv). Run from the repository root::

    nice -n 5 python tools/ssem_region.py            # rewrite docs/ssem-region.csv (minutes)
    python tools/ssem_region.py --out /tmp/g.csv     # elsewhere

For each point (m, n, p, tau, alpha) of the grid G it records the closed forms
(cl_diag.measurement.theory): alpha_s (:func:`view_split_threshold`), alpha_c, the SSEM's
optimal loss, the split-view family's optimum (loss, beta, delta), and the lowest loss free
optimisation reaches (:func:`supcl_free_optimum`, d = m n p, ``--starts`` seeded starts).
tests/test_supcl_theory.py reads the file: inside the region (alpha >= alpha_s) the free
optimum equals the SSEM's loss within EPSILON; outside it, it equals the split-view optimum,
which lies below the SSEM's.

G: m, n in {2, 3, 4}, p = 2, tau in {0.1, 0.2, 0.5}; p = 3 at m, n in {2, 3}, tau in
{0.2, 0.5}; at each, alpha in {0, alpha_s - 0.02, (alpha_s + alpha_c)/2, alpha_c + 0.02,
0.5, 1} within [0, 1]; plus issue 23's three counterexamples (4, 3, 0.2, 0.15),
(3, 4, 0.2, 0.1) and (10, 10, 0.15, 0) (the last with one start: d = 200).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Iterator
from pathlib import Path

from cl_diag.io.atomic import atomic_write_text
from cl_diag.measurement.ssem import (
    collapse_threshold,
    split_ssem_optimum,
    ssem_loss,
    ssem_optimum,
    supcl_free_optimum,
    view_split_threshold,
)

OUT = Path("docs") / "ssem-region.csv"
COLUMNS = (
    "m",
    "n",
    "p",
    "tau",
    "alpha",
    "alpha_s",
    "alpha_c",
    "in_region",
    "ssem_loss",
    "split_loss",
    "split_beta",
    "split_delta",
    "free_loss",
    "starts",
)
COUNTEREXAMPLES = ((4, 3, 2, 0.2, 0.15, 3), (3, 4, 2, 0.2, 0.1, 3), (10, 10, 2, 0.15, 0.0, 1))


def grid(starts: int) -> Iterator[tuple[int, int, int, float, float, int]]:
    """(m, n, p, tau, alpha, starts) of G, in a fixed order."""
    settings = [(m, n, 2, tau) for m in (2, 3, 4) for n in (2, 3, 4) for tau in (0.1, 0.2, 0.5)]
    settings += [(m, n, 3, tau) for m in (2, 3) for n in (2, 3) for tau in (0.2, 0.5)]
    for m, n, p, tau in settings:
        a_s = view_split_threshold(tau, m, n, p)
        a_c = collapse_threshold(tau, m, n, p)
        alphas = (0.0, a_s - 0.02, 0.5 * (a_s + a_c), a_c + 0.02, 0.5, 1.0)
        seen: list[float] = []
        for alpha in alphas:
            # exact, not rounded: at tau = 0.1 the collapse window alpha_s..alpha_c can be
            # 1e-8 wide
            if 0.0 <= alpha <= 1.0 and alpha not in seen:
                seen.append(alpha)
                yield m, n, p, tau, alpha, starts
    yield from COUNTEREXAMPLES


def row(m: int, n: int, p: int, tau: float, alpha: float, starts: int) -> list[str]:
    a_s = view_split_threshold(tau, m, n, p)
    ssem = ssem_loss(ssem_optimum(alpha, tau, m, n, p).beta, alpha, tau, m, n, p)
    split = split_ssem_optimum(alpha, tau, m, n, p)
    free = supcl_free_optimum(alpha, tau, m, n, p, starts=starts)
    return [
        str(m),
        str(n),
        str(p),
        f"{tau:g}",
        repr(alpha),  # read back exactly (the window can be 1e-8 wide)
        f"{a_s:.9f}",
        f"{collapse_threshold(tau, m, n, p):.9f}",
        str(alpha >= a_s).lower(),
        f"{ssem:.9f}",
        f"{split.loss:.9f}",
        f"{split.beta:.6f}",
        f"{split.delta:.6f}",
        f"{free.loss:.9f}",
        str(starts),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the CSV to write ({OUT})")
    parser.add_argument("--starts", type=int, default=2, help="free-optimisation starts a point")
    args = parser.parse_args(argv)
    if args.starts < 1:
        print("--starts must be at least 1", file=sys.stderr)
        return 2
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    points = list(grid(args.starts))
    for k, point in enumerate(points, 1):
        writer.writerow(row(*point))
        print(f"{k}/{len(points)} {point}", file=sys.stderr, flush=True)
    atomic_write_text(args.out, buffer.getvalue())
    print(f"wrote {args.out}: {len(points)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
