"""benchmarks/bench_pairs.py cannot rot: a tiny run prints the ratio beside the CPU it was
measured on (model, the ISA ATen dispatches to, the L2 size: issue 38 item 2). No timing is
asserted: speed is the benchmark's to show, not a test's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_pairs.py"


@pytest.mark.slow
def test_a_tiny_run_prints_the_ratio_beside_the_cpu():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "600", "--skip-100k", "--skip-peer",
         "--repeats", "1"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    isa = torch.backends.cpu.get_cpu_capability()
    header = done.stdout.splitlines()[0]
    assert re.search(rf"; CPU: .+, {isa}, L2 (\d+[KMG]|\?)$", header), header
    (ratio,) = [line for line in done.stdout.splitlines() if "RATIO statistics" in line]
    assert ratio.endswith(header.split("; CPU: ")[1])
