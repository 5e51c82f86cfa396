#!/usr/bin/env python3
"""Choose the VRN weight λ on the validation split of a tuning sweep, then test it on fresh seeds.

The second and third steps of the VRN weight study (:mod:`cl_diag.orchestration.tune` has the
protocol and the reasons). From the repository root, after the tuning sweep::

    python tools/select_vrn.py reports/vrn-weight/tuning --test-seeds 4,5,6,7,8 \\
        --out reports/vrn-weight

prints λ* of each setting (the VRN weight with the highest validation linear top-1, mean over
the tuning seeds), writes ``OUT/selection.json`` and ``OUT/selection.md``, then trains and
analyses λ = 0 and λ* on the test seeds (each λ* run recording its tuning) into ``OUT/test/``
and compares them into ``OUT/comparison/``, where the claims about a tuned λ are tested
on the test split. ``--select-only`` stops after the selection. A rerun skips complete runs.
Errors (no validation accuracy, an unbalanced grid, a test seed the tuning used) exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of seeds"
        ) from None
    if len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
        raise argparse.ArgumentTypeError(f"{text!r}: give distinct seeds ≥ 0")
    return seeds


def _parallel(text: str) -> int:
    """``--parallel``, checked by the bounds ``cl-diag sweep --parallel`` declares."""
    from cl_diag.options import SWEEP, OptionError

    try:
        return SWEEP["parallel"].normalise(int(text))
    except (ValueError, OptionError) as exc:
        raise argparse.ArgumentTypeError(
            str(exc) if isinstance(exc, OptionError) else f"{text!r} is not a whole number"
        ) from None


def main(argv: list[str] | None = None) -> int:
    from cl_diag.errors import UserError
    from cl_diag.io.atomic import atomic_write_text
    from cl_diag.orchestration.tune import (
        check_test_seeds,
        load_tuning,
        run_test_stage,
        select_vrn,
    )

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tuning", type=Path, help="the --out folder of the tuning sweep")
    parser.add_argument("--out", type=Path, required=True, help="the study folder")
    parser.add_argument(
        "--test-seeds", type=_seeds, default=None, help="fresh seeds of the test stage: 4,5,6"
    )
    parser.add_argument(
        "--select-only", action="store_true", help="write the selection; train nothing"
    )
    parser.add_argument(
        "--parallel",
        type=_parallel,
        default=1,
        help="test runs trained at once, each in its own process (cl-diag sweep --parallel)",
    )
    args = parser.parse_args(argv)
    try:
        selection = select_vrn(load_tuning(args.tuning))
        if not args.select_only:
            # refused before anything is written: no selection without a test stage it can run
            if args.test_seeds is None:
                raise UserError("Give --test-seeds (fresh seeds, e.g. 4,5,6,7,8) or --select-only.")
            check_test_seeds(selection, args.test_seeds)
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out / "selection.json", selection.json_text())
        atomic_write_text(args.out / "selection.md", selection.markdown())
        for setting in selection.settings:
            print(f"{setting.label}: λ* = {setting.selected:g}")
        print(f"selection: {args.out / 'selection.md'}")
        if args.select_only or args.test_seeds is None:
            return 0
        report = run_test_stage(
            args.tuning,
            selection,
            args.test_seeds,
            args.out,
            parallel=args.parallel,
            on_sweep=lambda command: print(command, flush=True),
        )
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
