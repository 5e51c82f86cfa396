"""How close the analysis of one checkpoint comes to itself in other environments.

Training amplifies last-bit differences until a re-run is a new replicate; analysis does not: it
encodes a fixed sample of images once with fixed weights and sums in float64. This script
analyses one checkpoint with the same options in several environments of this machine, each in
a fresh process (ATEN_CPU_CAPABILITY is read once, when torch starts):

* ``default`` -- the machine as it is (torch's CPU capability, its threads);
* ``isa=default`` -- ATEN_CPU_CAPABILITY=default: torch's scalar (non-vectorised) kernels;
* ``threads=1`` -- OMP_NUM_THREADS=1;
* ``isa=default,threads=1`` -- both;

and prints, for each against ``default``, over every number the reports print (the pair
statistics, geometry, collapse diagnostics and probes of every layer): how many are exactly
equal, the largest relative difference |a − b| / |a|, and the largest difference in units of
the statistic's own sampling error over the analysed images (what ``cl-diag reproduce`` allows a
single analysis; cl_diag.report.reproduction.sampling_error).

    python benchmarks/analysis_environments.py runs/digits-batch-study/batch-size=64_vrn=30_seed=1/last.pt \\
        --probe probes/digits-study.toml
"""  # noqa: E501 (a command line)

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from cl_diag.report.reproduction import EXACT, check_reproduction
from cl_diag.result import load

VARIANTS = {
    "default": {},
    "isa=default": {"ATEN_CPU_CAPABILITY": "default"},
    "threads=1": {"OMP_NUM_THREADS": "1"},
    "isa=default,threads=1": {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"},
}


def analyse(checkpoint: Path, options: list[str], out: Path, variables: dict[str, str]) -> Path:
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY",)}
    env.pop("OMP_NUM_THREADS", None)
    env.update(variables)
    subprocess.run(
        [sys.executable, "-m", "cl_diag", "analyze", str(checkpoint), *options, "--out", str(out)],
        env=env,
        check=True,
        capture_output=True,
    )
    return out / "result.json"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--probe", default=None, help="probe suite of the analysis")
    args = ap.parse_args(argv)
    options = ["--quiet"] + (["--probe", args.probe] if args.probe else [])
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            name: load(analyse(args.checkpoint, options, Path(tmp) / str(i), variables))
            for i, (name, variables) in enumerate(VARIANTS.items())
        }
    base = results["default"]
    print(
        f"{args.checkpoint}: default environment {base.environment.cpu.get('aten_capability')}"
        f" with {base.environment.threads.get('intra_op')} threads"
        if base.environment is not None
        else str(args.checkpoint)
    )
    for name, result in results.items():
        if name == "default":
            continue
        rep = check_reproduction([("run", base)], [result])
        checks = [c for c in rep.checks if c.original is not None and c.reproduction is not None]
        exact = sum(1 for c in checks if c.status == EXACT)
        relative = [
            abs(c.reproduction - c.original) / abs(c.original)
            for c in checks
            if c.original not in (0.0, None) and c.reproduction is not None
        ]
        in_se = [
            abs(c.difference) / c.se
            for c in checks
            if c.difference is not None and c.se and math.isfinite(c.se)
        ]
        worst = max(
            (c for c in checks if c.original and c.reproduction is not None),
            key=lambda c: abs((c.reproduction or 0) - (c.original or 0)) / abs(c.original or 1),
        )
        print(
            f"{name:22s} exact {exact}/{len(checks)}; largest relative difference "
            f"{max(relative, default=0.0):.2g} ({worst.quantity}); largest |Δ| / sampling error "
            f"{max(in_se, default=0.0):.2g}; outcome {rep.outcome}"
        )


if __name__ == "__main__":
    main()
